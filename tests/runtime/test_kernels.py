"""The fast numpy kernels (runtime/kernels.py) and the emulator's memory binding against
straightforward references written here: np.nonzero over an independent bit test, np.eye-style
diagonals, plain copies. Bit for bit, in strict and non-strict mode, over grids of types,
shapes (several blocks, padded 3_0 shapes, size-1 and non-power-of-two dimensions), densities
with -0.0, NaN and denormals planted, and strided output views."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import (ClearBuffer, DataType, DiagonalMatrix, Download, ElementWiseIdentity, Graph,
                NonZeroCoordinates, ReadCount, TensorDesc, Upload, parse_level)
from onnx_dml_lowering.runtime import binding, kernels
from onnx_dml_lowering.runtime.interpreter import execute
from tests.builders import graph_model, single_node_model
from tests.oracle import assert_same

POISON = kernels.POISON_WORD
SENTINEL = 0x5A5A5A5A                     # what "untouched" memory holds in these tests
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

NONZERO_TYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32,
                 np.uint8, np.uint16, np.uint32, np.int64, np.bool_]


def bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(UINT[a.dtype.itemsize])


# -- references ----------------------------------------------------------------------------------

def reference_mask(x: np.ndarray) -> np.ndarray:
    """Non-zero on the bits, formulated differently from the kernel: shifting the sign bit out."""
    if x.dtype.kind == "f":
        b = bits(x)
        return (b << b.dtype.type(1)) != 0
    return np.ascontiguousarray(x).view(UINT[x.dtype.itemsize]) != 0


def reference_coordinates(x: np.ndarray, n: int) -> np.ndarray:
    """[count, n] uint32: the trailing n coordinates of each non-zero element, in element order."""
    coords = np.nonzero(reference_mask(x).reshape(x.shape) if x.ndim else reference_mask(x).reshape(1))
    table = np.stack(coords, axis=1) if coords else np.zeros((0, 0), np.int64)
    return table[:, table.shape[1] - n:].astype(np.uint32)


def special_input(dtype, shape, density, rng) -> np.ndarray:
    """Random values at `density`, with -0.0, NaN (both signs, payloads) and denormals planted."""
    size = int(np.prod(shape))
    keep = rng.random(size) < density
    if dtype == np.bool_:
        return keep.reshape(shape)
    if np.dtype(dtype).kind == "f":
        x = (rng.standard_normal(size) * 100).astype(dtype)
        x[~keep] = 0
        u = x.view(UINT[x.itemsize])
        specials = {2: [0x8000, 0x7E00, 0xFE01, 0x0001, 0x83FF, 0x7C00],
                    4: [0x80000000, 0x7FC00000, 0xFFC00001, 0x00000001, 0x807FFFFF, 0x7F800001],
                    8: [0x8000000000000000, 0x7FF8000000000000, 0xFFF0000000000001, 0x1, 0x800FFFFFFFFFFFFF,
                        0x7FF0000000000000]}[x.itemsize]
        for value in specials:
            u[rng.integers(0, size)] = value
        if size > 20:
            u[rng.integers(0, size, size // 10)] = 0x80 << (8 * x.itemsize - 8)   # many -0.0
        return x.reshape(shape)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    x[~keep] = 0
    return x.reshape(shape)


# -- NONZERO_COORDINATES kernel --------------------------------------------------------------------

def coordinates_view(layout: str, m: int, n: int, lead: int = 0):
    """(backing uint32 words filled with SENTINEL, the UINT32 {[1]*lead, M, N} view into them)."""
    if layout == "int64_planes":          # lowering's layout: strides {2, 2M}, low words of int64 slots
        words = np.full(2 * m * n, SENTINEL, np.uint32)
        table = np.lib.stride_tricks.as_strided(words, (m, n), (8, 8 * m))
    elif layout == "element_major":       # nonzero_transpose's layout: strides {2N, 2}
        words = np.full(2 * m * n, SENTINEL, np.uint32)
        table = np.lib.stride_tricks.as_strided(words, (m, n), (8 * n, 8))
    else:                                 # packed {M, N}
        words = np.full(m * n, SENTINEL, np.uint32)
        table = words.reshape(m, n)
    return words, table.reshape((1,) * lead + (m, n)) if lead else table


def run_kernel(x, n, layout, strict, lead=0):
    m = max(x.size, 1)
    words, coords = coordinates_view(layout, m, n, lead)
    count = np.full((1,) * max(1, lead + 2 - 1), SENTINEL, np.uint32)
    data = x.view(np.uint8) if x.dtype == np.bool_ else x
    kernels.nonzero_coordinates(data, count, coords, strict)
    return words, coords, int(count.reshape(-1)[0])


def check_kernel_result(x, n, layout, words, coords, count, strict):
    want = reference_coordinates(x, n)
    table = coords.reshape(coords.shape[-2:])
    assert count == len(want)
    assert_same(np.ascontiguousarray(table[:count]), want)
    rest = table[count:]
    assert (rest == (POISON if strict else SENTINEL)).all()
    # Nothing outside the view is written (the high words of the int64 slots, for example).
    probe = np.zeros(words.size, np.uint32)
    view_of_probe = np.lib.stride_tricks.as_strided(probe, table.shape, table.strides)
    view_of_probe[...] = 1
    outside = probe == 0
    assert (words[outside] == SENTINEL).all()


SHAPES = [(1,), (7,), (3, 5), (4, 8), (2, 3, 4), (2, 1, 3, 1, 5), (1, 1, 4, 6), (3, 1), (1, 9),
          (2, 2, 2, 2, 2, 2, 2, 2)]


@pytest.mark.parametrize("dtype", NONZERO_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("layout", ["int64_planes", "element_major", "packed"])
@pytest.mark.parametrize("strict", [True, False])
def test_nonzero_kernel_matches_np_nonzero(dtype, layout, strict, rng):
    for shape, density in itertools.product(SHAPES, [0.0, 0.03, 0.5, 1.0]):
        x = special_input(dtype, shape, density, rng)
        effective = len(shape) - next((i for i, s in enumerate(shape) if s != 1), len(shape))
        for n in range(max(effective, 1), len(shape) + 1):      # N: effective rank .. rank
            words, coords, count = run_kernel(x, n, layout, strict)
            check_kernel_result(x, n, layout, words, coords, count, strict)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("block", [1, 5, 64, 4096])
def test_nonzero_kernel_across_block_boundaries(block, strict, rng, monkeypatch):
    monkeypatch.setattr(kernels, "BLOCK", block)
    for dtype, shape, density in [(np.float32, (37, 41), 0.3), (np.int16, (3, 5, 67), 0.02),
                                  (np.uint8, (1000,), 0.9), (np.float16, (6, 7, 8), 0.5),
                                  (np.float64, (2, 3, 5, 7), 0.1)]:
        x = special_input(dtype, shape, density, rng)
        words, coords, count = run_kernel(x, len(shape), "int64_planes", strict)
        check_kernel_result(x, len(shape), "int64_planes", words, coords, count, strict)


def test_nonzero_kernel_several_default_blocks(rng):
    # more elements than one block, non-power-of-two and power-of-two dimensions
    for shape in [(kernels.BLOCK // 1000 + 3, 1000), (3, kernels.BLOCK // 2 + 7), (2, kernels.BLOCK)]:
        x = special_input(np.float32, shape, 0.2, rng)
        for strict in (True, False):
            words, coords, count = run_kernel(x, 2, "int64_planes", strict)
            check_kernel_result(x, 2, "int64_planes", words, coords, count, strict)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_test_on_the_bits_when_the_fpu_would_flush_denormals(dtype, rng, monkeypatch):
    # The kernel compares floats with != 0 only when the FPU keeps denormals; otherwise (and
    # always for float16) it tests the bits. Force the bit path: same answer.
    monkeypatch.setattr(kernels, "_fpu_keeps_denormals", lambda dt: False)
    x = special_input(dtype, (17, 19), 0.4, rng)
    words, coords, count = run_kernel(x, 2, "int64_planes", False)
    check_kernel_result(x, 2, "int64_planes", words, coords, count, False)


def test_denormals_nan_and_negative_zero_exactly():
    x = np.array([0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x7FC00000, 0xFF800000, 0x3F800000],
                 np.uint32).view(np.float32).reshape(7)
    words, coords, count = run_kernel(x, 1, "packed", False)
    assert count == 5 and coords[:5, 0].tolist() == [2, 3, 4, 5, 6]


@pytest.mark.parametrize("strict", [True, False])
def test_nonzero_kernel_padded_3_0_shapes(strict, rng):
    # 3_0: every tensor 4 (or 5) dims; input {1,1,a,b}, coordinates {1,1,M,N} with N = the rank.
    for shape, n in [((1, 1, 5, 6), 2), ((1, 1, 1, 9), 1), ((1, 2, 3, 4), 3), ((1, 1, 2, 3, 5), 3)]:
        x = special_input(np.float32, shape, 0.4, rng)
        words, coords, count = run_kernel(x, n, "int64_planes", strict, lead=len(shape) - 2)
        check_kernel_result(x, n, "int64_planes", words, coords, count, strict)


def test_nonzero_kernel_reads_strided_inputs(rng):
    base = special_input(np.int32, (6, 10), 0.5, rng)
    for x in (base[:, ::3], base.T, base[::2, 1:7], np.broadcast_to(base[0], (4, 10))):
        words, coords, count = run_kernel(x, 2, "int64_planes", True)
        check_kernel_result(np.ascontiguousarray(x), 2, "int64_planes", words, coords, count, True)


# -- DIAGONAL_MATRIX, clear, download ------------------------------------------------------------

DIAGONAL_TYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                  np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", DIAGONAL_TYPES, ids=lambda t: np.dtype(t).name)
def test_diagonal_matrix_kernel_against_eye(dtype):
    for shape, offset in itertools.product([(1, 1), (3, 5), (5, 3), (4, 4), (2, 3, 4), (2, 2, 3, 5)],
                                           [0, 1, -1, 2, -3, 5, -5, 100, -(2**31), 2**31 - 1]):
        value = np.float32(-2.5)
        want = np.zeros(shape, dtype)
        for row in range(shape[-2]):
            if 0 <= row + offset < shape[-1]:
                want[..., row, row + offset] = kernels.scalar_for(np.dtype(dtype), value)
        got = np.full(shape, 7, dtype)
        kernels.diagonal_matrix(got, offset, value)
        assert_same(got, want)
        # through a strided output view: padding between rows and columns stays untouched
        padded = np.full(shape[:-2] + (shape[-2] + 1, 2 * shape[-1]), 9, dtype)
        kernels.diagonal_matrix(padded[..., :-1, ::2], offset, value)
        assert_same(np.ascontiguousarray(padded[..., :-1, ::2]), want)
        assert (padded[..., -1, :] == 9).all() and (padded[..., 1::2] == 9).all()


# DIAGONAL_MATRIX's FLOAT Value into integers outside their range, as DirectML.dll 1.15.4 wrote them
# (tests/runtime/directml/test_directml_grid.py runs the same values on the real DirectML).
MEASURED_VALUES = [
    (np.int8, 128.5, -128), (np.uint8, -1.5, 255), (np.int16, 32768.5, -32768), (np.uint16, 65536.5, 0),
    (np.int16, 1e10, 0), (np.int32, 1e10, -2**31), (np.int32, float("nan"), -2**31), (np.int32, float("inf"), -2**31),
    (np.uint32, 5e9, 705032704), (np.uint32, -1e10, 2884901888), (np.int64, 9.3e18, -2**63),
    (np.uint64, -1.5, 2**64 - 1), (np.uint64, 1.8e19, 18000000404716257280), (np.uint64, 1.9e19, 2**63),
    (np.uint64, float("nan"), 2**63),
]


@pytest.mark.parametrize("dtype, value, want", MEASURED_VALUES, ids=lambda v: str(v))
def test_diagonal_matrix_out_of_range_values_as_directml_writes_them(dtype, value, want):
    out = np.zeros((2, 2), dtype)
    kernels.diagonal_matrix(out, 0, value)
    assert out[0, 0] == out[1, 1] == want and out[0, 1] == out[1, 0] == 0


@pytest.mark.parametrize("size", [1, 3, 4, 7, 64, 65])
@pytest.mark.parametrize("value", [0, 0xFFFFFFFF, 0xCDCDCDCD, 0x12345678, 0xBAADF00D])
def test_clear_fills_every_32_bit_word(size, value):
    raw = np.full(size, 0x11, np.uint8)
    kernels.clear(raw, value)
    want = np.frombuffer(np.full((size + 3) // 4, value, np.uint32).tobytes(), np.uint8)[:size]
    assert raw.tobytes() == want.tobytes()


@pytest.mark.parametrize("share", [True, False])
def test_download_one_pass_and_sharing(share, rng):
    source = rng.integers(-5, 5, (4, 6)).astype(np.int64)
    got = kernels.download(source, np.int64, (4, 6), share=share)
    assert_same(got, source)
    assert np.shares_memory(got, source) == share
    got = kernels.download(source.T, np.int64, (6, 4), share=share)        # strided: always a copy
    assert_same(got, np.ascontiguousarray(source.T))
    assert not np.shares_memory(got, source)
    got = kernels.download(source.astype(np.uint8), np.bool_, (4, 6), share=share)
    assert got.dtype == np.bool_ and (got == (source != 0)).all() and got.flags.c_contiguous
    got = kernels.download(source.astype(np.uint32), np.int64, (4, 6), share=share)
    assert_same(got, source.astype(np.uint32).astype(np.int64))


# -- whole graphs: strict and non-strict agree bit for bit; the emulator's memory binding --------

def nonzero_model(in_type, shape, transpose=False):
    nodes = [h.make_node("NonZero", ["x"], ["nz" if transpose else "y"], name="nonzero")]
    if transpose:
        nodes.append(h.make_node("Transpose", ["nz"], ["y"], name="transpose", perm=[1, 0]))
    return graph_model(nodes, [("x", in_type, shape)], [("y", TP.INT64, 2)])


ONNX_OF = {np.float16: TP.FLOAT16, np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.int8: TP.INT8,
           np.int16: TP.INT16, np.int32: TP.INT32, np.int64: TP.INT64, np.uint8: TP.UINT8,
           np.uint16: TP.UINT16, np.uint32: TP.UINT32, np.bool_: TP.BOOL}


@pytest.mark.parametrize("level", ["3_0", "4_1", "5_1"])
@pytest.mark.parametrize("transpose", [False, True])
def test_graph_outputs_bit_identical_between_strict_and_default(level, transpose, rng):
    for dtype, shape in [(np.float32, (5, 7)), (np.float16, (2, 3, 4)), (np.uint8, (9,)),
                         (np.bool_, (3, 1, 4)), (np.int32, (1, 6, 2)), (np.int64, (4, 5))]:
        compiled = compile_model(nonzero_model(ONNX_OF[dtype], shape, transpose), feature_level=level)
        for density in (0.0, 0.3, 1.0):
            x = special_input(dtype, shape, density, rng)
            strict = compiled.run({"x": x}, strict=True)["y"]
            default = compiled.run({"x": x}, strict=False)["y"]
            want = np.stack(np.nonzero(reference_mask(x).reshape(shape))).astype(np.int64)
            assert_same(default, strict)
            assert_same(default, want.T.copy() if transpose else want)


@pytest.mark.parametrize("level", ["2_0", "4_0", "5_1"])
def test_eyelike_bit_identical_between_strict_and_default(level):
    for dtype, shape, k in [(np.float32, (4, 6), 1), (np.float32, (6, 4), -2), (np.float16, (3, 3), 0)]:
        model = single_node_model("EyeLike", ONNX_OF[dtype], shape, ONNX_OF[dtype], shape, k=k)
        compiled = compile_model(model, feature_level=level)
        feed = {"x": np.ones(shape, dtype)}
        strict, default = compiled.run(feed, strict=True)["y"], compiled.run(feed, strict=False)["y"]
        assert_same(default, strict)
        assert_same(default, np.eye(*shape, k, dtype=dtype))


def test_outputs_never_alias_feeds_or_each_other_and_feeds_stay_untouched(rng):
    compiled = compile_model(nonzero_model(TP.FLOAT, (64, 64)))
    x = special_input(np.float32, (64, 64), 0.5, rng)
    before = x.copy()
    first = compiled.run({"x": x}, strict=False)["y"]
    second = compiled.run({"x": x}, strict=False)["y"]
    assert not np.shares_memory(first, x) and not np.shares_memory(first, second)
    assert_same(x, before)
    assert x.flags.writeable
    assert_same(first, second)


def passthrough_graph(nbytes_extra=0):
    """x uploaded, copied by an identity, both buffers downloaded."""
    g = Graph(parse_level("5_1"))
    g.inputs.append("x")
    g.add_buffer("xbuf", 4 * 6 + nbytes_extra)
    g.add_view("x.v", "xbuf", TensorDesc(DataType.FLOAT32, (2, 3)))
    g.add_buffer("ybuf", 4 * 6)
    g.add_view("y.v", "ybuf", TensorDesc(DataType.FLOAT32, (2, 3)))
    g.add(Upload("x", "x.v"))
    g.add(ElementWiseIdentity("x.v", "y.v"))
    g.add(Download("x.v", "x_out", TP.FLOAT, (2, 3)))
    g.add(Download("y.v", "y", TP.FLOAT, (2, 3)))
    g.add(Download("y.v", "y_again", TP.FLOAT, (2, 3)))
    g.outputs += ["x_out", "y", "y_again"]
    return g


@pytest.mark.parametrize("strict", [True, False])
def test_upload_binding_and_download_sharing_rules(strict):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = execute(passthrough_graph(), {"x": x}, strict=strict)
    for name in ("x_out", "y", "y_again"):
        assert_same(out[name], x)
    assert not np.shares_memory(out["x_out"], x)                # a bound upload buffer is copied out
    assert not np.shares_memory(out["y"], out["y_again"])       # a buffer is handed out once
    out["y"][...] = -1
    assert (x == np.arange(6).reshape(2, 3)).all()
    # a buffer larger than the feed is not bound to it (the upload copies): same results
    out = execute(passthrough_graph(8), {"x": x}, strict=strict)
    assert_same(out["y"], x)


def test_download_does_not_share_a_buffer_written_later():
    g = Graph(parse_level("5_1"))
    g.add_buffer("buf", 4 * 9)
    g.add_view("v", "buf", TensorDesc(DataType.FLOAT32, (3, 3)))
    g.add(DiagonalMatrix("v", 0, 1.0))
    g.add(Download("v", "first", TP.FLOAT, (3, 3)))
    g.add(DiagonalMatrix("v", 1, 2.0))
    g.add(Download("v", "second", TP.FLOAT, (3, 3)))
    g.outputs += ["first", "second"]
    out = execute(g, {}, strict=False)
    assert_same(out["first"], np.eye(3, dtype=np.float32))
    assert_same(out["second"], 2 * np.eye(3, k=1, dtype=np.float32))


def test_clear_at_allocation_and_clear_of_a_written_buffer():
    g = Graph(parse_level("5_1"))
    g.add_buffer("buf", 4 * 4)
    g.add_view("v", "buf", TensorDesc(DataType.UINT32, (4,)))
    g.add_view("m", "buf", TensorDesc(DataType.UINT32, (2, 2)))
    g.add(ClearBuffer("buf", 0))                     # fresh: allocated zero-filled
    g.add(Download("v", "a", TP.UINT32, (4,)))
    g.add(DiagonalMatrix("m", 0, 3.0))
    g.add(ClearBuffer("buf", 0))                     # already written: really cleared
    g.add(Download("v", "b", TP.UINT32, (4,)))
    g.outputs += ["a", "b"]
    for strict in (True, False):
        out = execute(g, {}, strict=strict)
        assert out["a"].tolist() == [0, 0, 0, 0] and out["b"].tolist() == [0, 0, 0, 0]


def test_pool_reuses_only_unreferenced_memory():
    size = binding.POOL_MIN_BYTES
    first = binding.POOL.take(size)
    view = first.view(np.uint8)[:16]
    del first
    second = binding.POOL.take(size)
    assert not np.shares_memory(second, view)        # a view keeps its memory out of the pool
    address = second.ctypes.data
    del second
    third = binding.POOL.take(size)
    assert third.ctypes.data == address or not any(e is third for e in binding.POOL._entries[:-1])


def test_large_graph_result_survives_later_runs(rng):
    # results handed out without a copy must not be recycled while the caller holds them
    shape = (512, 600)
    compiled = compile_model(nonzero_model(TP.FLOAT, shape))
    xs = [special_input(np.float32, shape, d, rng) for d in (0.9, 0.8, 0.95)]
    results = [compiled.run({"x": x}, strict=False)["y"] for x in xs]
    for x, y in zip(xs, results):
        assert_same(y, np.stack(np.nonzero(reference_mask(x).reshape(shape))).astype(np.int64))


def test_readcount_after_fast_clear_and_kernel():
    g = Graph(parse_level("5_1"))
    g.inputs.append("x")
    g.add_buffer("xb", 4 * 6)
    g.add_view("x.v", "xb", TensorDesc(DataType.INT32, (2, 3)))
    g.add_buffer("cb", 4)
    g.add_view("c.v", "cb", TensorDesc(DataType.UINT32, (1,)))
    g.add_buffer("kb", 8 * 2 * 6)
    g.add_view("k.v", "kb", TensorDesc(DataType.UINT32, (6, 2), (2, 12), total_size=96))
    g.add(Upload("x", "x.v"))
    g.add(ClearBuffer("kb"))
    g.add(NonZeroCoordinates("x.v", "c.v", "k.v"))
    g.add(ReadCount("c.v", "nnz"))
    g.add_view("r.v", "kb", TensorDesc(DataType.INT64, (2, "nnz"), (6, 1), total_size=96))
    g.add_buffer("rb", 16, ("nnz",))
    g.add_view("o.v", "rb", TensorDesc(DataType.INT64, (2, "nnz")))
    g.add(ElementWiseIdentity("r.v", "o.v"))
    g.add(Download("o.v", "y", TP.INT64, (2, "nnz")))
    g.outputs.append("y")
    x = np.array([[0, 3, 0], [-1, 0, 2]], np.int32)
    for strict in (True, False):
        assert execute(g, {"x": x}, strict=strict)["y"].tolist() == [[0, 1, 1], [1, 0, 2]]


# -- copies that release their source behind them; large zero-cleared buffers ------------------

@pytest.mark.parametrize("slab", [8, 24, 4096])
def test_identity_releasing_copies_exactly_and_releases_ascending(slab, rng, monkeypatch):
    monkeypatch.setattr(kernels, "SLAB", slab)
    base = rng.integers(0, 2**63, 6 * 50, dtype=np.int64)
    cases = [base.reshape(6, 50)[:2, :37],                      # the NonZero crop: row prefixes
             base.reshape(6, 50)[::2, 3:40],                    # gaps between rows
             base[:123],                                        # one long row
             base.reshape(6, 5, 10)[:, 1:4, :7]]                # three levels
    for source in cases:
        out = np.zeros(source.shape, np.int64)
        start = source.__array_interface__["data"][0]
        offsets = sum(np.indices(source.shape)[axis] * source.strides[axis] for axis in range(source.ndim))
        addresses = start + offsets
        seen = []

        def release(mark, addresses=addresses, out=out, source=source, seen=seen):
            # every source element below the mark has been copied already
            below = addresses < mark
            assert (out[below] == source[below]).all()
            seen.append(mark)

        kernels.identity(source, out, release=release)
        assert_same(out, source)
        assert seen == sorted(seen)
        assert slab >= source.nbytes or seen


def test_identity_does_not_release_through_transposed_or_overlapping_sources(rng, monkeypatch):
    monkeypatch.setattr(kernels, "SLAB", 8)
    base = rng.integers(0, 100, (8, 9), dtype=np.int64)
    for source in (base.T, np.broadcast_to(base[0], (4, 9)), base[::-1]):
        out = np.zeros(source.shape, np.int64)
        seen = []
        kernels.identity(source, out, release=seen.append)
        assert_same(out, np.ascontiguousarray(source))
        assert seen == []


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("level", ["3_0", "5_1"])
def test_large_nonzero_graph_through_mapped_buffers_and_released_copies(strict, level, rng, monkeypatch):
    # coordinates buffers of several MB: zero-filled anonymous maps, the crop copy releases them
    monkeypatch.setattr(kernels, "SLAB", 1 << 16)
    calls = []
    releasing = kernels._copy_releasing
    monkeypatch.setattr(kernels, "_copy_releasing", lambda *a: calls.append(1) or releasing(*a))
    shape = (300, 700)
    compiled = compile_model(nonzero_model(TP.FLOAT, shape), feature_level=level)
    for density in (0.001, 0.6):
        x = special_input(np.float32, shape, density, rng)
        got = compiled.run({"x": x}, strict=strict)["y"]
        assert_same(got, np.stack(np.nonzero(reference_mask(x).reshape(shape))).astype(np.int64))
    assert calls                                     # the releasing copy did run
