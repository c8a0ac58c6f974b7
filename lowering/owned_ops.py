"""The ONNX operators this project owns: those it lowers as a node of its own (NonZero and EyeLike
by their single-node rules, Trilu by its one-node idiom; each the anchor of a priority-0 idiom).
Owning one means the project answers for its ONNX semantics wherever the node sits: the oracle
evaluates it on onnx.reference (runtime/oracle.py), provider validation reports where onnxruntime
ran it (runtime/ort/assignment.py: fell back, or folded away), and inspect lists every one, lowered
or not (inspect). Only the standard domain: a custom-domain NonZero is someone else's."""
from __future__ import annotations

from onnx_dml_lowering.lowering.onnx_graphs import is_standard

OWNED_OPS = frozenset({"NonZero", "EyeLike", "Trilu"})


def owned(op_type: str, domain: str) -> bool:
    """The node (by op type and domain) is one of the operators this project owns."""
    return op_type in OWNED_OPS and is_standard(domain)
