"""Small models of one producer and the activation reading it, for the DML EP's activation fusion
(runtime/dml_fusion.py): offline in test_dml_fusion.py, on the real EP in
directml/test_dml_fusion_real.py."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

IMAGE = [1, 4, 3, 3]
PRODUCERS = ("Add", "Sum", "Sub", "Mul", "Div", "Conv", "ConvTranspose", "BatchNormalization",
             "InstanceNormalization", "MeanVarianceNormalization", "MatMul", "Gemm")
ACTIVATIONS = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "HardSigmoid", "Softplus", "Selu", "Softsign",
               "ThresholdedRelu", "Celu", "HardSwish", "PRelu")


def _weights(name: str, shape: "list[int]") -> onnx.TensorProto:
    return h.make_tensor(name, T.FLOAT, shape, list(np.linspace(-1, 1, int(np.prod(shape)))))


def _producer(op: str, gemm_c: bool) -> "tuple[onnx.NodeProto, list[onnx.TensorProto], list[int]]":
    """The node p reading x (and its weights), and x's shape."""
    if op in ("Add", "Sub", "Mul", "Div", "Sum"):
        return h.make_node(op, ["x", "b"], ["a"], name="p"), [_weights("b", [1, 4, 1, 1])], IMAGE
    if op in ("Conv", "ConvTranspose"):
        return h.make_node(op, ["x", "w"], ["a"], name="p"), [_weights("w", [4, 4, 1, 1])], IMAGE
    if op == "BatchNormalization":
        names = ("scale", "bias", "mean", "var")
        params = [h.make_tensor(n, T.FLOAT, [4], v) for n, v in zip(names, ([1, 2, 3, 4], [0, 1, -1, 0],
                                                                         [0, 0, 1, 0], [1, 1, 1, 2]))]
        return h.make_node(op, ["x", *names], ["a"], name="p"), params, IMAGE
    if op == "InstanceNormalization":
        params = [h.make_tensor("scale", T.FLOAT, [4], [1, 2, 3, 4]), h.make_tensor("bias", T.FLOAT, [4], [0, 1, -1, 0])]
        return h.make_node(op, ["x", "scale", "bias"], ["a"], name="p"), params, IMAGE
    if op == "MeanVarianceNormalization":
        return h.make_node(op, ["x"], ["a"], name="p"), [], IMAGE
    if op == "MatMul":
        return h.make_node(op, ["x", "w"], ["a"], name="p"), [_weights("w", [3, 3])], IMAGE
    if op == "Gemm":
        inputs = ["x", "w", "c"] if gemm_c else ["x", "w"]
        return h.make_node(op, inputs, ["a"], name="p"), [_weights("w", [9, 9]), _weights("c", [9])][:len(inputs) - 1], [4, 9]
    raise KeyError(op)


def _activation(op: str) -> "tuple[onnx.NodeProto, list[onnx.TensorProto]]":
    if op == "PRelu":
        return h.make_node(op, ["a", "slope"], ["y"], name="act"), [h.make_tensor("slope", T.FLOAT, [1], [0.2])]
    attributes = {"alpha": 0.1} if op == "LeakyRelu" else {}
    return h.make_node(op, ["a"], ["y"], name="act", **attributes), []


def fusion_model(producer: str, activation: str, *, a_output: bool = True, gemm_c: bool = True,
                 second_reader: bool = False) -> onnx.ModelProto:
    """x -> p (producer) -> a -> act (activation) -> y; `a_output`: a is a graph output too;
    `second_reader`: a Neg reads a as well (z, an output)."""
    node, inits, shape = _producer(producer, gemm_c)
    act, more = _activation(activation)
    nodes = [node, act] + ([h.make_node("Neg", ["a"], ["z"], name="neg")] if second_reader else [])
    outputs = (["a"] if a_output else []) + ["y"] + (["z"] if second_reader else [])
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                         [h.make_tensor_value_info(o, T.FLOAT, shape) for o in outputs], inits + more)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def feeds(model: onnx.ModelProto) -> "dict[str, np.ndarray]":
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return {"x": np.linspace(-2, 2, int(np.prod(shape)), dtype=np.float32).reshape(shape)}
