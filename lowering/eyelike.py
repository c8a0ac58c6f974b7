"""EyeLike (opset 9+) -> DIAGONAL_MATRIX with Offset = k and Value = 1; the input is never read.

k is an int64: a diagonal that misses the matrix (k >= cols or k <= -rows) is lowered with an
Offset that also misses and fits DirectML's 32-bit INT, so it never wraps onto the matrix.
"""
from __future__ import annotations

from onnx_dml_lowering.ir import DiagonalMatrix, Download, Graph, TensorDesc
from onnx_dml_lowering.ir.dtypes import dml_type, from_onnx, onnx_type_name
from onnx_dml_lowering.ir.feature_levels import FeatureLevel
from onnx_dml_lowering.ir.operators import INT32_MAX, INT32_MIN
from onnx_dml_lowering.ir.support import DIAGONAL_MATRIX

from .common import carried, carrier_type, dims_at, level_reason, pad_sizes, type_reason
from .match import Decline, Found, Fragment, GraphView, IdiomRule
from .node import NodeInfo, TensorInfo
from .registry import register_idiom


def output_type(node: NodeInfo) -> int:
    """ONNX: the dtype attribute if given, else the input's type."""
    dtype = node.attrs.get("dtype")
    return int(dtype) if dtype is not None else node.input(0).onnx_type


def diagonal_offset(k: int, rows: int, cols: int) -> "int | None":
    """An INT32 Offset with the same effect as k on a rows x cols matrix, or None if none exists."""
    if -rows < k < cols:
        return k if INT32_MIN <= k <= INT32_MAX else None
    # Missed diagonal: any offset <= -rows or >= cols writes nothing.
    if -rows >= INT32_MIN:
        return -rows
    if cols <= INT32_MAX:
        return cols
    return None


def eyelike_reason(x: TensorInfo, out: int, level: FeatureLevel) -> "str | None":
    """Why DIAGONAL_MATRIX cannot generate EyeLike's output of type `out` over input x (its rank,
    when known), or None."""
    if x.rank is not None and x.rank != 2:
        return f"input rank {x.rank}: EyeLike needs a 2-D input"
    dtype = from_onnx(carrier_type(out))             # bfloat16: generated as its 16 bits
    if dtype is None:
        return type_reason(out, "output")
    reason = level_reason(DIAGONAL_MATRIX, level)
    if reason:
        return reason
    types = DIAGONAL_MATRIX.at(level).tensors["OutputTensor"].types
    if dtype not in types:
        first = next((lv for lv in reversed(DIAGONAL_MATRIX.rows)
                      if dtype in lv.tensors["OutputTensor"].types), None)
        needs = f" (needs feature level {first.since})" if first else ""
        return f"output type {onnx_type_name(out)} ({dtype.name}) is not supported by DIAGONAL_MATRIX at {level}{needs}"
    return None


class EyeLikeRule(IdiomRule):
    # EyeLike(x, k) -> DIAGONAL_MATRIX(Offset = k, Value = 1) of x's sizes; x itself is never read.
    operators = ("DIAGONAL_MATRIX",)

    def pattern(self, anchor: NodeInfo, view: GraphView) -> Found:
        x = anchor.input(0)
        return Found((anchor.name,), (x,), (anchor.outputs[0].name,), x=x, out_type=output_type(anchor),
                     k=int(anchor.attrs.get("k", 0)))

    def decline_reason(self, level: FeatureLevel, x: TensorInfo, out_type: int, k: int) -> "str | None":
        return eyelike_reason(x, out_type, level)

    def rewrite(self, f: Fragment, x: TensorInfo, out_type: int, k: int) -> Graph:
        x = f.tensor(x)
        reason = eyelike_reason(x, out_type, f.level)      # a rank known only now is checked only now
        if reason:
            raise Decline(reason)
        rows, cols = (int(d) for d in x.shape)
        y = f.outputs[0]
        if rows * cols == 0:
            return f.empty(y, out_type, (rows, cols))
        offset = diagonal_offset(k, rows, cols)
        if offset is None:
            raise Decline(f"k = {k} on a {rows}x{cols} matrix does not fit DIAGONAL_MATRIX's 32-bit Offset")
        sizes = pad_sizes((rows, cols), dims_at(DIAGONAL_MATRIX, f.level, "OutputTensor", 2))
        carrier, one = carried(out_type, 1)             # a bfloat16 1.0 is the UINT16 16256: FLOAT32 holds it
        desc = TensorDesc(dml_type(carrier), sizes)
        buf, view = f.names("out"), f.names("out.view")
        f.graph.add_buffer(buf, desc.min_total_size)
        f.graph.add_view(view, buf, desc)
        f.graph.add(DiagonalMatrix(view, offset, float(one)))
        f.graph.add(Download(view, y, out_type, (rows, cols)))
        return f.graph


register_idiom("eyelike", "EyeLike", 0, EyeLikeRule())   # DIAGONAL_MATRIX, Offset k, Value 1
