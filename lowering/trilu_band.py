"""The sliding window written with Trilus of one shared fill, as torch's exporters write
`o.tril(0) & ~o.tril(-w)` and `ones.tril() - ones.tril(-w)`: one ConstantOfShape / Expand fill read
by two Trilus, joined by Not / And / Or (a bool fill) or Sub (a numeric one). Each Trilu keeps the
diagonals `x - y <= k` (upper=0) or `x - y >= k` (upper=1), so the tree is a set of diagonals
(diagonal_sets) and one DIAGONAL_MATRIX1 when it is a band. A Sub of two 0/1 triangles is a set
difference only when the subtrahend lies inside the minuend (else it holds -1s): checked on the
constant ks at compile time, on fed ones per call."""
from __future__ import annotations

from typing import Any

import numpy as np

from onnx_dml_lowering.ir import Graph
from onnx_dml_lowering.ir.dtypes import ONNX_BOOL, from_onnx, onnx_to_numpy
from onnx_dml_lowering.ir.feature_levels import FeatureLevel

from .common import broadcast, carrier_type, cast_expand_tail, one_value
from .diagonal import band_reason, emit_band
from .diagonal_idioms import uniform_fill
from .diagonal_sets import (INF, Affine, Expr, as_band, combination, describe, diagonals, is_bool_cast, leaves,
                           passes_through, per_element, uncontained_sub)
from .match import Decline, Found, Fragment, GraphView, IdiomRule, constant_scalar, sole_consumer
from .node import NodeInfo, TensorInfo, product
from .registry import register_idiom

JOINS = ("And", "Or", "Sub", "Not", "Identity")
MAX_DEPTH = 16


def fill_of(view: GraphView, trilu: NodeInfo) -> "NodeInfo | None":
    """The ConstantOfShape / Expand a Trilu reads directly, shared or not."""
    fill = view.producer(trilu.input(0).name)
    return fill if fill is not None and fill.op_type in ("ConstantOfShape", "Expand") else None


def fill_below(view: GraphView, tensor: str) -> "NodeInfo | None":
    """The fill the first Trilu below `tensor`, through the joins, reads (each value visited once:
    an anchor on every Sub of a model must not walk an arithmetic DAG's paths)."""
    todo, seen = [(tensor, 0)], set()
    while todo:
        name, depth = todo.pop()
        node = view.producer(name)
        if node is None or depth > MAX_DEPTH or name in seen:
            continue
        seen.add(name)
        if node.op_type == "Trilu":
            return fill_of(view, node)
        if node.op_type in JOINS or is_bool_cast(node):
            todo += [(t.name, depth + 1) for t in node.inputs if t is not None]
    return None


def trilu_leaf(view: GraphView, node: NodeInfo, truthy: bool) -> Expr:
    """`x - y <= k` (upper=0) or `x - y >= k` (upper=1); k constant or a fed tensor."""
    k = node.inputs[1] if len(node.inputs) > 1 else None
    value = 0 if k is None else constant_scalar(view, k)
    shift: Affine = Affine(int(value)) if value is not None else Affine()
    tensors: "tuple[TensorInfo, ...]" = ()
    if value is None and k is not None:         # a fed k
        shift, tensors = Affine(0, ((k.name, 1),)), (k,)
    op = ("GreaterOrEqual" if int(node.attrs.get("upper", 1)) else "LessOrEqual") if truthy else "Never"
    return Expr("trilu", op, nodes=(node,), shift=shift, shift_tensors=tensors)


def tree(view: GraphView, tensor: str, fill: NodeInfo, truthy: bool, root: bool = False,
         depth: int = 0) -> "Expr | None":
    """The set expression producing `tensor` from `fill` and Trilus of it; below the root every
    value is read once, inside it (the fill itself excepted: it is shared by definition)."""
    if tensor == fill.outputs[0].name:
        return None if root else Expr("trilu", "Always" if truthy else "Never")
    node = view.producer(tensor)
    if node is None or depth > MAX_DEPTH or (not root and sole_consumer(view, tensor) is None):
        return None
    if node.op_type == "Trilu":
        return trilu_leaf(view, node, truthy) if node.input(0).name == fill.outputs[0].name else None
    if node.op_type in ("And", "Or", "Sub") or passes_through(node):
        return combination(node, lambda t: tree(view, t, fill, truthy, depth=depth + 1), ("And", "Or", "Sub"))
    return None


def grow(view: GraphView, anchor: NodeInfo, fill: NodeInfo, truthy: bool) -> "tuple[str, Expr] | None":
    """The largest set expression above the anchor (a Trilu, or the And / Or / Sub joining them):
    its output and its tree; None when it is one Trilu alone (trilu_constant_fill's)."""
    top = anchor.outputs[0].name
    best = trilu_leaf(view, anchor, truthy) if anchor.op_type == "Trilu" else tree(view, top, fill, truthy, True)
    if best is None:
        return None
    while True:
        user = sole_consumer(view, top)
        candidate = None
        if user is not None and (user.op_type in JOINS or is_bool_cast(user)):
            candidate = tree(view, user.outputs[0].name, fill, truthy, root=True)
        if user is None or candidate is None:
            return None if best.kind == "trilu" else (top, best)
        top, best = user.outputs[0].name, candidate


def leaf_gaps(expr: Expr, k_values: "dict[str, int] | None") -> "dict[int, int] | None":
    """Each Trilu leaf's gap (-k, see diagonal_sets.diagonals); None when a k is fed and not given."""
    gaps = {}
    for leaf in leaves(expr):
        if leaf.shift.terms and k_values is None:
            return None
        gaps[id(leaf)] = -int(leaf.shift.value(k_values or {}))
    return gaps


def sub_reason(expr: Expr, gaps: "dict[int, int]", universe: "tuple[int, int]") -> "str | None":
    """Why a Sub of the tree is no set difference: its subtrahend keeps diagonals its minuend does not."""
    sub = uncontained_sub(expr, gaps, universe)
    if sub is None:
        return None
    minuend, subtrahend = (as_band(diagonals(c, gaps, universe), universe) for c in sub.children)
    said = [describe(b) if b is not None else "no band" for b in (minuend, subtrahend)]
    return (f"Sub {sub.nodes[0].name} subtracts {said[1]} from {said[0]}, which does not contain it: "
            "the difference holds -1s, no 0/1 mask")


class TriluBand(IdiomRule):
    # Trilus of one shared fill joined by Not / And / Or (bool) or Sub (numeric), optional Cast after
    # -> one DIAGONAL_MATRIX1 over the band the tree keeps (DIAGONAL_MATRIX for one diagonal).
    operators = ("DIAGONAL_MATRIX1",)

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        fill = fill_of(view, anchor) if anchor.op_type == "Trilu" else fill_below(view, anchor.outputs[0].name)
        uniform = None if fill is None else uniform_fill(view, fill)
        if fill is None or uniform is None or from_onnx(carrier_type(uniform[1])) is None:
            return None
        value, value_type, operand_shape = uniform
        logical = value_type == ONNX_BOOL
        grown = grow(view, anchor, fill, bool(value) if logical else True)
        if grown is None:
            return None
        y, expr = grown
        kinds = {n.op_type for n in expr.nodes}
        if logical == ("Sub" in kinds) or (not logical and kinds & {"And", "Or", "Not", "Cast"}):
            return None                         # ONNX's types: And / Or / Not of bool, Sub of numbers
        tail = cast_expand_tail(view, y, ONNX_BOOL, expand=False) if logical else None
        out_type, y = (tail.onnx_type, tail.output) if tail is not None else (value_type, y)
        covered = list(expr.nodes) + list(tail.nodes if tail is not None else ())
        names = {n.name for n in covered}
        fill_out = fill.outputs[0].name
        if not view.is_graph_output(fill_out) and all(c.name in names for c in view.consumers(fill_out)):
            covered.append(fill)                # nothing else reads it: never materialised
        shape = fill.input(1 if fill.op_type == "Expand" else 0)
        fed = {t.name: t for leaf in leaves(expr) for t in leaf.shift_tensors}
        gaps = leaf_gaps(expr, None)
        band = None if gaps is None else as_band(diagonals(expr, gaps, (-INF, INF)), (-INF, INF))
        reason = self.static_reason(expr, gaps, value, logical)
        rendered = "no band" if reason else describe(band) if band else \
            "x - y bounds from run-time k" if gaps is None else "no band of diagonals"
        single = band is not None and not band[2] and band[1] - band[0] == 1
        order = [anchor] + [n for n in covered if n.name != anchor.name]
        return Found(tuple(n.name for n in order), (shape,) + tuple(fed.values()), (y,),
                     value_inputs=(shape.name,) + tuple(fed), note=self.note_for(view, covered, rendered, y, out_type),
                     operators=("DIAGONAL_MATRIX",) if single else None, extra=self.extra_for(view, y, out_type, rendered),
                     expr=expr, shape=shape, operand_shape=operand_shape, out_type=out_type,
                     band_value=value if not logical else 1, single=single, reason=reason)

    @staticmethod
    def static_reason(expr: Expr, gaps: "dict[int, int] | None", value: Any, logical: bool) -> str:
        """Why the tree is no mask whatever the sizes: a non-finite value under Sub, or a Sub of
        constant triangles the minuend does not contain."""
        if not logical and np.asarray(value).dtype.kind == "f" and not np.isfinite(value):
            shown = repr(float(value))
            return f"a fill of {shown}: {shown} - {shown} is NaN where the Sub's triangles overlap, not 0"
        return "" if gaps is None else sub_reason(expr, gaps, (-INF, INF)) or ""

    @staticmethod
    def extra_for(view: GraphView, y: str, out_type: int, rendered: str) -> "dict[str, Any]":
        out_shape, size = view.tensor(y).shape, int(np.dtype(onnx_to_numpy(out_type)).itemsize)
        if out_shape is not None and all(isinstance(d, int) for d in out_shape):
            return {"band": rendered, "mask_bytes_saved": product(out_shape) * size}
        return {"band": rendered, "mask_bytes_per_element": size}

    def note_for(self, view: GraphView, covered: "list[NodeInfo]", rendered: str, y: str, out_type: int) -> str:
        extra = self.extra_for(view, y, out_type, rendered)
        mask = f"{extra['mask_bytes_saved']} mask bytes" if "mask_bytes_saved" in extra else \
            f"the mask ({per_element(extra['mask_bytes_per_element'])})"
        kinds = sorted({n.op_type for n in covered})
        return f"{', '.join(kinds)} become one generator: {rendered}; {mask} generated on the device, not sent from the host"

    def decline_reason(self, level: FeatureLevel, expr: Expr, shape: TensorInfo, operand_shape: "tuple[int, ...]",
                       out_type: int, band_value: Any, single: bool, reason: str) -> "str | None":
        return reason or band_reason(out_type, band_value, single, level)

    def rewrite(self, f: Fragment, expr: Expr, shape: TensorInfo, operand_shape: "tuple[int, ...]",
                out_type: int, band_value: Any, single: bool, reason: str) -> Graph:
        dims = f.dims(shape)
        if operand_shape:
            dims = broadcast(operand_shape, dims, f"Expand of {list(operand_shape)} to {list(dims)} does not broadcast")
        if len(dims) < 2:
            raise Decline(f"Trilu needs at least 2 dimensions; its input has shape {list(dims)}")
        if product(dims) == 0:
            return f.empty(f.outputs[0], out_type, dims)
        k_values = {t.name: int(one_value(f.value(t), f"Trilu's input k {t.name!r}"))
                    for leaf in leaves(expr) for t in leaf.shift_tensors}
        gaps = leaf_gaps(expr, k_values)
        assert gaps is not None                 # every fed k is given
        universe = (-(dims[-2] - 1), dims[-1])
        why = sub_reason(expr, gaps, universe)
        if why:
            raise Decline(why)
        band = as_band(diagonals(expr, gaps, universe), universe)
        if band is None:
            raise Decline(f"the Trilus keep no band of diagonals (ks {sorted(-g for g in gaps.values())})")
        begin, end, inverted = band
        return emit_band(f.graph, f.names, f.outputs[0], out_type, dims, begin, end, band_value, f.level, inverted,
                         plain=single)


TRILU_BAND = TriluBand()
# Above trilu_constant_fill (10), which then takes each Trilu of a tree declined here; on the joins
# too, where a tree declined at its Trilus says why (their own rule has lowered them by then).
register_idiom("trilu_band", "Trilu", 20, TRILU_BAND)          # one DIAGONAL_MATRIX1 per window
for _op in ("And", "Or", "Sub"):
    register_idiom("trilu_band", _op, 10, TRILU_BAND)
