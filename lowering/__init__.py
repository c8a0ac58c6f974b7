"""ONNX -> IR lowering: one rule per ONNX operator or idiom (pattern + decline_reason + rewrite), in a registry.

Names load on first use (PEP 562), as ir's do: the loader, the model facts and a run whose backends
all run the model on an onnxruntime provider read only TensorInfo / NodeInfo, not the rules and the
DirectML operator tables they import (~15 ms of a provider-only `run`). The rule modules register
themselves when imported; the registry loads them all before it is first consulted
(registry.load_rules), whichever way it is reached."""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_FROM = {
    "match": ("Declined", "Match", "GraphView", "IdiomRule", "Found", "Fragment", "Decline"),
    "node": ("NodeInfo", "TensorInfo"),
    "registry": ("IDIOMS", "Idiom", "idioms_for", "register_idiom"),
}
_WHERE = {name: module for module, names in _FROM.items() for name in names}

__all__ = ["NodeInfo", "TensorInfo", "Declined", "IDIOMS", "Idiom", "Match", "GraphView", "idioms_for", "IdiomRule",
           "Found", "Fragment", "Decline", "register_idiom"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = import_module(f".{_WHERE[name]}", __name__)
    if module.__name__.endswith(".registry"):
        module.load_rules()
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> "list[str]":
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .match import Decline, Declined, Found, Fragment, GraphView, IdiomRule, Match
    from .node import NodeInfo, TensorInfo
    from .registry import IDIOMS, Idiom, idioms_for, register_idiom
