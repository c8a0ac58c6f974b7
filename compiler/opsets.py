"""Opset versions a model imports, against what the installed onnx defines.

onnx's checker accepts an opset of the default domain past its newest (a model "from the future"
checks, its nodes resolved at the newest schema), and onnxruntime refuses it: a verdict on such a
model would be about semantics no ONNX release gave. Domains onnx does not define (com.microsoft,
a model-local function's domain) are the runtime's business and are left alone."""
from __future__ import annotations

from typing import Sequence

import onnx
import onnx.defs

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display


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
    for the model's imports and each model-local function's; or naming a domain imported twice."""
    known = known_opsets()
    owners = [("model", model.opset_import)] + [
        (f"model-local function '{display(f.name)}' of domain '{display(f.domain)}'", f.opset_import)
        for f in model.functions]
    for owner, imports in owners:
        _imported_once(owner, imports)
        for opset in imports:
            highest = known.get(opset.domain)
            if highest is not None and opset.version > highest:
                domain = opset.domain or "ai.onnx"
                raise DmlLowerError(
                    f"{owner} imports opset {opset.version} of domain {domain!r}; the installed onnx "
                    f"{onnx.__version__} defines it up to opset {highest}, so no ONNX semantics exist to lower "
                    "or check against (export at a lower opset, or install a newer onnx)")


def _imported_once(owner: str, imports: "Sequence[onnx.OperatorSetIdProto]") -> None:
    """Each domain imported once ("" and "ai.onnx" are one domain to onnx and onnxruntime): of two
    imports onnxruntime reads the last and onnx.reference the first, so the semantics (Softmax at
    11 or 13) and the verdict would depend on which one ran."""
    seen: "dict[str, onnx.OperatorSetIdProto]" = {}
    for opset in imports:
        domain = "" if opset.domain == "ai.onnx" else opset.domain
        first = seen.setdefault(domain, opset)
        if first is not opset:
            spelt = "" if first.domain == opset.domain else " ('' and 'ai.onnx' name one domain)"
            raise DmlLowerError(f"{owner} imports domain '{display(domain or 'ai.onnx')}' twice, at opsets "
                                f"{first.version} and {opset.version}{spelt}: which one counts would be a guess "
                                "(onnxruntime reads the last, onnx.reference the first), so import it once")
