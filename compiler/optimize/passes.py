"""`optimize` as an onnx-ir pass, so it composes with onnx-ir's PassManager and onnxscript's
optimizer:

    from onnx_dml_lowering.compiler.optimize import GenerateBands
    model = onnx_ir.passes.PassManager([GenerateBands()])(model).model
"""
from __future__ import annotations

import onnx_ir
import onnx_ir.passes

from onnx_dml_lowering.ir.feature_levels import FeatureLevel

from .rewrite import Rewrite, optimize_model


class GenerateBands(onnx_ir.passes.FunctionalPass):
    """Stored bands of diagonals, the torch.eye Range/Equal/Cast idiom and Range-comparison masks
    -> their generators
    (see optimize.optimize_model). Initializers still in external data are left alone: the pass
    has no file to read them from; `dml-lower optimize` loads them."""

    def __init__(self, min_bytes: int = 0, level: "FeatureLevel | None" = None) -> None:
        super().__init__()
        self.min_bytes, self.level = min_bytes, level
        self.rewrites: "list[Rewrite]" = []      # of the last call, for reporting

    def call(self, model: onnx_ir.Model) -> onnx_ir.passes.PassResult:
        proto = onnx_ir.serde.serialize_model(model)
        rewritten, self.rewrites, _ = optimize_model(proto, self.min_bytes, self.level)
        # A functional pass returns a new model object, modified or not.
        return onnx_ir.passes.PassResult(onnx_ir.serde.deserialize_model(rewritten), modified=bool(self.rewrites))
