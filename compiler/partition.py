"""Partition: small passes over one PartitionState, each callable on its own.

    state = start(model, level, types)
    generate_constants(state)     # constant initializers DirectML generates instead of storing
    compile_bodies(state)         # If / Loop / Scan bodies, recursively, each like a main graph
    match_idioms(state)           # per anchor node, the largest idiom that matches (a rule is the one-node idiom)
    lower_static(state)           # build the matches whose sizes are known now
    schedule(state)               # a stable topological order that keeps ONNX nodes together
    defer_run_time_sized(state)   # the rest are specialised at run time, with a precomputed ONNX fallback
    build_regions(state)          # gather the nodes left to ONNX into maximal consecutive regions
    state.result()                # the Partition: one composed ir.Graph plus placement

All state lives in the PartitionState, so partitions of different models may run interleaved or
in parallel threads."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Callable, Union

import onnx

from onnx_dml_lowering.ir import ControlFlow, FeatureLevel, Graph, LowerAtRunTime, OnnxRegion
from onnx_dml_lowering.lowering import IDIOMS, Declined, Match, idioms_for
from onnx_dml_lowering.lowering.diagonal import may_hold_band
from onnx_dml_lowering.lowering.diagonal_idioms import match_initializer
from onnx_dml_lowering.lowering.onnx_graphs import graph_attributes, is_standard, node_bodies
from onnx_dml_lowering.lowering.schedule import grouped_order, is_constant
from onnx_dml_lowering.runtime.weights import leading_elements

from .bodies import BodyModel, body_model, construct_of
from .frontend import default_opset
from .graph_view import OnnxGraphView

if TYPE_CHECKING:
    from onnx_dml_lowering.lowering.node import TensorInfo

    # the types OnnxGraphView takes: the model's, or a function that reads them when first asked
    TypesLike = dict[str, TensorInfo] | Callable[[], dict[str, TensorInfo]] | None

RUN_TIME_NOTE = "sizes are bound at run time; specialised per input shape"
EMPTY_NOTE = "empty result: a zero-sized tensor needs no DirectML operator"


@dataclass
class Placement:
    onnx_nodes: "list[str]"
    status: str                      # "lowered" | "onnx"
    rule: str
    dml_operators: "list[str]" = field(default_factory=list)
    reason: str = ""
    note: str = ""
    extra: dict = field(default_factory=dict)
    # The main graph's initializer this entry generates instead of storing (its one onnx_nodes
    # entry is then the label "initializer:NAME", as the JSON and text show it); "" for nodes.
    initializer: str = ""

    def to_dict(self) -> dict:
        out = {"onnx_nodes": list(self.onnx_nodes), "status": self.status, "rule": self.rule,
               "dml_operators": list(self.dml_operators), "reason": self.reason}
        if self.note:
            out["note"] = self.note
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class FallbackRegion:
    """What runs on ONNX when a deferred match's run-time specialisation declines: the region
    step (its reads and the match's outputs) and its member nodes in the model's order."""
    region: OnnxRegion
    nodes: "tuple[onnx.NodeProto, ...]"


@dataclass
class Body:
    """One compiled body of a control-flow node: the body as a model and its partition."""
    source: BodyModel
    partition: "Partition"

    @property
    def lowered(self) -> bool:
        return any(p.status == "lowered" for p in self.partition.placement)


@dataclass
class Partition:
    graph: Graph
    placement: "list[Placement]"
    regions: "dict[str, list[onnx.NodeProto]]"       # region name -> its nodes, in order
    deferred: "dict[str, Match]"                     # anchor node -> match lowered at run time
    nodes: "dict[str, onnx.NodeProto]" = field(default_factory=dict)
    generated: "set[str]" = field(default_factory=set)  # initializers a generator replaces
    fallbacks: "dict[str, FallbackRegion]" = field(default_factory=dict)  # anchor node -> its fallback
    bodies: "dict[str, dict[str, Body]]" = field(default_factory=dict)  # control-flow node -> attribute -> body


# One scheduled item: an ONNX node, or a match covering one or more nodes.
Item = Union[onnx.NodeProto, Match]


@dataclass
class PartitionState:
    model: onnx.ModelProto
    level: FeatureLevel
    view: OnnxGraphView
    graph: Graph
    by_name: "dict[str, onnx.NodeProto]"
    position: "dict[str, int]"
    generated: "set[str]" = field(default_factory=set)
    generated_placement: "list[Placement]" = field(default_factory=list)
    matches: "list[Match]" = field(default_factory=list)
    covered: "dict[str, Match]" = field(default_factory=dict)        # node -> the match covering it
    declines: "dict[str, tuple[str, str]]" = field(default_factory=dict)  # node -> (idiom, reason)
    order: "list[Item]" = field(default_factory=list)
    built: "dict[str, Graph | Declined]" = field(default_factory=dict)   # anchor -> static build
    deferred: "dict[str, Match]" = field(default_factory=dict)
    fallbacks: "dict[str, FallbackRegion]" = field(default_factory=dict)
    regions: "dict[str, list[onnx.NodeProto]]" = field(default_factory=dict)
    placement: "list[Placement]" = field(default_factory=list)
    bodies: "dict[str, dict[str, Body]]" = field(default_factory=dict)       # run by the host
    body_placement: "dict[str, list[Placement]]" = field(default_factory=dict)  # node -> its bodies' entries

    @property
    def nodes(self) -> "list[onnx.NodeProto]":
        return self.view.nodes

    def reads(self, node: onnx.NodeProto) -> "list[str]":
        """The names a node reads, its subgraphs' outer-scope names included (read once per graph)."""
        return self.view.io()[node.name][0]

    def members(self, item: Item) -> "list[onnx.NodeProto]":
        if isinstance(item, onnx.NodeProto):
            return [item]
        return [self.by_name[n] for n in item.nodes]

    def result(self) -> Partition:
        return Partition(self.graph, self.generated_placement + self.placement, self.regions,
                         self.deferred, self.by_name, self.generated, self.fallbacks, self.bodies)


def start(model: onnx.ModelProto, level: FeatureLevel, types: "TypesLike" = None) -> PartitionState:
    """The state every pass works on: the graph view and an IR graph with the model's interface."""
    view = OnnxGraphView(model, types)
    graph = Graph(level)
    inits = {i.name for i in model.graph.initializer}
    graph.inputs = [vi.name for vi in model.graph.input if vi.name not in inits] + sorted(inits)
    graph.outputs = [vo.name for vo in model.graph.output]
    return PartitionState(model, level, view, graph, {n.name: n for n in view.nodes},
                          {n.name: i for i, n in enumerate(view.nodes)})


def generate_constants(state: PartitionState) -> None:
    """Constant initializers DirectML can generate: produced first, never stored."""
    graph_input_names = {vi.name for vi in state.model.graph.input}
    for init in state.model.graph.initializer:
        if init.name in graph_input_names or len(init.dims) < 2 or not _may_hold_band(init):
            continue
        match = match_initializer(init.name, state.view.constant(init.name), state.level,
                                  prefix=state.view.value_prefix(init.name))
        if match is None:
            continue
        label = [f"initializer:{init.name}"]
        result = match if isinstance(match, Declined) else match.build({}, {}, state.level)
        if isinstance(result, Declined):
            state.generated_placement.append(Placement(label, "onnx", "constant_diagonal", [], result.reason,
                                                       extra={"initializer": init.name}, initializer=init.name))
            continue
        assert not isinstance(match, Declined)     # else result is that Declined
        state.graph.merge(result)
        state.generated.add(init.name)
        state.generated_placement.append(Placement(label, "lowered", match.rule, result.dml_operators,
                                                   note=match.note, extra=dict(match.extra), initializer=init.name))
    state.graph.inputs = [name for name in state.graph.inputs if name not in state.generated]


def _may_hold_band(init: onnx.TensorProto) -> bool:
    """A weight left in its file is told from its first row (read alone) before it is read whole:
    13 MB of SSDlite's file otherwise, held by the view until the partition ends."""
    first_row = leading_elements(init, int(init.dims[-1]))
    return first_row is None or may_hold_band(tuple(int(d) for d in init.dims), first_row)


def compile_bodies(state: PartitionState) -> None:
    """Compile every If / Loop / Scan body with these same passes (recursively), the outer values
    it reads becoming its inputs. A node with something lowered in a body is run by the host;
    its bodies' placement entries are kept either way, each node named by its path
    `<control-flow node>/<attribute>/<node>` (nested: the path goes on)."""
    opset = default_opset(state.model)
    for node in state.nodes:
        attributes = graph_attributes(node)
        if not attributes:
            continue
        construct = construct_of(node, opset)
        bodies: "dict[str, Body]" = {}
        for attribute, graph in attributes:
            source = body_model(state.model, node, construct or "", attribute, graph, state.view.types)
            bodies[attribute] = Body(source, partition(source.model, state.level, source.types))
        entries = []
        for attribute, body in bodies.items():
            for p in body.partition.placement:
                where = f"{node.name}/{attribute}"
                path = [where + "/" + n for n in p.onnx_nodes]
                extra = dict(p.extra)
                extra["graph_path"] = f"{where}/{extra['graph_path']}" if "graph_path" in extra else where
                entries.append(Placement(path, p.status, p.rule, list(p.dml_operators), p.reason, p.note, extra))
        state.body_placement[node.name] = entries
        if construct is not None and any(b.lowered for b in bodies.values()):
            state.bodies[node.name] = bodies


def match_idioms(state: PartitionState) -> None:
    """Per node, the idiom that covers it (largest first; an op's single-node rule is its
    smallest idiom), or the first decline among those that anchored there."""
    for node in state.nodes:
        if node.name in state.covered:
            continue
        # a rule's look at the node as stored first: its NodeInfo only where some rule may match
        candidates = [i for i in idioms_for(node.op_type, node.domain) if i.rule.may_match(node)]
        if not candidates:
            continue
        info = state.view.info(node.name)
        first_decline = None
        for idiom in candidates:
            result = idiom.match(info, state.view, state.level)
            if result is None:
                continue
            if isinstance(result, Declined):
                first_decline = first_decline or (idiom.name, result.reason)
                continue
            if any(n in state.covered for n in result.nodes):
                continue
            for name in result.nodes:
                state.covered[name] = result
            state.matches.append(result)
            break
        else:
            if first_decline:
                state.declines[node.name] = first_decline


def schedule(state: PartitionState) -> None:
    """Items (a NodeProto or a Match) in a topological order that keeps the model's order where the
    dependencies allow, and keeps what runs on ONNX together: every region boundary costs a
    session call, so interleaved chains (one NonZero per detection class) must not make one
    region per chain. Needs the static builds: a match declined now runs on ONNX."""
    nodes, covered, position = state.nodes, state.covered, state.position
    if not state.matches and not state.bodies:
        # Nothing lowered and no host-run control flow: every item is an ONNX node with the one
        # label, and grouped_order of a topologically sorted graph (the checker requires it) by
        # position is the model's order.
        state.order = list(nodes)
        return
    items: "list[Item]" = []
    item_of: "dict[str, int]" = {}
    for node in nodes:
        match = covered.get(node.name)
        if match is None:
            item_of[node.name] = len(items)
            items.append(node)
        elif not any(n in item_of for n in match.nodes):
            index = len(items)
            items.append(match)
            for name in match.nodes:
                item_of[name] = index
    producer: "dict[str, int]" = {}
    reads: "list[list[str]]" = []
    labels: "list[str]" = []
    keys: "list[int]" = []
    lazy: "list[bool]" = []
    io = state.view.io()
    for index, item in enumerate(items):
        if isinstance(item, onnx.NodeProto):        # most items: one node, its facts read once
            name = item.name
            node_reads_, outputs = io[name]
            for value in outputs:
                producer[value] = index
            reads.append(node_reads_)                 # a node never reads its own output
            labels.append("host" if name in state.bodies else "onnx")     # control flow run by the host
            keys.append(position[name])
            lazy.append(is_constant(item))
            continue
        members = state.members(item)
        inner = {o for m in members for o in io[m.name][1]}
        for value in inner:
            producer[value] = index
        reads.append([r for r in match_reads(state, item) if r not in inner])
        labels.append("onnx" if isinstance(state.built.get(item.nodes[0]), Declined) else "dml")
        keys.append(min(position[m.name] for m in members))
        lazy.append(False)
    deps = [[producer[r] for r in names if r in producer] for names in reads]
    order = grouped_order(labels, deps, keys, lazy)
    # A match that would need a cycle: keep the model's order.
    state.order = [items[i] for i in order] if order is not None else list(nodes)


def match_reads(state: PartitionState, match: Match) -> "list[str]":
    """What a match reads: its members' inputs, and the values its fragment reads that no member
    does (an index step left to ONNX because a node outside the match reads it too)."""
    names = [r for m in state.members(match) for r in state.reads(m)]
    return names + [t.name for t in match.inputs if t.name not in names]


def static_inputs(state: PartitionState, match: Match) -> "tuple[dict, dict] | None":
    """The input shapes and shaping values of a match, if all are known at compile time."""
    shapes = match.static_shapes()
    values = {name: state.view.constant(name) for name in match.value_inputs}
    if shapes is None or any(v is None for v in values.values()):
        return None
    return shapes, values


def lower_static(state: PartitionState) -> None:
    """Build every match whose sizes (and shaping values) are known now."""
    for match in state.matches:
        known = static_inputs(state, match)
        if known is not None:
            state.built[match.nodes[0]] = match.build(known[0], known[1], state.level)


def fallback_region(state: PartitionState, match: Match) -> FallbackRegion:
    """The ONNX region that runs a match's nodes when its run-time specialisation declines."""
    members = sorted((state.by_name[n] for n in match.nodes), key=lambda n: state.position[n.name])
    produced = {o for m in members for o in m.output if o}
    # once each: a node may read a name twice, a region's sub-model declares it once
    reads = [r for r in dict.fromkeys(r for m in members for r in state.reads(m)) if r not in produced]
    region = OnnxRegion(f"fallback_{match.nodes[0]}", tuple(m.name for m in members), tuple(reads),
                        tuple(match.outputs))
    return FallbackRegion(region, tuple(members))


def defer_run_time_sized(state: PartitionState) -> None:
    """Matches whose sizes are bound only at run time: specialised then, with the ONNX region
    to fall back on precomputed here."""
    for item in state.order:
        if isinstance(item, Match) and item.nodes[0] not in state.built:
            state.deferred[item.nodes[0]] = item
            state.fallbacks[item.nodes[0]] = fallback_region(state, item)


def build_regions(state: PartitionState) -> None:
    """Walk the order: emit lowered fragments and run-time steps, gather everything left to ONNX
    (unmatched nodes and declined matches) into maximal consecutive regions, and record placement."""
    order = state.order
    last_read = _last_reads(state)
    pending: "list[onnx.NodeProto]" = []
    for index, item in enumerate(order):
        if isinstance(item, onnx.NodeProto) and item.name in state.bodies:
            _close_region(state, pending, last_read, index - 1)
            state.graph.add(control_flow_step(state, item))
            state.placement.extend(state.body_placement[item.name])
        elif isinstance(item, onnx.NodeProto):
            state.placement.extend(state.body_placement.get(item.name, ()))
            pending.append(item)
            if item.name in state.declines:
                rule, reason = state.declines[item.name]
                state.placement.append(Placement([item.name], "onnx", rule, [], reason))
        else:
            _place_match(state, item, pending, partial(_close_region, state, pending, last_read, index - 1))
    _close_region(state, pending, last_read, len(order) - 1)


def _last_reads(state: PartitionState) -> "dict[str, int]":
    """The last position that reads each value (the graph's outputs: after the end): a region
    hands out what is read after it."""
    last_read: "dict[str, int]" = {}
    for index, item in enumerate(state.order):
        names = state.reads(item) if isinstance(item, onnx.NodeProto) else match_reads(state, item)
        for name in names:
            last_read[name] = index
    for name in state.graph.outputs:
        last_read[name] = len(state.order)
    return last_read


def _place_match(state: PartitionState, match: Match, pending: "list[onnx.NodeProto]", close: "Callable[[], None]") -> None:
    """One match of the order: a run-time step, its nodes left to ONNX (declined), or its built
    fragment; `close` ends the region pending before it."""
    anchor = match.nodes[0]
    if anchor in state.deferred:
        close()
        state.graph.add(LowerAtRunTime(anchor, match.rule, tuple(t.name for t in match.inputs),
                                       tuple(match.outputs)))
        state.placement.append(Placement(list(match.nodes), "lowered", match.rule, list(match.operators),
                                         note=_join(match.note, RUN_TIME_NOTE), extra=dict(match.extra)))
        return
    result = state.built[anchor]
    if isinstance(result, Declined):
        state.placement.append(Placement(list(match.nodes), "onnx", match.rule, [], result.reason))
        pending.extend(sorted(state.members(match), key=lambda n: state.position[n.name]))
        return
    close()
    state.graph.merge(result)
    ops = result.dml_operators
    note = match.note if ops else _join(match.note, EMPTY_NOTE)
    state.placement.append(Placement(list(match.nodes), "lowered", match.rule, ops, note=note,
                                     extra=dict(match.extra)))


def _close_region(state: PartitionState, pending: "list[onnx.NodeProto]", last_read: "dict[str, int]",
                  index: int) -> None:
    """Close the region of the pending nodes; `index` is the position of the last of them."""
    if not pending:
        return
    produced: "set[str]" = set()
    reads: "dict[str, None]" = {}         # ordered, with constant-time membership
    io = state.view.io()
    for node in pending:
        node_in, node_out = io[node.name]
        for n in node_in:
            if n not in produced:
                reads.setdefault(n)
        produced.update(node_out)
    outputs = [o for node in pending for o in io[node.name][1] if last_read.get(o, -1) > index]
    if not outputs:
        # Dead nodes (tf2onnx leaves a Shape nothing reads): nothing to run, and onnxruntime
        # refuses a run that requests no output.
        pending.clear()
        return
    name = f"onnx_region_{len(state.regions)}"
    state.regions[name] = list(pending)
    state.graph.add(OnnxRegion(name, tuple(n.name for n in pending), tuple(reads), tuple(outputs)))
    pending.clear()


def control_flow_step(state: PartitionState, node: onnx.NodeProto) -> ControlFlow:
    bodies = state.bodies[node.name]
    captures = [n for n in state.reads(node) if n not in node.input]
    construct = construct_of(node, default_opset(state.model))
    assert construct is not None            # only nodes construct_of names reach here
    return ControlFlow(construct, node.name, tuple(node.input), tuple(captures), tuple(o for o in node.output if o),
                       tuple((name, body.partition.graph) for name, body in bodies.items()))


PASSES = (generate_constants, compile_bodies, match_idioms, lower_static, schedule, defer_run_time_sized,
          build_regions)



def lowers_no_node(nodes: "list[onnx.NodeProto]") -> bool:
    """No node is an idiom's anchor (NonZero, EyeLike, Trilu, the mask idioms' ops, ...) and none
    holds a body: then match_idioms, schedule and the per-node region walk have nothing to do.
    One read of op_type per node; domain and attributes only where they could matter."""
    anchors = IDIOMS.keys()
    for node in nodes:
        if node.op_type in anchors and is_standard(node):
            return False
        if node_bodies(node):
            return False
    return True


def one_region(state: PartitionState) -> None:
    """What schedule and build_regions make of a graph where no node is lowered and none is run
    by the host: the model's order as one ONNX region that hands out the graph outputs (no other
    value is read after the last node). Same region, same inputs in the same order."""
    nodes = state.nodes
    state.order = list(nodes)
    if not nodes:
        return
    produced: "set[str]" = set()
    reads: "dict[str, None]" = {}
    outputs: "list[str]" = []
    wanted = set(state.graph.outputs)
    for node in nodes:
        for name in node.input:
            if name and name not in produced:
                reads.setdefault(name)
        for name in node.output:
            if name:
                produced.add(name)
                if name in wanted:
                    outputs.append(name)
    name = f"onnx_region_{len(state.regions)}"
    state.regions[name] = list(nodes)
    state.graph.add(OnnxRegion(name, tuple(n.name for n in nodes), tuple(reads), tuple(outputs)))


def partition(model: onnx.ModelProto, level: FeatureLevel, types: "TypesLike" = None, fast: bool = True) -> Partition:
    """`fast` takes the no-anchor path when it applies (tests compare it with the full passes)."""
    state = start(model, level, types)
    if fast and lowers_no_node(state.nodes):
        generate_constants(state)       # initializers are lowered whatever the nodes are
        one_region(state)
        return state.result()
    for run in PASSES:
        run(state)
    return state.result()


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)
