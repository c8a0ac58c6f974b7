"""NonZero lowering, differential against onnx.reference over dtype x rank x density x level."""
import numpy as np
import pytest
from onnx import TensorProto as T

from onnx_dml_lowering.ir import ALL_LEVELS
from onnx_dml_lowering.ir.dtypes import ONNX_NUMERIC_AND_BOOL, onnx_to_numpy
from tests.builders import single_node_model
from tests.oracle import differential

SHAPES = {0: (), 1: (7,), 2: (3, 5), 3: (2, 3, 4), 4: (2, 1, 3, 2), 5: (1, 2, 3, 1, 2),
          6: (2, 1, 2, 1, 2, 3), 7: (1, 2, 2, 1, 3, 1, 2), 8: (2, 1, 2, 1, 2, 1, 2, 2)}
DENSITIES = {"all_zero": 0.0, "sparse": 0.1, "dense": 0.7, "all_nonzero": 1.0}
SIXTY_FOUR_BIT = {T.INT64, T.UINT64, T.DOUBLE}


def make_input(onnx_type, shape, density, rng, specials=True):
    dtype = onnx_to_numpy(onnx_type)
    keep = rng.random(shape) < density
    if dtype == np.bool_:
        return np.asarray(keep)
    if dtype.kind == "f":
        values = rng.uniform(0.5, 4.0, shape) * rng.choice([-1, 1], shape)
        values = np.where(keep, values, 0.0).astype(dtype)
        if specials and values.size:
            flat = values.reshape(-1)
            zeros, ones = np.flatnonzero(~keep.reshape(-1)), np.flatnonzero(keep.reshape(-1))
            flat[zeros[::2]] = -0.0                       # -0.0 is zero
            if ones.size:
                flat[ones[0]] = np.nan                    # NaN is non-zero
                flat[ones[-1]] = np.finfo(dtype).smallest_subnormal  # denormal is non-zero
        return values
    info = np.iinfo(dtype)
    values = rng.integers(1, min(info.max, 1000), shape, endpoint=True).astype(dtype)
    if info.min < 0:
        values = np.where(rng.random(shape) < 0.5, -values, values).astype(dtype)
    if dtype.itemsize >= 4 and values.size:
        values.reshape(-1)[0] = info.max if keep.reshape(-1)[0] else 0
    return np.where(keep, values, dtype.type(0)).astype(dtype)


@pytest.mark.parametrize("onnx_type", ONNX_NUMERIC_AND_BOOL)
@pytest.mark.parametrize("rank", sorted(SHAPES))
def test_nonzero_grid(onnx_type, rank, rng):
    shape = SHAPES[rank]
    model = single_node_model("NonZero", onnx_type, shape, T.INT64)
    for density in DENSITIES.values():
        x = make_input(onnx_type, shape, density, rng)
        compiled = differential(model, {"x": x}).compiled
    (entry,) = compiled.placement
    assert entry.status == "lowered", entry.reason
    if onnx_type in SIXTY_FOUR_BIT:
        # No 64-bit input type: the two words are split into planes and OR-ed first.
        glue = ["ELEMENT_WISE_IDENTITY"] + (["ELEMENT_WISE_BIT_AND"] if onnx_type == T.DOUBLE else [])
        assert entry.dml_operators[:len(glue) + 2] == glue + ["ELEMENT_WISE_BIT_OR", "NONZERO_COORDINATES"]
    else:
        assert entry.dml_operators[0] == "NONZERO_COORDINATES"


@pytest.mark.parametrize("onnx_type", [T.FLOAT, T.BOOL, T.INT8, T.DOUBLE])
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2), (2, 0, 1, 3, 1, 1, 1, 2)])
def test_nonzero_empty_input_needs_no_operator(onnx_type, shape, rng):
    model = single_node_model("NonZero", onnx_type, shape, T.INT64)
    compiled, ours, _ = differential(model, {"x": make_input(onnx_type, shape, 0.5, rng)})
    assert ours["y"].shape == (len(shape), 0)
    if onnx_type not in SIXTY_FOUR_BIT:
        assert compiled.placement[0].status == "lowered"
        assert compiled.placement[0].dml_operators == []


@pytest.mark.parametrize("value", [0.0, -0.0, 2.5, np.nan])
def test_scalar_nonzero_has_onnx_shape(value):
    model = single_node_model("NonZero", T.FLOAT, (), T.INT64)
    ours = differential(model, {"x": np.array(value, np.float32)}).outputs
    assert ours["y"].shape == (0, int(value != 0))


@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
@pytest.mark.parametrize("rank", [0, 1, 2, 4, 5, 6])
@pytest.mark.parametrize("onnx_type", [T.FLOAT, T.UINT8, T.INT32, T.FLOAT16])
def test_nonzero_every_level(level, rank, onnx_type, rng):
    shape = SHAPES[rank]
    model = single_node_model("NonZero", onnx_type, shape, T.INT64)
    compiled = differential(model, {"x": make_input(onnx_type, shape, 0.5, rng)}, level).compiled
    (entry,) = compiled.placement
    if level.name < "3_0":
        assert entry.status == "onnx" and "3_0" in entry.reason
    elif level.name < "4_0" and rank > 5:
        assert entry.status == "onnx" and "5 dimensions" in entry.reason
    else:
        assert entry.status == "lowered", entry.reason
        if level.name < "4_0":
            # 3_0: every tensor padded to 4 (or 5) dimensions, all with one DimensionCount.
            descs = [v.desc for v in compiled.graph.views.values() if ".in.view" in v.name or ".count" in v.name]
            assert {d.rank for d in descs} == {5 if rank == 5 else 4}


@pytest.mark.parametrize("level", ["3_0", "4_0", "4_1", "5_1"])
def test_crop_copy_matches_level(level):
    """Below 4_1 ELEMENT_WISE_IDENTITY has no 64-bit type: the crop moves UINT32 word pairs."""
    from onnx_dml_lowering.compiler import compile_model
    compiled = compile_model(single_node_model("NonZero", T.FLOAT, (3, 4), T.INT64), feature_level=level)
    copies = [s for s in compiled.graph.steps if s.kind == "ELEMENT_WISE_IDENTITY"]
    (copy,) = copies
    dtype = compiled.graph.views[copy.input].desc.data_type.name
    assert dtype == ("INT64" if level >= "4_1" else "UINT32")


def test_rank_one_needs_no_crop():
    from onnx_dml_lowering.compiler import compile_model
    compiled = compile_model(single_node_model("NonZero", T.FLOAT, (9,), T.INT64))
    assert compiled.graph.dml_operators == ["NONZERO_COORDINATES"]


def test_rank_nine_declines_and_falls_back(rng):
    shape = (1, 2, 1, 2, 1, 1, 2, 1, 2)
    model = single_node_model("NonZero", T.FLOAT, shape, T.INT64)
    compiled = differential(model, {"x": make_input(T.FLOAT, shape, 0.5, rng)}).compiled
    assert compiled.placement[0].status == "onnx"
    assert "rank 9" in compiled.placement[0].reason


def test_coordinates_descriptor_is_the_ort_strided_trick():
    """UINT32 {M, N} with strides {2, 2M} over an INT64 [N, M] buffer, cleared first."""
    from onnx_dml_lowering.compiler import compile_model
    compiled = compile_model(single_node_model("NonZero", T.FLOAT, (3, 4), T.INT64))
    graph = compiled.graph
    (op,) = [s for s in graph.steps if s.kind == "NONZERO_COORDINATES"]
    coords = graph.views[op.output_coordinates]
    assert coords.desc.data_type.name == "UINT32"
    assert coords.desc.sizes == (12, 2) and coords.desc.strides == (2, 24)
    assert graph.buffers[coords.buffer].bytes == 8 * 2 * 12
    kinds = [s.kind for s in graph.steps]
    assert kinds.index("CLEAR_BUFFER") < kinds.index("NONZERO_COORDINATES") < kinds.index("READBACK_COUNT")


WORD_VALUES = {
    T.INT64: [0, 1, 1 << 32, -(1 << 32), -1, 1 << 62, -(1 << 63)],
    T.UINT64: [0, 1, 1 << 32, 1 << 63, (1 << 64) - 1, 0xFFFFFFFF],
    # bit patterns: +0, -0 (zero), smallest denormal (low word only), 2.0 (high word only), NaN, -inf
    T.DOUBLE: [0x0, 0x8000000000000000, 0x1, 0x4000000000000000, 0x7FF8000000000001, 0xFFF0000000000000],
}


@pytest.mark.parametrize("onnx_type", sorted(WORD_VALUES))
@pytest.mark.parametrize("level", ["3_0", "4_0", "4_1", "5_1"])
def test_64bit_values_non_zero_in_one_word_only(onnx_type, level, rng):
    values = WORD_VALUES[onnx_type]
    if onnx_type == T.DOUBLE:
        pool = np.array(values, np.uint64).view(np.float64)
    else:
        pool = np.array(values, dtype=onnx_to_numpy(onnx_type))
    x = pool[rng.integers(0, pool.size, (4, 5))]
    x.reshape(-1)[: pool.size] = pool                     # every pattern at least once
    model = single_node_model("NonZero", onnx_type, (4, 5), T.INT64)
    compiled = differential(model, {"x": x}, level).compiled
    assert compiled.placement[0].status == "lowered"


def test_64bit_needs_the_bitwise_glue_level(rng):
    model = single_node_model("NonZero", T.INT64, (3, 4), T.INT64)
    compiled = differential(model, {"x": make_input(T.INT64, (3, 4), 0.5, rng)}, "2_1").compiled
    assert compiled.placement[0].status == "onnx" and "3_0" in compiled.placement[0].reason


@pytest.mark.parametrize("op,shape", [("NonZero", (65536, 65537)), ("EyeLike", (65536, 65537)),
                                      ("NonZero", (2**31, 3))])
def test_over_the_element_limit_declines_naming_it(op, shape):
    """Compiled only (the tensors would need tens of GiB): declined, the limit named."""
    from onnx_dml_lowering.compiler import compile_model
    out_shape = list(shape) if op == "EyeLike" else None
    compiled = compile_model(single_node_model(op, T.UINT8, shape, T.INT64 if op == "NonZero" else T.UINT8, out_shape))
    (entry,) = compiled.placement
    assert entry.status == "onnx" and "4294967295" in entry.reason, entry.reason


def _transposed_nonzero(shape):
    """NonZero -> Transpose(perm=[1, 0]): the element-major idiom (coordinate strides {2N, 2})."""
    from onnx import helper as h

    from tests.builders import graph_model
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             h.make_node("Transpose", ["nz"], ["y"], name="transpose", perm=[1, 0])]
    return graph_model(nodes, [("x", T.UINT8, list(shape))], [("y", T.INT64, [None, len(shape)])])


U32 = 2**32 - 1
# (model, M = input elements, the coordinates' strides as the rule emits them, the rule that anchors)
THIRTY_TWO_BIT = [
    (lambda: single_node_model("NonZero", T.UINT8, [2**31 + 1], T.INT64), 2**31 + 1,
     lambda m: (2, 2 * m), "nonzero"),
    (lambda: single_node_model("NonZero", T.UINT8, [2**31 - 1], T.INT64), 2**31 - 1,
     lambda m: (2, 2 * m), "nonzero"),
    (lambda: _transposed_nonzero((2**15, 2**15 + 2)), 2**15 * (2**15 + 2), lambda m: (4, 2), "nonzero_transpose"),
    (lambda: _transposed_nonzero((2**15, 2**15)), 2**30, lambda m: (4, 2), "nonzero_transpose"),
]


@pytest.mark.parametrize("build,m,strides,rule", THIRTY_TWO_BIT,
                         ids=["rank1-2^31+1", "rank1-2^31-1", "transposed-past-index", "transposed-2^30"])
def test_descriptors_past_32_bits_decline_naming_the_field(build, m, strides, rule):
    """Compiled only (no allocation): the coordinates descriptor {M, N} with its strides either fits
    DirectML's 32-bit Strides and element index (lowered) or declines naming what does not."""
    from onnx_dml_lowering.compiler import compile_model
    compiled = compile_model(build())
    entry = compiled.placement[0]
    assert entry.rule == rule
    stride = strides(m)
    n = 2 if rule == "nonzero_transpose" else 1
    last = (m - 1) * stride[0] + (n - 1) * stride[1]
    if max(stride) > U32:
        assert entry.status == "onnx" and f"stride {max(stride)}" in entry.reason, entry.reason
    elif last > U32:
        assert entry.status == "onnx" and f"element index {last}" in entry.reason, entry.reason
    else:
        assert entry.status == "lowered", entry.reason


@pytest.mark.parametrize("size,lowered", [(2**31 + 1, False), (2**31 - 1, True)])
def test_a_symbolic_dim_past_32_bits_declines_at_that_size(size, lowered, tmp_path, capsys):
    """compile --dim specialises the run-time steps at that size without allocating them."""
    import onnx

    from tests.cli_runner import cli
    path = tmp_path / "nz.onnx"
    onnx.save(single_node_model("NonZero", T.UINT8, ["n"], T.INT64), path)
    code, out, err = cli(["compile", path, "--dim", f"n={size}"], capsys)
    assert code == 0, err
    line = next(text for text in out.splitlines() if "at input shapes" in text)
    if lowered:
        assert "declined" not in line, line
    else:
        assert "declined: " in line and f"stride {2 * size}" in line and str(U32) in line, line
