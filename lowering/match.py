"""Idioms: rules that match a pattern of ONNX nodes around an anchor op and lower it as one.

A single-node rule (registry.Rule) is the one-node idiom. A match names the nodes it covers,
the host tensors it reads at run time, the values it produces, and how to build the fragment
once the sizes (and, for shape tensors, the values) of its inputs are known.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Union

from onnx_dml_lowering.ir import FeatureLevel, Graph

from .node import NodeInfo, TensorInfo


@dataclass(frozen=True)
class Declined:
    reason: str


class GraphView(Protocol):
    """What an idiom may ask of the ONNX graph around its anchor (implemented by the compiler)."""

    def producer(self, tensor: str) -> "NodeInfo | None": ...
    def consumers(self, tensor: str) -> "list[NodeInfo]": ...
    def constant(self, tensor: str) -> Any: ...            # np.ndarray for constants, else None
    def is_graph_output(self, tensor: str) -> bool: ...
    def tensor(self, name: str) -> TensorInfo: ...
    def value_prefix(self, tensor: str) -> str: ...        # unique IR prefix for a generated constant


# build(shapes by input name, values of the value inputs, level) -> fragment or Declined
BuildFn = Callable[[Mapping[str, tuple], Mapping[str, Any], FeatureLevel], Union[Graph, Declined]]


@dataclass
class Match:
    rule: str
    nodes: "tuple[str, ...]"                    # covered ONNX nodes, anchor first
    inputs: "tuple[TensorInfo, ...]"            # host tensors the fragment reads at run time
    outputs: "tuple[str, ...]"                  # ONNX values the fragment produces
    build: BuildFn
    operators: "tuple[str, ...]" = ()           # DirectML operators it emits (for the report)
    value_inputs: "tuple[str, ...]" = ()        # inputs whose values, not just sizes, shape it
    note: str = ""
    extra: dict = field(default_factory=dict)   # idiom-specific report fields (bytes saved, ...)

    def static_shapes(self) -> "dict[str, tuple] | None":
        shapes = {}
        for t in self.inputs:
            if not t.is_static:
                return None
            shapes[t.name] = tuple(t.shape)
        return shapes


IdiomFn = Callable[[NodeInfo, GraphView, FeatureLevel], "Match | Declined | None"]


@dataclass(frozen=True)
class Idiom:
    name: str
    anchor: str          # the ONNX op type the pattern is found from
    priority: int        # larger patterns first
    match: IdiomFn


IDIOMS: "dict[str, list[Idiom]]" = {}


def register_idiom(name: str, anchor: str, priority: int, match: IdiomFn) -> Idiom:
    idiom = Idiom(name, anchor, priority, match)
    IDIOMS.setdefault(anchor, []).append(idiom)
    IDIOMS[anchor].sort(key=lambda i: -i.priority)
    return idiom


def idioms_for(op_type: str, domain: str = "") -> "list[Idiom]":
    if domain not in ("", "ai.onnx"):
        return []
    return IDIOMS.get(op_type, [])


def sole_consumer(view: GraphView, tensor: str) -> "NodeInfo | None":
    """The one node reading `tensor`, if exactly one does and it is no graph output."""
    users = view.consumers(tensor)
    if len(users) != 1 or view.is_graph_output(tensor):
        return None
    return users[0]
