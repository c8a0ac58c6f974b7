"""Feeding onnxruntime and reading its results for every type a user can bring.

onnxruntime's Python binding refuses numpy arrays of ml_dtypes types (bfloat16, float8) and
cannot turn such results into numpy; those go through OrtValues with an explicit ONNX type and
are copied out of the result's memory bit for bit.
"""
from __future__ import annotations

import ctypes
from typing import Mapping, Sequence

import numpy as np

from onnx_dml_lowering.ir.dtypes import numpy_to_onnx, onnx_to_numpy

# dtype kind "V": ml_dtypes' extension types present themselves as void to numpy's kind test.
_NATIVE = {np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
                                 np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)}


def to_ort_value(value: np.ndarray):
    """An OrtValue over `value` (no copy for a contiguous CPU array of a type numpy knows)."""
    import onnxruntime as ort
    array = np.ascontiguousarray(value)
    if array.dtype in _NATIVE or array.dtype.kind in "OSU":
        return ort.OrtValue.ortvalue_from_numpy(array)
    raw = array.view(np.uint8 if array.dtype.itemsize == 1 else np.uint16)
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, onnx_element_type=numpy_to_onnx(array.dtype))


def _from_ort(value) -> np.ndarray:
    if not value.is_tensor():
        return value.numpy()
    try:
        return np.asarray(value.numpy())
    except Exception:      # a type numpy has no native dtype for: copy the bits into ml_dtypes'
        out = np.empty(value.shape(), onnx_to_numpy(value.element_type()))
        if out.nbytes:
            ctypes.memmove(out.ctypes.data, value.data_ptr(), out.nbytes)
        return out


def needs_ort_values(feeds: Mapping[str, np.ndarray]) -> bool:
    return any(isinstance(v, np.ndarray) and v.dtype not in _NATIVE and v.dtype.kind not in "OSU"
               for v in feeds.values())


def run_session(session, outputs: "Sequence[str] | None", feeds: Mapping[str, np.ndarray]) -> "list[np.ndarray]":
    """session.run that also takes and returns bfloat16 / float8 tensors (an onnx.reference
    evaluator is run as it is: it takes ml_dtypes arrays natively)."""
    if not hasattr(session, "run_with_ort_values"):
        return [np.asarray(r) for r in session.run(None if outputs is None else list(outputs), dict(feeds))]
    try:
        if not needs_ort_values(feeds):
            return [np.asarray(r) for r in session.run(None if outputs is None else list(outputs), dict(feeds))]
    except RuntimeError as exc:
        if "numpy" not in str(exc).lower():      # not a type the binding cannot convert
            raise
    names = list(outputs) if outputs is not None else [o.name for o in session.get_outputs()]
    values = {name: to_ort_value(np.asarray(value)) for name, value in feeds.items()}
    return [_from_ort(r) for r in session.run_with_ort_values(names, values)]
