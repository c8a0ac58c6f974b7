"""trilu_band: the sliding window torch writes as two Trilus of one shared fill
(`o.tril(0) & ~o.tril(-w)`, `ones.tril() - ones.tril(-w)`) is one band. Differential against
onnx.reference in strict mode, and onnxruntime (the original model on its CPU provider, the
lowered one on the ort backend), over sizes 0, 1, 2, 5, square and rectangular fills, k pairs,
bool / float / int64 fills, the And / Or / Not and Sub spellings, constant and fed ks."""
from __future__ import annotations

from functools import partial

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from tests.builders import graph_model, tensor
from tests.oracle import assert_outputs_same, differential, reference

make = partial(graph_model, opset=18)
RULE = "trilu_band"
SIZES = [(0, 0), (1, 1), (2, 2), (5, 5), (2, 5), (5, 2), (0, 3)]
K_PAIRS = [(0, -1), (0, -3), (2, -2), (-1, -1)]
NUMPY = {T.BOOL: np.bool_, T.FLOAT: np.float32, T.INT64: np.int64}


def init(name, value, dtype=np.int64):
    return onnx.numpy_helper.from_array(np.asarray(value, dtype), name)


def window_model(spelling, k1, k2, elem=T.BOOL, value=None, fill="ConstantOfShape", fed=False, fill_output=False):
    """The two Trilus `far` (k2) and `near` (k1) of one [n, m] fill of `value`, joined by `spelling`:
    and: tril(k1) & ~tril(k2); or: ~(~tril(k1) | tril(k2)); notand: Cast(~(tril(k1) & ~tril(k2)), bool),
    TorchScript's; upper: tril(k1) & triu(k2); sub: tril(k1) - tril(k2); fill_sub: fill - tril(k2)."""
    value = (True if elem == T.BOOL else 1) if value is None else value
    inits = [init("ax", [0])] + ([] if fed else [init("k1", k1), init("k2", k2)])
    nodes = [h.make_node("Unsqueeze", ["n", "ax"], ["n1"], name="n1"),
             h.make_node("Unsqueeze", ["m", "ax"], ["m1"], name="m1"),
             h.make_node("Concat", ["n1", "m1"], ["shape"], name="shape", axis=0)]
    if fill == "ConstantOfShape":
        nodes.append(h.make_node("ConstantOfShape", ["shape"], ["ones"], name="fill",
                                 value=h.make_tensor("v", elem, [1], [value])))
    else:
        inits.append(init("one", value, NUMPY[elem]))
        nodes.append(h.make_node("Expand", ["one", "shape"], ["ones"], name="fill"))
    nodes += [h.make_node("Trilu", ["ones", "k1"], ["near"], name="tril", upper=0),
              h.make_node("Trilu", ["ones", "k2"], ["far"], name="tril_w", upper=int(spelling == "upper"))]
    nodes += {
        "and": [h.make_node("Not", ["far"], ["nf"], name="not"), h.make_node("And", ["near", "nf"], ["y"], name="and")],
        "upper": [h.make_node("And", ["near", "far"], ["y"], name="and")],
        "or": [h.make_node("Not", ["near"], ["nn"], name="not"), h.make_node("Or", ["nn", "far"], ["o"], name="or"),
               h.make_node("Not", ["o"], ["y"], name="not_1")],
        "notand": [h.make_node("Not", ["far"], ["nf"], name="not"), h.make_node("And", ["near", "nf"], ["a"], name="and"),
                   h.make_node("Not", ["a"], ["na"], name="not_1"), h.make_node("Cast", ["na"], ["y"], name="cast", to=T.BOOL)],
        "sub": [h.make_node("Sub", ["near", "far"], ["y"], name="sub")],
        "fill_sub": [h.make_node("Sub", ["ones", "far"], ["y"], name="sub"),
                     h.make_node("Identity", ["near"], ["z"], name="keep")],
    }[spelling]
    inputs = [tensor(n, T.INT64, []) for n in ("n", "m")] + ([tensor("k1", T.INT64, []), tensor("k2", T.INT64, [])]
                                                             if fed else [])
    outputs = [tensor("y", elem, 2)] + ([tensor("z", elem, 2)] if spelling == "fill_sub" else []) + \
        ([tensor("ones", elem, 2)] if fill_output else [])
    return make(nodes, inputs, outputs, inits)


def feeds_for(n, m, k1, k2, fed):
    feeds = {"n": np.array(n, np.int64), "m": np.array(m, np.int64)}
    if fed:
        feeds.update(k1=np.array(k1, np.int64), k2=np.array(k2, np.int64))
    return feeds


def on_onnxruntime(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def assert_band(model, k1, k2, fed, sizes=SIZES):
    """Lowered as one trilu_band match, equal to onnx.reference and onnxruntime at every size (the
    original model on onnxruntime CPU, the lowered one on the ort backend); returns the placement entry."""
    compiled = compile_model(model, feature_level="5_1")
    (entry,) = [p for p in compiled.placement if p.rule == RULE]
    assert entry.status == "lowered", entry.reason
    for n, m in sizes:
        feeds = feeds_for(n, m, k1, k2, fed)
        differential(model, feeds, compiled=compiled)
        expected = reference(model, feeds)
        assert_outputs_same(on_onnxruntime(model, feeds), expected)
        assert_outputs_same(compiled.run(feeds, backend="ort"), expected)
    assert compiled.session().log == [], compiled.session().log
    return entry


@pytest.mark.parametrize("k1, k2", K_PAIRS)
@pytest.mark.parametrize("fed", [False, True])
@pytest.mark.parametrize("spelling, elem, fill", [
    ("and", T.BOOL, "ConstantOfShape"), ("and", T.BOOL, "Expand"), ("or", T.BOOL, "ConstantOfShape"),
    ("notand", T.BOOL, "Expand"), ("upper", T.BOOL, "ConstantOfShape"),
    ("sub", T.FLOAT, "ConstantOfShape"), ("sub", T.INT64, "Expand"), ("sub", T.FLOAT, "Expand"),
])
def test_window_of_two_trilus_is_one_band(spelling, elem, fill, k1, k2, fed):
    if spelling == "upper":
        k1, k2 = k1 + 1, k2                     # tril(k1) & triu(k2): a band where k2 <= k1 + 1
    entry = assert_band(window_model(spelling, k1, k2, elem, fill=fill, fed=fed), k1, k2, fed)
    assert set(entry.onnx_nodes) >= {"tril", "tril_w", "fill"}


@pytest.mark.parametrize("spelling, k1, k2, band", [
    ("and", 0, -3, "x - y in [-2, 1)"), ("notand", 0, -3, "x - y outside [-2, 1)"),
    ("sub", 0, -3, "x - y in [-2, 1)"), ("upper", 0, -2, "x - y in [-2, 1)"),
    ("and", -1, -1, "no diagonal (all false)"),
])
def test_the_report_names_the_band(spelling, k1, k2, band):
    elem = T.FLOAT if spelling == "sub" else T.BOOL
    entry = assert_band(window_model(spelling, k1, k2, elem), k1, k2, False, [(4, 4)])
    assert band in entry.note, entry.note


@pytest.mark.parametrize("value, elem", [(5.0, T.FLOAT), (-0.0, T.FLOAT), (7, T.INT64), (False, T.BOOL)])
def test_a_non_unit_fill_holds_its_value_where_the_band_formula_is_exact(value, elem):
    # v * tril(k1) - v * tril(k2) is v on the band and +0 elsewhere for any finite v; a false fill keeps nothing.
    spelling = "and" if elem == T.BOOL else "sub"
    # a -0.0 Value on the ort backend too: its DIAGONAL_MATRIX1 stand-in gave +0.0 while its Not + Where
    # ran under onnxruntime's graph optimizations (now as written: runtime.ort.settings.as_written)
    assert_band(window_model(spelling, 0, -2, elem, value=value), 0, -2, False)


def test_the_fill_itself_and_a_fill_read_elsewhere():
    # ones - ones.tril(k2) (the fill is a leaf); a fill that is also an output stays, read for its shape only.
    entry = assert_band(window_model("fill_sub", 0, -2, T.FLOAT), 0, -2, False)
    assert "fill" not in entry.onnx_nodes and "x - y in [-1, +inf)" in entry.note
    entry = assert_band(window_model("and", 0, -2, fill_output=True), 0, -2, False)
    assert "fill" not in entry.onnx_nodes and {"tril", "tril_w", "and", "not"} == set(entry.onnx_nodes)


def test_a_sub_of_uncontained_triangles_declines_with_the_reason():
    # tril(-1) - tril(0): -1 on the main diagonal, no mask. Constant ks: declined at compile time (the
    # Sub says why, each Trilu is generated on its own); fed ks: per call, where the sizes make it -1.
    model = window_model("sub", -1, 0, T.FLOAT)
    compiled = differential(model, feeds_for(3, 3, -1, 0, False)).compiled
    (sub,) = [p for p in compiled.placement if "sub" in p.onnx_nodes]
    assert sub.status == "onnx" and sub.rule == RULE
    assert "Sub sub subtracts x - y in (-inf, 1) from x - y in (-inf, 0), which does not contain it" in sub.reason
    assert sorted(p.onnx_nodes for p in compiled.placement if p.rule == "trilu_constant_fill") == [["tril"], ["tril_w"]]
    fed = window_model("sub", -1, 0, T.FLOAT, fed=True)
    compiled = compile_model(fed, feature_level="5_1")
    for n in (0, 2, 5):
        differential(fed, feeds_for(n, n, -1, 0, True), compiled=compiled)
    differential(fed, feeds_for(4, 4, 0, -1, True), compiled=compiled)       # contained: lowered
    log = compiled.session().log
    assert len(log) == 2 and all("Sub sub subtracts" in str(entry) and "no 0/1 mask" in str(entry) for entry in log), log


def test_a_non_finite_sub_fill_declines_with_the_reason():
    model = window_model("sub", 0, -2, T.FLOAT, value=float("inf"))
    compiled = differential(model, feeds_for(3, 3, 0, -2, False)).compiled
    (sub,) = [p for p in compiled.placement if "sub" in p.onnx_nodes]
    assert sub.status == "onnx" and "inf - inf is NaN where the Sub's triangles overlap" in sub.reason


def test_below_5_1_the_window_stays_with_the_reason():
    model = window_model("and", 0, -3)
    compiled = differential(model, feeds_for(3, 3, 0, -3, False), level="5_0").compiled
    assert all(p.status == "onnx" for p in compiled.placement if p.rule == RULE)
    assert any("DIAGONAL_MATRIX1" in (p.reason or "") for p in compiled.placement if p.rule == RULE)


def test_a_trilu_read_elsewhere_is_left_to_its_own_rule():
    # The anchor Trilu's output is also an output: no band above it; each Trilu is its own generator.
    model = window_model("fill_sub", 0, -2, T.FLOAT)
    compiled = differential(model, feeds_for(3, 3, 0, -2, False)).compiled
    assert [p.onnx_nodes for p in compiled.placement if p.rule == "trilu_constant_fill"] == [["tril"]]
