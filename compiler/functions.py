"""Model-local functions, inlined before anything else.

Why inline rather than compile each function as its own graph: a function's body is only typed
at a call site (its inputs are generic), so every call would need its own compilation anyway;
inlining also lets idioms match across the call boundary (Transpose(NonZero) split between a
function and its caller) and lets the ONNX regions merge with the nodes around the call. onnx's
inliner (`onnx.inliner.inline_local_functions`) does it; to keep the placement report saying
where a node came from, each call site first gets its own copy of the function with node names
`<call node>/<function>/<node>`, which the inliner keeps (with a `__N` suffix we take off again
where the name stays unique)."""
from __future__ import annotations

import re

import onnx
import onnx.inliner

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import first_line

_SUFFIX = re.compile(r"__\d+$")


def inline_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with every model-local function inlined (a model without any is returned as is)."""
    if not model.functions:
        return model
    functions = {(f.domain, f.name, getattr(f, "overload", "")): f for f in model.functions}
    copies = []
    for node in model.graph.node:
        key = (node.domain, node.op_type, getattr(node, "overload", ""))
        function = functions.get(key)
        if function is None:
            continue
        copy = onnx.FunctionProto()
        copy.CopyFrom(function)
        copy.name = f"{function.name}__at__{node.name}"
        for index, inner in enumerate(copy.node):
            inner.name = f"{node.name}/{function.name}/{inner.name or f'{inner.op_type}_{index}'}"
        node.op_type = copy.name
        copies.append(copy)
    model.functions.extend(copies)
    try:
        inlined = onnx.inliner.inline_local_functions(model)
    except Exception as exc:  # onnx's C++ inliner raises its own types
        raise DmlLowerError(f"model-local functions cannot be inlined: {first_line(exc)}") from None
    names = [_SUFFIX.sub("", n.name) for n in inlined.graph.node]
    counts = {n: names.count(n) for n in names}
    for node, name in zip(inlined.graph.node, names):
        if "/" in name and counts[name] == 1:
            node.name = name
    return inlined
