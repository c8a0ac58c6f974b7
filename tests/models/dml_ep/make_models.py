"""Writes the small hand-built models of the DML EP's named failures (runtime/dml_deviations.py
FAILURES) in this folder, as torch's dynamo exporter writes the construct: a Reshape with
allowzero=1 whose shape holds a -1, which onnxruntime-directml 1.24.4's DML EP claims and then
fails on (E_INVALIDARG at session creation with static shapes, at the first run with dynamic ones).

    python tests/models/dml_ep/make_models.py
"""
from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

HERE = Path(__file__).parent


def reshape_allowzero(rows: "int | str") -> onnx.ModelProto:
    """x [rows, 6] -> Relu -> Reshape(allowzero=1, shape [-1, 3]) -> y [rows * 2, 3]."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Reshape", ["r", "shape"], ["y"], name="view_rows", allowzero=1)],
        "reshape_allowzero",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows2" if isinstance(rows, str) else rows * 2, 3])],
        [helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8,
                             producer_name="tests/models/dml_ep/make_models.py")


if __name__ == "__main__":
    onnx.save(reshape_allowzero(4), HERE / "reshape_allowzero_static.onnx")
    onnx.save(reshape_allowzero("batch"), HERE / "reshape_allowzero_dynamic.onnx")
