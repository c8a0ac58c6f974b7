"""The driver and front door: load + check + shape inference, lowering, partition, the CLI.

compile_model and CompiledModel load on first use (PEP 562): the CLI's --version and argument
errors do not import onnx and numpy."""
from __future__ import annotations

from typing import TYPE_CHECKING

from onnx_dml_lowering.ir import DmlLowerError

__all__ = ["CompiledModel", "compile_model", "DmlLowerError"]


def __getattr__(name: str) -> object:
    if name in ("CompiledModel", "compile_model"):
        from . import compiled
        return getattr(compiled, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from .compiled import CompiledModel, compile_model
