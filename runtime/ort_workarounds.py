"""Rewrites that make onnxruntime compute ONNX semantics where it is known to deviate, applied to
the sub-models the oracle and the lowered run's ONNX regions hand it. Never to the model an
`ort-*` backend validates: there the deviation is the finding (a MISMATCH against the oracle)."""
from __future__ import annotations

import onnx

_STANDARD = ("", "ai.onnx")


def _graphs(node: onnx.NodeProto) -> "list[onnx.GraphProto]":
    out = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            out.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            out.extend(attr.graphs)
    return out


def _counter_outputs(node: onnx.NodeProto) -> "list[int]":
    """The body outputs (past cond) of a Loop that are its iteration-count input itself."""
    if node.op_type != "Loop" or node.domain not in _STANDARD:
        return []
    body = next((a.g for a in node.attribute if a.name == "body"), None)
    if body is None or not body.input or not body.input[0].name:
        return []
    counter = body.input[0].name
    return [k for k, out in enumerate(body.output) if k and out.name == counter]


def _needs(node: onnx.NodeProto) -> bool:
    if not node.attribute:          # no body: one field read
        return False
    return bool(_counter_outputs(node)) or any(_needs(n) for g in _graphs(node) for n in g.node)


def _copy_counters(node: onnx.NodeProto) -> None:
    """In place, bodies first: each body output that is a Loop's iteration count becomes an
    Identity of it (the same value, a buffer of its own)."""
    for graph in _graphs(node):
        for inner in graph.node:
            if _needs(inner):
                _copy_counters(inner)
    for k in _counter_outputs(node):
        body = next(a.g for a in node.attribute if a.name == "body")
        counter = body.input[0].name
        taken = {v.name for v in list(body.input) + list(body.output)} | {o for n in body.node for o in n.output}
        copy = f"{counter}_copy_{k}"
        while copy in taken:
            copy += "_"
        body.node.append(onnx.helper.make_node("Identity", [counter], [copy], name=f"{node.name}/{copy}"))
        body.output[k].name = copy


def loop_counter_copies(nodes: "list[onnx.NodeProto]") -> "list[onnx.NodeProto]":
    """`nodes`, with a Loop (at any depth) whose body hands out its iteration-count input as an
    output replaced by a copy that hands out an Identity of it. onnxruntime (1.32 and before) binds
    such an output to the counter's own buffer, so every scan row reads the last count ([3, 3, 3]
    for [0, 1, 2]) and a loop-carried value one past it. Unchanged nodes are the same objects."""
    if not any(_needs(n) for n in nodes):
        return nodes
    out = []
    for node in nodes:
        if _needs(node):
            node = _copied(node)
            _copy_counters(node)
        out.append(node)
    return out


def _copied(node: onnx.NodeProto) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy
