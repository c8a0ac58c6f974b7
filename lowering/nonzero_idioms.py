"""The NonZero idioms exporters emit (torch.nonzero, argwhere, x[mask], tf.where, as_tuple)."""
from __future__ import annotations

from typing import Union

import numpy as np

from onnx_dml_lowering.ir import DataType, Download, EmptyTensor, Graph, TensorDesc
from onnx_dml_lowering.ir.dtypes import ONNX_INT64
from onnx_dml_lowering.ir.feature_levels import FeatureLevel

from .match import Declined, GraphView, Match, register_idiom, sole_consumer
from .node import Names, NodeInfo, TensorInfo, product
from .nonzero import check, emit_coordinates
from .registry import verified


def _ints(view: GraphView, node: NodeInfo, index: int, attr: str) -> "list[int] | None":
    """An int list given as input `index` (opset 10/13+) or as attribute `attr` (older)."""
    if index < len(node.inputs) and node.inputs[index] is not None:
        value = view.constant(node.inputs[index].name)
        return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]
    value = node.attrs.get(attr)
    return None if value is None else [int(v) for v in value]


def _transpose_of(node: NodeInfo, view: GraphView) -> "NodeInfo | None":
    """The Transpose(perm=[1, 0]) that alone reads this NonZero's output, if any."""
    user = sole_consumer(view, node.outputs[0].name)
    if user is None or user.op_type != "Transpose":
        return None
    perm = user.attrs.get("perm")
    return user if perm is None or list(perm) == [1, 0] else None


def _with_shape(x: TensorInfo, shapes) -> TensorInfo:
    return TensorInfo(x.name, x.onnx_type, tuple(shapes[x.name]))


# Transpose(NonZero(x), perm=[1,0]) -> coordinates in DirectML's [M, N] layout: the INT64
# [nnz, rank] result is the buffer's prefix, so there is neither a transpose nor a crop copy.
def match_transpose(node: NodeInfo, view: GraphView, level: FeatureLevel) -> "Match | Declined | None":
    transpose = _transpose_of(node, view)
    if transpose is None:
        return None
    reason = check(node, level)
    if reason:
        return Declined(reason)
    x, y = node.inputs[0], transpose.outputs[0].name

    def build(shapes, values, lvl) -> "Union[Graph, Declined]":
        # An unknown rank is checked only now, against the concrete shape.
        reason = check(node.with_shapes((shapes[x.name],)), lvl)
        if reason:
            return Declined(reason)

        def make() -> Graph:
            xs = _with_shape(x, shapes)
            rank = len(xs.shape)
            graph, names = Graph(lvl), Names.for_node(node)
            graph.outputs.append(y)
            if product(xs.shape) == 0:
                graph.add(EmptyTensor(y, ONNX_INT64, (0, rank)))
                return graph
            coords = emit_coordinates(graph, names, xs, lvl, element_major=True)
            if rank == 0:
                graph.add(EmptyTensor(y, ONNX_INT64, (coords.nnz, 0)))
                return graph
            result = names("result.view")
            graph.add_view(result, coords.buffer, TensorDesc(DataType.INT64, (coords.nnz, coords.n)))
            graph.add(Download(result, y, ONNX_INT64, (coords.nnz, coords.n)))
            return graph
        return verified(make)

    return Match("nonzero_transpose", (node.name, transpose.name), (x,), (y,), build,
                 ("NONZERO_COORDINATES",), note="no transpose, no crop: the result is the buffer's prefix")


def _column_of(user: NodeInfo, view: GraphView, rank: int) -> "list[tuple[int, NodeInfo, NodeInfo | None]] | None":
    """(column, extractor node, squeeze node) for a Slice or Split that takes single columns."""
    def squeeze_after(tensor: str) -> "NodeInfo | None":
        sq = sole_consumer(view, tensor)
        if sq is None or sq.op_type != "Squeeze":
            return None
        axes = _ints(view, sq, 1, "axes")
        return sq if axes is not None and [a % 2 for a in axes] == [1] else None

    if user.op_type == "Slice":
        starts, ends = _ints(view, user, 1, "starts"), _ints(view, user, 2, "ends")
        axes, steps = _ints(view, user, 3, "axes") or [0], _ints(view, user, 4, "steps") or [1]
        if starts is None or ends is None or len(starts) != 1 or [a % 2 for a in axes] != [1] or steps != [1]:
            return None
        start = starts[0] + rank if starts[0] < 0 else starts[0]
        end = min(ends[0] + rank if ends[0] < 0 else ends[0], rank)
        if not 0 <= start < rank or end != start + 1:
            return None
        sq = squeeze_after(user.outputs[0].name)
        return [(start, user, sq)] if sq else None
    if user.op_type == "Split":
        axis = user.attrs.get("axis", 0)
        split = _ints(view, user, 1, "split")
        if axis % 2 != 1 or len(user.outputs) != rank or (split is not None and split != [1] * rank):
            return None
        out = []
        for column, tensor in enumerate(user.outputs):
            sq = squeeze_after(tensor.name)
            if sq is None:
                return None
            out.append((column, user, sq))
        return out
    return None


# NonZero -> Transpose -> (Slice|Split -> Squeeze) per axis (nonzero(as_tuple=True), torch.where(c)):
# each axis's indices are the first nnz entries of one row of ONNX's [rank, M] layout: a view, no copy.
def match_columns(node: NodeInfo, view: GraphView, level: FeatureLevel) -> "Match | Declined | None":
    transpose = _transpose_of(node, view)
    x = node.inputs[0]
    if transpose is None or x.rank is None or x.rank == 0:
        return None
    t = transpose.outputs[0].name
    users = view.consumers(t)
    if not users or view.is_graph_output(t):
        return None
    columns: "list[tuple[int, str]]" = []
    covered = [node.name, transpose.name]
    for user in users:
        found = _column_of(user, view, x.rank)
        if found is None:
            return None
        for column, extractor, squeeze in found:
            if extractor.name not in covered:
                covered.append(extractor.name)
            covered.append(squeeze.name)
            columns.append((column, squeeze.outputs[0].name))
    reason = check(node, level)
    if reason:
        return Declined(reason)

    def build(shapes, values, lvl) -> "Union[Graph, Declined]":
        def make() -> Graph:
            xs = _with_shape(x, shapes)
            graph, names = Graph(lvl), Names.for_node(node)
            graph.outputs.extend(name for _, name in columns)
            if product(xs.shape) == 0:
                for _, name in columns:
                    graph.add(EmptyTensor(name, ONNX_INT64, (0,)))
                return graph
            coords = emit_coordinates(graph, names, xs, lvl)
            for column, name in columns:
                row = names(f"axis{column}.view")
                graph.add_view(row, coords.buffer, TensorDesc(DataType.INT64, (coords.nnz,)), 8 * column * coords.m)
                graph.add(Download(row, name, ONNX_INT64, (coords.nnz,)))
            return graph
        return verified(make)

    return Match("nonzero_columns", tuple(covered), (x,), tuple(name for _, name in columns), build,
                 ("NONZERO_COORDINATES",), note="each axis is a view of the coordinates: no transpose, slice or copy")


register_idiom("nonzero_columns", "NonZero", 20, match_columns)
register_idiom("nonzero_transpose", "NonZero", 10, match_transpose)
