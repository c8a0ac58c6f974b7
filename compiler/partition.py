"""Partition: find idioms (largest first) at each anchor node, order the matches and the
remaining nodes topologically (stable with respect to the model's order), and gather the nodes
left to ONNX into maximal consecutive regions. The result is one composed ir.Graph plus placement."""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import onnx

from onnx_dml_lowering.ir import FeatureLevel, Graph, LowerAtRunTime, OnnxRegion
from onnx_dml_lowering.lowering import Declined, Match, idioms_for
from onnx_dml_lowering.lowering.diagonal_idioms import match_initializer

from .graph_view import OnnxGraphView


@dataclass
class Placement:
    onnx_nodes: "list[str]"
    status: str                      # "lowered" | "onnx"
    rule: str
    dml_operators: "list[str]" = field(default_factory=list)
    reason: str = ""
    note: str = ""
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {"onnx_nodes": list(self.onnx_nodes), "status": self.status, "rule": self.rule,
               "dml_operators": list(self.dml_operators), "reason": self.reason}
        if self.note:
            out["note"] = self.note
        out.update(self.extra)
        return out


@dataclass
class Partition:
    graph: Graph
    placement: "list[Placement]"
    regions: "dict[str, list[onnx.NodeProto]]"       # region name -> its nodes, in order
    deferred: "dict[str, Match]"                     # anchor node -> match lowered at run time
    nodes: "dict[str, onnx.NodeProto]" = field(default_factory=dict)
    generated: "set[str]" = field(default_factory=set)  # initializers a generator replaces


def subgraph_inputs(node: onnx.NodeProto) -> "list[str]":
    """Outer-scope names a node's subgraphs (If / Loop / Scan bodies) read."""
    names: "list[str]" = []
    for attr in node.attribute:
        graphs = list(attr.graphs) + ([attr.g] if attr.HasField("g") else [])
        for body in graphs:
            defined = {i.name for i in body.input} | {i.name for i in body.initializer}
            for inner in body.node:
                for name in list(inner.input) + subgraph_inputs(inner):
                    if name and name not in defined and name not in names:
                        names.append(name)
                defined.update(inner.output)
    return names


_READS: "dict[int, tuple[onnx.NodeProto, list[str]]]" = {}


def node_reads(node: onnx.NodeProto) -> "list[str]":
    """The names a node reads, its subgraphs' outer-scope names included (memoised per node)."""
    cached = _READS.get(id(node))
    if cached is not None and cached[0] is node:
        return cached[1]
    reads = [n for n in node.input if n]
    if any(a.HasField("g") or len(a.graphs) for a in node.attribute):
        reads += subgraph_inputs(node)
    _READS[id(node)] = (node, reads)
    return reads


def find_matches(view: OnnxGraphView, level: FeatureLevel):
    """Per node, the idiom that covers it (or the decline of the one that anchored there)."""
    covered: "dict[str, Match]" = {}
    matches: "list[Match]" = []
    declines: "dict[str, tuple[str, str]]" = {}
    for node in view.nodes:
        if node.name in covered:
            continue
        candidates = idioms_for(node.op_type, node.domain)
        if not candidates:
            continue
        info = view.info(node.name)
        first_decline = None
        for idiom in candidates:
            result = idiom.match(info, view, level)
            if result is None:
                continue
            if isinstance(result, Declined):
                first_decline = first_decline or (idiom.name, result.reason)
                continue
            if any(n in covered for n in result.nodes):
                continue
            for name in result.nodes:
                covered[name] = result
            matches.append(result)
            break
        else:
            if first_decline:
                declines[node.name] = first_decline
    return matches, covered, declines


def _schedule(nodes: "list[onnx.NodeProto]", covered: "dict[str, Match]") -> list:
    """Items (a NodeProto or a Match) in a topological order that keeps the model's order
    wherever the dependencies allow (Kahn's algorithm keyed by first position)."""
    position = {n.name: i for i, n in enumerate(nodes)}
    items: list = []
    item_of: "dict[str, int]" = {}
    for node in nodes:
        match = covered.get(node.name)
        if match is None:
            item_of[node.name] = len(items)
            items.append(node)
        elif node.name == match.nodes[0] or all(n not in item_of for n in match.nodes):
            if not any(n in item_of for n in match.nodes):
                index = len(items)
                items.append(match)
                for name in match.nodes:
                    item_of[name] = index
    producer: "dict[str, int]" = {}
    by_name = {n.name: n for n in nodes}
    reads: "list[list[str]]" = []
    for index, item in enumerate(items):
        members = [item] if isinstance(item, onnx.NodeProto) else [by_name[n] for n in item.nodes]
        inner = {o for m in members for o in m.output if o}
        for name in inner:
            producer[name] = index
        reads.append([r for m in members for r in node_reads(m) if r not in inner])
    waiting = [0] * len(items)
    users: "list[list[int]]" = [[] for _ in items]
    for index, names in enumerate(reads):
        deps = {producer[r] for r in names if r in producer and producer[r] != index}
        waiting[index] = len(deps)
        for dep in deps:
            users[dep].append(index)

    def key(index: int) -> int:
        item = items[index]
        return position[item.name] if isinstance(item, onnx.NodeProto) else min(position[n] for n in item.nodes)

    ready = [(key(i), i) for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, index = heapq.heappop(ready)
        order.append(items[index])
        for user in users[index]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (key(user), user))
    if len(order) != len(items):  # a match that would need a cycle: keep the model's order
        return [n for n in nodes]
    return order


def partition(model: onnx.ModelProto, level: FeatureLevel, types=None) -> Partition:
    view = OnnxGraphView(model, types)
    _READS.clear()
    graph = Graph(level)
    inits = {i.name for i in model.graph.initializer}
    graph.inputs = [vi.name for vi in model.graph.input if vi.name not in inits] + sorted(inits)
    graph.outputs = [vo.name for vo in model.graph.output]
    placement: "list[Placement]" = []
    regions: "dict[str, list[onnx.NodeProto]]" = {}
    deferred: "dict[str, Match]" = {}
    nodes = view.nodes
    by_name = {n.name: n for n in nodes}
    position = {n.name: i for i, n in enumerate(nodes)}

    matches, covered, declines = find_matches(view, level)
    order = _schedule(nodes, covered)

    # Constant initializers DirectML can generate: produced first, never stored.
    generated: "set[str]" = set()
    graph_input_names = {vi.name for vi in model.graph.input}
    for init in model.graph.initializer:
        if init.name in graph_input_names or len(init.dims) < 2:
            continue
        match = match_initializer(init.name, view.constant(init.name), level,
                                  prefix=view.value_prefix(init.name))
        if match is None:
            continue
        label = [f"initializer:{init.name}"]
        result = match if isinstance(match, Declined) else match.build({}, {}, level)
        if isinstance(result, Declined):
            placement.append(Placement(label, "onnx", "constant_diagonal", [], result.reason,
                                       extra={"initializer": init.name}))
            continue
        graph.merge(result)
        generated.add(init.name)
        placement.append(Placement(label, "lowered", match.rule, result.dml_operators, note=match.note,
                                   extra=dict(match.extra)))
    graph.inputs = [name for name in graph.inputs if name not in generated]

    # The last position that reads each value: a region hands out what is read after it.
    last_read: "dict[str, int]" = {}
    for index, item in enumerate(order):
        members = [item] if isinstance(item, onnx.NodeProto) else [by_name[n] for n in item.nodes]
        for member in members:
            for name in node_reads(member):
                last_read[name] = index
    for name in graph.outputs:
        last_read[name] = len(order)

    pending: "list[onnx.NodeProto]" = []

    def flush(index: int) -> None:
        """Close the region of the pending nodes; `index` is the position of the last of them."""
        if not pending:
            return
        produced, reads = set(), []
        for node in pending:
            reads += [n for n in node_reads(node) if n not in produced and n not in reads]
            produced.update(o for o in node.output if o)
        outputs = [o for node in pending for o in node.output if o and last_read.get(o, -1) > index]
        name = f"onnx_region_{len(regions)}"
        regions[name] = list(pending)
        graph.add(OnnxRegion(name, tuple(n.name for n in pending), tuple(reads), tuple(outputs)))
        pending.clear()

    for index, item in enumerate(order):
        if isinstance(item, onnx.NodeProto):
            pending.append(item)
            if item.name in declines:
                rule, reason = declines[item.name]
                placement.append(Placement([item.name], "onnx", rule, [], reason))
            continue
        match: Match = item
        shapes = match.static_shapes()
        values = {name: view.constant(name) for name in match.value_inputs}
        static = shapes is not None and all(v is not None for v in values.values())
        result = match.build(shapes, values, level) if static else None
        if isinstance(result, Declined):
            placement.append(Placement(list(match.nodes), "onnx", match.rule, [], result.reason))
            pending.extend(sorted((by_name[n] for n in match.nodes), key=lambda n: position[n.name]))
            continue
        flush(index - 1)
        extra = dict(match.extra)
        if result is None:
            deferred[match.nodes[0]] = match
            graph.add(LowerAtRunTime(match.nodes[0], match.rule, tuple(t.name for t in match.inputs),
                                     tuple(match.outputs)))
            placement.append(Placement(list(match.nodes), "lowered", match.rule, list(match.operators),
                                       note=_join(match.note, "sizes are bound at run time; specialised per input shape"),
                                       extra=extra))
            continue
        graph.merge(result)
        ops = result.dml_operators
        note = match.note if ops else _join(match.note, "empty result: a zero-sized tensor needs no DirectML operator")
        placement.append(Placement(list(match.nodes), "lowered", match.rule, ops, note=note, extra=extra))
    flush(len(order) - 1)
    _READS.clear()
    return Partition(graph, placement, regions, deferred, by_name, generated)


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)
