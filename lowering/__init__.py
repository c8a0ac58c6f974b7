"""ONNX -> IR lowering: one rule per ONNX operator or idiom, in a registry."""
from . import band_part, diagonal_idioms, eyelike, mask_idioms, nonzero, nonzero_idioms, trilu  # noqa: F401  (registers the rules)
from .match import IDIOMS, Decline, Declined, Found, Fragment, GraphView, Idiom, IdiomRule, Match, idioms_for
from .node import NodeInfo, TensorInfo
from .registry import RULES, Rule, rule_for

__all__ = ["NodeInfo", "TensorInfo", "RULES", "Declined", "Rule", "rule_for", "IDIOMS", "Idiom",
           "Match", "GraphView", "idioms_for", "IdiomRule", "Found", "Fragment", "Decline"]
