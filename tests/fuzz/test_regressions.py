"""Counterexamples the fuzz properties found, shrunk to plain regression tests.

Each stays here (failing until the project is fixed, passing after) so the bug cannot return
unnoticed whatever hypothesis happens to draw.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from compiler import compile_model
from tests.fuzz.compare import assert_outputs_bit_exact, reference


def _squeeze_nonzero(in_type: int):
    x = h.make_tensor_value_info("x", in_type, ["a", "b"])
    y = h.make_tensor_value_info("y", T.INT64, [None, None])
    nodes = [h.make_node("Squeeze", ["x"], ["s"], name="squeeze"),
             h.make_node("NonZero", ["s"], ["y"], name="nonzero")]
    graph = h.make_graph(nodes, "squeeze_nonzero", [x], [y])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


def _reshape_nonzero(in_type: int):
    x = h.make_tensor_value_info("x", in_type, [])
    shape = h.make_tensor_value_info("shape", T.INT64, [None])
    y = h.make_tensor_value_info("y", T.INT64, [None, None])
    nodes = [h.make_node("Reshape", ["x", "shape"], ["r"], name="reshape", allowzero=1),
             h.make_node("NonZero", ["r"], ["y"], name="nonzero")]
    graph = h.make_graph(nodes, "reshape_nonzero", [x, shape], [y])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 14)], ir_version=8)


# Bug 1: a NonZero whose input rank is unknown at compile time (after Squeeze without axes over
# symbolic dims, or Reshape to a fed shape) and that is left to ONNX (feature level below 3_0;
# or a 64-bit input at any level) runs on onnxruntime even when the input turns out to be a
# scalar at run time: the result has onnxruntime's shape (1, nnz), not ONNX's (0, nnz). The
# scalar-NonZero deviation check (runtime/onnx_regions.py, _deviation) only looks at the
# compile-time shape, which is unknown here.
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
    model = make(in_type)
    ours = compile_model(model, feature_level=level).run(feeds, strict=True)
    expected = reference(model, feeds)
    assert expected["y"].shape[0] == 0
    assert_outputs_bit_exact(ours, expected)


# Bug 2: compiled.run raises a bare "ValueError: assignment destination is read-only" for a feed
# that is C-contiguous but whose strides on size-1 dimensions are not the packed ones (x[None],
# a transposed column, a Fortran-ordered copy of a 1 x n array, np.broadcast_to(v, (1, n))).
# The emulator binds the upload buffer to the host tensor's memory (read-only) because the feed
# is C-contiguous, then kernels.upload compares strides, finds them different and copies into
# that read-only buffer.
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
    model = h.make_model(h.make_graph(
        [h.make_node("NonZero", ["x"], ["y"], name="nonzero")], "nonzero",
        [h.make_tensor_value_info("x", T.FLOAT, [1, 3])],
        [h.make_tensor_value_info("y", T.INT64, [None, None])]),
        opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    ours = compile_model(model, feature_level=level).run({"x": x}, strict=True)
    assert_outputs_bit_exact(ours, {"y": np.array([[0, 0], [0, 2]], np.int64)})


# Bug 3: the torch.eye idiom (lowering/diagonal_idioms.py, match_eye_from_ranges) accepts
# Range(0, n, 1) of a floating type and sizes the matrix int(n), but Range has ceil(n) elements:
# Range(0, 0.5, 1) is [0.0], so Equal(Unsqueeze(r, -1), r) is 1x1 True, yet the lowered model
# returns a 0x0 result (2.5 gives 2x2 instead of 3x3). _scalar_int truncates the start and
# delta the same way (Range(0, 3, 1.5) is matched as Range(0, 3, 1)).
def _eye_from_float_range(n: float, delta: float = 1.0):
    from onnx import numpy_helper
    inits = [numpy_helper.from_array(np.array(0, np.float32), "start"),
             numpy_helper.from_array(np.array(delta, np.float32), "delta"),
             numpy_helper.from_array(np.array(n, np.float32), "n"),
             numpy_helper.from_array(np.array([-1], np.int64), "axes")]
    nodes = [h.make_node("Range", ["start", "n", "delta"], ["rows"], name="range_rows"),
             h.make_node("Unsqueeze", ["rows", "axes"], ["column"], name="unsqueeze"),
             h.make_node("Equal", ["column", "rows"], ["eq"], name="equal")]
    graph = h.make_graph(nodes, "eye", [], [h.make_tensor_value_info("eq", T.BOOL, [None, None])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("level", ["3_0", "5_1"])
@pytest.mark.parametrize("n,delta", [(0.5, 1.0), (2.5, 1.0), (3.0, 1.5)])
def test_eye_from_float_ranges_has_ranges_length(level, n, delta):
    model = _eye_from_float_range(n, delta)
    ours = compile_model(model, feature_level=level).run({}, strict=True)
    expected = reference(model, {})
    assert expected["eq"].shape == (int(np.ceil(n / delta)),) * 2
    assert_outputs_bit_exact(ours, expected)


@pytest.mark.parametrize("make_feed", [
    lambda: np.array([0.0], np.float32)[::-1],              # one element, stride -4
    lambda: np.array([5.0, 6.0], np.float32)[:1],           # a prefix view
    lambda: np.repeat(np.array([3.0], np.float32), 2)[::2],  # one element, stride 8
], ids=["flipped", "prefix", "strided"])
def test_one_element_views_upload(make_feed):
    x = make_feed()
    model = h.make_model(h.make_graph(
        [h.make_node("NonZero", ["x"], ["y"], name="nonzero")], "nonzero",
        [h.make_tensor_value_info("x", T.FLOAT, [1])],
        [h.make_tensor_value_info("y", T.INT64, [None, None])]),
        opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    ours = compile_model(model, feature_level="5_1").run({"x": x}, strict=True)
    assert_outputs_bit_exact(ours, reference(model, {"x": np.ascontiguousarray(x)}))


# Bug 4: backend="ort" runs DIAGONAL_MATRIX as EyeLike(...) * Value (runtime/ort_operators.py,
# diagonal_matrix), so the zeros off the diagonal become 0 * Value: NaN for Value = +-inf, -0.0
# for Value = -0.0. DIAGONAL_MATRIX writes 0 there (and the CPU emulator does). Reached by a
# constant single-diagonal initializer (constant_diagonal idiom) holding inf or -0.0.
@pytest.mark.parametrize("value", [np.inf, -np.inf, -0.0], ids=["inf", "-inf", "-0.0"])
def test_ort_backend_diagonal_matrix_keeps_zeros_off_the_diagonal(value):
    from onnx import numpy_helper
    w = np.where(np.eye(3, 4, 1) == 1, np.float32(value), np.float32(0)).astype(np.float32)
    graph = h.make_graph([h.make_node("Identity", ["w"], ["y"], name="identity")], "band", [],
                         [h.make_tensor_value_info("y", T.FLOAT, [None, None])],
                         [numpy_helper.from_array(w, "w")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 14)], ir_version=8)
    compiled = compile_model(model, feature_level="5_1")
    assert compiled.graph.dml_operators == ["DIAGONAL_MATRIX"]
    expected = reference(model, {})
    assert_outputs_bit_exact(compiled.run({}, strict=True), expected)
    ours = compiled.run({}, backend="ort", providers=["CPUExecutionProvider"], strict=True)
    assert_outputs_bit_exact(ours, expected)
