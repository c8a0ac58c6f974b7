"""ir.dtypes: DML_TENSOR_DATA_TYPE values (DML_FACTS section 1), sizes, ONNX and numpy mappings."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_dml_lowering.ir import DataType, DmlLowerError
from onnx_dml_lowering.ir import dtypes
from onnx_dml_lowering.ir.dtypes import numpy_to_onnx, onnx_to_numpy

# DML_FACTS section 1, transcribed: name -> (numeric value, bits per element).
SPEC_TYPES = {
    "UNKNOWN": (0, None),
    "FLOAT32": (1, 32),
    "FLOAT16": (2, 16),
    "UINT32": (3, 32),
    "UINT16": (4, 16),
    "UINT8": (5, 8),
    "INT32": (6, 32),
    "INT16": (7, 16),
    "INT8": (8, 8),
    "FLOAT64": (9, 64),
    "UINT64": (10, 64),
    "INT64": (11, 64),
    "UINT4": (12, 4),
    "INT4": (13, 4),
}

# ONNX TensorProto type -> the DirectML type that carries it (None: DirectML has none).
ONNX_TO_DML = {
    TensorProto.FLOAT: "FLOAT32",
    TensorProto.UINT8: "UINT8",
    TensorProto.INT8: "INT8",
    TensorProto.UINT16: "UINT16",
    TensorProto.INT16: "INT16",
    TensorProto.INT32: "INT32",
    TensorProto.INT64: "INT64",
    TensorProto.STRING: None,
    TensorProto.BOOL: "UINT8",           # no BOOL in DirectML: travels as UINT8 0/1
    TensorProto.FLOAT16: "FLOAT16",
    TensorProto.DOUBLE: "FLOAT64",
    TensorProto.UINT32: "UINT32",
    TensorProto.UINT64: "UINT64",
    TensorProto.COMPLEX64: None,
    TensorProto.COMPLEX128: None,
    TensorProto.BFLOAT16: None,
    TensorProto.FLOAT8E4M3FN: None,
    TensorProto.FLOAT8E4M3FNUZ: None,
    TensorProto.FLOAT8E5M2: None,
    TensorProto.FLOAT8E5M2FNUZ: None,
    TensorProto.UINT4: "UINT4",
    TensorProto.INT4: "INT4",
}

NUMPY_OF = {
    "FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64,
    "UINT32": np.uint32, "UINT16": np.uint16, "UINT8": np.uint8, "UINT64": np.uint64,
    "INT32": np.int32, "INT16": np.int16, "INT8": np.int8, "INT64": np.int64,
}


def test_every_spec_type_has_its_directml_value():
    assert {t.name: int(t) for t in DataType} == {name: v for name, (v, _) in SPEC_TYPES.items()}


@pytest.mark.parametrize("name", sorted(SPEC_TYPES, key=lambda n: SPEC_TYPES[n][0]))
def test_value_lookup_both_ways(name):
    value = SPEC_TYPES[name][0]
    assert DataType(value).name == name
    assert DataType[name] == value


def test_there_is_no_bool_type():
    assert "BOOL" not in DataType.__members__
    with pytest.raises(ValueError):
        DataType(14)


@pytest.mark.parametrize("name", [n for n, (_, bits) in SPEC_TYPES.items() if bits])
def test_bits_per_element(name):
    assert DataType[name].bits == SPEC_TYPES[name][1]


@pytest.mark.parametrize("name", [n for n, (_, bits) in SPEC_TYPES.items() if bits and bits >= 8])
def test_size_in_bytes(name):
    assert DataType[name].size == SPEC_TYPES[name][1] // 8


@pytest.mark.parametrize("name", ["UINT4", "INT4"])
def test_four_bit_types_are_half_a_byte(name):
    assert DataType[name].bits == 4
    assert DataType[name].bits / 8 == 0.5


@pytest.mark.parametrize("name", sorted(SPEC_TYPES))
def test_is_float(name):
    assert DataType[name].is_float == (name in ("FLOAT16", "FLOAT32", "FLOAT64"))


@pytest.mark.parametrize("onnx_type", sorted(ONNX_TO_DML))
def test_from_onnx(onnx_type):
    expected = ONNX_TO_DML[onnx_type]
    got = dtypes.from_onnx(onnx_type)
    if expected is None:
        assert got is None
    else:
        assert got is DataType[expected]


def test_bool_travels_as_uint8_bfloat16_and_string_have_none():
    assert dtypes.from_onnx(TensorProto.BOOL) == DataType.UINT8
    assert dtypes.from_onnx(TensorProto.BFLOAT16) is None
    assert dtypes.from_onnx(TensorProto.STRING) is None
    assert dtypes.from_onnx(TensorProto.UNDEFINED) is None
    assert dtypes.from_onnx(999) is None


@pytest.mark.parametrize("name", [n for n in SPEC_TYPES if n != "UNKNOWN"])
def test_to_onnx_inverts_from_onnx_and_never_says_bool(name):
    onnx_type = dtypes.to_onnx(DataType[name])
    assert onnx_type != TensorProto.BOOL
    assert ONNX_TO_DML[onnx_type] == name
    assert dtypes.from_onnx(onnx_type) == DataType[name]


def test_uint8_maps_back_to_uint8_not_bool():
    assert dtypes.to_onnx(DataType.UINT8) == TensorProto.UINT8


def test_unknown_has_no_onnx_type():
    with pytest.raises(DmlLowerError, match="UNKNOWN"):
        dtypes.to_onnx(DataType.UNKNOWN)


@pytest.mark.parametrize("name", sorted(NUMPY_OF))
def test_numpy_mapping(name):
    dt = DataType[name]
    assert dt.numpy == np.dtype(NUMPY_OF[name])
    assert dt.numpy.itemsize * 8 == SPEC_TYPES[name][1]
    assert dt.numpy.itemsize == dt.size


@pytest.mark.parametrize("name", ["UNKNOWN", "UINT4", "INT4"])
def test_types_without_numpy_equivalent_raise(name):
    with pytest.raises(DmlLowerError, match=name):
        _ = DataType[name].numpy


ONNX_NUMPY_TYPES = [TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16,
                    TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL,
                    TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.UINT32, TensorProto.UINT64]


@pytest.mark.parametrize("onnx_type", ONNX_NUMPY_TYPES)
def test_onnx_numpy_mapping_agrees_with_onnx(onnx_type):
    expected = np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))
    assert dtypes.onnx_to_numpy(onnx_type) == expected
    assert dtypes.numpy_to_onnx(expected) == onnx_type


def test_bool_numpy_round_trip():
    assert dtypes.onnx_to_numpy(TensorProto.BOOL) == np.dtype(np.bool_)
    assert dtypes.numpy_to_onnx(np.bool_) == TensorProto.BOOL


def test_bfloat16_float8_and_4_bit_types_map_to_ml_dtypes():
    import ml_dtypes
    pairs = {TensorProto.BFLOAT16: ml_dtypes.bfloat16, TensorProto.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn,
             TensorProto.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz, TensorProto.FLOAT8E5M2: ml_dtypes.float8_e5m2,
             TensorProto.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz, TensorProto.INT4: ml_dtypes.int4,
             TensorProto.UINT4: ml_dtypes.uint4, TensorProto.FLOAT4E2M1: ml_dtypes.float4_e2m1fn,
             TensorProto.FLOAT8E8M0: ml_dtypes.float8_e8m0fnu}
    for onnx_type, np_type in pairs.items():
        assert onnx_to_numpy(onnx_type) == np.dtype(np_type)
        assert numpy_to_onnx(np.dtype(np_type)) == onnx_type


@pytest.mark.parametrize("onnx_type", [TensorProto.UINT2, TensorProto.STRING, TensorProto.COMPLEX64])
def test_onnx_types_without_numpy_here_raise(onnx_type):
    with pytest.raises(DmlLowerError):
        dtypes.onnx_to_numpy(onnx_type)


@pytest.mark.parametrize("np_type", [np.complex64, np.str_, np.object_])
def test_numpy_types_without_onnx_here_raise(np_type):
    with pytest.raises(DmlLowerError):
        dtypes.numpy_to_onnx(np_type)


def test_onnx_type_names_match_onnx():
    for onnx_type in ONNX_TO_DML:
        expected = helper.tensor_dtype_to_string(onnx_type).split(".")[-1].lower()
        assert dtypes.onnx_type_name(onnx_type) == expected
