"""Writes the small hand-built models of the DML EP's named failures (runtime/dml_deviations.py
FAILURES) in this folder, as torch's dynamo exporter writes the construct: a Reshape with
allowzero=1 whose shape holds a -1, which onnxruntime-directml 1.24.4's DML EP claims and then
fails on (E_INVALIDARG at session creation with static shapes, at the first run with dynamic ones);
and the control-flow models the copies onnxruntime 1.24.4 inserts around If / Loop bodies were
measured on (tests/compiler/ep/test_control_flow_copies.py).

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


def _model(nodes, inputs, outputs) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "control_flow", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                             producer_name="tests/models/dml_ep/make_models.py")


def loop_reads_outer() -> onnx.ModelProto:
    """A CPU Loop whose body reads a DML value from outside: Relu(x) -> r on DML; the body's Det
    (CPU) and Add (DML) both read r, its Add reads Det's output; the Loop's own x and its output
    cross to DML Relus outside."""
    f2 = [2, 2]
    body = helper.make_graph(
        [helper.make_node("Det", ["r"], ["d"], name="body_det"),
         helper.make_node("Add", ["v", "d"], ["vd"], name="body_add_det"),
         helper.make_node("Add", ["vd", "r"], ["v_next"], name="body_add_outer"),
         helper.make_node("Identity", ["c"], ["c_next"], name="body_cond")],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("v", TensorProto.FLOAT, f2)],
        [helper.make_tensor_value_info("c_next", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_next", TensorProto.FLOAT, f2)])
    return _model([helper.make_node("Relu", ["x"], ["r"], name="relu_in"),
                   helper.make_node("Loop", ["trips", "keep_going", "x"], ["v_out"], name="loop", body=body),
                   helper.make_node("Relu", ["v_out"], ["y"], name="relu_out")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, f2),
                   helper.make_tensor_value_info("trips", TensorProto.INT64, []),
                   helper.make_tensor_value_info("keep_going", TensorProto.BOOL, [])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, f2)])


def if_reads_outer() -> onnx.ModelProto:
    """An If (the DML EP's CPU-implemented kernel) whose branches read a CPU value from outside:
    Unique(x) -> u on the CPU; the then-branch's Unique (CPU) and Add (DML) both read u, the
    else-branch's Add (DML) alone does."""
    def branch(name: str, nodes: "list[onnx.NodeProto]") -> onnx.GraphProto:
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT,
                                                                                 ["n"])])
    then = branch("then", [helper.make_node("Unique", ["u"], ["uu"], name="then_unique"),
                           helper.make_node("Add", ["uu", "u"], ["then_out"], name="then_add")])
    other = branch("else", [helper.make_node("Add", ["u", "u"], ["else_out"], name="else_add")])
    return _model([helper.make_node("Unique", ["x"], ["u"], name="unique", sorted=1),
                   helper.make_node("If", ["flag"], ["o"], name="branch", then_branch=then, else_branch=other),
                   helper.make_node("Relu", ["o"], ["y"], name="relu_out")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
                   helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])


if __name__ == "__main__":
    onnx.save(loop_reads_outer(), HERE / "loop_reads_outer.onnx")
    onnx.save(if_reads_outer(), HERE / "if_reads_outer.onnx")
    onnx.save(reshape_allowzero(4), HERE / "reshape_allowzero_static.onnx")
    onnx.save(reshape_allowzero("batch"), HERE / "reshape_allowzero_dynamic.onnx")
