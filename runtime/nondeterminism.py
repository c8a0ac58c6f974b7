"""Which values of a model depend on a random operator (and so cannot be compared)."""
from __future__ import annotations

import onnx
from onnx import numpy_helper

from onnx_dml_lowering.lowering.onnx_graphs import body_nodes, is_standard, may_hold_bodies, node_reads

from .weights import tensor_array

RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                        "Bernoulli", "Multinomial"})


def _constant_false(model: onnx.ModelProto, name: str) -> bool:
    for init in model.graph.initializer:
        if init.name == name:
            return not bool(tensor_array(init).any())
    for node in model.graph.node:
        if node.op_type == "Constant" and name in node.output:
            for attr in node.attribute:
                if attr.name == "value":
                    return not bool(numpy_helper.to_array(attr.t).any())
    return False


def _random_itself(node: onnx.NodeProto, model: onnx.ModelProto) -> bool:
    """A random operator; Dropout only in training mode (a training_mode input not constant false)."""
    if not is_standard(node):
        return False
    if node.op_type in RANDOM_OPS:
        return True
    return (node.op_type == "Dropout" and len(node.input) > 2 and bool(node.input[2])
            and not _constant_false(model, node.input[2]))


def is_random(node: onnx.NodeProto, model: onnx.ModelProto) -> bool:
    """A random operator (see _random_itself), or a control-flow node with one in its bodies."""
    return _random_itself(node, model) or (may_hold_bodies(node) and any(_random_itself(inner, model)
                                                                       for inner in body_nodes(node)))


def random_values(model: onnx.ModelProto) -> "dict[str, str]":
    """Every value computed from a random operator: value name -> the random node's name."""
    tainted: "dict[str, str]" = {}
    for node in model.graph.node:
        # nothing is tainted before the first random node: its reads are not read (3,500 nodes: ~10 ms)
        source = node.name if is_random(node, model) else next(
            (tainted[r] for r in node_reads(node) if r in tainted), None) if tainted else None
        if source is not None:
            for name in node.output:
                if name:
                    tainted[name] = source
    return tainted
