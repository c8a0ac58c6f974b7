"""onnxruntime sessions over sub-models of one compiled model, shared by the lowered run's ONNX
regions (onnx_regions.RegionRunner) and the hybrid oracle (oracle.Oracle).

Both cut the same model into onnxruntime regions and, on the models measured, mostly the same
ones: the same nodes on the same inputs to the same outputs, on the CPU provider with the same
session settings. Such a sub-model is the same computation, so one session serves both (session
creation is most of a region's cost on a cold `check`). The key holds everything that makes two
sub-models or sessions differ: node identities (unique model-wide, compiler/node_ids.py), the fed
inputs, the embedded initializers, the outputs, the providers and the thread setting (`tiny`);
anything else, and the two sides build their own sessions as before.
"""
from __future__ import annotations

from typing import Callable, Iterable

import onnx


def region_key(nodes: "Iterable[onnx.NodeProto]", fed: "Iterable[str]", embedded: "Iterable[str]",
               outputs: "Iterable[str]", providers: "Iterable[str]", tiny: bool) -> tuple:
    """What identifies a region's session: equal keys are the same sub-model with the same options."""
    return (frozenset(n.name for n in nodes), frozenset(fed), frozenset(embedded), frozenset(outputs),
            tuple(providers), bool(tiny))


class SharedSessions:
    """A per-CompiledModel cache of region sessions; `hits` counts sessions a caller did not build."""

    def __init__(self) -> None:
        self._sessions: dict = {}
        self.hits = 0

    def get(self, key: tuple, build: Callable[[], object]):
        """The session under `key`, built once (a build that raises caches nothing)."""
        if key in self._sessions:
            self.hits += 1
            return self._sessions[key]
        session = self._sessions[key] = build()
        return session

    def __len__(self) -> int:
        return len(self._sessions)
