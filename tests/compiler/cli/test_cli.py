"""The dml-lower command line: compile / run / check / demo as docs/commands/ promises them.

Every numeric expectation comes from onnx.reference on the same model and feeds.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from tests.cli_runner import cli
from onnx_dml_lowering.runtime.saved_outputs import CONTENTS_KEY, FEEDS_KEY, SAVED_BY_KEY, feeds_fingerprint
from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.runtime.feeds import feed_summary, random_feeds
from tests.builders import single_node_model
from tests.oracle import assert_outputs_same, reference
from onnx_dml_lowering.ir import graph_to_dict, graph_from_dict, format_graph

EXAMPLES = example_paths()
LEVELS = ["2_1", "3_0", "4_0", "5_1", "6_4"]
PLACEMENT_KEYS = {"onnx_nodes", "status", "rule", "dml_operators", "reason"}


def lowered_op_nodes(model: onnx.ModelProto) -> "set[str]":
    return {n.name for n in compile_model(model).model.graph.node if n.op_type in ("NonZero", "EyeLike")}


# -- compile -------------------------------------------------------------------------------------

def test_compile_prints_graph_and_placement(tmp_path, capsys):
    path = tmp_path / "nz.onnx"
    onnx.save(single_node_model("NonZero", T.FLOAT, [3, 4], T.INT64), str(path))
    code, out, err = cli(["compile", path], capsys)
    assert code == 0, err
    assert err == ""
    assert "graph (DML_FEATURE_LEVEL_5_1)" in out
    assert "DML_OPERATOR_NONZERO_COORDINATES" in out
    assert "placement (feature level 5_1):" in out
    assert "nonzero: lowered by rule nonzero" in out


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_compile_json(path, level, tmp_path, capsys):
    out_json = tmp_path / "out.json"
    code, out, err = cli(["compile", path, "--feature-level", level, "--json", out_json], capsys)
    assert code == 0, err
    data = json.loads(out_json.read_text())
    assert {"feature_level", "placement", "graph"} <= set(data)
    assert data["feature_level"] == level

    # Every NonZero / EyeLike node is in exactly one entry (an idiom entry also names the nodes
    # around it, or the initializer it generates); each entry is well-formed.
    model = onnx.load(str(path))
    covered = [name for entry in data["placement"] for name in entry["onnx_nodes"]]
    assert len(covered) == len(set(covered))
    assert set(lowered_op_nodes(model)) <= set(covered)
    node_names = {n.name for n in model.graph.node}
    inits = {f"initializer:{i.name}" for i in model.graph.initializer}
    assert set(covered) <= node_names | inits
    for entry in data["placement"]:
        assert PLACEMENT_KEYS <= set(entry), entry
        assert entry["status"] in {"lowered", "onnx"}
        assert isinstance(entry["rule"], str) and entry["rule"]
        assert all(isinstance(op, str) for op in entry["dml_operators"])
        if entry["status"] == "onnx":
            assert entry["reason"], entry
            assert entry["dml_operators"] == []
        else:
            assert entry["reason"] == ""

    # The graph round-trips to an equal ir.Graph (the one the Python API compiles).
    compiled = compile_model(path, feature_level=level)
    graph = graph_from_dict(data["graph"])
    assert graph == compiled.graph
    assert graph_to_dict(graph) == data["graph"]
    assert data["placement"] == [p.to_dict() for p in compiled.placement]
    # The printed graph is the JSON graph's text form, the model's inputs apart from its initializers.
    inputs = {vi.name for vi in compiled.model.graph.input}
    assert format_graph(graph, inputs) in out
    header = out.splitlines()[0]
    initializers = [n for n in graph.inputs if n not in inputs]
    assert header.startswith(f"graph (DML_FEATURE_LEVEL_{level}) inputs: ")
    assert ("  initializers: " in header) == bool(initializers), header


def test_compile_lists_initializers_apart_and_run_previews_on_one_line(capsys):
    """A new user's torch export listed its 19 weights as "inputs" beside its one input; and run's
    preview of eight floats wrapped onto a second line."""
    code, out, _ = cli(["compile", "compiler/examples/masked_select.onnx"], capsys)
    assert code == 0 and out.splitlines()[0] == ("graph (DML_FEATURE_LEVEL_5_1) inputs: x  initializers: threshold  "
                                                 "outputs: coords, selected")
    model = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
        [onnx.helper.make_tensor_value_info("x", T.FLOAT, [2, 8])], [onnx.helper.make_tensor_value_info("y", T.FLOAT, [2, 8])]),
        opset_imports=[onnx.helper.make_opsetid("", 17)])
    path = Path(__import__("tempfile").mkdtemp()) / "m.onnx"
    onnx.save(model, path)
    np.savez(path.with_suffix(".npz"), x=np.full((2, 8), 1.2345678, np.float32))
    code, out, _ = cli(["run", path, "--inputs", path.with_suffix(".npz")], capsys)
    (line,) = [line for line in out.splitlines() if line.startswith("  y: ")]
    assert code == 0 and line.endswith("1.2345678] ...") and line.count("1.2345678") == 8


@pytest.mark.parametrize("spelling", ["5_1", "5.1", "0x5100", "DML_FEATURE_LEVEL_5_1"])
def test_feature_level_spellings(spelling, tmp_path, capsys):
    path = EXAMPLES[0]
    canonical, spelled = tmp_path / "canonical.json", tmp_path / "spelled.json"
    assert cli(["compile", path, "--feature-level", "5_1", "--json", canonical], capsys)[0] == 0
    code, out, err = cli(["compile", path, "--feature-level", spelling, "--json", spelled], capsys)
    assert code == 0, err
    assert json.loads(spelled.read_text())["feature_level"] == "5_1"
    assert spelled.read_text() == canonical.read_text()


@pytest.mark.parametrize("level", ["1_0", "2_0", "2_1"])
def test_nonzero_below_3_0_is_left_to_onnx(level, tmp_path, capsys):
    path, out_json = tmp_path / "nz.onnx", tmp_path / "out.json"
    onnx.save(single_node_model("NonZero", T.FLOAT, [3, 4], T.INT64), str(path))
    code, out, err = cli(["compile", path, "--feature-level", level, "--json", out_json], capsys)
    assert code == 0, err
    [entry] = json.loads(out_json.read_text())["placement"]
    assert entry["onnx_nodes"] == ["nonzero"]
    assert entry["status"] == "onnx"
    assert "NONZERO_COORDINATES" in entry["reason"] and "3_0" in entry["reason"]
    assert entry["reason"] in out


def test_nonzero_at_3_0_is_lowered(tmp_path, capsys):
    path, out_json = tmp_path / "nz.onnx", tmp_path / "out.json"
    onnx.save(single_node_model("NonZero", T.FLOAT, [3, 4], T.INT64), str(path))
    assert cli(["compile", path, "--feature-level", "3_0", "--json", out_json], capsys)[0] == 0
    [entry] = json.loads(out_json.read_text())["placement"]
    assert entry["status"] == "lowered"
    assert "NONZERO_COORDINATES" in entry["dml_operators"]


@pytest.mark.parametrize("level,status", [("4_0", "onnx"), ("5_0", "onnx"), ("5_1", "lowered")])
def test_eyelike_int64_placement_by_level(level, status, tmp_path, capsys):
    path, out_json = tmp_path / "eye.onnx", tmp_path / "out.json"
    model = single_node_model("EyeLike", T.FLOAT, [3, 3], T.INT64, [3, 3], dtype=T.INT64)
    onnx.save(model, str(path))
    code, out, err = cli(["compile", path, "--feature-level", level, "--json", out_json], capsys)
    assert code == 0, err
    [entry] = json.loads(out_json.read_text())["placement"]
    assert entry["onnx_nodes"] == ["eyelike"]
    assert entry["status"] == status
    if status == "onnx":
        assert "int64" in entry["reason"].lower()
    else:
        assert entry["dml_operators"] == ["DIAGONAL_MATRIX"]


# -- run -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_run_inputs_and_save_outputs_round_trip(path, seed, tmp_path, capsys):
    compiled = compile_model(path)
    feeds = random_feeds(compiled.inputs, seed=seed)
    feeds_file, outputs_file = tmp_path / "feeds.npz", tmp_path / "outputs.npz"
    np.savez(feeds_file, **feeds)
    code, out, err = cli(["run", path, "--inputs", feeds_file, "--save-outputs", outputs_file], capsys)
    assert code == 0, err
    with np.load(outputs_file) as saved:
        actual = {name: saved[name] for name in saved.files}
    # beside the outputs, the reserved entries: the feeds' fingerprint, who saved it and what it holds
    assert str(actual.pop(FEEDS_KEY)) == feeds_fingerprint(feeds) and str(actual.pop(SAVED_BY_KEY)) == "run:cpu"
    assert json.loads(str(actual.pop(CONTENTS_KEY))) == {"outputs": compiled.output_names, "left_out": {}}
    assert_outputs_same(actual, reference(path, feeds))


def test_run_seed_is_deterministic(tmp_path, capsys):
    path = EXAMPLES[0]            # masked_select: float input, data-dependent output shape
    runs = []
    for index, seed in enumerate([5, 5, 6]):
        target = tmp_path / f"out{index}.npz"
        code, out, err = cli(["run", path, "--seed", seed, "--save-outputs", target], capsys)
        assert code == 0, err
        with np.load(target) as saved:
            runs.append(({n: saved[n] for n in saved.files}, out.replace(str(target), "OUT")))
    (first, first_out), (second, second_out), (other, _) = runs
    assert_outputs_same(second, first)
    assert second_out == first_out
    assert any(first[n].shape != other[n].shape or not np.array_equal(first[n], other[n]) for n in first), \
        "--seed has no effect on the feeds"


# -- check ---------------------------------------------------------------------------------------

REQUIRED_REPORT_KEYS = {"model", "feature_level", "ok", "placement", "backends"}


def key_structure(value):
    """The nested key layout of a JSON value (values dropped)."""
    if isinstance(value, dict):
        return {k: key_structure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [key_structure(v) for v in value]
    return None


def without_timing(report: dict) -> dict:
    """The report minus wall times, the one part that differs between identical runs."""
    for backend in report["backends"]:
        assert backend.pop("seconds") >= 0
    return report


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_check_examples_json_and_replay(path, tmp_path, capsys):
    report, inputs = tmp_path / "report.json", tmp_path / "inputs.npz"
    code, out, err = cli(["check", path, "--seed", 3, "--json", report, "--save-inputs", inputs], capsys)
    assert code == 0, out + err
    assert "MISMATCH" not in out
    first = without_timing(json.loads(report.read_text()))
    assert REQUIRED_REPORT_KEYS <= set(first)
    assert first["ok"] is True
    assert first["feature_level"] == "5_1"
    assert [b["backend"] for b in first["backends"]] == ["cpu"]
    assert all(b["ok"] for b in first["backends"])
    assert first["placement"] == [p.to_dict() for p in compile_model(path).placement]

    # The saved inputs are the feeds, keyed by input name; the report's outputs match the oracle's.
    compiled = compile_model(path)
    with np.load(inputs) as saved:
        feeds = {name: saved[name] for name in saved.files}
    assert sorted(feeds) == sorted(vi.name for vi in compiled.inputs)
    feeds_of = feed_summary(feeds)
    expected = reference(path, feeds)
    outputs = first["backends"][0]["outputs"]
    assert sorted(o["output"] for o in outputs) == sorted(expected)
    for o in outputs:
        assert o["status"] == "match"
        assert o["expected_shape"] == list(expected[o["output"]].shape)

    # Same seed again: the same report; replaying the saved inputs: the same report.
    again = tmp_path / "again.json"
    assert cli(["check", path, "--seed", 3, "--json", again], capsys)[0] == 0
    assert without_timing(json.loads(again.read_text())) == first
    replay = tmp_path / "replay.json"
    code, out, err = cli(["check", path, "--inputs", inputs, "--json", replay], capsys)
    assert code == 0, out + err
    replayed = without_timing(json.loads(replay.read_text()))
    # the same feeds, said to come from the file now
    drawn = first["feeds"]
    sizes = {d.dim_param: shape[axis] for vi in onnx.load(path).graph.input
             for axis, d in enumerate(vi.type.tensor_type.shape.dim) if d.dim_param
             for shape in [feeds_of[vi.name]["shape"]]}
    assert (drawn["dims"], drawn["default_dims"]) == (sizes, list(sizes))      # no --dim: every size defaulted
    assert (replayed.pop("feeds"), first.pop("feeds")) == ({"source": "file", "path": str(inputs), "inputs": feeds_of},
                                                           {"source": "random", "seed": 3, "iterations": 1,
                                                            "dims": sizes, "default_dims": list(sizes),
                                                            "inputs": feeds_of})
    assert key_structure(replayed) == key_structure(first)
    assert replayed == first


@pytest.mark.parametrize("level", ["2_1", "4_0"])
def test_check_examples_at_low_levels(level, tmp_path, capsys):
    for path in EXAMPLES:
        report = tmp_path / f"{path.stem}.json"
        code, out, err = cli(["check", path, "--feature-level", level, "--json", report], capsys)
        assert code == 0, out + err
        data = json.loads(report.read_text())
        assert data["ok"] is True and data["feature_level"] == level


# -- demo ----------------------------------------------------------------------------------------

def test_demo(capsys):
    code, out, err = cli(["demo"], capsys)
    assert code == 0, out + err
    for path in EXAMPLES:
        assert path.name in out
    assert "MISMATCH" not in out
    assert "every example matches ONNX semantics" in out
    # It says what it shows before the graphs, each example's one line under its name, and what next.
    from onnx_dml_lowering.compiler.examples import describe
    lines = out.splitlines()
    assert lines[0].startswith(f"demo: the {len(EXAMPLES)} bundled example models (compiler/examples)")
    for path in EXAMPLES:
        header = next(i for i, line in enumerate(lines) if line.startswith(f"{path.name}: "))
        assert lines[header + 1] == f"  {describe(path)}" and len(describe(path)) > 20
    assert lines[-1].startswith("next: `dml-lower inspect MODEL.onnx`")


def test_dim_names_must_exist(capfd):
    model = str(Path(__file__).resolve().parents[2] / "models" / "eye.torchscript.onnx")
    assert main(["run", model, "--dim", "n=2", "--dim", "m=5"]) == 0
    assert main(["run", model, "--dim", "batch=3"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--dim batch: no input dimension has that name (symbolic input dimensions: m, n)")
    assert main(["run", model, "--dim", "seq=3", "--dim", "n=2", "--dim", "batch=3"]) == 2     # every one named
    err = capfd.readouterr().err.strip().splitlines()
    assert err == ["dml-lower: error: --dim batch, seq: no input dimension has these names "
                   "(symbolic input dimensions: m, n)"]
