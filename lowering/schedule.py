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
from typing import Callable, Hashable, Sequence, TypeVar

import onnx

from onnx_dml_lowering.lowering.onnx_graphs import is_standard, node_reads


def is_constant(node: onnx.NodeProto) -> bool:
    """A Constant node: no inputs, so it can run anywhere before its users (grouped_order's lazy)."""
    return node.op_type == "Constant" and is_standard(node)


def grouped_order(labels: "Sequence[Hashable]", deps: "Sequence[Sequence[int]]",
                  keys: "Sequence[int]", lazy: "Sequence[bool] | None" = None) -> "list[int] | None":
    """A topological order of items 0..n-1 (item i after every item in deps[i]) that keeps items
    of one label together: among the ready items of the current label the smallest key goes
    first; when the current label has none ready, the label of the smallest ready key is next.
    None when the dependencies hold a cycle.

    `lazy` items (ones without dependencies, such as Constant nodes) whose users all share their
    label go right before their first user instead of as soon as they are ready: exporters put
    hundreds of Constants up front, and run first they would all sit in the first region and
    cross every region boundary as an output and an input."""
    count = len(labels)
    waiting = [0] * count
    users: "list[list[int]]" = [[] for _ in labels]
    for index, before in enumerate(deps):
        if not before:
            continue
        if len(before) == 1:          # the common case, without building a set
            dep = before[0]
            if dep != index:
                waiting[index] = 1
                users[dep].append(index)
            continue
        unique = set(before) - {index}
        waiting[index] = len(unique)
        for dep in unique:
            users[dep].append(index)
    # Which lazy items wait for a user, and each user's lazy dependencies (not counted as waiting).
    held = [False] * count
    lazy_deps: "dict[int, list[int]]" = {}
    if lazy is not None:
        for index in range(count):
            mine = users[index]
            if lazy[index] and mine and not deps[index] and all(labels[u] == labels[index] for u in mine):
                held[index] = True
                for user in mine:
                    waiting[user] -= 1
                    lazy_deps.setdefault(user, []).append(index)
    ready: "dict[Hashable, list[tuple[int, int]]]" = {}
    for index, wait in enumerate(waiting):
        if wait == 0 and not held[index]:
            heapq.heappush(ready.setdefault(labels[index], []), (keys[index], index))
    order: "list[int]" = []
    emitted = [False] * count
    current = None
    while len(order) < count:
        if not ready.get(current):
            candidates = [(heap[0], label) for label, heap in ready.items() if heap]
            if not candidates:
                return None
            current = min(candidates, key=lambda c: c[0])[1]
        _, index = heapq.heappop(ready[current])
        for dep in sorted(lazy_deps.get(index, ()), key=lambda d: keys[d]):
            if not emitted[dep]:
                emitted[dep] = True
                order.append(dep)
        emitted[index] = True
        order.append(index)
        for user in users[index]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready.setdefault(labels[user], []), (keys[user], user))
    return order


Engine = TypeVar("Engine", bound=Hashable)


def engine_runs(nodes: Sequence[onnx.NodeProto], engine: Callable[[onnx.NodeProto], Engine],
                reads: "Sequence[list[str]] | None" = None,
                labels: "Sequence[Engine] | None" = None) -> "list[tuple[Engine, list[onnx.NodeProto]]]":
    """A topological order of `nodes` cut into maximal runs of one engine: [(engine, nodes)].

    A graph that needs no reordering keeps its order (see grouped_order); a graph with a cycle
    keeps the model's order. `reads`: node_reads of each node, `labels`: engine(node) of each
    node, when the caller has them.
    """
    producer: "dict[str, int]" = {}
    for index, node in enumerate(nodes):
        for name in node.output:
            if name:
                producer[name] = index
    if reads is None:
        reads = [node_reads(node) for node in nodes]
    deps = [[producer[r] for r in read if r in producer] for read in reads]
    labels = list(labels) if labels is not None else [engine(n) for n in nodes]
    order = grouped_order(labels, deps, list(range(len(nodes))), [is_constant(n) for n in nodes])
    runs: "list[tuple[Engine, list[onnx.NodeProto]]]" = []
    for index in order if order is not None else range(len(nodes)):
        if not runs or runs[-1][0] != labels[index]:
            runs.append((labels[index], []))
        runs[-1][1].append(nodes[index])
    return runs
