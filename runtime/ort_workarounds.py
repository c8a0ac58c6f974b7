"""Rewrites that make onnxruntime compute ONNX semantics where it is known to deviate, applied to
the sub-models the oracle and the lowered run's ONNX regions hand it. Never to the model an
`ort-*` backend validates: there the deviation is the finding (a MISMATCH against the oracle)."""
from __future__ import annotations

from typing import Iterable

import onnx

from onnx_dml_lowering.lowering.onnx_graphs import body_nodes, graph_attributes, is_standard, iter_nodes, may_hold_bodies, node_bodies



def _loop_body(node: onnx.NodeProto) -> "onnx.GraphProto | None":
    if node.op_type != "Loop" or not is_standard(node):
        return None
    return dict(graph_attributes(node)).get("body")


def _counter_outputs(node: onnx.NodeProto) -> "list[int]":
    """The body outputs (past cond) of a Loop that are its iteration-count input itself."""
    body = _loop_body(node)
    if body is None or not body.input or not body.input[0].name:
        return []
    counter = body.input[0].name
    return [k for k, out in enumerate(body.output) if k and out.name == counter]


def _for_loop(node: onnx.NodeProto) -> bool:
    """A Loop given M and no cond input: ONNX runs it M times whatever the body's cond says
    ("cond = ...; // ignored"); onnxruntime stops when that turns false."""
    return (node.op_type == "Loop" and is_standard(node) and len(node.input) > 0 and bool(node.input[0])
            and (len(node.input) < 2 or not node.input[1]))


def _fixed_here(node: onnx.NodeProto) -> bool:
    """A Loop this module rewrites itself (its bodies aside)."""
    return bool(_counter_outputs(node)) or _for_loop(node)


def _needs(node: onnx.NodeProto) -> bool:
    if not may_hold_bodies(node):   # op type and domain: most nodes end here
        return False
    return _fixed_here(node) or any(_fixed_here(n) for n in body_nodes(node))


def _names(nodes: "Iterable[onnx.NodeProto]", into: "set[str]") -> "set[str]":
    """Every value name the nodes and their bodies (at any depth) read, write or declare."""
    for node in iter_nodes(nodes):
        into.update(node.input)
        into.update(node.output)
        for graph in node_bodies(node):
            into.update(v.name for v in list(graph.input) + list(graph.output) + list(graph.value_info))
            into.update(t.name for t in graph.initializer)
    return into


def _rewrite(node: onnx.NodeProto, taken: "set[str]") -> None:
    """In place, bodies first (a Loop after the Loops inside it): see _rewrite_loop."""
    for inner in body_nodes(node, bodies_first=True):
        if _fixed_here(inner):
            _rewrite_loop(inner, taken)
    _rewrite_loop(node, taken)


def _rewrite_loop(node: onnx.NodeProto, taken: "set[str]") -> None:
    """A body output that is the Loop's iteration count becomes an Identity of it (the same value,
    a buffer of its own); an M-only Loop's body cond output becomes a constant true."""
    body = _loop_body(node)
    for k in _counter_outputs(node):
        assert body is not None         # _counter_outputs found them in it
        copy = _fresh(taken, f"{body.input[0].name}_copy_{k}")
        body.node.append(onnx.helper.make_node("Identity", [body.input[0].name], [copy], name=f"{node.name}/{copy}"))
        body.output[k].name = copy
    if _for_loop(node) and body is not None and body.output:
        always = _fresh(taken, "cond_ignored")      # the body's cond, which M-only Loops ignore
        body.node.append(onnx.helper.make_node("Constant", [], [always], name=f"{node.name}/{always}",
                                               value=onnx.helper.make_tensor(always, onnx.TensorProto.BOOL, [], [True])))
        body.output[0].name = always


def _fresh(taken: "set[str]", name: str) -> str:
    """A name no value of the sub-model has (SSA: onnxruntime refuses a name made twice), taken."""
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def loops_as_onnx_defines(nodes: "list[onnx.NodeProto]") -> "list[onnx.NodeProto]":
    """`nodes`, with each Loop (at any depth) onnxruntime (1.32 and before) runs otherwise than ONNX
    replaced by a copy it runs as ONNX does:
    - a body that hands out its iteration-count input as an output hands out an Identity of it
      (onnxruntime binds such an output to the counter's own buffer, so every scan row reads the
      last count, [3, 3, 3] for [0, 1, 2], and a loop-carried value one past it);
    - a Loop given M and no cond input gets a body whose cond output is a constant true (ONNX
      ignores that cond and runs M trips; onnxruntime stops when it turns false).
    Unchanged nodes are the same objects."""
    if not any(_needs(n) for n in nodes):
        return nodes
    taken = _names(nodes, set())
    out = []
    for node in nodes:
        if _needs(node):
            node = _copied(node)
            _rewrite(node, taken)
        out.append(node)
    return out


def _copied(node: onnx.NodeProto) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy
