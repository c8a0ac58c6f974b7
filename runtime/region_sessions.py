"""onnxruntime sessions over sub-models of one compiled model, shared by the lowered run's ONNX
regions (onnx_regions.RegionRunner) and the hybrid oracle (oracle.Oracle).

Both cut the same model into onnxruntime regions and, on the models measured, mostly the same
ones: the same nodes on the same inputs to the same outputs, on the CPU provider with the same
session settings. Such a sub-model is the same computation, so one session serves both (session
creation is most of a region's cost on a cold `check`). The key holds everything that makes two
sub-models or sessions differ: node identities (unique model-wide, compiler/node_ids.py), the fed
inputs, the embedded initializers, the outputs, the providers and the user's session settings;
anything else, and the two sides build their own sessions as before. The thread setting a region
gets when the user sets none (`tiny`: one thread for small work) is not part of the key: the two
sides estimate the work from what each knows (the oracle from the initializers, the lowered run
from its feeds too) and could disagree, so whichever builds first decides, and the other uses that
very session (the same session, so the shared results below stay bit-identical).

The results are shared too, one way and once: the oracle runs first and leaves a region's results
(`remember`); the lowered run takes them (`recall`) only if its feeds to that region are bit for
bit the oracle's (same dtypes, shapes and bytes), which for the same deterministic session means
the same results. The oracle stays independent: what it compares against is always computed from
its own values; only the lowered run skips re-running a region on identical feeds. A region
holding a random operator never shares results, and a recalled entry is gone (a warm run outside
`check` never finds one).
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

import numpy as np
import onnx

from .nondeterminism import is_random


def region_key(nodes: "Iterable[onnx.NodeProto]", fed: "Iterable[str]", embedded: "Iterable[str]",
               outputs: "Iterable[str]", providers: "Iterable[str]", settings=None) -> tuple:
    """What identifies a region's session: equal keys are the same sub-model with the same options
    (`settings`: the user's SessionSettings, hashable, or None)."""
    return (frozenset(n.name for n in nodes), frozenset(fed), frozenset(embedded), frozenset(outputs),
            tuple(providers), settings)


def deterministic(nodes: "Iterable[onnx.NodeProto]", model: onnx.ModelProto) -> bool:
    """No random operator among the nodes (or in their bodies): equal feeds give equal results."""
    return not any(is_random(n, model) for n in nodes)


def _same_bits(a, b) -> bool:
    if a is b:
        return True
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.hasobject or a.dtype.kind in "SUV":
        return False                    # compared by bytes only: numeric and bool arrays
    if a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.strides == b.strides:
        return True                     # one memory (a weight's mapped file is not read to learn it)
    return np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


class SharedSessions:
    """A per-CompiledModel cache of region sessions; `hits` counts sessions a caller did not build."""

    def __init__(self) -> None:
        self._sessions: dict = {}
        self._results: dict = {}        # key -> (feeds, results) the oracle left for the lowered run
        self.hits = 0
        self.reused = 0                 # region runs the lowered run took from the oracle

    def get(self, key: tuple, build: Callable[[], object]):
        """The session under `key`, built once (a build that raises caches nothing)."""
        if key in self._sessions:
            self.hits += 1
            return self._sessions[key]
        session = self._sessions[key] = build()
        return session

    def remember(self, key: tuple, feeds: "Mapping[str, np.ndarray]", results: "Mapping[str, np.ndarray]") -> None:
        """The oracle's run of the region under `key`, by output name (the key holds the outputs as a
        set: the two sides may list them in different orders); deterministic regions, last run only."""
        self._results[key] = (dict(feeds), dict(results))

    def recall(self, key: tuple, feeds: "Mapping[str, np.ndarray]") -> "dict[str, np.ndarray] | None":
        """The results remembered under `key`, by output name, if `feeds` are bit for bit the ones
        they came from."""
        entry = self._results.pop(key, None)
        if entry is None:
            return None
        known, results = entry
        if known.keys() != feeds.keys() or not all(_same_bits(known[n], feeds[n]) for n in known):
            return None
        self.reused += 1
        return results

    def __len__(self) -> int:
        return len(self._sessions)
