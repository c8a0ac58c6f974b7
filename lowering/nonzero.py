"""NonZero (opsets 9, 13) -> NONZERO_COORDINATES writing ONNX's INT64 [rank, M] layout directly.

The coordinates view is UINT32 {M, N} with strides {2, 2M} over a zero-cleared INT64 buffer:
one descriptor transposes to ONNX's layout and widens to int64 (the low word of each slot),
as onnxruntime's DirectML EP does. The count is read back to the host, then the [rank, nnz]
prefix of every row is cropped with a strided ELEMENT_WISE_IDENTITY (rank 1: no copy at all).
"""
from __future__ import annotations

from dataclasses import dataclass

from onnx_dml_lowering.ir import (ClearBuffer, DataType, Download, ElementWiseBitAnd, ElementWiseBitOr, ElementWiseIdentity,
                Graph,
                NonZeroCoordinates, ReadCount, TensorDesc)
from onnx_dml_lowering.ir.dtypes import ONNX_INT64, dml_type, from_onnx, onnx_type_name
from onnx_dml_lowering.ir.feature_levels import FeatureLevel
from onnx_dml_lowering.ir.support import ELEMENT_WISE_BIT_AND, ELEMENT_WISE_BIT_OR, ELEMENT_WISE_IDENTITY, NONZERO_COORDINATES

from .common import dims_at, dims_for, level_reason, pad_sizes, type_reason, upload
from .match import Decline, Found, Fragment, GraphView, IdiomRule
from .node import Names, NodeInfo, TensorInfo, product
from .registry import register_idiom


def nonzero_reason(x: TensorInfo, level: FeatureLevel) -> "str | None":
    """Why NONZERO_COORDINATES cannot take input x at `level` (its type, or its rank when known), or None."""
    dtype = from_onnx(x.onnx_type)
    if dtype is None:
        return type_reason(x.onnx_type, "input")
    reason = level_reason(NONZERO_COORDINATES, level)
    if reason:
        return reason
    row = NONZERO_COORDINATES.at(level)
    if dtype.bits == 64:
        # No 64-bit input at any level: the two 32-bit words are OR-ed into one UINT32 first.
        for glue in (ELEMENT_WISE_IDENTITY, ELEMENT_WISE_BIT_OR, ELEMENT_WISE_BIT_AND):
            if glue.row(level) is None or DataType.UINT32 not in glue.at(level).tensors["OutputTensor"].types:
                return (f"input type {onnx_type_name(x.onnx_type)}: the 64-bit word split needs {glue.name}, "
                        f"not available at feature level {level}")
    elif dtype not in row.tensors["InputTensor"].types:
        return f"input type {onnx_type_name(x.onnx_type)} is not supported by NONZERO_COORDINATES at {level}"
    if x.rank is not None and dims_for(NONZERO_COORDINATES, level, "InputTensor", max(x.rank, 1)) is None:
        limit = row.tensors["InputTensor"].max_dims
        return f"input rank {x.rank} exceeds NONZERO_COORDINATES's {limit} dimensions at feature level {level}"
    return None


@dataclass(frozen=True)
class Coordinates:
    buffer: str          # INT64 coordinates, low words written by NONZERO_COORDINATES
    nnz: str             # the count symbol read back to the host
    n: int               # coordinates per element (the ONNX rank, 1 for a scalar)
    m: int               # input elements (rows of the coordinates tensor)


def emit_coordinates(graph: Graph, names: Names, x: TensorInfo, level: FeatureLevel,
                     element_major: bool = False) -> Coordinates:
    """Upload x, clear an INT64 buffer, run NONZERO_COORDINATES into its low words, read the count.

    element_major=False: ONNX's [N, M] layout (strides {2, 2M}, onnxruntime's DirectML EP);
    element_major=True: DirectML's own [M, N] layout (strides {2N, 2}), i.e. NonZero transposed.
    """
    shape = tuple(x.shape)
    rank, m = len(shape), product(shape)
    # A scalar is counted as shape [1].
    dims = dims_at(NONZERO_COORDINATES, level, "InputTensor", max(rank, 1))
    in_sizes = pad_sizes(shape or (1,), dims)
    n = max(rank, 1)
    row = NONZERO_COORDINATES.at(level)
    count_dims = dims if row.same_dimension_count else 1
    coord_dims = dims if row.same_dimension_count else 2
    dtype = dml_type(x.onnx_type)
    if dtype.bits == 64:
        x_view = _combine_words(graph, names, x, dtype, m, in_sizes)
    else:
        x_view = upload(graph, names, x.name, dtype, in_sizes)

    count_buf, count_view = names("count"), names("count.view")
    graph.add_buffer(count_buf, 4)
    graph.add_view(count_view, count_buf, TensorDesc(DataType.UINT32, (1,) * count_dims))

    coords_buf, coords_view = names("coords"), names("coords.view")
    coords_bytes = 8 * n * m
    graph.add_buffer(coords_buf, coords_bytes)
    lead = (1,) * (coord_dims - 2)
    strides = (2 * n, 2) if element_major else (2, 2 * m)
    graph.add_view(coords_view, coords_buf, TensorDesc(
        DataType.UINT32, lead + (m, n), (0,) * len(lead) + strides, total_size=coords_bytes))
    graph.add(ClearBuffer(coords_buf))
    graph.add(NonZeroCoordinates(x_view, count_view, coords_view))
    nnz = names("nnz")
    graph.add(ReadCount(count_view, nnz))
    return Coordinates(coords_buf, nnz, n, m)


def _combine_words(graph: Graph, names: Names, x: TensorInfo, dtype: DataType, m: int,
                   in_sizes: "tuple[int, ...]") -> str:
    """A UINT32 view, shaped like x, that is non-zero exactly where the 64-bit x is.

    The words are first split into two planes (a strided copy: a binding cannot start at the
    high word's 4-byte offset), then high |= low. For doubles the sign bit is masked off the
    high word first, so -0.0 counts as zero; NaN and denormals keep a non-zero bit.
    """
    words = upload(graph, names, x.name, DataType.UINT32, (m, 2))
    plane = (m + 3) // 4 * 4                          # 16-byte aligned second plane
    planes = names("planes")
    graph.add_buffer(planes, 8 * plane)
    split = names("planes.view")
    graph.add_view(split, planes, TensorDesc(DataType.UINT32, (m, 2), (1, plane), total_size=8 * plane))
    graph.add(ElementWiseIdentity(words, split))
    low, high = names("low.view"), names("high.view")
    graph.add_view(low, planes, TensorDesc(DataType.UINT32, (m,)))
    graph.add_view(high, planes, TensorDesc(DataType.UINT32, (m,)), 4 * plane)
    if dtype == DataType.FLOAT64:
        mask_buf, mask = names("sign_mask"), names("sign_mask.view")
        graph.add_buffer(mask_buf, 4)
        graph.add_view(mask, mask_buf, TensorDesc(DataType.UINT32, (m,), (0,)))
        graph.add(ClearBuffer(mask_buf, 0x7FFFFFFF))
        graph.add(ElementWiseBitAnd(high, mask, high))
    graph.add(ElementWiseBitOr(low, high, low))
    combined = names("combined.view")
    graph.add_view(combined, planes, TensorDesc(DataType.UINT32, in_sizes))
    return combined


class NonZeroRule(IdiomRule):
    # NonZero(x) -> NONZERO_COORDINATES into ONNX's [rank, M] layout, count read back, rows cropped.
    operators = ("NONZERO_COORDINATES", "ELEMENT_WISE_IDENTITY")

    def pattern(self, anchor: NodeInfo, view: GraphView) -> Found:
        x = anchor.input(0)
        # rewrite reads x's type and (run-time) shape alone: a detector's many NonZero share a build
        return Found((anchor.name,), (x,), (anchor.outputs[0].name,), portable=(x.onnx_type,), x=x)

    def decline_reason(self, level: FeatureLevel, x: TensorInfo) -> "str | None":
        return nonzero_reason(x, level)

    def rewrite(self, f: Fragment, x: TensorInfo) -> Graph:
        x = f.tensor(x)
        reason = nonzero_reason(x, f.level)        # a rank known only now is checked only now
        if reason:
            raise Decline(reason)
        y, graph, names = f.outputs[0], f.graph, f.names
        rank = len(x.shape)
        if product(x.shape) == 0:
            return f.empty(y, ONNX_INT64, (rank, 0))
        coords = emit_coordinates(graph, names, x, f.level)
        n, m, nnz, coords_buf = coords.n, coords.m, coords.nnz, coords.buffer
        if rank == 0:
            return f.empty(y, ONNX_INT64, (0, nnz))           # ONNX: a scalar's result is (0, nnz)
        if n == 1:
            # One coordinate row: the first nnz slots of the buffer already are the packed result.
            prefix = names("result.view")
            graph.add_view(prefix, coords_buf, TensorDesc(DataType.INT64, (1, nnz)))
            graph.add(Download(prefix, y, ONNX_INT64, (1, nnz)))
            return graph

        out_buf, out_view = names("result"), names("result.view")
        graph.add_buffer(out_buf, 8 * n, (nnz,))
        graph.add_view(out_view, out_buf, TensorDesc(DataType.INT64, (n, nnz)))
        coords_bytes = 8 * n * m
        copy_types = ELEMENT_WISE_IDENTITY.at(f.level).tensors["InputTensor"].types
        if DataType.INT64 in copy_types:
            src = names("crop.view")
            graph.add_view(src, coords_buf, TensorDesc(DataType.INT64, (n, nnz), (m, 1), total_size=coords_bytes))
            graph.add(ElementWiseIdentity(src, out_view))
        else:
            # No 64-bit copy below 4_1: move each int64 as its two UINT32 words.
            src, dst = names("crop.words"), names("result.words")
            graph.add_view(src, coords_buf, TensorDesc(DataType.UINT32, (n, nnz, 2), (2 * m, 2, 1),
                                                       total_size=coords_bytes))
            graph.add_view(dst, out_buf, TensorDesc(DataType.UINT32, (n, nnz, 2)))
            graph.add(ElementWiseIdentity(src, dst))
        graph.add(Download(out_view, y, ONNX_INT64, (n, nnz)))
        return graph


register_idiom("nonzero", "NonZero", 0, NonZeroRule())   # NONZERO_COORDINATES + ELEMENT_WISE_IDENTITY crop
