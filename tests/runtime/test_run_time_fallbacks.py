"""A lowered match whose rule declines at run time (its sizes or values do not fit on that call)
runs on ONNX for that call, and check says so in every view: the placement entry ('onnx' when
every call did, 'lowered' with the reason when some did), a line per lowered backend in the text
and -q reports, and --json (placement[].run_time_fallbacks, backends[].run_time_fallbacks)."""
import json

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.check import Tolerances, check
from onnx_dml_lowering.runtime.report import format_quiet, format_text
from onnx_dml_lowering.runtime.run_time_fallbacks import RunTimeCalls
from tests.builders import graph_model

LOWERED = ["cpu", "ort"]


def _constants(**values):
    return [h.make_node("Constant", [], [name], name=name,
                        value=h.make_tensor(name, T.INT64, [] if np.ndim(v) == 0 else [len(v)], np.ravel(v).tolist()))
            for name, v in values.items()]


def _cast_mask_nodes(to: int, out: str = "y", prefix: str = ""):
    """Less(Unsqueeze(Cast(Range(0, n, 1)), 1), Unsqueeze(..., 0)): a causal mask whose index is cast."""
    p = prefix
    return [h.make_node("Range", ["zero", "n", "one"], [p + "r"], name=p + "range"),
            h.make_node("Cast", [p + "r"], [p + "c"], name=p + "cast", to=to),
            h.make_node("Unsqueeze", [p + "c", "ax1"], [p + "col"], name=p + "col"),
            h.make_node("Unsqueeze", [p + "c", "ax0"], [p + "row"], name=p + "row"),
            h.make_node("Less", [p + "col", p + "row"], [out], name=p + "less")]


def cast_mask(to: int):
    """range_comparison_mask over an index cast to `to`: declined per call where n does not fit."""
    return graph_model(_constants(zero=0, one=1, ax0=[0], ax1=[1]) + _cast_mask_nodes(to),
                       [("n", T.INT64, [])], [("y", T.BOOL, [None, None])])


def stretched_eye():
    """eye_from_ranges under an Expand: declined per call where the Expand stretches the eye itself."""
    nodes = _constants(zero=0, one=1, ax=[-1]) + [
        h.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
        h.make_node("Unsqueeze", ["r", "ax"], ["col"], name="col"),
        h.make_node("Equal", ["col", "r"], ["eq"], name="equal"),
        h.make_node("Cast", ["eq"], ["eye"], name="cast", to=T.FLOAT),
        h.make_node("Expand", ["eye", "batch"], ["y"], name="expand")]
    return graph_model(nodes, [("n", T.INT64, []), ("batch", T.INT64, [None])], [("y", T.FLOAT, [None, None, None])])


def reshaped_nonzero():
    """nonzero_transpose over Reshape(x, s): declined per call at rank 9 (NONZERO_COORDINATES takes 8)."""
    nodes = [h.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             h.make_node("NonZero", ["r"], ["nz"], name="nz"),
             h.make_node("Transpose", ["nz"], ["y"], name="tr", perm=[1, 0])]
    return graph_model(nodes, [("x", T.FLOAT, ["m"]), ("s", T.INT64, ["k"])], [("y", T.INT64, [None, None])])


def mask_in_if():
    """The int8 cast mask inside an If branch: its entry is named by path, and so is its fallback."""
    then = h.make_graph(_constants(zero=0, one=1, ax0=[0], ax1=[1]) + _cast_mask_nodes(T.INT8, "t"), "then", [],
                        [h.make_tensor_value_info("t", T.BOOL, [None, None])])
    other = h.make_graph(_constants(zero=0, one=1, ax0=[0], ax1=[1]) + _cast_mask_nodes(T.INT32, "e", "e_"), "else",
                         [], [h.make_tensor_value_info("e", T.BOOL, [None, None])])
    node = h.make_node("If", ["cond"], ["y"], name="if", then_branch=then, else_branch=other)
    return graph_model([node], [("cond", T.BOOL, []), ("n", T.INT64, [])], [("y", T.BOOL, [None, None])])


def _n(value: int) -> dict:
    return {"n": np.array(value, np.int64)}


def _nonzero_feeds(rank: int) -> dict:
    x = (np.arange(2 ** rank) % 3 == 0).astype(np.float32)
    return {"x": x, "s": np.array([2] * rank, np.int64)}


# (model, rule, a node of the placement entry, feeds that fall back, feeds that do not, the reason's words)
CLASS = [
    (lambda: cast_mask(T.INT8), "range_comparison_mask", "less", _n(130), _n(100), "do not all fit int8"),
    (lambda: cast_mask(T.UINT8), "range_comparison_mask", "less", _n(300), _n(40), "do not all fit uint8"),
    (stretched_eye, "eye_from_ranges", "cast", {**_n(1), "batch": np.array([2, 3, 3], np.int64)},
     {**_n(3), "batch": np.array([2, 3, 3], np.int64)}, "stretches the 1x1 eye itself"),
    (reshaped_nonzero, "nonzero_transpose", "nz", _nonzero_feeds(9), _nonzero_feeds(4), "rank 9"),
    (mask_in_if, "range_comparison_mask", "if/then_branch/less", {**_n(130), "cond": np.array(True)},
     {**_n(100), "cond": np.array(True)}, "do not all fit int8"),
]


def _entry(report, rule: str, first: str):
    (entry,) = [p for p in report.placement if p.rule == rule and first in p.onnx_nodes]
    return entry


@pytest.mark.parametrize("make,rule,first,falls,fits,words", CLASS, ids=lambda v: getattr(v, "__name__", None))
def test_a_call_that_falls_back_is_reported_in_every_view(make, rule, first, falls, fits, words):
    _, report = check(compile_model(make()), falls, LOWERED + ["ort-cpu"], Tolerances())
    assert report.ok and all(o.status == "match" for b in report.backends for o in b.outputs)
    entry = _entry(report, rule, first)
    assert entry.status == "onnx" and words in entry.reason and "every call" in entry.reason
    assert entry.dml_operators == [] and not entry.note
    doc = json.loads(json.dumps(report.to_dict()))
    (placed,) = [p for p in doc["placement"] if p["rule"] == rule and first in p["onnx_nodes"]]
    assert placed["status"] == "onnx" and words in placed["reason"]
    assert set(placed["run_time_fallbacks"]) == set(LOWERED)
    for backend in doc["backends"]:
        if backend["backend"] in LOWERED:
            (fb,) = backend["run_time_fallbacks"]
            assert fb["rule"] == rule and first in fb["nodes"] and words in fb["reason"]
            assert fb["calls"] == fb["of_calls"] == 1 and fb["feed_sets"] == [0]
        else:
            assert "run_time_fallbacks" not in backend          # the shipped file: no lowered graph
    for text in (format_text(report), format_quiet(report)):
        for backend in LOWERED:
            line = next(line for line in text.splitlines() if line.startswith(f"  [{backend}] ran on ONNX at run time"))
            assert first in line and f"rule {rule}" in line and "1 of 1 call" in line and words in line


@pytest.mark.parametrize("make,rule,first,falls,fits,words", CLASS, ids=lambda v: getattr(v, "__name__", None))
def test_a_call_that_fits_is_lowered_and_says_nothing(make, rule, first, falls, fits, words):
    compiled = compile_model(make())
    _, report = check(compiled, fits, LOWERED, Tolerances())
    entry = _entry(report, rule, first)
    assert report.ok and entry.status == "lowered" and entry.reason == "" and entry.dml_operators
    assert entry is next(p for p in compiled.placement if first in p.onnx_nodes)     # the compiled entry itself
    doc = report.to_dict()
    assert all(b["run_time_fallbacks"] == [] for b in doc["backends"])
    assert "ran on ONNX at run time" not in format_text(report) + format_quiet(report)


@pytest.mark.parametrize("make,rule,first,falls,fits,words", CLASS, ids=lambda v: getattr(v, "__name__", None))
def test_feed_sets_some_of_which_fall_back(make, rule, first, falls, fits, words):
    """Sets #0 and #2 fit, #1 falls back: the entry stays lowered and says 1 of 3 calls, at set #1."""
    _, report = check(compile_model(make()), fits, LOWERED, Tolerances(), more_feeds=[falls, fits])
    assert report.iterations == 3 and report.ok
    entry = _entry(report, rule, first)
    assert entry.status == "lowered" and "1 of 3 calls" in entry.reason and words in entry.reason
    for backend in report.to_dict()["backends"]:
        (fb,) = backend["run_time_fallbacks"]
        assert (fb["calls"], fb["of_calls"], fb["feed_sets"]) == (1, 3, [1])
    text = format_text(report)
    assert f"{first}" in text and "(1 of 3 calls, which ran on ONNX" not in text
    assert sum("1 of 3 calls (feed set #1)" in line for line in text.splitlines()) == len(LOWERED)
    assert f"lowered by rule {rule}" in text and "declined at run time at 1 of 3 calls" in text


def test_every_feed_set_falling_back_makes_the_entry_onnx():
    _, report = check(compile_model(cast_mask(T.INT8)), _n(130), ["cpu"], Tolerances(), more_feeds=[_n(200), _n(129)])
    entry = _entry(report, "range_comparison_mask", "less")
    assert entry.status == "onnx" and "every call (3)" in entry.reason
    # each size declines with its own reason (the values it names): one entry each
    entries = report.run_time_fallbacks["cpu"]
    assert [(e["feed_sets"], e["calls"], e["of_calls"]) for e in entries] == [([0], 1, 3), ([1], 1, 3), ([2], 1, 3)]
    assert all(f"0..{n - 1} do not all fit int8" in e["reason"] for e, n in zip(entries, (130, 200, 129)))
    quiet = format_quiet(report)
    assert all(f"1 of 3 calls (feed set #{i})" in quiet for i in range(3))


def test_many_reasons_are_bounded():
    """Every size its own reason: the placement names two and counts the rest, the text gives a
    bounded number of lines per backend; --json keeps every one."""
    sizes = list(range(130, 160))
    _, report = check(compile_model(cast_mask(T.INT8)), _n(sizes[0]), ["cpu"], Tolerances(),
                      more_feeds=[_n(n) for n in sizes[1:]])
    entry = _entry(report, "range_comparison_mask", "less")
    assert entry.status == "onnx" and f"every call ({len(sizes)})" in entry.reason
    assert "0..129 do not" in entry.reason and "0..130 do not" in entry.reason and "0..131" not in entry.reason
    assert f"({len(sizes) - 2} more reasons)" in entry.reason
    assert len(report.to_dict()["backends"][0]["run_time_fallbacks"]) == len(sizes)
    lines = [line for line in format_text(report).splitlines() if line.startswith("  [cpu] ran on ONNX at run time")]
    assert len(lines) == 11 and lines[-1] == f"  [cpu] ran on ONNX at run time: ... {len(sizes) - 10} more (--json lists every one)"


def test_run_time_calls_count_since_a_mark():
    calls = RunTimeCalls()
    calls.called(("a",), "r", None)
    mark = calls.mark()
    calls.called(("a",), "r", "too big")
    calls.called(("a",), "r", None)
    calls.called(("b", "c"), "s", "too big")
    counts = calls.since(mark)
    assert counts.calls == {("a",): 2, ("b", "c"): 1}
    assert sorted((f.nodes, f.rule, f.reason, f.calls) for f in counts.fallbacks) == [
        (("a",), "r", "too big", 1), (("b", "c"), "s", "too big", 1)]
