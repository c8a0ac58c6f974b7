"""Helpers every rule shares: the pattern side (a ConstantOfShape's fill, the Cast / Expand tail an
exporter puts after a mask or an eye, the integers a Range type holds exactly) and the fragment
side (shape broadcasting that declines, DirectML's padded sizes, uploads, DimensionCounts)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_dml_lowering.ir import DataType, DmlLowerError, Graph, TensorDesc, Upload
from onnx_dml_lowering.ir.dtypes import (ONNX_BFLOAT16, ONNX_DOUBLE, ONNX_FLOAT, ONNX_FLOAT16, ONNX_INT16, ONNX_INT32,
                                         ONNX_INT64, from_onnx)
from onnx_dml_lowering.ir.support import OperatorSupport
from onnx_dml_lowering.ir.feature_levels import FeatureLevel

from .match import Decline, GraphView, sole_consumer
from .node import Names, NodeInfo, TensorInfo, product

# Per ONNX type, the magnitude up to which it holds every integer exactly: past it a float Range
# repeats values (its Equal is true off the diagonal too) and an integer index wraps.
EXACT_INTEGER_LIMIT = {ONNX_INT16: 2**15 - 1, ONNX_INT32: 2**31 - 1, ONNX_INT64: 2**63 - 1,
                       ONNX_FLOAT16: 2**11, ONNX_BFLOAT16: 2**8, ONNX_FLOAT: 2**24, ONNX_DOUBLE: 2**53}


def fill_value(node: NodeInfo) -> "tuple[Any, int]":
    """ConstantOfShape's value attribute (default float 0) and its ONNX type."""
    value = node.attrs.get("value")
    if value is None:
        return 0.0, ONNX_FLOAT
    from onnx import numpy_helper
    array = numpy_helper.to_array(value)
    return array.reshape(-1)[0], value.data_type


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
    if cast is not None and cast.op_type == "Cast" and from_onnx(int(cast.attrs.get("to", 0))) is not None:
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


__all__ = ["EXACT_INTEGER_LIMIT", "Tail", "broadcast", "cast_expand_tail", "dims_at", "dims_for", "fill_value", "level_reason",
           "pad_sizes", "product", "upload"]
