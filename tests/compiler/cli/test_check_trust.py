"""check at the edges a new user meets: -q keeps what did not match or did not run, output paths
checked before the run, provider options no backend uses, mismatch lines (errors where defined,
no numpy reprs), the reference oracle naming its failing node, saved outputs tied to their
feeds and labelled by who saved them, and the Markdown iteration column."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import DmlLowerError, compile_model
from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.runtime.check import CheckReport, Tolerances, check
from onnx_dml_lowering.runtime.compare import BackendReport, compare
from onnx_dml_lowering.runtime.report import format_results
from onnx_dml_lowering.runtime.saved_outputs import FEEDS_KEY, SAVED_BY_KEY
from tests.cli_runner import cli
from tests.builders import graph_model
from tests.oracle import reference

MASKED = str(next(p for p in example_paths() if p.stem == "masked_select"))


def one_line_error(code: int, out: str, err: str) -> str:
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


# -- 3. -q ----------------------------------------------------------------------------------------
def test_quiet_keeps_unavailable_backends_and_the_verdict(capsys):
    code, out, _ = cli(["check", MASKED, "--backends", "cpu,ort-dml", "-q"], capsys)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    assert lines[0].startswith("  [ort-dml] UNAVAILABLE here, not run: DmlExecutionProvider is not available")
    assert lines[1] == "verdict: all outputs match ONNX semantics; not run (unavailable here): ort-dml"


def test_quiet_keeps_every_line_that_is_not_match(tmp_path, capsys):
    edge = str(next(p for p in example_paths() if p.stem == "edge_cases"))
    argv = ["check", edge, "--backends", "cpu,ort-cpu", "--seed", 3, "--provider-model", "modified"]
    code, full, _ = cli(argv, capsys)
    code_q, quiet, _ = cli([*argv, "-q"], capsys)
    assert code == code_q == 0
    results = full.split("results:\n", 1)[1].splitlines()
    kept = [line for line in results if re.search(r"\] \S+: (DEVIATION|UNSUPPORTED|MISMATCH|ERROR)", line)
            or line.startswith("  [ort-cpu] PARTIAL: node") and "not run on it" in line]
    assert any("PARTIAL" in line for line in kept)
    assert {"DEVIATION", "UNSUPPORTED"} <= {re.search(r": ([A-Z]+) \(", line).group(1) for line in kept
                                            if "PARTIAL" not in line}
    assert quiet.splitlines() == kept + [full.splitlines()[-2]]       # the last line is the time


# -- 4. unwritable output paths, before the run --------------------------------------------------
@pytest.mark.parametrize("option", ["--json", "--markdown", "--save-outputs", "--save-inputs"])
@pytest.mark.parametrize("where", ["missing_folder", "a_directory", "under_a_file", "read_only_file"])
def test_unwritable_output_path_is_found_before_the_run(option, where, tmp_path, capsys, monkeypatch):
    if where == "read_only_file" and os.geteuid() == 0:
        pytest.skip("root writes read-only files")
    target = {"missing_folder": tmp_path / "nope" / "r.out", "a_directory": tmp_path,
              "under_a_file": tmp_path / "f.txt" / "r.out", "read_only_file": tmp_path / "ro.out"}[where]
    (tmp_path / "f.txt").write_text("")
    if where == "read_only_file":
        target.write_text("")
        target.chmod(0o444)
    import onnx_dml_lowering.runtime.check as check_module

    def never(*args, **kwargs):
        raise AssertionError("the run started before the path was checked")
    monkeypatch.setattr(check_module, "check", never)
    line = one_line_error(*cli(["check", MASKED, option, target], capsys))
    assert line.startswith(f"dml-lower: error: {option} {str(target)!r}: cannot write there: ")
    assert {"missing_folder": "does not exist", "a_directory": "is a directory",
            "under_a_file": "is a file, not a folder", "read_only_file": "not writable"}[where] in line


# -- 8. provider options nothing uses ------------------------------------------------------------
@pytest.mark.parametrize("backends", ["cpu", "cpu,ort"])
@pytest.mark.parametrize("flag,value", [("--provider-option", "x=1"), ("--ep-library", "Foo=/no/such.so")])
def test_provider_flags_without_a_provider_backend_are_an_error(backends, flag, value, capsys):
    line = one_line_error(*cli(["check", MASKED, "--backends", backends, flag, value], capsys))
    assert f"{flag} {value}: no requested backend uses it" in line and f"--backends {backends}" in line


def test_provider_option_with_a_provider_backend_is_taken(capsys):
    # an unavailable provider backend still uses it: not this error
    code, out, err = cli(["check", MASKED, "--backends", "cpu,ort-dml", "--provider-option", "device_id=0"], capsys)
    assert code == 0 and "no requested backend uses it" not in err


# -- 5. mismatch lines ---------------------------------------------------------------------------
def _case(dtype, expected, actual):
    return np.array(expected, dtype), np.array(actual, dtype)


MISMATCHES = {
    # name: (expected, actual, rel defined?, how many differ, first index)
    "float32_vs_expected_zero": (*_case(np.float32, [[0, 1, 2], [3, 0, 5]], [[3.66, 1, 2], [3, 0, 5.5]]), True, 2, [0, 0]),
    "only_at_expected_zero": (*_case(np.float32, [0, 0, 2], [1e-3, 0, 2]), False, 1, [0]),
    "float16": (*_case(np.float16, [1, 2, 4], [1, 2.5, 4]), True, 1, [1]),
    "nan_on_one_side": (*_case(np.float64, [1, np.nan, 2], [np.nan, np.nan, 2]), True, 1, [0]),
    "int64": (*_case(np.int64, [0, 5, 7, 0], [0, 5, 9, 1]), True, 2, [2]),
    "bool": (*_case(np.bool_, [True, False], [True, True]), None, 1, [1]),
}


@pytest.mark.parametrize("case", MISMATCHES)
def test_mismatch_line(case):
    want, got, rel_defined, differ, first = MISMATCHES[case]
    result = compare("y", "cpu", want, got, atol=1e-6, rtol=1e-5)
    assert result.status == "mismatch" and result.mismatches == differ and result.first_mismatch == first
    assert result.elements == want.size
    with np.errstate(invalid="ignore"):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    one_nan = np.isnan(want.astype(np.float64)) ^ np.isnan(got.astype(np.float64))
    diff = np.where(one_nan, np.inf, np.nan_to_num(diff))
    if rel_defined is None:                     # bool: no error figures, the count and the index
        assert result.max_abs_error is None
    else:
        assert result.max_abs_error == pytest.approx(diff.max())
        assert result.mean_abs_error == pytest.approx(diff.mean())
        zero = (want == 0) & (diff != 0)
        assert result.rel_undefined == int(zero.sum())
        if rel_defined:
            with np.errstate(invalid="ignore"):     # equal elements (NaN meeting NaN) have 0
                rel = np.where(diff == 0, 0.0, diff / np.where(want == 0, 1, np.abs(want.astype(np.float64))))[~zero]
            assert result.max_rel_error == pytest.approx(rel.max())
        else:
            assert result.max_rel_error is None
    report = CheckReport("m", "5_1", [], {}, [BackendReport("cpu", [result])])
    line = format_results(report)
    assert "np." not in line and "e+30" not in line and f"{differ} of {want.size} elements differ" in line
    assert f"first at {first}: got {str(got[tuple(first)])}, expected {str(want[tuple(first)])}" in line
    if rel_defined is False:
        assert "rel err undefined (expected 0 wherever it differs)" in line
    elif rel_defined and result.rel_undefined:
        assert f"undefined at {result.rel_undefined} element" in line
    json.dumps(result.to_dict())                # the JSON keys stay plain numbers
    assert {"max_abs_error", "max_rel_error", "first_mismatch", "mismatches", "mean_abs_error",
            "mean_rel_error", "rel_undefined", "elements"} <= set(result.to_dict())


@pytest.mark.parametrize("want, got", [
    (np.zeros((1, 0), np.int64), np.zeros((1, 1), np.int64)),     # a 0-d NonZero a backend got wrong
    (np.zeros((2, 3), np.int64), np.zeros((2, 3), np.int32)),
    (np.zeros((4,), np.float32), None),                             # nothing produced
])
def test_shape_and_dtype_mismatch_lines_show_what_the_backend_produced(want, got):
    """The bracket is the backend's result; the detail names the expected shape or dtype."""
    result = compare("y", "cpu", want, got, atol=0, rtol=0)
    report = CheckReport("m", "5_1", [], {}, [BackendReport("cpu", [result])])
    line = format_results(report)
    shown = want if got is None else got
    assert f"MISMATCH ({shown.dtype} [{'x'.join(map(str, shown.shape))}])" in line, line
    if got is not None and got.shape != want.shape:
        assert f"shape {list(got.shape)} != expected {list(want.shape)}" in line
    elif got is not None:
        assert f"dtype {got.dtype} != expected {want.dtype}" in line
    else:
        assert "output missing" in line
    if got is not None and got.shape != want.shape:      # a named DEVIATION's bracket is the backend's too
        result.status = "deviation"
        assert f"DEVIATION ({got.dtype} [{'x'.join(map(str, got.shape))}])" in format_results(report)


# -- 6. --oracle reference names the node --------------------------------------------------------
def gather_model() -> onnx.ModelProto:
    """onnx.reference (onnx 1.2x) fails on this GatherElements: data [1, 512], indices [1, 3] on axis
    1 (valid ONNX, onnxruntime runs it; BERT's token_type_ids meet it)."""
    nodes = [h.make_node("NonZero", ["m"], ["nz"], name="nz"),
             h.make_node("GatherElements", ["data", "idx"], ["g"], axis=1, name="gather")]
    return graph_model(nodes, [("m", T.FLOAT, [2, 3]), ("data", T.INT64, [1, 512]), ("idx", T.INT64, [1, 3])],
                       [("nz", T.INT64, [2, None]), ("g", T.INT64, [1, 3])])


def test_reference_oracle_failure_names_the_node(tmp_path, capsys):
    model = gather_model()
    feeds = {"m": np.array([[0, 1, 0], [2, 0, 3]], np.float32), "data": np.arange(512, dtype=np.int64)[None],
             "idx": np.array([[511, 0, 3]], np.int64)}
    with pytest.raises(DmlLowerError, match=r"onnx.reference cannot evaluate node 'gather' \(GatherElements\): "):
        check(compile_model(model), feeds, ["cpu"], Tolerances(), oracle="reference")
    _, report = check(compile_model(model), feeds, ["cpu"], Tolerances())   # the hybrid oracle runs it
    assert report.ok and report.expected["g"].tolist() == [[511, 0, 3]]
    path, inputs = tmp_path / "g.onnx", tmp_path / "in.npz"
    onnx.save(model, path)
    np.savez(inputs, **feeds)
    line = one_line_error(*cli(["check", path, "--inputs", inputs, "--oracle", "reference"], capsys))
    assert "node 'gather' (GatherElements)" in line


# -- 7. saved outputs and their feeds ------------------------------------------------------------
def test_saved_outputs_refused_with_other_feeds(tmp_path, capsys):
    saved, inputs = tmp_path / "s.npz", tmp_path / "i.npz"
    code, _, _ = cli(["check", MASKED, "--backends", "cpu,ort-cpu", "--seed", 2, "--save-outputs", saved,
                      "--save-inputs", inputs], capsys)
    assert code == 0
    with np.load(saved) as data:
        assert str(data[SAVED_BY_KEY]) == "check" and len(str(data[FEEDS_KEY])) == 64
    for option in ("--load-outputs", "--oracle"):
        line = one_line_error(*cli(["check", MASKED, "--seed", 3, option, saved], capsys))
        assert f"{option} {str(saved)!r} was saved from other feeds than these" in line
        code, out, _ = cli(["check", MASKED, "--inputs", inputs, option, saved], capsys)     # the same feeds
        assert code == 0 and "MATCH" in out
        code, out, _ = cli(["check", MASKED, "--seed", 2, option, saved], capsys)            # same seed: same feeds
        assert code == 0


@pytest.mark.parametrize("source,labels", [
    (["check", "--backends", "cpu,ort-cpu"], {"saved:oracle", "saved:cpu", "saved:ort-cpu"}),
    (["run", "--backend", "cpu"], {"saved:run-cpu"}),
    (["run", "--backend", "ort"], {"saved:run-ort"}),
    (None, {"saved:outputs"}),           # a file that does not say who saved it (made by hand)
])
def test_loaded_outputs_are_labelled_by_who_saved_them(source, labels, tmp_path, capsys):
    saved, report = tmp_path / "s.npz", tmp_path / "r.json"
    if source is None:
        compiled = compile_model(MASKED)
        from onnx_dml_lowering.runtime.feeds import random_feeds
        np.savez(saved, **reference(MASKED, random_feeds(compiled.inputs, seed=1)))
    else:
        code, _, err = cli([source[0], MASKED, *source[1:], "--seed", 1, "--save-outputs", saved], capsys)
        assert code == 0, err
    code, out, err = cli(["check", MASKED, "--seed", 1, "--load-outputs", saved, "--json", report], capsys)
    assert code == 0, err
    data = json.loads(report.read_text())
    got = {b["backend"] for b in data["backends"]} - {"cpu"}
    assert got == labels
    for b in data["backends"]:
        assert all(o["status"] == "match" for o in b["outputs"])
        if b["backend"] in labels:
            assert "saved" in b["description"] or "loaded" in b["description"]
    assert "loaded:" not in out


# -- 9. Markdown with iterations -----------------------------------------------------------------
@pytest.mark.parametrize("iterations", [1, 3])
def test_markdown_iteration_column(iterations, tmp_path, capsys):
    md = tmp_path / "r.md"
    code, _, _ = cli(["check", MASKED, "--backends", "cpu,ort-cpu", "--iterations", iterations, "--markdown", md], capsys)
    assert code == 0
    rows = [line for line in md.read_text().splitlines() if line.startswith("| cpu |") or line.startswith("| ort-cpu |")]
    header = next(line for line in md.read_text().splitlines() if line.startswith("| backend |"))
    assert ("| iteration |" in header) == (iterations > 1)
    assert len(rows) == 2 * 2 * iterations                 # 2 backends x 2 outputs x iterations
    if iterations > 1:
        cells = [row.split(" | ")[1] for row in rows]
        assert sorted(set(cells)) == [str(i) for i in range(iterations)]
        assert all(len(row.split("|")) == len(header.split("|")) for row in rows)


# (a rank or row count inference can see is its error already: only the count is left to the run)
@pytest.mark.parametrize("declared, differs", [([2, 1], True), ([2, 5], True), ([2, "k"], False), ([2, None], False),
                                               ([2, 3], False)])
def test_an_output_declared_otherwise_than_computed_is_noted(declared, differs, tmp_path, capsys):
    """NonZero of a [3, 4] input with 3 non-zeros gives [2, 3]: a declared [2, 1] every engine contradicts (and all MATCH) is said in a note and the JSON
    (declared_shapes_differ), never hidden behind the MATCH."""
    dims = [h.make_tensor_value_info("y", T.INT64, declared)]
    graph = h.make_graph([h.make_node("NonZero", ["x"], ["y"], name="nz")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [3, 4])], dims)
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(path))
    np.savez(tmp_path / "in.npz", x=np.eye(3, 4, dtype=np.float32))
    code, out, err = cli(["check", path, "--inputs", tmp_path / "in.npz", "--backends", "cpu,ort-cpu", "-q",
                          "--json", tmp_path / "r.json"], capsys)
    assert code == 0 and "all outputs match" in out, out + err
    noted = json.loads((tmp_path / "r.json").read_text())["declared_shapes_differ"]
    if differs:
        want = ["?" if d is None else str(d) for d in declared]
        assert f"note: the model declares output 'y' [{', '.join(want)}]; the oracle (ONNX semantics) gave [2, 3]" in out
        assert noted == {"y": {"declared": declared, "oracle": [2, 3]}}
    else:
        assert "declares" not in out and noted == {}


@pytest.mark.parametrize("oracle, gave", [("golden", "the saved outputs of --oracle"),
                                          ("ort-cpu", "the oracle (onnxruntime's CPU provider)"),
                                          ("reference", "the oracle (ONNX semantics)")])
def test_the_declared_shape_note_names_the_oracle_that_gave_the_shape(oracle, gave, tmp_path, capsys):
    """A golden file's shape came from the file, not from ONNX semantics: the note names where it came from."""
    graph = h.make_graph([h.make_node("NonZero", ["x"], ["y"], name="nz")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [3, 4])], [h.make_tensor_value_info("y", T.INT64, [2, 1])])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(path))
    np.savez(tmp_path / "in.npz", x=np.eye(3, 4, dtype=np.float32))
    feeds = ["--inputs", tmp_path / "in.npz"]
    if oracle == "golden":
        assert cli(["run", path, *feeds, "--backends", "cpu", "--save-outputs", tmp_path / "g.npz"], capsys)[0] == 0
        oracle = str(tmp_path / "g.npz")
    code, out, err = cli(["check", path, *feeds, "--backends", "cpu", "--oracle", oracle, "-q"], capsys)
    assert code == 0, out + err
    assert f"note: the model declares output 'y' [2, 1]; {gave} gave [2, 3] at feed set #0" in out
