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
from typing import Iterable

import onnx
import onnx.inliner

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.ir.errors import first_line
from onnx_dml_lowering.lowering.onnx_graphs import iter_nodes, node_paths

_SUFFIX = re.compile(r"__\d+$")


def inline_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with every model-local function inlined (a model without any is returned as is)."""
    if not model.functions:
        return model
    apply_attribute_defaults(model)
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


def _key(node_or_function: "onnx.NodeProto | onnx.FunctionProto", name: str) -> tuple:
    return (node_or_function.domain, name, getattr(node_or_function, "overload", ""))


def apply_attribute_defaults(model: onnx.ModelProto) -> None:
    """Every call of a model-local function gets the function's attribute defaults
    (`attribute_proto`) it does not set itself. onnx's inliner (1.23) drops them, so a defaulted
    attribute read as absent: an EyeLike whose k defaulted to 2 ran with k = 0 and MATCHed."""
    defaults = {_key(f, f.name): f.attribute_proto for f in model.functions if len(f.attribute_proto)}
    if not defaults:
        return
    walks: "list[tuple[onnx.FunctionProto | None, Iterable[onnx.NodeProto]]]" = [(None, iter_nodes(model.graph))]
    walks += [(function, iter_nodes(function.node)) for function in model.functions]
    for caller, nodes in walks:
        for node in nodes:
            wanted = defaults.get(_key(node, node.op_type))
            given = {a.name: a for a in node.attribute} if wanted else {}
            for default in wanted or ():
                mine = given.get(default.name)
                if mine is None:
                    node.attribute.add().CopyFrom(default)
                elif mine.ref_attr_name:
                    _default_through_reference(node, mine, caller)


def _default_through_reference(node: onnx.NodeProto, attribute: onnx.AttributeProto,
                               caller: "onnx.FunctionProto | None") -> None:
    """A call inside function `caller` that passes `attribute` on from the caller's own attribute:
    where a call of the caller does not set that one, the callee's default would apply, which the
    inliner cannot say: refused unless the caller has a default of its own (applied at its calls)."""
    if caller is not None and any(a.name == attribute.ref_attr_name for a in caller.attribute_proto):
        return
    where = f" in function {display(caller.name)}" if caller is not None else ""
    raise DmlLowerError(f"node {display(node.name)} ({display(node.op_type)}){where}: attribute "
                        f"{display(attribute.name)} refers to {display(attribute.ref_attr_name)}, which has no "
                        f"default, while {display(node.op_type)} has one for it: not supported (set it at every call)")


def refuse_references(model: onnx.ModelProto) -> None:
    """A reference attribute (ref_attr_name) means something only in a function's body; one left
    in the graph (written there, or by a call the inliner left unresolved) is refused by name."""
    for path, node in node_paths(model.graph):
        for attribute in node.attribute:
            if attribute.ref_attr_name:
                raise DmlLowerError(f"node {display(path)} ({display(node.op_type)}): attribute "
                                    f"{display(attribute.name)} refers to {display(attribute.ref_attr_name)}, a "
                                    "function's attribute, outside any function body")
