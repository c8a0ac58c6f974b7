"""Writing a command's output files with one-line errors: checked before the work (writable by the
rules of runtime.output_target, no two options naming the same file), then written by
runtime.output_file, the one writer. The CLI, the zoo and inspect write through these."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import os
from pathlib import Path

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
    of runtime.output_target, which the writer applies again when it writes). An empty path is
    given, and refused: it is no file, never the option left out."""
    if path is not None:
        _target(option, path)


def _target(option: str, path: str) -> OutputTarget:
    from onnx_dml_lowering.runtime.output_target import Unwritable, resolve
    try:
        return resolve(path)
    except Unwritable as exc:
        raise DmlLowerError(f"{option} {path!r}: cannot write there: {exc}") from None


# The `what` of a model in check_outputs' reads (cli/reads.files_read): its external data is read too.
MODEL_FILE = "model file"


def check_outputs(*options: "tuple[str, str | None]", reads: "Sequence[tuple[str, str | None]]" = ()) -> None:
    """Every output file of a command, (option, path) pairs, checked before any work: each one
    writable, none of the files the command reads (`reads`: (what, path) pairs; a MODEL_FILE's
    external data too, found where an output could be one of its files), by any route (a link,
    a /dev/fd/N open on it), and no two naming the same file (one would silently replace the other).
    Several may name one device, FIFO or descriptor (`/dev/null`): each is written to it in turn."""
    from onnx_dml_lowering.runtime.input_files import note_path, refusal
    for what, path in reads:
        if path:
            note_path(path, f"{what} {path!r}")
    targets = [(option, path, _target(option, path)) for option, path in options if path is not None]
    _note_external_data([path for what, path in reads if what == MODEL_FILE and path],
                        [path for _, path, target in targets if target.regular_files()])
    seen: "dict[str, str]" = {}
    for option, path, target in targets:
        for info in target.regular_files():     # by any route: a link, /dev/fd/N open on an input
            why = refusal(info)
            if why is not None:
                raise DmlLowerError(f"{option} {path!r}: {why}")
        if target.kind.in_place:
            continue
        key = os.path.normcase(target.path)
        if key in seen:
            raise DmlLowerError(f"{seen[key]} and {option} both write {path!r}: give each its own file")
        seen[key] = option


def _note_external_data(models: "Sequence[str]", outputs: "Sequence[str]") -> None:
    """The external data files of each model that could be one of the existing `outputs`, noted as
    read (runtime.input_files), so an output naming one is refused before the work, not when the
    writer comes to it after the report. External data lies inside the model's real folder
    (runtime.weights), so only a model whose folder holds an output is read for it, as stored
    (weights unread); a model that cannot be read is left to the loader to say why."""
    reals = [os.path.realpath(path) for path in outputs]
    candidates = [model for model in models
                  if any(os.path.commonpath([_folder(model), real]) == _folder(model) for real in reals)]
    if not candidates:
        return
    import onnx

    from onnx_dml_lowering.runtime.input_files import note_path
    from onnx_dml_lowering.runtime.weights import all_tensors

    from .frontend import load_stored
    for model in candidates:
        try:
            proto = load_stored(model)
        except (DmlLowerError, OSError, ValueError):
            continue
        for tensor in all_tensors(proto):
            location = {e.key: e.value for e in tensor.external_data}.get("location")
            if tensor.data_location == onnx.TensorProto.EXTERNAL and isinstance(location, str) and "\0" not in location:
                shown = os.path.join(str(Path(model).parent), location)      # as the loader names it
                note_path(shown, f"external data file {shown!r}")


def _folder(model: str) -> str:
    return os.path.realpath(os.path.dirname(model) or ".")
