"""`dml-lower optimize`: ONNX in, ONNX out (rewrite: stored bands; eye: the run-time torch.eye;
masks: Range-comparison attention masks; dml: the `--for dml` rewrites; passes: the onnx-ir pass).

The public API is here: optimize_model, bit_identical, save_model, external_initializers and the
onnx-ir pass GenerateBands (PassResult(model, modified)). GenerateBands loads on first use (PEP
562): onnx-ir takes a second or more to import, and the optimize and reduce commands never use it."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .rewrite import Rewrite, bit_identical, external_initializers, optimize_model, save_model

__all__ = ["GenerateBands", "Rewrite", "bit_identical", "external_initializers", "optimize_model", "save_model"]


def __getattr__(name: str) -> object:
    if name == "GenerateBands":
        from .passes import GenerateBands
        return GenerateBands
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from .passes import GenerateBands
