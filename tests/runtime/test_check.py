"""check: backends, tolerances, the named scalar-NonZero deviation, JSON and Markdown reports."""
import json

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T

from onnx_dml_lowering.compiler import DmlLowerError, compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.runtime.check import SCALAR_NONZERO_DEVIATION, Tolerances, check
from onnx_dml_lowering.runtime.feeds import random_feeds
from onnx_dml_lowering.runtime.report import format_markdown, format_text
from tests.builders import single_node_model
from tests.oracle import assert_outputs_same, assert_same


def scalar_nonzero_model():
    return single_node_model("NonZero", T.FLOAT, (), T.INT64, [None, None])


def test_scalar_nonzero_deviation_is_named_not_failed():
    compiled = compile_model(scalar_nonzero_model())
    _, report = check(compiled, {"x": np.array(5.0, np.float32)}, ["cpu", "ort-cpu"], Tolerances())
    cpu, ort_cpu = report.backends
    assert cpu.outputs[0].status == "match"
    assert ort_cpu.outputs[0].status == "deviation"
    assert SCALAR_NONZERO_DEVIATION in ort_cpu.outputs[0].detail
    assert report.ok
    assert "DEVIATION" in format_text(report)


def test_a_real_mismatch_is_reported_with_first_index():
    # Tolerances of zero against a float model whose ORT and reference results differ in rounding
    # would be flaky; instead compare a mutated result directly.
    from onnx_dml_lowering.runtime.compare import compare
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)
    actual = expected.copy()
    actual[1, 2] += 0.5
    result = compare("y", "cpu", expected, actual, atol=0.1, rtol=0.0)
    assert result.status == "mismatch" and result.first_mismatch == [1, 2]
    assert result.max_abs_error == pytest.approx(0.5) and result.mismatches == 1
    assert compare("y", "cpu", expected, actual, atol=0.6, rtol=0.0).status == "match"


def test_per_output_tolerances():
    tol = Tolerances.parse(["1e-3", "y=0.5"], ["z=0.25"])
    assert tol.for_output("y") == (0.5, 1e-5)
    assert tol.for_output("z") == (1e-3, 0.25)
    assert tol.for_output("other") == (1e-3, 1e-5)
    with pytest.raises(DmlLowerError, match="NUMBER or OUTPUT=NUMBER"):
        Tolerances.parse(["y=abc"], None)


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.stem)
def test_lowered_graph_on_onnxruntime_operators_matches_emulator(path):
    compiled = compile_model(path)
    feeds = random_feeds(compiled.inputs, seed=4)
    ours = compiled.run(feeds)
    try:
        theirs = compiled.run(feeds, backend="ort", providers=["cpu"])
    except DmlLowerError as exc:
        # onnxruntime's CPU provider lacks some kernels (EyeLike to uint8, NonZero on uint32):
        # said in one line naming the DirectML operator and the ONNX op standing in for it.
        assert " via " in str(exc) and "NOT_IMPLEMENTED" in str(exc)
        return
    assert_outputs_same(theirs, ours)


def test_ort_operators_cover_diagonal_matrix1():
    """DIAGONAL_MATRIX1 via Trilu + Where equals the numpy kernel, for bands and inverted bands."""
    from onnx_dml_lowering.runtime import kernels
    from onnx_dml_lowering.runtime.ort_operators import OrtOperators
    ops = OrtOperators(["cpu"])
    rng = np.random.default_rng(3)
    for begin, end in ((0, 1), (-1, 2), (2, -1), (-2**31, 1), (0, 2**31 - 1), (3, 3)):
        base = rng.standard_normal((2, 4, 5)).astype(np.float32)
        want, got = np.empty_like(base), np.empty_like(base)
        kernels.diagonal_matrix1(base, want, 7.5, begin, end)
        ops.diagonal_matrix1(base, got, 7.5, begin, end)
        assert_same(got, want)


@pytest.mark.skipif("DmlExecutionProvider" in ort.get_available_providers(), reason="DirectML is installed")
def test_ort_dml_unavailable_is_one_line_exit_2(capfd):
    # Alone, an unavailable backend is a usage error: one line, exit 2.
    code = main(["check", str(example_paths()[0]), "--backends", "ort-dml"])
    err = capfd.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "DmlExecutionProvider is not available" in err[0] and "directml" in err[0]
    # Beside others, it is reported in one line and the others still run.
    code = main(["check", str(example_paths()[0]), "--backends", "cpu,ort-dml"])
    captured = capfd.readouterr()
    lines = [line for line in captured.out.splitlines() if "UNAVAILABLE" in line]
    assert code == 0 and captured.err == "" and len(lines) == 1
    assert "[ort-dml]" in lines[0] and "DmlExecutionProvider is not available" in lines[0]
    assert "[cpu] coords: MATCH" in captured.out


def test_run_backend_ort_with_dml_provider_unavailable(capfd):
    if "DmlExecutionProvider" in ort.get_available_providers():
        pytest.skip("DirectML is installed")
    code = main(["run", str(example_paths()[0]), "--backend", "ort", "--providers", "dml"])
    assert code == 2 and "Windows" in capfd.readouterr().err


def test_json_and_markdown_reports(tmp_path, capfd):
    path = example_paths()[2]
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    code = main(["check", str(path), "--backends", "cpu,ort-cpu", "--json", str(js), "--markdown", str(md),
                 "--provider-model", "modified"])
    out = capfd.readouterr().out
    data = json.loads(js.read_text())
    assert set(data) >= {"model", "feature_level", "ok", "oracle", "placement", "onnx_regions", "backends"}
    backends = {b["backend"]: b for b in data["backends"]}
    # onnxruntime's CPU provider cannot load a NonZero over double: in the modified copy it is cut
    # out, that output is UNSUPPORTED, the others are still compared, and nothing MISMATCHes.
    assert backends["cpu"]["ok"] and backends["ort-cpu"]["ok"] and code == 0 and "MISMATCH" not in out
    assert backends["cpu"]["status"] == "ok" and backends["ort-cpu"]["status"] == "partial"
    statuses = {o["output"]: o["status"] for o in backends["ort-cpu"]["outputs"]}
    unsupported = [name for name, status in statuses.items() if status == "unsupported"]
    assert unsupported and all(status in ("match", "unsupported", "deviation") for status in statuses.values())
    assert any(status == "match" for status in statuses.values())
    assert list(backends["ort-cpu"]["unsupported_nodes"]) and "NonZero" in "".join(
        backends["ort-cpu"]["unsupported_nodes"].values())
    text = md.read_text()
    assert text.count("\n| cpu |") == len(backends["cpu"]["outputs"])
    assert f"| ort-cpu | `{unsupported[0]}` | unsupported |" in text
    assert "| ort-cpu | - | PARTIAL |" in text


def test_markdown_renders_every_output():
    compiled = compile_model(example_paths()[0])
    _, report = check(compiled, random_feeds(compiled.inputs, seed=1), ["cpu", "ort", "ort-cpu"], Tolerances())
    text = format_markdown(report)
    for backend in ("cpu", "ort", "ort-cpu"):
        for output in ("coords", "selected"):
            assert f"| {backend} | `{output}` | match |" in text


def test_a_check_run_yields_each_set_and_builds_one_frozen_report():
    """CheckRun step by step: one CheckedSet per feed set as it is compared (its validated feeds,
    the oracle's outputs, each backend's by BackendName), the report built once, after the sets,
    and frozen; what the caller knows (CheckAbout) is in it from the start."""
    import dataclasses

    from onnx_dml_lowering.runtime.check import CheckAbout, CheckRun
    compiled = compile_model(scalar_nonzero_model())
    sets = [{"x": np.array(float(v), np.float32)} for v in (5, 0, 2)]
    run = CheckRun(compiled, sets[0], ["cpu", "ort-cpu"], Tolerances(), more_feeds=iter(sets[1:]),
                   about=CheckAbout("scalar.onnx", dims={"n": 3}, feeds={"source": "test", "iterations": 3}))
    seen = []
    for done in run.sets():
        assert run.under_way is not None and run.under_way.index == done.index
        with pytest.raises(RuntimeError, match="under way"):
            run.report()
        assert [(n.text, n.is_provider) for n in done.actuals] == [("cpu", False), ("ort-cpu", True)]
        assert_same(done.actuals["cpu"]["y"], done.expected["y"])
        seen.append((done.index, float(done.feeds["x"])))
    assert seen == [(0, 5.0), (1, 0.0), (2, 2.0)] and run.under_way is None
    report = run.report()
    assert report is run.report() and report.iterations == 3 and report.model == "scalar.onnx"
    assert report.dims == {"n": 3} and report.feeds == {"source": "test", "iterations": 3}
    assert [o.status for o in report.backends[1].outputs] == ["deviation"] * 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.stopped = "changed"                  # type: ignore[misc]


def test_a_set_the_oracle_cannot_evaluate_stops_the_run_and_stays_under_way():
    from onnx_dml_lowering.runtime.check import CheckAbout, CheckRun
    compiled = compile_model(scalar_nonzero_model())
    bad = {"x": np.zeros(3, np.float32)}            # not the scalar the model takes
    run = CheckRun(compiled, {"x": np.array(1.0, np.float32)}, ["cpu"], Tolerances(), more_feeds=[bad],
                   about=CheckAbout(feed_label=lambda i: f"seed {10 + i}"))
    assert [done.index for done in run.sets()] == [0]
    report = run.report()
    assert report.stopped.startswith("feed set #1 (seed 11): ") and report.iterations == 1 and not report.ok
    assert run.under_way is not None and run.under_way.index == 1 and run.under_way.feeds is bad
