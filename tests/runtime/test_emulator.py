"""runtime.interpreter (the CPU emulator) over hand-built ir.Graphs: the spec pages' own examples,
bit-level float rules, DIAGONAL_MATRIX1 against an independent numpy implementation of the
DML_FACTS pseudocode, strided copies, and the memory-safety checks (wrong strides, undersized
sizes, poison)."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnx_dml_lowering.ir import (ClearBuffer, DataType, DiagonalMatrix, DiagonalMatrix1, DmlLowerError, Download,
                ElementWiseIdentity, Graph, NonZeroCoordinates, ReadCount, TensorDesc, Upload, parse_level)
from onnx_dml_lowering.runtime.interpreter import execute
from onnx_dml_lowering.ir import verify_graph
from tests.oracle import assert_same

T = DataType
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
POISON = 0xBAADF00D

ONNX_OF = {T.FLOAT32: 1, T.UINT8: 2, T.INT8: 3, T.UINT16: 4, T.INT16: 5, T.INT32: 6, T.INT64: 7,
           T.FLOAT16: 10, T.FLOAT64: 11, T.UINT32: 12, T.UINT64: 13}
NP_OF = {T.FLOAT32: np.float32, T.UINT8: np.uint8, T.INT8: np.int8, T.UINT16: np.uint16, T.INT16: np.int16,
         T.INT32: np.int32, T.INT64: np.int64, T.FLOAT16: np.float16, T.FLOAT64: np.float64,
         T.UINT32: np.uint32, T.UINT64: np.uint64}


def packed_bytes(dtype, sizes):
    n = 1
    for s in sizes:
        n *= s
    return -(-(n * np.dtype(NP_OF[dtype]).itemsize) // 4) * 4


def add_packed(g, name, dtype, sizes, extra=0):
    g.add_buffer(name, packed_bytes(dtype, sizes) + extra)
    g.add_view(name + ".v", name, TensorDesc(dtype, sizes))
    return name + ".v"


# -- NONZERO_COORDINATES ------------------------------------------------------------------------

def nonzero_graph(x_dtype, in_sizes, n, level="5_1", clear_value=0, count_dims=None, coord_dims=None):
    g = Graph(parse_level(level))
    g.inputs.append("x")
    m = int(np.prod(in_sizes))
    x = add_packed(g, "xbuf", x_dtype, in_sizes)
    count = add_packed(g, "count", T.UINT32, (1,) * (count_dims or len(in_sizes)))
    coord_dims = coord_dims or max(2, len(in_sizes))
    coords = add_packed(g, "coords", T.UINT32, (1,) * (coord_dims - 2) + (m, n))
    g.add(Upload("x", x))
    g.add(ClearBuffer("coords", clear_value))
    g.add(NonZeroCoordinates(x, count, coords))
    g.add(Download(count, "count", 12, (1,)))
    g.add(Download(coords, "coords", 12, (m, n)))
    g.outputs += ["count", "coords"]
    verify_graph(g)
    return g


def oracle_nonzero(x, n):
    """Trailing n coordinates of every element that is not (+-)0, in ascending element order."""
    rows = []
    for index in np.ndindex(*x.shape):
        v = x[index]
        if x.dtype.kind == "f":
            nonzero = math.isnan(float(v)) or float(v) != 0.0
        else:
            nonzero = int(v) != 0
        if nonzero:
            rows.append(index[len(index) - n:] if n else ())
    return np.array(rows, dtype=np.uint32).reshape(len(rows), n)


SPEC_INPUT = np.array([[[[1.0, 0.0, 0.0, 2.0],
                         [-0.0, 3.5, 0.0, -5.2]]]], dtype=np.float32)
SPEC_COORDS = np.array([[0, 0, 0], [0, 0, 3], [0, 1, 1], [0, 1, 3],
                        [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]], dtype=np.uint32)


@pytest.mark.parametrize("level", ["3_0", "4_0", "5_1", "6_4"])
def test_nonzero_spec_example_non_strict_reproduces_the_page(level):
    g = nonzero_graph(T.FLOAT32, (1, 1, 2, 4), 3, level)
    out = execute(g, {"x": SPEC_INPUT}, strict=False)
    assert out["count"].tolist() == [4]
    np.testing.assert_array_equal(out["coords"], SPEC_COORDS)


@pytest.mark.parametrize("level", ["3_0", "5_1"])
def test_nonzero_spec_example_strict_poisons_undefined_rows(level):
    g = nonzero_graph(T.FLOAT32, (1, 1, 2, 4), 3, level)
    out = execute(g, {"x": SPEC_INPUT}, strict=True)
    assert out["count"].tolist() == [4]
    np.testing.assert_array_equal(out["coords"][:4], SPEC_COORDS[:4])
    assert (out["coords"][4:] == POISON).all()


def test_non_strict_leaves_undefined_rows_as_cleared():
    g = nonzero_graph(T.FLOAT32, (1, 1, 2, 4), 3, clear_value=0x12345678)
    out = execute(g, {"x": SPEC_INPUT}, strict=False)
    np.testing.assert_array_equal(out["coords"][:4], SPEC_COORDS[:4])
    assert (out["coords"][4:] == 0x12345678).all()
    out = execute(g, {"x": SPEC_INPUT}, strict=True)
    assert (out["coords"][4:] == POISON).all()


def test_nonzero_all_zero_input_strict_poisons_every_row():
    g = nonzero_graph(T.INT32, (2, 3), 2)
    out = execute(g, {"x": np.zeros((2, 3), np.int32)}, strict=True)
    assert out["count"].tolist() == [0]
    assert (out["coords"] == POISON).all()
    out = execute(g, {"x": np.zeros((2, 3), np.int32)}, strict=False)
    assert (out["coords"] == 0).all()


def test_nonzero_ascending_element_order_example():
    # the page: non-zeros at {1,0}, {1,2}, {0,5} come out as [[0,5],[1,0],[1,2]]
    x = np.zeros((2, 6), np.int16)
    x[1, 0], x[1, 2], x[0, 5] = 7, -1, 3
    out = execute(nonzero_graph(T.INT16, (2, 6), 2), {"x": x}, strict=True)
    assert out["count"].tolist() == [3]
    np.testing.assert_array_equal(out["coords"][:3], [[0, 5], [1, 0], [1, 2]])


FLOAT32_BITS = [0x00000000, 0x80000000, 0x7FC00000, 0xFFC00001, 0x7F800000, 0xFF800000,
                0x00000001, 0x80000001, 0x007FFFFF, 0x3F800000, 0x80000000, 0x7F800001,
                0x00000000, 0x00400000, 0x80000000, 0x00000000]
FLOAT16_BITS = [0x0000, 0x8000, 0x7E00, 0xFE01, 0x7C00, 0xFC00,
                0x0001, 0x8001, 0x03FF, 0x3C00, 0x8000, 0x7C01,
                0x0000, 0x0200, 0x8000, 0x0000]
# hand-classified: 0 for +-0.0, 1 for NaN / inf / denormal / normal
EXPECTED_NONZERO = [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 0]


@pytest.mark.parametrize("dtype,raw", [(T.FLOAT32, np.array(FLOAT32_BITS, np.uint32)),
                                       (T.FLOAT16, np.array(FLOAT16_BITS, np.uint16))], ids=["f32", "f16"])
@pytest.mark.parametrize("strict", [True, False])
def test_nan_is_nonzero_minus_zero_is_zero_denormals_are_nonzero(dtype, raw, strict):
    x = raw.view(NP_OF[dtype]).reshape(4, 4)
    out = execute(nonzero_graph(dtype, (4, 4), 2), {"x": x}, strict=strict)
    expected = [divmod(i, 4) for i, nz in enumerate(EXPECTED_NONZERO) if nz]
    assert out["count"].tolist() == [len(expected)] == [10]
    np.testing.assert_array_equal(out["coords"][:10], expected)
    np.testing.assert_array_equal(out["coords"][:10], oracle_nonzero(x, 2))


EIGHT = [T.FLOAT32, T.FLOAT16, T.INT32, T.INT16, T.INT8, T.UINT32, T.UINT16, T.UINT8]


def _random_input(rng, dtype, shape):
    np_type = NP_OF[dtype]
    if dtype.is_float:
        x = rng.standard_normal(shape).astype(np_type)
    else:
        info = np.iinfo(np_type)
        x = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np_type)
    x[rng.random(shape) < 0.5] = 0
    return x


@pytest.mark.parametrize("dtype", EIGHT, ids=lambda t: t.name)
def test_nonzero_random_grid_against_oracle(dtype, rng):
    shapes = [(7,), (3, 5), (1, 4, 3), (2, 1, 3, 2), (1, 1, 2, 3, 2), (2, 1, 2, 1, 2, 2), (1, 2, 1, 2, 1, 2, 1),
              (2, 1, 1, 2, 1, 1, 2, 2)]
    for shape in shapes:
        x = _random_input(rng, dtype, shape)
        low = len(shape) - next((i for i, s in enumerate(shape) if s != 1), len(shape))
        for n in sorted({max(low, 1), len(shape)}):
            want = oracle_nonzero(x, n)
            out = execute(nonzero_graph(dtype, shape, n), {"x": x}, strict=True)
            assert out["count"].tolist() == [len(want)], (shape, n)
            np.testing.assert_array_equal(out["coords"][: len(want)], want, err_msg=f"{shape} N={n}")
            assert (out["coords"][len(want):] == POISON).all()


@pytest.mark.parametrize("dtype", [T.FLOAT16, T.INT8, T.UINT32], ids=lambda t: t.name)
def test_nonzero_2d_coordinates_1d_count_for_high_rank_inputs(dtype, rng):
    # from 4_0 the count may be {1} and the coordinates {M, N} whatever the input's DimensionCount
    for shape in [(2, 3, 2), (1, 2, 1, 3, 2), (2, 1, 2, 1, 2, 1, 2, 2)]:
        x = _random_input(rng, dtype, shape)
        for n in (len(shape) - 1 if shape[0] == 1 else len(shape), len(shape)):
            want = oracle_nonzero(x, n)
            g = nonzero_graph(dtype, shape, n, "4_0", count_dims=1, coord_dims=2)
            out = execute(g, {"x": x}, strict=True)
            assert out["count"].tolist() == [len(want)]
            np.testing.assert_array_equal(out["coords"][: len(want)], want, err_msg=f"{shape} N={n}")
            assert (out["coords"][len(want):] == POISON).all()


def test_nonzero_reads_input_through_broadcast_strides():
    g = Graph(parse_level("5_1"))
    g.inputs.append("row")
    g.add_buffer("rowbuf", 16)
    g.add_view("row.v", "rowbuf", TensorDesc(T.INT32, (4,)))
    g.add_view("bcast.v", "rowbuf", TensorDesc(T.INT32, (3, 4), (0, 1)))
    count = add_packed(g, "count", T.UINT32, (1, 1))
    coords = add_packed(g, "coords", T.UINT32, (12, 2))
    g.add(Upload("row", "row.v"))
    g.add(NonZeroCoordinates("bcast.v", count, coords))
    g.add(Download(count, "count", 12, (1,)))
    g.add(Download(coords, "coords", 12, (12, 2)))
    g.outputs += ["count", "coords"]
    verify_graph(g)
    out = execute(g, {"row": np.array([0, 5, 0, -1], np.int32)}, strict=True)
    assert out["count"].tolist() == [6]
    np.testing.assert_array_equal(out["coords"][:6], [[0, 1], [0, 3], [1, 1], [1, 3], [2, 1], [2, 3]])


def int64_layout_graph(shape, n, clear_value=0):
    """Coordinates UINT32 {M,N} strides {2,2M} over a cleared INT64 [N, M] buffer (the EP's layout),
    count read back, the [N, nnz] prefix cropped by a strided INT64 copy into a symbolic buffer."""
    m = int(np.prod(shape))
    g = Graph(parse_level("5_1"))
    g.inputs.append("x")
    x = add_packed(g, "xbuf", T.FLOAT32, shape)
    count = add_packed(g, "count", T.UINT32, (1,))
    g.add_buffer("slots", 8 * n * m)
    g.add_view("coords.v", "slots", TensorDesc(T.UINT32, (m, n), (2, 2 * m), total_size=8 * n * m))
    g.add_view("slots.v", "slots", TensorDesc(T.INT64, (n, m)))
    g.add_view("crop.v", "slots", TensorDesc(T.INT64, (n, "nnz"), (m, 1), total_size=8 * n * m))
    g.add_buffer("result", 8 * n, ("nnz",))
    g.add_view("result.v", "result", TensorDesc(T.INT64, (n, "nnz")))
    g.add(Upload("x", x))
    g.add(ClearBuffer("slots", clear_value))
    g.add(NonZeroCoordinates(x, count, "coords.v"))
    g.add(Download("slots.v", "slots", 7, (n, m)))
    g.add(ReadCount(count, "nnz"))
    g.add(ElementWiseIdentity("crop.v", "result.v"))
    g.add(Download("result.v", "y", 7, (n, "nnz")))
    g.outputs += ["slots", "y"]
    verify_graph(g)
    return g


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 2), (5,)])
def test_nonzero_strided_int64_layout_and_symbolic_crop(shape, rng):
    x = _random_input(rng, T.FLOAT32, shape)
    n = len(shape)
    want = oracle_nonzero(x, n).T.astype(np.int64)        # ONNX layout [rank, nnz]
    nnz = want.shape[1]
    out = execute(int64_layout_graph(shape, n), {"x": x}, strict=True)
    np.testing.assert_array_equal(out["y"], want)
    assert out["y"].dtype == np.int64
    slots = out["slots"].view(np.uint64)
    np.testing.assert_array_equal(slots[:, :nnz], want.astype(np.uint64))
    assert (slots[:, nnz:] == POISON).all()               # low word poisoned, high word as cleared
    out = execute(int64_layout_graph(shape, n), {"x": x}, strict=False)
    assert (out["slots"][:, nnz:] == 0).all()


def test_nonzero_zero_count_gives_empty_result():
    out = execute(int64_layout_graph((2, 3), 2), {"x": np.zeros((2, 3), np.float32)}, strict=True)
    assert out["y"].shape == (2, 0) and out["y"].dtype == np.int64


# -- DIAGONAL_MATRIX ----------------------------------------------------------------------------

def diagonal_graph(dtype, sizes, offset, value, level="5_1"):
    g = Graph(parse_level(level))
    y = add_packed(g, "ybuf", dtype, sizes)
    g.add(DiagonalMatrix(y, offset, value))
    g.add(Download(y, "y", ONNX_OF[dtype], sizes))
    g.outputs.append("y")
    verify_graph(g)
    return g


@pytest.mark.parametrize("offset,sizes,expected", [
    (0, (1, 1, 3, 3), [[1, 0, 0], [0, 1, 0], [0, 0, 1]]),
    (1, (1, 1, 3, 3), [[0, 1, 0], [0, 0, 1], [0, 0, 0]]),
    (-1, (1, 1, 3, 2), [[0, 0], [1, 0], [0, 1]]),
    (-3, (1, 1, 3, 2), [[0, 0], [0, 0], [0, 0]]),
], ids=["identity", "right-up", "left-down", "all-zero"])
@pytest.mark.parametrize("level", ["2_0", "5_1"])
@pytest.mark.parametrize("strict", [True, False])
def test_diagonal_matrix_spec_examples(offset, sizes, expected, level, strict):
    out = execute(diagonal_graph(T.FLOAT32, sizes, offset, 1.0, level), {}, strict=strict)
    np.testing.assert_array_equal(out["y"], np.array([[expected]], np.float32))
    assert out["y"].dtype == np.float32


@pytest.mark.parametrize("dtype", [T.INT32, T.INT16, T.INT8, T.INT64])
@pytest.mark.parametrize("value,want", [(10.6, 10), (-2.7, -2), (0.9, 0), (-0.9, 0), (3.0, 3)])
def test_diagonal_matrix_value_truncates_toward_zero_for_signed_outputs(dtype, value, want):
    out = execute(diagonal_graph(dtype, (2, 3), 0, value), {}, strict=True)
    expected = np.array([[want, 0, 0], [0, want, 0]], NP_OF[dtype])
    assert_same(out["y"], expected)


@pytest.mark.parametrize("dtype", [T.UINT32, T.UINT16, T.UINT8, T.UINT64])
def test_diagonal_matrix_value_truncates_for_unsigned_outputs(dtype):
    out = execute(diagonal_graph(dtype, (3, 2), -1, 10.6), {}, strict=True)
    assert_same(out["y"], np.array([[0, 0], [10, 0], [0, 10]], NP_OF[dtype]))


@pytest.mark.parametrize("dtype,want", [(T.FLOAT16, np.float16(10.6015625)), (T.FLOAT32, np.float32(10.6)),
                                        (T.FLOAT64, np.float64(np.float32(10.6)))])
def test_diagonal_matrix_float_value_is_a_32_bit_float(dtype, want):
    out = execute(diagonal_graph(dtype, (2, 2), 0, 10.6), {}, strict=True)
    assert_same(out["y"], np.array([[want, 0], [0, want]], NP_OF[dtype]))


@pytest.mark.parametrize("dtype", [T.INT64, T.UINT64, T.INT32])
def test_diagonal_matrix_value_is_a_32_bit_float_even_for_wide_integers(dtype):
    # Value is a FLOAT: 2**24 + 1 is not a float32 and arrives as 2**24 (DIAGONAL_MATRIX1 is exact)
    out = execute(diagonal_graph(dtype, (2, 2), 0, 2**24 + 1), {}, strict=True)
    assert out["y"].tolist() == [[2**24, 0], [0, 2**24]]
    out = execute(diagonal1_graph(dtype, (2, 2), 2**24 + 1, 0, 1, False), {}, strict=True)
    assert out["y"].tolist() == [[2**24 + 1, 0], [0, 2**24 + 1]]


def oracle_diagonal(shape, offset, value, np_type):
    out = np.zeros(shape, np_type)
    for index in np.ndindex(*shape):
        y, x = index[-2], index[-1]
        if y + offset == x:
            out[index] = value
    return out


@pytest.mark.parametrize("shape,offset", [((2, 3, 4, 5), 2), ((2, 3, 4, 5), -2), ((3, 3), 0), ((1, 4, 2), -1),
                                          ((2, 1, 3, 7), INT32_MAX), ((2, 1, 3, 7), INT32_MIN),
                                          ((4, 6), 5), ((4, 6), 6), ((4, 6), -3), ((4, 6), -4)])
def test_diagonal_matrix_batches_against_oracle(shape, offset):
    out = execute(diagonal_graph(T.FLOAT32, shape, offset, -1.5), {}, strict=True)
    assert_same(out["y"], oracle_diagonal(shape, offset, -1.5, np.float32))


# -- DIAGONAL_MATRIX1 ---------------------------------------------------------------------------

def oracle_diagonal1(shape, begin, end, value, np_type, source=None):
    """DML_FACTS pseudocode, one coordinate at a time, Python integers for the band test."""
    out = np.zeros(shape, np_type)
    fill = np.array([value]).astype(np_type)[0] if np.dtype(np_type).kind == "f" else np_type(value)
    for index in np.ndindex(*shape):
        top_x = index[-1] - index[-2]                       # column minus row
        use = (end >= begin) ^ (top_x >= begin) ^ (top_x < end)
        out[index] = fill if use else (source[index] if source is not None else np_type(0))
    return out


DIAG1_VALUES = {
    T.FLOAT32: [2.5, float("nan"), -0.0], T.FLOAT16: [0.1, float("-inf")], T.FLOAT64: [1e300, -3.25],
    T.INT64: [2**40 + 1, 2**62 + 1, -(2**63)], T.UINT64: [2**64 - 1, 2**53 + 1], T.INT32: [-7, INT32_MAX],
    T.UINT32: [2**32 - 1], T.INT16: [-32768], T.UINT16: [65535], T.INT8: [-128, 127], T.UINT8: [255, 1],
}
BANDS = [(0, 1), (-1, 2), (2, -1), (1, 1), (INT32_MIN, 1), (0, INT32_MAX), (INT32_MIN, INT32_MAX),
         (INT32_MAX, INT32_MIN), (3, 3), (-2, -2)]
DIAG1_SHAPES = [(4, 6), (2, 3, 5), (2, 1, 4, 3)]


def _diag1_input(rng, dtype, shape):
    np_type = NP_OF[dtype]
    if dtype.is_float:
        return rng.standard_normal(shape).astype(np_type)
    if dtype == T.INT64:
        x = rng.integers(-(2**62), 2**62, size=shape, dtype=np.int64)
        x.flat[0] = 2**62 + 1
        x.flat[-1] = -(2**63)
        return x
    info = np.iinfo(np_type)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np_type)


def diagonal1_graph(dtype, shape, value, begin, end, with_input):
    g = Graph(parse_level("5_1"))
    source = None
    if with_input:
        g.inputs.append("x")
        source = add_packed(g, "xbuf", dtype, shape)
        g.add(Upload("x", source))
    y = add_packed(g, "ybuf", dtype, shape)
    g.add(DiagonalMatrix1(source, y, dtype, value, begin, end))
    g.add(Download(y, "y", ONNX_OF[dtype], shape))
    g.outputs.append("y")
    verify_graph(g)
    return g


@pytest.mark.parametrize("dtype", list(DIAG1_VALUES), ids=lambda t: t.name)
def test_diagonal_matrix1_against_pseudocode(dtype, rng):
    np_type = NP_OF[dtype]
    for shape, (begin, end), with_input in itertools.product(DIAG1_SHAPES, BANDS, (False, True)):
        source = _diag1_input(rng, dtype, shape) if with_input else None
        for value in DIAG1_VALUES[dtype]:
            g = diagonal1_graph(dtype, shape, value, begin, end, with_input)
            out = execute(g, {"x": source} if with_input else {}, strict=True)
            want = oracle_diagonal1(shape, begin, end, value, np_type, source)
            assert_same(out["y"], want)


BOUNDS = st.one_of(st.integers(-9, 9), st.sampled_from([INT32_MIN, INT32_MAX, -(2**80), 2**80]))


@settings(max_examples=300, deadline=None)
@given(shape=st.tuples(st.integers(1, 2), st.integers(0, 6), st.integers(0, 6)), begin=BOUNDS, end=BOUNDS,
       with_input=st.sampled_from(["none", "separate", "in place"]))
def test_diagonal_matrix1_kernel_any_band(shape, begin, end, with_input):
    """The kernel's band test (open bounds folded to constants, only the band written) against the
    pseudocode, bounds at and past the matrix's diagonals included; in place too (Input = Output)."""
    from onnx_dml_lowering.runtime import kernels
    source = np.arange(1, math.prod(shape) + 1, dtype=np.int32).reshape(shape)
    want = oracle_diagonal1(shape, begin, end, -7, np.int32, None if with_input == "none" else source)
    out = source if with_input == "in place" else np.full(shape, 99, np.int32)
    kernels.diagonal_matrix1(None if with_input == "none" else source, out, -7, begin, end)
    assert_same(out, want)


def test_diagonal_matrix1_exact_int64_values():
    g = diagonal1_graph(T.INT64, (3, 3), 2**40 + 1, 0, 1, False)
    out = execute(g, {}, strict=True)["y"]
    assert out.tolist() == [[2**40 + 1, 0, 0], [0, 2**40 + 1, 0], [0, 0, 2**40 + 1]]
    g = diagonal1_graph(T.INT64, (2, 2), 2**62 + 1, INT32_MIN, 1, True)
    x = np.array([[5, 2**62 + 3], [7, 9]], np.int64)
    assert execute(g, {"x": x}, strict=True)["y"].tolist() == [[2**62 + 1, 2**62 + 3], [2**62 + 1, 2**62 + 1]]
    g = diagonal1_graph(T.UINT64, (2, 2), 2**64 - 1, 1, INT32_MAX, False)
    assert execute(g, {}, strict=True)["y"].tolist() == [[0, 2**64 - 1], [0, 0]]


def test_diagonal_matrix1_literal_bands():
    # band [-1, 2): tridiagonal-ish, 4x5
    out = execute(diagonal1_graph(T.INT32, (4, 5), 1, -1, 2, False), {}, strict=True)["y"]
    assert out.tolist() == [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 1]]
    # inverted (Begin 2 > End -1): everything outside [-1, 2)
    out = execute(diagonal1_graph(T.INT32, (4, 5), 1, 2, -1, False), {}, strict=True)["y"]
    assert out.tolist() == [[0, 0, 1, 1, 1], [0, 0, 0, 1, 1], [1, 0, 0, 0, 1], [1, 1, 0, 0, 0]]
    # lower triangle incl. the diagonal (Trilu k=0): [INT32_MIN, 1)
    out = execute(diagonal1_graph(T.UINT8, (3, 3), 1, INT32_MIN, 1, False), {}, strict=True)["y"]
    assert out.tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    # upper triangle above the diagonal: [1, INT32_MAX)
    out = execute(diagonal1_graph(T.UINT8, (3, 3), 1, 1, INT32_MAX, False), {}, strict=True)["y"]
    assert out.tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]


def test_diagonal_matrix_equals_diagonal_matrix1_with_unit_band():
    for offset in (-3, -1, 0, 2, 6):
        a = execute(diagonal_graph(T.FLOAT32, (2, 4, 5), offset, 1.0), {}, strict=True)["y"]
        b = execute(diagonal1_graph(T.FLOAT32, (2, 4, 5), 1.0, offset, offset + 1, False), {}, strict=True)["y"]
        assert_same(a, b)


# -- ELEMENT_WISE_IDENTITY: transposes and crops through strides -------------------------------

def identity_of_view(x, dtype, view: TensorDesc, offset: int = 0) -> np.ndarray:
    """Upload x packed, ELEMENT_WISE_IDENTITY from `view` over its buffer into a packed output, download."""
    g = Graph(parse_level("5_1"))
    g.inputs.append("x")
    xv = add_packed(g, "xbuf", dtype, x.shape)
    g.add_view("src.v", "xbuf", view, offset)
    y = add_packed(g, "ybuf", dtype, view.sizes)
    g.add(Upload("x", xv))
    g.add(ElementWiseIdentity("src.v", y))
    g.add(Download(y, "y", ONNX_OF[dtype], view.sizes))
    g.outputs.append("y")
    verify_graph(g)
    return execute(g, {"x": x}, strict=True)["y"]


@pytest.mark.parametrize("dtype", [T.FLOAT32, T.INT64, T.UINT8, T.FLOAT16])
def test_identity_realises_a_transpose(dtype, rng):
    x = _random_input(rng, dtype, (3, 4))
    out = identity_of_view(x, dtype, TensorDesc(dtype, (4, 3), (1, 4)))
    want = np.array([[x[r, c] for r in range(3)] for c in range(4)], NP_OF[dtype])
    assert_same(out, want)


@pytest.mark.parametrize("dtype", [T.FLOAT32, T.INT64, T.INT8])
def test_identity_realises_a_crop(dtype, rng):
    x = _random_input(rng, dtype, (5, 8))
    item = np.dtype(NP_OF[dtype]).itemsize
    row0, col0 = 2, 0 if item == 1 else (4 if item == 4 else 2)   # offset stays a multiple of 16 bytes
    out = identity_of_view(x, dtype, TensorDesc(dtype, (3, 4), (8, 1)), (row0 * 8 + col0) * item)
    want = np.array([[x[row0 + r, col0 + c] for c in range(4)] for r in range(3)], NP_OF[dtype])
    assert_same(out, want)


def test_identity_writes_through_output_strides_leaving_padding():
    g = Graph(parse_level("5_1"))
    g.inputs.append("x")
    xv = add_packed(g, "xbuf", T.INT32, (2, 3))
    g.add_buffer("padded", 4 * 2 * 5)
    g.add_view("padded.in", "padded", TensorDesc(T.INT32, (2, 3), (5, 1)))
    g.add_view("padded.all", "padded", TensorDesc(T.INT32, (2, 5)))
    g.add(Upload("x", xv))
    g.add(ClearBuffer("padded", 0xFFFFFFFF))
    g.add(ElementWiseIdentity(xv, "padded.in"))
    g.add(Download("padded.all", "y", 6, (2, 5)))
    g.outputs.append("y")
    verify_graph(g)
    out = execute(g, {"x": np.arange(1, 7, dtype=np.int32).reshape(2, 3)}, strict=True)["y"]
    assert out.tolist() == [[1, 2, 3, -1, -1], [4, 5, 6, -1, -1]]


# -- memory safety: wrong strides, undersized descriptors and buffers ---------------------------

def _transpose_graph(strides, buffer_bytes=48, total_size=None, out_buffer_bytes=48):
    g = Graph(parse_level("5_1"))
    g.inputs.append("x")
    g.add_buffer("xbuf", buffer_bytes)
    g.add_view("x.v", "xbuf", TensorDesc(T.FLOAT32, (3, 4)))
    g.add_view("xT.v", "xbuf", TensorDesc(T.FLOAT32, (4, 3), strides, total_size=total_size))
    g.add_buffer("ybuf", out_buffer_bytes)
    g.add_view("y.v", "ybuf", TensorDesc(T.FLOAT32, (4, 3)))
    g.add(Upload("x", "x.v"))
    g.add(ElementWiseIdentity("xT.v", "y.v"))
    g.add(Download("y.v", "y", 1, (4, 3)))
    g.outputs.append("y")
    return g


X34 = np.arange(12, dtype=np.float32).reshape(3, 4)


def _emulator_error(g, feeds):
    with pytest.raises(DmlLowerError) as info:
        execute(g, feeds, strict=True)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_correct_transpose_runs():
    out = execute(_transpose_graph((1, 4)), {"x": X34}, strict=True)["y"]
    np.testing.assert_array_equal(out, X34.T)


@pytest.mark.parametrize("strides", [(1, 5), (2, 4), (4, 4), (1, 8)])
def test_wrong_stride_reaching_past_the_buffer_names_view_and_buffer(strides):
    message = _emulator_error(_transpose_graph(strides), {"x": X34})
    assert "xT.v" in message and "xbuf" in message, message


@pytest.mark.parametrize("strides", [(1, 5), (2, 4)])
def test_wrong_stride_with_packed_total_size_names_view_and_buffer(strides):
    # a builder that declares the packed size (48) for a strided view that reaches further
    message = _emulator_error(_transpose_graph(strides, total_size=48), {"x": X34})
    assert "xT.v" in message and "xbuf" in message, message


def test_undersized_total_tensor_size_names_view_and_buffer():
    message = _emulator_error(_transpose_graph((1, 4), total_size=32), {"x": X34})
    assert "xT.v" in message and "xbuf" in message, message


def test_undersized_input_buffer_names_view_and_buffer():
    message = _emulator_error(_transpose_graph((1, 4), buffer_bytes=44), {"x": X34})
    assert "x.v" in message and "xbuf" in message, message


def test_undersized_output_buffer_names_view_and_buffer():
    message = _emulator_error(_transpose_graph((1, 4), out_buffer_bytes=40), {"x": X34})
    assert "y.v" in message and "ybuf" in message, message


def test_view_offset_past_the_buffer_names_view_and_buffer():
    g = Graph(parse_level("5_1"))
    g.add_buffer("ybuf", 64)
    g.add_view("late.v", "ybuf", TensorDesc(T.FLOAT32, (3, 3)), 32)
    g.add(DiagonalMatrix("late.v", 0, 1.0))
    g.add(Download("late.v", "y", 1, (3, 3)))
    g.outputs.append("y")
    message = _emulator_error(g, {})
    assert "late.v" in message and "ybuf" in message, message


def test_view_at_negative_offset_names_view_and_buffer():
    g = Graph(parse_level("5_1"))
    g.add_buffer("ybuf", 64)
    g.add_view("neg.v", "ybuf", TensorDesc(T.FLOAT32, (2, 2)), -16)
    g.add(DiagonalMatrix("neg.v", 0, 1.0))
    g.add(Download("neg.v", "y", 1, (2, 2)))
    g.outputs.append("y")
    message = _emulator_error(g, {})
    assert "neg.v" in message and "ybuf" in message, message


@pytest.mark.parametrize("dtype,value", [(T.INT8, 300), (T.UINT8, -1), (T.INT32, 3.5), (T.UINT64, 2**64),
                                         (T.INT64, 2**63)])
def test_diagonal_matrix1_value_that_does_not_fit_its_type_is_an_error(dtype, value):
    g = diagonal1_graph(dtype, (2, 2), value, 0, 1, False)
    message = _emulator_error(g, {})
    assert str(value) in message


def test_undersized_coordinates_buffer_names_view_and_buffer():
    g = nonzero_graph(T.FLOAT32, (1, 1, 2, 4), 3)
    g.buffers["coords"] = type(g.buffers["coords"])("coords", 4 * 8 * 3 - 16)
    message = _emulator_error(g, {"x": SPEC_INPUT})
    assert "coords.v" in message and "coords" in message, message


def test_strict_fresh_buffers_hold_poison_bytes():
    g = Graph(parse_level("5_1"))
    y = add_packed(g, "ybuf", T.UINT32, (2, 2))
    g.add(Download(y, "y", 12, (2, 2)))       # reads a buffer nobody wrote (verify would refuse)
    g.outputs.append("y")
    out = execute(g, {}, strict=True)["y"]
    assert (out == 0xCDCDCDCD).all()
