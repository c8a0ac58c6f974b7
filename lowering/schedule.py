"""Orders ONNX nodes so that nodes run by the same engine sit together.

Partitioning and the oracle both cut a graph into regions, each run by one engine (DirectML
operators, onnxruntime, onnx.reference). Every region boundary costs a session call and copies,
so the number of regions should not grow with the number of nodes: exporters interleave, for
example, 180 independent per-class NonZero chains with the ONNX nodes around them. Any
topological order is a valid schedule, so this one greedily keeps running nodes of the current
engine while any is ready, and only then switches.
"""
from __future__ import annotations

import heapq
from typing import Callable, Hashable, Sequence

import onnx


def subgraph_reads(node: onnx.NodeProto) -> "list[str]":
    """Outer-scope names a node's subgraphs (If / Loop / Scan bodies) read, nested bodies included."""
    names: "list[str]" = []
    for attr in node.attribute:
        bodies = list(attr.graphs) + ([attr.g] if attr.HasField("g") else [])
        for body in bodies:
            defined = {i.name for i in body.input} | {i.name for i in body.initializer}
            for inner in body.node:
                for name in list(inner.input) + subgraph_reads(inner):
                    if name and name not in defined and name not in names:
                        names.append(name)
                defined.update(inner.output)
    return names


def node_reads(node: onnx.NodeProto) -> "list[str]":
    """Every name a node reads: its inputs and what its subgraphs capture from outside."""
    reads = [n for n in node.input if n]
    if any(a.HasField("g") or len(a.graphs) for a in node.attribute):
        reads += [n for n in subgraph_reads(node) if n not in reads]
    return reads


def engine_runs(nodes: Sequence[onnx.NodeProto],
                engine: Callable[[onnx.NodeProto], Hashable]) -> "list[tuple[Hashable, list[onnx.NodeProto]]]":
    """A topological order of `nodes` cut into maximal runs of one engine: [(engine, nodes)].

    Among the ready nodes of the current engine the earliest in the model's order goes first, so
    a graph that needs no reordering keeps its order. When the current engine has nothing ready,
    the engine of the earliest ready node is next.
    """
    producer: "dict[str, int]" = {}
    for index, node in enumerate(nodes):
        for name in node.output:
            if name:
                producer[name] = index
    waiting = [0] * len(nodes)
    users: "list[list[int]]" = [[] for _ in nodes]
    for index, node in enumerate(nodes):
        deps = {producer[r] for r in node_reads(node) if r in producer and producer[r] != index}
        waiting[index] = len(deps)
        for dep in deps:
            users[dep].append(index)
    labels = [engine(n) for n in nodes]
    ready: "dict[Hashable, list[int]]" = {}
    for index, count in enumerate(waiting):
        if count == 0:
            heapq.heappush(ready.setdefault(labels[index], []), index)
    runs: "list[tuple[Hashable, list[onnx.NodeProto]]]" = []
    done = 0
    current = None
    while done < len(nodes):
        if not ready.get(current):
            candidates = [(heap[0], label) for label, heap in ready.items() if heap]
            if not candidates:
                break                      # a cycle: the model's order is the only answer
            current = min(candidates, key=lambda c: c[0])[1]
            runs.append((current, []))
        index = heapq.heappop(ready[current])
        runs[-1][1].append(nodes[index])
        done += 1
        for user in users[index]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready.setdefault(labels[user], []), user)
    if done < len(nodes):
        runs = []
        for node in nodes:
            label = engine(node)
            if not runs or runs[-1][0] != label:
                runs.append((label, []))
            runs[-1][1].append(node)
    return runs
