"""Range-comparison attention masks (range_comparison_mask) and general Trilu(x, k) (trilu), both on
DIAGONAL_MATRIX1: tables of records, differential against onnx.reference in strict mode."""
from functools import partial
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir import ALL_LEVELS
from onnx_dml_lowering.ir.dtypes import ONNX_NUMERIC_AND_BOOL, from_onnx
from onnx_dml_lowering.ir.support import DIAGONAL_MATRIX, DIAGONAL_MATRIX1
from tests.builders import graph_model, tensor
from onnx_dml_lowering.compiler import compile_model
from tests.oracle import assert_outputs_same, differential, reference

make = partial(graph_model, opset=18)
RULE = "range_comparison_mask"


def const(name, value, dtype=np.int64):
    return h.make_node("Constant", [], [name], name=f"c_{name}",
                       value=h.make_tensor(name, {np.int64: T.INT64, np.float32: T.FLOAT, np.int32: T.INT32}[dtype],
                                           np.shape(value), np.asarray(value, dtype).reshape(-1).tolist()))


class Mask(NamedTuple):
    """One comparison mask model: `kv OP q + shift` (or with the operands swapped), causal-style."""
    op: str = "LessOrEqual"
    offset: str = "none"            # none | constant | run-time (a `past` length added to the query index and
                                    # the key length) | shift (`past` added to the query index only)
    window: int = 0                 # And with kv > q - window when > 0
    cast: "int | None" = None       # Cast(to=...) of the mask
    swap: bool = False              # q OP kv instead of kv OP q
    expand: bool = False            # Expand over a run-time batch shape
    range_type: int = T.INT64


def mask_model(m: Mask):
    dtype = {T.INT64: np.int64, T.INT32: np.int32, T.FLOAT: np.float32}[m.range_type]
    nodes = [const("zero", 0, dtype), const("one", 1, dtype), const("ax_row", [-1]), const("ax_col", [0])]
    inputs = [tensor("n", m.range_type, [])]
    nodes.append(h.make_node("Range", ["zero", "n", "one"], ["q0"], name="range_q"))
    q = "q0"
    total = "n"
    if m.offset == "constant":
        nodes += [const("shift", 2, dtype), h.make_node("Add", ["q0", "shift"], ["q"], name="add_shift")]
        q = "q"
        nodes += [h.make_node("Add", ["n", "shift"], ["total"], name="total")]
        total = "total"
    elif m.offset == "shift":
        inputs.append(tensor("past", m.range_type, []))
        nodes += [h.make_node("Add", ["past", "q0"], ["q"], name="add_past")]
        q = "q"
    elif m.offset == "run-time":
        inputs.append(tensor("past", m.range_type, []))
        nodes += [h.make_node("Add", ["past", "q0"], ["q"], name="add_past"),
                  h.make_node("Add", ["n", "past"], ["total"], name="total")]
        q, total = "q", "total"
    nodes += [h.make_node("Range", ["zero", total, "one"], ["kv0"], name="range_kv"),
              h.make_node("Unsqueeze", [q, "ax_row"], ["q_idx"], name="unsqueeze_q"),
              h.make_node("Unsqueeze", ["kv0", "ax_col"], ["kv_idx"], name="unsqueeze_kv")]
    operands = ["q_idx", "kv_idx"] if m.swap else ["kv_idx", "q_idx"]
    nodes.append(h.make_node(m.op, operands, ["cmp"], name="cmp"))
    y = "cmp"
    if m.window:
        nodes += [const("w", m.window, dtype), h.make_node("Sub", ["q_idx", "w"], ["low"], name="sub_w"),
                  h.make_node("Greater", ["kv_idx", "low"], ["inside"], name="gt_w"),
                  h.make_node("And", ["cmp", "inside"], ["window"], name="and_w")]
        y = "window"
    out_type = T.BOOL
    if m.cast is not None:
        nodes.append(h.make_node("Cast", [y], ["cast"], name="cast", to=m.cast))
        y, out_type = "cast", m.cast
    rank = 2
    if m.expand:
        inputs.append(tensor("batch", T.INT64, [4]))
        nodes.append(h.make_node("Expand", [y, "batch"], ["expanded"], name="expand"))
        y, rank = "expanded", 4
    nodes.append(h.make_node("Identity", [y], ["y"], name="out"))
    return make(nodes, inputs, [tensor("y", out_type, rank)])


def feeds_for(m: Mask, n: int, past: int = 3):
    dtype = {T.INT64: np.int64, T.INT32: np.int32, T.FLOAT: np.float32}[m.range_type]
    feeds = {"n": np.array(n, dtype)}
    if m.offset in ("run-time", "shift"):
        feeds["past"] = np.array(past, dtype)
    if m.expand:
        feeds["batch"] = np.array([2, 3, 1, 1], np.int64)
    return feeds


def placed(compiled, rule=RULE):
    return [p for p in compiled.placement if p.rule == rule]


def assert_lowered(result, rule=RULE):
    (entry,) = placed(result.compiled, rule)
    assert entry.status == "lowered", entry.reason
    if rule == RULE:
        assert "not sent from the host" in entry.note and "band" in entry.extra
    log = result.compiled.session().log
    assert log == [], log                   # no run-time specialisation fell back to ONNX


COMPARISONS = ["Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"]
RECORDS = [Mask(op, offset, window, cast, swap)
           for op in COMPARISONS for offset in ("none", "constant", "run-time")
           for window, cast, swap in ((0, None, False), (4, T.FLOAT, False), (0, T.INT32, True), (2, None, True))]


@pytest.mark.parametrize("m", RECORDS, ids=lambda m: f"{m.op}-{m.offset}-w{m.window}-c{m.cast}-s{int(m.swap)}")
def test_mask_at_5_1(m):
    model = mask_model(m)
    for n, past in ((1, 0), (5, 3), (9, 0), (3, 11)):
        assert_lowered(differential(model, feeds_for(m, n, past)))


@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
@pytest.mark.parametrize("m", [Mask(), Mask("Equal", "run-time"), Mask("Equal", "constant", cast=T.FLOAT),
                               Mask("Less", window=3, cast=T.FLOAT)], ids=lambda m: f"{m.op}-{m.offset}-w{m.window}")
def test_mask_at_every_level(level, m):
    """A band needs DIAGONAL_MATRIX1 (5_1); an Equal is one diagonal: DIAGONAL_MATRIX where the level's
    table takes the type. The answer is the ONNX one everywhere."""
    model = mask_model(m)
    result = differential(model, feeds_for(m, 6), level)
    entries = placed(result.compiled)
    has_band = DIAGONAL_MATRIX1.row(level) is not None
    if m.op != "Equal":
        if has_band:
            (entry,) = entries
            assert entry.status == "lowered"
        else:                                     # each comparison of a window declines as an anchor
            why = ("DIAGONAL_MATRIX1 (feature level 5_1" if DIAGONAL_MATRIX.row(level) is not None
                   else "nor is DIAGONAL_MATRIX1 (introduced in 5_1)")      # below 2_0 neither exists
            assert entries and all(e.status == "onnx" and why in e.reason for e in entries)
    else:
        # One diagonal: DIAGONAL_MATRIX where the level's table takes the mask's type, decided at
        # match time (never reported lowered while every run-time build falls back).
        plain = DIAGONAL_MATRIX.row(level)
        fits = plain is not None and from_onnx(m.cast or T.BOOL) in plain.tensors["OutputTensor"].types
        (entry,) = entries
        assert entry.status == ("lowered" if fits else "onnx"), entry
        if fits:
            assert entry.dml_operators == ["DIAGONAL_MATRIX"]
            assert not any("left to ONNX" in e for e in result.compiled.session("cpu").log)
        else:
            assert "DIAGONAL_MATRIX" in entry.reason


def test_mask_expanded_over_batch_and_float_ranges():
    for m in (Mask(expand=True, cast=T.FLOAT), Mask("Greater", "constant", range_type=T.FLOAT),
              Mask("LessOrEqual", "run-time", window=2, range_type=T.INT32)):
        assert_lowered(differential(mask_model(m), feeds_for(m, 5)))


@pytest.mark.parametrize("past", [-100, -6, 0, 6, 100, 2**40])
def test_run_time_offsets_that_empty_or_fill_the_band(past):
    """An offset that pushes the band off the matrix (all false) or over it (all true) is exact."""
    for m in (Mask("Less", "shift"), Mask("GreaterOrEqual", "shift", window=3, cast=T.FLOAT), Mask("Equal", "shift")):
        assert_lowered(differential(mask_model(m), feeds_for(m, 4, past)))


def test_static_mask_reports_band_and_bytes():
    m = Mask("Less", "constant", window=3, cast=T.FLOAT)
    model = mask_model(m)
    # Make the sequence length a constant: the band and its bytes are known at compile time.
    model.graph.input.pop(0)
    model.graph.node.insert(0, const("n", 5))
    result = differential(model, {})
    (entry,) = placed(result.compiled)
    # kv < q + 2 and kv > q + 2 - 3: x - y in [0, 2), float: 4 bytes per element (ONNX infers no sizes
    # for a Range, so the total is per call).
    assert entry.extra == {"band": "x - y in [0, 2)", "mask_bytes_per_element": 4}
    assert entry.dml_operators == ["DIAGONAL_MATRIX1"] and entry.status == "lowered"
    assert "x - y in [0, 2)" in entry.note and "not sent from the host" in entry.note
    assert result.compiled.session().log == []


def band_expression(op_nodes, out):
    """kv / q indices of length n and a boolean expression over comparisons of them."""
    used = {i for n in op_nodes for i in n.input}
    nodes = [const("zero", 0), const("one", 1), const("ax_row", [-1]), const("ax_col", [0]),
             const("two", 2), const("three", 3),
             h.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
             h.make_node("Unsqueeze", ["r", "ax_row"], ["q"], name="uq"),
             h.make_node("Unsqueeze", ["r", "ax_col"], ["kv"], name="ukv"),
             h.make_node("Sub", ["q", "two"], ["q_m2"], name="q_m2"),
             h.make_node("Add", ["q", "three"], ["q_p3"], name="q_p3")]
    nodes = [n for n in nodes if n.op_type not in ("Sub", "Add") or n.output[0] in used] + op_nodes
    return make(nodes, [tensor("n", T.INT64, [])], [tensor(out, T.BOOL, 2)])


@pytest.mark.parametrize("name,op_nodes,out,lowered", [
    ("or-outside-band", [h.make_node("Less", ["kv", "q_m2"], ["a"], name="a"),
                         h.make_node("Greater", ["kv", "q_p3"], ["b"], name="b"),
                         h.make_node("Or", ["a", "b"], ["y"], name="or")], "y", True),
    ("not-window", [h.make_node("GreaterOrEqual", ["kv", "q_m2"], ["a"], name="a"),
                    h.make_node("LessOrEqual", ["kv", "q"], ["b"], name="b"),
                    h.make_node("And", ["a", "b"], ["w"], name="and"),
                    h.make_node("Not", ["w"], ["y"], name="not")], "y", True),
    ("or-of-two-pieces", [h.make_node("Less", ["kv", "q_m2"], ["a"], name="a"),
                          h.make_node("Equal", ["kv", "q"], ["b"], name="b"),
                          h.make_node("Or", ["a", "b"], ["y"], name="or")], "y", False),
])
def test_not_and_or(name, op_nodes, out, lowered):
    """Not / Or are matched; where the diagonals they leave are no band, the specialisation declines."""
    model = band_expression(op_nodes, out)
    for n in (1, 3, 8):
        result = differential(model, {"n": np.array(n, np.int64)})
        (entry,) = placed(result.compiled)
        log = result.compiled.session().log
        if lowered or n <= 3:                  # up to 3 x 3, x - y < -2 is empty: one piece
            assert log == [], log
        else:
            assert len(log) == 1 and "no band of diagonals" in log[0]


# -- near misses: not this idiom, the answer still the ONNX one ------------------------------------

def near_miss(kind):
    nodes = [const("zero", 0), const("one", 1), const("two", 2), const("ax_row", [-1]), const("ax_col", [0]),
             const("vec", [0, 1, 2, 3, 4])]
    nodes.append(h.make_node("Range", ["zero", "n", "two" if kind == "step-2" else "one"], ["r"], name="range"))
    col_axes = "ax_row" if kind == "two-rows" else "ax_col"
    nodes += [h.make_node("Unsqueeze", ["r", "ax_row"], ["q"], name="uq"),
              h.make_node("Unsqueeze", ["r", col_axes], ["kv"], name="ukv")]
    if kind == "vector-offset":
        nodes += [h.make_node("Add", ["kv", "vec"], ["kv_off"], name="add_vec")]
        nodes.append(h.make_node("LessOrEqual", ["kv_off", "q"], ["y"], name="cmp"))
    else:
        nodes.append(h.make_node("LessOrEqual", ["kv", "q"], ["y"], name="cmp"))
    return make(nodes, [tensor("n", T.INT64, [])], [tensor("y", T.BOOL, 2)])


@pytest.mark.parametrize("kind", ["step-2", "two-rows", "vector-offset"])
def test_near_misses_do_not_match(kind):
    model = near_miss(kind)
    result = differential(model, {"n": np.array(5, np.int64)})
    assert placed(result.compiled) == []


@pytest.mark.parametrize("past", [2**62 + 5, 2**63 - 10])
def test_int64_index_values_past_2_62_are_exact(past):
    """int64 holds every integer up to 2^63 - 1 (lowering.common.EXACT_INTEGER_LIMIT): an index that
    large is still an exact band (the mask rule's own table stopped at 2^62 before the tables merged)."""
    m = Mask("LessOrEqual", "shift")
    for n in (1, 4):
        assert_lowered(differential(mask_model(m), feeds_for(m, n, past)))


@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
def test_eye_form_is_eye_from_ranges_at_every_level(level):
    """A plain Equal of two Ranges from 0 is torch.eye: its own rule, not the mask family. Precedence
    by priority alone: eye_from_ranges (10) takes the Equal before the mask rule (5); where it
    declines, the mask rule declines too and the placement gives the eye's reason."""
    nodes = [const("zero", 0), const("one", 1), const("ax", [-1]),
             h.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
             h.make_node("Unsqueeze", ["r", "ax"], ["u"], name="unsqueeze"),
             h.make_node("Equal", ["u", "r"], ["eq"], name="equal"),
             h.make_node("Cast", ["eq"], ["y"], name="cast", to=T.FLOAT)]
    model = make(nodes, [tensor("n", T.INT64, [])], [tensor("y", T.FLOAT, 2)])
    result = differential(model, {"n": np.array(4, np.int64)}, level=level)
    (entry,) = result.compiled.placement
    assert entry.rule == "eye_from_ranges" and "equal" in entry.onnx_nodes, entry
    assert (entry.status == "lowered") == (DIAGONAL_MATRIX.row(level) is not None), entry


def test_a_declined_eye_goes_to_the_next_rule_by_priority():
    """Equal -> Identity -> Cast(float) at 2_0: eye_from_ranges takes the Equal alone, a bool eye, which
    DIAGONAL_MATRIX lacks at 2_0, and declines; the mask rule, next by priority, covers the Cast too and
    generates the float eye (it used to step aside for any Equal the eye's pattern matched)."""
    nodes = [const("zero", 0), const("one", 1), const("ax", [-1]),
             h.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
             h.make_node("Unsqueeze", ["r", "ax"], ["u"], name="unsqueeze"),
             h.make_node("Equal", ["u", "r"], ["eq"], name="equal"),
             h.make_node("Identity", ["eq"], ["i"], name="ident"),
             h.make_node("Cast", ["i"], ["y"], name="cast", to=T.FLOAT)]
    model = make(nodes, [tensor("n", T.INT64, [])], [tensor("y", T.FLOAT, 2)])
    for level, rule, covered in (("2_0", RULE, {"equal", "ident", "cast", "unsqueeze", "range"}),
                                 ("5_1", "eye_from_ranges", {"equal", "unsqueeze", "range"})):
        for n in (1, 4):
            result = differential(model, {"n": np.array(n, np.int64)}, level=level)
            (entry,) = result.compiled.placement
            assert (entry.rule, entry.status, set(entry.onnx_nodes)) == (rule, "lowered", covered), entry


def two_eyes(range_type):
    """The dynamo exporter's eye(n) + 1, eye(n, m) - a: both eyes read one Range(0, n) through one
    shared Unsqueeze, so neither owns its index nodes (eye_from_ranges's pattern does not apply)."""
    dtype = {T.INT64: np.int64, T.INT32: np.int32, T.FLOAT: np.float32}[range_type]
    nodes = [const("zero", 0, dtype), const("one", 1, dtype), const("ax", [-1]),
             h.make_node("Range", ["zero", "n", "one"], ["rows"], name="range_n"),
             h.make_node("Unsqueeze", ["rows", "ax"], ["u"], name="unsqueeze"),
             h.make_node("Equal", ["u", "rows"], ["eq"], name="eq"),
             h.make_node("Cast", ["eq"], ["y"], name="cast", to=T.FLOAT),
             h.make_node("Range", ["zero", "m", "one"], ["cols"], name="range_m"),
             h.make_node("Equal", ["u", "cols"], ["eq_nm"], name="eq_nm"),
             h.make_node("Cast", ["eq_nm"], ["z"], name="cast_nm", to=T.INT32)]
    return make(nodes, [tensor("n", range_type, []), tensor("m", range_type, [])],
                [tensor("y", T.FLOAT, 2), tensor("z", T.INT32, 2)])


@pytest.mark.parametrize("range_type", [T.INT64, T.INT32, T.FLOAT])
def test_eyes_sharing_their_index_nodes_are_both_lowered(range_type):
    """Each eye is one DIAGONAL_MATRIX; the shared Range and Unsqueeze stay ONNX and their value is read."""
    model = two_eyes(range_type)
    dtype = {T.INT64: np.int64, T.INT32: np.int32, T.FLOAT: np.float32}[range_type]
    for n, m in ((1, 1), (3, 5), (6, 2), (0, 4), (4, 0)):
        result = differential(model, {"n": np.array(n, dtype), "m": np.array(m, dtype)})
        lowered = [p for p in result.compiled.placement if p.status == "lowered"]
        assert sorted(p.onnx_nodes[0] for p in lowered) == ["eq", "eq_nm"], lowered
        assert all(p.rule == RULE and p.dml_operators == ["DIAGONAL_MATRIX"] for p in lowered), lowered
        assert not any({"range_n", "unsqueeze"} & set(p.onnx_nodes) for p in lowered)
        assert result.compiled.session().log == []


# -- general Trilu on DIAGONAL_MATRIX1 with its InputTensor ----------------------------------------

def trilu_model(elem, rank, upper, k=None, k_input=False):
    inputs = [tensor("x", elem, rank)]
    names, inits = ["x"], {}
    if k is not None:
        names.append("k")
        if k_input:
            inputs.append(tensor("k", T.INT64, []))
        else:
            inits["k"] = np.array(k, np.int64)
    node = h.make_node("Trilu", names, ["y"], name="trilu", upper=upper)
    return make([node], inputs, [tensor("y", elem, rank)], inits)


def sample(elem, shape, rng):
    if elem == T.BOOL:
        return rng.random(shape) > 0.5
    from onnx.helper import tensor_dtype_to_np_dtype
    dtype = tensor_dtype_to_np_dtype(elem)
    if dtype.kind == "f":
        x = rng.standard_normal(shape).astype(dtype)
        x.reshape(-1)[:3] = [np.nan, -0.0, np.inf][: x.size]      # bits kept where Trilu keeps them
        return x
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


KS = [None, 0, 1, -1, 3, -3, 2**40, -(2**40)]


@pytest.mark.parametrize("elem", ONNX_NUMERIC_AND_BOOL)
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_every_type(elem, upper):
    rng = np.random.default_rng(elem * 2 + upper)
    lowered = from_onnx(elem) is not None and from_onnx(elem) in DIAGONAL_MATRIX1.row("5_1").tensors["InputTensor"].types
    for k in KS:
        model = trilu_model(elem, 2, upper, k)
        for shape in ((4, 6), (5, 3), (1, 1)):
            result = differential(model, {"x": sample(elem, shape, rng)})
            (entry,) = placed(result.compiled, "trilu")
            assert entry.status == ("lowered" if lowered else "onnx"), entry.reason


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 2, 3, 5), (3, 1, 2, 4, 4), (0, 3), (3, 0, 4)])
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_batches_and_run_time_k(shape, upper):
    rng = np.random.default_rng(len(shape))
    model = trilu_model(T.FLOAT, len(shape), upper, 0, k_input=True)
    for k in (0, 2, -1, 9, -9, 2**62, -(2**62)):
        result = differential(model, {"x": sample(T.FLOAT, shape, rng), "k": np.array(k, np.int64)})
        (entry,) = placed(result.compiled, "trilu")
        assert entry.status == "lowered" and result.compiled.session().log == []


@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
def test_trilu_at_every_level(level):
    model = trilu_model(T.FLOAT, 2, 1, 1)
    result = differential(model, {"x": sample(T.FLOAT, (4, 4), np.random.default_rng(1))}, level)
    (entry,) = placed(result.compiled, "trilu")
    if DIAGONAL_MATRIX1.row(level) is not None:
        assert entry.status == "lowered" and entry.dml_operators == ["DIAGONAL_MATRIX1"]
    else:
        assert entry.status == "onnx" and "DIAGONAL_MATRIX1 is not available" in entry.reason


def test_trilu_of_uniform_fill_keeps_its_generator():
    """Trilu over ConstantOfShape needs no InputTensor: trilu_constant_fill still takes it."""
    nodes = [h.make_node("ConstantOfShape", ["shape"], ["fill"], name="fill", value=h.make_tensor("v", T.FLOAT, [1], [1.0])),
             h.make_node("Trilu", ["fill"], ["y"], name="trilu")]
    result = differential(make(nodes, [tensor("shape", T.INT64, [2])], [tensor("y", T.FLOAT, 2)]),
                          {"shape": np.array([3, 4], np.int64)})
    assert [p.rule for p in result.compiled.placement] == ["trilu_constant_fill"]


def test_trilu_on_the_ort_backend():
    model = trilu_model(T.INT64, 3, 0, -1)
    compiled = differential(model, {"x": sample(T.INT64, (2, 3, 5), np.random.default_rng(3))}).compiled
    x = sample(T.INT64, (2, 3, 5), np.random.default_rng(4))
    ours = compiled.run({"x": x}, backend="ort")
    np.testing.assert_array_equal(ours["y"], np.tril(x, -1))


# -- real transformers exports (tests/models/real, written by tests/models/export_real_models.py) ----

REAL = Path(__file__).resolve().parents[1] / "models" / "real"


@pytest.mark.parametrize("name,band", [
    ("gpt2.dynamo", "x - y in (-inf, 1)"), ("gpt2.torchscript", "x - y in (-inf, 1)"),
    ("llama.dynamo", "x - y in (-inf, 1)"), ("llama.torchscript", "x - y in (-inf, 1)"),
    ("mistral_sliding.dynamo", "x - y in [-3, 1)"), ("mistral_sliding.torchscript", "x - y in [-3, 1)")])
def test_real_exports_masks(name, band):
    """The causal (and sliding-window) masks of both torch exporters are one band each, specialised at
    sequence lengths and batch sizes other than the export's; the model's answer is the ONNX one."""
    path = REAL / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} is written by tests/models/export_real_models.py (branch realmodels)")
    compiled = compile_model(str(path))
    (entry,) = placed(compiled)
    assert entry.status == "lowered" and entry.extra["band"] == band
    rng = np.random.default_rng(7)
    for batch, seq in ((2, 9), (1, 1), (3, 4)):
        feeds = {"input_ids": rng.integers(0, 50, (batch, seq)).astype(np.int64),
                 "attention_mask": (rng.random((batch, seq)) > 0.2).astype(np.int64)}
        feeds["attention_mask"][:, 0] = 1
        session = compiled.session()
        ours = session.run(feeds, strict=True)
        # The layers around the mask run on onnxruntime against onnx.reference: float32 rounding differs.
        assert_outputs_same(ours, reference(str(path), feeds), atol=1e-5, rtol=1e-5)
        assert session.log == []
    kinds = {tuple(s.kind for s in g.steps) for g in compiled.session().specialised.values()}
    assert ("DIAGONAL_MATRIX1", "DOWNLOAD") in kinds
