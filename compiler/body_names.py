"""Distinct value names across subgraphs, for onnx's data propagation.

ONNX scopes a subgraph's names lexically: the two branches of an If may both define `seq_len`
(Optimum's merged decoders do, for every value of their two decoders). onnx's data propagation
(onnx 1.23) keeps the values it derives in one table keyed by name for the whole model, so the
second branch's `Shape` finds the first branch's entry and fails ("Data for input 0 already
exists"). `distinct_body_names` renames, in place, every value a subgraph defines under a name
already defined in another scope, and gives back the map to undo it with `restore_names` (on the
model and on shape inference's result, whose new value_info entries carry the temporary names)."""
from __future__ import annotations


import onnx

from onnx_dml_lowering.lowering.onnx_graphs import iter_graphs, node_bodies


def _all_names(graph: onnx.GraphProto) -> "set[str]":
    """Every name the graph and its bodies (at any depth) spell."""
    into: "set[str]" = set()
    for each, _ in iter_graphs(graph):
        into.update(v.name for v in list(each.input) + list(each.output) + list(each.value_info))
        into.update(t.name for t in each.initializer)
        into.update(t.values.name for t in each.sparse_initializer)
        for node in each.node:
            into.update(node.input)
            into.update(node.output)
    return into


def _defined(graph: onnx.GraphProto) -> "list[str]":
    """The names a graph defines itself: its inputs, initializers and node outputs."""
    names = [v.name for v in graph.input] + [t.name for t in graph.initializer]
    names += [t.values.name for t in graph.sparse_initializer]
    return names + [o for node in graph.node for o in node.output if o]


def distinct_body_names(model: onnx.ModelProto) -> "dict[str, str]":
    """Rename (in place) the values subgraphs define under names defined elsewhere in the model;
    the map temporary name -> original name (empty when no subgraph reuses a name)."""
    bodies = [body for node in model.graph.node for body in node_bodies(node)]
    if not bodies:
        return {}
    seen = set(_defined(model.graph))
    # Every name of the model, for fresh names: read at the first reuse only (most models reuse
    # none; it walks every node, ~10 ms at 3,500). Nothing is renamed before it, so it reads the
    # names the model had on entry.
    taken: "set[str]" = set()
    restore: "dict[str, str]" = {}

    def fresh(name: str) -> str:
        if not taken:
            taken.update(_all_names(model.graph))
        k = 1
        while f"{name}~{k}" in taken:
            k += 1
        new = f"{name}~{k}"
        taken.add(new)
        restore[new] = name
        return new

    # each graph's renamings, by id (the graph held beside them, so no id is reused); a body
    # starts from its enclosing graph's (the main graph renames nothing)
    scopes: "dict[int, tuple[onnx.GraphProto, dict[str, str]]]" = {}
    for graph, outer in iter_graphs(model.graph):
        scope = dict(scopes[id(outer)][1]) if outer is not None else {}
        if outer is not None:
            for name in _defined(graph):
                if name in seen:
                    scope[name] = fresh(name)
                else:
                    seen.add(name)
                    scope.pop(name, None)          # defined here: it shadows an outer renaming
            _rename_graph(graph, scope)
        scopes[id(graph)] = (graph, scope)
    return restore


def restore_names(model: onnx.ModelProto, restore: "dict[str, str]") -> None:
    """Undo distinct_body_names in `model` (every temporary name is unique to the whole model)."""
    if not restore:
        return
    for graph, outer in iter_graphs(model.graph):
        if outer is not None:
            _rename_graph(graph, restore)


def _rename_graph(graph: onnx.GraphProto, names: "dict[str, str]") -> None:
    """Apply `names` to every place a graph (its bodies aside) spells a value name."""
    if not names:
        return
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        value.name = names.get(value.name, value.name)
    for tensor in graph.initializer:
        tensor.name = names.get(tensor.name, tensor.name)
    for sparse in graph.sparse_initializer:
        sparse.values.name = names.get(sparse.values.name, sparse.values.name)
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in names:
                node.input[i] = names[name]
        for i, name in enumerate(node.output):
            if name in names:
                node.output[i] = names[name]
