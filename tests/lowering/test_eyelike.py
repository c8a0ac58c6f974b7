"""EyeLike lowering, differential against onnx.reference over type x shape x k x dtype x level."""
import numpy as np
import pytest
from onnx import TensorProto as T

from onnx_dml_lowering.ir import ALL_LEVELS, FeatureLevel
from onnx_dml_lowering.ir.dtypes import ONNX_NUMERIC_AND_BOOL, onnx_to_numpy
from onnx_dml_lowering.lowering.eyelike import diagonal_offset
from tests.builders import single_node_model
from tests.oracle import assert_same, differential

SHAPES = [(1, 1), (4, 4), (3, 5), (5, 3)]
SIXTY_FOUR_BIT = {T.INT64, T.UINT64, T.DOUBLE}


def ks_for(rows, cols):
    return sorted({0, 1, -1, cols, -rows, cols - 1, -(rows - 1), 2**40, -2**40, 2**31, -2**31 - 1})


def eyelike_model(in_type, shape, k, dtype=None, opset=13):
    attrs = {"k": k}
    out_type = in_type if dtype is None else dtype
    if dtype is not None:
        attrs["dtype"] = dtype
    return single_node_model("EyeLike", in_type, shape, out_type, list(shape), opset=opset, **attrs)


def feed(onnx_type, shape, rng):
    dtype = onnx_to_numpy(onnx_type)
    return (rng.random(shape) < 0.5).astype(dtype)


@pytest.mark.parametrize("out_type", ONNX_NUMERIC_AND_BOOL)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("via", ["input_type", "dtype_attr"])
def test_eyelike_grid(out_type, shape, via, rng):
    for k in ks_for(*shape):
        if via == "input_type":
            model = eyelike_model(out_type, shape, k)
            x = feed(out_type, shape, rng)
        else:
            model = eyelike_model(T.FLOAT, shape, k, dtype=out_type)
            x = feed(T.FLOAT, shape, rng)
        compiled = differential(model, {"x": x}).compiled
        (entry,) = compiled.placement
        assert entry.status == "lowered", entry.reason
        assert entry.dml_operators == ["DIAGONAL_MATRIX"]


def test_default_output_type_is_the_input_type(rng):
    """Peers default EyeLike to float; ONNX says the input's type."""
    y = differential(eyelike_model(T.INT32, (3, 3), 0), {"x": feed(T.INT32, (3, 3), rng)}).outputs["y"]
    assert y.dtype == np.int32


@pytest.mark.parametrize("k", [0, 1, -1, 2, -2])
def test_k_is_honoured_on_square_inputs(k, rng):
    y = differential(eyelike_model(T.FLOAT, (4, 4), k), {"x": feed(T.FLOAT, (4, 4), rng)}).outputs["y"]
    assert_same(y, np.eye(4, 4, k, dtype=np.float32))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)])
def test_empty_eyelike_needs_no_operator(shape, rng):
    compiled = differential(eyelike_model(T.FLOAT, shape, 1), {"x": feed(T.FLOAT, shape, rng)}).compiled
    assert compiled.placement[0].dml_operators == []


def _supported(level: FeatureLevel, out_type: int) -> bool:
    """DIAGONAL_MATRIX's table transcribed from its reference page."""
    eight = {T.FLOAT, T.FLOAT16, T.INT32, T.INT16, T.INT8, T.UINT32, T.UINT16, T.UINT8, T.BOOL}
    if level.name < "2_0":
        return False
    if level.name == "2_0":
        return out_type in (T.FLOAT, T.FLOAT16)
    if level.name < "5_1":
        return out_type in eight
    return True


@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
@pytest.mark.parametrize("out_type", [T.FLOAT, T.FLOAT16, T.INT32, T.UINT8, T.BOOL, T.INT64, T.DOUBLE, T.UINT64])
def test_eyelike_every_level(level, out_type, rng):
    model = eyelike_model(T.FLOAT, (3, 5), 1, dtype=out_type)
    compiled = differential(model, {"x": feed(T.FLOAT, (3, 5), rng)}, level).compiled
    (entry,) = compiled.placement
    assert (entry.status == "lowered") == _supported(level, out_type), entry.reason
    if entry.status == "lowered":
        (view,) = [v for v in compiled.graph.views.values()]
        # Below 4_0 DIAGONAL_MATRIX takes exactly 4 dimensions: {1, 1, rows, cols}.
        assert view.desc.sizes == ((1, 1, 3, 5) if level.name < "4_0" else (3, 5))
    elif out_type in SIXTY_FOUR_BIT and level.name >= "2_0":
        assert "5_1" in entry.reason


@pytest.mark.parametrize("k,rows,cols,expected", [
    (0, 3, 4, 0), (3, 3, 4, 3), (4, 3, 4, -3), (-3, 3, 4, -3), (2**40, 3, 4, -3), (-2**40, 3, 4, -3),
    (2**63 - 1, 2, 2, -2), (-2**63, 2, 2, -2),
    # A tall matrix too high for INT32: a hit far down cannot be expressed, a miss still can.
    (-2_500_000_000, 3_000_000_000, 1, None), (-3_000_000_000, 3_000_000_000, 1, 1),
    (5, 1, 3_000_000_000, 5), (2_900_000_000, 1, 3_000_000_000, None), (3_000_000_000, 1, 3_000_000_000, -1),
])
def test_diagonal_offset_never_wraps(k, rows, cols, expected):
    assert diagonal_offset(k, rows, cols) == expected
