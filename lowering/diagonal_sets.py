"""The diagonal sets both mask idioms reason in (mask_idioms.py: Range comparisons; band_part.py:
tf2onnx's band_part): a comparison tree (Expr) whose leaves each hold one diagonal condition
`column OP row` (trilu_band.py: a Trilu of a shared fill, `x - y OP k`), read as the set of
diagonals d = x - y it keeps; sets are sorted, disjoint, half-open intervals, combined by And / Or /
Not / Sub, and a set is one DIAGONAL_MATRIX1 when it is a band or the outside of one (as_band)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from onnx_dml_lowering.ir.dtypes import ONNX_BOOL

from .node import NodeInfo, TensorInfo

COMPARISONS = ("Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal")
FLIPPED = {"Less": "Greater", "LessOrEqual": "GreaterOrEqual", "Greater": "Less",
           "GreaterOrEqual": "LessOrEqual", "Equal": "Equal"}
INF = 2**80                                     # an open bound, beyond any matrix


@dataclass(frozen=True)
class Affine:
    """const + sum(coeff * value of tensor): the value of an index's first element."""
    const: Any = 0
    terms: "tuple[tuple[str, int], ...]" = ()

    def plus(self, other: "Affine", sign: int = 1) -> "Affine":
        terms = dict(self.terms)
        for name, coeff in other.terms:
            terms[name] = terms.get(name, 0) + sign * coeff
        return Affine(self.const + sign * other.const, tuple(sorted((n, c) for n, c in terms.items() if c)))

    def value(self, values: "dict[str, Any]") -> Any:
        return self.const + sum(c * values[n] for n, c in self.terms)


@dataclass
class Expr:
    kind: str                                   # cmp | trilu | and | or | not | sub | true
    # the comparison, as `column OP row`; a trilu leaf's `x - y OP k` (LessOrEqual: upper=0,
    # GreaterOrEqual: upper=1), Always for the fill itself, Never for any of a false fill
    op: str = ""
    # cmp leaves: an Index here; band_part's leaves hold the bound's TensorInfo in column
    column: Any = None
    row: Any = None
    children: "tuple[Expr, ...]" = ()
    shape: "tuple[int, ...]" = ()               # a constant all-true operand's shape
    nodes: "tuple[NodeInfo, ...]" = ()          # covered nodes of this subtree
    # Sub-then-compare, `column - row OP c` read as `column OP row + c`: c, its run-time tensor and
    # static shape, and which side the Sub subtracts from (the difference must be exact in its type)
    shift: Affine = Affine()                    # a trilu leaf: its k
    shift_tensors: "tuple[TensorInfo, ...]" = ()
    shift_shape: "tuple[int, ...]" = ()
    minuend: str = ""                           # "" (no Sub) | column | row
    # the Sub a difference comparison reads; in `nodes` only when this comparison is its one reader
    sub: "NodeInfo | None" = None
    # `Abs(Sub) OP c` is two such leaves (d OP c, d OP' -c) reading one Abs: the Abs must be exact too
    absolute: "NodeInfo | None" = None
    unsupported: str = ""                       # why this leaf is no band although its pattern matched


LEAVES = ("cmp", "trilu", "true")


def leaves(expr: Expr) -> "list[Expr]":
    return [expr] if expr.kind in LEAVES else [l for c in expr.children for l in leaves(c)]


Intervals = "list[tuple[int, int]]"            # sorted, disjoint, half-open [lo, hi)


def normal(spans: "Iterable[tuple[int, int]]") -> "list[tuple[int, int]]":
    out: "list[tuple[int, int]]" = []
    for lo, hi in sorted(s for s in spans if s[0] < s[1]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def intersect(a: "list[tuple[int, int]]", b: "list[tuple[int, int]]") -> "list[tuple[int, int]]":
    return normal([(max(x0, y0), min(x1, y1)) for x0, x1 in a for y0, y1 in b])


def complement(a: "list[tuple[int, int]]", universe: "tuple[int, int]") -> "list[tuple[int, int]]":
    lo, hi = universe
    out, at = [], lo
    for x0, x1 in a:
        out.append((at, x0))
        at = x1
    out.append((at, hi))
    return intersect(normal(out), [universe])


def comparison_diagonals(op: str, gap: int) -> "tuple[int, int]":
    """Diagonals d = x - y where `column OP row` holds, given column - row = d + gap."""
    return {"Less": (-INF, -gap), "LessOrEqual": (-INF, -gap + 1), "Greater": (-gap + 1, INF),
            "GreaterOrEqual": (-gap, INF), "Equal": (-gap, -gap + 1), "Always": (-INF, INF), "Never": (0, 0)}[op]


def diagonals(expr: Expr, gaps: "dict[int, int]", universe: "tuple[int, int]") -> "list[tuple[int, int]]":
    if expr.kind == "true":
        return [universe]
    if expr.kind in ("cmp", "trilu"):          # a trilu leaf `x - y OP k` is `column OP row` at gap -k
        return intersect([comparison_diagonals(expr.op, gaps[id(expr)])], [universe])
    parts = [diagonals(c, gaps, universe) for c in expr.children]
    if expr.kind == "not":
        return complement(parts[0], universe)
    if expr.kind == "and":
        return intersect(parts[0], parts[1])
    if expr.kind == "sub":                      # exact only where uncontained_sub finds nothing
        return intersect(parts[0], complement(parts[1], universe))
    return normal(parts[0] + parts[1])


def uncontained_sub(expr: Expr, gaps: "dict[int, int]", universe: "tuple[int, int]") -> "Expr | None":
    """The first Sub of two 0/1 sets whose subtrahend keeps a diagonal its minuend does not: there
    the difference is -1, no mask (a Sub is a set difference only when one set contains the other)."""
    if expr.kind == "sub":
        minuend, subtrahend = (diagonals(c, gaps, universe) for c in expr.children)
        if intersect(subtrahend, complement(minuend, universe)):
            return expr
    for child in expr.children:
        found = uncontained_sub(child, gaps, universe)
        if found is not None:
            return found
    return None


def as_band(spans: "list[tuple[int, int]]", universe: "tuple[int, int]") -> "tuple[int, int, bool] | None":
    """(begin, end, inverted) of a set of diagonals inside `universe`, None when it is no band."""
    if not spans:
        return universe[1] + 1, universe[1] + 2, False            # empty: a diagonal off the matrix
    if len(spans) == 1:
        return spans[0][0], spans[0][1], False
    outside = complement(spans, universe)
    if len(outside) == 1:
        return outside[0][0], outside[0][1], True
    return None


def describe(band: "tuple[int, int, bool]") -> str:
    begin, end, inverted = band
    if begin >= INF:
        return "no diagonal (all false)"
    lo = "(-inf" if begin <= -INF // 2 else f"[{begin}"      # an open end at infinity
    hi = "+inf)" if end >= INF // 2 else f"{end})"
    return f"x - y {'outside' if inverted else 'in'} {lo}, {hi}"


def per_element(size: int) -> str:
    """A mask's bytes per element, as the notes say it ("1 byte per element", "4 bytes ...")."""
    return f"{size} byte{'' if size == 1 else 's'} per element"


# The nodes that combine mask expressions (both mask idioms build their trees through combination):
# a set operation of two, or one passed through (Not; Identity and a Cast to bool keep the set).
def is_bool_cast(node: NodeInfo) -> bool:
    return node.op_type == "Cast" and node.attrs.get("to") == ONNX_BOOL


def passes_through(node: NodeInfo) -> bool:
    """Not, Identity, or a Cast to bool: a mask's one-input steps."""
    return node.op_type in ("Not", "Identity") or is_bool_cast(node)


def combination(node: NodeInfo, child: "Callable[[str], Expr | None]", binary: "tuple[str, ...]") -> "Expr | None":
    """The expression of `node`, a set operation in `binary` (And, Or, Sub) or a node that
    passes_through, over its inputs' expressions (`child(tensor)`; None where one has none)."""
    if node.op_type in binary:
        left, right = child(node.input(0).name), child(node.input(1).name)
        if left is None or right is None:
            return None
        return Expr(node.op_type.lower(), children=(left, right), nodes=(node,) + left.nodes + right.nodes)
    inner = child(node.input(0).name)
    if inner is None:
        return None
    if node.op_type != "Not":
        return replace(inner, nodes=(node,) + inner.nodes)
    return Expr("not", children=(inner,), nodes=(node,) + inner.nodes)
