"""tf.linalg.band_part(x, num_lower, num_upper) as tf2onnx converts it at opset >= 11, node for node
(tf2onnx/onnx_opset/nn.py, MatrixBandPart.version_11, onnx/tensorflow-onnx at 6537fcb2; tensorflow
is not installed here, so the graph is rebuilt from the handler's source): Shape (its last two
entries through Slice for batch dimensions), row and column counts by Slice, their Mul, an exclusive
CumSum over Expand(1, rows * cols) reshaped to the matrix, Div / Mod by the column count, Sub, then
Not(Greater(diff, num_upper)) for num_upper >= 0 and Not(Greater(Neg(num_lower), diff)) for
num_lower >= 0 joined by And, and the mask cast to the data type and multiplied (bool data: both in
float, cast back). (0, 0) is tf2onnx's EyeLike form; (-1, -1) an Identity."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from tests.builders import IR_VERSION

INT64_MAX = np.iinfo(np.int64).max


class Builder:
    def __init__(self) -> None:
        self.nodes: "list[onnx.NodeProto]" = []
        self.inits: "list[onnx.TensorProto]" = []
        self.count = 0

    def const(self, value: np.ndarray, name: str) -> str:
        self.count += 1
        full = f"{name}__{self.count}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), full))
        return full

    def node(self, op: str, inputs: "list[str]", **attrs) -> str:
        self.count += 1
        out = f"MatrixBandPart/{op}__{self.count}"
        self.nodes.append(h.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def slice(self, data: str, start: int, end: int) -> str:
        return self.node("Slice", [data, self.const(np.array([start], np.int64), "starts"),
                                   self.const(np.array([end], np.int64), "ends"),
                                   self.const(np.array([0], np.int64), "axes")])


def band_part_graph(b: Builder, data: str, rank: int, elem: int, num_lower: int, num_upper: int,
                    bound_type: int = T.INT64) -> str:
    """The nodes tf2onnx emits for MatrixBandPart(data, num_lower, num_upper); the output's name."""
    if rank == 2:
        shape = b.node("Shape", [data])
    else:
        shape = b.slice(b.node("Shape", [data]), -2, INT64_MAX)
    if num_lower == 0 and num_upper == 0:
        if rank == 2:
            mask = b.node("EyeLike", [data])
        else:
            zero = h.make_tensor("value", elem, dims=[1], vals=[0])
            mask = b.node("EyeLike", [b.node("ConstantOfShape", [shape], value=zero)])
        return _apply(b, data, elem, mask)
    bounds = {k: b.const(np.array(v, onnx.helper.tensor_dtype_to_np_dtype(bound_type)), k)
              for k, v in (("num_lower", num_lower), ("num_upper", num_upper))}
    zero = b.const(np.array(0, np.int64), "zero")
    one = b.const(np.array(1, np.int64), "one")
    rows = b.slice(shape, 0, 1)
    cols = b.slice(shape, 1, 2)
    limit = b.node("Mul", [rows, cols])
    ones = b.node("Expand", [one, limit])
    index = b.node("CumSum", [ones, zero], exclusive=1)
    grid = b.node("Reshape", [index, shape])
    row_index = b.node("Div", [grid, cols])
    col_index = b.node("Mod", [grid, cols])
    diff = b.node("Sub", [col_index, row_index])
    conditions = []
    if num_upper >= 0:
        upper = bounds["num_upper"] if bound_type == T.INT64 else b.node("Cast", [bounds["num_upper"]], to=T.INT64)
        conditions.append(b.node("Not", [b.node("Greater", [diff, upper])]))
    if num_lower >= 0:
        lower = bounds["num_lower"] if bound_type == T.INT64 else b.node("Cast", [bounds["num_lower"]], to=T.INT64)
        conditions.append(b.node("Not", [b.node("Greater", [b.node("Neg", [lower]), diff])]))
    if not conditions:
        return b.node("Identity", [data])
    mask = conditions[0] if len(conditions) == 1 else b.node("And", conditions)
    return _apply(b, data, elem, mask)


def _apply(b: Builder, data: str, elem: int, mask: str) -> str:
    if elem == T.BOOL:
        product = b.node("Mul", [b.node("Cast", [mask], to=T.FLOAT), b.node("Cast", [data], to=T.FLOAT)])
        return b.node("Cast", [product], to=T.BOOL)
    return b.node("Mul", [b.node("Cast", [mask], to=elem), data])


def band_part_model(num_lower: int, num_upper: int, shape: Sequence, elem: int = T.FLOAT, opset: int = 13,
                    bound_type: int = T.INT64) -> onnx.ModelProto:
    """x (of `shape`, names for symbolic dims) -> band_part -> y."""
    b = Builder()
    y = band_part_graph(b, "x", len(shape), elem, num_lower, num_upper, bound_type)
    b.nodes.append(h.make_node("Identity", [y], ["y"], name="output"))
    graph = h.make_graph(b.nodes, "band_part", [h.make_tensor_value_info("x", elem, list(shape))],
                         [h.make_tensor_value_info("y", elem, [None] * len(shape))], b.inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION)
