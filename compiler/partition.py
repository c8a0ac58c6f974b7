"""Partition: walk the nodes in order, let each rule lower or decline, and gather the nodes left
to ONNX into maximal consecutive regions. The result is one composed ir.Graph plus placement."""
from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from ir import FeatureLevel, Graph, LowerAtRunTime, OnnxRegion
from lowering import Declined, NodeInfo, rule_for

from .frontend import default_opset, node_info, value_types

# The operators a rule emits when its sizes are only known at run time (for the report).
_NOMINAL_OPERATORS = {"nonzero": ["NONZERO_COORDINATES", "ELEMENT_WISE_IDENTITY"],
                      "eyelike": ["DIAGONAL_MATRIX"]}


@dataclass
class Placement:
    onnx_nodes: "list[str]"
    status: str                      # "lowered" | "onnx"
    rule: str
    dml_operators: "list[str]" = field(default_factory=list)
    reason: str = ""
    note: str = ""

    def to_dict(self) -> dict:
        out = {"onnx_nodes": list(self.onnx_nodes), "status": self.status, "rule": self.rule,
               "dml_operators": list(self.dml_operators), "reason": self.reason}
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Partition:
    graph: Graph
    placement: "list[Placement]"
    regions: "dict[str, list[onnx.NodeProto]]"       # region name -> its nodes, in order
    deferred: "dict[str, NodeInfo]"                  # node name -> node lowered at run time


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


def node_reads(node: onnx.NodeProto) -> "list[str]":
    return [n for n in node.input if n] + subgraph_inputs(node)


def partition(model: onnx.ModelProto, level: FeatureLevel) -> Partition:
    types = value_types(model)
    opset = default_opset(model)
    graph = Graph(level)
    inits = {i.name for i in model.graph.initializer}
    graph.inputs = [vi.name for vi in model.graph.input if vi.name not in inits] + sorted(inits)
    graph.outputs = [vo.name for vo in model.graph.output]
    placement: "list[Placement]" = []
    regions: "dict[str, list[onnx.NodeProto]]" = {}
    deferred: "dict[str, NodeInfo]" = {}
    nodes = list(model.graph.node)

    # What each position's later consumers read, to know what a region must hand out.
    later_reads: "list[set[str]]" = [set() for _ in nodes]
    acc = set(graph.outputs)
    for index in range(len(nodes) - 1, -1, -1):
        later_reads[index] = set(acc)
        acc.update(node_reads(nodes[index]))

    pending: "list[int]" = []

    def flush() -> None:
        if not pending:
            return
        members = [nodes[i] for i in pending]
        produced, reads = set(), []
        for node in members:
            reads += [n for n in node_reads(node) if n not in produced and n not in reads]
            produced.update(o for o in node.output if o)
        outputs = [o for node in members for o in node.output if o and o in later_reads[pending[-1]]]
        name = f"onnx_region_{len(regions)}"
        regions[name] = members
        graph.add(OnnxRegion(name, tuple(n.name for n in members), tuple(reads), tuple(outputs)))
        pending.clear()

    for index, node in enumerate(nodes):
        rule = rule_for(node.op_type, node.domain)
        if rule is None:
            pending.append(index)
            continue
        info = node_info(node, opset, types)
        if info.is_static:
            result = rule.lower(info, level)
        else:
            reason = rule.check(info, level)
            result = Declined(reason) if reason else None
        if isinstance(result, Declined):
            placement.append(Placement([node.name], "onnx", rule.name, [], result.reason))
            pending.append(index)
            continue
        flush()
        if result is None:
            deferred[node.name] = info
            graph.add(LowerAtRunTime(node.name, rule.name, tuple(t.name for t in info.inputs if t),
                                     tuple(t.name for t in info.outputs)))
            placement.append(Placement([node.name], "lowered", rule.name, _NOMINAL_OPERATORS[rule.name],
                                       note="sizes are bound at run time; specialised per input shape"))
            continue
        graph.merge(result)
        ops = result.dml_operators
        note = "" if ops else "empty result: a zero-sized tensor needs no DirectML operator"
        placement.append(Placement([node.name], "lowered", rule.name, ops, note=note))
    flush()
    return Partition(graph, placement, regions, deferred)
