"""Sequence values as the project carries them between engines, into the comparison and into saved
files: one tensor, the sequence's tensors stacked on a new first axis (what compare, the report and
the saved outputs read). Every engine's result goes through as_array, so all carry the same thing:
an empty sequence is an empty tensor of the element type the model declares (not numpy's float64),
and a sequence whose tensors differ in shape, which no one tensor holds, is one line naming it."""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.dtypes import onnx_to_numpy

# onnxruntime spells a sequence type seq(tensor(float)), onnx sequence(tensor(float))
_SEQUENCE_OF = re.compile(r"^seq(?:uence)?\(tensor\((\w+)\)\)$")


class RaggedSequence(DmlLowerError):
    """A sequence whose tensors differ in shape: the project compares sequences stacked, so it
    cannot carry this one (the engines evaluated it; nothing failed in them)."""


def element_dtype(type_text: "str | None") -> "np.dtype | None":
    """The numpy type of a sequence type's tensors ('seq(tensor(float))' -> float32), or None."""
    found = _SEQUENCE_OF.match(type_text or "")
    if found is None:
        return None
    import onnx
    try:
        return np.dtype(onnx_to_numpy(onnx.TensorProto.DataType.Value(found.group(1).upper())))
    except (ValueError, DmlLowerError):      # a type numpy has none for (string): numpy's own
        return np.dtype(object) if found.group(1) == "string" else None


def as_array(value: Any, name: str = "", type_text: "str | None" = None) -> np.ndarray:
    """An engine's result as the tensor the project carries; `type_text`: its declared type, which
    gives an empty sequence its element type."""
    if isinstance(value, (list, tuple)):
        if not value:
            return np.empty((0,), element_dtype(type_text) or np.float64)
        shapes = list(dict.fromkeys(tuple(np.shape(v)) for v in value))
        if len(shapes) > 1:
            shown = ", ".join(str(list(s)) for s in shapes[:4]) + (", ..." if len(shapes) > 4 else "")
            raise RaggedSequence(f"sequence {name or 'value'!r} holds tensors of different shapes ({shown}): "
                                 "sequences are compared stacked into one tensor, so one whose tensors differ "
                                 "in shape is not supported")
    return np.asarray(value)
