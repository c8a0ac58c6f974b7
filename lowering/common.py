"""Small fragment-building helpers shared by the rules."""
from __future__ import annotations

from onnx_dml_lowering.ir import DataType, DmlLowerError, Graph, TensorDesc, Upload
from onnx_dml_lowering.ir.support import OperatorSupport
from onnx_dml_lowering.ir.feature_levels import FeatureLevel

from .node import Names, product


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


__all__ = ["pad_sizes", "upload", "dims_for", "dims_at", "level_reason", "product"]
