"""onnx's data propagation fails on some valid models (its own propagators' errors): the plain
strict pass decides then, so a model onnxruntime runs is checked, and a model that is wrong is
still refused with the plain pass's one line."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.frontend import check_and_infer
from onnx_dml_lowering.ir import DmlLowerError
from tests.cli_runner import cli


def _const(name: str, value: "int | list[int]") -> onnx.NodeProto:
    return h.make_node("Constant", [], [name], value=nh.from_array(np.array(value, dtype=np.int64)))


def range_difference(rows: int, cols: int, declared: "list[int]") -> onnx.ModelProto:
    """x + (Unsqueeze(Range(0, 2*rows, 2), 1) - Unsqueeze(Range(0, 2*cols, 2), 0)): onnx 1.23's
    data propagation says "Invalid rank for Sub broadcasting" where rows != cols."""
    nodes = [_const("zero", 0), _const("rows", 2 * rows), _const("cols", 2 * cols), _const("step", 2),
             _const("ax1", [1]), _const("ax0", [0]),
             h.make_node("Range", ["zero", "rows", "step"], ["r"]), h.make_node("Range", ["zero", "cols", "step"], ["c"]),
             h.make_node("Unsqueeze", ["r", "ax1"], ["ur"]), h.make_node("Unsqueeze", ["c", "ax0"], ["uc"]),
             h.make_node("Sub", ["ur", "uc"], ["d"]), h.make_node("Cast", ["d"], ["df"], to=T.FLOAT),
             h.make_node("Add", ["x", "df"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, declared)],
                         [h.make_tensor_value_info("y", T.FLOAT, [rows, cols])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("rows,cols", [(3, 2), (2, 5), (4, 4)])
def test_a_model_data_propagation_rejects_is_checked(rows, cols, tmp_path, capsys):
    model = range_difference(rows, cols, [rows, cols])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    check_and_infer(model)          # no error
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.array_equal(compile_model(model).run({"x": x})["y"], expected)
    code, out, err = cli(["check", path, "--backends", "cpu,ort-cpu", "-q"], capsys)
    assert (code, err) == (0, "") and out == "verdict: all outputs match ONNX semantics\n"


def test_a_model_wrong_without_data_propagation_is_still_refused():
    model = range_difference(3, 2, [2, 2])              # x [2, 2] + [3, 2]: wrong in every pass
    with pytest.raises(DmlLowerError) as err:
        check_and_infer(model)
    message = str(err.value)
    assert message.startswith("ONNX shape inference failed: ") and "\n" not in message
