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


# Where the input's axes run in the coordinates a rule takes rows from: 0 in NonZero's own
# [rank, nnz] layout, 1 once it is Transposed to [nnz, rank]. A unit axis a taker keeps sits there.
ROWS, COLUMNS = 0, 1


def is_axis(value: int, axis: int) -> bool:
    """Does `value` (negative counting from the end) name `axis` of a 2-D tensor?"""
    return value in (axis, axis - 2)


def optional_ints(view: GraphView, node: NodeInfo, index: int, attr: str, default: "list[int]") -> "list[int] | None":
    """constant_ints, `default` where the input (or attribute) is absent; None where it is given
    but not a constant (a run-time `steps` is no step of 1)."""
    given = (index < len(node.inputs) and node.inputs[index] is not None) or attr in node.attrs
    return constant_ints(view, node, index, attr) if given else default


def squeeze_after(view: GraphView, tensor: str, axis: int = COLUMNS) -> "NodeInfo | None":
    """The Squeeze of `axis` (of a 2-D value) that alone reads `tensor`."""
    sq = sole_consumer(view, tensor)
    if sq is None or sq.op_type != "Squeeze":
        return None
    axes = constant_ints(view, sq, 1, "axes")
    return sq if axes is not None and len(axes) == 1 and is_axis(axes[0], axis) else None


def spec_slice(start: int, end: int, step: int, size: int) -> range:
    """The indices ONNX's Slice text keeps of an axis of `size`: negative bounds count from the end,
    then start clamps to [0, size] ([0, size - 1] stepping back) and end to [0, size] ([-1, size - 1])."""
    start, end = start + size if start < 0 else start, end + size if end < 0 else end
    if step > 0:
        return range(min(max(start, 0), size), min(max(end, 0), size), step)
    return range(min(max(start, 0), size - 1), min(max(end, -1), size - 1), step)


def slice_index(view: GraphView, node: NodeInfo, rank: int, axis: int) -> "int | None":
    """The one index of `axis` a Slice of constant starts, ends, axes and steps keeps, or None.
    Bounds may be negative, past either end, stepping back; where numpy's clamping (onnx.reference's)
    and the ONNX text's differ (a start before the first element stepping back), the Slice is not taken."""
    starts, ends = constant_ints(view, node, 1, "starts"), constant_ints(view, node, 2, "ends")
    axes = optional_ints(view, node, 3, "axes", [0])
    steps = optional_ints(view, node, 4, "steps", [1])
    if starts is None or ends is None or axes is None or steps is None:
        return None
    if not len(starts) == len(ends) == len(axes) == len(steps) == 1 or not is_axis(axes[0], axis) or steps[0] == 0:
        return None
    kept = range(rank)[slice(starts[0], ends[0], steps[0])]
    if len(kept) != 1 or list(spec_slice(starts[0], ends[0], steps[0], rank)) != list(kept):
        return None
    return kept[0]


def gather_index(view: GraphView, node: NodeInfo, rank: int, axis: int) -> "tuple[int, bool] | None":
    """(index, keeps the unit axis) of a Gather along `axis` of one constant index: a scalar drops
    the axis ([nnz]), a 1-element 1-D index keeps it; None for anything else."""
    indices = view.constant(node.input(1).name)
    if indices is None or not is_axis(int(node.attrs.get("axis", 0)), axis):
        return None
    indices = np.asarray(indices)
    if indices.shape not in ((), (1,)) or indices.dtype.kind not in "iu":
        return None
    index = int(indices.reshape(-1)[0])
    return (index % rank, indices.ndim == 1) if -rank <= index < rank else None


# One axis of nonzero(as_tuple=True): its index, the nodes that take it out of the coordinates,
# the value they end in, and whether that value keeps a unit axis ([nnz, 1] or [1, nnz], not [nnz]).
Column = Tuple[int, Tuple[NodeInfo, ...], str, bool]


def column_of(user: NodeInfo, view: GraphView, rank: int, axis: int = COLUMNS) -> "list[Column] | None":
    """The single rows of the input's axes (along `axis` of the coordinates) a Slice + Squeeze,
    Split + Squeeze, Gather of one index, or SplitToSequence + SequenceAt takes."""
    if user.op_type == "Slice":
        index = slice_index(view, user, rank, axis)
        sq = None if index is None else squeeze_after(view, user.outputs[0].name, axis)
        return None if index is None or sq is None else [(index, (user, sq), sq.outputs[0].name, False)]
    if user.op_type == "Gather":
        taken = gather_index(view, user, rank, axis)
        return None if taken is None else [(taken[0], (user,), user.outputs[0].name, taken[1])]
    if user.op_type == "Split":
        return split_columns(user, view, rank, axis)
    if user.op_type == "SplitToSequence":
        return sequence_columns(user, view, rank, axis)
    return None


def split_columns(split: NodeInfo, view: GraphView, rank: int, axis: int) -> "list[Column] | None":
    """A Split along `axis` into one output per index (its `split` all ones, or absent, or
    num_outputs), each Squeezed."""
    sizes = optional_ints(view, split, 1, "split", [1] * rank)
    if not is_axis(int(split.attrs.get("axis", 0)), axis) or len(split.outputs) != rank or sizes != [1] * rank:
        return None
    out: "list[Column]" = []
    for column, tensor in enumerate(split.outputs):
        sq = squeeze_after(view, tensor.name, axis)
        if sq is None:
            return None
        out.append((column, (split, sq), sq.outputs[0].name, False))
    return out


def sequence_columns(split: NodeInfo, view: GraphView, rank: int, axis: int = COLUMNS) -> "list[Column] | None":
    """TorchScript's unbind: SplitToSequence along `axis` into single rows, each taken by a SequenceAt
    (and an optional Squeeze of the unit axis). By the ONNX spec a `split` input, scalar or 1-D,
    keeps the axis whatever keepdims says (onnxruntime drops it for keepdims=0): [nnz, 1]."""
    given = len(split.inputs) > 1 and split.inputs[1] is not None
    sizes = view.constant(split.input(1).name) if given else None
    if not is_axis(int(split.attrs.get("axis", 0)), axis) or (
            given and (sizes is None or np.any(np.asarray(sizes) != 1) or np.asarray(sizes).size not in (1, rank))):
        return None                             # not one row per chunk
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
        sq = squeeze_after(view, at.outputs[0].name, axis) if keep else None
        nodes = (split, at) + ((sq,) if sq is not None else ())
        out.append((int(position) % rank, nodes, nodes[-1].outputs[0].name, keep and sq is None))
    return out


def taken_rows(anchor: NodeInfo, view: GraphView, transpose: "NodeInfo | None") -> "Found | None":
    """Every reader of the NonZero's coordinates (through `transpose`, if given) takes single
    rows of the input's axes: the Found of NONZERO_COORDINATES with each row a view."""
    x = anchor.input(0)
    tensor = (transpose or anchor).outputs[0].name
    axis = ROWS if transpose is None else COLUMNS
    users = view.consumers(tensor)
    if x.rank is None or x.rank == 0 or not users or view.is_graph_output(tensor):
        return None
    columns: "list[tuple[int, bool]]" = []
    outputs: "list[str]" = []
    covered = [anchor.name] + ([transpose.name] if transpose is not None else [])
    for user in users:
        found = column_of(user, view, x.rank, axis) if user.inputs[0] and user.inputs[0].name == tensor else None
        if found is None:
            return None
        for column, nodes, output, keep in found:
            covered += [n.name for n in nodes if n.name not in covered]
            columns.append((column, keep))
            outputs.append(output)
    # rewrite reads x's type and shape, the rows and the layout alone
    return Found(tuple(covered), (x,), tuple(outputs), portable=(x.onnx_type, tuple(columns), axis), x=x,
                 columns=tuple(columns), axis=axis)


class NonZeroColumns(IdiomRule):
    # NonZero -> Transpose -> (Slice|Split -> Squeeze, Gather of one index, or SplitToSequence ->
    # SequenceAt [-> Squeeze]) per axis (nonzero(as_tuple=True) from both torch exporters,
    # torch.where(c), nz[:, k]) -> NONZERO_COORDINATES; each axis is the first nnz entries of one
    # row of ONNX's [rank, M] layout: a view, no copy.
    operators = ("NONZERO_COORDINATES",)
    note = "each axis is a view of the coordinates: no transpose, slice or copy"

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        transpose = transpose_of(anchor, view)
        return None if transpose is None else taken_rows(anchor, view, transpose)

    def decline_reason(self, level: FeatureLevel, x: TensorInfo,
                       columns: "tuple[tuple[int, bool], ...]", axis: int) -> "str | None":
        return nonzero_reason(x, level)

    def rewrite(self, f: Fragment, x: TensorInfo, columns: "tuple[tuple[int, bool], ...]", axis: int) -> Graph:
        xs = f.tensor(x)
        nnz = 0 if product(xs.shape) == 0 else None
        coords = None if nnz == 0 else emit_coordinates(f.graph, f.names, xs, f.level)
        rows: "dict[int, str]" = {}             # one view per row, however many outputs take it
        for (column, keep), name in zip(columns, f.outputs):
            count = coords.nnz if coords is not None else 0
            shape = ((count, 1) if axis == COLUMNS else (1, count)) if keep else (count,)
            if coords is None:
                f.empty(name, ONNX_INT64, shape)
                continue
            if column not in rows:
                rows[column] = f.names(f"axis{column}.view")
                f.graph.add_view(rows[column], coords.buffer, TensorDesc(DataType.INT64, (coords.nnz,)),
                                 8 * column * coords.m)
            f.graph.add(Download(rows[column], name, ONNX_INT64, shape))
        return f.graph


class NonZeroRows(NonZeroColumns):
    # NonZero -> (Slice|Split -> Squeeze, or Gather of one index) per axis along axis 0, with no
    # Transpose (YOLOv5's `i, j = (x > t).nonzero().T`, which both exporters fold into NonZero's
    # own [rank, nnz] layout) -> NONZERO_COORDINATES; each axis a row view, no copy.
    note = "each axis is a view of the coordinates: no slice or copy"

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        return taken_rows(anchor, view, None)


# name, anchor op, priority (larger patterns first), rule           what it rewrites into
register_idiom("nonzero_columns", "NonZero", 20, NonZeroColumns())      # NONZERO_COORDINATES, each axis a row view
register_idiom("nonzero_rows", "NonZero", 20, NonZeroRows())            # the same, no Transpose: [rank, nnz] rows
register_idiom("nonzero_transpose", "NonZero", 10, NonZeroTranspose())  # NONZERO_COORDINATES, [nnz, rank] prefix
