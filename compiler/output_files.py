"""Writing a command's output files with one-line errors: checked before the work (writable, no
two options naming the same file), then written atomically (runtime.output_file). The CLI, the zoo
and inspect write through these."""
from __future__ import annotations

import os
from pathlib import Path

from onnx_dml_lowering.ir import DmlLowerError


def write_file(path: str, what: str, write) -> None:
    """`write(temp)` writes the file at a temporary name beside `path`, renamed over it once whole."""
    from onnx_dml_lowering.runtime.output_file import write_output
    write_output(path, what, write)


def write_json(path: str, what: str, data) -> None:
    """A --json document, strict RFC 8259: NaN / Infinity / -Infinity are the strings "NaN",
    "Infinity", "-Infinity" (ir.display.json_safe); written atomically."""
    import json

    from onnx_dml_lowering.ir.display import json_safe
    from onnx_dml_lowering.runtime.output_file import write_text
    write_text(path, what, json.dumps(json_safe(data), indent=1, allow_nan=False))


def save_npz_file(path: str, arrays, what: str) -> None:
    from onnx_dml_lowering.runtime.npz import save_npz
    save_npz(path, arrays, what)


def load_npz_file(path: str) -> dict:
    from onnx_dml_lowering.runtime.npz import load_npz
    return load_npz(path, "inputs file")


def write_text(path: str, what: str, text: str) -> None:
    """A text report, written atomically."""
    from onnx_dml_lowering.runtime.output_file import write_text as write
    write(path, what, text)


def check_writable(option: str, path: "str | None") -> None:
    """An output file the run would fail to write is found before the run, in one line."""
    if not path:
        return
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        why = "it is a directory"
    elif folder.exists() and not folder.is_dir():
        why = f"{str(folder)!r} is a file, not a folder"
    elif not folder.is_dir():
        why = f"folder {str(folder)!r} does not exist"
    elif target.exists() and not os.access(target, os.W_OK):
        why = "the file is not writable"
    elif not target.exists() and not os.access(folder, os.W_OK | os.X_OK):
        why = f"folder {str(folder)!r} is not writable"
    else:
        return
    raise DmlLowerError(f"{option} {path!r}: cannot write there: {why}")


def check_outputs(*options: "tuple[str, str | None]") -> None:
    """Every output file of a command, (option, path) pairs, checked before any work: each one
    writable, and no two naming the same file (one would silently replace the other)."""
    seen: "dict[str, str]" = {}
    for option, path in options:
        if not path:
            continue
        check_writable(option, path)
        key = os.path.normcase(os.path.realpath(path))
        if key in seen:
            raise DmlLowerError(f"{seen[key]} and {option} both write {path!r}: give each its own file")
        seen[key] = option
