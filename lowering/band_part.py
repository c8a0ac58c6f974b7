"""tf2onnx's MatrixBandPart (tf.linalg.band_part: the causal mask of Keras / TF transformers) built
from an index grid: `CumSum(Expand(1, rows * cols), 0, exclusive=1)` reshaped to [rows, cols], its
row `Div` and column `Mod` by the column count, their difference `Sub(col, row)` = j - i, compared
with scalar bounds (`Greater`, optionally under `Not`, joined by `And` / `Or`) and cast to the data's
type. Every comparison is a condition on the diagonal j - i alone, so the mask is one
DIAGONAL_MATRIX1 band when the comparisons' set of diagonals is one (tf2onnx's opset >= 11 handler:
num_upper >= 0 gives Not(Greater(j - i, num_upper)), num_lower >= 0 gives
Not(Greater(-num_lower, j - i)), -1 leaves that side open)."""
from __future__ import annotations

from typing import Any

import numpy as np

from onnx_dml_lowering.ir import Graph
from onnx_dml_lowering.ir.dtypes import ONNX_BOOL, ONNX_INT32, ONNX_INT64, onnx_to_numpy, onnx_type_name
from onnx_dml_lowering.ir.feature_levels import FeatureLevel
from onnx_dml_lowering.ir.support import DIAGONAL_MATRIX1

from .common import EXACT_INTEGER_LIMIT, broadcast, cast_expand_tail, reshape_zero_reason
from .diagonal import emit_band
from .diagonal_sets import FLIPPED, INF, Expr, as_band, describe, diagonals, leaves, per_element
from .match import Decline, Found, Fragment, GraphView, IdiomRule, constant_scalar, sole_consumer
from .node import NodeInfo, TensorInfo
from .registry import register_idiom

BOUND_OPS = ("Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal")
INTEGER_TYPES = (ONNX_INT32, ONNX_INT64)        # the grid's: exact integer division, its largest index must fit


def _is_diff(tensor: "TensorInfo | None", diff: str) -> bool:
    return tensor is not None and tensor.name == diff


def _bound_expr(view: GraphView, tensor: str, diff: str, root: bool = False) -> "Expr | None":
    """The condition on d = j - i that produces `tensor`: comparisons of the difference with a scalar,
    Not / And / Or of them; below the root every value is read once, inside the expression. A leaf's
    `column` slot holds the scalar operand's TensorInfo (its bound is read when the sizes are known)
    and `op` the comparison as `difference OP bound`."""
    if not root and sole_consumer(view, tensor) is None:
        return None
    node = view.producer(tensor)
    if node is None:
        return None
    if node.op_type in BOUND_OPS and len(node.inputs) == 2:
        a, b = node.input(0), node.input(1)
        if _is_diff(a, diff) and not _is_diff(b, diff):
            op, bound = node.op_type, b
        elif _is_diff(b, diff) and not _is_diff(a, diff):
            op, bound = FLIPPED[node.op_type], a
        else:
            return None
        return Expr("cmp", op, column=bound, nodes=(node,))
    if node.op_type in ("And", "Or"):
        left, right = (_bound_expr(view, t.name, diff) for t in (node.input(0), node.input(1)))
        if left is None or right is None:
            return None
        return Expr(node.op_type.lower(), children=(left, right), nodes=(node,) + left.nodes + right.nodes)
    if node.op_type in ("Not", "Identity"):
        inner = _bound_expr(view, node.input(0).name, diff)
        if inner is None:
            return None
        if node.op_type == "Identity":
            return Expr(inner.kind, inner.op, inner.column, None, inner.children, (), (node,) + inner.nodes)
        return Expr("not", children=(inner,), nodes=(node,) + inner.nodes)
    return None


def _bound_source(view: GraphView, bound: TensorInfo) -> "tuple[TensorInfo, int, list[NodeInfo]]":
    """A bound through Neg and integer Casts read only here (tf2onnx's Neg(num_lower), and Cast of a
    num_lower / num_upper that is not int64): the tensor under them, the sign, the nodes passed."""
    scale = 1
    nodes: "list[NodeInfo]" = []
    while True:
        node = view.producer(bound.name)
        if node is None or sole_consumer(view, bound.name) is None:
            return bound, scale, nodes
        if node.op_type == "Neg":
            scale = -scale
        elif not (node.op_type == "Cast" and node.input(0).onnx_type in INTEGER_TYPES
                  and int(node.attrs.get("to", 0)) in INTEGER_TYPES):
            return bound, scale, nodes
        nodes.append(node)
        bound = node.input(0)


def _top(view: GraphView, diff: str) -> "tuple[str, Expr] | None":
    """The largest condition over the difference: climbs from its first reader through Not / And /
    Or while the expression stays one over the difference alone."""
    readers = view.consumers(diff)
    if not readers or view.is_graph_output(diff):
        return None
    top = readers[0].outputs[0].name
    best = _bound_expr(view, top, diff, root=True)
    if best is None:
        return None
    while True:
        user = sole_consumer(view, top)
        if user is None or user.op_type not in ("Not", "And", "Or", "Identity"):
            break
        candidate = _bound_expr(view, user.outputs[0].name, diff, root=True)
        if candidate is None:
            break
        top, best = user.outputs[0].name, candidate
    covered = {n.name for n in best.nodes}
    if any(r.name not in covered for r in readers):
        return None                      # the difference is read elsewhere too: not one mask
    return top, best


class IndexGridBandMask(IdiomRule):
    # CumSum(Expand(1, n), exclusive) -> Reshape -> Div / Mod -> Sub -> Greater / Not / And -> Cast
    # (tf2onnx's MatrixBandPart) -> one DIAGONAL_MATRIX1 band (DIAGONAL_MATRIX for one diagonal).
    operators = ("DIAGONAL_MATRIX1",)

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        reshape = sole_consumer(view, anchor.outputs[0].name)
        if reshape is None or reshape.op_type != "Reshape" or reshape.input(0).name != anchor.outputs[0].name:
            return None
        grid = reshape.outputs[0].name
        readers = view.consumers(grid)
        ops = sorted(n.op_type for n in readers)
        if ops != ["Div", "Mod"] or view.is_graph_output(grid) \
                or any(n.input(0).name != grid for n in readers):
            return None
        div = next(n for n in readers if n.op_type == "Div")
        mod = next(n for n in readers if n.op_type == "Mod")
        sub = sole_consumer(view, div.outputs[0].name)
        if sub is None or sub.op_type != "Sub" or sole_consumer(view, mod.outputs[0].name) is not sub:
            return None
        names = [t.name for t in (sub.input(0), sub.input(1))]
        if names == [mod.outputs[0].name, div.outputs[0].name]:
            sign = 1                                     # column - row = j - i
        elif names == [div.outputs[0].name, mod.outputs[0].name]:
            sign = -1
        else:
            return None
        grown = _top(view, sub.outputs[0].name)
        if grown is None:
            return None
        y, expr = grown
        if sign < 0:                     # -d OP t is d OP' -t with OP' the flipped comparison
            for leaf in leaves(expr):
                leaf.op = FLIPPED[leaf.op]
        covered = [anchor, reshape, div, mod, sub] + list(expr.nodes)
        scales = {}
        for leaf in leaves(expr):
            leaf.column, scales[id(leaf)], passed = _bound_source(view, leaf.column)
            covered += passed
        tail = cast_expand_tail(view, y, ONNX_BOOL, expand=False)
        covered += tail.nodes
        out_type, y = tail.onnx_type, tail.output
        expand = view.producer(anchor.input(0).name)
        if expand is None or expand.op_type != "Expand" or sole_consumer(view, anchor.input(0).name) is not anchor:
            return None
        covered.insert(0, expand)
        start, count = expand.input(0), expand.input(1)
        tensors = [count]
        bounds = [leaf.column for leaf in leaves(expr)]
        tensors += [reshape.input(1), div.input(1), mod.input(1)] + bounds
        reads = {t.name: t for t in tensors}
        known = self.known_band(view, expr, sign, scales)
        single = known is not None and not known[2] and known[1] - known[0] == 1
        rendered = describe(known) if known is not None else "x - y bounds from run-time values"
        kinds = sorted({n.op_type for n in covered})
        note = (f"{', '.join(kinds)} (an index grid) {'becomes' if len(kinds) == 1 else 'become'} one generator: "
                f"{rendered}; the mask "
                f"({per_element(np.dtype(onnx_to_numpy(out_type)).itemsize)}) generated on the device")
        return Found(tuple(n.name for n in covered), tuple(reads.values()), (y,), value_inputs=tuple(reads),
                     note=note, operators=("DIAGONAL_MATRIX",) if single else None, extra={"band": rendered},
                     expr=expr, sign=sign, scales=scales, out_type=out_type, cumsum=anchor,
                     axis=constant_scalar(view, anchor.inputs[1]), start=constant_scalar(view, start),
                     count=count, shape=reshape.input(1), divisors=(div.input(1), mod.input(1)), single=single,
                     allowzero=bool(int(reshape.attrs.get("allowzero", 0))))

    @staticmethod
    def known_band(view: GraphView, expr: Expr, sign: int,
                   scales: "dict[int, int]") -> "tuple[int, int, bool] | None":
        """The band when every bound is a constant, unclipped."""
        bounds = {}
        for leaf in leaves(expr):
            value = constant_scalar(view, leaf.column)
            if value is None or value != int(value):
                return None
            bounds[id(leaf)] = int(value) * scales[id(leaf)]
        return as_band(diagonals(expr, _gaps(expr, bounds, sign), (-INF, INF)), (-INF, INF))

    def decline_reason(self, level: FeatureLevel, expr: Expr, sign: int, scales: "dict[int, int]",
                       out_type: int, cumsum: NodeInfo, axis: Any, start: Any, count: TensorInfo,
                       shape: TensorInfo, divisors: Any, single: bool, allowzero: bool) -> "str | None":
        grid_type = cumsum.outputs[0].onnx_type
        if grid_type not in INTEGER_TYPES:
            return f"the index grid is {onnx_type_name(grid_type)}, not int32 / int64: no exact integer division"
        if int(cumsum.attrs.get("exclusive", 0)) != 1 or int(cumsum.attrs.get("reverse", 0)) != 0:
            return ("CumSum is not exclusive and forward (exclusive=1, reverse=0): its grid does not start at 0 "
                    "on the first element")
        if axis not in (0, -1):
            return f"CumSum along axis {axis!r}, not the one axis of its Expand: no index grid"
        if start != 1:
            return f"CumSum counts Expand({start!r}, ...), not ones: its grid is no index grid"
        if DIAGONAL_MATRIX1.row(level) is None and not single:
            return (f"a band of more than one diagonal needs DIAGONAL_MATRIX1 (feature level 5_1; "
                    f"target {level})")
        return None

    def rewrite(self, f: Fragment, expr: Expr, sign: int, scales: "dict[int, int]", out_type: int,
                cumsum: NodeInfo, axis: Any, start: Any, count: TensorInfo, shape: TensorInfo, divisors: Any,
                single: bool, allowzero: bool) -> Graph:
        dims = f.dims(shape)
        if len(dims) != 2:
            raise Decline(f"the grid is reshaped to {list(dims)}, not a matrix")
        zero = reshape_zero_reason(dims, allowzero, f"Reshape to {list(dims)}")
        if zero:
            raise Decline(zero)
        rows, cols = dims
        total = f.dims(count)
        if list(total) != [rows * cols]:
            raise Decline(f"CumSum over Expand to {list(total)}, not the {rows * cols} elements of a "
                          f"{rows}x{cols} grid")
        if rows * cols - 1 > EXACT_INTEGER_LIMIT[cumsum.outputs[0].onnx_type]:
            raise Decline(f"a {rows}x{cols} grid's indices pass its integer type")
        for op, divisor in zip(("Div", "Mod"), divisors):
            value = f.value(divisor)
            if value.size != 1 or int(value.reshape(-1)[0]) != cols:
                raise Decline(f"{op} by {value.reshape(-1).tolist()}, not by the column count {cols}: "
                              "its quotient and remainder are no row and column")
        full: "tuple[int, ...]" = (rows, cols)
        bounds = {}
        for leaf in leaves(expr):
            value = f.value(leaf.column)
            if value.size != 1:
                raise Decline(f"a bound of shape {list(value.shape)} is no scalar: the mask differs per element")
            full = broadcast(full, tuple(value.shape), f"a bound of shape {list(value.shape)} does not broadcast")
            bound = value.reshape(-1)[0].item()
            if bound != int(bound):
                raise Decline(f"bound {bound!r} is not an integer")
            bounds[id(leaf)] = int(bound) * scales[id(leaf)]
        universe = (-(rows - 1), cols)
        band = as_band(diagonals(expr, _gaps(expr, bounds, sign), universe), universe)
        if band is None:
            raise Decline(f"the mask is no band of diagonals (bounds {sorted(bounds.values())})")
        begin, end, inverted = band
        return emit_band(f.graph, f.names, f.outputs[0], out_type, full, begin, end, 1, f.level, inverted)


def _gaps(expr: Expr, bounds: "dict[int, int]", sign: int) -> "dict[int, int]":
    """comparison_diagonals' gaps (`column OP row` with column - row = d + gap) for leaves
    `difference OP bound`: the difference is sign * d, so d OP' sign * bound, OP' flipped for -d."""
    return {id(leaf): -sign * bounds[id(leaf)] for leaf in leaves(expr)}


RULE = IndexGridBandMask()
register_idiom("index_grid_band_mask", "CumSum", 10, RULE)      # one DIAGONAL_MATRIX1 per mask
