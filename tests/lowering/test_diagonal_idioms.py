"""Diagonal idioms: EyeLike over ConstantOfShape, torch.eye's Range/Equal/Cast, Trilu causal
masks, and constant identity / triangular initializers generated instead of stored."""
import itertools
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.ir import ALL_LEVELS, Graph, parse_level, verify_graph
from onnx_dml_lowering.ir.dtypes import ONNX_NUMERIC_AND_BOOL, from_onnx, onnx_to_numpy
from onnx_dml_lowering.ir.support import DIAGONAL_MATRIX, DIAGONAL_MATRIX1
from onnx_dml_lowering.lowering.common import carrier_type
from onnx_dml_lowering.lowering.diagonal import band_reason, emit_band, find_band, may_hold_band
from onnx_dml_lowering.lowering.node import Names
from tests.builders import graph_model, tensor
from tests.oracle import differential

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


make = partial(graph_model, opset=18)         # the exporters' idioms at a recent opset


# -- find_band -------------------------------------------------------------------------------

@pytest.mark.parametrize("rows,cols,k", [(3, 3, 0), (4, 6, 1), (6, 4, -2), (5, 5, 4), (5, 5, -4)])
@pytest.mark.parametrize("value", [1.0, 2.5, -7.0])
def test_find_band_single_diagonal(rows, cols, k, value):
    array = np.where(np.eye(rows, cols, k) == 1, value, 0.0).astype(np.float32)   # +0 off the band
    assert find_band(array) == (k, k + 1, False, np.float32(value))


@pytest.mark.parametrize("k", [-2, 0, 1, 3])
def test_find_band_triangles(k):
    lower = np.tril(np.ones((5, 6), np.float32), k)
    begin, end, inverted, value = find_band(lower)
    assert (end, inverted, value) == (k + 1, False, 1.0) and begin <= -4
    upper = np.triu(np.full((5, 6), -1e9, np.float32), k)
    begin, end, inverted, value = find_band(upper)
    assert (begin, inverted, value) == (k, False, np.float32(-1e9)) and end >= 6


def test_find_band_inverted_and_batches():
    band = np.tril(np.triu(np.ones((6, 6), np.int32), -1), 1)        # [-1, 2)
    outside = (1 - band).astype(np.int32) * 3
    assert find_band(outside) == (-1, 2, True, 3)
    batch = np.broadcast_to(np.eye(4, dtype=np.float16), (2, 3, 4, 4)).copy()
    assert find_band(batch)[:3] == (0, 1, False)
    batch[1, 2, 0, 0] = 0
    assert find_band(batch) is None                                   # one matrix differs


@pytest.mark.parametrize("array", [
    np.zeros((3, 3), np.float32), np.ones((3, 3), np.float32), np.arange(9, dtype=np.float32).reshape(3, 3),
    np.diag(np.array([1, 2, 3], np.float32)), np.where(np.eye(3) == 1, 1.0, -0.0).astype(np.float32),
    np.eye(3, dtype=np.float32) * np.nan, np.eye(1, dtype=np.float32), np.tril(np.ones((4, 4)))[:, ::-1].copy(),
], ids=["zeros", "ones", "arange", "diag123", "negzero", "nan", "1x1", "antidiagonal"])
def test_find_band_rejects(array):
    assert find_band(array) is None


def whole_array_band(array: np.ndarray):
    """find_band's rule in one piece over the whole array (full-size temporaries), the oracle for
    the block-by-block find_band."""
    if array.ndim < 2 or array.size == 0 or array.dtype.kind not in "biuf" or min(array.shape[-2:]) < 2:
        return None
    rows, cols = array.shape[-2:]
    bits = array.reshape(-1, rows, cols)
    bits = bits.view(np.uint8) if bits.dtype == np.bool_ else bits.view(f"u{bits.dtype.itemsize}")
    if not np.array_equal(bits, np.broadcast_to(bits[0], bits.shape)):
        return None
    nonzero = bits[0] != 0
    if not nonzero.any() or nonzero.all() or len(np.unique(bits[0][nonzero])) > 1:
        return None
    value = array.reshape(-1)[np.flatnonzero(nonzero.reshape(-1))[0]]
    if array.dtype.kind == "f" and np.isnan(value):
        return None
    diagonal = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    on = sorted(set(diagonal[nonzero].tolist()))
    if any(not nonzero[diagonal == d].all() for d in on):
        return None
    if on[-1] - on[0] + 1 == len(on):
        return on[0], on[-1] + 1, False, value
    off = sorted(set(diagonal[~nonzero].tolist()))
    if off[-1] - off[0] + 1 == len(off):
        return off[0], off[-1] + 1, True, value
    return None


@settings(max_examples=300, deadline=None)
@given(data=st.data(), block=st.sampled_from([1, 5, 17, 1 << 20]))
def test_find_band_block_by_block_equals_the_whole_array_rule(data, block):
    """Bands, inverted bands, triangles, near misses (one element flipped, two values, NaN, a batch
    matrix that differs) over shapes and dtypes, read in blocks of any size."""
    from onnx_dml_lowering.lowering import diagonal
    rows, cols = data.draw(st.integers(1, 7)), data.draw(st.integers(1, 7))
    batch = data.draw(st.sampled_from([(), (2,), (2, 3)]))
    dtype = data.draw(st.sampled_from([np.float32, np.float16, np.int64, np.uint8, np.bool_]))
    begin = data.draw(st.integers(-8, 8))
    end = data.draw(st.integers(begin, 9))
    k = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    mask = (k >= begin) & (k < end)
    if data.draw(st.booleans()):
        mask = ~mask
    value = data.draw(st.sampled_from([1, 3, -2])) if dtype not in (np.uint8, np.bool_) else 1
    array = np.broadcast_to(np.where(mask, value, 0).astype(dtype), batch + (rows, cols)).copy()
    change = data.draw(st.sampled_from(["none", "flip", "second value", "nan", "one matrix"]))
    flat = array.reshape(-1)
    if change == "flip":
        spot = data.draw(st.integers(0, flat.size - 1))
        flat[spot] = 0 if flat[spot] else value
    elif change == "second value" and dtype not in (np.uint8, np.bool_) and flat.any():
        flat[np.flatnonzero(flat)[-1]] = 5
    elif change == "nan" and dtype in (np.float32, np.float16):
        array = np.where(array != 0, np.nan, 0).astype(dtype)
    elif change == "one matrix" and batch:
        last = array.reshape(-1, rows, cols)[-1]
        last[-1, -1] = 0 if last[-1, -1] else value
    old = diagonal.BAND_BLOCK
    diagonal.BAND_BLOCK = block
    try:
        got = find_band(array)
    finally:
        diagonal.BAND_BLOCK = old
    want = whole_array_band(array)
    assert (got is None) == (want is None), (got, want)
    # the partition's look at a stored weight's first row alone never turns a band away
    if want is not None:
        assert may_hold_band(array.shape, array.reshape(-1)[:cols])
    if got is not None:
        assert got[:3] == want[:3] and np.array_equal(np.array(got[3]), np.array(want[3]))


def test_find_band_reads_a_weight_no_further_than_its_first_row():
    """A stored weight (several values in its first row) is rejected before any full-size work: on
    a read-only memory map of a large sparse file only the first page is touched."""
    big = np.lib.stride_tricks.as_strided(np.arange(3, dtype=np.float32), shape=(1 << 20, 1 << 12), strides=(0, 4))
    assert find_band(big) is None                     # 16 GiB of view: anything full-size would fail


@pytest.mark.parametrize("form", ["matrix", "vector", "scalar", "value_ints", "value_float", "sparse_matrix",
                                  "batched_band", "dense_matrix"])
def test_constant_diagonal_looks_at_the_stored_node_first(form):
    """may_match (the look at a Constant as stored, before its NodeInfo is built) is False only
    where the pattern takes nothing, over the forms a Constant comes in."""
    from onnx_dml_lowering.compiler import compile_model
    from onnx_dml_lowering.lowering.diagonal_idioms import CONSTANT_DIAGONAL
    from onnx_dml_lowering.compiler.graph_view import OnnxGraphView
    arrays = {"matrix": np.eye(3, dtype=np.float32), "vector": np.ones(3, np.float32),
              "scalar": np.array(2.0, np.float32), "batched_band": np.broadcast_to(np.eye(3, dtype=np.float32), (2, 3, 3)),
              "dense_matrix": np.arange(9, dtype=np.float32).reshape(3, 3)}
    if form in arrays:
        attrs = {"value": numpy_helper.from_array(np.array(arrays[form]), "c")}
    elif form == "sparse_matrix":
        values, indices = numpy_helper.from_array(np.ones(3, np.float32), "v"), numpy_helper.from_array(
            np.array([0, 4, 8], np.int64), "i")
        attrs = {"sparse_value": h.make_sparse_tensor(values, indices, [3, 3])}
    else:
        attrs = {form: [1, 2] if form == "value_ints" else 1.5}
    node = h.make_node("Constant", [], ["c"], name="const", **attrs)
    shape = {"matrix": [3, 3], "vector": [3], "scalar": [], "value_ints": [2], "value_float": [],
             "sparse_matrix": [3, 3], "batched_band": [2, 3, 3], "dense_matrix": [3, 3]}[form]
    model = graph_model([node, h.make_node("Identity", ["c"], ["y"], name="id")], [],
                        [tensor("y", T.INT64 if form == "value_ints" else T.FLOAT, shape)])
    compiled = compile_model(model)
    view = OnnxGraphView(compiled.model, compiled.types)
    stored = next(n for n in compiled.model.graph.node if n.op_type == "Constant")
    found = CONSTANT_DIAGONAL.rule.pattern(view.info(stored.name), view)
    looks = CONSTANT_DIAGONAL.rule.may_match(stored)
    assert looks or found is None
    assert looks == (form in ("matrix", "batched_band", "dense_matrix"))
    assert (found is not None) == (form in ("matrix", "batched_band"))


# -- EyeLike(ConstantOfShape) ------------------------------------------------------------------

def eyelike_of_fill(dtype=None, k=0, fill_type=T.FLOAT, shape_const=None):
    attrs = {"k": k}
    if dtype is not None:
        attrs["dtype"] = dtype
    nodes = [h.make_node("ConstantOfShape", ["shape"], ["fill"], name="fill",
                         value=h.make_tensor("v", fill_type, [1], [0])),
             h.make_node("EyeLike", ["fill"], ["y"], name="eye", **attrs)]
    out_type = dtype if dtype is not None else fill_type
    if shape_const is not None:
        return make(nodes, [], [tensor("y", out_type, 2)], [numpy_helper.from_array(np.array(shape_const, np.int64), "shape")])
    return make(nodes, [tensor("shape", T.INT64, [2])], [tensor("y", out_type, 2)])


@pytest.mark.parametrize("dtype", [None] + list(ONNX_NUMERIC_AND_BOOL))
@pytest.mark.parametrize("k", [0, 2, -1, 2**40])
def test_eyelike_of_constant_of_shape(dtype, k):
    model = eyelike_of_fill(dtype, k)
    for dims in ((3, 5), (4, 4), (0, 3), (6, 2)):
        compiled = differential(model, {"shape": np.array(dims, np.int64)}).compiled
    (entry,) = compiled.placement
    assert entry.rule == "eyelike_constant_of_shape" and entry.status == "lowered"
    assert sorted(entry.onnx_nodes) == ["eye", "fill"]


def test_eyelike_of_constant_shape_is_static():
    compiled = differential(eyelike_of_fill(T.INT32, 1, shape_const=[3, 4]), {}).compiled
    assert compiled.graph.dml_operators == ["DIAGONAL_MATRIX"]
    assert not any(s.kind == "LOWER_AT_RUN_TIME" for s in compiled.graph.steps)


# -- torch.eye from the dynamo exporter ----------------------------------------------------------

def eye_ranges(square=False, cast_to=T.FLOAT, swapped=False, axes_attr=False):
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(1, np.int64), "one")]
    nodes = [h.make_node("Range", ["zero", "n", "one"], ["r0"], name="range_rows")]
    if not square:
        nodes.append(h.make_node("Range", ["zero", "m", "one"], ["r1"], name="range_cols"))
    cols = "r0" if square else "r1"
    if axes_attr:
        nodes.append(h.make_node("Unsqueeze", ["r0"], ["u"], name="unsq", axes=[1]))
    else:
        inits.append(numpy_helper.from_array(np.array([-1], np.int64), "axes"))
        nodes.append(h.make_node("Unsqueeze", ["r0", "axes"], ["u"], name="unsq"))
    nodes.append(h.make_node("Equal", [cols, "u"] if swapped else ["u", cols], ["eq"], name="eq"))
    y, elem = "eq", T.BOOL
    if cast_to is not None:
        nodes.append(h.make_node("Cast", ["eq"], ["y"], name="cast", to=cast_to))
        y, elem = "y", cast_to
    inputs = [tensor("n", T.INT64, [])]
    if not square:
        inputs.append(tensor("m", T.INT64, []))
    return make(nodes, inputs, [tensor(y, elem, 2)], inits, opset=11 if axes_attr else 18)


@pytest.mark.parametrize("square", [False, True])
@pytest.mark.parametrize("cast_to", [T.FLOAT, T.INT64, T.FLOAT16, T.UINT8, None])
@pytest.mark.parametrize("form", ["plain", "swapped", "axes_attr"])
def test_eye_from_ranges(square, cast_to, form):
    model = eye_ranges(square, cast_to, swapped=form == "swapped", axes_attr=form == "axes_attr")
    for n, m in ((3, 5), (4, 2), (0, 3), (1, 1), (-2, 3)):
        feeds = {"n": np.array(n, np.int64)} if square else {"n": np.array(n, np.int64), "m": np.array(m, np.int64)}
        compiled = differential(model, feeds).compiled
    (entry,) = compiled.placement
    assert entry.rule == "eye_from_ranges" and entry.status == "lowered"
    assert len(entry.onnx_nodes) == (3 if square else 4) + (cast_to is not None)


def test_eye_whose_range_is_read_elsewhere_leaves_that_range_to_onnx():
    """eye_from_ranges covers its Ranges whole, so it steps aside; the mask rule lowers the Equal
    (one DIAGONAL_MATRIX) and leaves the Range that is also a graph output to ONNX."""
    model = eye_ranges()
    model.graph.output.append(tensor("r0", T.INT64, 1))
    for n, m in ((3, 4), (1, 1), (0, 2)):
        compiled = differential(model, {"n": np.array(n, np.int64), "m": np.array(m, np.int64)}).compiled
        (entry,) = compiled.placement
        assert entry.rule == "range_comparison_mask" and entry.status == "lowered"
        assert entry.dml_operators == ["DIAGONAL_MATRIX"]
        produced = {n.output[0]: n.name for n in model.graph.node}
        assert produced["r0"] not in entry.onnx_nodes


# -- Trilu over ConstantOfShape: causal masks ------------------------------------------------------

def trilu_of_fill(value, elem, upper, k=None, rank=2):
    inputs = [tensor("shape", T.INT64, [rank])]
    names = ["fill"]
    if k is not None:
        inputs.append(tensor("k", T.INT64, []))
        names.append("k")
    nodes = [h.make_node("ConstantOfShape", ["shape"], ["fill"], name="fill", value=h.make_tensor("v", elem, [1], [value])),
             h.make_node("Trilu", names, ["y"], name="trilu", upper=upper)]
    return make(nodes, inputs, [tensor("y", elem, rank)])


@pytest.mark.parametrize("value,elem", [(1.0, T.FLOAT), (-1e9, T.FLOAT), (-np.inf, T.FLOAT), (1, T.INT64),
                                        (True, T.BOOL), (0.5, T.DOUBLE), (3, T.UINT8)])
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 1, -2, 7, -9, 2**40, -2**40])
def test_trilu_of_constant_of_shape(value, elem, upper, k):
    model = trilu_of_fill(value, elem, upper, k)
    for dims in ((4, 4), (3, 6), (6, 3), (0, 4), (1, 1)):
        feeds = {"shape": np.array(dims, np.int64)}
        if k is not None:
            feeds["k"] = np.array(k, np.int64)
        compiled = differential(model, feeds).compiled
    (entry,) = compiled.placement
    assert entry.rule == "trilu_constant_fill" and entry.status == "lowered"


@pytest.mark.parametrize("dims", [(2, 3, 4), (2, 2, 3, 3), (2, 1, 2, 3, 3)])
def test_trilu_batched_masks(dims):
    model = trilu_of_fill(1.0, T.FLOAT, 0, rank=len(dims))
    differential(model, {"shape": np.array(dims, np.int64)})


def test_trilu_static_mask_uses_int32_bounds():
    model = trilu_of_fill(1.0, T.FLOAT, 0)
    model.graph.input.pop()
    model.graph.initializer.append(numpy_helper.from_array(np.array([5, 5], np.int64), "shape"))
    compiled = differential(model, {}).compiled
    (op,) = [s for s in compiled.graph.steps if s.kind == "DIAGONAL_MATRIX1"]
    assert (op.fill_begin, op.fill_end, op.input) == (INT32_MIN, 1, None)


@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
def test_trilu_needs_5_1(level):
    model = trilu_of_fill(1.0, T.FLOAT, 1)
    compiled = differential(model, {"shape": np.array((4, 5), np.int64)}, level).compiled
    (entry,) = compiled.placement
    session = compiled.session("cpu")
    # Below 5_1 the match declines (the operator does not exist there): the report says ONNX runs
    # it, not a lowering whose every run-time build would decline.
    assert entry.status == ("onnx" if level < parse_level("5_1") else "lowered"), entry
    if entry.status == "onnx":
        wanted = ("nor is DIAGONAL_MATRIX1 (introduced in 5_1)" if level < parse_level("2_0")
                  else "needs DIAGONAL_MATRIX1 (feature level 5_1")
        assert wanted in entry.reason and not session.specialised
    else:
        assert session.specialised and all(hasattr(v, "steps") for v in session.specialised.values())


# -- constant initializers --------------------------------------------------------------------

def uses_constant(array, name="w"):
    """y = x + w, with w an initializer."""
    elem = {np.dtype(np.float32): T.FLOAT, np.dtype(np.float64): T.DOUBLE, np.dtype(np.int64): T.INT64,
            np.dtype(np.float16): T.FLOAT16, np.dtype(np.int32): T.INT32}[array.dtype]
    return make([h.make_node("Add", ["x", name], ["y"], name="add")],
                [tensor("x", elem, list(array.shape))], [tensor("y", elem, array.ndim)],
                [numpy_helper.from_array(array, name)])


CONSTANTS = {
    "identity": np.eye(6, dtype=np.float32),
    "scaled_offset": (np.eye(5, 7, 2) * 3.0).astype(np.float32),
    "batched": np.broadcast_to(np.where(np.eye(4) == 1, -2, 0).astype(np.float16), (3, 2, 4, 4)).copy(),
    "causal": np.triu(np.full((6, 6), -1e9, np.float32), 1),
    "lower_ones": np.tril(np.ones((5, 5), np.int64)),
    "double_tenth": (np.eye(4) * 0.1).astype(np.float64),
    "int32_big": (np.eye(4) * (2**24 + 1)).astype(np.int32),
    "inverted_band": ((1 - np.tril(np.triu(np.ones((5, 5)), -1), 1)) * 2).astype(np.float32),
}
NEEDS_DIAGONAL_MATRIX1 = {"causal", "lower_ones", "double_tenth", "int32_big", "inverted_band"}


@pytest.mark.parametrize("name", sorted(CONSTANTS))
@pytest.mark.parametrize("level", ["2_0", "4_0", "5_0", "5_1", "6_4"])
def test_constant_initializers_are_generated(name, level, rng):
    array = CONSTANTS[name]
    model = uses_constant(array)
    x = rng.standard_normal(array.shape).astype(array.dtype) if array.dtype.kind == "f" else \
        rng.integers(-5, 5, array.shape).astype(array.dtype)
    compiled = differential(model, {"x": x}, level).compiled
    (entry,) = compiled.placement
    assert entry.onnx_nodes == ["initializer:w"] and entry.rule == "constant_diagonal"
    plain_ok = level >= "2_1" or array.dtype in (np.float32, np.float16)
    if array.dtype.itemsize == 8:
        plain_ok = level >= "5_1"
    lowered = level >= "5_1" if name in NEEDS_DIAGONAL_MATRIX1 else plain_ok and level >= "2_0"
    assert (entry.status == "lowered") == lowered, entry.reason
    if lowered:
        assert entry.extra["initializer_bytes_saved"] == array.nbytes
        assert "w" in compiled.partition.generated and "w" not in compiled.initializers
        ops = compiled.graph.dml_operators
        assert ops == (["DIAGONAL_MATRIX1"] if name in NEEDS_DIAGONAL_MATRIX1 else ["DIAGONAL_MATRIX"])
    else:
        assert "DIAGONAL_MATRIX1" in entry.reason or "not supported" in entry.reason or "needs" in entry.reason


def test_constant_node_identity_is_generated(rng):
    eye = np.eye(4, dtype=np.float32)
    model = make([h.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(eye, "c")),
                  h.make_node("Mul", ["x", "c"], ["y"], name="mul")],
                 [tensor("x", T.FLOAT, [4, 4])], [tensor("y", T.FLOAT, 2)])
    compiled = differential(model, {"x": rng.standard_normal((4, 4)).astype(np.float32)}).compiled
    (entry,) = compiled.placement
    assert entry.onnx_nodes == ["const"] and entry.rule == "constant_diagonal"


def test_an_overridable_initializer_is_not_generated(rng):
    model = uses_constant(np.eye(3, dtype=np.float32))
    model.graph.input.append(tensor("w", T.FLOAT, [3, 3]))
    compiled = differential(model, {"x": np.ones((3, 3), np.float32)}).compiled
    assert compiled.placement == []


def eye_ranges_expanded():
    model = eye_ranges(square=True)
    graph = model.graph
    y = graph.output.pop()
    graph.input.append(tensor("batch", T.INT64, [None]))
    graph.node.append(h.make_node("Expand", [y.name, "batch"], ["yb"], name="expand"))
    graph.output.append(tensor("yb", T.FLOAT, 4))
    return model


@pytest.mark.parametrize("batch", [(2, 3, 4, 4), (3, 1, 1), (5, 1, 4), (1, 4, 4)])
def test_batched_eye_through_expand(batch):
    model = eye_ranges_expanded()
    compiled = differential(model, {"n": np.array(4, np.int64), "batch": np.array(batch, np.int64)}).compiled
    (entry,) = compiled.placement
    assert entry.rule == "eye_from_ranges" and "expand" in entry.onnx_nodes
    assert not any("left to ONNX" in e for e in compiled.session("cpu").log)


def test_expand_that_stretches_the_eye_falls_back():
    """A 1x1 eye expanded to 3x3 is all ones, not an identity: declined at run time, still right."""
    model = eye_ranges_expanded()
    compiled = differential(model, {"n": np.array(1, np.int64), "batch": np.array([3, 3], np.int64)}).compiled
    assert any("stretches" in e for e in compiled.session("cpu").log)


@pytest.mark.parametrize("constant", [np.array(1.0, np.float32), np.full((1, 4), -np.inf, np.float32),
                                      np.array([True]), np.array([2, 2], np.int64)])
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_of_expanded_constant(constant, upper):
    elem = {np.dtype(np.float32): T.FLOAT, np.dtype(np.bool_): T.BOOL, np.dtype(np.int64): T.INT64}[constant.dtype]
    nodes = [h.make_node("Expand", ["c", "shape"], ["fill"], name="expand"),
             h.make_node("Trilu", ["fill"], ["y"], name="trilu", upper=upper)]
    model = make(nodes, [tensor("shape", T.INT64, [2])], [tensor("y", elem, 2)],
                 [numpy_helper.from_array(constant, "c")])
    last = constant.shape[-1] if constant.ndim else 3
    for dims in ((4, last), (last, last), (2, last), (5, 1)):
        if constant.ndim and last != 1 and dims[-1] == 1:
            dims = (5, last)                   # an Expand cannot shrink the constant
        compiled = differential(model, {"shape": np.array(dims, np.int64)}).compiled
    assert compiled.placement[0].rule == "trilu_constant_fill"


def test_trilu_of_non_uniform_constant_is_not_an_idiom():
    nodes = [h.make_node("Expand", ["c", "shape"], ["fill"], name="expand"),
             h.make_node("Trilu", ["fill"], ["y"], name="trilu")]
    model = make(nodes, [tensor("shape", T.INT64, [2])], [tensor("y", T.FLOAT, 2)],
                 [numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "c")])
    compiled = differential(model, {"shape": np.array((3, 2), np.int64)}).compiled
    # Not the constant-fill idiom; the general Trilu rule (InputTensor = the Expand's result) takes it.
    assert [p.rule for p in compiled.placement] == ["trilu"]


@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
@pytest.mark.parametrize("idiom", ["eyelike_constant_of_shape", "eye_from_ranges"])
@pytest.mark.parametrize("dtype", [T.FLOAT, T.INT64, T.UINT8])
def test_eye_idioms_at_every_level(level, idiom, dtype):
    """Lowered where DIAGONAL_MATRIX takes the type (2_0: float only; 64-bit from 5_1), declined
    at match time with the table's reason elsewhere; the answer is the ONNX one at every level."""
    if idiom == "eyelike_constant_of_shape":
        model, feeds = eyelike_of_fill(dtype, 1), {"shape": np.array((3, 5), np.int64)}
    else:
        model, feeds = eye_ranges(cast_to=dtype), {"n": np.array(3, np.int64), "m": np.array(5, np.int64)}
    compiled = differential(model, feeds, level).compiled
    (entry,) = compiled.placement
    assert entry.rule == idiom
    supported = level.name >= "2_1" or (level.name == "2_0" and dtype == T.FLOAT)
    if dtype == T.INT64:
        supported = level.name >= "5_1"
    # Declined at match time, with the table's reason: never reported lowered while every
    # run-time build declines.
    assert entry.status == ("lowered" if supported else "onnx"), entry
    declined = [v for v in compiled.session("cpu").specialised.values() if not hasattr(v, "steps")]
    assert not declined, declined
    if not supported:
        assert "DIAGONAL_MATRIX" in entry.reason


# -- band_reason: the earliest operator and level, read from the tables -----------------------------

def _earliest(dtype, single_exact, level):
    """(operator, level) of the first level at or after `level` whose table takes a band of `dtype`:
    DIAGONAL_MATRIX for one diagonal whose value FLOAT32 holds, else DIAGONAL_MATRIX1; None if none."""
    for later in (lv for lv in ALL_LEVELS if lv >= level):
        for support, fits in ((DIAGONAL_MATRIX, single_exact), (DIAGONAL_MATRIX1, True)):
            row = support.row(later)
            if fits and row is not None and dtype in row.tensors["OutputTensor"].types:
                return support.name, later
    return None


def _values(onnx_type):
    """(value, FLOAT32 holds it exactly) for a type: 1 always; a float or integer FLOAT32 rounds."""
    out = [(1, True)]
    np_type = onnx_to_numpy(onnx_type)
    if onnx_type == T.DOUBLE:
        out.append((0.1, False))
    elif np_type is not None and np.dtype(np_type).kind in "iu" and np.iinfo(np_type).max > 2**24:
        out.append((2**24 + 1, False))
    return out


@pytest.mark.parametrize("onnx_type", ONNX_NUMERIC_AND_BOOL + (T.BFLOAT16, T.UINT4, T.INT4),
                         ids=lambda t: T.DataType.Name(t))
def test_band_reason_names_the_earliest_operator_and_level(onnx_type):
    """Over every level and band shape: None where a table takes the band, else the reason names the
    first later level whose table takes it and the operator there; that level lowers it with that
    operator and every level before declines (an int32 eye at 2_0 needs DIAGONAL_MATRIX at 2_1)."""
    dtype = from_onnx(carrier_type(onnx_type))
    for (value, exact), single, level in itertools.product(_values(onnx_type), (True, False), ALL_LEVELS):
        reason = band_reason(onnx_type, value, single, level)
        earliest = _earliest(dtype, single and exact, level)
        if earliest is not None and earliest[1] == level:
            assert reason is None, (value, single, level, reason)
            graph = emit_band(Graph(level), Names("b"), "y", onnx_type, (3, 4), 0, 1 if single else 3, value, level)
            verify_graph(graph)
            assert [s.kind for s in graph.steps if s.is_dml_operator] == [earliest[0]]
        elif earliest is None:
            assert reason is not None and "any later feature level" in reason and "needs" not in reason
        else:
            operator, first = earliest
            assert reason is not None and reason.endswith(f"needs {operator} (feature level {first}; target {level})")
            assert band_reason(onnx_type, value, single, first) is None
            assert (DIAGONAL_MATRIX.row(level) is None) == ("nor is DIAGONAL_MATRIX1" in reason)


def test_band_reason_says_why_the_target_declines():
    """The first half of the reason: the width, the Value FLOAT32 cannot hold, or the type."""
    assert band_reason(T.INT32, 1, True, parse_level("2_0")) == (
        "one diagonal of output type int32 (INT32) needs DIAGONAL_MATRIX (feature level 2_1; target 2_0)")
    assert band_reason(T.FLOAT, 1, False, parse_level("4_0")) == (
        "a band wider than one diagonal needs DIAGONAL_MATRIX1 (feature level 5_1; target 4_0)")
    assert band_reason(T.DOUBLE, 0.1, True, parse_level("5_0")) == (
        "Value 0.1, which FLOAT32 cannot hold exactly, needs DIAGONAL_MATRIX1 (feature level 5_1; target 5_0)")


# -- a Cast or an Equal after a Trilu of a fill (`ones.triu(1).bool()`, `triu(ones, 1) == 1`) --------

def trilu_then(value, elem, upper, tail, rank=2, constant_first=False):
    """ConstantOfShape(shape, value) -> Trilu(k fed) -> tail, each ("Cast", to) or ("Equal", c)."""
    nodes = [h.make_node("ConstantOfShape", ["shape"], ["fill"], name="fill", value=h.make_tensor("v", elem, [1], [value])),
             h.make_node("Trilu", ["fill", "k"], ["t0"], name="trilu", upper=upper)]
    inits, out_type = [], elem
    for i, (op, arg) in enumerate(tail):
        if op == "Cast":
            nodes.append(h.make_node("Cast", [f"t{i}"], [f"t{i + 1}"], name=f"tail{i}", to=arg))
            out_type = arg
        else:
            inits.append(h.make_tensor(f"c{i}", elem, np.shape(arg), np.reshape(arg, -1).tolist()))
            operands = [f"c{i}", f"t{i}"] if constant_first else [f"t{i}", f"c{i}"]
            nodes.append(h.make_node("Equal", operands, [f"t{i + 1}"], name=f"tail{i}"))
            out_type = T.BOOL
    nodes.append(h.make_node("Identity", [f"t{len(tail)}"], ["y"], name="out"))
    return make(nodes, [tensor("shape", T.INT64, [rank]), tensor("k", T.INT64, [])], [tensor("y", out_type, rank)], inits)


NAN = float("nan")
TAILS = [  # value, fill type, tail, whether the whole tail folds in
    (1.0, T.FLOAT, [("Cast", T.BOOL)], True), (-1e9, T.FLOAT, [("Cast", T.BOOL)], True),
    (0.0, T.FLOAT, [("Cast", T.BOOL)], True), (-0.0, T.FLOAT, [("Cast", T.BOOL)], True),
    (NAN, T.FLOAT, [("Cast", T.BOOL)], True), (7, T.INT32, [("Cast", T.BOOL)], True),
    (3.0, T.FLOAT, [("Cast", T.INT64)], True), (1.0, T.FLOAT, [("Cast", T.FLOAT16)], True),
    (1, T.INT64, [("Cast", T.FLOAT)], True), (True, T.BOOL, [("Cast", T.FLOAT)], True),
    (2.5, T.FLOAT, [("Cast", T.INT32)], False), (300, T.INT32, [("Cast", T.UINT8)], False),   # not exact
    (1.0, T.FLOAT, [("Equal", 1.0)], True), (1.0, T.FLOAT, [("Equal", 0.0)], True),         # its complement
    (1.0, T.FLOAT, [("Equal", 2.0)], True), (0.0, T.FLOAT, [("Equal", 0.0)], True),         # none, every one
    (NAN, T.FLOAT, [("Equal", 0.0)], True), (-1e9, T.FLOAT, [("Equal", [[-1e9]])], True),
    (-0.0, T.FLOAT, [("Equal", 0.0)], True), (5, T.INT64, [("Equal", 5)], True), (5, T.INT64, [("Equal", 0)], True),
    (1.0, T.FLOAT, [("Equal", 1.0), ("Cast", T.FLOAT)], True), (1.0, T.FLOAT, [("Equal", 0.0), ("Cast", T.INT8)], True),
]


@pytest.mark.parametrize("value,elem,tail,folds", TAILS, ids=lambda v: str(v).replace(" ", ""))
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_of_fill_then_cast_or_equal(value, elem, tail, folds, upper):
    """The tail folds into the one generator, its values as ONNX computes them (onnx.reference
    decides), over ranks 2..5, empty matrices and ks inside and far past the matrix."""
    compiled = None
    for rank, dims in ((2, (4, 5)), (2, (5, 4)), (2, (0, 3)), (2, (1, 1)), (3, (2, 3, 3)), (5, (2, 1, 2, 3, 3))):
        model = trilu_then(value, elem, upper, tail, rank)
        compiled = None
        for k in (0, 1, -2, 100, -100):
            feeds = {"shape": np.array(dims, np.int64), "k": np.array(k, np.int64)}
            compiled = differential(model, feeds, compiled=compiled).compiled
        assert compiled.session().log == []
    entry = next(p for p in compiled.placement if p.rule == "trilu_constant_fill")
    assert entry.status == "lowered" and entry.dml_operators == ["DIAGONAL_MATRIX1"]
    covered = {f"tail{i}" for i in range(len(tail))} <= set(entry.onnx_nodes)
    assert covered == folds, entry.onnx_nodes


def test_trilu_of_fill_equal_with_the_constant_first(rng):
    model = trilu_then(1.0, T.FLOAT16, 1, [("Equal", 1.0)], constant_first=True)
    compiled = differential(model, {"shape": np.array((4, 6), np.int64), "k": np.array(1, np.int64)}).compiled
    assert "tail0" in compiled.placement[0].onnx_nodes


def test_trilu_of_fill_tail_near_misses():
    """An Equal to a fed value, or a Trilu whose own output leaves the graph, keeps the tail on ONNX."""
    feeds = {"shape": np.array((3, 4), np.int64), "k": np.array(1, np.int64)}
    model = trilu_then(1.0, T.FLOAT, 1, [("Equal", 1.0)])
    model.graph.initializer.pop()
    model.graph.input.append(tensor("c0", T.FLOAT, []))
    compiled = differential(model, {**feeds, "c0": np.array(1.0, np.float32)}).compiled
    assert compiled.placement[0].onnx_nodes == ["trilu", "fill"]
    model = trilu_then(1.0, T.FLOAT, 1, [("Cast", T.BOOL)])
    model.graph.output.append(tensor("t0", T.FLOAT, 2))
    compiled = differential(model, feeds).compiled
    assert compiled.placement[0].onnx_nodes == ["trilu", "fill"]


@pytest.mark.parametrize("level", ["4_0", "5_0", "5_1"])
def test_trilu_of_fill_then_cast_at_levels(level):
    model = trilu_then(1.0, T.FLOAT, 1, [("Cast", T.BOOL)])
    compiled = differential(model, {"shape": np.array((3, 4), np.int64), "k": np.array(1, np.int64)}, level).compiled
    entry = compiled.placement[0]
    assert entry.status == ("lowered" if level == "5_1" else "onnx"), entry
    if entry.status == "onnx":
        assert entry.reason == band_reason(T.BOOL, True, False, parse_level(level))
