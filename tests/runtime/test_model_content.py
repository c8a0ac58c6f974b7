"""runtime.model_content: a tensor's data is read as its type and shape say or refused in one line
naming the field, for every data type onnx defines; declared value types hold defined element
types and no negative dimension. The oracle is onnx itself: helper.make_tensor writes the typed
field of each type, numpy_helper.to_array reads it back to the value numpy_helper.from_array
stored as raw bytes."""
from __future__ import annotations

import re

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.model_content import (INT32_RANGES, TYPE_ATTRIBUTE_OPS, VALUE_FIELDS, check_tensor,
                                                     tensor_problem, value_field)

TYPES = [name for name, number in T.DataType.items() if number != T.UNDEFINED]


def _values(data_type: int, count: int) -> np.ndarray:
    """`count` values of the type, not all zero (strings as objects)."""
    if data_type == T.STRING:
        return np.array([f"s{i}".encode() for i in range(count)], dtype=object)
    dtype = h.tensor_dtype_to_np_dtype(data_type)
    if data_type == T.BOOL:
        return np.arange(count) % 2 == 1
    small = np.arange(count) % 3
    return (small + 1j * small).astype(dtype) if np.dtype(dtype).kind == "c" else small.astype(np.float32).astype(dtype)


def _typed(data_type: int, count: int) -> T:
    """The tensor as onnx writes it into its typed field (raw=False)."""
    return h.make_tensor("w", data_type, [count], _values(data_type, count), raw=False)


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("count", [1, 5, 8])
def test_onnx_s_own_tensors_of_every_type_are_accepted(name, count):
    """The typed field make_tensor writes and the raw bytes from_array writes both pass, and both
    read back (to_array) to the same value: the check's counts are onnx's."""
    data_type = getattr(T, name)
    typed = _typed(data_type, count)
    assert tensor_problem(typed) is None
    assert not typed.HasField("raw_data") and len(getattr(typed, value_field(data_type))) > 0
    expected = numpy_helper.to_array(typed)
    if data_type != T.STRING:
        raw = numpy_helper.from_array(expected, "w")
        assert raw.data_type == data_type and raw.HasField("raw_data")
        assert tensor_problem(raw) is None
        assert numpy_helper.to_array(raw).tobytes() == expected.tobytes()


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("change", [1, -1])
def test_a_typed_field_longer_or_shorter_than_the_shape_is_refused(name, change):
    """One entry too many or too few in the field onnx reads: one line naming the tensor and field
    (to_array raises on most, and reads a packed type's extra bytes as nothing)."""
    data_type = getattr(T, name)
    tensor = _typed(data_type, 8)
    field = getattr(tensor, value_field(data_type))
    held = len(field)
    if change > 0:
        field.append(field[0])
    else:
        del field[-1]
    with pytest.raises(DmlLowerError, match=rf"^m.onnx: tensor 'w' holds {held + change} values in "
                                            rf"{value_field(data_type)} \(and no raw_data\), but its type and shape "
                                            rf"{name} \[8\] take {held}$"):
        check_tensor(tensor, "m.onnx")


def test_the_trial_s_long_float_data_is_refused():
    """50 floats for [3, 4]: numpy_helper.to_array's ValueError was an internal error."""
    tensor = T(name="w", data_type=T.FLOAT, dims=[3, 4], float_data=[1.0] * 50)
    assert tensor_problem(tensor) == "holds 50 values in float_data (and no raw_data), but its type and shape FLOAT [3, 4] take 12"


@pytest.mark.parametrize("name", sorted(T.DataType.Name(t) for t in INT32_RANGES))
def test_int32_data_past_what_its_type_stores_is_refused(name):
    """The type's range (a bit pattern for the narrow floats, a packed byte for the 4- and 2-bit
    types) is accepted at both ends, refused one past either; to_array's reading wraps or masks
    what is past it, and onnxruntime refuses some ("data overflow")."""
    data_type = getattr(T, name)
    low, high = INT32_RANGES[data_type]
    tensor = _typed(data_type, 8)
    entries = len(tensor.int32_data)
    for good in (low, high):
        tensor.int32_data[entries - 1] = good
        assert tensor_problem(tensor) is None, good
    for bad in (low - 1, high + 1):
        tensor.int32_data[entries - 1] = bad
        assert tensor_problem(tensor) == (f"holds {bad} at int32_data[{entries - 1}], outside the {low}..{high} its "
                                          f"type {name} stores there")


def test_the_int32_ranges_are_what_the_types_hold():
    """Integer ranges from numpy; the floats' bit patterns from their widths."""
    for data_type in (T.INT8, T.UINT8, T.INT16, T.UINT16):
        info = np.iinfo(h.tensor_dtype_to_np_dtype(data_type))
        assert INT32_RANGES[data_type] == (info.min, info.max)
    for data_type in (T.FLOAT16, T.BFLOAT16, T.FLOAT8E4M3FN, T.FLOAT8E5M2, T.FLOAT6E2M3):
        bits = 8 * np.dtype(h.tensor_dtype_to_np_dtype(data_type)).itemsize if data_type != T.FLOAT6E2M3 else 6
        assert INT32_RANGES[data_type] == (0, (1 << bits) - 1)
    assert T.INT32 not in INT32_RANGES and INT32_RANGES[T.BOOL] == (0, 1)


def test_uint32_in_uint64_data_past_32_bits_is_refused():
    tensor = _typed(T.UINT32, 4)
    tensor.uint64_data[2] = 1 << 40
    assert tensor_problem(tensor) == f"holds {1 << 40} at uint64_data[2], outside the 0..4294967295 its type UINT32 stores there"
    tensor.uint64_data[2] = (1 << 32) - 1
    assert tensor_problem(tensor) is None


@pytest.mark.parametrize("data_type, shown", [(999, "999, which ONNX"), (T.UNDEFINED, "UNDEFINED (0)")])
def test_a_data_type_onnx_does_not_define_is_refused(data_type, shown):
    tensor = numpy_helper.from_array(np.ones(3, np.float32), "w")
    tensor.data_type = data_type
    with pytest.raises(DmlLowerError, match=rf"^m.onnx: tensor 'w' has data type {re.escape(shown)}"):
        check_tensor(tensor, "m.onnx")


@pytest.mark.parametrize("other", [f for f in VALUE_FIELDS if f != "float_data"])
def test_values_in_a_field_the_type_does_not_use_are_refused(other):
    """A float tensor holding its values in int64_data (say): onnx reads float_data."""
    tensor = T(name="w", data_type=T.FLOAT, dims=[2])
    getattr(tensor, other).extend([b"a", b"b"] if other == "string_data" else [1, 2])
    assert tensor_problem(tensor) == (f"holds 2 values in {other}, a field its type FLOAT does not use "
                                      "(onnx reads its values from float_data)")


@pytest.mark.parametrize("second", ["float_data", "external"])
def test_two_sources_of_values_are_refused(second):
    """raw_data and a typed field, or external data and a typed field: which counts is a guess."""
    tensor = numpy_helper.from_array(np.ones(2, np.float32), "w")
    if second == "external":
        tensor.ClearField("raw_data")
        tensor.data_location = T.EXTERNAL
    tensor.float_data.extend([5.0, 5.0])
    source = "raw_data" if second == "float_data" else "external data"
    assert tensor_problem(tensor) == (f"(FLOAT [2]) holds {source} and 2 values in float_data: its values belong "
                                      "in one of them (which one counts would be a guess)")


def test_a_segment_and_a_string_s_raw_data_are_refused():
    tensor = numpy_helper.from_array(np.ones(2, np.float32), "w")
    tensor.segment.begin, tensor.segment.end = 0, 2
    assert "segment" in tensor_problem(tensor)
    strings = T(name="s", data_type=T.STRING, dims=[1], raw_data=b"ab")
    assert tensor_problem(strings) == "(STRING [1]) holds raw_data: a string tensor's values are in string_data"


def test_the_type_attribute_operators_are_onnx_s():
    """Only these operators' TypeProto attributes are walked: the list is onnx's schemas'."""
    kinds = (onnx.defs.OpSchema.AttrType.TYPE_PROTO, onnx.defs.OpSchema.AttrType.TYPE_PROTOS)
    found = {s.name for s in onnx.defs.get_all_schemas_with_history() if any(a.type in kinds for a in s.attributes.values())}
    assert found == set(TYPE_ATTRIBUTE_OPS)
