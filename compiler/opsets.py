"""Opset versions a model imports, against what the installed onnx defines.

onnx's checker accepts an opset of the default domain past its newest (a model "from the future"
checks, its nodes resolved at the newest schema), and onnxruntime refuses it: a verdict on such a
model would be about semantics no ONNX release gave. Domains onnx does not define (com.microsoft,
a model-local function's domain) are the runtime's business and are left alone."""
from __future__ import annotations

import onnx
import onnx.defs

from onnx_dml_lowering.ir import DmlLowerError


def known_opsets() -> "dict[str, int]":
    """Domain -> the highest opset version the installed onnx defines ("" is ai.onnx)."""
    known = {"": onnx.defs.onnx_opset_version(), "ai.onnx.ml": onnx.defs.onnx_ml_opset_version()}
    # The preview and training domains, where this onnx exposes its schema table.
    version_map = getattr(getattr(onnx.defs, "C", None), "schema_version_map", None)
    if version_map is not None:
        for domain, (_, highest) in version_map().items():
            known.setdefault(domain, int(highest))
    known["ai.onnx"] = known[""]
    return known


def check_opsets(model: onnx.ModelProto) -> None:
    """DmlLowerError naming the domain, the opset given and the highest the installed onnx knows,
    for the model's imports and each model-local function's."""
    known = known_opsets()
    owners = [("model", model.opset_import)] + [
        (f"model-local function {f.name!r} of domain {f.domain!r}", f.opset_import) for f in model.functions]
    for owner, imports in owners:
        for opset in imports:
            highest = known.get(opset.domain)
            if highest is not None and opset.version > highest:
                domain = opset.domain or "ai.onnx"
                raise DmlLowerError(
                    f"{owner} imports opset {opset.version} of domain {domain!r}; the installed onnx "
                    f"{onnx.__version__} defines it up to opset {highest}, so no ONNX semantics exist to lower "
                    "or check against (export at a lower opset, or install a newer onnx)")
