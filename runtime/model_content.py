"""What a model declares, checked at load before anything reads it: every tensor's data type, shape
and values (the typed field onnx reads for its type, holding exactly the entries its shape takes,
each within what that type stores there) and every declared value type (an element type ONNX
defines; a negative declared size read as unknown).

onnx's checker leaves these to its readers: numpy_helper.to_array reshapes 50 floats into [3, 4]
with a ValueError, wraps a float16 bit pattern of 70000 that onnxruntime refuses ("data overflow"),
and shape inference raises on an element type of 999; the loader names the tensor or value and
the field instead. Lengths come from the fields' sizes (no value is decoded); values are read only
for the types whose entries are wider than what they store (int32_data of float16, int8, bool,
float8, the packed sub-byte types; uint64_data of uint32), as one numpy array each."""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np
import onnx
from onnx import TensorProto

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.lowering.onnx_graphs import all_graphs

# onnx's typed-data fields, in the order TensorProto declares them.
VALUE_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")

# Bits of one element of the sub-byte types onnx packs into bytes (raw_data, and int32_data for
# 4- and 2-bit types: one packed byte per entry); 6-bit floats take one int32_data entry each.
PACKED_BITS = {getattr(TensorProto, n): b for n, b in (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2),
                                                          ("UINT2", 2), ("FLOAT6E2M3", 6), ("FLOAT6E3M2", 6))
                if hasattr(TensorProto, n)}
_BYTE_PACKED = {t for t, bits in PACKED_BITS.items() if 8 % bits == 0}

_BYTE = (0, 0xFF)
_HALF = (0, 0xFFFF)
# (lowest, highest) value an entry of int32_data may hold, by type: the type's own range for the
# integers and bool, the unsigned bit pattern for the floats narrower than 32 bits (onnxruntime
# refuses any other with "data overflow"; numpy_helper wraps it silently), a packed byte for the
# 4- and 2-bit types. INT32 takes the whole field.
INT32_RANGES = {
    TensorProto.INT8: (-0x80, 0x7F), TensorProto.UINT8: _BYTE, TensorProto.INT16: (-0x8000, 0x7FFF),
    TensorProto.UINT16: _HALF, TensorProto.BOOL: (0, 1), TensorProto.FLOAT16: _HALF, TensorProto.BFLOAT16: _HALF,
    **{getattr(TensorProto, n): _BYTE for n in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                                                "FLOAT8E8M0") if hasattr(TensorProto, n)},
    **{t: (0, (1 << PACKED_BITS[t]) - 1 if t not in _BYTE_PACKED else 0xFF) for t in PACKED_BITS},
}

_DEFINED = frozenset(TensorProto.DataType.values()) - {TensorProto.UNDEFINED}


def type_name(data_type: int) -> str:
    """FLOAT, INT4, ... for a type onnx defines; the number for any other."""
    return TensorProto.DataType.Name(data_type) if data_type in _DEFINED else str(data_type)


def data_type_problem(data_type: int) -> "str | None":
    """Why `data_type` is no tensor element type ONNX defines (None: it is one)."""
    if data_type in _DEFINED:
        return None
    if data_type == TensorProto.UNDEFINED:
        return "UNDEFINED (0), which no tensor's values can have"
    return f"{data_type}, which ONNX {onnx.__version__} does not define"


def value_field(data_type: int) -> str:
    """The typed field onnx reads a tensor of a defined `data_type` from when it has no raw_data."""
    return str(onnx.helper.tensor_dtype_to_field(data_type))


def field_entries(data_type: int, count: int) -> int:
    """The entries of value_field(data_type) that `count` elements take: two a complex element,
    a packed byte per two 4-bit or four 2-bit elements, one otherwise."""
    if data_type in (TensorProto.COMPLEX64, TensorProto.COMPLEX128):
        return 2 * count
    if data_type in _BYTE_PACKED:
        per = 8 // PACKED_BITS[data_type]
        return -(-count // per)
    return count


def raw_bytes(data_type: int, count: int) -> "int | None":
    """The bytes of raw data `count` elements of `data_type` take (None: strings, or a type onnx
    does not define, have no raw bytes)."""
    if data_type in PACKED_BITS:
        return (count * PACKED_BITS[data_type] + 7) // 8
    if data_type not in _DEFINED or data_type == TensorProto.STRING:
        return None
    return count * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type)).itemsize


def _shown(tensor: TensorProto) -> str:
    return f"{type_name(tensor.data_type)} {list(tensor.dims)}"


def tensor_problem(tensor: TensorProto) -> "str | None":
    """Why the tensor's data cannot be read as its type and shape say, after "tensor 'w' " (None:
    it can). External data is its reader's to check (weights._external_region); only that it is
    the tensor's one source of values is checked here."""
    why = data_type_problem(tensor.data_type)
    if why is not None:
        return f"has data type {why}"
    # One ListFields: the fields set, raw_data's length included (reading a field alone costs as
    # much; protobuf copies raw_data for either, as any read of it does).
    fields = {field.name: value for field, value in tensor.ListFields()}
    if any(d < 0 for d in fields.get("dims", ())):
        return f"has a negative dimension in its shape {list(tensor.dims)}"
    if "segment" in fields:
        return "is a segment of a tensor (field segment), which neither onnx nor onnxruntime reads"
    sources = [f"{len(fields[field])} values in {field}" for field in VALUE_FIELDS if field in fields]
    if tensor.data_location == TensorProto.EXTERNAL:
        sources.insert(0, "external data")
    elif "raw_data" in fields:
        sources.insert(0, "raw_data")
    if len(sources) > 1:
        return (f"({_shown(tensor)}) holds {' and '.join(sources)}: its values belong in one of them (which one "
                "counts would be a guess)")
    if tensor.data_location == TensorProto.EXTERNAL:
        return None
    if tensor.HasField("raw_data"):
        return _raw_problem(tensor, len(fields["raw_data"]))
    return _typed_problem(tensor, [field for field in VALUE_FIELDS if field in fields])


def _raw_problem(tensor: TensorProto, length: int) -> "str | None":
    if tensor.data_type == TensorProto.STRING:          # onnx reads string_data only
        return f"({_shown(tensor)}) holds raw_data: a string tensor's values are in string_data"
    expected = raw_bytes(tensor.data_type, math.prod(int(d) for d in tensor.dims))
    if expected is not None and length != expected:
        return f"holds {length} bytes of raw data, but its type and shape {_shown(tensor)} take {expected} bytes"
    return None


def _typed_problem(tensor: TensorProto, held: "list[str]") -> "str | None":
    """The typed field onnx reads for the tensor's type holds exactly the entries its shape takes
    (`held`: the typed fields that hold any)."""
    field = value_field(tensor.data_type)
    need = field_entries(tensor.data_type, math.prod(int(d) for d in tensor.dims))
    other = [name for name in held if name != field]
    if other:
        return (f"holds {len(getattr(tensor, other[0]))} values in {other[0]}, a field its type "
                f"{type_name(tensor.data_type)} does not use (onnx reads its values from {field})")
    entries = len(getattr(tensor, field))
    if entries != need:
        return (f"holds {entries} values in {field} (and no raw_data), but its type and shape {_shown(tensor)} "
                f"take {need}")
    return _range_problem(tensor, field)


def _range_problem(tensor: TensorProto, field: str) -> "str | None":
    """An entry past what the tensor's type stores in its field, read as one numpy array."""
    if tensor.data_type == TensorProto.UINT32 and field == "uint64_data":
        low, high, values = 0, 0xFFFFFFFF, np.array(tensor.uint64_data, dtype=np.uint64)
    elif tensor.data_type in INT32_RANGES:
        (low, high), values = INT32_RANGES[tensor.data_type], np.array(tensor.int32_data, dtype=np.int32)
    else:
        return None
    if not values.size or (int(values.min()) >= low and int(values.max()) <= high):
        return None
    index = int(np.flatnonzero((values < low) | (values > high))[0])
    return (f"holds {int(values[index])} at {field}[{index}], outside the {low}..{high} its type "
            f"{type_name(tensor.data_type)} stores there")


def check_tensor(tensor: TensorProto, what: str) -> None:
    """tensor_problem as one line led by `what` (the file) naming the tensor."""
    problem = tensor_problem(tensor)
    if problem is not None:
        raise DmlLowerError(f"{what}: tensor '{display(tensor.name)}' {problem}")


# -- declared value types ----------------------------------------------------------------------------

def _type_problems(proto: onnx.TypeProto) -> "Iterator[str]":
    """What is wrong in a declared type at any depth (sequence, optional, map values)."""
    kind = proto.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        tensor = getattr(proto, kind)
        if tensor.elem_type != TensorProto.UNDEFINED and tensor.elem_type not in _DEFINED:
            yield f"has element type {data_type_problem(tensor.elem_type)}"
    elif kind in ("sequence_type", "optional_type"):
        yield from _type_problems(getattr(proto, kind).elem_type)
    elif kind == "map_type":
        if proto.map_type.key_type not in _DEFINED:
            yield f"has map key type {data_type_problem(proto.map_type.key_type)}"
        yield from _type_problems(proto.map_type.value_type)


# The operators whose schemas take a TypeProto attribute (onnx 1.23: Optional's `type`); the checker
# refuses such an attribute on any other standard operator, and only those are read, so only
# their attributes are walked (every attribute of GPT-2's 2,700 nodes took 5 ms).
TYPE_ATTRIBUTE_OPS = frozenset({"Optional"})


def _declared(model: onnx.ModelProto) -> "Iterator[tuple[str, onnx.TypeProto]]":
    """(what it is, type) of every declared value type: graph inputs, outputs and value_info of
    every graph and model-local function, and the types attributes carry."""
    graphs = all_graphs(model, trust_schema=False)
    for at, graph in enumerate(graphs):
        where = f" of graph '{display(graph.name)}'" if at else ""
        for role, infos in (("input", graph.input), ("output", graph.output), ("value", graph.value_info)):
            for info in infos:
                yield f"{role} '{display(info.name)}'{where}", info.type
    for function in model.functions:
        for info in getattr(function, "value_info", ()):
            yield f"value '{display(info.name)}' of model-local function '{display(function.name)}'", info.type
    holders: "list[onnx.GraphProto | onnx.FunctionProto]" = [*graphs, *model.functions]
    for holder in holders:
        for node in holder.node:
            if node.op_type not in TYPE_ATTRIBUTE_OPS:
                continue
            for attribute in node.attribute:
                types = [*([attribute.tp] if attribute.HasField("tp") else []), *attribute.type_protos]
                for proto in types:         # rare (a TypeProto attribute): named only then
                    yield f"attribute '{display(attribute.name)}' of {display(node.op_type)} node '{display(node.name)}'", proto


def check_value_types(model: onnx.ModelProto, what: str) -> None:
    """DmlLowerError naming the value, led by `what` (the model file), for the first declared type
    whose element type ONNX does not define. A negative size in a declared shape (some exporters
    write -1 for one known only at run time) becomes an unknown size in `model` (the loader's
    private copy), as onnxruntime reads it: every reader after the loader (onnx's shape inference,
    which can abort the process on one, the placement, the feeds) sees an unknown size."""
    for owner, proto in _declared(model):
        for problem in _type_problems(proto):
            raise DmlLowerError(f"{what}: {owner} {problem}")
        _negative_sizes_unknown(proto)


def _negative_sizes_unknown(proto: onnx.TypeProto) -> None:
    kind = proto.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        for dim in getattr(proto, kind).shape.dim:
            if dim.HasField("dim_value") and dim.dim_value < 0:
                dim.ClearField("dim_value")
    elif kind in ("sequence_type", "optional_type"):
        _negative_sizes_unknown(getattr(proto, kind).elem_type)
    elif kind == "map_type":
        _negative_sizes_unknown(proto.map_type.value_type)
