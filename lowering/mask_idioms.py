"""Attention masks built from Range comparisons (what torch's exporters emit for causal, sliding-window
and offset masks): `Less`, `LessOrEqual`, `Greater`, `GreaterOrEqual` or `Equal` between a row index and
a column index, each `Range(start, limit, 1)` plus scalar offsets (constant or run-time) through
`Unsqueeze` / `Reshape` / `Expand`; `And` / `Or` / `Not` of such comparisons and of constant all-true
tensors; an optional `Cast` and `Expand` after. Row value i is r0 + i, column value j is c0 + j, so
every comparison is a condition on the diagonal x - y = j - i alone: a set of diagonals. The whole
expression is one DIAGONAL_MATRIX1 when that set is a band (or the outside of one) of the matrix,
with the bounds computed from the offsets when the fragment is specialised."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnx_dml_lowering.ir import Graph
from onnx_dml_lowering.ir.dtypes import ONNX_BOOL, onnx_to_numpy, onnx_type_name
from onnx_dml_lowering.ir.feature_levels import FeatureLevel

from .common import (EXACT_INTEGERS, broadcast, cast_expand_tail, exact_reason, fill_value, run_time_unit_reshape,
                     unit_reshape_axis)
from .diagonal import band_reason, emit_band
from .diagonal_sets import (COMPARISONS, FLIPPED, INF, Affine, Expr, as_band, combination, describe, diagonals, leaves,
                           passes_through, per_element)
from .match import Decline, Found, Fragment, GraphView, IdiomRule, constant_ints, constant_scalar, sole_consumer
from .node import NodeInfo, TensorInfo, product
from .registry import register_idiom


def scalar_term(view: GraphView, tensor: TensorInfo) -> "tuple[Affine, TensorInfo | None] | None":
    """A scalar-like operand (every static dim 1) as an Affine, and the tensor if it is run-time."""
    info = view.tensor(tensor.name)
    shape = info.shape if info.shape is not None else tensor.shape
    if shape is None or any(d != 1 for d in shape):
        return None
    value = constant_scalar(view, tensor)
    if value is not None:
        return Affine(value), None
    return Affine(0, ((tensor.name, 1),)), TensorInfo(tensor.name, tensor.onnx_type, tuple(shape))


@dataclass(frozen=True)
class IndexStep:
    """One node of an index chain, in forward order from the Range."""
    node: NodeInfo
    op: str                                      # range | unsqueeze | reshape | expand | offset | cast | identity
    arg: Any = None                              # axes / shape (tuple or run-time tensor) / Expand's shape tensor /
                                                 # offset's static shape / Cast's type
    offset: Affine = Affine()                    # what an offset step adds (Range: its start)
    tensors: "tuple[TensorInfo, ...]" = ()       # run-time values the step reads
    axis: int = -1                               # the Range's axis after this step, from the right
    onnx_type: int = 0                           # the index's type after this step


@dataclass
class Index:
    """An index along one axis: Range(start, limit, 1) values plus offsets, reshaped, through value-
    preserving Casts (its values are checked to fit every type they pass, per call)."""
    limit: Affine
    onnx_type: int                               # the type the comparison sees (after the last Cast)
    value: Affine                                # the first element's value (start + offsets)
    steps: "list[IndexStep]" = field(default_factory=list)
    rank: int = 1

    @property
    def axis(self) -> int:
        return self.steps[-1].axis

    @property
    def nodes(self) -> "list[NodeInfo]":
        return [s.node for s in self.steps]


def trace_index(view: GraphView, tensor: str, depth: int = 0) -> "Index | None":
    """The index producing `tensor`: a Range(start, limit, 1) followed by value-preserving steps
    (Unsqueeze, a Reshape or Expand that only adds unit or broadcast axes, Identity, an integer-exact
    Cast, scalar offsets); None when anything else makes it."""
    node = view.producer(tensor)
    if node is None or depth > 16:
        return None
    if node.op_type == "Range":
        return range_index(view, node)
    if node.op_type in ("Add", "Sub"):
        return offset_index(view, node, depth)
    if node.op_type not in ("Unsqueeze", "Reshape", "Expand", "Identity", "Cast"):
        return None
    inner = trace_index(view, node.input(0).name, depth + 1)
    step = None if inner is None else shape_step(view, node, inner)
    if inner is None or step is None:
        return None
    inner.steps.append(step)
    inner.onnx_type = step.onnx_type
    return inner


def range_index(view: GraphView, node: NodeInfo) -> "Index | None":
    if len(node.inputs) != 3 or constant_scalar(view, node.input(2)) != 1:
        return None                             # a step other than 1 is no diagonal index
    start_term, limit_term = scalar_term(view, node.input(0)), scalar_term(view, node.input(1))
    if start_term is None or limit_term is None:
        return None
    (start, s_t), (limit, l_t) = start_term, limit_term
    onnx_type = node.outputs[0].onnx_type
    step = IndexStep(node, "range", offset=start, tensors=tuple(t for t in (s_t, l_t) if t is not None),
                     onnx_type=onnx_type)
    return Index(limit, onnx_type, start, [step])


def shape_step(view: GraphView, node: NodeInfo, inner: Index) -> "IndexStep | None":
    """The step of an Unsqueeze / Reshape / Expand / Identity / Cast after index `inner` (whose rank
    it updates), or None when it is not value-preserving."""
    op, axis, onnx_type = node.op_type, inner.axis, inner.onnx_type
    arg: Any = None                             # IndexStep.arg
    tensors: "tuple[TensorInfo, ...]" = ()
    if op == "Unsqueeze":
        axes = constant_ints(view, node, 1, "axes")
        if axes is None:
            return None
        rank = inner.rank + len(axes)
        marks = ["."] * inner.rank
        marks[inner.rank + inner.axis] = "R"
        for a in sorted(a % rank if -rank <= a < rank else rank for a in axes):
            if a >= rank:
                return None
            marks.insert(a, "1")
        arg, inner.rank, axis = tuple(axes), rank, marks.index("R") - rank
    elif op == "Reshape":
        found = reshape_target(view, node, inner)
        if found is None:
            return None
        arg, out_rank, axis = found
        tensors = (arg,) if isinstance(arg, TensorInfo) else ()
        inner.rank = out_rank
    elif op == "Expand":
        target = view.tensor(node.input(1).name).shape or node.input(1).shape
        if target is None or len(target) != 1 or not isinstance(target[0], int):
            return None
        arg, tensors = node.input(1), (node.input(1),)
        inner.rank = max(inner.rank, target[0])
    elif op == "Cast":
        arg = onnx_type = int(node.attrs.get("to", 0))
        if onnx_type not in EXACT_INTEGERS or inner.onnx_type not in EXACT_INTEGERS:
            return None                         # not a number both sides: no index values to keep
    return IndexStep(node, op.lower(), arg, Affine(), tensors, axis, onnx_type)


def reshape_target(view: GraphView, node: NodeInfo, inner: Index) -> "tuple[Any, int, int] | None":
    """(the shape: a tuple when constant, else the shape tensor; the output rank; the index's axis
    after it) of a Reshape that only adds or removes unit axes, as far as the graph says before any
    size is known (run_time_index checks the concrete sizes)."""
    # allowzero is not looked at: a constant shape holding a 0 is no unit reshape (unit_reshape_axis),
    # a run-time one declines per call (run_time_unit_reshape), and without a 0 allowzero changes nothing.
    constant = constant_ints(view, node, 1, "shape")
    arg: Any = None if constant is None else tuple(constant)
    shape: "list[Any]" = [] if constant is None else list(constant)
    if constant is None:                        # a run-time shape: its length and the inferred output
        length = view.tensor(node.input(1).name).shape or node.input(1).shape
        if length is None or len(length) != 1 or not isinstance(length[0], int):
            return None
        out = view.tensor(node.outputs[0].name).shape
        shape = list(out) if out is not None and len(out) == length[0] else [None] * length[0]
        arg = node.input(1)
    in_dims = view.tensor(node.input(0).name).shape
    if in_dims is None or len(in_dims) != inner.rank:
        in_dims = (None,) * inner.rank
    axis = unit_reshape_axis(tuple(in_dims), tuple(shape), inner.axis)
    return None if axis is None else (arg, len(shape), axis)


def offset_index(view: GraphView, node: NodeInfo, depth: int) -> "Index | None":
    """Add(index, scalar), Add(scalar, index) or Sub(index, scalar): the index shifted."""
    sides = ((0, 1),) if node.op_type == "Sub" else ((0, 1), (1, 0))
    for index_side, offset_side in sides:
        term = scalar_term(view, node.input(offset_side))
        if term is None:
            continue
        inner = trace_index(view, node.input(index_side).name, depth + 1)
        if inner is None:
            continue
        offset, offset_t = term
        if node.op_type == "Sub":
            offset = Affine().plus(offset, -1)
        inner.value = inner.value.plus(offset)
        offset_shape = tuple(view.tensor(node.input(offset_side).name).shape or node.input(offset_side).shape)
        inner.rank = max(inner.rank, len(offset_shape))
        inner.steps.append(IndexStep(node, "offset", offset_shape, offset, (offset_t,) if offset_t else (),
                                     inner.axis, inner.onnx_type))
        return inner
    return None


def constant_true(view: GraphView, tensor: str) -> "tuple[int, ...] | None":
    """The shape of an all-true constant (initializer, Constant or ConstantOfShape), else None."""
    value = view.constant(tensor)
    if value is None:
        node = view.producer(tensor)
        if node is None or node.op_type != "ConstantOfShape" or "value" not in node.attrs:
            return None
        shape = view.constant(node.input(0).name)
        fill, fill_type = fill_value(node)
        if shape is None or fill_type != ONNX_BOOL or not fill:
            return None
        return tuple(int(d) for d in np.asarray(shape).reshape(-1))
    value = np.asarray(value)
    if value.dtype != np.bool_ or value.size == 0 or not value.all():
        return None
    return tuple(value.shape)


def comparison(view: GraphView, node: NodeInfo) -> "Expr | None":
    a, b = (trace_index(view, t.name) for t in (node.input(0), node.input(1)))
    if a is None or b is None:
        return difference_comparison(view, node)
    if a.onnx_type != b.onnx_type:
        return None
    if a.axis == -1 and b.axis == -2:
        return Expr("cmp", node.op_type, column=a, row=b, nodes=(node,))
    if a.axis == -2 and b.axis == -1:
        return Expr("cmp", FLIPPED[node.op_type], column=b, row=a, nodes=(node,))
    return None                                 # both along one axis, or a batch axis: no band


def difference_comparison(view: GraphView, node: NodeInfo) -> "Expr | None":
    """`Sub(a, b) OP c` (or `c OP Sub(a, b)`) for indices a, b along the two matrix axes and a scalar
    c (torch's sliding window `i - j < w`): `a OP b + c`, a comparison of the two indices; and
    `Abs(Sub(a, b)) OP c` (`|i - j| <= w`), the band -c .. c or its outside (absolute_band)."""
    for diff_side, c_side in ((0, 1), (1, 0)):
        made = view.producer(node.input(diff_side).name)
        term = scalar_term(view, node.input(c_side))
        if made is None or term is None:
            continue
        absolute = made if made.op_type == "Abs" else None
        sub = view.producer(made.input(0).name) if absolute is not None else made
        if sub is None or sub.op_type != "Sub":
            continue
        cmp = node.op_type if diff_side == 0 else FLIPPED[node.op_type]         # now: difference cmp c
        c_info = node.input(c_side)
        shape = tuple(view.tensor(c_info.name).shape or c_info.shape)
        if absolute is not None:
            return absolute_band(view, node, absolute, sub, cmp, term, shape)
        return difference_leaf(view, node, sub, cmp, term, shape)
    return None


# |d| OP c for the difference d: (d OP c) JOIN (d MIRROR -c), JOIN "and" for the band, "or" outside it
ABSOLUTE = {"LessOrEqual": ("and", "GreaterOrEqual"), "Less": ("and", "Greater"),
            "Greater": ("or", "Less"), "GreaterOrEqual": ("or", "LessOrEqual")}


def absolute_band(view: GraphView, node: NodeInfo, absolute: NodeInfo, sub: NodeInfo, cmp: str,
                  term: "tuple[Affine, TensorInfo | None]", shape: "tuple[int, ...]") -> "Expr | None":
    """`|a - b| cmp c`: two difference leaves over one Sub and Abs. The Abs and the Sub are covered by
    the pattern when nothing else reads them (like the index steps); `|d| == c` is two diagonals, no band."""
    if cmp not in ABSOLUTE:
        return None
    join, mirror = ABSOLUTE[cmp]
    shift, tensor = term
    high = difference_leaf(view, node, sub, cmp, term, shape, absolute)
    low = difference_leaf(view, node, sub, mirror, (Affine().plus(shift, -1), tensor), shape, absolute)
    if high is None or low is None:
        return None
    return Expr(join, children=(high, low), nodes=(node,))


def integer_bound(op: str, bound: Any) -> "tuple[str, Any]":
    """`d op bound` for an integer d and a constant bound, with an integer bound: d < 2.5 is d <= 2,
    d >= -1.5 is d >= -1 (Equal, NaN and the infinities are left as they are: declined per call)."""
    if not isinstance(bound, float) or not np.isfinite(bound) or bound == int(bound) or op == "Equal":
        return op, bound
    if op in ("Less", "LessOrEqual"):
        return "LessOrEqual", int(np.floor(bound))
    return "GreaterOrEqual", int(np.ceil(bound))


def difference_leaf(view: GraphView, node: NodeInfo, sub: NodeInfo, cmp: str,
                    term: "tuple[Affine, TensorInfo | None]", shape: "tuple[int, ...]",
                    absolute: "NodeInfo | None" = None) -> "Expr | None":
    """The leaf `Sub(a, b) cmp c` read as `column cmp' row + c'`, or None when a and b are no indices
    along the two matrix axes (an unsigned difference wraps below 0: no leaf, and under an Abs a leaf
    that declines with the reason)."""
    a, b = (trace_index(view, t.name) for t in (sub.input(0), sub.input(1)))
    if a is None or b is None or a.onnx_type != b.onnx_type or {a.axis, b.axis} != {-1, -2}:
        return None
    if a.onnx_type not in EXACT_INTEGERS:
        return None
    unsupported = ""
    if EXACT_INTEGERS[a.onnx_type][0] == 0:
        if absolute is None:
            return None                         # an unsigned difference wraps below 0
        unsupported = (f"Abs {absolute.name} reads an unsigned difference ({onnx_type_name(a.onnx_type)}), which "
                       "wraps below 0: it is no |i - j| and its mask no band")
    shift, tensor = term
    if tensor is None:
        cmp, bound = integer_bound(cmp, shift.const)
        shift = Affine(bound)
    if a.axis == -1:                        # column - row cmp c: column cmp row + c
        column, row, minuend = a, b, "column"
    else:                                   # row - column cmp c: column FLIPPED(cmp) row - c
        column, row, minuend, cmp, shift = b, a, "row", FLIPPED[cmp], Affine().plus(shift, -1)
    # One difference compared twice (`(i - j >= 0) & (i - j < w)`): the Sub is covered with the
    # index steps, when nothing outside the pattern reads it; the generator never reads it.
    own = absolute is None and sole_consumer(view, sub.outputs[0].name) is not None
    return Expr("cmp", cmp, column=column, row=row, nodes=() if absolute else (node, sub) if own else (node,),
                shift=shift, shift_tensors=(tensor,) if tensor is not None else (), shift_shape=shape,
                minuend=minuend, sub=sub, absolute=absolute, unsupported=unsupported)


def expression(view: GraphView, tensor: str, root: bool = False) -> "Expr | None":
    """The band expression producing `tensor`; below the root every value is read once, inside it."""
    if not root and sole_consumer(view, tensor) is None:
        shape = constant_true(view, tensor)     # a shared all-true constant is left where it is
        return None if shape is None else Expr("true", shape=shape)
    shape = constant_true(view, tensor)
    if shape is not None:
        return Expr("true", shape=shape)
    node = view.producer(tensor)
    if node is None:
        return None
    if node.op_type in COMPARISONS:
        return comparison(view, node)
    if node.op_type in ("And", "Or") or passes_through(node):
        return combination(node, lambda t: expression(view, t), ("And", "Or"))
    return None


def grow(view: GraphView, anchor: NodeInfo) -> "tuple[str, Expr] | None":
    """The largest band expression above the anchor comparison: its output and its tree."""
    top = anchor.outputs[0].name
    best = expression(view, top, root=True)
    if best is None:
        return None
    while True:
        user = sole_consumer(view, top)
        if user is None or user.op_type not in ("And", "Or", "Not", "Identity", "Cast"):
            return top, best
        if user.op_type == "Cast" and user.attrs.get("to") != ONNX_BOOL:
            return top, best
        candidate = expression(view, user.outputs[0].name, root=True)
        if candidate is None:
            return top, best
        top, best = user.outputs[0].name, candidate


# -- concrete sizes -----------------------------------------------------------------------------

def progression(data: np.ndarray, axis: int) -> "tuple[Any, int]":
    """(first value, length) of a computed index: r0 + i along `axis`, the same along every other."""
    length = data.shape[axis]
    if data.size == 0:
        return 0, length
    vector = np.moveaxis(data, axis, -1).reshape(-1, length)
    if not (vector == vector[:1]).all():
        raise Decline("an index input differs along another axis")
    vector = vector[0]
    first = vector[0].item()
    if vector.dtype.kind == "f" and (not np.isfinite(first) or first != int(first)):
        raise Decline(f"an index starting at {first!r} is not an integer")
    if not np.array_equal(vector - vector[0], np.arange(length, dtype=vector.dtype)):
        raise Decline("an index input is not r0 + i with step 1")
    return first, length


def run_time_index(ix: Index, covered: "frozenset[str]", f: Fragment) -> "tuple[int, int, tuple[int, ...]]":
    """(first value, length, shape) of an index on the concrete values: from the Range's start and
    limit when the Range is covered, else from the value of the last node left to ONNX. Declines
    where a value-preserving step would not keep the values (a Cast or offset that wraps or rounds,
    a Reshape that moves more than unit axes)."""
    split = next((i for i, step in enumerate(ix.steps) if step.node.name in covered), len(ix.steps))
    values = {t.name: np.asarray(f.value(t)).reshape(-1)[0].item()
              for step in ix.steps[split:] if step.op in ("range", "offset") for t in step.tensors}
    if split == 0:
        start, limit = ix.steps[0].offset.value(values), ix.limit.value(values)
        first, length = integer(start, "a Range start"), max(int(np.ceil(limit - start)), 0)
        shape: "tuple[int, ...]" = (length,)
        exact(first, length, ix.steps[0])
    else:
        boundary = ix.steps[split - 1]
        data = f.value(boundary.node.outputs[0])
        if data.ndim < -boundary.axis:
            raise Decline(f"an index input of shape {list(data.shape)} has no axis {boundary.axis}")
        first, length = progression(data, boundary.axis)
        shape = tuple(data.shape)
    axis = ix.steps[max(split - 1, 0)].axis
    for step in ix.steps[max(split, 1):]:
        shape = step_shape(step, shape, axis, length, f)
        if step.op in ("offset", "cast"):
            first = integer(first + (step.offset.value(values) if step.op == "offset" else 0), "an index value")
            exact(first, length, step)
        axis = step.axis
    if shape[ix.axis] != length:
        raise Decline(f"an Expand stretches a Range of {length} to {shape[ix.axis]} along its axis")
    return integer(first, "an index starting at"), length, shape


def exact(first: int, length: int, step: IndexStep) -> None:
    """Decline unless the index values first .. first + length - 1 are exact in the step's type."""
    what = {"range": "Range values", "offset": f"index values after {step.node.op_type} {step.node.name}",
            "cast": f"index values cast by {step.node.name}"}[step.op]
    reason = exact_reason(first, first + max(length - 1, 0), step.onnx_type, what)
    if reason:
        raise Decline(reason)


def step_shape(step: IndexStep, shape: "tuple[int, ...]", axis: int, length: int, f: Fragment) -> "tuple[int, ...]":
    """The concrete shape after a shape step (Unsqueeze, Reshape, Expand, offset broadcast)."""
    if step.op == "unsqueeze":
        rank = len(shape) + len(step.arg)
        dims = list(shape)
        for a in sorted(a % rank for a in step.arg):
            dims.insert(a, 1)
        return tuple(dims)
    if step.op == "reshape":
        target = tuple(int(d) for d in f.value(step.arg).reshape(-1)) if isinstance(step.arg, TensorInfo) \
            else tuple(step.arg)
        return run_time_unit_reshape(shape, target, axis, step.axis, bool(int(step.node.attrs.get("allowzero", 0))))
    if step.op == "expand":
        target = f.dims(step.arg)
        return broadcast(target, shape, f"Expand to {list(target)} does not broadcast {list(shape)}")
    if step.op == "offset":
        return broadcast(step.arg, shape, f"offset of shape {list(step.arg)} does not broadcast {list(shape)}")
    return shape


def integer(value: Any, what: str) -> int:
    if isinstance(value, float):
        if not np.isfinite(value) or value != int(value):
            raise Decline(f"{what} {value!r} is not an integer: the comparison is no exact band")
        value = int(value)
    return int(value)


def comparison_gap(c: Expr, covered: "frozenset[str]", f: Fragment) -> "tuple[int, list[tuple[Index, tuple]]]":
    """A comparison's gap (column - row - shift on the concrete values) and its indices' shapes;
    a Sub-then-compare declines where ONNX's Sub would not be exact in the index type."""
    (column, columns, shape), (row, rows, row_shape) = (run_time_index(ix, covered, f) for ix in (c.column, c.row))
    shift = integer(c.shift.value({t.name: f.value(t).reshape(-1)[0].item() for t in c.shift_tensors}),
                    "a compared difference's bound")
    if c.minuend:
        a, b, la, lb = (column, row, columns, rows) if c.minuend == "column" else (row, column, rows, columns)
        lo, hi = a - (b + max(lb - 1, 0)), a + max(la - 1, 0) - b
        sub = c.sub.name if c.sub else c.nodes[0].name
        reason = exact_reason(lo, hi, c.column.onnx_type, f"the differences of {sub}")
        if reason is None and c.absolute is not None:        # Abs(type min) wraps: -d must fit too
            reason = exact_reason(-hi, -lo, c.column.onnx_type,
                                  f"the differences of {sub} negated by Abs {c.absolute.name}")
        if reason:
            raise Decline(reason)
    return column - row - shift, [(c.column, shape), (c.row, row_shape)]


class RangeComparisonMask(IdiomRule):
    # Cmp(column index, row index) with Range(start, limit, 1) + offsets on each side, And / Or / Not
    # of them, optional Cast and Expand -> one DIAGONAL_MATRIX1 (DIAGONAL_MATRIX for one diagonal).
    operators = ("DIAGONAL_MATRIX1",)

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        grown = grow(view, anchor)
        if grown is None:
            return None
        y, expr = grown
        tail = cast_expand_tail(view, y, ONNX_BOOL)
        covered = list(expr.nodes) + list(tail.nodes)
        out_type, y, expand_shape = tail.onnx_type, tail.output, tail.expand_shape
        cmps = [l for l in leaves(expr) if l.kind == "cmp"]
        # The index nodes are covered when nothing outside the pattern reads them (exporters share
        # the Ranges and Unsqueezes with the padding mask's Gather; those stay ONNX).
        names = {n.name for n in covered}
        candidates = {n.name: n for c in cmps for n in (c.absolute, c.sub) if n is not None}
        candidates.update((n.name, n) for c in cmps for ix in (c.column, c.row) for n in ix.nodes)
        changed = True
        while changed:
            changed = False
            for name, node in candidates.items():
                if name in names:
                    continue
                outs = [o.name for o in node.outputs]
                if all(not view.is_graph_output(o) and all(c.name in names for c in view.consumers(o)) for o in outs):
                    names.add(name)
                    covered.append(node)
                    changed = True
        order = [anchor] + [n for n in covered if n.name != anchor.name]
        # What the fragment reads: the values of the index chains' covered steps, and where a chain
        # is left to ONNX below them (a shared Range or Unsqueeze), the value the first covered step reads.
        tensors: "dict[str, TensorInfo]" = {}
        for ix in (ix for c in cmps for ix in (c.column, c.row)):
            split = next((i for i, step in enumerate(ix.steps) if step.node.name in names), len(ix.steps))
            if split > 0:
                boundary = ix.steps[split - 1].node.outputs[0]
                tensors[boundary.name] = boundary
            for step in ix.steps[split:]:
                tensors.update((t.name, t) for t in step.tensors)
        tensors.update((t.name, t) for c in cmps for t in c.shift_tensors)
        if expand_shape is not None:
            tensors[expand_shape.name] = expand_shape
        known = self.known_band(expr)
        single = (known is not None and not known[2] and known[1] - known[0] == 1) or \
            (expr.kind == "cmp" and expr.op == "Equal")
        unsupported = next((c.unsupported for c in cmps if c.unsupported), "")
        rendered = "no band" if unsupported else describe(known) if known is not None else self.unknown_band(expr)
        out_shape = view.tensor(y).shape
        extra: "dict[str, Any]" = {"band": rendered}
        mask = ""
        if out_shape is not None and all(isinstance(d, int) for d in out_shape):
            size = product(out_shape) * np.dtype(onnx_to_numpy(out_type)).itemsize
            extra["mask_bytes_saved"] = size
            mask = f"{size} mask bytes"
        else:
            extra["mask_bytes_per_element"] = int(np.dtype(onnx_to_numpy(out_type)).itemsize)
            mask = f"the mask ({per_element(extra['mask_bytes_per_element'])})"
        kinds = sorted({n.op_type for n in covered})
        note = (f"{', '.join(kinds)} {'becomes' if len(kinds) == 1 else 'become'} one generator: {rendered}; "
                f"{mask} generated on the device, "
                "not sent from the host")
        return Found(tuple(n.name for n in order), tuple(tensors.values()), (y,), value_inputs=tuple(tensors),
                     note=note, operators=("DIAGONAL_MATRIX",) if single else None, extra=extra,
                     expr=expr, out_type=out_type, expand_shape=expand_shape, single=single,
                     covered=frozenset(names))

    @staticmethod
    def known_band(expr: Expr) -> "tuple[int, int, bool] | None":
        """The band when no run-time value moves it (the run-time terms cancel), unclipped."""
        gaps = {}
        for c in (l for l in leaves(expr) if l.kind == "cmp"):
            gap = c.column.value.plus(c.row.value, -1).plus(c.shift, -1)
            if gap.terms or gap.const != int(gap.const):
                return None
            gaps[id(c)] = int(gap.const)
        return as_band(diagonals(expr, gaps, (-INF, INF)), (-INF, INF))

    @staticmethod
    def unknown_band(expr: Expr) -> str:
        """What the report says of a band known_band cannot give: what keeps it from being known."""
        for c in (l for l in leaves(expr) if l.kind == "cmp"):
            gap = c.column.value.plus(c.row.value, -1).plus(c.shift, -1)
            if gap.terms:
                return "x - y bounds from run-time offsets"
            if gap.const != int(gap.const):
                return f"x - y bounds between diagonals (indices {gap.const!r} apart)"
        return "no band of diagonals"

    def decline_reason(self, level: FeatureLevel, expr: Expr, out_type: int, expand_shape: Any, single: bool,
                       covered: "frozenset[str]") -> "str | None":
        unsupported = next((c.unsupported for c in leaves(expr) if c.unsupported), "")
        return unsupported or band_reason(out_type, 1, single, level)

    def rewrite(self, f: Fragment, expr: Expr, out_type: int, expand_shape: "TensorInfo | None",
                single: bool, covered: "frozenset[str]") -> Graph:
        cmps = [l for l in leaves(expr) if l.kind == "cmp"]
        shapes, gaps = [], {}
        full: "tuple[int, ...]" = ()
        for c in cmps:
            gaps[id(c)], found = comparison_gap(c, covered, f)
            shapes += found
            full = broadcast(full, c.shift_shape, f"a bound of shape {list(c.shift_shape)} does not broadcast")
        for _ix, shape in shapes:
            full = broadcast(full, shape, f"index shapes {list(full)} and {list(shape)} do not broadcast")
        for leaf in leaves(expr):
            if leaf.kind == "true":
                full = broadcast(full, leaf.shape, f"an all-true {list(leaf.shape)} does not broadcast")
        if expand_shape is not None:
            target = f.dims(expand_shape)
            full = broadcast(target, full, f"Expand to {list(target)} does not broadcast the mask {list(full)}")
        if len(full) < 2:
            raise Decline(f"the mask has shape {list(full)}, not a matrix")
        for ix, shape in shapes:
            if full[ix.axis] != shape[ix.axis]:
                raise Decline(f"a Range of {shape[ix.axis]} is broadcast to {full[ix.axis]} along its own axis")
        rows, cols = full[-2:]
        if rows == 0 or cols == 0 or product(full) == 0:
            return f.empty(f.outputs[0], out_type, full)
        universe = (-(rows - 1), cols)
        band = as_band(diagonals(expr, gaps, universe), universe)
        if band is None:
            raise Decline(f"the mask is no band of diagonals (gaps {sorted(gaps.values())})")
        begin, end, inverted = band
        return emit_band(f.graph, f.names, f.outputs[0], out_type, full, begin, end, 1, f.level, inverted,
                         plain=single)


RULE = RangeComparisonMask()
# Larger patterns than eye_from_ranges (priority 10) except on Equal, where torch.eye's form keeps its rule.
for _op in COMPARISONS:                                      # one DIAGONAL_MATRIX1 per mask
    register_idiom("range_comparison_mask", _op, 5 if _op == "Equal" else 10, RULE)
