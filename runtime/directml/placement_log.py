"""Which provider onnxruntime gave each node, read from its own VERBOSE session log (the C API of
onnxruntime.dll has no assignment query in the version the host uses). onnxruntime 1.24 writes,
once per graph it partitions (subgraphs included):

    Node placements
     Node(s) placed on [DmlExecutionProvider]. Number of nodes: 3
      Relu (relu0)
      MemcpyToHost (Memcpy)
     Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1
      Unique (uniq)

or, when one provider took the whole graph, ` All nodes placed on [P]. Number of nodes: N` without
the list: those nodes are then the ones of the optimised model onnxruntime wrote (the host always
asks for it, which also keeps the DML EP from fusing nodes into DmlFusedNode partitions whose
names are no node's)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_GROUP = re.compile(r"^ Node\(s\) placed on \[([^\]]+)\]\. Number of nodes: (\d+)$")
_ALL = re.compile(r"^ All nodes placed on \[([^\]]+)\]\. Number of nodes: (\d+)$")
_NODE = re.compile(r"^  (\S+) \((.*)\)$")
# onnxruntime's own nodes (copies between providers): not the model's
INSERTED_OPS = frozenset({"MemcpyToHost", "MemcpyFromHost"})


@dataclass
class Placements:
    """What the log said: listed nodes by name, and the providers that took a whole graph."""
    nodes: "dict[str, str]" = field(default_factory=dict)      # node name -> provider
    whole_graphs: "list[str]" = field(default_factory=list)    # "All nodes placed on [P]" providers
    copies: int = 0                                            # Memcpy nodes onnxruntime inserted

    @property
    def found(self) -> bool:
        return bool(self.nodes or self.whole_graphs)


def message(line: str) -> str:
    """A host log line ("severity|category|message") without its severity and category."""
    return line.split("|", 2)[-1]


def parse(log: str) -> Placements:
    placements = Placements()
    provider = None
    for line in log.splitlines():
        text = message(line)
        if text == "Node placements":
            provider = None
            continue
        group = _GROUP.match(text)
        if group:
            provider = group.group(1)
            continue
        whole = _ALL.match(text)
        if whole:
            placements.whole_graphs.append(whole.group(1))
            provider = None
            continue
        node = _NODE.match(text) if provider is not None else None
        if node is None or provider is None:
            provider = None if not text.startswith("  ") else provider
            continue
        op_type, name = node.groups()
        if op_type in INSERTED_OPS:
            placements.copies += 1
        placements.nodes[name] = provider
    return placements


def node_providers(log: str, optimized: "list[str] | None") -> "dict[str, str] | None":
    """{node name: provider} for every node of onnxruntime's optimised graph, or None when the log
    names no placement. `optimized`: the node names of the optimised model onnxruntime wrote, for a
    graph one provider took whole (its nodes are not listed)."""
    placements = parse(log)
    if not placements.found:
        return None
    assignment = dict(placements.nodes)
    if placements.whole_graphs:
        if optimized is None:
            return None
        # one provider for the main graph when only that line was written; where a subgraph's
        # block listed its nodes, those stay as listed
        provider = placements.whole_graphs[0]
        for name in optimized:
            assignment.setdefault(name, provider)
    return assignment
