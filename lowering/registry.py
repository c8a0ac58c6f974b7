"""Single-node rules keyed by ONNX op type: a rule lowers a node into an ir.Graph fragment or
declines. Each is also registered as the one-node idiom of its op type (lowest priority)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from onnx_dml_lowering.ir import DmlLowerError, FeatureLevel, Graph

from .match import Declined, GraphView, Match, register_idiom
from .node import NodeInfo
from onnx_dml_lowering.ir import verify_graph

# check(node, level): a reason to decline that holds whatever the sizes are, or None.
# build(node, level): the fragment for the node's (concrete) sizes, or Declined.
CheckFn = Callable[[NodeInfo, FeatureLevel], "str | None"]
BuildFn = Callable[[NodeInfo, FeatureLevel], "Union[Graph, Declined]"]


def verified(build: Callable[[], "Union[Graph, Declined]"]) -> "Union[Graph, Declined]":
    """Run a fragment builder and verify its result; a descriptor the level rejects declines."""
    try:
        result = build()
        if isinstance(result, Graph):
            verify_graph(result)
    except DmlLowerError as exc:
        return Declined(str(exc))
    return result


@dataclass(frozen=True)
class Rule:
    name: str
    op_type: str
    check: CheckFn
    build: BuildFn
    operators: "tuple[str, ...]" = ()

    def lower(self, node: NodeInfo, level: FeatureLevel) -> "Union[Graph, Declined]":
        """Build and verify the fragment for a node with concrete shapes."""
        reason = self.check(node, level)
        if reason:
            return Declined(reason)
        return verified(lambda: self.build(node, level))

    def match(self, node: NodeInfo, view: GraphView, level: FeatureLevel) -> "Match | Declined":
        reason = self.check(node, level)
        if reason:
            return Declined(reason)
        inputs = tuple(t for t in node.inputs if t is not None)

        def build(shapes, values, lvl):
            return self.lower(node.with_shapes(tuple(None if t is None else shapes[t.name]
                                                     for t in node.inputs)), lvl)

        return Match(self.name, (node.name,), inputs, tuple(t.name for t in node.outputs), build,
                     self.operators)


RULES: "dict[str, Rule]" = {}


def register(name: str, op_type: str, check: CheckFn, build: BuildFn,
             operators: "tuple[str, ...]" = ()) -> Rule:
    rule = Rule(name, op_type, check, build, operators)
    RULES[op_type] = rule
    register_idiom(name, op_type, 0, rule.match)
    return rule


def rule_for(op_type: str, domain: str = "") -> "Rule | None":
    if domain not in ("", "ai.onnx"):
        return None
    return RULES.get(op_type)
