"""Counterexamples the fuzz properties found, shrunk to plain regression tests.

Each bug was found by a property in this directory and is pinned here so it cannot return
unnoticed, whatever hypothesis happens to draw. (All four failed when written; the commit that
fixed each is named beside it.)
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from tests.builders import graph_model, single_node_model
from tests.oracle import assert_outputs_same, differential


def _squeeze_nonzero(in_type: int):
    nodes = [h.make_node("Squeeze", ["x"], ["s"], name="squeeze"),
             h.make_node("NonZero", ["s"], ["y"], name="nonzero")]
    return graph_model(nodes, [("x", in_type, ["a", "b"])], [("y", T.INT64, 2)])


def _reshape_nonzero(in_type: int):
    nodes = [h.make_node("Reshape", ["x", "shape"], ["r"], name="reshape", allowzero=1),
             h.make_node("NonZero", ["r"], ["y"], name="nonzero")]
    return graph_model(nodes, [("x", in_type, []), ("shape", T.INT64, 1)], [("y", T.INT64, 2)], opset=14)


# Bug 1 (found by test_two_node_models_match_onnx_reference; fixed in 03bed00): a NonZero whose
# input rank is unknown at compile time (after Squeeze without axes over symbolic dims, or
# Reshape to a fed shape) and that is left to ONNX (feature level below 3_0, or a 64-bit input
# at any level) ran on onnxruntime even when its input was a scalar at run time, so the result
# had onnxruntime's shape (1, nnz) instead of ONNX's (0, nnz): the scalar-NonZero deviation check
# (runtime/onnx_regions.py) only looked at the compile-time shape, unknown here.
@pytest.mark.parametrize("level,make,in_type,feeds", [
    ("1_0", _squeeze_nonzero, T.FLOAT, {"x": np.array([[2.0]], np.float32)}),
    ("2_1", _squeeze_nonzero, T.UINT8, {"x": np.array([[0]], np.uint8)}),
    ("5_1", _squeeze_nonzero, T.INT64, {"x": np.array([[1]], np.int64)}),
    ("6_4", _squeeze_nonzero, T.INT64, {"x": np.array([[0]], np.int64)}),
    ("1_0", _reshape_nonzero, T.INT32, {"x": np.array(0, np.int32), "shape": np.array([], np.int64)}),
    ("4_1", _reshape_nonzero, T.INT64, {"x": np.array(0, np.int64), "shape": np.array([], np.int64)}),
], ids=["squeeze-float-1_0", "squeeze-uint8-2_1", "squeeze-int64-5_1", "squeeze-int64-6_4",
        "reshape-int32-1_0", "reshape-int64-4_1"])
def test_scalar_nonzero_of_unknown_rank_left_to_onnx_has_onnx_shape(level, make, in_type, feeds):
    assert differential(make(in_type), feeds, level).expected["y"].shape[0] == 0


# Bug 2 (found by test_strict_poison_never_reaches_an_output; fixed in a2cf67d): compiled.run
# raised a bare "ValueError: assignment destination is read-only" for a feed that is C-contiguous
# but whose strides on size-1 dimensions are not the packed ones (x[None], a transposed column,
# a Fortran-ordered 1 x n array, np.broadcast_to(v, (1, n)), a one-element x[::-1]). The emulator
# bound the upload buffer to the feed's memory (read-only) because the feed is C-contiguous, then
# kernels.upload compared strides, found them different and copied into that read-only buffer.
_ROW = np.array([1.0, 0.0, 2.5], np.float32)


@pytest.mark.parametrize("level", ["3_0", "5_1"])
@pytest.mark.parametrize("make_feed", [
    lambda: _ROW[None],
    lambda: _ROW.reshape(3, 1).T,
    lambda: _ROW.reshape(1, 3).copy(order="F"),
    lambda: np.broadcast_to(_ROW, (1, 3)),
], ids=["x[None]", "column.T", "fortran", "broadcast_to"])
def test_c_contiguous_feed_with_unit_dim_strides_uploads(level, make_feed):
    x = make_feed()
    assert x.flags.c_contiguous and x.strides != (12, 4)
    model = single_node_model("NonZero", T.FLOAT, [1, 3], T.INT64)
    ours = compile_model(model, feature_level=level).run({"x": x}, strict=True)
    assert_outputs_same(ours, {"y": np.array([[0, 0], [0, 2]], np.int64)})


# Bug 3 (found by test_diagonal_idioms_match_onnx_reference; fixed in 3617436): the torch.eye
# idiom (lowering/diagonal_idioms.py, eye_from_ranges) accepted Range(0, n, 1) of a floating type
# and sized the matrix int(n), but Range has ceil(n) elements: Range(0, 0.5, 1) is [0.0], so
# Equal(Unsqueeze(r, -1), r) is 1x1 True, yet the lowered model returned 0x0 (2.5 gave 2x2, not
# 3x3). The start and delta were truncated the same way (Range(0, 3, 1.5) matched as step 1).
def _eye_from_float_range(n: float, delta: float = 1.0):
    inits = {"start": np.array(0, np.float32), "delta": np.array(delta, np.float32),
             "n": np.array(n, np.float32), "axes": np.array([-1], np.int64)}
    nodes = [h.make_node("Range", ["start", "n", "delta"], ["rows"], name="range_rows"),
             h.make_node("Unsqueeze", ["rows", "axes"], ["column"], name="unsqueeze"),
             h.make_node("Equal", ["column", "rows"], ["eq"], name="equal")]
    return graph_model(nodes, [], [("eq", T.BOOL, 2)], inits)


@pytest.mark.parametrize("level", ["3_0", "5_1"])
@pytest.mark.parametrize("n,delta", [(0.5, 1.0), (2.5, 1.0), (3.0, 1.5)])
def test_eye_from_float_ranges_has_ranges_length(level, n, delta):
    expected = differential(_eye_from_float_range(n, delta), {}, level).expected
    assert expected["eq"].shape == (int(np.ceil(n / delta)),) * 2


@pytest.mark.parametrize("make_feed", [
    lambda: np.array([0.0], np.float32)[::-1],              # one element, stride -4
    lambda: np.array([5.0, 6.0], np.float32)[:1],           # a prefix view
    lambda: np.repeat(np.array([3.0], np.float32), 2)[::2],  # one element, stride 8
], ids=["flipped", "prefix", "strided"])
def test_one_element_views_upload(make_feed):
    x = make_feed()
    model = single_node_model("NonZero", T.FLOAT, [1], T.INT64)
    differential(model, {"x": np.ascontiguousarray(x)}, "5_1", our_feeds={"x": x})


# Bug 4 (found by test_ort_backend_matches_onnx_reference; fixed in 3617436): backend="ort" ran
# DIAGONAL_MATRIX as EyeLike(...) * Value (runtime/ort_operators.py), so the zeros off the
# diagonal became 0 * Value: NaN for Value = +-inf, -0.0 for Value = -0.0, where DIAGONAL_MATRIX
# (and the CPU emulator) write 0. Reached by a constant single-diagonal initializer holding inf
# or -0.0 (the constant_diagonal idiom).
@pytest.mark.parametrize("value", [np.inf, -np.inf, -0.0], ids=["inf", "-inf", "-0.0"])
def test_ort_backend_diagonal_matrix_keeps_zeros_off_the_diagonal(value):
    w = np.where(np.eye(3, 4, 1) == 1, np.float32(value), np.float32(0)).astype(np.float32)
    model = graph_model([h.make_node("Identity", ["w"], ["y"], name="identity")], [], [("y", T.FLOAT, 2)],
                        {"w": w}, opset=14)
    compiled, _, expected = differential(model, {}, "5_1")
    assert compiled.graph.dml_operators == ["DIAGONAL_MATRIX"]
    ours = compiled.run({}, backend="ort", providers=["CPUExecutionProvider"], strict=True)
    assert_outputs_same(ours, expected)
