"""The NonZero idioms exporters emit (torch.nonzero, argwhere, x[mask], tf.where, as_tuple)."""
from __future__ import annotations

from typing import Tuple

import numpy as np

from onnx_dml_lowering.ir import DataType, Download, Graph, TensorDesc
from onnx_dml_lowering.ir.dtypes import ONNX_INT64
from onnx_dml_lowering.ir.feature_levels import FeatureLevel

from .match import Decline, Found, Fragment, GraphView, IdiomRule, constant_ints, constant_scalar, sole_consumer
from .node import NodeInfo, TensorInfo, product
from .nonzero import emit_coordinates, nonzero_reason
from .registry import register_idiom


def transpose_of(nonzero: NodeInfo, view: GraphView) -> "NodeInfo | None":
    """The Transpose(perm=[1, 0]) that alone reads this NonZero's output, if any."""
    user = sole_consumer(view, nonzero.outputs[0].name)
    if user is None or user.op_type != "Transpose":
        return None
    perm = user.attrs.get("perm")
    return user if perm is None or list(perm) == [1, 0] else None


class NonZeroTranspose(IdiomRule):
    # Transpose(NonZero(x), perm=[1,0]) -> NONZERO_COORDINATES in DirectML's [M, N] layout: the
    # INT64 [nnz, rank] result is the buffer's prefix, so there is neither a transpose nor a crop.
    operators = ("NONZERO_COORDINATES",)
    note = "no transpose, no crop: the result is the buffer's prefix"

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        transpose = transpose_of(anchor, view)
        if transpose is None:
            return None
        x = anchor.input(0)
        # rewrite reads x's type and (run-time) shape alone: a detector's per-class NonZero share a build
        return Found((anchor.name, transpose.name), (x,), (transpose.outputs[0].name,), portable=(x.onnx_type,), x=x)

    def decline_reason(self, level: FeatureLevel, x: TensorInfo) -> "str | None":
        return nonzero_reason(x, level)

    def rewrite(self, f: Fragment, x: TensorInfo) -> Graph:
        xs, (y,) = f.tensor(x), f.outputs
        reason = nonzero_reason(xs, f.level)          # a rank known only now is checked only now
        if reason:
            raise Decline(reason)
        rank = len(xs.shape)
        if product(xs.shape) == 0:
            return f.empty(y, ONNX_INT64, (0, rank))
        coords = emit_coordinates(f.graph, f.names, xs, f.level, element_major=True)
        if rank == 0:
            return f.empty(y, ONNX_INT64, (coords.nnz, 0))
        result = f.names("result.view")
        f.graph.add_view(result, coords.buffer, TensorDesc(DataType.INT64, (coords.nnz, coords.n)))
        f.graph.add(Download(result, y, ONNX_INT64, (coords.nnz, coords.n)))
        return f.graph


def squeeze_after(view: GraphView, tensor: str) -> "NodeInfo | None":
    """The Squeeze of axis 1 that alone reads `tensor`."""
    sq = sole_consumer(view, tensor)
    if sq is None or sq.op_type != "Squeeze":
        return None
    axes = constant_ints(view, sq, 1, "axes")
    return sq if axes is not None and [a % 2 for a in axes] == [1] else None


# One axis of nonzero(as_tuple=True): its column, the nodes that take it out of the transposed
# coordinates, the value they end in, and whether that value keeps a unit axis ([nnz, 1], not [nnz]).
Column = Tuple[int, Tuple[NodeInfo, ...], str, bool]


def column_of(user: NodeInfo, view: GraphView, rank: int) -> "list[Column] | None":
    """The single columns a Slice + Squeeze, Split + Squeeze or SplitToSequence + SequenceAt takes."""
    if user.op_type == "Slice":
        starts, ends = constant_ints(view, user, 1, "starts"), constant_ints(view, user, 2, "ends")
        axes = constant_ints(view, user, 3, "axes") or [0]
        steps = constant_ints(view, user, 4, "steps") or [1]
        if starts is None or ends is None or len(starts) != 1 or [a % 2 for a in axes] != [1] or steps != [1]:
            return None
        start = starts[0] + rank if starts[0] < 0 else starts[0]
        end = min(ends[0] + rank if ends[0] < 0 else ends[0], rank)
        if not 0 <= start < rank or end != start + 1:
            return None
        sq = squeeze_after(view, user.outputs[0].name)
        return [(start, (user, sq), sq.outputs[0].name, False)] if sq else None
    if user.op_type == "Split":
        axis = user.attrs.get("axis", 0)
        split = constant_ints(view, user, 1, "split")
        if axis % 2 != 1 or len(user.outputs) != rank or (split is not None and split != [1] * rank):
            return None
        out: "list[Column]" = []
        for column, tensor in enumerate(user.outputs):
            sq = squeeze_after(view, tensor.name)
            if sq is None:
                return None
            out.append((column, (user, sq), sq.outputs[0].name, False))
        return out
    if user.op_type == "SplitToSequence":
        return sequence_columns(user, view, rank)
    return None


def sequence_columns(split: NodeInfo, view: GraphView, rank: int) -> "list[Column] | None":
    """TorchScript's unbind: SplitToSequence(axis 1) into single columns, each taken by a SequenceAt
    (and an optional Squeeze of the unit axis). By the ONNX spec a `split` input, scalar or 1-D,
    keeps the axis whatever keepdims says (onnxruntime drops it for keepdims=0): [nnz, 1]."""
    given = len(split.inputs) > 1 and split.inputs[1] is not None
    sizes = view.constant(split.input(1).name) if given else None
    if split.attrs.get("axis", 0) % 2 != 1 or (given and (sizes is None or np.any(np.asarray(sizes) != 1)
                                                          or np.asarray(sizes).size not in (1, rank))):
        return None                             # not one column per chunk
    keep = given or bool(int(split.attrs.get("keepdims", 1)))
    seq = split.outputs[0].name
    users = view.consumers(seq)
    if not users or view.is_graph_output(seq):
        return None
    out: "list[Column]" = []
    for at in users:
        position = constant_scalar(view, at.inputs[1] if at.op_type == "SequenceAt" else None)
        if position is None or not -rank <= int(position) < rank:
            return None
        sq = squeeze_after(view, at.outputs[0].name) if keep else None
        nodes = (split, at) + ((sq,) if sq is not None else ())
        out.append((int(position) % rank, nodes, nodes[-1].outputs[0].name, keep and sq is None))
    return out


class NonZeroColumns(IdiomRule):
    # NonZero -> Transpose -> (Slice|Split -> Squeeze, or SplitToSequence -> SequenceAt [-> Squeeze]) per
    # axis (nonzero(as_tuple=True) from both torch exporters, torch.where(c))
    # -> NONZERO_COORDINATES; each axis is the first nnz entries of one row of ONNX's [rank, M]
    # layout: a view, no copy.
    operators = ("NONZERO_COORDINATES",)
    note = "each axis is a view of the coordinates: no transpose, slice or copy"

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        transpose = transpose_of(anchor, view)
        x = anchor.input(0)
        if transpose is None or x.rank is None or x.rank == 0:
            return None
        t = transpose.outputs[0].name
        users = view.consumers(t)
        if not users or view.is_graph_output(t):
            return None
        columns: "list[tuple[int, bool]]" = []
        outputs: "list[str]" = []
        covered = [anchor.name, transpose.name]
        for user in users:
            found = column_of(user, view, x.rank)
            if found is None:
                return None
            for column, nodes, output, keep in found:
                covered += [n.name for n in nodes if n.name not in covered]
                columns.append((column, keep))
                outputs.append(output)
        return Found(tuple(covered), (x,), tuple(outputs), portable=(x.onnx_type, tuple(columns)), x=x,
                     columns=tuple(columns))

    def decline_reason(self, level: FeatureLevel, x: TensorInfo,
                       columns: "tuple[tuple[int, bool], ...]") -> "str | None":
        return nonzero_reason(x, level)

    def rewrite(self, f: Fragment, x: TensorInfo, columns: "tuple[tuple[int, bool], ...]") -> Graph:
        xs = f.tensor(x)
        if product(xs.shape) == 0:
            for (_, keep), name in zip(columns, f.outputs):
                f.empty(name, ONNX_INT64, (0, 1) if keep else (0,))
            return f.graph
        coords = emit_coordinates(f.graph, f.names, xs, f.level)
        rows: "dict[int, str]" = {}             # one view per column, however many outputs take it
        for (column, keep), name in zip(columns, f.outputs):
            if column not in rows:
                rows[column] = f.names(f"axis{column}.view")
                f.graph.add_view(rows[column], coords.buffer, TensorDesc(DataType.INT64, (coords.nnz,)),
                                 8 * column * coords.m)
            f.graph.add(Download(rows[column], name, ONNX_INT64, (coords.nnz, 1) if keep else (coords.nnz,)))
        return f.graph


# name, anchor op, priority (larger patterns first), rule           what it rewrites into
register_idiom("nonzero_columns", "NonZero", 20, NonZeroColumns())      # NONZERO_COORDINATES, each axis a row view
register_idiom("nonzero_transpose", "NonZero", 10, NonZeroTranspose())  # NONZERO_COORDINATES, [nnz, rank] prefix
