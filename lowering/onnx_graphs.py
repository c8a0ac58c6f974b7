"""The one walker of an ONNX model's graphs: the bodies a node holds (If / Loop / Scan /
SequenceMap, any node of another domain), the (path, node) pairs at any depth, the outer values a
body reads. Nothing else in the project reads `AttributeProto.g` / `.graphs` itself
(tests/lowering/test_onnx_graphs.py keeps it so).

Two ways to trust a model:
- schema-aware (the default), for what runs after the ONNX checker: a standard-domain node holds
  bodies only where its schema declares a graph attribute (STANDARD_WITH_BODIES; the checker
  refuses any other), a node of another domain may hold them anywhere, and an attribute's declared
  type says which field holds its graphs;
- trust_schema=False, for the loader's scan of a file nothing has checked yet (external data,
  weights): every attribute's `g` and `graphs`, whatever the op and whatever the type says.

Paths: a node inside a body is `<control-flow node>/<attribute>/<node>` (nested: the path goes
on), as the placement, inspect and the EP placement name it. Only a GRAPH attribute names one body,
so only GRAPH bodies have paths; a GRAPHS attribute (no standard operator has one, onnxruntime runs
none) is walked by node identity, reads and the loader's scan.

Depth: protobuf parses no message nested past 100 levels, three per body (graph, node, attribute),
so neither onnx nor onnxruntime can read bodies nested past MAX_BODY_DEPTH; a model built in
memory deeper than that is refused here with one line, not a RecursionError."""
from __future__ import annotations

from typing import Callable, Iterable, Iterator, Sequence, Union

import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display

STANDARD = ("", "ai.onnx")

# The standard-domain operators whose schema has a graph attribute. The ONNX checker refuses an
# attribute a schema does not declare, so no other standard node of a checked model holds a body;
# a node of any other domain may.
STANDARD_WITH_BODIES = frozenset({"If", "Loop", "Scan", "SequenceMap"})

# The deepest body protobuf (upb and C++, so onnx, its checker and onnxruntime) can parse.
MAX_BODY_DEPTH = 32


# What iter_nodes walks: a graph's or function's nodes, or a list of nodes (a region's).
Nodes = Union[onnx.GraphProto, onnx.FunctionProto, Iterable[onnx.NodeProto]]


def is_standard(item: "onnx.NodeProto | onnx.OperatorSetIdProto | str") -> bool:
    """A node (or opset import, or domain) of the standard ONNX domain, spelled "" or "ai.onnx"."""
    return (item if isinstance(item, str) else item.domain) in STANDARD


def standard_opset(model: onnx.ModelProto, default: int = 0) -> int:
    """The version the model imports of the standard domain, `default` when it imports none."""
    return next((o.version for o in model.opset_import if o.domain in STANDARD), default)


def may_hold_bodies(node: onnx.NodeProto) -> bool:
    """Could the node have a subgraph attribute (without reading its attributes, ~1 us each)?"""
    if node.domain in STANDARD:
        return node.op_type in STANDARD_WITH_BODIES
    return len(node.attribute) > 0


def _deeper(node: onnx.NodeProto, depth: int) -> int:
    """The depth of `node`'s bodies, or DmlLowerError past what protobuf can parse."""
    if depth >= MAX_BODY_DEPTH:
        name = node.name.decode("utf-8", "backslashreplace") if isinstance(node.name, bytes) else node.name
        raise DmlLowerError(f"node '{display(name or node.op_type)}': bodies nested more than {MAX_BODY_DEPTH} "
                            "deep, past what protobuf (so onnx and onnxruntime) can parse")
    return depth + 1


def graph_attributes(node: onnx.NodeProto) -> "list[tuple[str, onnx.GraphProto]]":
    """(attribute name, body) for each GRAPH attribute of the node: the bodies a path names."""
    if not may_hold_bodies(node):
        return []
    return [(a.name, a.g) for a in node.attribute if a.type == onnx.AttributeProto.GRAPH and a.HasField("g")]


def node_bodies(node: onnx.NodeProto, trust_schema: bool = True) -> "list[onnx.GraphProto]":
    """Every body of the node, GRAPH and GRAPHS attributes, in attribute order; none read where
    none can be. trust_schema=False: every attribute's g and graphs, whatever the op or type."""
    bodies: "list[onnx.GraphProto]" = []
    if not trust_schema:
        for attr in node.attribute:
            if attr.HasField("g"):
                bodies.append(attr.g)
            bodies.extend(attr.graphs)
        return bodies
    if not may_hold_bodies(node):
        return bodies
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            if attr.HasField("g"):
                bodies.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            bodies.extend(attr.graphs)
    return bodies


def _nodes_of(nodes: Nodes) -> "Iterable[onnx.NodeProto]":
    return nodes.node if isinstance(nodes, (onnx.GraphProto, onnx.FunctionProto)) else nodes


def iter_nodes(nodes: Nodes, recursive: bool = True, *, bodies_first: bool = False,
               _depth: int = 0) -> "Iterator[onnx.NodeProto]":
    """Every node of a graph (function, node list), each followed by its bodies' nodes at any
    depth (both attribute kinds, depth-first); recursive=False: the graph's own nodes only.
    bodies_first: each node after its bodies' nodes (a rewrite that must see its bodies done)."""
    for node in _nodes_of(nodes):
        if not bodies_first:
            yield node
        if recursive:
            yield from body_nodes(node, bodies_first=bodies_first, _depth=_depth)
        if bodies_first:
            yield node


def body_nodes(node: onnx.NodeProto, *, bodies_first: bool = False,
               _depth: int = 0) -> "Iterator[onnx.NodeProto]":
    """The nodes of a node's bodies at any depth, in iter_nodes' order (none for most nodes)."""
    bodies = node_bodies(node) if node.attribute else []
    if bodies:
        deeper = _deeper(node, _depth)
        for sub in bodies:
            yield from iter_nodes(sub, bodies_first=bodies_first, _depth=deeper)


def any_node(nodes: Nodes, pred: "Callable[[onnx.NodeProto], object]", recursive: bool = True) -> bool:
    """Does pred hold for some node of the graph (its bodies' too unless recursive=False)?"""
    return any(pred(node) for node in iter_nodes(nodes, recursive))


def iter_graphs(graph: onnx.GraphProto, _depth: int = 0,
                _outer: "onnx.GraphProto | None" = None) -> "Iterator[tuple[onnx.GraphProto, onnx.GraphProto | None]]":
    """(graph, the graph whose node holds it, None for `graph` itself) for the graph and every
    body at any depth (both attribute kinds), each graph before its bodies, bodies in node order:
    the order a scoped walk (names a body shadows, values it sees from outside) needs."""
    yield graph, _outer
    for node in graph.node:
        bodies = node_bodies(node) if node.attribute else []
        if bodies:
            deeper = _deeper(node, _depth)
            for sub in bodies:
                yield from iter_graphs(sub, deeper, graph)


def iter_scoped(nodes: Nodes, _depth: int = 0, _scopes: "tuple[onnx.GraphProto, ...]" = ()
                ) -> "Iterator[tuple[onnx.NodeProto, tuple[onnx.GraphProto, ...]]]":
    """(node, the bodies enclosing it, outermost first; () for the walked nodes themselves), in
    iter_nodes' order: for a walk whose facts (ranks, constants) a body inherits from outside."""
    for node in _nodes_of(nodes):
        yield node, _scopes
        bodies = node_bodies(node) if node.attribute else []
        if bodies:
            deeper = _deeper(node, _depth)
            for sub in bodies:
                yield from iter_scoped(sub, deeper, (*_scopes, sub))


def node_paths(graph: onnx.GraphProto, prefix: str = "",
               _depth: int = 0) -> "Iterator[tuple[str, onnx.NodeProto]]":
    """(path, node) for every node, each followed by its bodies' nodes; a body node's path is
    `<control-flow node>/<attribute>/<node>`, as the placement names it."""
    for node in graph.node:
        yield prefix + node.name, node
        for attribute, sub in graph_attributes(node):
            yield from node_paths(sub, f"{prefix}{node.name}/{attribute}/", _deeper(node, _depth))


def prefixed_graphs(graph: onnx.GraphProto, prefix: str = "",
                    _depth: int = 0) -> "Iterator[tuple[str, onnx.GraphProto]]":
    """(the path prefix of its nodes, graph) for the graph and every body at any depth."""
    yield prefix, graph
    for node in graph.node:
        for attribute, sub in graph_attributes(node):
            yield from prefixed_graphs(sub, f"{prefix}{node.name}/{attribute}/", _deeper(node, _depth))


def _indexed(nodes: "Sequence[onnx.NodeProto]", trust_schema: bool, depth: int,
             out: "list[tuple[int, onnx.NodeProto]]") -> None:
    """Append (index in its own graph, node) for `nodes` and all their bodies, depth-first.
    Only a node with attributes can hold a body: the others cost one field read."""
    for index, node in enumerate(nodes):
        out.append((index, node))
        if node.attribute:
            bodies = node_bodies(node, trust_schema)
            if bodies:
                deeper = _deeper(node, depth)
                for sub in bodies:
                    _indexed(sub.node, trust_schema, deeper, out)


def all_nodes(model: onnx.ModelProto, trust_schema: bool = True) -> "list[tuple[int, onnx.NodeProto]]":
    """Every node of the model, with its index in its own graph: the main graph's, each followed
    by its bodies' nodes (both attribute kinds, depth-first), then the model-local functions'."""
    nodes: "list[tuple[int, onnx.NodeProto]]" = []
    _indexed(model.graph.node, trust_schema, 0, nodes)
    for function in model.functions:
        _indexed(function.node, trust_schema, 0, nodes)
    return nodes


def all_graphs(model: onnx.ModelProto, trust_schema: bool = True) -> "list[onnx.GraphProto]":
    """The main graph and every body at any depth (both attribute kinds, the bodies inside
    model-local functions too), each graph before its bodies."""
    graphs: "list[onnx.GraphProto]" = []

    def visit(nodes: "Sequence[onnx.NodeProto]", depth: int) -> None:
        for node in nodes:
            bodies = node_bodies(node, trust_schema)
            if bodies:
                deeper = _deeper(node, depth)
                for sub in bodies:
                    graphs.append(sub)
                    visit(sub.node, deeper)

    graphs.append(model.graph)
    visit(model.graph.node, 0)
    for function in model.functions:
        visit(function.node, 0)
    return graphs


def graph_captures(graph: onnx.GraphProto, _depth: int = 0) -> "list[str]":
    """Outer-scope names a graph reads (through nested bodies too), in first-read order."""
    defined = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    names: "list[str]" = []
    for node in graph.node:
        for name in _reads(node, _depth):
            if name not in defined and name not in names:
                names.append(name)
        defined.update(node.output)
    return names


def subgraph_reads(node: onnx.NodeProto, _depth: int = 0) -> "list[str]":
    """Outer-scope names a node's bodies read, nested bodies included, in first-read order."""
    bodies = node_bodies(node)
    if not bodies:
        return []
    deeper = _deeper(node, _depth)
    names: "list[str]" = []
    for body in bodies:
        for name in graph_captures(body, deeper):
            if name not in names:
                names.append(name)
    return names


def _reads(node: onnx.NodeProto, depth: int) -> "list[str]":
    reads = [n for n in node.input if n]
    if may_hold_bodies(node):
        reads += [n for n in subgraph_reads(node, depth) if n not in reads]
    return reads


def node_reads(node: onnx.NodeProto) -> "list[str]":
    """Every name a node reads: its inputs and what its bodies capture from outside."""
    return _reads(node, 0)
