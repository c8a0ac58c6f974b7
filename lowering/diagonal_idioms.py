"""Diagonal idioms: identity and triangular generators that exporters spell with other ops,
and constant initializers that DirectML can generate instead of storing."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from onnx_dml_lowering.ir import Graph
from onnx_dml_lowering.ir.dtypes import ONNX_BOOL, from_onnx, numpy_to_onnx, onnx_to_numpy
from onnx_dml_lowering.ir.feature_levels import FeatureLevel

from .common import EXACT_INTEGER_LIMIT, broadcast, carrier_type, cast_expand_tail, fill_value, one_value
from .diagonal import band_reason, emit_band, find_band
from .eyelike import output_type
from .match import (Decline, Declined, Found, Fragment, GraphView, IdiomRule, Match, constant_ints,
                    constant_scalar, producer_through, sole_consumer)
from .node import NodeInfo, TensorInfo
from .registry import register_idiom


class EyeLikeOfFill(IdiomRule):
    # EyeLike(ConstantOfShape(shape)) -> DIAGONAL_MATRIX sized by the shape tensor: no input at all.
    operators = ("DIAGONAL_MATRIX",)
    note = "a generator: the ConstantOfShape is never materialised"

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        through = producer_through(view, anchor.input(0).name, "ConstantOfShape")
        out_type = output_type(anchor)
        if through is None or from_onnx(carrier_type(out_type)) is None:
            return None
        fill, passed = through
        shape = fill.input(0)
        return Found((anchor.name, fill.name) + tuple(n.name for n in passed), (shape,), (anchor.outputs[0].name,),
                     value_inputs=(shape.name,),
                     shape=shape, out_type=out_type, k=int(anchor.attrs.get("k", 0)))

    def decline_reason(self, level: FeatureLevel, shape: TensorInfo, out_type: int, k: int) -> "str | None":
        return band_reason(out_type, 1, True, level)

    def rewrite(self, f: Fragment, shape: TensorInfo, out_type: int, k: int) -> Graph:
        dims = f.dims(shape)
        if len(dims) != 2:
            raise Decline(f"EyeLike needs a 2-D input; ConstantOfShape gives {list(dims)}")
        return emit_band(f.graph, f.names, f.outputs[0], out_type, dims, k, k + 1, 1, f.level)


def arange(view: GraphView, tensor: str) -> "tuple[NodeInfo, TensorInfo] | None":
    """Range(0, n, 1) producing `tensor` (start exactly 0, delta exactly 1): the node and its limit."""
    node = view.producer(tensor)
    if node is None or node.op_type != "Range" or len(node.inputs) != 3:
        return None
    if constant_scalar(view, node.inputs[0]) != 0 or constant_scalar(view, node.inputs[2]) != 1:
        return None
    return node, node.input(1)


def range_length(limit: Any) -> int:
    """ONNX Range(0, limit, 1) has max(ceil(limit), 0) elements, for integer and float limits."""
    return max(int(np.ceil(one_value(limit, "Range's limit"))), 0)


def column_ranges(equal: NodeInfo, view: GraphView) -> "tuple[NodeInfo, tuple, tuple] | None":
    """Equal's operands as (Unsqueeze(Range(0, n, 1), -1), Range(0, m, 1)) in either order:
    the Unsqueeze, the rows Range and the columns Range (each a node and its limit)."""
    a, b = equal.input(0), equal.input(1)
    for column_side, row_side in ((a, b), (b, a)):
        unsqueeze = view.producer(column_side.name)
        if unsqueeze is None or unsqueeze.op_type != "Unsqueeze":
            continue
        axes = constant_ints(view, unsqueeze, 1, "axes")
        if axes is None or axes not in ([-1], [1]):
            continue
        rows, cols = arange(view, unsqueeze.input(0).name), arange(view, row_side.name)
        if rows is not None and cols is not None:
            return unsqueeze, rows, cols
    return None


class EyeFromRanges(IdiomRule):
    # Cast(Equal(Unsqueeze(Range(0, n, 1), -1), Range(0, m, 1))), optionally Expanded over batch
    # dimensions (torch.eye from the dynamo exporter, square form sharing one Range) -> one DIAGONAL_MATRIX.
    operators = ("DIAGONAL_MATRIX",)

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        ranges = column_ranges(anchor, view)
        if ranges is None:
            return None
        unsqueeze, (rows_node, rows_limit), (cols_node, cols_limit) = ranges
        covered = [unsqueeze.name, anchor.name, rows_node.name]
        if cols_node.name != rows_node.name:
            covered.append(cols_node.name)
        eq = anchor.outputs[0].name
        # Batched forms: Expand(eye, shape) broadcasts the same matrix over leading dimensions.
        tail = cast_expand_tail(view, eq, ONNX_BOOL)
        covered += [n.name for n in tail.nodes]
        out_type, y, expand_shape = tail.onnx_type, tail.output, tail.expand_shape
        # Every intermediate must be read inside the pattern only.
        inner = {unsqueeze.outputs[0].name, rows_node.outputs[0].name, cols_node.outputs[0].name}
        inner.update(n.input(0).name for n in tail.nodes)
        for tensor in inner:
            if view.is_graph_output(tensor) or any(c.name not in covered for c in view.consumers(tensor)):
                return None
        limits = [rows_limit, cols_limit] + ([expand_shape] if expand_shape is not None else [])
        note = "Range, Range, Unsqueeze, Equal, Cast" + (", Expand" if expand_shape is not None else "")
        return Found(tuple(covered), tuple({t.name: t for t in limits}.values()), (y,),
                     value_inputs=tuple(dict.fromkeys(t.name for t in limits)), note=f"{note} become one generator",
                     prefix=anchor.name,
                     rows=rows_limit, cols=cols_limit, expand_shape=expand_shape, out_type=out_type)

    def decline_reason(self, level: FeatureLevel, rows: TensorInfo, cols: TensorInfo,
                       expand_shape: "TensorInfo | None", out_type: int) -> "str | None":
        return band_reason(out_type, 1, True, level)

    def rewrite(self, f: Fragment, rows: TensorInfo, cols: TensorInfo, expand_shape: "TensorInfo | None",
                out_type: int) -> Graph:
        dims: "tuple[int, ...]" = (range_length(f.value(rows)), range_length(f.value(cols)))
        exact = EXACT_INTEGER_LIMIT[rows.onnx_type]
        if max(dims) > exact:
            # Beyond this the float Range repeats values and Equal is true off the diagonal too.
            raise Decline(f"a float Range of {max(dims)} elements is not exact past {exact}")
        if expand_shape is not None:
            target = f.dims(expand_shape)
            full = broadcast(target, dims, f"Expand to {list(target)} does not broadcast a {dims[0]}x{dims[1]} eye")
            if full[-2:] != dims:
                raise Decline(f"Expand to {list(target)} stretches the {dims[0]}x{dims[1]} eye itself")
            dims = full
        return emit_band(f.graph, f.names, f.outputs[0], out_type, dims, 0, 1, 1, f.level)


def uniform_fill(view: GraphView, fill: NodeInfo) -> "tuple[Any, int, tuple] | None":
    """(value, ONNX type, shape of the constant operand) of ConstantOfShape(shape) or of
    Expand(c, shape) with every element of the constant c equal."""
    if fill.op_type == "ConstantOfShape":
        value, value_type = fill_value(fill)
        return value, value_type, ()
    if fill.op_type == "Expand":
        constant = view.constant(fill.input(0).name)
        if constant is None or np.asarray(constant).size == 0:
            return None
        flat = np.ascontiguousarray(constant).reshape(-1)
        raw = flat.view(np.uint8).reshape(flat.size, -1)
        if not np.all(raw == raw[0]):            # every element the same bits
            return None
        return flat[0].item(), numpy_to_onnx(flat.dtype), tuple(np.shape(constant))
    return None


def cast_exactly(value: Any, from_type: int, to_type: int) -> Any:
    """ONNX's Cast of one value where it is plain: to bool (x != 0, NaN included), or to a type that
    holds the value exactly (converted back it has the same bits); None otherwise (a float truncated
    to an integer, an integer past the target's range)."""
    if to_type == ONNX_BOOL:
        return bool(value != 0)
    source = np.array(value, onnx_to_numpy(from_type))
    with np.errstate(all="ignore"):
        target = source.astype(onnx_to_numpy(to_type))
        back = target.astype(source.dtype)
    return target.item() if back.tobytes() == source.tobytes() else None


def is_plus_zero(value: Any, onnx_type: int) -> bool:
    """Is `value` +0 of the type, bit for bit (what a band generator writes off its band)?"""
    dtype = np.dtype(onnx_to_numpy(onnx_type))
    return np.array(value, dtype).tobytes() == np.zeros((), dtype).tobytes()


# Which diagonals of a Trilu of a fill hold the generated value: its own triangle, the other one
# (an Equal to 0 of a non-zero fill), or all of them (every element equal).
TRIANGLE, COMPLEMENT, EVERY = "triangle", "complement", "every"


def equal_to_constant(view: GraphView, y: str) -> "tuple[NodeInfo, np.ndarray] | None":
    """The Equal that alone reads `y`, against a one-element constant (of rank 2 at most: the
    Trilu's shape is the result's), and that constant."""
    equal = sole_consumer(view, y)
    if equal is None or equal.op_type != "Equal":
        return None
    others = [t for t in equal.inputs if t is not None and t.name != y]
    constant = None if len(others) != 1 else view.constant(others[0].name)
    if constant is None or np.size(constant) != 1 or np.ndim(constant) > 2:
        return None
    return equal, np.asarray(constant)


def trilu_tail(view: GraphView, y: str, value_type: int, value: Any) -> "tuple[tuple[NodeInfo, ...], str, int, str, Any]":
    """What joins a Trilu `y` of a fill of `value`: an Equal to a one-element constant (a bool
    triangle, or its complement) and / or cast_expand_tail's Cast (`ones.triu(1).bool()`), each read
    alone: (nodes, output, type, the diagonals holding the value, the value). Without a tail, or one
    whose values are no band over zeros, (), y, value_type, TRIANGLE, value."""
    nodes: "list[NodeInfo]" = []
    on, off, out_type, out = value, 0, value_type, y       # Trilu writes +0 off its triangle
    equal = equal_to_constant(view, y)
    if equal is not None:
        typed = np.dtype(onnx_to_numpy(value_type))
        c = equal[1].astype(typed).reshape(())
        on, off = bool(np.array(value, typed) == c), bool(np.zeros((), typed) == c)
        nodes, out_type, out = [equal[0]], ONNX_BOOL, equal[0].outputs[0].name
    cast = cast_expand_tail(view, out, out_type, expand=False)
    if cast.nodes:
        on_cast, off_cast = cast_exactly(on, out_type, cast.onnx_type), cast_exactly(off, out_type, cast.onnx_type)
        if on_cast is not None and off_cast is not None:
            nodes, out_type, out, on, off = nodes + list(cast.nodes), cast.onnx_type, cast.output, on_cast, off_cast
    if is_plus_zero(off, out_type):
        return tuple(nodes), out, out_type, TRIANGLE, on
    if is_plus_zero(on, out_type):
        return tuple(nodes), out, out_type, COMPLEMENT, off
    if np.array(on, onnx_to_numpy(out_type)).tobytes() == np.array(off, onnx_to_numpy(out_type)).tobytes():
        return tuple(nodes), out, out_type, EVERY, on
    return (), y, value_type, TRIANGLE, value


class TriluOfFill(IdiomRule):
    # Trilu(ConstantOfShape(shape, v) or Expand(v, shape), k) -> DIAGONAL_MATRIX1 with Value v and
    # an INT32 open bound: the causal mask torch.tril(torch.ones(n, n)) / triu(full(-1e9), 1) exporters emit.
    # A Cast (`ones.triu(1).bool()`) or Equal to a constant (`triu(ones, 1) == 1`) after it folds in.
    operators = ("DIAGONAL_MATRIX1",)

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        through = producer_through(view, anchor.input(0).name, "ConstantOfShape", "Expand")
        fill, passed = through if through is not None else (None, ())
        shared = fill is None
        if shared:      # a fill other nodes read too (two Trilus of one ones-fill): a value, left to them
            fill = view.producer(anchor.input(0).name)
            fill = fill if fill is not None and fill.op_type in ("ConstantOfShape", "Expand") else None
        uniform = None if fill is None else uniform_fill(view, fill)
        if fill is None or uniform is None or from_onnx(carrier_type(uniform[1])) is None:
            return None
        value, value_type, operand_shape = uniform
        tail, y, value_type, part, value = trilu_tail(view, anchor.outputs[0].name, value_type, value)
        shape = fill.input(1 if fill.op_type == "Expand" else 0)
        k = anchor.inputs[1] if len(anchor.inputs) > 1 else None
        covered = (anchor.name,) if shared else (anchor.name, fill.name) + tuple(n.name for n in passed)
        folded = f"; the {' and '.join(n.op_type for n in tail)} after it fold{'s' if len(tail) == 1 else ''} in" \
            if tail else ""
        return Found(covered + tuple(n.name for n in tail), (shape,) + ((k,) if k is not None else ()), (y,),
                     value_inputs=(shape.name,) + ((k.name,) if k is not None else ()),
                     note=(f"a triangle generator: reads the shape of the {fill.op_type} other nodes share, not "
                           "its values" if shared else f"a triangle generator: the {fill.op_type} is never materialised")
                     + folded,
                     shape=shape, k=k, upper=int(anchor.attrs.get("upper", 1)),
                     value=value, value_type=value_type, operand_shape=operand_shape, part=part)

    def decline_reason(self, level: FeatureLevel, shape: TensorInfo, k: "TensorInfo | None", upper: int,
                       value: Any, value_type: int, operand_shape: "tuple[int, ...]", part: str) -> "str | None":
        return band_reason(value_type, value, False, level)      # a triangle: never one diagonal

    def rewrite(self, f: Fragment, shape: TensorInfo, k: "TensorInfo | None", upper: int, value: Any,
                value_type: int, operand_shape: "tuple[int, ...]", part: str) -> Graph:
        dims = f.dims(shape)
        if operand_shape:
            dims = broadcast(operand_shape, dims, f"Expand of {list(operand_shape)} to {list(dims)} does not broadcast")
        if len(dims) < 2:
            raise Decline(f"Trilu needs at least 2 dimensions; its input has shape {list(dims)}")
        diagonal = int(one_value(f.value(k), f"Trilu's input k {k.name!r}")) if k is not None else 0
        # Open bounds: emit_band clamps them to this matrix and writes INT32_MIN / INT32_MAX. Trilu
        # keeps x - y >= k (upper) or <= k; its complement is the other open triangle.
        split = diagonal if upper else diagonal + 1
        keeps_high = bool(upper) == (part == TRIANGLE)
        begin, end = (split, 2**63) if keeps_high else (-(2**63), split)
        if part == EVERY:
            begin, end = -(2**63), 2**63
        return emit_band(f.graph, f.names, f.outputs[0], value_type, dims, begin, end, value, f.level)


class ConstantDiagonal(IdiomRule):
    # Constant(value) that is c on a band of diagonals (c * identity, offset diagonals, triangles,
    # with batch dimensions) and 0 elsewhere -> DIAGONAL_MATRIX(1), generated instead of stored.
    # Initializers take the same rule through match_initializer.
    def may_match(self, node: onnx.NodeProto) -> bool:
        # A model holds hundreds of Constants, nearly all scalars and shape vectors: a tensor
        # `value` of under 2 dimensions is no matrix, and without a `value` pattern takes nothing.
        for attribute in node.attribute:
            if attribute.name == "value":
                return attribute.type != onnx.AttributeProto.TENSOR or len(attribute.t.dims) >= 2
        return False

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        if not anchor.outputs or "value" not in anchor.attrs:
            return None
        out = anchor.outputs[0].name
        value = view.constant(out)
        if value is None or np.ndim(value) < 2:
            return None
        return self.found(out, np.asarray(value), (anchor.name,), view.value_prefix(out))

    def found(self, name: str, array: np.ndarray, nodes: "tuple[str, ...]", prefix: str = "") -> "Found | None":
        """The band `array` holds, as the match of value `name` (an initializer when no nodes)."""
        band = find_band(array)
        if band is None:
            return None
        begin, end, inverted, value = band
        value = value.item() if hasattr(value, "item") else value
        try:
            onnx_type = numpy_to_onnx(array.dtype)
        except Exception:
            return None
        ops = ("DIAGONAL_MATRIX",) if end == begin + 1 and not inverted else ("DIAGONAL_MATRIX1",)
        kind = "outside" if inverted else "on"
        what = f"Constant {nodes[0]}" if nodes else f"initializer {name}"
        return Found(nodes, (), (name,), operators=ops, prefix=prefix or f"init_{name}",
                     note=f"{what}: {value!r} {kind} diagonals [{begin}, {end}), generated instead of "
                          f"stored ({array.nbytes} bytes saved)",
                     extra={"initializer": name, "initializer_bytes_saved": int(array.nbytes)},
                     onnx_type=onnx_type, shape=tuple(array.shape), begin=begin, end=end, inverted=inverted,
                     value=value)

    def rewrite(self, f: Fragment, onnx_type: int, shape: "tuple[int, ...]", begin: int, end: int,
                inverted: bool, value: Any) -> Graph:
        return emit_band(f.graph, f.names, f.outputs[0], onnx_type, shape, begin, end, value, f.level, inverted)


# name, anchor op, priority (larger patterns first), rule                     what it rewrites into
register_idiom("eyelike_constant_of_shape", "EyeLike", 10, EyeLikeOfFill())   # DIAGONAL_MATRIX, no input
register_idiom("eye_from_ranges", "Equal", 10, EyeFromRanges())               # one DIAGONAL_MATRIX
register_idiom("trilu_constant_fill", "Trilu", 10, TriluOfFill())             # DIAGONAL_MATRIX1, open bound
CONSTANT_DIAGONAL = register_idiom("constant_diagonal", "Constant", 10, ConstantDiagonal())  # generated band


def match_initializer(name: str, array: np.ndarray, level: FeatureLevel, nodes: "tuple[str, ...]" = (),
                      prefix: str = "") -> "Match | Declined | None":
    """The constant_diagonal match of a constant initializer `name` holding `array`, if it is a band;
    `prefix` is its unique IR name prefix (the graph view's value_prefix)."""
    rule: ConstantDiagonal = CONSTANT_DIAGONAL.rule  # type: ignore[assignment]
    found = rule.found(name, array, nodes, prefix)
    return None if found is None else CONSTANT_DIAGONAL.matched(found, level)
