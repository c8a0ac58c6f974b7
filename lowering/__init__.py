"""ONNX -> IR lowering: one rule per ONNX operator or idiom (pattern + decline_reason + rewrite), in a registry."""
from . import band_part, diagonal_idioms, eyelike, mask_idioms, nonzero, nonzero_idioms, trilu  # noqa: F401  (registers the rules)
from .match import Decline, Declined, Found, Fragment, GraphView, IdiomRule, Match
from .node import NodeInfo, TensorInfo
from .registry import IDIOMS, Idiom, idioms_for, register_idiom

__all__ = ["NodeInfo", "TensorInfo", "Declined", "IDIOMS", "Idiom", "Match", "GraphView", "idioms_for", "IdiomRule",
           "Found", "Fragment", "Decline", "register_idiom"]
