"""Runs the ONNX nodes that were not lowered: whole regions on onnxruntime (the session's
providers); as the hybrid oracle runs them where onnxruntime deviates from the ONNX spec on a node
of the region (ort_deviations.TABLE: those nodes by their definitions, the rest on onnxruntime's
CPU provider); on onnx.reference where onnxruntime has no kernel for a type (as the reference
oracle runs it: an If / Loop / Scan onnx.reference gets wrong runs on the host). The sub-models,
sessions and that fallback chain are the region engine's (region_engine.py), the one the oracle
runs its regions through."""
from __future__ import annotations

from typing import AbstractSet, Mapping

import numpy as np
import onnx

from onnx_dml_lowering.ir import DmlLowerError, OnnxRegion
from onnx_dml_lowering.ir.display import display, name_list
from onnx_dml_lowering.ir.errors import first_line

from onnx_dml_lowering.runtime.ort.settings import SessionSettings
from .oracle import HybridSession, ReferenceSession
from .region_engine import HYBRID, ORT, REFERENCE, REFERENCE_ORACLE, Region, RegionEngine, SessionCache

class RegionFailed(DmlLowerError):
    """An ONNX region of the lowered graph failed at run time; `nodes` are its nodes (the line
    names a bounded number of them)."""

    def __init__(self, message: str, nodes: "tuple[str, ...]") -> None:
        super().__init__(message)
        self.nodes = nodes


# onnxruntime first; where it deviates on a node of the region (ort_deviations.TABLE), the region
# as the hybrid oracle runs it (those nodes by their definitions, the rest still on onnxruntime);
# where it cannot load the region, onnx.reference as the reference oracle runs it.
CHAIN = (ORT, HYBRID, REFERENCE_ORACLE)


class RegionRunner:
    """Runs the ONNX regions (OnnxRegion steps) of one lowered graph through its region engine."""

    def __init__(self, model: onnx.ModelProto, regions: "dict[str, list[onnx.NodeProto]]",
                 types: dict, providers: "list[str] | None" = None, generated: "AbstractSet[str]" = frozenset(),
                 settings: "SessionSettings | None" = None, shared: "SessionCache | None" = None) -> None:
        # Initializers that are also graph inputs may be overridden by a feed, and generated ones
        # come from the DirectML side: both are passed in, not embedded. `shared`: the
        # CompiledModel's cache, whose onnxruntime sessions and results the hybrid oracle left.
        self.engine = RegionEngine(model, types, settings, providers, passed=generated, cache=shared,
                                   reference_oracle=ReferenceSession, hybrid_oracle=HybridSession)
        self.regions = regions
        self.engines: "dict[str, str]" = {}      # region -> what ran it (and why, for reference)
        self._regions: "dict[str, Region]" = {}  # step name -> its engine region, made once

    def add_region(self, name: str, nodes: "list[onnx.NodeProto]") -> None:
        self.regions.setdefault(name, nodes)

    def region(self, step: OnnxRegion) -> Region:
        if step.name not in self._regions:
            self._regions[step.name] = self.engine.region(self.regions[step.name], step.inputs, step.outputs, step.name)
        return self._regions[step.name]

    def __call__(self, step: OnnxRegion, tensors: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        region = self.region(step)
        if step.name not in self.engines:
            engine, _ = self.engine.open(region, CHAIN)
            _, reason = self.engine.chosen(region, CHAIN) or (engine, None)
            self.engines[step.name] = (f"onnxruntime {', '.join(self.engine.providers)}" if engine == ORT
                                       else f"{HYBRID} ({reason})" if engine == HYBRID else f"{REFERENCE} ({reason})")
        try:
            # an earlier pass's run of this very region on bit-identical feeds (check's oracle, or
            # the backend before this one) is taken, not run again (region_cache.py)
            return self.engine.run(region, tensors, CHAIN, reuse=True)
        except Exception as exc:
            raise RegionFailed(f"ONNX region {display(step.name)} [{name_list(step.onnx_nodes)}] failed on "
                               f"{self.engines[step.name]}: {first_line(exc)}", step.onnx_nodes) from None
