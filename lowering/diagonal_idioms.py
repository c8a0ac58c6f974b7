"""Diagonal idioms: identity and triangular generators that exporters spell with other ops,
and constant initializers that DirectML can generate instead of storing."""
from __future__ import annotations

from typing import Any, Union

import numpy as np

from onnx_dml_lowering.ir import Graph
from onnx_dml_lowering.ir.dtypes import ONNX_BOOL, ONNX_FLOAT, from_onnx, numpy_to_onnx
from onnx_dml_lowering.ir.feature_levels import FeatureLevel

from .diagonal import emit_band, find_band
from .eyelike import output_type
from .match import Declined, GraphView, Match, register_idiom, sole_consumer
from .node import Names, NodeInfo, TensorInfo
from .registry import verified


def _fill_value(node: NodeInfo) -> "tuple[Any, int]":
    """ConstantOfShape's value attribute (default float 0) and its ONNX type."""
    value = node.attrs.get("value")
    if value is None:
        return 0.0, ONNX_FLOAT
    from onnx import numpy_helper
    array = numpy_helper.to_array(value)
    return array.reshape(-1)[0], value.data_type


def _dims(values, name: str) -> "tuple[int, ...] | Declined":
    dims = tuple(int(d) for d in np.asarray(values[name]).reshape(-1))
    if any(d < 0 for d in dims):
        return Declined(f"shape {list(dims)} holds a negative size")
    return dims


# EyeLike(ConstantOfShape(shape)) -> DIAGONAL_MATRIX sized by the shape tensor: no input at all.
def match_eyelike_of_fill(node: NodeInfo, view: GraphView, level: FeatureLevel) -> "Match | Declined | None":
    x = node.inputs[0]
    fill = view.producer(x.name)
    if fill is None or fill.op_type != "ConstantOfShape" or sole_consumer(view, x.name) is None:
        return None
    shape, y = fill.inputs[0], node.outputs[0].name
    out_type, k = output_type(node), int(node.attrs.get("k", 0))
    if from_onnx(out_type) is None:
        return None

    def build(shapes, values, lvl) -> "Union[Graph, Declined]":
        dims = _dims(values, shape.name)
        if isinstance(dims, Declined):
            return dims
        if len(dims) != 2:
            return Declined(f"EyeLike needs a 2-D input; ConstantOfShape gives {list(dims)}")
        return verified(lambda: emit_band(Graph(lvl), Names.for_node(node), y, out_type, dims, k, k + 1, 1, lvl))

    return Match("eyelike_constant_of_shape", (node.name, fill.name), (shape,), (y,), build,
                 ("DIAGONAL_MATRIX",), value_inputs=(shape.name,),
                 note="a generator: the ConstantOfShape is never materialised")


def _scalar(view: GraphView, tensor: "TensorInfo | None") -> Any:
    value = None if tensor is None else view.constant(tensor.name)
    if value is None or np.asarray(value).size != 1:
        return None
    return np.asarray(value).reshape(-1)[0].item()


def _arange(view: GraphView, tensor: str) -> "tuple[NodeInfo, TensorInfo] | None":
    """Range(0, n, 1) producing `tensor` (start exactly 0, delta exactly 1): the node and its limit."""
    node = view.producer(tensor)
    if node is None or node.op_type != "Range" or len(node.inputs) != 3:
        return None
    if _scalar(view, node.inputs[0]) != 0 or _scalar(view, node.inputs[2]) != 1:
        return None
    return node, node.inputs[1]


# Float Ranges hold exact integers (and so compare like an identity) only this far.
_EXACT_INTEGERS = {10: 2**11, 1: 2**24, 11: 2**53, 16: 2**8}


def _range_length(limit: Any) -> int:
    """ONNX Range(0, limit, 1) has max(ceil(limit), 0) elements, for integer and float limits."""
    return max(int(np.ceil(np.asarray(limit).reshape(-1)[0])), 0)


# Cast(Equal(Unsqueeze(Range(0, n, 1), -1), Range(0, m, 1))) (torch.eye from the dynamo
# exporter, square form sharing one Range) -> one DIAGONAL_MATRIX of n x m.
def match_eye_from_ranges(node: NodeInfo, view: GraphView, level: FeatureLevel) -> "Match | Declined | None":
    a, b = node.inputs
    for column_side, row_side in ((a, b), (b, a)):
        unsqueeze = view.producer(column_side.name)
        if unsqueeze is None or unsqueeze.op_type != "Unsqueeze":
            continue
        axes = (list(np.asarray(view.constant(unsqueeze.inputs[1].name)).reshape(-1))
                if len(unsqueeze.inputs) > 1 and unsqueeze.inputs[1] is not None
                and view.constant(unsqueeze.inputs[1].name) is not None
                else unsqueeze.attrs.get("axes"))
        if axes is None or [int(v) for v in axes] not in ([-1], [1]):
            continue
        rows_range, cols_range = _arange(view, unsqueeze.inputs[0].name), _arange(view, row_side.name)
        if rows_range is None or cols_range is None:
            continue
        break
    else:
        return None
    covered = [unsqueeze.name, node.name, rows_range[0].name]
    if cols_range[0].name != rows_range[0].name:
        covered.append(cols_range[0].name)
    eq = node.outputs[0].name
    out_type, y = ONNX_BOOL, eq
    cast = sole_consumer(view, eq)
    if cast is not None and cast.op_type == "Cast" and from_onnx(int(cast.attrs.get("to", 0))) is not None:
        covered.append(cast.name)
        out_type, y = int(cast.attrs["to"]), cast.outputs[0].name
    # Batched forms: Expand(eye, shape) broadcasts the same matrix over leading dimensions.
    expand_shape = None
    expand = sole_consumer(view, y)
    if expand is not None and expand.op_type == "Expand" and expand.inputs[0].name == y:
        covered.append(expand.name)
        expand_shape = expand.inputs[1]
        y = expand.outputs[0].name
    # Every intermediate must be read inside the pattern only.
    inner = {unsqueeze.outputs[0].name, rows_range[0].outputs[0].name, cols_range[0].outputs[0].name}
    if eq != y:
        inner.add(eq)
    if expand_shape is not None:
        inner.add(expand.inputs[0].name)
    for tensor in inner:
        if view.is_graph_output(tensor) or any(c.name not in covered for c in view.consumers(tensor)):
            return None
    limits = [rows_range[1], cols_range[1]] + ([expand_shape] if expand_shape is not None else [])
    value_inputs = tuple(dict.fromkeys(t.name for t in limits))

    def build(shapes, values, lvl) -> "Union[Graph, Declined]":
        dims = (_range_length(values[limits[0].name]), _range_length(values[limits[1].name]))
        exact = _EXACT_INTEGERS.get(limits[0].onnx_type)
        if exact is not None and max(dims) > exact:
            # Beyond this the float Range repeats values and Equal is true off the diagonal too.
            return Declined(f"a float Range of {max(dims)} elements is not exact past {exact}")
        if expand_shape is not None:
            target = _dims(values, expand_shape.name)
            if isinstance(target, Declined):
                return target
            try:
                full = tuple(np.broadcast_shapes(target, dims))
            except ValueError:
                return Declined(f"Expand to {list(target)} does not broadcast a {dims[0]}x{dims[1]} eye")
            if full[-2:] != dims:
                return Declined(f"Expand to {list(target)} stretches the {dims[0]}x{dims[1]} eye itself")
            dims = full
        names = Names.for_node(node)
        return verified(lambda: emit_band(Graph(lvl), names, y, out_type, dims, 0, 1, 1, lvl))

    note = "Range, Range, Unsqueeze, Equal, Cast" + (", Expand" if expand_shape is not None else "")
    return Match("eye_from_ranges", tuple(covered), tuple({t.name: t for t in limits}.values()), (y,), build,
                 ("DIAGONAL_MATRIX",), value_inputs=value_inputs, note=f"{note} become one generator")


# Trilu(ConstantOfShape(shape, v) or Expand(v, shape), k) -> DIAGONAL_MATRIX1 with Value v and an INT32 open bound:
# the causal mask torch.tril(torch.ones(n, n)) / triu(full(-1e9), 1) exporters emit.
def _uniform_fill(view: GraphView, fill: NodeInfo) -> "tuple[Any, int, tuple] | None":
    """(value, ONNX type, shape of the constant operand) of ConstantOfShape(shape) or of
    Expand(c, shape) with every element of the constant c equal."""
    if fill.op_type == "ConstantOfShape":
        value, value_type = _fill_value(fill)
        return value, value_type, ()
    if fill.op_type == "Expand":
        constant = view.constant(fill.inputs[0].name)
        if constant is None or np.asarray(constant).size == 0:
            return None
        flat = np.ascontiguousarray(constant).reshape(-1)
        raw = flat.view(np.uint8).reshape(flat.size, -1)
        if not np.all(raw == raw[0]):            # every element the same bits
            return None
        return flat[0].item(), numpy_to_onnx(flat.dtype), tuple(np.shape(constant))
    return None


def match_trilu_of_fill(node: NodeInfo, view: GraphView, level: FeatureLevel) -> "Match | Declined | None":
    x = node.inputs[0]
    fill = view.producer(x.name)
    if fill is None or fill.op_type not in ("ConstantOfShape", "Expand") or sole_consumer(view, x.name) is None:
        return None
    uniform = _uniform_fill(view, fill)
    if uniform is None:
        return None
    value, value_type, operand_shape = uniform
    if from_onnx(value_type) is None:
        return None
    shape, y = fill.inputs[1 if fill.op_type == "Expand" else 0], node.outputs[0].name
    k_input = node.inputs[1] if len(node.inputs) > 1 else None
    upper = int(node.attrs.get("upper", 1))
    value_inputs = (shape.name,) + ((k_input.name,) if k_input is not None else ())
    inputs = (shape,) + ((k_input,) if k_input is not None else ())

    def build(shapes, values, lvl) -> "Union[Graph, Declined]":
        dims = _dims(values, shape.name)
        if isinstance(dims, Declined):
            return dims
        if operand_shape:
            try:
                dims = tuple(np.broadcast_shapes(operand_shape, dims))
            except ValueError:
                return Declined(f"Expand of {list(operand_shape)} to {list(dims)} does not broadcast")
        if len(dims) < 2:
            return Declined(f"Trilu needs at least 2 dimensions; its input has shape {list(dims)}")
        k = int(np.asarray(values[k_input.name]).reshape(-1)[0]) if k_input is not None else 0
        # Open bounds: emit_band clamps them to this matrix and writes INT32_MIN / INT32_MAX.
        begin, end = (k, 2**63) if upper else (-(2**63), k + 1)
        names = Names.for_node(node)
        return verified(lambda: emit_band(Graph(lvl), names, y, value_type, dims, begin, end, value, lvl))

    return Match("trilu_constant_fill", (node.name, fill.name), inputs, (y,), build,
                 ("DIAGONAL_MATRIX1",), value_inputs=value_inputs,
                 note=f"a triangle generator: the {fill.op_type} is never materialised")


# A constant initializer that is c on a band of diagonals (c * identity, offset diagonals,
# triangles, with batch dimensions) and 0 elsewhere -> generated, not stored.
def match_initializer(name: str, array: np.ndarray, level: FeatureLevel, nodes: "tuple[str, ...]" = (),
                      prefix: str = "") -> "Match | Declined | None":
    band = find_band(array)
    if band is None:
        return None
    begin, end, inverted, value = band
    value = value.item() if hasattr(value, "item") else value
    try:
        onnx_type = numpy_to_onnx(array.dtype)
    except Exception:
        return None
    shape = tuple(array.shape)
    ops = ("DIAGONAL_MATRIX",) if end == begin + 1 and not inverted else ("DIAGONAL_MATRIX1",)

    def build(shapes, values, lvl) -> "Union[Graph, Declined]":
        names = Names(prefix or f"init_{name}")
        return verified(lambda: emit_band(Graph(lvl), names, name, onnx_type, shape, begin, end, value, lvl, inverted))

    kind = "outside" if inverted else "on"
    what = f"Constant {nodes[0]}" if nodes else f"initializer {name}"
    return Match("constant_diagonal", nodes, (), (name,), build, ops,
                 note=f"{what}: {value!r} {kind} diagonals [{begin}, {end}), generated instead of "
                      f"stored ({array.nbytes} bytes saved)",
                 extra={"initializer": name, "initializer_bytes_saved": int(array.nbytes)})


# Constant(value=c * identity or a triangle) -> the same generator as for an initializer.
def match_constant_node(node: NodeInfo, view: GraphView, level: FeatureLevel) -> "Match | Declined | None":
    if not node.outputs or "value" not in node.attrs:
        return None
    out = node.outputs[0].name
    value = view.constant(out)
    if value is None or np.ndim(value) < 2:
        return None
    return match_initializer(out, np.asarray(value), level, nodes=(node.name,), prefix=view.value_prefix(out))


register_idiom("eyelike_constant_of_shape", "EyeLike", 10, match_eyelike_of_fill)
register_idiom("eye_from_ranges", "Equal", 10, match_eye_from_ranges)
register_idiom("trilu_constant_fill", "Trilu", 10, match_trilu_of_fill)
register_idiom("constant_diagonal", "Constant", 10, match_constant_node)
