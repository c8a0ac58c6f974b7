"""Trilu(x, k) over any input, as onnxruntime's DirectML EP lowers it: one DIAGONAL_MATRIX1 whose
InputTensor is x and whose band of zeros is the triangle Trilu removes (5_1+).

upper=1 keeps the diagonals x - y >= k, so Value 0 fills [INT32_MIN, k); upper=0 keeps x - y <= k,
so Value 0 fills [k + 1, INT32_MAX). Leading dimensions are one batch dimension; k of any int64
(known at run time too) is clamped to the matrix, so it never wraps."""
from __future__ import annotations

import numpy as np

from onnx_dml_lowering.ir import DiagonalMatrix1, Download, Graph, TensorDesc
from onnx_dml_lowering.ir.dtypes import dml_type, from_onnx, onnx_to_numpy
from onnx_dml_lowering.ir.feature_levels import FeatureLevel
from onnx_dml_lowering.ir.operators import INT32_MAX, INT32_MIN
from onnx_dml_lowering.ir.support import DIAGONAL_MATRIX1

from .common import carrier_type, level_reason, one_value, type_reason, upload
from .diagonal import clamp_band
from .match import Decline, Found, Fragment, GraphView, IdiomRule
from .node import NodeInfo, TensorInfo, product
from .registry import register_idiom


def zero_band(rows: int, cols: int, k: int, upper: bool) -> "tuple[int, int]":
    """DiagonalFillBegin / End of the diagonals Trilu zeroes, inside INT32."""
    begin, end = clamp_band(-(2**63), k, rows, cols) if upper else clamp_band(k + 1, 2**63, rows, cols)
    if begin <= -(rows - 1):
        begin = INT32_MIN                # open bounds, as the EP writes them
    if end >= cols:
        end = INT32_MAX
    return begin, end


class TriluOverInput(IdiomRule):
    # Trilu(x, k) -> DIAGONAL_MATRIX1(InputTensor = x, Value = 0, the removed triangle as the band).
    operators = ("DIAGONAL_MATRIX1",)
    note = "InputTensor x, Value 0 on the triangle Trilu removes"

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        x = anchor.input(0)
        k = anchor.inputs[1] if len(anchor.inputs) > 1 else None
        inputs = (x,) + ((k,) if k is not None else ())
        return Found((anchor.name,), inputs, (anchor.outputs[0].name,),
                     value_inputs=(k.name,) if k is not None else (),
                     x=x, k=k, upper=bool(int(anchor.attrs.get("upper", 1))))

    def decline_reason(self, level: FeatureLevel, x: TensorInfo, k: "TensorInfo | None",
                       upper: bool) -> "str | None":
        reason = level_reason(DIAGONAL_MATRIX1, level)
        if reason:
            return reason
        dtype = from_onnx(carrier_type(x.onnx_type))   # bfloat16: copied as its 16 bits
        if dtype is None:
            return type_reason(x.onnx_type, "input")
        allowed = DIAGONAL_MATRIX1.at(level).tensors["InputTensor"].types
        if dtype not in allowed:
            return f"DIAGONAL_MATRIX1 InputTensor: data type {dtype.name} is not supported at feature level {level}"
        if x.rank is not None and x.rank < 2:
            return f"Trilu needs at least 2 dimensions; its input has {x.rank}"
        return None

    def rewrite(self, f: Fragment, x: TensorInfo, k: "TensorInfo | None", upper: bool) -> Graph:
        shape = tuple(f.shapes[x.name])
        if len(shape) < 2:
            raise Decline(f"Trilu needs at least 2 dimensions; its input has shape {list(shape)}")
        diagonal = int(one_value(f.value(k), f"Trilu's input k {k.name!r}")) if k is not None else 0
        y = f.outputs[0]
        if product(shape) == 0:
            return f.empty(y, x.onnx_type, shape)
        carrier = carrier_type(x.onnx_type)             # a pure copy: bfloat16 goes as its bits, +0 as 0
        dtype = dml_type(carrier)
        zero = np.zeros((), onnx_to_numpy(carrier))
        rows, cols = shape[-2:]
        batch = product(shape[:-2])
        sizes = ((batch,) if batch > 1 else ()) + (rows, cols)
        source = upload(f.graph, f.names, x.name, dtype, sizes)
        desc = TensorDesc(dtype, sizes)
        buf, view = f.names("out"), f.names("out.view")
        f.graph.add_buffer(buf, desc.min_total_size)
        f.graph.add_view(view, buf, desc)
        begin, end = zero_band(rows, cols, diagonal, upper)
        f.graph.add(DiagonalMatrix1(source, view, dtype, int(zero) if zero.dtype == np.bool_ else zero.item(),
                                    begin, end))
        f.graph.add(Download(view, y, x.onnx_type, shape))
        return f.graph


# Below trilu_constant_fill (10): a Trilu over a uniform fill needs no input at all.
register_idiom("trilu", "Trilu", 0, TriluOverInput())       # DIAGONAL_MATRIX1 with InputTensor
