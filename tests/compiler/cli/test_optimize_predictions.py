"""optimize --for dml warns, in the prediction's own words (inspect --ep dml), when the model it
writes is predicted not to load on the DML EP; optimize words a rewrite that grows the file as
growth; check's ERROR for a shipped file onnxruntime cannot load for want of a kernel names the
option that runs the rest."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.ep.placement import NONE, no_provider_warning, predict_placement
from onnx_dml_lowering.compiler.optimize.rewrite import Rewrite
from onnx_dml_lowering.compiler.saving import saving
from onnx_dml_lowering.runtime.check import Tolerances, check
from tests.builders import graph_model


def eye_of_shape(eye_input: int) -> onnx.ModelProto:
    """TorchScript's torch.eye(n, dtype=...) as masked_fill at opset 20: EyeLike over a
    ConstantOfShape of `eye_input`. The DML EP has no ConstantOfShape-20, so the EyeLike reading it
    goes to the CPU, whose EyeLike lacks bool: no provider takes a bool one (the trial's eye_bool)."""
    value = h.make_tensor("v", eye_input, [1], [0])
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("ConstantOfShape", ["s"], ["c"], name="fill", value=value),
             h.make_node("EyeLike", ["c"], ["e"], name="eye"),
             h.make_node("Cast", ["e"], ["m"], name="cast", to=T.BOOL),
             h.make_node("Where", ["m", "zero", "x"], ["y"], name="where")]
    return graph_model(nodes, [("x", T.FLOAT, ["n", "n"])], [("y", T.FLOAT, ["n", "n"])],
                       {"zero": np.array(0.0, np.float32)}, opset=20)


@pytest.mark.parametrize("eye_input,fails", [(T.BOOL, True), (T.FLOAT, False), (T.INT32, False)])
def test_for_dml_warns_of_a_predicted_load_failure(eye_input, fails, tmp_path, capsys):
    model_path, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(eye_of_shape(eye_input), model_path)
    assert main(["optimize", str(model_path), "--for", "dml", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.exists()
    # the prediction, independently: the nodes no provider takes in the model written
    report = predict_placement(onnx.load(out), str(tmp_path))
    none = [e for e in report["nodes"] if e["provider"] == NONE]
    assert bool(none) == fails
    warnings = [line for line in printed.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == len(none)
    for line, entry in zip(warnings, none):
        words = no_provider_warning(entry["node"], entry["op_type"])
        assert words in report["warnings"]          # the very words inspect --ep dml prints
        assert line == (f"warning: the rewritten model is predicted not to load on the DML EP (onnxruntime "
                        f"{report['onnxruntime']}): {words}; why: {entry['reason']}")


@pytest.mark.parametrize("saved,nodes,says", [
    (4011, -4, "4011 bytes saved, -4 nodes"), (0, 1, "0 bytes saved, +1 nodes"),
    (-55, -2, "55 bytes more, -2 nodes"), (-1, 3, "1 bytes more, +3 nodes")])
def test_a_saving_that_is_growth_is_said_as_growth(saved, nodes, says):
    assert saving(saved, nodes) == says
    assert Rewrite("mask m", "Trilu", saved, nodes).line() == f"mask m -> Trilu: {says}"
    assert saving(saved) == says.split(",")[0]


def bool_eyelike() -> onnx.ModelProto:
    """EyeLike over a bool input: onnxruntime's CPU provider has no kernel for it."""
    nodes = [h.make_node("EyeLike", ["b"], ["e"], name="eye"),
             h.make_node("Relu", ["x"], ["y"], name="relu")]
    return graph_model(nodes, [("b", T.BOOL, [3, 3]), ("x", T.FLOAT, [3])], [("e", T.BOOL, [3, 3]), ("y", T.FLOAT, [3])])


def test_a_missing_kernel_points_to_the_modified_provider_model(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(bool_eyelike(), path)
    feeds = {"b": np.zeros((3, 3), bool), "x": np.arange(3, dtype=np.float32) - 1}
    _, shipped = check(compile_model(str(path)), feeds, ["cpu", "ort-cpu"], Tolerances())
    cpu, ort_cpu = shipped.backends
    assert not cpu.error and "NOT_IMPLEMENTED" in ort_cpu.error and "EyeLike" in ort_cpu.error
    assert ort_cpu.error.endswith("; --provider-model modified cuts out each node without a kernel (eye here), "
                                  "computes its values by ONNX semantics and runs the rest on CPUExecutionProvider")
    from onnx_dml_lowering.runtime.backends import BackendOptions
    _, modified = check(compile_model(str(path)), feeds, ["ort-cpu"], Tolerances(),
                        BackendOptions(provider_model="modified"))
    (backend,) = modified.backends
    assert not backend.error and backend.is_partial and "eye" in backend.unsupported_nodes


def test_a_load_failure_that_is_no_missing_kernel_points_nowhere():
    from onnx_dml_lowering.runtime.backends import _cuttable
    from onnx_dml_lowering.runtime.ort_messages import ProviderLoadError, parse_provider_failure
    model = bool_eyelike()

    def error(message: str) -> ProviderLoadError:
        return ProviderLoadError(message, "CPUExecutionProvider", message, parse_provider_failure(message))
    missing = "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for EyeLike(9) node with name '{}'"
    assert _cuttable(error(missing.format("eye")), model) == "eye"
    assert _cuttable(error(missing.format("not_in_model")), model) is None
    assert _cuttable(error("[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model."), model) is None
