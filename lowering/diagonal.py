"""Diagonal generators shared by EyeLike and the constant idioms: a band of the diagonals
x - y in [begin, end) holds Value, everything else 0, in every matrix of a batch.

A single diagonal whose value FLOAT32 holds exactly becomes DIAGONAL_MATRIX (2_0+, in the types its
table has at the level); any other band, or a value FLOAT32 cannot hold, needs DIAGONAL_MATRIX1 and
its exact typed Value (5_1+). A band no table takes at the target is declined naming the first later
level (and its operator) that does.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from onnx_dml_lowering.ir import DiagonalMatrix, DiagonalMatrix1, Download, EmptyTensor, Graph, TensorDesc
from onnx_dml_lowering.ir.dtypes import DataType, from_onnx, onnx_to_numpy, onnx_type_name
from onnx_dml_lowering.ir.feature_levels import ALL_LEVELS, FeatureLevel
from onnx_dml_lowering.ir.operators import INT32_MAX, INT32_MIN
from onnx_dml_lowering.ir.support import DIAGONAL_MATRIX, DIAGONAL_MATRIX1
from onnx_dml_lowering.ir.tensor_desc import Dim

from .common import carried, dims_for, level_reason, pad_sizes
from .match import Decline
from .node import Names, product


def float32_exact(value: Any, onnx_type: int) -> bool:
    """Does DIAGONAL_MATRIX's FLOAT Value reproduce `value` in the output type bit for bit?"""
    dtype = onnx_to_numpy(onnx_type)
    typed = np.array(value, dtype=dtype)
    if dtype.kind == "f":
        if np.isnan(typed):
            return False
        return np.array(np.float32(typed), dtype=dtype).tobytes() == typed.tobytes()
    if dtype == np.bool_:
        return True
    return float(np.float32(int(typed))) == int(typed)


def clamp_band(begin: int, end: int, rows: int, cols: int) -> "tuple[int, int]":
    """The same band with bounds inside INT32: x - y only spans [-(rows-1), cols-1]."""
    lo, hi = -rows, cols
    return max(lo, min(begin, hi)), max(lo, min(end, hi))


def _operator_at(dtype: DataType, single_exact: bool, level: FeatureLevel) -> "str | None":
    """The operator a band of `dtype` takes at `level` (DIAGONAL_MATRIX for one diagonal whose
    value FLOAT32 holds exactly, `single_exact`), or None when neither table takes it there."""
    plain = DIAGONAL_MATRIX.row(level)
    if single_exact and plain is not None and dtype in plain.tensors["OutputTensor"].types:
        return DIAGONAL_MATRIX.name
    row = DIAGONAL_MATRIX1.row(level)
    if row is not None and dtype in row.tensors["OutputTensor"].types:
        return DIAGONAL_MATRIX1.name
    return None


def band_operator(onnx_type: int, value: Any, single: bool, level: FeatureLevel) -> str:
    """The operator emit_band generates a band with (DIAGONAL_MATRIX for one diagonal whose value
    FLOAT32 holds exactly, in a type its table has at `level`; else DIAGONAL_MATRIX1); raises
    Decline naming the earliest operator and feature level that would generate it. Sizes play no
    part, so a rule's decline_reason asks it (through band_reason) before any size is known."""
    carrier, carried_value = carried(onnx_type, value)      # bfloat16: its 16 bits as UINT16
    dtype = from_onnx(carrier)
    if dtype is None:
        raise Decline(f"output type {onnx_type_name(onnx_type)} has no DirectML equivalent")
    exact = single and float32_exact(carried_value, carrier)
    operator = _operator_at(dtype, exact, level)
    if operator is not None:
        return operator
    raise Decline(_missing_reason(onnx_type, dtype, value, single, exact, level))


def _missing_reason(onnx_type: int, dtype: DataType, value: Any, single: bool, exact: bool,
                    level: FeatureLevel) -> str:
    """Why no operator generates the band at `level`, naming the first later level (read from the
    tables) and the operator there that would: an int32 eye needs DIAGONAL_MATRIX at 2_1, not 5_1."""
    if not single:
        subject = "a band wider than one diagonal"
    elif not exact:
        subject = f"Value {value!r}, which FLOAT32 cannot hold exactly,"
    else:
        subject = f"one diagonal of output type {onnx_type_name(onnx_type)} ({dtype.name})"
    later = next(((_operator_at(dtype, exact, lv), lv) for lv in ALL_LEVELS
                  if lv > level and _operator_at(dtype, exact, lv) is not None), None)
    prefix = ""
    if DIAGONAL_MATRIX.row(level) is None and DIAGONAL_MATRIX1.row(level) is None:
        prefix = (f"{level_reason(DIAGONAL_MATRIX, level)}, nor is DIAGONAL_MATRIX1 (introduced in "
                  f"{DIAGONAL_MATRIX1.introduced}): ")
    if later is None:
        return (f"{prefix}output type {onnx_type_name(onnx_type)} ({dtype.name}) is not supported by "
                f"DIAGONAL_MATRIX or DIAGONAL_MATRIX1 at {level} or any later feature level")
    operator, first = later
    return f"{prefix}{subject} needs {operator} (feature level {first}; target {level})"


def band_reason(onnx_type: int, value: Any, single: bool, level: FeatureLevel) -> "str | None":
    """band_operator's reason to decline, or None: what a band rule's decline_reason returns."""
    try:
        band_operator(onnx_type, value, single, level)
    except Decline as exc:
        return exc.reason
    return None


def emit_band(graph: Graph, names: Names, y: str, onnx_type: int, shape: "tuple[int, ...]",
              begin: int, end: int, value: Any, level: FeatureLevel,
              inverted: bool = False, plain: bool = True) -> Graph:
    """Generate `y` of `shape` ([..., rows, cols]): Value on diagonals x - y in [begin, end)
    (outside it when `inverted`), 0 elsewhere; raises Decline when no operator fits. Bounds may
    be any Python ints. The caller has declared `y` among the graph's outputs (a Fragment does).
    plain=False keeps a band that happens to be one diagonal on DIAGONAL_MATRIX1: the operator
    its rule reported before the sizes were known."""
    carrier, value = carried(onnx_type, value)             # bfloat16: its 16 bits as UINT16
    dtype = from_onnx(carrier)
    if dtype is None:
        raise Decline(f"output type {onnx_type_name(onnx_type)} has no DirectML equivalent")
    if product(shape) == 0:
        graph.add(EmptyTensor(y, onnx_type, tuple(shape)))
        return graph
    rows, cols = shape[-2:]
    batch = product(shape[:-2])
    single = plain and not inverted and end == begin + 1
    operator = band_operator(carrier, value, single, level)
    if operator == DIAGONAL_MATRIX.name:
        begin, _ = clamp_band(begin, end, rows, cols)
        if not INT32_MIN <= begin <= INT32_MAX:
            raise Decline(f"diagonal {begin} of a {rows}x{cols} matrix does not fit the 32-bit Offset")
        sizes = pad_sizes(((batch,) if batch > 1 else ()) + (rows, cols),
                          dims_for(DIAGONAL_MATRIX, level, "OutputTensor", 3 if batch > 1 else 2) or 4)
        view = _output(graph, names, dtype, sizes)
        graph.add(DiagonalMatrix(view, begin, float(np.float32(np.array(value, onnx_to_numpy(carrier))))))
    else:
        begin, end = clamp_band(begin, end, rows, cols)
        if not inverted and begin <= -(rows - 1):
            begin = INT32_MIN                  # every diagonal from the first: an open bound
        if not inverted and end >= cols:
            end = INT32_MAX
        if inverted:
            begin, end = end, begin            # Begin > End: Value outside [End, Begin)
        sizes = ((batch,) if batch > 1 else ()) + (rows, cols)
        view = _output(graph, names, dtype, sizes)
        typed = np.array(value, dtype=onnx_to_numpy(carrier))
        graph.add(DiagonalMatrix1(None, view, dtype, typed.item() if typed.dtype != np.bool_ else int(typed),
                                  begin, end))
    graph.add(Download(view, y, onnx_type, tuple(shape)))
    return graph


def _output(graph: Graph, names: Names, dtype: DataType, sizes: "tuple[Dim, ...]") -> str:
    desc = TensorDesc(dtype, sizes)
    buf, view = names("out"), names("out.view")
    graph.add_buffer(buf, desc.min_total_size)
    graph.add_view(view, buf, desc)
    return view


# Elements find_band examines at once: an initializer is read block by block, never copied whole
# nor given full-size temporaries (a 2.4 GB weight is a candidate like any other).
BAND_BLOCK = 1 << 20


def _bits(array: np.ndarray) -> np.ndarray:
    """The array's elements as unsigned integers of their width: compared bit for bit (-0.0 is
    not +0, a NaN equals only its own bits)."""
    return array.view(np.uint8) if array.dtype == np.bool_ else array.view(f"u{array.dtype.itemsize}")


def may_hold_band(shape: "tuple[int, ...]", first_row: np.ndarray) -> bool:
    """find_band's first tests, on the shape and the first row of the first matrix alone: False
    only where find_band gives None. A weight is told apart from a few bytes of its file (its
    first row holds several values), the rest never read."""
    if len(shape) < 2 or 0 in shape or shape[-2] < 2 or shape[-1] < 2 or first_row.dtype.kind not in "biuf":
        return False
    row = _bits(np.ascontiguousarray(first_row))
    set_in_row = row[row != 0]
    return not (set_in_row.size and not np.all(set_in_row == set_in_row[0]))


def find_band(array: np.ndarray) -> "tuple[int, int, bool, Any] | None":
    """(begin, end, inverted, value) if every matrix of `array` is one value on a band of
    diagonals (or outside one) and +0 elsewhere; None otherwise. The first row decides most
    arrays (a weight's holds several values); the rest is read in blocks of rows."""
    if array.ndim < 2 or array.size == 0 or not may_hold_band(array.shape, array[(0,) * (array.ndim - 1)]):
        return None
    rows, cols = array.shape[-2:]
    matrices = array.reshape(-1, rows, cols)
    bits = _bits(matrices)
    value_bits, first = None, None
    filled = np.zeros(rows + cols - 1, np.int64)            # set elements per diagonal x - y + rows - 1
    step = max(1, BAND_BLOCK // cols)
    for top in range(0, rows, step):
        block = bits[0, top:top + step]
        group = max(1, BAND_BLOCK // block.size)             # matrices compared at once
        for first_matrix in range(1, bits.shape[0], group):
            if not np.all(bits[first_matrix:first_matrix + group, top:top + step] == block):
                return None                                  # one matrix differs
        ys, xs = np.nonzero(block)
        if not ys.size:
            continue
        values = block[ys, xs]
        if value_bits is None:
            value_bits, first = values[0], (top + int(ys[0]), int(xs[0]))
        if not np.all(values == value_bits):
            return None
        filled += np.bincount(xs - ys + (rows - 1 - top), minlength=rows + cols - 1)
    if first is None or int(filled.sum()) == rows * cols:
        return None                                          # all zero, or no zero at all
    value = matrices[0][first]
    if array.dtype.kind == "f" and np.isnan(value):
        return None
    k = np.arange(rows + cols - 1) - (rows - 1)
    lengths = np.where(k >= 0, np.minimum(rows, cols - k), np.minimum(rows + k, cols))
    if np.any((filled != 0) & (filled != lengths)):
        return None                              # a diagonal only partly filled
    on = np.flatnonzero(filled) - (rows - 1)     # the filled diagonals x - y, ascending
    if on[-1] - on[0] + 1 == on.size:
        return int(on[0]), int(on[-1]) + 1, False, value
    off = np.flatnonzero(filled == 0) - (rows - 1)
    if off[-1] - off[0] + 1 == off.size:         # filled outside one band: an inverted band
        return int(off[0]), int(off[-1]) + 1, True, value
    return None
