"""check's statuses and options on the command line: NONDETERMINISTIC, UNSUPPORTED, unavailable
backends, --oracle, --iterations, --zero-fraction / --val-range, --outputs, --save/--load-outputs,
bfloat16 feeds, tolerances naming no output, --version, -q, closed pipes, external data."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.examples import example_paths
from tests.cli_runner import cli
from tests.builders import graph_model
from tests.oracle import assert_outputs_same, reference

EDGE = str(next(p for p in example_paths() if p.stem == "edge_cases"))
MASKED = str(next(p for p in example_paths() if p.stem == "masked_select"))


def report(tmp_path, argv, capsys) -> "tuple[int, dict, str]":
    path = tmp_path / "r.json"
    code, out, err = cli(["check", *argv, "--json", path], capsys)
    assert err == "", err
    return code, json.loads(path.read_text()), out


def statuses(data: dict, backend: str) -> "dict[str, str]":
    entry = next(b for b in data["backends"] if b["backend"] == backend)
    return {o["output"]: o["status"] for o in entry["outputs"]}


def save(model: onnx.ModelProto, tmp_path: Path, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    onnx.save(model, path)
    return path


def dropout_model(training: bool) -> onnx.ModelProto:
    nodes = [h.make_node("Dropout", ["x", "ratio", "mode"], ["d"], name="dropout"),
             h.make_node("Relu", ["d"], ["random_out"], name="relu"),
             h.make_node("NonZero", ["x"], ["nz"], name="nz")]
    return graph_model(nodes, [("x", T.FLOAT, [4, 5])], [("random_out", T.FLOAT, [4, 5]), ("nz", T.INT64, 2)],
                       {"ratio": np.array(0.5, np.float32), "mode": np.array(training)}, opset=13)


def test_random_outputs_are_nondeterministic_not_mismatches(tmp_path, capsys):
    code, data, out = report(tmp_path, [save(dropout_model(True), tmp_path), "--backends", "cpu,ort-cpu"], capsys)
    assert code == 0 and data["ok"]
    for backend in ("cpu", "ort-cpu"):
        assert statuses(data, backend) == {"random_out": "nondeterministic", "nz": "match"}
    assert "random_out: NONDETERMINISTIC" in out and "dropout" in out and "MISMATCH" not in out
    # Dropout in inference mode is deterministic: compared as usual.
    code, data, _ = report(tmp_path, [save(dropout_model(False), tmp_path), "--backends", "cpu,ort-cpu"], capsys)
    assert code == 0 and statuses(data, "cpu") == {"random_out": "match", "nz": "match"}


def test_unsupported_kernels_are_named_and_the_other_outputs_still_compared(tmp_path, capsys):
    code, data, out = report(tmp_path, [EDGE, "--backends", "cpu,ort,ort-cpu", "--seed", 3,
                                        "--provider-model", "modified"], capsys)
    assert code == 0 and data["ok"]
    # onnxruntime CPU has no NonZero for double nor EyeLike for uint8: the modified copy's nodes
    # are UNSUPPORTED on ort-cpu (PARTIAL), while ort runs its stand-ins (Cast + NonZero, EyeLike + Cast).
    got = statuses(data, "ort-cpu")
    assert got["nz_double"] == "unsupported" and got["eye_u8"] == "unsupported"
    assert got["nz_bool"] == "match" and got["eye_far"] == "match"
    assert statuses(data, "ort") == dict.fromkeys(statuses(data, "ort"), "match")
    assert statuses(data, "cpu") == dict.fromkeys(statuses(data, "cpu"), "match")
    assert statuses(data, "ort-cpu")["nz_scalar"] == "deviation"
    assert "verdict: no mismatch (1 deviation, 2 unsupported); PARTIAL: ort-cpu (nodes " in out
    assert "outputs nz_double, eye_u8 not compared)" in out or "outputs eye_u8, nz_double not compared)" in out


def test_unavailable_backend_is_one_line_and_the_others_run(tmp_path, capsys):
    code, data, out = report(tmp_path, [MASKED, "--backends", "cpu,ort-dml"], capsys)
    assert code == 0 and [b["backend"] for b in data["backends"]] == ["cpu"]
    assert "DmlExecutionProvider is not available" in data["unavailable_backends"]["ort-dml"]
    assert sum("UNAVAILABLE" in line for line in out.splitlines()) == 1


def test_an_unknown_provider_is_a_usage_error(capsys):
    code, out, err = cli(["check", MASKED, "--backends", "cpu,ort:NoSuchExecutionProvider"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "NoSuchExecutionProvider" in err and "CPUExecutionProvider" in err


def test_ort_provider_backend_reports_who_ran_each_node(tmp_path, capsys):
    code, data, out = report(tmp_path, [MASKED, "--backends", "ort:CPUExecutionProvider"], capsys)
    assert code == 0
    (backend,) = data["backends"]
    model = onnx.load(MASKED)
    assert set(backend["node_providers"]) <= {n.name for n in model.graph.node}
    nonzero = [n.name for n in model.graph.node if n.op_type == "NonZero"]
    assert all(backend["node_providers"][n] == "CPUExecutionProvider" for n in nonzero)


@pytest.mark.parametrize("oracle", ["reference", "ort-cpu", "hybrid"])
def test_oracle_choice_is_in_the_report(oracle, tmp_path, capsys):
    code, data, out = report(tmp_path, [MASKED, "--oracle", oracle], capsys)
    assert code == 0 and data["oracle"]["kind"] == oracle
    assert data["oracle"]["description"] in out.splitlines()[0]


def test_iterations_check_several_seeded_feed_sets(tmp_path, capsys):
    code, data, out = report(tmp_path, [MASKED, "--iterations", 3, "--seed", 5], capsys)
    assert code == 0 and data["iterations"] == 3
    outputs = data["backends"][0]["outputs"]
    assert sorted({o["iteration"] for o in outputs}) == [0, 1, 2] and len(outputs) == 3 * 2
    assert "[cpu #2]" in out
    code, _, err = cli(["check", MASKED, "--iterations", 0], capsys)
    assert code == 2 and "--iterations" in err


def gather_at_input_model() -> onnx.ModelProto:
    """NonZero of x, and Gather of a 3-element table at a fed index: an index past 2 is a feed set
    no ONNX engine evaluates."""
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz"),
             h.make_node("Gather", ["table", "i"], ["g"], name="gather")]
    return graph_model(nodes, [("x", T.FLOAT, [4]), ("i", T.INT64, [])], [("nz", T.INT64, 2), ("g", T.FLOAT, [])],
                       initializers={"table": np.array([10.0, 20.0, 30.0], np.float32)})


def seed_before_a_bad_index(model: onnx.ModelProto) -> "tuple[int, int]":
    """A seed whose feed set evaluates, and how many sets from it do before an index past 2."""
    from onnx_dml_lowering.runtime.feeds import random_feeds
    inputs = list(model.graph.input)
    index = [int(random_feeds(inputs, seed=s, value_range=(0, 5))["i"]) for s in range(40)]
    seed = next(s for s in range(39) if index[s] <= 2 and index[s + 1] > 2)
    return seed, next(n for n in range(1, 6) if index[seed + n] > 2)


def test_iterations_stop_at_a_feed_set_the_oracle_cannot_evaluate(tmp_path, capsys):
    """The failing set is named with its seed; the report covers the sets before it (exit 2)."""
    model = gather_at_input_model()
    path = tmp_path / "g.onnx"
    onnx.save(model, path)
    seed, good = seed_before_a_bad_index(model)          # sets seed .. seed+good-1 evaluate
    out_json = tmp_path / "r.json"
    code, out, err = cli(["check", path, "--val-range", "0,5", "--seed", seed, "--iterations", good + 2,
                          "--json", out_json], capsys)
    assert code == 2 and err.count("\n") == 1, err
    sets = "feed set #0" if good == 1 else f"feed sets #0-#{good - 1}"
    assert err.startswith(f"dml-lower: error: feed set #{good} (seed {seed + good}): ") and "gather" in err
    assert err.rstrip().endswith(f"(the report covers {sets})")
    data = json.loads(out_json.read_text())
    assert data["iterations"] == good and data["stopped"] in err and data["ok"] is False
    assert sorted({o["iteration"] for o in data["backends"][0]["outputs"]}) == list(range(good))
    assert "Traceback" not in err and ("[cpu #0]" if good > 1 else "[cpu]") in out
    checked = f"{good} feed set{'s' if good > 1 else ''} checked"
    assert f"verdict: all outputs match ONNX semantics; {checked}, then stopped at feed set #{good} (seed" in out


def test_a_check_the_oracle_cannot_evaluate_still_saves_its_inputs(tmp_path, capsys):
    """The feeds of a failed check are the ones needed to reproduce it: --save-inputs writes them
    and the one-line error says where; replayed with --inputs they fail the same way."""
    model = gather_at_input_model()
    path = tmp_path / "g.onnx"
    onnx.save(model, path)
    seed, good = seed_before_a_bad_index(model)
    saved = tmp_path / "in.npz"
    code, out, err = cli(["check", path, "--val-range", "0,5", "--seed", seed + good, "--save-inputs", saved], capsys)
    assert code == 2 and err.count("\n") == 1 and "gather" in err
    assert err.rstrip().endswith(f"(the inputs are saved in {saved})")
    with np.load(saved) as data:
        assert int(data["i"]) > 2 and set(data.files) == {"x", "i"}
    code, _, again = cli(["check", path, "--inputs", saved], capsys)
    assert code == 2 and again.strip() == err.split(" (the inputs")[0]


def test_a_mismatch_before_the_stop_stays_a_failure(tmp_path, capsys):
    """onnxruntime's NonZero of a 0-d input, transposed as torch.nonzero does, mismatches at every
    set; a later set the oracle cannot evaluate still stops the run, and the exit code is 1."""
    nodes = [h.make_node("NonZero", ["s"], ["nz"], name="nz"),
             h.make_node("Transpose", ["nz"], ["t"], name="t", perm=[1, 0]),
             h.make_node("Gather", ["table", "i"], ["g"], name="gather")]
    model = graph_model(nodes, [("s", T.FLOAT, []), ("i", T.INT64, [])], [("t", T.INT64, 2), ("g", T.FLOAT, [])],
                        initializers={"table": np.array([10.0, 20.0, 30.0], np.float32)})
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    seed, good = seed_before_a_bad_index(model)
    out_json = tmp_path / "r.json"
    code, out, err = cli(["check", path, "--backends", "ort-cpu", "--val-range", "0,5", "--seed", seed,
                          "--iterations", good + 1, "--json", out_json], capsys)
    assert code == 1 and err.startswith(f"dml-lower: error: feed set #{good} (seed {seed + good}): "), (code, err)
    data = json.loads(out_json.read_text())
    assert data["ok"] is False and data["stopped"] and data["iterations"] == good
    assert any(o["status"] == "mismatch" for o in data["backends"][0]["outputs"])
    assert "verdict: FAILED: " in out and f"then stopped at feed set #{good}" in out


@pytest.mark.parametrize("fraction, nnz", [(1.0, 0), (0.0, 24)])
def test_zero_fraction_gives_empty_and_full_inputs(fraction, nnz, tmp_path, capsys):
    inputs = tmp_path / "in.npz"
    code, data, _ = report(tmp_path, [MASKED, "--zero-fraction", fraction, "--val-range", "1,5",
                                      "--save-inputs", inputs], capsys)
    assert code == 0
    coords = next(o for o in data["backends"][0]["outputs"] if o["output"] == "coords")
    with np.load(inputs) as feeds:
        x = feeds["x"]
    assert np.all((x == 0) | ((x >= 1) & (x <= 5)))
    assert np.count_nonzero(x) == nnz
    assert coords["expected_shape"] == [3, int(reference(MASKED, {"x": x})["coords"].shape[1])]


@pytest.mark.parametrize("quiet", [False, True])
def test_a_check_whose_nonzero_never_returned_a_coordinate_says_so(quiet, tmp_path, capsys):
    """All-zero feeds leave NonZero empty: the outputs match, but nothing was compared, and the report
    says it (text, -q, JSON, Markdown); one feed set with a non-zero element clears it."""
    nonzero = [n.name for n in onnx.load(MASKED).graph.node if n.op_type == "NonZero"]
    md = tmp_path / "r.md"
    flags = ["-q"] if quiet else []
    code, data, out = report(tmp_path, [MASKED, "--zero-fraction", 1.0, "--markdown", md, *flags], capsys)
    assert code == 0 and data["empty_nonzero"] == nonzero and nonzero
    line = next(line for line in out.splitlines() if "note:" in line)
    assert "returned no coordinate at this feed set, so no coordinate was compared" in line and nonzero[0] in line
    assert "no coordinate was compared" in md.read_text()
    assert out.rstrip().splitlines()[-3 if quiet else -4].startswith("verdict: all outputs match")
    assert out.rstrip().splitlines()[-2:] == [f"wrote {tmp_path / 'r.json'}", f"wrote {md}"]
    # Seeds 0..2 with one zero fraction each: the report lists the node only if every set left it empty.
    code, data, out = report(tmp_path, [MASKED, "--zero-fraction", 0.5, "--iterations", 3, *flags], capsys)
    assert code == 0 and data["empty_nonzero"] == [] and "no coordinate" not in out


def test_the_empty_nonzero_note_keeps_names_and_counts_bodies(tmp_path, capsys):
    """The Markdown note shows node names as they are; a NonZero inside an If body that returned
    coordinates means some were compared, so the main graph's empty NonZero gets no note; one set of
    three with a non-zero element clears the note."""
    then = h.make_graph([h.make_node("NonZero", ["y"], ["inner"], name="Inner_NZ")], "then", [],
                        [h.make_tensor_value_info("inner", T.INT64, [1, None])])
    nodes = [h.make_node("NonZero", ["x"], ["outer"], name="Outer_NZ"),
             h.make_node("If", ["c"], ["z"], name="If_Node", then_branch=then, else_branch=then)]
    model = graph_model(nodes, [("x", T.FLOAT, [4]), ("y", T.FLOAT, [4]), ("c", T.BOOL, [])],
                        [("outer", T.INT64, 2), ("z", T.INT64, 2)])
    path = tmp_path / "if.onnx"
    onnx.save(model, path)
    feeds = tmp_path / "f.npz"
    np.savez(feeds, x=np.zeros(4, np.float32), y=np.ones(4, np.float32), c=np.array(True))
    code, data, out = report(tmp_path, [path, "--inputs", feeds], capsys)
    assert code == 0 and data["empty_nonzero"] == [] and "no coordinate" not in out
    del model.graph.node[1]
    del model.graph.output[1]
    onnx.save(model, path)
    md = tmp_path / "r.md"
    code, data, out = report(tmp_path, [path, "--inputs", feeds, "--markdown", md], capsys)
    assert code == 0 and data["empty_nonzero"] == ["Outer_NZ"]
    assert "The NonZero node (Outer\\_NZ) returned no coordinate at this feed set" in md.read_text()   # _ escaped
    code, data, _ = report(tmp_path, [path, "--zero-fraction", 1.0, "--iterations", 3], capsys)
    assert data["empty_nonzero"] == ["Outer_NZ"]
    from onnx_dml_lowering.runtime.feeds import random_feeds
    sets = [random_feeds(list(model.graph.input), seed=s, zero_fraction=0.9) for s in range(40)]
    seed = next(s for s in range(38) if not sets[s]["x"].any() and sets[s + 1]["x"].any())
    code, data, _ = report(tmp_path, [path, "--zero-fraction", 0.9, "--seed", seed, "--iterations", 2], capsys)
    assert data["empty_nonzero"] == [] and data["iterations"] == 2


def loop_nonzero_model() -> onnx.ModelProto:
    """A Loop of M iterations whose body's NonZero reads x * i (iteration i): zero at i = 0."""
    body = h.make_graph(
        [h.make_node("Cast", ["i"], ["f"], name="to_float", to=T.FLOAT),
         h.make_node("Mul", ["x", "f"], ["scaled"], name="scale"),
         h.make_node("NonZero", ["scaled"], ["nz"], name="Body_NZ"),
         h.make_node("Shape", ["nz"], ["count"], name="count"),          # one shape every iteration
         h.make_node("Identity", ["c_in"], ["c_out"], name="keep_going")], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, [])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("count", T.INT64, [2])])
    return graph_model([h.make_node("Loop", ["M", ""], ["stacked"], name="Loop_Node", body=body)],
                       [("x", T.FLOAT, [4]), ("M", T.INT64, [])], [("stacked", T.INT64, 2)], opset=17)


@pytest.mark.parametrize("trips, empty", [(1, "returned no coordinate"), (0, "never ran"), (3, "")])
def test_a_nonzero_inside_a_loop_counts_every_iteration(trips, empty, tmp_path, capsys):
    """A NonZero only inside a Loop body: with one iteration (i = 0: x * 0) it gave no coordinate
    and the note names it by its path (nothing was said); with none it never ran, and the note says
    that, not to feed non-zeros; with three, iterations 1 and 2 gave some, so coordinates were
    compared."""
    path = tmp_path / "loop.onnx"
    onnx.save(loop_nonzero_model(), path)
    feeds = tmp_path / "f.npz"
    np.savez(feeds, x=np.array([1, 0, 2, 0], np.float32), M=np.array(trips, np.int64))
    code, data, out = report(tmp_path, [path, "--inputs", feeds, "--backends", "cpu,ort-cpu"], capsys)
    assert code == 0, out
    assert data["empty_nonzero"] == (["Loop_Node/body/Body_NZ"] if empty else [])
    assert data["nonzero_never_ran"] == (["Loop_Node/body/Body_NZ"] if trips == 0 else [])
    note = [line for line in out.splitlines() if "note: the NonZero node" in line]
    assert [line.split(") ", 1)[1].split(" at ")[0] for line in note] == ([empty] if empty else [])
    assert ("feed non-zeros with" in out) is (trips == 1)
    assert ("feed values that take the branch or run the body that holds it" in out) is (trips == 0)


def test_the_empty_nonzero_note_names_the_ones_that_never_ran(tmp_path, capsys):
    """An empty main-graph NonZero beside one in an If branch not taken: both gave no coordinate,
    and the note says which never ran."""
    then = h.make_graph([h.make_node("Identity", ["y"], ["same"], name="Pass")], "then", [],
                        [h.make_tensor_value_info("same", T.FLOAT, [4])])
    other = h.make_graph([h.make_node("NonZero", ["y"], ["inner"], name="Inner_NZ"),
                          h.make_node("Cast", ["inner"], ["cast"], name="ToFloat", to=T.FLOAT),
                          h.make_node("ReduceSum", ["cast"], ["total"], name="Total", keepdims=0),
                          h.make_node("Expand", ["total", "four"], ["spread"], name="Spread")], "else", [],
                         [h.make_tensor_value_info("spread", T.FLOAT, [4])])
    nodes = [h.make_node("NonZero", ["x"], ["outer"], name="Outer_NZ"),
             h.make_node("If", ["c"], ["z"], name="If_Node", then_branch=then, else_branch=other)]
    model = graph_model(nodes, [("x", T.FLOAT, [4]), ("y", T.FLOAT, [4]), ("c", T.BOOL, [])],
                        [("outer", T.INT64, 2), ("z", T.FLOAT, 1)])
    model.graph.initializer.append(h.make_tensor("four", T.INT64, [1], [4]))
    path = tmp_path / "if.onnx"
    onnx.save(model, path)
    feeds = tmp_path / "f.npz"
    np.savez(feeds, x=np.zeros(4, np.float32), y=np.zeros(4, np.float32), c=np.array(True))
    code, data, out = report(tmp_path, [path, "--inputs", feeds], capsys)
    assert code == 0, out
    assert data["empty_nonzero"] == ["Outer_NZ", "If_Node/else_branch/Inner_NZ"]
    assert data["nonzero_never_ran"] == ["If_Node/else_branch/Inner_NZ"]
    assert ("note: all 2 NonZero nodes (Outer_NZ, If_Node/else_branch/Inner_NZ) returned no coordinate at this "
            "feed set (If_Node/else_branch/Inner_NZ never ran: an If branch not taken, or a Loop / Scan body "
            "that did not iterate), so no coordinate was compared; feed non-zeros with") in out


def test_intermediate_outputs_by_name(tmp_path, capsys):
    model = onnx.load(MASKED)
    inner = [o for n in model.graph.node for o in n.output if o not in {x.name for x in model.graph.output}]
    code, data, _ = report(tmp_path, [MASKED, "--outputs", inner[0], "--backends", "cpu,ort-cpu"], capsys)
    assert code == 0 and inner[0] in statuses(data, "cpu") and inner[0] in statuses(data, "ort-cpu")
    code, data, _ = report(tmp_path, [MASKED, "--outputs", "all"], capsys)
    assert code == 0 and set(inner) <= set(statuses(data, "cpu"))
    code, _, err = cli(["check", MASKED, "--outputs", "no_such_value"], capsys)
    assert code == 2 and "no_such_value" in err


def test_saved_outputs_replay_as_oracle_and_as_loaded_backend(tmp_path, capsys):
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    code, _, _ = cli(["check", MASKED, "--backends", "cpu,ort-cpu", "--seed", 4, "--save-inputs", inputs,
                      "--save-outputs", outputs], capsys)
    assert code == 0
    with np.load(outputs) as saved:
        keys = set(saved.files)
    assert {"coords", "selected", "cpu:coords", "ort-cpu:selected"} <= keys
    code, data, _ = report(tmp_path, [MASKED, "--inputs", inputs, "--oracle", outputs], capsys)
    assert code == 0 and data["oracle"]["kind"] == "golden"
    code, data, _ = report(tmp_path, [MASKED, "--inputs", inputs, "--load-outputs", outputs], capsys)
    assert code == 0 and statuses(data, "saved:ort-cpu") == {"coords": "match", "selected": "match"}
    # A tampered saved output is a MISMATCH with its errors on the line.
    with np.load(outputs) as saved:
        tampered = {k: saved[k] for k in saved.files}
    tampered["ort-cpu:selected"] = tampered["ort-cpu:selected"] + 1
    np.savez(outputs, **tampered)
    code, out, _ = cli(["check", MASKED, "--inputs", inputs, "--load-outputs", outputs], capsys)
    line = next(line for line in out.splitlines() if "[saved:ort-cpu] selected" in line)
    assert code == 1 and "MISMATCH" in line and "max abs err 1" in line


def bf16_model() -> onnx.ModelProto:
    nodes = [h.make_node("Cast", ["x"], ["f"], name="cast", to=T.FLOAT),
             h.make_node("NonZero", ["f"], ["nz"], name="nz"),
             h.make_node("Relu", ["x"], ["r"], name="relu")]
    return graph_model(nodes, [("x", T.BFLOAT16, ["n", 6])], [("nz", T.INT64, 2), ("r", T.BFLOAT16, ["n", 6])],
                       opset=14)


def test_bfloat16_feeds_random_npz_and_python(tmp_path, capsys, rng):
    path = save(bf16_model(), tmp_path)
    code, data, _ = report(tmp_path, [path, "--backends", "cpu,ort-cpu", "--dim", "n=5",
                                      "--provider-model", "modified"], capsys)
    assert code == 0 and statuses(data, "cpu") == {"nz": "match", "r": "match"}
    x = (rng.standard_normal((3, 6)) * (rng.random((3, 6)) < 0.5)).astype(ml_dtypes.bfloat16)
    feeds = tmp_path / "bf16.npz"
    np.savez(feeds, x=x)                         # stored as raw 2-byte records
    code, data, _ = report(tmp_path, [path, "--inputs", feeds, "--backends", "cpu,ort-cpu",
                                      "--provider-model", "modified"], capsys)
    assert code == 0 and data["ok"]
    ours = compile_model(path).run({"x": x})
    assert ours["r"].dtype == ml_dtypes.bfloat16
    assert_outputs_same(ours, reference(bf16_model(), {"x": x}))


def test_a_tolerance_naming_no_output_is_a_usage_error(capsys):
    code, out, err = cli(["check", MASKED, "--atol", "no_such_output=1e-3"], capsys)
    assert code == 2 and out == "" and "no_such_output" in err and "coords" in err


def test_version_and_quiet(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("dml-lower 0.")
    code, out, _ = cli(["check", MASKED, "-q"], capsys)
    assert code == 0 and out.splitlines() == ["verdict: all outputs match ONNX semantics"]


def test_a_closed_pipe_ends_quietly(tmp_path):
    env = dict(os.environ, DML_LOWER_STRICT="1")
    proc = subprocess.run(f"{sys.executable} -m onnx_dml_lowering.compiler compile {EDGE} | head -1",
                          shell=True, capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.startswith("graph") and proc.stderr == ""


def test_external_data_resolves_relative_to_the_model_and_a_missing_file_is_named(tmp_path, capsys):
    model = graph_model([h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                         h.make_node("NonZero", ["m"], ["y"], name="nz")],
                        [("x", T.FLOAT, [2, 64])], [("y", T.INT64, 2)], {"w": np.eye(64, dtype=np.float32)})
    folder = tmp_path / "model"
    folder.mkdir()
    onnx.save(model, folder / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    cwd = os.getcwd()
    os.chdir(tmp_path)                            # not the model's folder
    try:
        code, out, err = cli(["check", folder / "m.onnx"], capsys)
        assert code == 0, err
        (folder / "m.data").unlink()
        code, out, err = cli(["check", folder / "m.onnx"], capsys)
    finally:
        os.chdir(cwd)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "m.data" in err and "'w'" in err


def test_a_model_with_nothing_to_lower_says_so_as_inspect_does(tmp_path, capsys):
    path = tmp_path / "relu.onnx"
    onnx.save(graph_model([h.make_node("Relu", ["x"], ["y"], name="relu")], [("x", T.FLOAT, [3])],
                          [("y", T.FLOAT, [3])]), path)
    code, out, _ = cli(["check", path], capsys)
    assert code == 0
    assert "  nothing lowered: no NonZero, EyeLike or Trilu node, and no idiom pattern matched" in out.splitlines()
    code, out, _ = cli(["inspect", path], capsys)
    assert "no NonZero, EyeLike or Trilu node, and no idiom pattern matched" in out


@pytest.mark.parametrize("command, outputs, line", [
    ("check", ["y", "cpu:y"], "--save-outputs: the model's output 'cpu:y' and backend cpu's output 'y' would both "
                              "be saved as 'cpu:y'"),
    ("check", ["y", "__saved_by__"], "--save-outputs: the model's output '__saved_by__' and the file's own "
                                     "'__saved_by__' entry would both be saved as '__saved_by__'"),
    ("run", ["y", "__feeds_sha256__"], "--save-outputs: the model's output '__feeds_sha256__' and the file's own "
                                       "'__feeds_sha256__' entry would both be saved as '__feeds_sha256__'"),
])
def test_saved_outputs_never_drop_a_value_whose_key_is_taken(command, outputs, line, tmp_path, capsys):
    """A file holds each key once: an output named like a backend's entry ('cpu:y') or like the
    file's metadata would silently replace a value (a later --oracle then gave a false MISMATCH)."""
    nodes = [h.make_node("EyeLike", ["x"], [outputs[0]], name="eye"),
             h.make_node("Trilu", ["x"], [outputs[1]], name="tri")]
    path = tmp_path / "m.onnx"
    onnx.save(graph_model(nodes, [("x", T.FLOAT, [3, 3])], [(o, T.FLOAT, [3, 3]) for o in outputs], opset=17), path)
    saved = tmp_path / "o.npz"
    code, out, err = cli([command, path, "--backends", "cpu", "--save-outputs", saved], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"dml-lower: error: {line}"), err
    assert not saved.exists()


def test_outputs_named_with_colons_load_back_as_saved(tmp_path, capsys):
    """tf2onnx names outputs 'y:0': a saved check file splits BACKEND:OUTPUT at an output it holds,
    not at the last colon (which read 'cpu:y:0' as backend 'cpu:y', output '0')."""
    path = tmp_path / "m.onnx"
    onnx.save(graph_model([h.make_node("NonZero", ["x"], ["y:0"], name="nz")], [("x", T.FLOAT, [5])],
                          [("y:0", T.INT64, [1, None])]), path)
    saved, out_json = tmp_path / "o.npz", tmp_path / "r.json"
    code, _, err = cli(["check", path, "--backends", "cpu,ort", "--save-outputs", saved], capsys)
    assert code == 0, err
    code, out, err = cli(["check", path, "--backends", "cpu", "--load-outputs", saved, "--json", out_json], capsys)
    assert code == 0, out + err
    backends = {b["backend"]: [o["output"] for o in b["outputs"]] for b in json.loads(out_json.read_text())["backends"]}
    assert backends == {"cpu": ["y:0"], "saved:cpu": ["y:0"], "saved:ort": ["y:0"], "saved:oracle": ["y:0"]}


def test_save_inputs_saves_the_feed_set_that_failed(tmp_path, capsys):
    """A later feed set past the memory limit fails the check: --save-inputs writes that set (the
    one to reproduce it with) at its own file, in.1.npz, beside the first set's, and names it."""
    path = tmp_path / "m.onnx"
    onnx.save(graph_model([h.make_node("NonZero", ["x"], ["nz"], name="nz")], [("x", T.FLOAT, ["n"])],
                          [("nz", T.INT64, [1, None])]), path)
    loader = tmp_path / "dl.py"
    loader.write_text("import numpy as np\n"
                      "def load_data():\n"
                      "    yield {'x': np.ones(4, np.float32)}\n"
                      "    yield {'x': np.ones(200000, np.float32)}\n")
    saved = tmp_path / "in.npz"
    code, out, err = cli(["check", path, "--data-loader-script", loader, "--memory-limit", "1MiB",
                          "--save-inputs", saved], capsys)
    failed = tmp_path / "in.1.npz"
    assert code == 2 and "memory limit" in err and err.rstrip().endswith(f"(the inputs are saved in {failed})"), err
    with np.load(failed) as data:
        assert data["x"].shape == (200000,)
    with np.load(saved) as data:
        assert data["x"].shape == (4,)


def test_an_empty_nonzero_from_a_size_0_dimension_says_that_is_why(tmp_path, capsys):
    """--dim rows=0 feeds x empty: the note names the empty input and the dimension, not non-zero
    values as the remedy (a new user's --dim seq=0 was told to feed non-zeros)."""
    code, out, err = cli(["check", "tests/models/nonzero.dynamo.onnx", "--dim", "rows=0"], capsys)
    assert code == 0, err
    (note,) = [line for line in out.splitlines() if "note:" in line]
    assert note.endswith("returned no coordinate at this feed set, so no coordinate was compared; x fed empty "
                         "(a dimension of size 0: rows=0): to compare coordinates, give every dimension a size of "
                         "1 or more")
