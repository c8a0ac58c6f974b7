"""DML_TENSOR_DATA_TYPE with DirectML's numeric values, and its ONNX / numpy mappings.

The ONNX TensorProto numbers are written out here so that `ir` never imports onnx.
"""
from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

from .errors import DmlLowerError


class DataType(enum.IntEnum):
    UNKNOWN = 0
    FLOAT32 = 1
    FLOAT16 = 2
    UINT32 = 3
    UINT16 = 4
    UINT8 = 5
    INT32 = 6
    INT16 = 7
    INT8 = 8
    FLOAT64 = 9
    UINT64 = 10
    INT64 = 11
    UINT4 = 12
    INT4 = 13

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def size(self) -> int:
        """Element size in bytes (4-bit types report 1; use `bits` for packing)."""
        return max(1, _BITS[self] // 8)

    @property
    def is_float(self) -> bool:
        return self in (DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64)

    @property
    def numpy(self) -> np.dtype:
        if self not in _TO_NUMPY:
            raise DmlLowerError(f"data type {self.name} has no numpy equivalent")
        return np.dtype(_TO_NUMPY[self])


_BITS = {
    DataType.UNKNOWN: 0, DataType.FLOAT32: 32, DataType.FLOAT16: 16, DataType.UINT32: 32,
    DataType.UINT16: 16, DataType.UINT8: 8, DataType.INT32: 32, DataType.INT16: 16,
    DataType.INT8: 8, DataType.FLOAT64: 64, DataType.UINT64: 64, DataType.INT64: 64,
    DataType.UINT4: 4, DataType.INT4: 4,
}

_TO_NUMPY = {
    DataType.FLOAT32: np.float32, DataType.FLOAT16: np.float16, DataType.FLOAT64: np.float64,
    DataType.UINT32: np.uint32, DataType.UINT16: np.uint16, DataType.UINT8: np.uint8,
    DataType.UINT64: np.uint64, DataType.INT32: np.int32, DataType.INT16: np.int16,
    DataType.INT8: np.int8, DataType.INT64: np.int64,
}

# ONNX TensorProto.DataType numbers (onnx/onnx.proto).
ONNX_FLOAT, ONNX_UINT8, ONNX_INT8, ONNX_UINT16, ONNX_INT16, ONNX_INT32, ONNX_INT64 = 1, 2, 3, 4, 5, 6, 7
ONNX_STRING, ONNX_BOOL, ONNX_FLOAT16, ONNX_DOUBLE, ONNX_UINT32, ONNX_UINT64 = 8, 9, 10, 11, 12, 13
ONNX_BFLOAT16 = 16

ONNX_TYPE_NAMES = {
    1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz",
    19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1", 24: "float8e8m0",
}

# bool travels as UINT8 (0/1): DirectML has no BOOL.
_ONNX_TO_DML = {
    ONNX_FLOAT: DataType.FLOAT32, ONNX_UINT8: DataType.UINT8, ONNX_INT8: DataType.INT8,
    ONNX_UINT16: DataType.UINT16, ONNX_INT16: DataType.INT16, ONNX_INT32: DataType.INT32,
    ONNX_INT64: DataType.INT64, ONNX_BOOL: DataType.UINT8, ONNX_FLOAT16: DataType.FLOAT16,
    ONNX_DOUBLE: DataType.FLOAT64, ONNX_UINT32: DataType.UINT32, ONNX_UINT64: DataType.UINT64,
    21: DataType.UINT4, 22: DataType.INT4,
}

_ONNX_TO_NUMPY = {
    ONNX_FLOAT: np.float32, ONNX_UINT8: np.uint8, ONNX_INT8: np.int8, ONNX_UINT16: np.uint16,
    ONNX_INT16: np.int16, ONNX_INT32: np.int32, ONNX_INT64: np.int64, ONNX_BOOL: np.bool_,
    ONNX_FLOAT16: np.float16, ONNX_DOUBLE: np.float64, ONNX_UINT32: np.uint32,
    ONNX_UINT64: np.uint64,
    # ml_dtypes (a dependency of onnx) gives numpy the types feeds and onnx.reference use for these.
    ONNX_BFLOAT16: ml_dtypes.bfloat16, 17: ml_dtypes.float8_e4m3fn, 18: ml_dtypes.float8_e4m3fnuz,
    19: ml_dtypes.float8_e5m2, 20: ml_dtypes.float8_e5m2fnuz,
    # One element per byte in numpy; ONNX's TensorProto and onnxruntime pack two 4-bit ones.
    21: ml_dtypes.uint4, 22: ml_dtypes.int4, 23: ml_dtypes.float4_e2m1fn, 24: ml_dtypes.float8_e8m0fnu,
}

# The twelve ONNX numeric types plus bool that NonZero / EyeLike tests sweep.
ONNX_NUMERIC_AND_BOOL = (
    ONNX_FLOAT, ONNX_FLOAT16, ONNX_DOUBLE, ONNX_INT8, ONNX_INT16, ONNX_INT32, ONNX_INT64,
    ONNX_UINT8, ONNX_UINT16, ONNX_UINT32, ONNX_UINT64, ONNX_BOOL,
)


def onnx_type_name(onnx_type: int) -> str:
    return ONNX_TYPE_NAMES.get(onnx_type, f"type {onnx_type}")


def from_onnx(onnx_type: int) -> DataType | None:
    """The DirectML type that carries an ONNX type, or None when DirectML has none."""
    return _ONNX_TO_DML.get(onnx_type)


def dml_type(onnx_type: int) -> DataType:
    """from_onnx where a rule's check has already declined the types DirectML lacks."""
    dtype = _ONNX_TO_DML.get(onnx_type)
    if dtype is None:
        raise DmlLowerError(f"input type {onnx_type_name(onnx_type)} has no DirectML equivalent")
    return dtype


def to_onnx(dtype: DataType) -> int:
    """The ONNX type a DirectML type stands for (UINT8 maps back to uint8, not bool)."""
    for onnx_type, dml in _ONNX_TO_DML.items():
        if dml == dtype and onnx_type != ONNX_BOOL:
            return onnx_type
    raise DmlLowerError(f"data type {dtype.name} has no ONNX equivalent")


# The dtypes numpy (and onnxruntime's numpy binding) handle natively; the others here are
# ml_dtypes' (bfloat16, float8, 4-bit), which numpy stores as raw records.
NUMPY_NATIVE = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int8, np.int16, np.int32,
                                               np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_))


def onnx_to_numpy(onnx_type: int) -> np.dtype:
    if onnx_type not in _ONNX_TO_NUMPY:
        raise DmlLowerError(f"ONNX type {onnx_type_name(onnx_type)} has no numpy equivalent here")
    return np.dtype(_ONNX_TO_NUMPY[onnx_type])


def numpy_to_onnx(dtype: np.dtype) -> int:
    dtype = np.dtype(dtype)
    for onnx_type, np_type in _ONNX_TO_NUMPY.items():
        if np.dtype(np_type) == dtype:
            return onnx_type
    raise DmlLowerError(f"numpy dtype {dtype} has no ONNX equivalent here")
