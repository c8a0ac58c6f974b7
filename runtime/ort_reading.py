"""onnxruntime's reading of a model: what a provider backend gives where onnxruntime deviates from
ONNX on a node the table names (ort_deviations.TABLE). A provider output that mismatches the
oracle but matches this reading, with the same tolerances, is that deviation, named (DEVIATION),
not a plain MISMATCH; anything else stays a MISMATCH.

The reading is the hybrid oracle with the table's nodes left on onnxruntime (Oracle(ort_reading=
True)); it is evaluated only when a provider output mismatches, once per feed set, and its values
of the table's nodes are set beside the oracle's to name only the deviations that changed one.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from .compare import compare
from .ort_deviations import OrtDeviation, deviating_nodes
from .oracle import Oracle

if TYPE_CHECKING:
    import onnx


class OrtReading:
    """The ort-reading oracle of one check, made the first time a provider output mismatches."""

    def __init__(self, make: Callable[..., Oracle], model: onnx.ModelProto, types: "Mapping[str, object]") -> None:
        self._make = make           # (ort_reading=True) -> an Oracle of the check's model
        self._model, self._types = model, types
        self._oracle: "Oracle | None" = None
        self._feeds: "Mapping | None" = None
        self._results: "dict[str, np.ndarray]" = {}

    # The tables below walk the whole graph (three passes, ~15 ms at 3,500 nodes): made only when a
    # provider output mismatches, which most checks never see.
    @functools.cached_property
    def nodes(self) -> "dict[str, OrtDeviation]":
        types = self._types
        return deviating_nodes(self._model.graph, {n: getattr(i, "rank", None) for n, i in types.items()},
                               {t.name: t for t in self._model.graph.initializer}, lambda name: name in types)

    @functools.cached_property
    def _outputs(self) -> "dict[str, str]":
        return {o: n.name for n in self._model.graph.node if n.name in self.nodes for o in n.output
                if o and o in self._types}

    @functools.cached_property
    def _op_types(self) -> "dict[str, str]":
        return {n.name: n.op_type for n in self._model.graph.node}

    def _run(self, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        if self._oracle is None:
            self._oracle = self._make(ort_reading=True)
            self._oracle.keep.update(self._outputs)
        if feeds is not self._feeds:        # once per feed set
            self._results, self._feeds = self._oracle.run(feeds), feeds
        return self._results

    def fired(self, spec_values: Mapping[str, np.ndarray]) -> "list[OrtDeviation]":
        """The entries whose nodes gave another value than the spec's (all present if unknown)."""
        values = self._oracle.values if self._oracle is not None else {}
        hit = {self.nodes[node] for out, node in self._outputs.items()
               if out in values and out in spec_values and not _same(values[out], spec_values[out])}
        return sorted(hit or set(self.nodes.values()), key=lambda e: e.key)

    def recognise(self, feeds: Mapping[str, np.ndarray], name: str, got: np.ndarray, atol: float, rtol: float,
                  exact: bool, spec_values: Mapping[str, np.ndarray]) -> "str | None":
        """The named deviation(s) when `got` (output `name` of a provider backend) is onnxruntime's
        reading within the tolerances; else None."""
        if not self.nodes or got is None:
            return None
        try:
            want = self._run(feeds).get(name)
        except Exception:           # the reading cannot be evaluated: nothing is recognised, nothing hidden
            return None
        if want is None or compare(name, "", np.asarray(want), got, atol, rtol, exact=exact).status != "match":
            return None
        fired = self.fired(spec_values)
        # the nodes the table names (not the sequence readers that went with them)
        nodes = [n for n, e in self.nodes.items() if e in fired and self._op_types[n] == e.op_type]
        where = ", ".join(nodes or list(self.nodes))
        spec = spec_values.get(name)
        shapes = "" if spec is None or np.shape(spec) == np.shape(got) else f"; expected {list(np.shape(spec))}"
        return "; ".join(e.name for e in fired) + f" (node {where}{shapes})"


def _same(a: object, b: object) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
