"""Writing a command's output files with one-line errors: checked before the work (writable by the
rules of runtime.output_target, no two options naming the same file), then written by
runtime.output_file, the one writer. The CLI, the zoo and inspect write through these."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import os

from onnx_dml_lowering.ir import DmlLowerError


if TYPE_CHECKING:
    import numpy as np

    from onnx_dml_lowering.runtime.output_target import OutputTarget


def write_file(path: str, what: str, write: Callable[[str], object], lead: str = "") -> None:
    """`write(temp)` writes the whole file at a temporary name; then it lands at `path`
    (runtime.output_file), and the command says so on stdout (`said`)."""
    from onnx_dml_lowering.runtime.output_file import write_output
    write_output(path, what, write)
    said(path, lead)


def write_json(path: str, what: str, data: Any, lead: str = "") -> None:
    """A --json document, strict RFC 8259: NaN / Infinity / -Infinity are the strings "NaN",
    "Infinity", "-Infinity" (ir.display.json_safe); written by the one writer, then said."""
    import json

    from onnx_dml_lowering.ir.display import json_safe
    from onnx_dml_lowering.runtime.output_file import write_text
    write_text(path, what, json.dumps(json_safe(data), indent=1, allow_nan=False))
    said(path, lead)


def said(path: str, lead: str = "") -> None:
    """The line every report file a command writes ends its stdout with: `wrote PATH`, the path
    on one line whatever it holds (`lead`: a blank line before it, where the command wants one)."""
    from onnx_dml_lowering.ir.display import display
    print(f"{lead}wrote {display(path)}")


def save_npz_file(path: str, arrays: "Mapping[str, np.ndarray]", what: str) -> None:
    from onnx_dml_lowering.runtime.npz import save_npz
    save_npz(path, arrays, what)


def load_npz_file(path: str) -> dict:
    from onnx_dml_lowering.runtime.npz import load_npz
    return load_npz(path, "inputs file")


def write_text(path: str, what: str, text: str, lead: "str | None" = "") -> None:
    """A text report, written by the one writer, then said (`lead` None: the caller says what it
    wrote in its own words, as Model Explorer's files do)."""
    from onnx_dml_lowering.runtime.output_file import write_text as write
    write(path, what, text)
    if lead is not None:
        said(path, lead)


def check_writable(option: str, path: "str | None") -> None:
    """An output file the run would fail to write is found before the run, in one line (the rules
    of runtime.output_target, which the writer applies again when it writes)."""
    if path:
        _target(option, path)


def _target(option: str, path: str) -> OutputTarget:
    from onnx_dml_lowering.runtime.output_target import Unwritable, resolve
    try:
        return resolve(path)
    except Unwritable as exc:
        raise DmlLowerError(f"{option} {path!r}: cannot write there: {exc}") from None


def check_outputs(*options: "tuple[str, str | None]", reads: "Sequence[tuple[str, str | None]]" = ()) -> None:
    """Every output file of a command, (option, path) pairs, checked before any work: each one
    writable, none of the files the command reads (`reads`: (what, path) pairs, the model first;
    the files read later, its external data, are refused by the writer), and no two naming the
    same file (one would silently replace the other). Several may name one device, FIFO or
    descriptor (`/dev/null`): each is written to it in turn."""
    from onnx_dml_lowering.runtime.input_files import note_path, refusal
    for what, path in reads:
        if path:
            note_path(path, f"{what} {path!r}")
    seen: "dict[str, str]" = {}
    for option, path in options:
        if not path:
            continue
        target = _target(option, path)
        if target.kind.in_place:
            continue
        why = refusal(target.info)
        if why is not None:
            raise DmlLowerError(f"{option} {path!r}: {why}")
        key = os.path.normcase(target.path)
        if key in seen:
            raise DmlLowerError(f"{seen[key]} and {option} both write {path!r}: give each its own file")
        seen[key] = option
