"""The run-time specialisations of a lowered graph's matches, built once per shape and shared.

A match whose sizes are bound only at run time is built when a call brings them (and again for
each new shape, or value of a value input), and kept for the runner's life. A match that is
portable (lowering.match.Match.portable: its rewrite reads nothing but its inputs' types, shapes
and values, by position) shares its build with every match of the same rule and signature at the
same shapes and values: a detector's 180 NonZero nodes, one per class, reading score masks of one
shape, are built and their descriptors validated once, not 180 times. The graph built for the
first match runs for the others with their inputs fed under its names and its outputs handed back
under theirs; a run reads nothing else by name (the interpreter's tensors are its own per run).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnx_dml_lowering.ir import FeatureLevel, Graph
from onnx_dml_lowering.lowering import Declined, Match

from .binding import analyse
from .memory import buffer_bytes


@dataclass
class Build:
    """One specialisation: the graph (or why it declined) under the names of the match it was
    built for, and what a run of it needs once per build, not per run."""
    graph: "Graph | Declined"
    names: "tuple[str, ...]"            # that match's inputs and value inputs, then its outputs
    lifetimes: Any = None
    buffer_sizes: "dict[str, int]" = field(default_factory=dict)
    validated: set = field(default_factory=set)


def _names(match: Match) -> "tuple[str, ...]":
    return tuple(t.name for t in match.inputs) + match.value_inputs + match.outputs


@dataclass
class Specialisation:
    """A match's build at one call's shapes and values, and the renaming its graph's run needs when
    the build was made for another match (None: its own)."""
    build: Build
    shapes: "dict[str, tuple]"
    values: "dict[str, np.ndarray]"
    renamed: "dict[str, str] | None"      # the build's names -> this match's

    def feeds(self, tensors: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        """What the build's graph reads, from a call's tensors."""
        graph = self.build.graph
        assert isinstance(graph, Graph)
        to = self.renamed or {}
        return {name: tensors[to.get(name, name)] for name in graph.inputs}

    def outputs(self, results: "dict[str, np.ndarray]") -> "dict[str, np.ndarray]":
        if self.renamed is None:
            return results
        return {self.renamed[name]: value for name, value in results.items()}


class RunTimeBuilds(Mapping):
    """Every specialisation of one runner's run-time matches: by node and call (what compile --dim
    reports), and the builds shared between portable matches. As a mapping: (node, shapes, value
    names, values) -> the graph that runs that call, or why it declined."""

    def __init__(self, level: FeatureLevel) -> None:
        self.level = level
        self.by_call: "dict[tuple, Specialisation]" = {}
        self._shared: "dict[tuple, Build]" = {}

    def __getitem__(self, key: tuple) -> "Graph | Declined":
        return self.by_call[key].build.graph

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.by_call)

    def __len__(self) -> int:
        return len(self.by_call)

    def specialised(self, node: str, match: Match, tensors: Mapping[str, np.ndarray]) -> Specialisation:
        """The specialisation of `match` (anchored at `node`) for a call's tensors, built if new."""
        shapes = {t.name: tuple(np.shape(tensors[t.name])) for t in match.inputs}
        values = {name: np.asarray(tensors[name]) for name in match.value_inputs}
        content = (tuple(shapes.values()), tuple((v.dtype.str, v.shape, v.tobytes()) for v in values.values()))
        key = (node, tuple(shapes.items()), tuple(values), content[1])
        found = self.by_call.get(key)
        if found is None:
            found = self.by_call[key] = self._specialise(match, shapes, values, content)
        return found

    def _specialise(self, match: Match, shapes: "dict[str, tuple]", values: "dict[str, np.ndarray]",
                    content: tuple) -> Specialisation:
        shared = None if match.portable is None else (match.portable, len(match.inputs),
                                                       len(match.value_inputs), len(match.outputs), content)
        build = None if shared is None else self._shared.get(shared)
        names = _names(match)
        if build is not None and build.names != names:
            renamed = dict(zip(build.names, names))
            # one name for one name both ways: a build reading x twice cannot feed y and z
            one_to_one = len(renamed) == len(set(names)) == len(set(zip(build.names, names)))
            if one_to_one and (isinstance(build.graph, Declined) or all(n in renamed for n in build.graph.inputs)):
                return Specialisation(build, shapes, values, renamed)
        build = _build(match, shapes, values, self.level)
        if shared is not None:
            self._shared.setdefault(shared, build)
        return Specialisation(build, shapes, values, None)

    def own_graph(self, key: tuple, match: Match) -> "Graph | Declined":
        """The graph of a call under its match's own names (compile --dim shows it): a shared build
        is made again for this match."""
        found = self.by_call[key]
        if found.renamed is None:
            return found.build.graph
        return match.build(found.shapes, found.values, self.level)


def _build(match: Match, shapes: "dict[str, tuple]", values: "dict[str, np.ndarray]",
           level: FeatureLevel) -> Build:
    graph = match.build(shapes, values, level)
    build = Build(graph, _names(match))
    if isinstance(graph, Graph):
        build.lifetimes = analyse(graph)
        build.buffer_sizes = buffer_bytes(graph)
    return build
