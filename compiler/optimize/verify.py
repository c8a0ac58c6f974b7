"""optimize's own check of what it wrote: the rewritten model must pass every check the input
passed (the ONNX checker with full_check, which runs strict shape inference and so compares each
value_info's type with the value's, as onnxruntime does when it loads the model), and no node name
may repeat that did not repeat before. A failure is a bug of ours (a generator built wrong, a name
that clashes), never the user's: it is never written out. On a 500 MB GPT-2 the full check of the
weightless view takes ~25 ms."""
from __future__ import annotations

from collections import Counter

import onnx

from onnx_dml_lowering.ir.errors import brief
from onnx_dml_lowering.lowering.onnx_graphs import all_nodes
from onnx_dml_lowering.runtime.weights import lifted


def check_level(model: onnx.ModelProto) -> "bool | None":
    """The strongest check `model` passes: True the full one, False the checker's basic one, None
    neither (not ours to judge: the CLI refused it already; the API's caller has --check)."""
    view = lifted(model)[0]
    for full in (True, False):
        try:
            onnx.checker.check_model(view, full_check=full)
            return full
        except Exception:  # onnx raises several types (ValidationError, InferenceError)
            continue
    return None


def node_names(model: onnx.ModelProto) -> "Counter[str]":
    return Counter(n.name for _, n in all_nodes(model) if n.name)


def verify_rewrite(model: onnx.ModelProto, level: "bool | None", names_before: "Counter[str]", tool: str) -> None:
    """RuntimeError (an internal error: ours) unless the rewritten `model` passes the check its
    input passed (`level`, from check_level) and repeats no node name the input did not."""
    repeated = [name for name, count in node_names(model).items() if count > max(1, names_before.get(name, 0))]
    if repeated:
        raise RuntimeError(f"{tool} produced an invalid model: node name {repeated[0]!r} repeated")
    if level is None:
        return
    try:
        onnx.checker.check_model(lifted(model)[0], full_check=level)
    except Exception as exc:  # a generator or a name we made is wrong: never written out
        raise RuntimeError(f"{tool} produced an invalid model: {brief(str(exc))}") from exc
