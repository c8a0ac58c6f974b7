"""Names for optimize: every name a model already uses (so no generated node or value can clash
with one, wherever it is), the fresh names both rewriters generate, and what optimize's text calls
a node (its name in the file; an unnamed node by its operator and output, never its identity)."""
from __future__ import annotations

from typing import Callable, Iterable, Iterator, Mapping

import onnx

from onnx_dml_lowering.lowering.onnx_graphs import all_graphs, all_nodes, graph_attributes, iter_nodes, prefixed_graphs


def _text(name: "str | bytes") -> str:
    """A name as text: protobuf hands back bytes for a string field that is not UTF-8."""
    return name.decode("utf-8", "backslashreplace") if isinstance(name, bytes) else name


def _graph_names(graph: onnx.GraphProto) -> "Iterator[str | bytes]":
    for part in (graph.input, graph.output, graph.value_info, graph.initializer):
        yield from (item.name for item in part)
    for sparse in graph.sparse_initializer:
        yield sparse.values.name
        yield sparse.indices.name


def taken_names(model: onnx.ModelProto, also: "Iterable[str | bytes]" = ()) -> "set[str]":
    """Every name `model` uses: each graph's (the main graph, every If / Loop / Scan body at any
    depth, the bodies inside functions) inputs, outputs, value_info and initializers (sparse ones
    too), every node's name, inputs and outputs, and each model-local function's name, inputs,
    outputs and value_info; with `also` (the original names of renamed nodes). A name stale in
    value_info or local to a body still clashes: the checker and onnxruntime compare a value_info's
    type with the value of that name, and a body may not redefine an outer name (SSA)."""
    taken: "set[str | bytes]" = set(also)
    for graph in all_graphs(model, trust_schema=False):
        taken.update(_graph_names(graph))
    for _, node in all_nodes(model, trust_schema=False):
        taken.add(node.name)
        taken.update(node.input)
        taken.update(node.output)
    for function in model.functions:
        taken.update((function.name, *function.input, *function.output))
        taken.update(v.name for v in getattr(function, "value_info", ()))
    return {_text(name) for name in taken} - {""}


class Names:
    """Fresh names for one model: new to every name it uses (taken_names) and to every name
    handed out before."""

    def __init__(self, model: onnx.ModelProto, also: "Iterable[str | bytes]" = ()) -> None:
        self.taken = taken_names(model, also)

    def __call__(self, base: str) -> str:
        """`base`, or `base_1`, `base_2` ...: the first that is free."""
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def prefix(self, base: str) -> str:
        """A stem `gen_<base>` that no name equals or starts with `stem_`: every `stem_*` is free
        for one generator's nodes and values."""
        stem = "gen_" + "".join(c if c.isalnum() else "_" for c in base)
        name, n = stem, 2
        while any(t.startswith(name + "_") or t == name for t in self.taken):
            name, n = f"{stem}{n}", n + 1
        self.taken.add(name)
        return name


def restore_names(model: onnx.ModelProto, renamed: "Mapping[str, str | bytes]") -> "list[str]":
    """Give each node of `model` whose identity is in `renamed` the name the file had back (an
    empty one cleared: unnamed again, not named ""); returns the identities kept for names that
    are not UTF-8, which protobuf cannot write back."""
    escaped = []
    for _, node in all_nodes(model):
        original = renamed.get(node.name)
        if original is None:
            continue
        if isinstance(original, bytes):
            escaped.append(node.name)
        elif original:
            node.name = original
        else:
            node.ClearField("name")
    return escaped


def node_count(model: onnx.ModelProto) -> int:
    """The nodes of the main graph with its control-flow bodies', as inspect counts them."""
    return sum(1 for _ in iter_nodes(model.graph))


def has_bodies(model: onnx.ModelProto) -> bool:
    return any(graph_attributes(node) for node in iter_nodes(model.graph))


Label = Callable[[onnx.NodeProto], str]


def labeller(renamed: "Mapping[str, str | bytes]") -> Label:
    """What optimize's text calls a node of a model whose nodes carry their identities
    (compiler.node_ids; `renamed`: identity -> the name the file holds): its name in the file, or,
    unnamed there, `unnamed <Op> writing <its first output>`; a repeated or non-UTF-8 name by its
    identity (`n#2`, with `\\xNN` escapes), as every report shows it."""
    def label(node: onnx.NodeProto) -> str:
        original = renamed.get(node.name)
        if original is None or original != "":
            return node.name
        return f"unnamed {node.op_type}" + (f" writing {node.output[0]}" if node.output and node.output[0] else "")
    return label


def with_op(node: onnx.NodeProto, label: Label, prefix: str = "", op: "str | None" = None) -> str:
    """`<Op> <prefix><name>`, or for an unnamed node `<prefix>` and its label, which names its
    operator already (`op`: the operator as the text names it, `Cast-21`; default the node's)."""
    shown = label(node)
    if shown != node.name:          # unnamed in the file
        return prefix + (shown if op is None else shown.replace(f"unnamed {node.op_type}", f"unnamed {op}", 1))
    return f"{op or node.op_type} {prefix}{shown}"


def labelled_graphs(graph: onnx.GraphProto, label: Label) -> "Iterator[tuple[str, str, onnx.GraphProto]]":
    """(the path prefix of its nodes by identity, as lowering's prefixed_graphs gives it; the same
    prefix as the text shows it; graph) for the graph and every body at any depth: the one walker's
    order (each graph before its bodies), each body's shown prefix made when its node is passed."""
    shown_of = {id(graph): ""}
    for prefix, found in prefixed_graphs(graph):
        shown = shown_of[id(found)]
        for node in found.node:
            for attribute, sub in graph_attributes(node):
                shown_of[id(sub)] = f"{shown}{label(node)}/{attribute}/"
        yield prefix, shown, found
