"""Helpers every rule shares: the pattern side (a ConstantOfShape's fill, the Cast / Expand tail an
exporter puts after a mask or an eye, the integers a Range type holds exactly) and the fragment
side (shape broadcasting that declines, DirectML's padded sizes, uploads, DimensionCounts)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_dml_lowering.ir import DataType, DmlLowerError, Graph, TensorDesc, Upload
from onnx_dml_lowering.ir.dtypes import (ONNX_BFLOAT16, ONNX_DOUBLE, ONNX_FLOAT, ONNX_FLOAT16, ONNX_INT8, ONNX_INT16,
                                         ONNX_INT32, ONNX_INT64, ONNX_UINT8, ONNX_UINT16, ONNX_UINT32, ONNX_UINT64,
                                         from_onnx, onnx_to_numpy, onnx_type_name)
from onnx_dml_lowering.ir.support import OperatorSupport
from onnx_dml_lowering.ir.feature_levels import FeatureLevel

from .match import Decline, GraphView, sole_consumer
from .node import Names, NodeInfo, TensorInfo, product

# Per ONNX type, the magnitude up to which it holds every integer exactly: past it a float Range
# repeats values (its Equal is true off the diagonal too) and an integer index wraps.
EXACT_INTEGER_LIMIT = {ONNX_INT16: 2**15 - 1, ONNX_INT32: 2**31 - 1, ONNX_INT64: 2**63 - 1,
                       ONNX_FLOAT16: 2**11, ONNX_BFLOAT16: 2**8, ONNX_FLOAT: 2**24, ONNX_DOUBLE: 2**53}
# Per numeric ONNX type, the interval of integers it holds exactly, [lo, hi]: a Cast of integers
# inside it into it keeps every value (an index traced through such a Cast is the same index).
EXACT_INTEGERS = {ONNX_INT8: (-2**7, 2**7 - 1), ONNX_UINT8: (0, 2**8 - 1), ONNX_UINT16: (0, 2**16 - 1),
                  ONNX_UINT32: (0, 2**32 - 1), ONNX_UINT64: (0, 2**64 - 1),
                  **{t: (-limit - (t in (ONNX_INT16, ONNX_INT32, ONNX_INT64)), limit)
                     for t, limit in EXACT_INTEGER_LIMIT.items()}}


def exact_reason(lo: int, hi: int, onnx_type: int, what: str) -> "str | None":
    """Why integers lo..hi are not all held exactly by `onnx_type` (`what` names them), or None."""
    bounds = EXACT_INTEGERS.get(onnx_type)
    if bounds is None:
        return f"{what} of ONNX type {onnx_type_name(onnx_type)} are no exact integers"
    if lo < bounds[0] or hi > bounds[1]:
        return (f"{what} {lo}..{hi} do not all fit {onnx_type_name(onnx_type)} exactly "
                f"([{bounds[0]}, {bounds[1]}]): its values would wrap or round")
    return None


# Types DirectML has no equivalent of, carried bit for bit in a DirectML type of their width where an
# operator only copies elements or writes one constant (Trilu's copy, EyeLike's ones): bfloat16 as
# its 16 bits. Never for what reads values (NonZero: a bfloat16 -0.0 is nonzero as bits).
BIT_CARRIERS = {ONNX_BFLOAT16: ONNX_UINT16}


def type_reason(onnx_type: int, what: str) -> str:
    """Why a value of `onnx_type` cannot be a DirectML tensor: no DirectML type carries it, or
    (0) onnx's shape inference gave it none, as it gives a custom-domain node's output."""
    if not onnx_type:
        return (f"{what} type is unknown before the run: onnx's shape inference does not type it "
                "(a node of a domain onnx does not define, such as com.microsoft, produces it)")
    return f"{what} type {onnx_type_name(onnx_type)} has no DirectML equivalent"


def carrier_type(onnx_type: int) -> int:
    """The ONNX type whose DirectML type holds `onnx_type`'s elements: itself, or its bit carrier."""
    return BIT_CARRIERS.get(onnx_type, onnx_type)


def carried(onnx_type: int, value: Any) -> "tuple[int, Any]":
    """(carrier type, value as the carrier holds it): a bfloat16 1.0 is the uint16 16256."""
    carrier = BIT_CARRIERS.get(onnx_type)
    if carrier is None:
        return onnx_type, value
    bits = np.array(value, onnx_to_numpy(onnx_type)).reshape(1).view(onnx_to_numpy(carrier))
    return carrier, bits[0].item()


def fill_value(node: NodeInfo) -> "tuple[Any, int]":
    """ConstantOfShape's value attribute (default float 0) and its ONNX type."""
    value = node.attrs.get("value")
    if value is None:
        return 0.0, ONNX_FLOAT
    from onnx import numpy_helper
    return one_value(numpy_helper.to_array(value), "ConstantOfShape's value"), value.data_type


@dataclass(frozen=True)
class Tail:
    """What follows a generated value `y` and joins its pattern: an optional Cast to a type DirectML
    has, then an optional Expand of the result (over batch dimensions)."""
    nodes: "tuple[NodeInfo, ...]"          # the Cast and / or the Expand, in order
    onnx_type: int                         # the type the tail ends in
    output: str                            # the value the tail ends in (y when it is empty)
    expand_shape: "TensorInfo | None"      # the Expand's shape input


def cast_expand_tail(view: GraphView, y: str, onnx_type: int, expand: bool = True) -> Tail:
    """The Cast / Expand tail read alone after `y` (of `onnx_type`); expand=False stops at the Cast."""
    nodes: "list[NodeInfo]" = []
    cast = sole_consumer(view, y)
    if cast is not None and cast.op_type == "Cast" and \
            from_onnx(carrier_type(int(cast.attrs.get("to", 0)))) is not None:
        nodes.append(cast)
        onnx_type, y = int(cast.attrs["to"]), cast.outputs[0].name
    expand_shape = None
    user = sole_consumer(view, y) if expand else None
    if user is not None and user.op_type == "Expand" and user.input(0).name == y:
        nodes.append(user)
        expand_shape, y = user.input(1), user.outputs[0].name
    return Tail(tuple(nodes), onnx_type, y, expand_shape)


def broadcast(a: "tuple[int, ...]", b: "tuple[int, ...]", reason: str) -> "tuple[int, ...]":
    """numpy's broadcast of two shapes; `reason` declines when they do not broadcast."""
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise Decline(reason) from None


def pad_sizes(sizes: "tuple[int, ...]", rank: int) -> "tuple[int, ...]":
    """Right-align sizes into `rank` dimensions with leading 1s (DirectML's broadcasting rule)."""
    return (1,) * (rank - len(sizes)) + tuple(sizes)


def upload(graph: Graph, names: Names, tensor: str, dtype: DataType,
           sizes: "tuple[int, ...]") -> str:
    """A packed input buffer holding host tensor `tensor`; returns its view name."""
    buf, view = names("in"), names("in.view")
    desc = TensorDesc(dtype, sizes)
    graph.add_buffer(buf, desc.min_total_size)
    graph.add_view(view, buf, desc)
    graph.inputs.append(tensor)
    graph.add(Upload(tensor, view))
    return view


def dims_for(support: OperatorSupport, level: FeatureLevel, tensor: str, rank: int) -> "int | None":
    """The DimensionCount to use for a tensor of `rank` dims: padded up to the table's minimum."""
    row = support.row(level)
    if row is None:
        return None
    allowed = row.tensors[tensor]
    dims = max(rank, allowed.min_dims)
    return dims if dims <= allowed.max_dims else None


def dims_at(support: OperatorSupport, level: FeatureLevel, tensor: str, rank: int) -> int:
    """dims_for where the rule's check has already declined what does not fit."""
    dims = dims_for(support, level, tensor, rank)
    if dims is None:
        raise DmlLowerError(f"rank {rank} does not fit {support.name}'s {tensor} at feature level {level}")
    return dims


def level_reason(support: OperatorSupport, level: FeatureLevel) -> "str | None":
    if support.row(level) is None:
        return (f"{support.name} is not available at feature level {level} "
                f"(introduced in {support.introduced})")
    return None


# -- value-preserving reshapes: only unit axes added or removed ------------------------------------

def unit_reshape_axis(in_dims: "tuple[Any, ...]", out_dims: "tuple[Any, ...]", axis: int) -> "int | None":
    """Where axis `axis` (from the right) of a tensor of `in_dims` lands, from the right, after a
    Reshape to `out_dims` that only adds or removes axes of size 1; None when it may merge, split or
    reorder larger axes. A dim is an int, a symbol or None (unknown: taken as larger than 1, as the
    index's axis always is; run_time_unit_reshape checks the concrete sizes); -1 in `out_dims` is the
    one size Reshape infers, 0 (copy the input's, or an empty axis under allowzero=1) is never taken, so
    allowzero changes nothing here (reshape_zero_reason). Only known sizes rule a Reshape
    out here: a symbol (an exporter's [3, 1] for a Range of `n`) is checked per call."""
    if any(d == 0 or (isinstance(d, int) and d < -1) for d in out_dims) or list(out_dims).count(-1) > 1:
        return None
    sizes = [d for d in out_dims if d != -1]
    if -1 in out_dims and all(isinstance(d, int) for d in [*in_dims, *sizes]):
        known = product(tuple(sizes))               # every size known: the -1 is too
        if known == 0 or product(tuple(in_dims)) % known:
            return None
        out_dims = tuple(product(tuple(in_dims)) // known if d == -1 else d for d in out_dims)
    source = len(in_dims) + axis
    kept_in = [i for i, d in enumerate(in_dims) if d != 1 or i == source]     # the index's axis always
    kept_out = [(j, d) for j, d in enumerate(out_dims) if d != 1]
    if len(kept_in) != len(kept_out):
        return None
    position = None
    for i, (j, b) in zip(kept_in, kept_out):
        a = in_dims[i]
        if i == source:
            position = j
        if isinstance(a, int) and isinstance(b, int) and b != -1 and a != b and not (i == source and a == 1):
            return None                     # two known sizes that differ (a symbol may be any size)
    return None if position is None else position - len(out_dims)


def reshape_zero_reason(target: "tuple[int, ...]", allowzero: bool, what: str) -> "str | None":
    """Why a Reshape to the concrete `target` is not seen through: a 0 in it, which copies the input's
    dimension (allowzero=0) or is an empty axis (allowzero=1). The one test every matcher applies to a
    Reshape's allowzero: ONNX's allowzero only decides what a 0 means, so a shape holding no 0 reshapes
    alike under both (torch's dynamo exporter writes allowzero=1 on every `view`)."""
    if 0 not in target:
        return None
    meaning = "is an empty axis (allowzero=1)" if allowzero else "copies an input dimension (allowzero=0)"
    return f"{what}: a 0 {meaning}; left to ONNX"


def run_time_unit_reshape(shape: "tuple[int, ...]", target: "tuple[int, ...]", axis: int,
                          out_axis: int, allowzero: bool = False) -> "tuple[int, ...]":
    """The shape a Reshape of `shape` to `target` gives; Decline unless it only adds or removes
    axes of size 1 and axis `axis` of `shape` (from the right) lands on `out_axis` of the result."""
    what = f"Reshape of {list(shape)} to {list(target)}"
    zero = reshape_zero_reason(tuple(target), allowzero, what)
    if zero:
        raise Decline(zero)
    if any(d < -1 for d in target) or list(target).count(-1) > 1:
        raise Decline(f"{what}: a negative size other than one -1; left to ONNX")
    known = product(tuple(d for d in target if d != -1))
    if -1 in target:
        if known == 0 or product(shape) % known:
            raise Decline(f"{what}: no size fits its -1")
        target = tuple(product(shape) // known if d == -1 else d for d in target)
    if product(target) != product(shape):
        raise Decline(f"{what}: the element counts differ")
    kept_in = [i for i, d in enumerate(shape) if d != 1]
    kept_out = [j for j, d in enumerate(target) if d != 1]
    if [shape[i] for i in kept_in] != [target[j] for j in kept_out]:
        raise Decline(f"{what} merges, splits or reorders axes larger than 1: no index stays one")
    source = len(shape) + axis
    if len(target) < -out_axis or target[out_axis] != shape[source]:
        raise Decline(f"{what} leaves no axis {out_axis} of the index's {shape[source]} elements")
    if shape[source] != 1 and kept_out[kept_in.index(source)] != len(target) + out_axis:
        raise Decline(f"{what} moves the index's axis {axis} to another place than {out_axis}")
    return tuple(target)


__all__ = ["BIT_CARRIERS", "EXACT_INTEGERS", "EXACT_INTEGER_LIMIT", "Tail", "broadcast", "carried",
           "carrier_type", "cast_expand_tail", "dims_at", "dims_for", "exact_reason", "fill_value",
           "level_reason", "pad_sizes", "product", "reshape_zero_reason", "run_time_unit_reshape", "unit_reshape_axis", "upload"]


def one_value(value: Any, what: str) -> Any:
    """The value of an input ONNX defines as one value (Trilu's k), else DmlLowerError: a k of two
    values is no Trilu (onnxruntime and onnx.reference refuse it), never its first value quietly."""
    array = np.asarray(value)
    if array.size != 1:
        raise DmlLowerError(f"{what} holds {array.size} values (shape {list(array.shape)}): ONNX defines it as "
                            "one value")
    return array.reshape(-1)[0]
