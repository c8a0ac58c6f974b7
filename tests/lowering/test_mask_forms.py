"""Exporter spellings of the band masks found by an exporter-idiom trial: dynamo's `view(n, 1)` of an
index (Reshape with allowzero=1), the sliding window written with two Trilus of one fill
(`o.tril(0) & ~o.tril(-w)`, `ones.tril() - ones.tril(-w)`), and the Abs band `|i - j| <= w`.
Differential against onnx.reference in strict mode over sizes including 0 and 1."""
from __future__ import annotations

from functools import partial

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.lowering.common import run_time_unit_reshape
from onnx_dml_lowering.lowering.match import Decline
from tests.builders import graph_model, tensor
from tests.lowering.tf_band_part import band_part_model
from tests.oracle import differential

make = partial(graph_model, opset=18)
MASK = "range_comparison_mask"
SIZES = (0, 1, 2, 5)


def init(name, value, dtype=np.int64):
    return onnx.numpy_helper.from_array(np.asarray(value, dtype), name)


def entries(compiled, rule):
    return [p for p in compiled.placement if p.rule == rule]


def assert_lowered(result, rule=MASK):
    (entry,) = entries(result.compiled, rule)
    assert entry.status == "lowered", entry.reason
    assert result.compiled.session().log == [], result.compiled.session().log
    return entry


# -- Reshape(allowzero=1) in an index: the same Reshape whenever its shape holds no 0 -------------

def old_hf_causal(shape=(-1, 1), allowzero=1):
    """transformers' old _make_causal_mask as dynamo exports it: `arange < (arange + 1).view(n, 1)`."""
    inits = [init("zero", 0), init("one", 1)]
    inputs = [tensor("n", T.INT64, [])]
    inits.append(init("shape", list(shape)))
    nodes = [h.make_node("Range", ["zero", "n", "one"], ["arange"], name="arange"),
             h.make_node("Add", ["arange", "one"], ["plus"], name="add"),
             h.make_node("Reshape", ["plus", "shape"], ["view"], name="view", allowzero=allowzero),
             h.make_node("Less", ["arange", "view"], ["y"], name="lt")]
    return make(nodes, inputs, [tensor("y", T.BOOL, 2)], inits)


@pytest.mark.parametrize("allowzero", [0, 1])
def test_view_with_allowzero_is_seen_through(allowzero):
    model = old_hf_causal(allowzero=allowzero)
    for n in SIZES:
        entry = assert_lowered(differential(model, {"n": np.array(n, np.int64)}))
        assert set(entry.onnx_nodes) == {"lt", "view", "add", "arange"}
        assert entry.extra["band"] == "x - y in (-inf, 1)"


@pytest.mark.parametrize("allowzero", [False, True])
def test_a_zero_in_a_run_time_shape_declines_with_what_it_means(allowzero):
    """Per call, a concrete shape holding a 0 is never seen through, and the reason says what the 0
    means under the node's allowzero; without a 0 both read alike."""
    assert run_time_unit_reshape((4,), (-1, 1), -1, -2, allowzero) == (4, 1)
    with pytest.raises(Decline) as declined:
        run_time_unit_reshape((0,), (0, 1), -1, -2, allowzero)
    meaning = "is an empty axis (allowzero=1)" if allowzero else "copies an input dimension (allowzero=0)"
    assert declined.value.reason == f"Reshape of [0] to [0, 1]: a 0 {meaning}; left to ONNX"


def test_constant_shape_with_a_zero_is_not_seen_through():
    model = old_hf_causal(shape=(0, 1), allowzero=1)
    result = differential(model, {"n": np.array(0, np.int64)})
    assert all(p.status == "onnx" for p in result.compiled.placement)


def test_band_part_grid_reshaped_with_allowzero():
    """tf2onnx's index grid through a Reshape(allowzero=1): the same rule, one function deciding."""
    model = band_part_model(1, 2, ("r", "c"), opset=18)
    next(n for n in model.graph.node if n.op_type == "Reshape").attribute.append(h.make_attribute("allowzero", 1))
    for rows, cols in ((1, 1), (3, 5), (4, 2)):
        x = np.arange(1, rows * cols + 1, dtype=np.float32).reshape(rows, cols)
        assert_lowered(differential(model, {"x": x}), "index_grid_band_mask")


# -- |i - j| OP w: the band [-w, w] (or its outside) ------------------------------------------------

DTYPES = {T.INT64: np.int64, T.INT32: np.int32, T.FLOAT: np.float32, T.INT16: np.int16}


def abs_band(op="LessOrEqual", w=2, range_type=T.INT64, swap_sub=False, bound_first=False, negate=False,
             cast_to=None, fed_w=False, starts=False):
    """`|i - j| OP w` over Range(0, n) indices (Range(s, n) and Range(s2, n2) with `starts`), the
    difference cast to `cast_to` first when given; `bound_first` writes `w OP' |i - j|`."""
    dtype = DTYPES[range_type]
    inits = [init("zero", 0, dtype), init("one", 1, dtype), init("ax_i", [1]), init("ax_j", [0])]
    diff_type = cast_to or range_type
    inputs = [tensor(name, range_type, []) for name in (("s", "n", "s2", "n2") if starts else ("n",))]
    if fed_w:
        inputs.append(tensor("w", diff_type, []))
    else:
        inits.append(init("w", w, onnx.helper.tensor_dtype_to_np_dtype(diff_type)))
    rows, cols = (("s", "n"), ("s2", "n2")) if starts else (("zero", "n"), ("zero", "n"))
    nodes = [h.make_node("Range", [rows[0], rows[1], "one"], ["ri"], name="arange_i"),
             h.make_node("Range", [cols[0], cols[1], "one"], ["rj"], name="arange_j"),
             h.make_node("Unsqueeze", ["ri", "ax_i"], ["i"], name="unsqueeze_i"),
             h.make_node("Unsqueeze", ["rj", "ax_j"], ["j"], name="unsqueeze_j")]
    a, b = ("j", "i") if swap_sub else ("i", "j")
    if cast_to is not None:
        nodes += [h.make_node("Cast", [a], ["ca"], name="cast_a", to=cast_to),
                  h.make_node("Cast", [b], ["cb"], name="cast_b", to=cast_to)]
        a, b = "ca", "cb"
    nodes += [h.make_node("Sub", [a, b], ["d"], name="sub"), h.make_node("Abs", ["d"], ["ad"], name="abs")]
    flipped = {"Less": "Greater", "LessOrEqual": "GreaterOrEqual", "Greater": "Less", "GreaterOrEqual": "LessOrEqual",
               "Equal": "Equal"}
    nodes.append(h.make_node(flipped[op] if bound_first else op, ["w", "ad"] if bound_first else ["ad", "w"], ["m"],
                             name="cmp"))
    out = "m"
    if negate:
        nodes.append(h.make_node("Not", ["m"], ["outside"], name="not"))
        out = "outside"
    return make(nodes, inputs, [tensor(out, T.BOOL, 2)], inits)


def numpy_abs_band(op, w, rows, cols, negate=False):
    d = np.abs(np.arange(rows)[:, None] - np.arange(cols)[None, :])
    keep = {"Less": d < w, "LessOrEqual": d <= w, "Greater": d > w, "GreaterOrEqual": d >= w}[op]
    return ~keep if negate else keep


@pytest.mark.parametrize("op", ["Less", "LessOrEqual", "Greater", "GreaterOrEqual"])
@pytest.mark.parametrize("range_type,w", [(T.INT64, 2), (T.INT64, 0), (T.INT64, -1), (T.INT32, 3),
                                          (T.FLOAT, 2.5), (T.FLOAT, -0.5), (T.FLOAT, 1.0), (T.INT16, 1)])
def test_abs_band(op, range_type, w):
    """Every comparison, both operand orders, both Sub orders, with and without Not; non-integer and
    negative bounds give the exact integer band (|d| < 2.5 is |d| <= 2, |d| <= -1 is empty)."""
    for swap_sub, bound_first, negate in ((False, False, False), (True, True, True), (False, True, True)):
        model = abs_band(op, w, range_type, swap_sub, bound_first, negate)
        for n in SIZES:
            result = differential(model, {"n": np.array(n, DTYPES[range_type])})
            entry = assert_lowered(result)
            assert {"sub", "abs", "cmp", "unsqueeze_i", "arange_i"} <= set(entry.onnx_nodes)
            out = next(iter(result.outputs.values()))
            assert np.array_equal(out, numpy_abs_band(op, w, n, n, negate))


def test_abs_band_reports_the_band_and_takes_a_fed_bound():
    (entry,) = entries(differential(abs_band(w=2), {"n": np.array(4)}).compiled, MASK)
    assert entry.extra["band"] == "x - y in [-2, 3)"
    (entry,) = entries(differential(abs_band("Less", 2.5, T.FLOAT), {"n": np.float32(4)}).compiled, MASK)
    assert entry.extra["band"] == "x - y in [-2, 3)"
    model = abs_band("Greater", fed_w=True)
    for n, w in ((1, 0), (5, 1), (5, -3), (6, 9)):
        assert_lowered(differential(model, {"n": np.array(n), "w": np.array(w)}))


@pytest.mark.parametrize("cast_to", [T.UINT8, T.UINT16, T.UINT32])
def test_abs_of_an_unsigned_difference_declines_with_the_reason(cast_to):
    model = abs_band(cast_to=cast_to, w=2)
    result = differential(model, {"n": np.array(4)})
    (entry,) = entries(result.compiled, MASK)
    assert entry.status == "onnx" and "Abs abs reads an unsigned difference" in entry.reason, entry.reason


def test_abs_equal_is_two_diagonals_not_this_idiom():
    result = differential(abs_band("Equal", 1), {"n": np.array(4)})
    assert entries(result.compiled, MASK) == []


def test_abs_of_the_type_minimum_declines_per_call():
    """int32 d = -2^31 (rows from -2^31, one column at 0): Sub is exact, Abs wraps to -2^31."""
    model = abs_band(range_type=T.INT32, starts=True)
    low = np.int32(-(2**31))
    result = differential(model, {"s": low, "n": np.int32(low + 2), "s2": np.int32(0), "n2": np.int32(1)})
    (log,) = result.compiled.session().log
    assert "the differences of sub negated by Abs abs" in log and "int32" in log, log
    assert_lowered(differential(model, {"s": np.int32(-3), "n": np.int32(2), "s2": np.int32(0), "n2": np.int32(4)}))


# -- one uniform fill read by several Trilus: the window they make is one band --------------------

def shared_fill_window(fill="ConstantOfShape", combine="and", w=3, fill_output=False):
    """`o.tril(0) & ~o.tril(-w)` (combine "and", bool fill) or `ones.tril() - ones.tril(-w)` ("sub",
    float fill) over one fill of [n, n] both Trilus read; `fill_output` makes the fill an output too."""
    elem, value = (T.BOOL, True) if combine == "and" else (T.FLOAT, 1.0)
    inits = [init("k0", 0), init("kw", -w), init("ax", [0])]
    nodes = [h.make_node("Unsqueeze", ["n", "ax"], ["n1"], name="n1"),
             h.make_node("Concat", ["n1", "n1"], ["shape"], name="shape", axis=0)]
    if fill == "ConstantOfShape":
        nodes.append(h.make_node("ConstantOfShape", ["shape"], ["ones"], name="fill",
                                 value=h.make_tensor("v", elem, [1], [value])))
    else:
        inits.append(onnx.numpy_helper.from_array(np.array(value, onnx.helper.tensor_dtype_to_np_dtype(elem)), "one"))
        nodes.append(h.make_node("Expand", ["one", "shape"], ["ones"], name="fill"))
    nodes += [h.make_node("Trilu", ["ones", "k0"], ["lower"], name="tril", upper=0),
              h.make_node("Trilu", ["ones", "kw"], ["far"], name="tril_w", upper=0)]
    if combine == "and":
        nodes += [h.make_node("Not", ["far"], ["near"], name="not"), h.make_node("And", ["lower", "near"], ["y"], name="and")]
    else:
        nodes.append(h.make_node("Sub", ["lower", "far"], ["y"], name="sub"))
    outputs = [tensor("y", elem, 2)] + ([tensor("ones", elem, 2)] if fill_output else [])
    return make(nodes, [tensor("n", T.INT64, [])], outputs, inits)


@pytest.mark.parametrize("fill", ["ConstantOfShape", "Expand"])
@pytest.mark.parametrize("combine", ["and", "sub"])
@pytest.mark.parametrize("fill_output", [False, True])
def test_the_window_of_a_shared_fill_is_one_band(fill, combine, fill_output):
    # trilu_band (tests/lowering/test_trilu_band.py); the fill is covered unless something else reads it.
    model = shared_fill_window(fill, combine, fill_output=fill_output)
    for n in SIZES:
        result = differential(model, {"n": np.array(n, np.int64)})
        entry = assert_lowered(result, "trilu_band")
        assert {"tril", "tril_w", combine} <= set(entry.onnx_nodes) and ("fill" in entry.onnx_nodes) != fill_output
        assert "x - y in [-2, 1)" in entry.note
