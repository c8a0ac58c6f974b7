"""Rules keyed by ONNX op type. A rule lowers a node into an ir.Graph fragment or declines."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from ir import DmlLowerError, FeatureLevel, Graph

from .node import NodeInfo


@dataclass(frozen=True)
class Declined:
    reason: str


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

    def lower(self, node: NodeInfo, level: FeatureLevel) -> "Union[Graph, Declined]":
        """Build and verify the fragment; a descriptor the level rejects becomes a decline."""
        reason = self.check(node, level)
        if reason:
            return Declined(reason)
        try:
            result = self.build(node, level)
            if isinstance(result, Graph):
                result.verify()
        except DmlLowerError as exc:
            return Declined(str(exc))
        return result


RULES: "dict[str, Rule]" = {}


def register(name: str, op_type: str, check: CheckFn, build: BuildFn) -> Rule:
    rule = Rule(name, op_type, check, build)
    RULES[op_type] = rule
    return rule


def rule_for(op_type: str, domain: str = "") -> "Rule | None":
    if domain not in ("", "ai.onnx"):
        return None
    return RULES.get(op_type)
