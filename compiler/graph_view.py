"""The ONNX graph as idioms see it: producers, consumers, constant values (lowering.GraphView)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

import onnx

from onnx_dml_lowering.lowering import NodeInfo, TensorInfo
from onnx_dml_lowering.lowering.node import is_sanitised, unique_names
from onnx_dml_lowering.lowering.onnx_graphs import node_reads
from onnx_dml_lowering.lowering.schedule import is_constant
from onnx_dml_lowering.runtime.weights import tensor_array

from .frontend import default_opset, node_info
from onnx_dml_lowering.runtime.model_facts import value_types


class OnnxGraphView:
    def __init__(self, model: onnx.ModelProto,
                 types: "dict[str, TensorInfo] | Callable[[], dict[str, TensorInfo]] | None" = None) -> None:
        self.model = model
        # The types are read on the first question about a tensor: a model where nothing is
        # lowered never reads its value_info (one protobuf message per value).
        self._types = types
        self.opset = default_opset(model)
        self.nodes = list(model.graph.node)
        self._by_name = {n.name: n for n in self.nodes}
        self._infos: "dict[str, NodeInfo]" = {}     # built on demand: idioms look at few nodes
        # Producers, consumers and IR prefixes index every node: built on the first question, so
        # a model without an anchor never pays for them.
        self._producer: "dict[str, str] | None" = None
        self._consumers: "dict[str, list[str]]" = {}
        self._prefix_table: "dict | None" = None
        self._io: "dict[str, tuple[list[str], list[str]]] | None" = None
        self._outputs = {o.name for o in model.graph.output}
        inputs = {i.name for i in model.graph.input}
        # Initializers that are also graph inputs can be overridden by a feed: not constant.
        self._constants: "dict[str, Any]" = {
            i.name: i for i in model.graph.initializer if i.name not in inputs}
        for node in self.nodes:
            if is_constant(node) and node.output:
                self._constants[node.output[0]] = node
        self._values: "dict[str, Any]" = {}

    @property
    def types(self) -> "dict[str, TensorInfo]":
        if not isinstance(self._types, dict):
            self._types = value_types(self.model) if self._types is None else self._types()
        return self._types

    def io(self) -> "dict[str, tuple[list[str], list[str]]]":
        """Per node: (the names it reads, a body's reads of outer values included; its outputs),
        read from protobuf once for the whole graph (each field read costs about a microsecond)
        and shared by the index below and the partition passes."""
        if self._io is None:
            self._io = {node.name: (node_reads(node), [o for o in node.output if o]) for node in self.nodes}
        return self._io

    def _index(self) -> "dict[str, str]":
        producer: "dict[str, str]" = {}
        self._producer = producer
        consumers = self._consumers
        for name, (reads, outputs) in self.io().items():
            for value in outputs:
                producer[value] = name
            for value in dict.fromkeys(reads):        # Add(x, x) consumes x once
                consumers.setdefault(value, []).append(name)
        return producer

    @property
    def _prefixes(self) -> dict:
        # IR name prefixes, distinct although sanitising may map different names to one: nodes by
        # their name, constants a generator may replace as init_<name>, in one name space.
        if self._prefix_table is None:
            self._prefix_table = unique_names([(("node", n.name), n.name) for n in self.nodes] +
                                              [(("value", v), f"init_{v}") for v in self._constants])
        return self._prefix_table

    def info(self, name: str) -> NodeInfo:
        if name not in self._infos:
            # Node names are unique and come first in the prefix table, so a name that needs no
            # sanitising is its own prefix: the table over every node is built only for the others.
            prefix = name if is_sanitised(name) else self._prefixes[("node", name)]
            self._infos[name] = node_info(self._by_name[name], self.opset, self.types, prefix)
        return self._infos[name]

    def producer(self, tensor: str) -> "NodeInfo | None":
        producer = self._producer if self._producer is not None else self._index()
        name = producer.get(tensor)
        return self.info(name) if name else None

    def consumers(self, tensor: str) -> "list[NodeInfo]":
        if self._producer is None:
            self._index()
        return [self.info(n) for n in self._consumers.get(tensor, [])]

    def is_graph_output(self, tensor: str) -> bool:
        return tensor in self._outputs

    def value_prefix(self, tensor: str) -> str:
        return self._prefixes.get(("value", tensor)) or f"init_{tensor}"

    def tensor(self, name: str) -> TensorInfo:
        return self.types.get(name, TensorInfo(name, 0, None))

    def constant(self, tensor: str) -> Any:
        """The value of an initializer or Constant node output, else None."""
        if tensor not in self._constants:
            return None
        if tensor not in self._values:
            source = self._constants[tensor]
            if isinstance(source, onnx.TensorProto):
                value = tensor_array(source)
            else:
                value = constant_node_value(source, self.model)
            self._values[tensor] = value
        return self._values[tensor]


# Constant's attribute forms numpy reads directly, with the dtype onnx.reference gives them.
_LIST_DTYPES = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
                "value_ints": np.int64}


def constant_node_value(node: onnx.NodeProto, model: onnx.ModelProto) -> Any:
    """The value of a Constant node: numpy for the tensor and number forms (models hold hundreds
    of Constants, and an onnx.reference evaluator costs ~1 ms each to build); the evaluator for the
    rest (strings, sparse tensors); None for an attribute form neither can evaluate."""
    if len(node.attribute) == 1:
        attr = node.attribute[0]
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR and not attr.ref_attr_name \
                and attr.t.data_location != onnx.TensorProto.EXTERNAL:
            return tensor_array(attr.t)
        if attr.name in _LIST_DTYPES and not attr.ref_attr_name:
            value = onnx.helper.get_attribute_value(attr)
            return np.array(list(value) if isinstance(value, Iterable) else value, dtype=_LIST_DTYPES[attr.name])
    from onnx.reference import ReferenceEvaluator
    try:
        graph = onnx.helper.make_graph([node], "constant", [], [onnx.helper.make_empty_tensor_value_info(node.output[0])])
        evaluator = ReferenceEvaluator(onnx.helper.make_model(graph, opset_imports=list(model.opset_import),
                                                              ir_version=model.ir_version))
        return evaluator.run(None, {})[0]  # type: ignore[index]  # onnx: a list when output_names is None, typed as a union
    except Exception:  # an attribute form we cannot evaluate: treat as not constant
        return None
