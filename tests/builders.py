"""The one place tests build ONNX models by hand, with the suite's opset and ir_version defaults.

- `graph_model(nodes, inputs, outputs, initializers, opset)`: a small multi-node model. Inputs
  and outputs are ValueInfoProtos or compact `(name, elem_type, shape)` tuples, where shape is a
  list of dims (ints, symbolic names, None) or an int rank meaning that many unknown dims;
  initializers are TensorProtos or {name: ndarray}.
- `single_node_model(op, in_type, in_shape, out_type, out_shape, opset, **attrs)`: x -> op -> y.
- `tensor(name, elem_type, shape)`: one value info, the same compact shape rule.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Union

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

DEFAULT_OPSET = 13
IR_VERSION = 8          # what onnxruntime and onnx.reference in the test extras both accept

Shape = Union[None, int, Iterable]
ValueSpec = Union[onnx.ValueInfoProto, tuple]


def tensor(name: str, elem_type: int, shape: Shape) -> onnx.ValueInfoProto:
    """A value info; shape an int means that rank with every dim unknown, None an unknown rank."""
    if isinstance(shape, int):
        shape = [None] * shape
    return h.make_tensor_value_info(name, elem_type, None if shape is None else list(shape))


def _value_info(spec: ValueSpec) -> onnx.ValueInfoProto:
    return spec if isinstance(spec, onnx.ValueInfoProto) else tensor(*spec)


def _initializers(inits) -> "list[onnx.TensorProto]":
    if isinstance(inits, Mapping):
        return [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    return list(inits)


def graph_model(nodes: "Iterable[onnx.NodeProto]", inputs: "Iterable[ValueSpec]", outputs: "Iterable[ValueSpec]",
                initializers=(), opset: int = DEFAULT_OPSET, name: str = "test") -> onnx.ModelProto:
    """A model of these nodes at this default-domain opset and the suite's ir_version."""
    graph = h.make_graph(list(nodes), name, [_value_info(i) for i in inputs], [_value_info(o) for o in outputs],
                         _initializers(initializers))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION)


def single_node_model(op_type: str, in_type: int, in_shape, out_type: int, out_shape=None,
                      opset: int = DEFAULT_OPSET, **attrs) -> onnx.ModelProto:
    """A one-node model x -> op -> y with the given types (out_shape None: rank 2, dims unknown)."""
    node = h.make_node(op_type, ["x"], ["y"], name=op_type.lower(), **attrs)
    return graph_model([node], [("x", in_type, in_shape)], [("y", out_type, 2 if out_shape is None else out_shape)],
                       opset=opset, name=f"{op_type}_test")


def interleaved_chains(n: int) -> onnx.ModelProto:
    """n independent chains Add -> Relu -> NonZero -> Cast -> Mul, in the exporter's interleaved order."""
    nodes, outputs, inits = [], [], {"two": np.array(2.0, np.float32)}
    for i in range(n):
        inits[f"c{i}"] = np.array(i - 1.5, np.float32)
        nodes += [h.make_node("Add", ["x", f"c{i}"], [f"a{i}"], name=f"add{i}"),
                  h.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}"),
                  h.make_node("NonZero", [f"r{i}"], [f"nz{i}"], name=f"nz{i}"),
                  h.make_node("Cast", [f"nz{i}"], [f"f{i}"], name=f"cast{i}", to=T.FLOAT),
                  h.make_node("Mul", [f"f{i}", "two"], [f"y{i}"], name=f"mul{i}")]
        outputs.append((f"y{i}", T.FLOAT, 2))
    return graph_model(nodes, [("x", T.FLOAT, [4, 5])], outputs, inits)


def relu_then_unique(path) -> str:
    """Relu (the DML EP takes it) then Unique (it has no DML kernel: the CPU), saved at `path`."""
    graph = h.make_graph([h.make_node("Relu", ["x"], ["r"], name="relu0"),
                          h.make_node("Unique", ["r"], ["y"], name="uniq", sorted=1)], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["u"])])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8), str(path))
    return path
