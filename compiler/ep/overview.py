"""The overview the placement picture opens on: the partitioned graph cut into blocks a person can
read at 10^3..10^4 nodes, and the copies between them counted.

A node's *stage* is the number of device-host copies on the longest path that reaches it (a copy
is an edge the prediction puts a MemcpyToHost / MemcpyFromHost on). Stages only grow along edges,
so blocks keyed by stage never form a cycle and the stage is the block's column. A block holds the
nodes of one stage on one side: a DirectML stretch, a region this project lowers (NonZero, eye,
mask: its rule), or the CPU nodes of that stage that fell back for one kind of reason (the reason
up to its details, so the shape arithmetic of a stage is one block, a NonMaxSuppression another).
Names stay as the prediction has them (identities); the page displays them (picture.py)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import onnx

from .placement import CPU, DML, NONE

KIND_ORDER = {"dml": 0, "lowered": 1, "cpu": 2, "none": 3}
KIND_OF = {DML: "dml", CPU: "cpu", NONE: "none"}


@dataclass
class Block:
    index: int
    stage: int
    kind: str                 # dml | lowered | cpu | none
    provider: str
    why: str                  # cpu / none: the reason kind; lowered: the rule
    nodes: "list[int]" = field(default_factory=list)

    def op_summary(self, ops: "list[str]", top: int = 3) -> str:
        counts = Counter(ops[i] for i in self.nodes).most_common()
        text = ", ".join(f"{op} {n}" for op, n in counts[:top])
        return text + (f", +{len(counts) - top} ops" if len(counts) > top else "")


@dataclass
class Overview:
    blocks: "list[Block]"
    node_block: "list[int]"
    layer: "list[int]"                          # longest-path layer of every node (the block view's column)
    inputs: "list[list[int]]"                   # producer node indices of every node's inputs
    block_edges: "dict[tuple[int, int], list[int]]"   # (from, to) -> [values, copies]
    copy_blocks: "list[tuple[int, list[int]]]"  # per copy: its source block (-1: a graph input), target blocks


def reason_kind(reason: str) -> str:
    """A fallback reason without its particulars (value names, which producer): what groups CPU nodes."""
    cut = len(reason)
    for mark in (": ", " ("):
        at = reason.find(mark)
        if at > 0:
            cut = min(cut, at)
    return reason[:cut][:80] or "no reason given"


def _producers(graph: onnx.GraphProto) -> "tuple[list[list[int]], list[int]]":
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    inputs = [sorted({producer[x] for x in n.input if x in producer and producer[x] < i})
              for i, n in enumerate(graph.node)]
    layer: "list[int]" = []
    for ins in inputs:
        layer.append(1 + max((layer[j] for j in ins), default=-1))
    return inputs, layer


def _side(entry: dict, lowered_rule: "str | None") -> "tuple[str, str]":
    if lowered_rule:
        return "lowered", lowered_rule
    kind = KIND_OF.get(entry.get("provider", ""), "none")
    return kind, "" if kind == "dml" else reason_kind(entry.get("reason", ""))


def build(placement: dict, graph: onnx.GraphProto, lowered: "dict[str, str]") -> Overview:
    """Blocks over `graph` (the graph the prediction ran on); `lowered` maps the lowered anchors'
    nodes to their rule."""
    by_node = {n["node"]: n for n in placement["nodes"]}
    nodes = list(graph.node)
    index = {n.name: i for i, n in enumerate(nodes)}
    inputs, layer = _producers(graph)
    copied = {(c["value"], t) for c in placement["copies"] for t in c["to"]}
    outputs = [set(n.output) for n in nodes]
    stage: "list[int]" = []
    for i, node in enumerate(nodes):
        crossing = [stage[j] + any((v, node.name) in copied for v in outputs[j] & set(node.input)) for j in inputs[i]]
        stage.append(max(crossing, default=0))
    keys: "dict[tuple, Block]" = {}
    for i, node in enumerate(nodes):
        entry = by_node.get(node.name, {})
        kind, why = _side(entry, lowered.get(node.name))
        key = (stage[i], kind, why)
        if key not in keys:
            keys[key] = Block(len(keys), stage[i], kind, entry.get("provider", NONE), why)
        keys[key].nodes.append(i)
    ordered = sorted(keys.values(), key=lambda b: (b.stage, KIND_ORDER[b.kind], b.nodes[0]))
    for new, block in enumerate(ordered):
        block.index = new
    node_block = [0] * len(nodes)
    for block in ordered:
        for i in block.nodes:
            node_block[i] = block.index
    edges: "dict[tuple[int, int], list[int]]" = {}
    for i, ins in enumerate(inputs):
        for j in ins:
            if node_block[j] != node_block[i]:
                edges.setdefault((node_block[j], node_block[i]), [0, 0])[0] += 1
    copy_blocks = []
    for c in placement["copies"]:
        source = node_block[index[c["from"]]] if c["from"] in index else -1
        targets = list(dict.fromkeys(node_block[index[t]] for t in c["to"] if t in index))
        copy_blocks.append((source, targets))
        for t in targets:
            if source >= 0 and source != t:
                edges.setdefault((source, t), [0, 0])[1] += 1
    return Overview(ordered, node_block, layer, inputs, edges, copy_blocks)
