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
    (see optimize.optimize_model). Weights in external data are read from the folder onnx-ir
    loaded them from (its ExternalTensor's base_dir), through the project's one reader of external
    data, so its checks hold; the result holds every weight in memory, as onnx-ir's
    load_to_model would leave it (it said "pass the model file's path", which a pass cannot)."""

    def __init__(self, min_bytes: int = 0, level: "FeatureLevel | None" = None) -> None:
        super().__init__()
        self.min_bytes, self.level = min_bytes, level
        self.rewrites: "list[Rewrite]" = []      # of the last call, for reporting

    def call(self, model: onnx_ir.Model) -> onnx_ir.passes.PassResult:
        from onnx_dml_lowering.runtime.weights import all_tensors, inline, resolve_external
        proto = onnx_ir.serde.serialize_model(model)
        folder = _external_folder(model)
        if folder is not None:
            resolve_external(proto, folder, "model")
        rewritten, self.rewrites, _ = optimize_model(proto, self.min_bytes, self.level)
        for tensor in all_tensors(rewritten):
            inline(tensor)          # a weight left in its file by the reader: in memory, as onnx-ir holds it
        # A functional pass returns a new model object, modified or not.
        return onnx_ir.passes.PassResult(onnx_ir.serde.deserialize_model(rewritten), modified=bool(self.rewrites))


def _external_folder(model: onnx_ir.Model) -> "str | None":
    """The folder the model's external tensors were loaded from (None: it has none); one line when
    they name several, which a model file cannot."""
    from onnx_dml_lowering.ir import DmlLowerError
    folders = {str(tensor.base_dir) for value in model.graph.initializers.values()
               for tensor in [value.const_value] if isinstance(tensor, onnx_ir.ExternalTensor)}
    if len(folders) > 1:
        raise DmlLowerError(f"model: its external weights come from several folders ({', '.join(sorted(folders))}); "
                            "save it as one model file first")
    return folders.pop() if folders else None
