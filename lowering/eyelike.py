"""EyeLike (opset 9+) -> DIAGONAL_MATRIX with Offset = k and Value = 1; the input is never read.

k is an int64: a diagonal that misses the matrix (k >= cols or k <= -rows) is lowered with an
Offset that also misses and fits DirectML's 32-bit INT, so it never wraps onto the matrix.
"""
from __future__ import annotations

from typing import Union

from onnx_dml_lowering.ir import DiagonalMatrix, Download, EmptyTensor, Graph, TensorDesc
from onnx_dml_lowering.ir.dtypes import dml_type, from_onnx, onnx_type_name
from onnx_dml_lowering.ir.feature_levels import FeatureLevel
from onnx_dml_lowering.ir.operators import INT32_MAX, INT32_MIN
from onnx_dml_lowering.ir.support import DIAGONAL_MATRIX

from .common import dims_at, level_reason, pad_sizes
from .node import Names, NodeInfo
from .registry import Declined, register


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


def check(node: NodeInfo, level: FeatureLevel) -> "str | None":
    x = node.input(0)
    if x.rank is not None and x.rank != 2:
        return f"input rank {x.rank}: EyeLike needs a 2-D input"
    out = output_type(node)
    dtype = from_onnx(out)
    if dtype is None:
        return f"output type {onnx_type_name(out)} has no DirectML equivalent"
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


def build(node: NodeInfo, level: FeatureLevel) -> "Union[Graph, Declined]":
    rows, cols = (int(d) for d in node.input(0).shape)
    y, out = node.outputs[0].name, output_type(node)
    graph, names = Graph(level), Names.for_node(node)
    graph.outputs.append(y)
    if rows * cols == 0:
        graph.add(EmptyTensor(y, out, (rows, cols)))
        return graph
    k = int(node.attrs.get("k", 0))
    offset = diagonal_offset(k, rows, cols)
    if offset is None:
        return Declined(f"k = {k} on a {rows}x{cols} matrix does not fit DIAGONAL_MATRIX's 32-bit Offset")
    sizes = pad_sizes((rows, cols), dims_at(DIAGONAL_MATRIX, level, "OutputTensor", 2))
    desc = TensorDesc(dml_type(out), sizes)
    buf, view = names("out"), names("out.view")
    graph.add_buffer(buf, desc.min_total_size)
    graph.add_view(view, buf, desc)
    graph.add(DiagonalMatrix(view, offset, 1.0))
    graph.add(Download(view, y, out, (rows, cols)))
    return graph


RULE = register("eyelike", "EyeLike", check, build, ("DIAGONAL_MATRIX",))
