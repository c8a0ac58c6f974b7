"""inspect --ep dml --verify: the prediction beside the real DML EP (onnxruntime.dll 1.24.4 in ort_host),
node by node, on the graph the real onnxruntime.dll optimised; the named Reshape deviation predicted."""
import json

import onnx
import pytest
from onnx import TensorProto, helper

from tests.builders import relu_then_unique
from onnx_dml_lowering.compiler.ep.verify import _failure, format_verified
from onnx_dml_lowering.runtime.dml_deviations import FAILURES
from tests.cli_runner import cli
from tests.paths import REPO

EXAMPLES = REPO / "compiler" / "examples"
directml = pytest.mark.directml


def inspect_json(capsys, tmp_path, model, *extra):
    out = tmp_path / "i.json"
    code, text, err = cli(["inspect", model, "--ep", "dml", "--json", out, *extra], capsys)
    assert code == 0, err
    return text, json.loads(out.read_text())["ep_placement"]


@directml
@pytest.mark.parametrize("name", ["exporter_idioms", "masked_select"])
def test_every_partitioned_node_agrees_on_the_shipped_examples(capsys, tmp_path, name):
    text, placement = inspect_json(capsys, tmp_path, EXAMPLES / f"{name}.onnx", "--verify")
    verified = placement["verified"]
    assert set(verified) == {"onnxruntime", "agree", "differ", "failure"} and verified["failure"] is None
    assert verified["onnxruntime"] == "1.24.4"
    partitioned = [n for n in placement["nodes"] if n["provider"] != "removed"]
    assert verified["agree"] == len(partitioned) > 0 and verified["differ"] == []
    assert "onnxruntime.dll 1.24.4" in placement["assumptions"]["level1_optimisations"]
    assert f"{len(partitioned)} of {len(partitioned)} nodes agree" in text
    # what the prediction could not know, the real EP's run settled: said so, not "not knowable"
    assert not [w for w in placement["warnings"] if w.startswith("not knowable")]
    (settled,) = [w for w in placement["warnings"] if w.startswith("verified on ")]
    assert "lavapipe" in settled and "its session was created and run" in settled


def mixed(tmp_path):
    """Relu the DML EP takes; Unique it has no kernel for (CPU)."""
    return relu_then_unique(tmp_path / "m.onnx")


@directml
def test_a_cpu_node_is_verified_on_the_cpu(capsys, tmp_path):
    text, placement = inspect_json(capsys, tmp_path, mixed(tmp_path), "--verify")
    providers = {n["node"]: n["provider"] for n in placement["nodes"]}
    assert providers == {"relu0": "DmlExecutionProvider", "uniq": "CPUExecutionProvider"}
    assert placement["verified"]["agree"] == 2 and placement["verified"]["differ"] == []


def reshape(tmp_path, dims):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu0"),
                               helper.make_node("Reshape", ["r", "s"], ["y"], name="flatten_rows", allowzero=1)],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])],
                              [helper.make_tensor("s", TensorProto.INT64, [2], [3, -1])])
    path = tmp_path / "r.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), path)
    return path


def test_the_reshape_deviation_is_predicted_as_a_warning_naming_the_node(capsys, tmp_path):
    text, placement = inspect_json(capsys, tmp_path, reshape(tmp_path, ["n", 3]))
    warned = [w for w in placement["warnings"] if w.startswith("flatten_rows (Reshape)")]
    assert len(warned) == 1 and FAILURES["reshape_allowzero_infer"].removeprefix("DML EP deviation: ") in warned[0]
    assert "warning: flatten_rows (Reshape)" in text
    assert placement["warnings"][-1].startswith("not knowable off Windows")      # nothing verified it


@directml
@pytest.mark.parametrize("dims,when", [([2, 3], "session creation"), (["n", 3], "the first run")])
def test_verify_shows_the_reshape_failure_where_it_happens(capsys, tmp_path, dims, when):
    text, placement = inspect_json(capsys, tmp_path, reshape(tmp_path, dims), "--verify")
    failure = [w for w in placement["warnings"] if w.startswith("verification: the real DML EP failed")]
    assert len(failure) == 1 and when in failure[0] and "flatten_rows" in failure[0]
    assert FAILURES["reshape_allowzero_infer"] in failure[0]
    stage = "session creation" if when == "session creation" else "first run"
    assert placement["verified"]["failure"] == {
        "stage": stage, "predicted": True, "deviation": f"{FAILURES['reshape_allowzero_infer']} (node flatten_rows)"}
    assert f"its {stage} failed, as predicted: {FAILURES['reshape_allowzero_infer']} (node flatten_rows)" in text
    (settled,) = [w for w in placement["warnings"] if w.startswith("verified on ")]
    assert ("its session creation failed, below" if when == "session creation" else "its first run failed, below") in settled


def test_a_real_failure_the_prediction_did_not_name_is_said_so():
    """_failure asks name_failure, the one reader of the DML EP's failures: a message that is no
    predicted failure of the model (here a Relu, which nothing predicts to fail) is 'NOT predicted'
    on the verified line, never 'as predicted', whatever the placement agreed on."""
    graph = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu0")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]), opset_imports=[helper.make_opsetid("", 14)])
    message = ("the first run (seeded random feeds): Non-zero status code returned while running Relu node. "
               "Name:'relu0' Status Message: 80070057 Invalid parameter.")
    failure = _failure(message, graph)
    assert failure == {"stage": "first run", "predicted": False, "deviation": None}
    report = {"verified": {"onnxruntime": "1.24.4", "agree": 1, "differ": [], "failure": failure},
              "nodes": [{"node": "relu0", "reason": ""}]}
    line = format_verified(report)[0]
    assert line.endswith("1 of 1 nodes agree on placement; its first run failed, which the prediction did NOT name "
                         "(the verification warning above says how)")
    assert _failure("", graph) is None


def test_verify_and_ort_version_need_ep_dml_and_a_known_table(capsys, tmp_path):
    path = EXAMPLES / "masked_select.onnx"
    code, out, err = cli(["inspect", path, "--verify"], capsys)
    assert code == 2 and "add --ep dml" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli(["inspect", path, "--ep", "dml", "--ort-version", "1.9.0"], capsys)
    assert code == 2 and "--ort-version 1.9.0" in err and "1.27.0" in err


def test_verify_without_the_setup_is_one_line_naming_make_directml(capsys, tmp_path):
    code, out, err = cli(["inspect", EXAMPLES / "masked_select.onnx", "--ep", "dml", "--verify"], capsys)
    assert code == 2 and "make directml" in err and len(err.strip().splitlines()) == 1
