"""inspect --ep dml --verify: the prediction beside the real DML EP (onnxruntime.dll 1.24.4 in ort_host),
node by node, on the graph the real onnxruntime.dll optimised; the named Reshape deviation predicted."""
import json

import onnx
import pytest
from onnx import TensorProto, helper

from tests.builders import relu_then_unique
from onnx_dml_lowering.compiler.ep.placement import DML, NONE, predict_placement
from onnx_dml_lowering.compiler.ep.verify import _failure, format_verified
from onnx_dml_lowering.runtime.ort_messages import parse_provider_failure
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
    named = f"{FAILURES['reshape_allowzero_infer']} (node flatten_rows)"
    assert placement["verified"]["failure"] == {"stage": stage, "predicted": True, "deviation": named, "said": named}
    assert f"its {stage} failed as the prediction said: {named}" in text
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
    failure = _failure(message, graph, [{"node": "relu0", "op_type": "Relu", "since_version": 14,
                                         "provider": "DmlExecutionProvider"}])
    assert failure == {"stage": "first run", "predicted": False, "deviation": None, "said": None}
    report = {"verified": {"onnxruntime": "1.24.4", "agree": 1, "differ": [], "failure": failure},
              "nodes": [{"node": "relu0", "reason": ""}]}
    line = format_verified(report)[0]
    assert line.endswith("1 of 1 nodes agree on placement; its first run failed, which the prediction did NOT name "
                         "(the verification warning above says how)")
    assert _failure("", graph, []) is None


def no_provider_model(path):
    """NonZero over double (no DML nor CPU kernel) read by a Transpose, and a Constant: the
    local onnxruntime refuses it, so placement is predicted on the model as stored."""
    nodes = [helper.make_node("Constant", [], ["two"], name="const_two", value_float=2.0),
             helper.make_node("Mul", ["f", "two"], ["scaled"], name="scale"),
             helper.make_node("NonZero", ["x"], ["nz"], name="nonzero_double"),
             helper.make_node("Transpose", ["nz"], ["coords"], name="coords")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4, 4]),
                                           helper.make_tensor_value_info("f", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("scaled", TensorProto.FLOAT, [4]),
                               helper.make_tensor_value_info("coords", TensorProto.INT64, ["n", 2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


# onnxruntime.dll 1.24.4's DML session on a node no provider took (its copy pass), as --verify records it
MEMCPY_REFUSAL = ("session creation: Exception during initialization: E:\\_work\\1\\s\\onnxruntime\\core\\optimizer\\"
                  "transformer_memcpy.cc:254 onnxruntime::TransformerMemcpyImpl::IsNodeCompatibleWithProvider "
                  "!node_provider_type.empty() was false. Provider type for NonZero node with name '{node}' is not set.")


def verdict(nodes, message):
    """The verified line for a session the real EP could not create, over the predicted `nodes`."""
    failure = _failure(message, onnx.ModelProto(), nodes)
    return failure, format_verified({"verified": {"onnxruntime": "1.24.4", "agree": 0, "differ": [],
                                                  "failure": failure}, "nodes": nodes})[0]


@pytest.mark.parametrize("message", [MEMCPY_REFUSAL, "session creation: [ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : "
                                     "Could not find an implementation for NonZero(13) node with name '{node}'"])
def test_a_session_failure_on_a_node_predicted_on_no_provider_is_said_to_be_predicted(tmp_path, message):
    """The real EP's message parsed (ort_messages) names the node the prediction put on no provider:
    the verified line says the prediction named it, and names the node as the prediction did."""
    placement = predict_placement(onnx.load(no_provider_model(tmp_path / "n.onnx")), str(tmp_path))
    (unplaced,) = [n for n in placement["nodes"] if n["provider"] == NONE]
    failure, line = verdict(placement["nodes"], message.format(node=unplaced["node"]))
    assert failure["predicted"] and failure["deviation"] is None
    assert line.endswith(f"; its session creation failed as the prediction said: {failure['said']}")
    assert failure["said"].startswith(f"{unplaced['node']} ({unplaced['op_type']}-{unplaced['since_version']}) ")
    # the same message naming a node the prediction placed is a prediction error
    placed = next(n for n in placement["nodes"] if n["provider"] == DML)
    failure, line = verdict(placement["nodes"], message.format(node=placed["node"]))
    assert not failure["predicted"] and line.endswith("its session creation failed, which the prediction did NOT name "
                                                      "(the verification warning above says how)")
    # a prediction that placed every node did not name a failure for want of a provider
    placed_all = [dict(n, provider=DML) if n["provider"] == NONE else n for n in placement["nodes"]]
    assert not verdict(placed_all, message.format(node=unplaced["node"]))[0]["predicted"]


@directml
def test_verify_says_the_session_failure_it_predicted_for_a_node_no_provider_takes(capsys, tmp_path):
    text, placement = inspect_json(capsys, tmp_path, no_provider_model(tmp_path / "n.onnx"), "--verify")
    (warned,) = [w for w in placement["warnings"] if w.startswith("verification: the real DML EP failed")]
    named = parse_provider_failure(warned)
    assert named is not None and named.node
    providers = {n["node"]: n["provider"] for n in placement["nodes"]}
    assert providers[named.node] == NONE and list(providers.values()).count(NONE) == 1
    failure = placement["verified"]["failure"]
    assert failure["stage"] == "session creation" and failure["predicted"] and named.node in failure["said"]
    assert f"its session creation failed as the prediction said: {failure['said']}" in text
    assert "did NOT name" not in text


def test_verify_and_ort_version_need_ep_dml_and_a_known_table(capsys, tmp_path):
    path = EXAMPLES / "masked_select.onnx"
    code, out, err = cli(["inspect", path, "--verify"], capsys)
    assert code == 2 and "add --ep dml" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli(["inspect", path, "--ep", "dml", "--ort-version", "1.9.0"], capsys)
    assert code == 2 and "--ort-version 1.9.0" in err and "1.27.0" in err


def test_verify_without_the_setup_is_one_line_naming_make_directml(capsys, tmp_path):
    code, out, err = cli(["inspect", EXAMPLES / "masked_select.onnx", "--ep", "dml", "--verify"], capsys)
    assert code == 2 and "make directml" in err and len(err.strip().splitlines()) == 1
