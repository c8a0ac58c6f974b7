"""The oracle's If / Loop / Scan on the host: the node runs as ONNX defines it (control_flow.py,
the same host loop the lowered run uses) and each body is evaluated by an oracle of its own over
the body as a model, so every node of a body, at any depth, gets the engine it would get in the
main graph: a NonZero on the ONNX definitions, a node onnxruntime has no kernel for on
onnx.reference, the rest on onnxruntime; and no body reaches an engine whole that gets the
construct itself wrong (onnx.reference's Loop, onnxruntime's scalar NonZero in a body).

`HostRegion` has the session interface the oracle calls (`run(outputs, feeds)`); the body
evaluators come from a factory the oracle passes in (it builds nested oracles of its own kind),
so this module does not know the oracle's engines."""
from __future__ import annotations

from typing import Callable, Mapping, Protocol, Sequence

import numpy as np
import onnx
from onnx import helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.dtypes import numpy_to_onnx
from onnx_dml_lowering.lowering.node import TensorInfo
from onnx_dml_lowering.lowering.onnx_graphs import graph_attributes, graph_captures

from .control_flow import host_construct, run_control_flow

class BodyEvaluator(Protocol):
    def run(self, feeds: "Mapping[str, np.ndarray]") -> "Mapping[str, np.ndarray]": ...


# (node, attribute, body graph, the body's first feeds) -> an evaluator whose run(feeds) returns
# {body output name: value}
BodyEvaluators = Callable[[onnx.NodeProto, str, onnx.GraphProto, "Mapping[str, np.ndarray]"], BodyEvaluator]


def _declared(vi: onnx.ValueInfoProto) -> "TensorInfo | None":
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.elem_type:
        return None
    tensor = vi.type.tensor_type
    shape = None
    if tensor.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim)
    return TensorInfo(vi.name, tensor.elem_type, shape)


def body_types(graph: onnx.GraphProto, outer: Mapping, feeds: "Mapping[str, np.ndarray]") -> "dict[str, TensorInfo]":
    """What a body's values are: the outer ones, what the body declares (shape inference annotated
    the model's bodies), and the element type of a fed value nothing declares."""
    types = dict(outer)
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        info = _declared(vi)
        if info is not None:
            types[vi.name] = info
    for init in graph.initializer:
        types[init.name] = TensorInfo(init.name, init.data_type, tuple(int(d) for d in init.dims))
    for name, value in feeds.items():
        known = types.get(name)
        if known is None or not getattr(known, "onnx_type", 0):
            array = np.asarray(value)
            try:
                types[name] = TensorInfo(name, numpy_to_onnx(array.dtype), tuple(array.shape))
            except Exception:       # a dtype with no ONNX type: left untyped, the engines infer it
                continue
    return types


def body_model(parent: onnx.ModelProto, node: onnx.NodeProto, attribute: str, graph: onnx.GraphProto,
               types: Mapping) -> onnx.ModelProto:
    """The body as a model: its formal inputs, then the outer values it captures (typed, no shape:
    a captured value's shape is whatever it is at run time), its outputs and initializers."""
    def typed(name: str) -> onnx.ValueInfoProto:
        info = types.get(name)
        if info is None or not getattr(info, "onnx_type", 0):
            return onnx.ValueInfoProto(name=name)
        return helper.make_tensor_value_info(name, info.onnx_type, None)

    inputs = [typed(vi.name) for vi in graph.input] + [typed(name) for name in graph_captures(graph)]
    sub = helper.make_graph(list(graph.node), f"{node.name}/{attribute}", inputs, list(graph.output),
                            list(graph.initializer), value_info=list(graph.value_info))
    model = helper.make_model(sub, opset_imports=list(parent.opset_import), ir_version=parent.ir_version)
    model.functions.extend(parent.functions)
    return model


def _output_types(graph: onnx.GraphProto) -> "list[tuple[int, tuple | None]]":
    """(onnx type, per-iteration shape) of each body output: what an empty scan output stacks."""
    infos = [_declared(vo) for vo in graph.output]
    return [(i.onnx_type, i.shape) if i is not None else (0, None) for i in infos]


class HostRegion:
    """If / Loop / Scan nodes run on the host one after the other, each body by the evaluator
    `bodies` makes for it; `constants` are the region's initializers as arrays. The scan outputs
    the host accumulates stay within `memory_limit` (bytes; None: the default, memory.default_limit),
    as the lowered run's do (control_flow._ScanStacks)."""

    def __init__(self, nodes: "Sequence[onnx.NodeProto]", constants: "Mapping[str, np.ndarray]",
                 bodies: BodyEvaluators, opset: int, memory_limit: "int | None" = None) -> None:
        self.nodes = list(nodes)
        self.constants = dict(constants)
        self.bodies = bodies
        self.opset = opset
        self.memory_limit = memory_limit
        self._captures: "dict[tuple[str, str], list[str]]" = {}     # read once, not per iteration

    def run(self, outputs: "Sequence[str] | None", feeds: "Mapping[str, np.ndarray]") -> "list[np.ndarray]":
        env: "dict[str, np.ndarray]" = {**self.constants, **feeds}
        for node in self.nodes:
            env.update((name, value) for name, value in zip(node.output, self._node(node, env)) if name)
        wanted = outputs if outputs is not None else [o for n in self.nodes for o in n.output if o]
        return [env[name] for name in wanted]

    def _node(self, node: onnx.NodeProto, env: "Mapping[str, np.ndarray]") -> "list[np.ndarray]":
        construct = host_construct(node, self.opset)
        if construct is None:           # a HostRegion is made of the nodes host_construct names
            raise DmlLowerError(f"node {node.name!r} ({node.op_type}) is not control flow the host runs")
        graphs = dict(graph_attributes(node))

        def run_body(attribute: str, values: "list[np.ndarray]") -> "list[np.ndarray]":
            graph = graphs[attribute]
            key = (node.name, attribute)
            if key not in self._captures:
                self._captures[key] = graph_captures(graph)
            feeds = {name: env[name] for name in self._captures[key]}
            feeds.update((vi.name, value) for vi, value in zip(graph.input, values))
            results = self.bodies(node, attribute, graph, feeds).run(feeds)
            return [results[vo.name] for vo in graph.output]

        body = graphs.get("body")
        return run_control_flow(construct, node, [env[name] if name else None for name in node.input], run_body,
                                _output_types(body) if body is not None else [], self.memory_limit)
