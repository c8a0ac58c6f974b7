"""Fills new producers write (issue 35): paddle2onnx's causal mask, an Identity between Expand(1.0)
and Trilu (producer_through looks through it), and bfloat16 Trilu / EyeLike, pure copies and
generators carried as their 16 bits (bit-exact: NaN payloads, -0.0); bfloat16 NonZero stays on
ONNX. Differential against onnx.reference at several sizes, strict."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from tests.builders import graph_model, tensor
from tests.lowering.producers import const, entries, lowered, make
from tests.oracle import differential


# -- 5. paddle2onnx's causal mask: Expand(1.0) -> Identity -> Trilu -------------------------------------

@pytest.mark.parametrize("identities", [1, 2])
@pytest.mark.parametrize("upper", [0, 1])
def test_paddle_trilu_through_identity(identities, upper):
    nodes = [const("ones", np.ones((1, 1), np.float32), T.FLOAT),
             h.make_node("Expand", ["ones", "shape"], ["filled0"], name="expand")]
    for i in range(identities):
        nodes.append(h.make_node("Identity", [f"filled{i}"], [f"filled{i + 1}"], name=f"identity{i}"))
    nodes.append(h.make_node("Trilu", [f"filled{identities}", "k"], ["y"], name="trilu", upper=upper))
    model = make(nodes, [tensor("shape", T.INT64, [2]), tensor("k", T.INT64, [])], [tensor("y", T.FLOAT, 2)])
    for (rows, cols), k in (((1, 1), 0), ((4, 4), 0), ((3, 6), 1), ((7, 2), -2), ((5, 5), 9)):
        result = differential(model, {"shape": np.array([rows, cols]), "k": np.array(k)})
        entry = lowered(result, "trilu_constant_fill", {"trilu", "expand", "identity0"})
        assert entry.dml_operators == ["DIAGONAL_MATRIX1"]


def test_an_identity_read_elsewhere_keeps_the_fill():
    nodes = [const("ones", np.ones((1, 1), np.float32), T.FLOAT),
             h.make_node("Expand", ["ones", "shape"], ["filled"], name="expand"),
             h.make_node("Identity", ["filled"], ["same"], name="identity"),
             h.make_node("Trilu", ["same"], ["y"], name="trilu", upper=0)]
    model = make(nodes, [tensor("shape", T.INT64, [2])], [tensor("y", T.FLOAT, 2), tensor("same", T.FLOAT, 2)])
    result = differential(model, {"shape": np.array([3, 4])})
    assert entries(result, "trilu_constant_fill") == [] and entries(result, "trilu")[0].status == "lowered"


# -- 6. bfloat16 Trilu and EyeLike through a 16-bit view ----------------------------------------------

def bfloat16_values(shape, rng):
    """Every kind of bfloat16 bit pattern: signed zeros, NaN payloads, infinities, subnormals, randoms."""
    bits = rng.integers(0, 2**16, size=shape, dtype=np.uint16)
    flat = bits.reshape(-1)
    special = np.array([0x8000, 0x0000, 0x7FC1, 0xFFA5, 0x7F80, 0xFF80, 0x0001, 0x3F80], np.uint16)
    flat[:min(flat.size, special.size)] = special[:flat.size]
    return bits.view(ml_dtypes.bfloat16)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("shape,k", [((1, 1), 0), ((4, 5), 0), ((5, 3), -1), ((2, 3, 6), 2), ((3, 3), 9)])
def test_bfloat16_trilu_is_a_bit_exact_copy(shape, k, upper):
    node = h.make_node("Trilu", ["x", "k"], ["y"], name="trilu", upper=upper)
    model = make([node], [tensor("x", T.BFLOAT16, shape), tensor("k", T.INT64, [])], [tensor("y", T.BFLOAT16, shape)])
    result = differential(model, {"x": bfloat16_values(shape, np.random.default_rng(k + 10)), "k": np.array(k)})
    lowered(result, "trilu")


@pytest.mark.parametrize("level,expected", [("5_1", "lowered"), ("2_0", "onnx")])
@pytest.mark.parametrize("shape,k", [((1, 1), 0), ((4, 4), 0), ((3, 7), 2), ((6, 2), -3)])
def test_bfloat16_eyelike(shape, k, level, expected):
    """EyeLike-22 takes bfloat16. A bfloat16 1.0 is the UINT16 16256, which DIAGONAL_MATRIX's FLOAT Value holds exactly; 2_0's
    table has no UINT16 (only FLOAT32 / FLOAT16), so there it stays on ONNX with that reason."""
    node = h.make_node("EyeLike", ["x"], ["y"], name="eye", k=k)
    model = graph_model([node], [tensor("x", T.BFLOAT16, shape)], [tensor("y", T.BFLOAT16, shape)], opset=22)
    result = differential(model, {"x": bfloat16_values(shape, np.random.default_rng(1))}, level)
    (entry,) = entries(result, "eyelike")
    assert entry.status == expected, entry.reason
    if expected == "onnx":
        assert "bfloat16" in entry.reason


def test_bfloat16_nonzero_stays_on_onnx():
    """-0.0 is zero for NonZero, but not as 16 bits: no 16-bit view for what reads values."""
    node = h.make_node("NonZero", ["x"], ["y"], name="nz")
    model = make([node], [tensor("x", T.BFLOAT16, [2, 3])], [tensor("y", T.INT64, 2)])
    x = np.array([[-0.0, 1, 0], [0, -0.0, 2]], np.float32).astype(ml_dtypes.bfloat16)
    result = differential(model, {"x": x})
    (entry,) = result.compiled.placement
    assert entry.status == "onnx" and "bfloat16" in entry.reason
