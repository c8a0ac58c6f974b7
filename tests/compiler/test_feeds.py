"""Valid but unusual feeds through compiled.run, each compared with onnx.reference on the same model.

Layout-only oddities (Fortran order, big-endian, read-only, strided / reversed / broadcast views)
must not change the answer; zero-sized and scalar inputs, rank 9, the types onnxruntime's CPU
provider lacks, and symbolic dimensions must give exactly ONNX's answer (dtype, shape, values).
"""
from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir.dtypes import onnx_to_numpy
from tests.builders import graph_model, single_node_model
from tests.oracle import assert_outputs_same, assert_same, native, reference


def assert_matches_reference(model: onnx.ModelProto, feeds, level: str = "5_1", compiled=None):
    compiled = compiled or compile_model(model, feature_level=level)
    before = {k: native(v).copy() for k, v in feeds.items()}
    actual = compiled.run(feeds)
    assert all(isinstance(got, np.ndarray) for got in actual.values())
    assert_outputs_same(actual, reference(model, before))
    for name, value in feeds.items():          # the caller's arrays are left untouched
        assert_same(native(value), before[name], f"feed {name} modified")
    return compiled, actual


def sparse(rng, shape, dtype=np.float32) -> np.ndarray:
    values = rng.integers(1, 5, shape) * (rng.random(shape) < 0.5)
    return values.astype(dtype)


# -- layouts ---------------------------------------------------------------------------------------

def fortran(a):
    return np.asfortranarray(a)


def big_endian(a):
    return a.astype(a.dtype.newbyteorder(">"))


def read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def sliced(a):
    """Every other row and column of a 2x-larger array: non-contiguous, same values."""
    big = np.zeros((a.shape[0] * 2, a.shape[1] * 2), a.dtype)
    big[::2, ::2] = a
    view = big[::2, ::2]
    assert not view.flags.c_contiguous
    return view


def reversed_strides(a):
    view = a[::-1, ::-1].copy()[::-1, ::-1]
    assert view.strides[0] < 0
    return view


def transposed_view(a):
    view = np.ascontiguousarray(a.T).T
    assert not view.flags.c_contiguous
    return view


def broadcast(a):
    """Zero strides: one row repeated (read-only by numpy)."""
    return np.broadcast_to(a[1], a.shape)


def big_endian_fortran_sliced(a):
    return sliced(fortran(big_endian(a)))


LAYOUTS = {f.__name__: f for f in (fortran, big_endian, read_only, sliced, reversed_strides,
                                   transposed_view, broadcast, big_endian_fortran_sliced)}

MODELS = {
    "nonzero-static": lambda t: single_node_model("NonZero", t, [3, 4], T.INT64),
    "nonzero-symbolic": lambda t: single_node_model("NonZero", t, ["a", "b"], T.INT64),
    "eyelike-static": lambda t: single_node_model("EyeLike", t, [3, 4], t, [3, 4], k=1),
    "eyelike-symbolic": lambda t: single_node_model("EyeLike", t, ["a", "b"], t, [None, None], k=-1),
}


@pytest.mark.parametrize("onnx_type", [T.FLOAT, T.INT16, T.DOUBLE], ids=["float", "int16", "double"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_unusual_layouts(model_name, layout, onnx_type):
    rng = np.random.default_rng(zlib.crc32(f"{model_name}/{layout}/{onnx_type}".encode()))
    x = sparse(rng, (3, 4), onnx_to_numpy(onnx_type))
    feed = LAYOUTS[layout](x)
    if layout != "broadcast":                   # a pure layout change: the same values
        np.testing.assert_array_equal(feed, x)
    assert_matches_reference(MODELS[model_name](onnx_type), {"x": feed})


def test_numpy_scalar_feed_for_scalar_input():
    model = single_node_model("NonZero", T.FLOAT, [], T.INT64)
    assert_matches_reference(model, {"x": np.float32(2.5)})


def test_special_float_values():
    """-0.0 is zero; NaN, inf and denormals are not."""
    tiny = np.finfo(np.float32).smallest_subnormal
    x = np.array([[0.0, -0.0, np.nan, np.inf], [-np.inf, tiny, -tiny, 0.0], [1.0, 0.0, -0.0, -1.0]],
                 np.float32)
    for level in ("2_1", "4_0", "5_1"):
        assert_matches_reference(single_node_model("NonZero", T.FLOAT, [3, 4], T.INT64), {"x": x}, level)
        assert_matches_reference(single_node_model("NonZero", T.FLOAT16, [3, 4], T.INT64),
                                 {"x": big_endian(x.astype(np.float16))}, level)


# -- zero-sized dimensions ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape,declared", [
    ((0, 4), [0, 4]), ((3, 0), [3, 0]), ((0,), [0]), ((2, 0, 3), [2, 0, 3]),
    ((0, 4), ["a", "b"]), ((3, 0), ["a", "b"]), ((0, 0), ["a", "b"]), ((2, 0, 3), ["a", "b", "c"]),
])
@pytest.mark.parametrize("level", ["2_1", "3_0", "5_1"])
def test_nonzero_zero_sized(shape, declared, level):
    model = single_node_model("NonZero", T.FLOAT, declared, T.INT64)
    assert_matches_reference(model, {"x": np.zeros(shape, np.float32)}, level)


@pytest.mark.parametrize("shape,declared", [((0, 3), [0, 3]), ((3, 0), [3, 0]), ((0, 0), [0, 0]),
                                            ((0, 3), ["a", "b"]), ((3, 0), ["a", "b"])])
@pytest.mark.parametrize("level", ["2_1", "5_1"])
def test_eyelike_zero_sized(shape, declared, level):
    model = single_node_model("EyeLike", T.FLOAT, declared, T.FLOAT, [None, None], k=1)
    assert_matches_reference(model, {"x": np.zeros(shape, np.float32)}, level)


def test_zero_sized_feed_with_unusual_layout():
    model = single_node_model("NonZero", T.FLOAT, ["a", "b"], T.INT64)
    x = np.zeros((4, 0), np.float32)
    for feed in (np.asfortranarray(x), big_endian(x), x.T.copy().T, x[::2]):
        assert_matches_reference(model, {"x": feed})


# -- rank 9: declined, falls back, still right ---------------------------------------------------------

RANK9 = (2, 1, 2, 1, 1, 1, 1, 1, 3)


def test_rank9_nonzero_declines_and_falls_back():
    model = single_node_model("NonZero", T.FLOAT, RANK9, T.INT64)
    compiled = compile_model(model)
    [placement] = compiled.placement
    assert placement.status == "onnx"
    assert "9" in placement.reason and "8" in placement.reason
    rng = np.random.default_rng(9)
    assert_matches_reference(model, {"x": sparse(rng, RANK9)}, compiled=compiled)


def test_rank8_nonzero_is_lowered():
    shape = RANK9[1:]
    model = single_node_model("NonZero", T.FLOAT, shape, T.INT64)
    compiled = compile_model(model)
    assert [p.status for p in compiled.placement] == ["lowered"]
    assert_matches_reference(model, {"x": sparse(np.random.default_rng(8), shape)}, compiled=compiled)


def test_rank9_symbolic_nonzero_declines_at_run_time():
    """Rank 9 with unknown sizes: lowered 'at run time', where the rule declines, and still right."""
    model = single_node_model("NonZero", T.FLOAT, [f"d{i}" for i in range(9)], T.INT64)
    compiled = compile_model(model)
    rng = np.random.default_rng(99)
    assert_matches_reference(model, {"x": sparse(rng, RANK9)}, compiled=compiled)
    assert_matches_reference(model, {"x": np.zeros((1,) * 9, np.float32)}, compiled=compiled)


# -- types onnxruntime's CPU provider does not implement ---------------------------------------------

ORT_LACKS = {"int8": T.INT8, "uint16": T.UINT16, "double": T.DOUBLE, "int16": T.INT16,
             "uint32": T.UINT32, "uint64": T.UINT64}


@pytest.mark.parametrize("level", ["2_1", "3_0", "4_0", "5_1"])
@pytest.mark.parametrize("type_name", sorted(ORT_LACKS))
def test_nonzero_types_onnxruntime_lacks(type_name, level):
    onnx_type = ORT_LACKS[type_name]
    model = single_node_model("NonZero", onnx_type, [4, 5], T.INT64)
    rng = np.random.default_rng(len(type_name) * 31 + int(level[0]))
    x = sparse(rng, (4, 5), onnx_to_numpy(onnx_type))
    assert_matches_reference(model, {"x": x}, level)


@pytest.mark.parametrize("type_name", sorted(ORT_LACKS))
def test_nonzero_types_onnxruntime_lacks_symbolic(type_name):
    onnx_type = ORT_LACKS[type_name]
    model = single_node_model("NonZero", onnx_type, ["a", "b", "c"], T.INT64)
    compiled = compile_model(model)
    rng = np.random.default_rng(7)
    for shape in [(2, 3, 4), (1, 1, 1), (3, 1, 2)]:
        assert_matches_reference(model, {"x": sparse(rng, shape, onnx_to_numpy(onnx_type))}, compiled=compiled)


# -- scalar NonZero: ONNX says (0, nnz) ----------------------------------------------------------------

@pytest.mark.parametrize("level", ["2_1", "3_0", "5_1"])
@pytest.mark.parametrize("onnx_type", [T.FLOAT, T.INT32, T.DOUBLE, T.BOOL], ids=["float", "int32", "double", "bool"])
@pytest.mark.parametrize("value", [0, 3])
def test_scalar_nonzero_has_onnx_shape(value, onnx_type, level):
    model = single_node_model("NonZero", onnx_type, [], T.INT64)
    x = np.array(value, onnx_to_numpy(onnx_type))
    _, actual = assert_matches_reference(model, {"x": x}, level)
    assert actual["y"].shape == (0, 1 if value else 0)


def test_scalar_nonzero_left_to_onnx_reports_onnxruntime_deviation():
    """At 2_1 the scalar NonZero is an ONNX region; onnxruntime would say (1, nnz): the region runs as the
    hybrid oracle runs it (the NonZero by its definition) and the report says why."""
    model = single_node_model("NonZero", T.FLOAT, [], T.INT64)
    compiled, actual = assert_matches_reference(model, {"x": np.array(1.5, np.float32)}, "2_1")
    assert actual["y"].shape == (0, 1)
    engines = " ".join(compiled.session("cpu").regions.engines.values())
    assert "hybrid oracle" in engines and "scalar" in engines


# -- symbolic dimension: one compile, several sizes ----------------------------------------------------

def symbolic_model() -> onnx.ModelProto:
    return graph_model(
        [h.make_node("NonZero", ["x"], ["nz"], name="nz"),
         h.make_node("EyeLike", ["x"], ["eye"], name="eye", k=1),
         h.make_node("Transpose", ["nz"], ["nz_t"], name="tr", perm=[1, 0]),
         h.make_node("GatherND", ["x", "nz_t"], ["picked"], name="gather")],
        [("x", T.FLOAT, ["N", 4])],
        [("nz", T.INT64, [2, None]), ("eye", T.FLOAT, ["N", 4]), ("picked", T.FLOAT, 1)])


def test_symbolic_dimension_runs_at_several_sizes():
    model = symbolic_model()
    compiled = compile_model(model)
    assert {p.status for p in compiled.placement} == {"lowered"}
    rng = np.random.default_rng(2026)
    first_feed = sparse(rng, (3, 4))
    first = assert_matches_reference(model, {"x": first_feed}, compiled=compiled)[1]
    first_copy = {k: v.copy() for k, v in first.items()}
    for n in (7, 1, 3, 0):
        assert_matches_reference(model, {"x": sparse(rng, (n, 4))}, compiled=compiled)
    # Earlier results are not aliased by later runs.
    for name, value in first_copy.items():
        assert_same(first[name], value, name)
    assert_matches_reference(model, {"x": first_feed}, compiled=compiled)


@pytest.mark.parametrize("level", ["2_1", "3_0", "4_0"])
def test_symbolic_dimension_at_lower_levels(level):
    model = symbolic_model()
    compiled = compile_model(model, feature_level=level)
    rng = np.random.default_rng(17)
    for n in (2, 5):
        assert_matches_reference(model, {"x": sparse(rng, (n, 4))}, compiled=compiled)


# -- an initializer that is also a graph input may be fed -----------------------------------------------

def test_initializer_input_can_be_overridden():
    """ONNX: an initializer named among the graph inputs is a default; a feed replaces it."""
    model = graph_model(
        [h.make_node("Mul", ["x", "w"], ["m"], name="mul"), h.make_node("NonZero", ["m"], ["y"], name="nz")],
        [("x", T.FLOAT, [3, 4]), ("w", T.FLOAT, [4])], [("y", T.INT64, [2, None])],
        {"w": np.array([1, 0, 2, 0], np.float32)})
    compiled = compile_model(model)
    x = np.ones((3, 4), np.float32)
    assert_matches_reference(model, {"x": x}, compiled=compiled)          # the default
    _, actual = assert_matches_reference(model, {"x": x, "w": np.array([1, 1, 1, 0], np.float32)},
                                         compiled=compiled)
    assert actual["y"].shape == (2, 9)
