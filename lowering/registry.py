"""The rule registry: every rule (IdiomRule, match.py) registered in one line under its anchor op
type with a priority. The rules of an anchor are tried by priority alone, largest pattern first;
an operator's single-node rule (NonZero, EyeLike, Trilu) is its smallest, at priority 0."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from importlib import import_module
from typing import Any, Mapping, Union

from onnx_dml_lowering.ir import FeatureLevel, Graph
from onnx_dml_lowering.ir.support import OPERATORS
from onnx_dml_lowering.lowering.onnx_graphs import is_standard

from .common import level_reason
from .match import Declined, Found, Fragment, GraphView, IdiomRule, Match, verified
from .node import NodeInfo


@dataclass(frozen=True)
class Idiom:
    name: str
    anchor: str          # the ONNX op type the pattern is found from
    priority: int        # larger patterns first
    rule: IdiomRule

    def match(self, node: NodeInfo, view: GraphView, level: FeatureLevel) -> "Match | Declined | None":
        """pattern, then decline_reason: a Match to build, the Declined reason, or None (not this rule)."""
        found = self.rule.pattern(node, view)
        if found is None:
            return None
        if found.prefix is None:
            found.prefix = node.prefix or node.name    # unique per model, even when names sanitise alike
        return self.matched(found, level)

    def matched(self, found: Found, level: FeatureLevel) -> "Match | Declined":
        reason = self.rule.decline_reason(level, **found.bindings)
        if reason:
            return Declined(reason)
        note = self.rule.note if found.note is None else found.note
        operators = self.rule.operators if found.operators is None else found.operators
        # The placement report names these operators before any build: one the level lacks would
        # be reported as lowered while the run-time build declines and a fallback does the work.
        reason = missing_operator(operators, level)
        if reason:
            return Declined(reason)
        return Match(self.name, found.nodes, found.inputs, found.outputs, partial(self.build, found),
                     operators, found.value_inputs, note, dict(found.extra),
                     None if found.portable is None else (self.name, *found.portable))

    def build(self, found: Found, shapes: Mapping[str, tuple], values: Mapping[str, Any],
              level: FeatureLevel) -> "Union[Graph, Declined]":
        """rewrite on the concrete sizes and values, verified against the level's tables; the
        fragment records the input shapes it was built for (Graph.built_shapes)."""
        result = verified(lambda: self.rule.rewrite(Fragment(found, shapes, values, level), **found.bindings))
        if isinstance(result, Graph):
            for name, shape in shapes.items():
                result.built_shapes.setdefault(name, (tuple(shape), found.nodes[0]))
        return result


def missing_operator(operators: "tuple[str, ...]", level: FeatureLevel) -> "str | None":
    """Why a rule emitting `operators` cannot lower at `level`: the first it names that does not
    exist there (ir.support's tables), else None."""
    for name in operators:
        support = OPERATORS.get(name)
        if support is None:
            raise ValueError(f"rule names operator {name!r}, which ir.support has no table for")
        reason = level_reason(support, level)
        if reason:
            return reason
    return None


IDIOMS: "dict[str, list[Idiom]]" = {}
# the modules whose rules register themselves here, in this order (equal priorities keep it)
RULE_MODULES = ("band_part", "diagonal_idioms", "eyelike", "mask_idioms", "nonzero", "nonzero_idioms", "trilu", "trilu_band")
_loaded: "list[bool]" = []


def load_rules() -> None:
    """Imports every rule module (each registers its rules) the first time the registry is read:
    the lowering package loads its names on first use, so nothing else has imported them yet."""
    if not _loaded:
        _loaded.append(True)
        for module in RULE_MODULES:
            import_module(f"onnx_dml_lowering.lowering.{module}")


def register_idiom(name: str, anchor: str, priority: int, rule: IdiomRule) -> Idiom:
    """Register `rule` under op type `anchor`; equal priorities keep their registration order."""
    idiom = Idiom(name, anchor, priority, rule)
    IDIOMS.setdefault(anchor, []).append(idiom)
    IDIOMS[anchor].sort(key=lambda i: -i.priority)
    return idiom


def idioms_for(op_type: str, domain: str = "") -> "list[Idiom]":
    if not _loaded:
        load_rules()
    if not is_standard(domain):
        return []
    return IDIOMS.get(op_type, [])


def first_pattern(node: NodeInfo, view: GraphView) -> "tuple[Idiom, Found] | None":
    """The rule that structurally claims `node`: the highest-priority one whose pattern matches
    (no level, no sizes), and what it found. For passes that rewrite one rule's matches in ONNX
    (optimize): they keep the precedence the partition has."""
    for idiom in idioms_for(node.op_type):
        found = idiom.rule.pattern(node, view)
        if found is not None:
            return idiom, found
    return None
