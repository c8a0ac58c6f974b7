"""An empty graph output the DML EP produced ends onnxruntime's batched read-back of the run's
DML outputs (runtime/dml_deviations.unread_outputs): the others hold memory never written. Recognised
on synthetic outputs, and in a check of DML EP results (saved on Windows, loaded with --load-outputs):
the other DML outputs are the named DEVIATION whatever they hold, never a MISMATCH nor a MATCH."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.runtime.dml_deviations import Held, dml_produced_outputs, empty_output_risks, unread_outputs
from tests.cli_runner import cli

DML, CPU = "DmlExecutionProvider", "CPUExecutionProvider"
RNG = np.random.default_rng(20261128)
X = RNG.standard_normal((3, 5)).astype(np.float32)
GARBAGE = np.full((3, 5), 5.5e-38, np.float32)      # as measured: memory never written


def relu_nonzero(order=("y", "nz"), sigmoid=False, passthrough=False):
    """y = Relu(x), nz = NonZero(b) (and z = Sigmoid(x), x itself), outputs in `order`."""
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("NonZero", ["b"], ["nz"], name="nonzero")]
    outputs = {"y": h.make_tensor_value_info("y", T.FLOAT, [3, 5]), "nz": h.make_tensor_value_info("nz", T.INT64, [2, None]),
               "z": h.make_tensor_value_info("z", T.FLOAT, [3, 5]), "x": h.make_tensor_value_info("x", T.FLOAT, [3, 5])}
    if sigmoid:
        nodes.append(h.make_node("Sigmoid", ["x"], ["z"], name="sigmoid"))
        order = (*order, "z")
    if passthrough:
        order = (*order, "x")
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [3, 5]),
                                      h.make_tensor_value_info("b", T.BOOL, [3, 5])], [outputs[o] for o in order])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


EMPTY = np.zeros((2, 0), np.int64)


@pytest.mark.parametrize("order", [("y", "nz"), ("nz", "y")])
def test_every_dml_output_before_or_after_the_empty_one_is_unread(order):
    unread = unread_outputs(relu_nonzero(order, sigmoid=True), {"y": GARBAGE, "nz": EMPTY, "z": GARBAGE}, None)
    assert sorted(unread) == ["y", "z"]
    assert {u.empty for u in unread.values()} == {"nz"} and unread["y"].empty_type == "int64 [2x0]"
    line = unread["y"].describe()
    assert line == ("DML EP deviation: the empty output 'nz' (int64 [2x0]) ended onnxruntime's batched read-back "
                    "of the DML EP's outputs (ExecutionProviderImpl::CopyTensors), so 'y' holds memory never written")
    assert "happens to equal ONNX's answer bit for bit" in unread["z"].describe(Held.EQUAL)


def test_nothing_is_unread_when_no_dml_output_is_empty():
    assert unread_outputs(relu_nonzero(), {"y": np.maximum(X, 0), "nz": np.zeros((2, 1), np.int64)}, None) == {}


def test_outputs_the_cpu_ep_produced_are_not_in_the_batch():
    model = relu_nonzero(sigmoid=True)
    outputs = {"y": GARBAGE, "nz": EMPTY, "z": GARBAGE}
    # the empty output on the CPU EP: nothing of the DML EP's batch is empty
    assert unread_outputs(model, outputs, {"relu": DML, "nonzero": CPU, "sigmoid": DML}) == {}
    # Relu on the CPU EP: its output is in CPU memory already; only Sigmoid's is unread
    assert sorted(unread_outputs(model, outputs, {"relu": CPU, "nonzero": DML, "sigmoid": DML})) == ["z"]
    # a node the placement does not name (fused or renamed by onnxruntime) counts as the DML EP's
    assert sorted(unread_outputs(model, outputs, {"nonzero": DML})) == ["y", "z"]


def test_a_graph_input_returned_as_an_output_is_no_nodes():
    model = relu_nonzero(passthrough=True)
    assert dml_produced_outputs(model, None) == ["y", "nz"]
    assert sorted(unread_outputs(model, {"y": GARBAGE, "nz": EMPTY, "x": X}, None)) == ["y"]


def _saved_dml_check(tmp_path, capsys, b, y, x=X):
    """check --load-outputs of results saved for ort-dml (made from an ort-cpu save of the same feeds,
    its entries renamed and y replaced by `y`): (exit code, y's result, nz's result)."""
    onnx.save(relu_nonzero(), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "in.npz", x=x, b=b)
    code, _, err = cli(["check", tmp_path / "m.onnx", "--backends", "ort-cpu", "--inputs", tmp_path / "in.npz",
                        "--save-outputs", tmp_path / "s.npz"], capsys)
    assert code == 0, err
    saved = {k.replace("ort-cpu:", "ort-dml:"): v for k, v in np.load(tmp_path / "s.npz").items()}
    saved["ort-dml:y"] = y
    np.savez(tmp_path / "dml.npz", **saved)
    code, out, err = cli(["check", tmp_path / "m.onnx", "--backends", "cpu", "--inputs", tmp_path / "in.npz",
                          "--load-outputs", tmp_path / "dml.npz", "--json", tmp_path / "r.json"], capsys)
    report = json.loads((tmp_path / "r.json").read_text())
    results = {o["output"]: o for b in report["backends"] if b["backend"] == "saved:ort-dml" for o in b["outputs"]}
    return code, results["y"], results["nz"]


def test_check_names_the_unread_output_a_deviation(tmp_path, capsys):
    code, y, nz = _saved_dml_check(tmp_path, capsys, np.zeros((3, 5), bool), GARBAGE)
    assert (y["status"], nz["status"]) == ("deviation", "match") and code == 0
    assert y["detail"].startswith("DML EP deviation: the empty output 'nz' (int64 [2x0]) ended")


def test_an_unread_output_equal_to_onnx_by_chance_is_no_match(tmp_path, capsys):
    code, y, _ = _saved_dml_check(tmp_path, capsys, np.zeros((3, 5), bool), np.maximum(X, 0))
    assert y["status"] == "deviation" and "happens to equal ONNX's answer bit for bit" in y["detail"] and code == 0


@pytest.mark.parametrize("left, held", [
    (np.float32(1.4e-45), Held.WITHIN_TOLERANCE),       # a denormal left in never-written memory, as measured
    (np.float32(-0.0), Held.WITHIN_TOLERANCE),          # equal as numbers, not as bits
    (np.float32(0.0), Held.EQUAL),
    (np.float32(0.5), Held.OTHER)])
def test_an_unread_output_says_whether_it_equals_onnx_bit_for_bit_or_only_within_tolerance(tmp_path, capsys, left, held):
    """y = Relu(x) over x <= 0 is all zeros: memory never written holding a denormal or -0.0 passes
    the comparison within tolerance but is not ONNX's answer bit for bit; the line says which."""
    negative = -np.abs(X)
    code, y, _ = _saved_dml_check(tmp_path, capsys, np.zeros((3, 5), bool), np.full((3, 5), left, np.float32),
                                  x=negative)
    assert y["status"] == "deviation" and code == 0
    assert y["detail"].endswith(f"so 'y' {held.value}")
    assert ("bit for bit" in y["detail"]) == (held is not Held.OTHER)


def test_with_a_coordinate_found_a_wrong_output_stays_a_mismatch(tmp_path, capsys):
    b = np.zeros((3, 5), bool)
    b[1, 2] = True
    code, y, nz = _saved_dml_check(tmp_path, capsys, b, GARBAGE)
    assert (y["status"], nz["status"]) == ("mismatch", "match") and code == 1


def _downstream(op, **attrs):
    """nz = NonZero(b), w = op(nz) as a graph output beside y = Relu(x)."""
    model = relu_nonzero()
    model.graph.node.append(h.make_node(op, ["nz"], ["w"], name="after", **attrs))
    model.graph.output.pop()
    model.graph.output.append(h.make_tensor_value_info("w", T.UNDEFINED, None))
    return model


def test_the_prediction_names_an_output_that_can_be_empty_beside_other_dml_outputs():
    (risk,) = empty_output_risks(relu_nonzero(sigmoid=True), None)
    assert (risk.output, risk.node, risk.others) == ("nz", "nonzero", ("y", "z"))
    assert risk.describe().startswith("graph output 'nz' (NonZero node nonzero on the DML EP) can be empty at run time")
    # downstream of the NonZero with a data-dependent dimension: Transpose, Cast; Shape's is never empty
    assert [r.output for r in empty_output_risks(_downstream("Transpose"), None)] == ["w"]
    assert [r.output for r in empty_output_risks(_downstream("Cast", to=T.FLOAT), None)] == ["w"]
    assert empty_output_risks(_downstream("Shape"), None) == []


def test_no_prediction_without_another_dml_output():
    model = relu_nonzero()
    assert empty_output_risks(model, {"relu": CPU, "nonzero": DML}) == []      # y is the CPU EP's
    assert empty_output_risks(model, {"relu": DML, "nonzero": CPU}) == []      # nz is the CPU EP's
    del model.graph.output[0]
    assert empty_output_risks(model, None) == []                               # nz alone


def test_inspect_ep_dml_warns_of_it(tmp_path, capsys):
    onnx.save(relu_nonzero(), str(tmp_path / "m.onnx"))
    code, out, err = cli(["inspect", tmp_path / "m.onnx", "--ep", "dml"], capsys)
    assert code == 0, err
    lines = [line for line in out.splitlines() if "ExecutionProviderImpl::CopyTensors" in line]
    assert len(lines) == 1 and "graph output 'nz' (NonZero node nonzero on the DML EP) can be empty" in lines[0]
    assert lines[0].endswith("the other DML outputs (y), measured on onnxruntime-directml 1.24.4 "
                             "(a named DML EP deviation)")
