"""Single-node rules keyed by ONNX op type: a rule lowers a node into an ir.Graph fragment or
declines. Each is also registered as the one-node idiom of its op type (lowest priority)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from onnx_dml_lowering.ir import FeatureLevel, Graph

from .match import Declined, Found, Fragment, GraphView, IdiomRule, register_idiom, verified
from .node import NodeInfo

# check(node, level): a reason to decline that holds whatever the sizes are, or None.
# build(node, level): the fragment for the node's (concrete) sizes, or Declined.
CheckFn = Callable[[NodeInfo, FeatureLevel], "str | None"]
BuildFn = Callable[[NodeInfo, FeatureLevel], "Union[Graph, Declined]"]


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


class SingleNode(IdiomRule):
    """A single-node Rule as the one-node idiom of its op type: the pattern is the node itself."""

    def __init__(self, rule: Rule) -> None:
        self.rule, self.operators = rule, rule.operators

    def pattern(self, anchor: NodeInfo, view: GraphView) -> Found:
        return Found((anchor.name,), tuple(t for t in anchor.inputs if t is not None),
                     tuple(t.name for t in anchor.outputs), node=anchor)

    def check(self, level: FeatureLevel, node: NodeInfo) -> "str | None":
        return self.rule.check(node, level)

    def rewrite(self, f: Fragment, node: NodeInfo) -> "Union[Graph, Declined]":
        # The rule builds its own graph: its check runs again on the concrete shapes. Not
        # rule.lower: Idiom.build verifies what rewrite returns, and once is enough.
        shaped = node.with_shapes(tuple(None if t is None else f.shapes[t.name] for t in node.inputs))
        reason = self.rule.check(shaped, f.level)
        if reason:
            return Declined(reason)
        return self.rule.build(shaped, f.level)


RULES: "dict[str, Rule]" = {}


def register(name: str, op_type: str, check: CheckFn, build: BuildFn,
             operators: "tuple[str, ...]" = ()) -> Rule:
    rule = Rule(name, op_type, check, build, operators)
    RULES[op_type] = rule
    register_idiom(name, op_type, 0, SingleNode(rule))
    return rule


def rule_for(op_type: str, domain: str = "") -> "Rule | None":
    if domain not in ("", "ai.onnx"):
        return None
    return RULES.get(op_type)
