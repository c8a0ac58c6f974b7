"""`dml-lower optimize`: ONNX in, ONNX out (rewrite: stored bands; eye: the run-time torch.eye;
masks: Range-comparison attention masks; dml: the `--for dml` rewrites; passes: the onnx-ir pass).

The public API is here: optimize_model, bit_identical, save_model, external_initializers and the
onnx-ir pass GenerateBands (PassResult(model, modified))."""
from __future__ import annotations

from .passes import GenerateBands
from .rewrite import Rewrite, bit_identical, external_initializers, optimize_model, save_model

__all__ = ["GenerateBands", "Rewrite", "bit_identical", "external_initializers", "optimize_model", "save_model"]
