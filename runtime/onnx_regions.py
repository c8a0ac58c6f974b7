"""Runs the ONNX nodes that were not lowered: whole regions on onnxruntime's CPU provider, on
onnx.reference where onnxruntime has no kernel for a type or deviates from the ONNX spec (as the
reference oracle runs it: an If / Loop / Scan onnx.reference gets wrong runs on the host)."""
from __future__ import annotations

from typing import Mapping

import numpy as np
import onnx
from onnx import helper

from onnx_dml_lowering.ir import DmlLowerError, OnnxRegion
from onnx_dml_lowering.ir.errors import first_line

from .ort_providers import SessionSettings, few_elements
from .oracle import ReferenceSession
from .ort_values import run_session
from .ort_workarounds import loops_as_onnx_defines
from .region_sessions import SharedSessions, deterministic, region_key

class RegionRunner:
    """Builds, caches and runs one sub-model per ONNX region of a compiled model."""

    def __init__(self, model: onnx.ModelProto, regions: "dict[str, list[onnx.NodeProto]]",
                 types: dict, providers: "list[str] | None" = None, generated: "set[str]" = frozenset(),
                 settings: "SessionSettings | None" = None, shared: "SharedSessions | None" = None) -> None:
        self.model = model
        self.settings = settings          # the user's onnxruntime session settings (--threads ...)
        self.shared = shared              # sessions shared with the hybrid oracle (region_sessions)
        self.providers = providers or ["CPUExecutionProvider"]
        self.regions = regions
        self.types = types
        # Initializers that are also graph inputs may be overridden by a feed, and generated ones
        # come from the DirectML side: both are passed in, not embedded.
        passed = {vi.name for vi in model.graph.input} | set(generated)
        self.inits = {i.name: i for i in model.graph.initializer if i.name not in passed}
        self._sessions: dict = {}
        self.engines: "dict[str, str]" = {}      # region -> what ran it (and why, for reference)
        self._shared_keys: "dict[str, tuple]" = {}   # region -> its key in `shared` (results shareable)

    def add_region(self, name: str, nodes: "list[onnx.NodeProto]") -> None:
        self.regions.setdefault(name, nodes)

    def submodel(self, step: OnnxRegion) -> onnx.ModelProto:
        nodes = self.regions[step.name]

        def vi(name: str) -> onnx.ValueInfoProto:
            info = self.types.get(name)
            if info is None or not info.onnx_type:
                raise DmlLowerError(f"ONNX region {step.name}: the type of {name!r} is unknown")
            return helper.make_tensor_value_info(name, info.onnx_type, None)


        inputs = [vi(n) for n in step.inputs if n not in self.inits]
        inits = [self.inits[n] for n in step.inputs if n in self.inits]
        graph = helper.make_graph(loops_as_onnx_defines(nodes), step.name, inputs, [vi(n) for n in step.outputs], inits)
        sub = helper.make_model(graph, opset_imports=list(self.model.opset_import),
                                ir_version=self.model.ir_version)
        sub.functions.extend(self.model.functions)
        return sub

    def _deviation(self, step: OnnxRegion) -> "str | None":
        return _scalar_nonzero(self.regions[step.name], {n: i.shape for n, i in self.types.items()})

    def _tiny(self, step: OnnxRegion, tensors: "Mapping[str, np.ndarray]") -> bool:
        """The region's first inputs and its initializers hold few elements: one thread will do."""
        fed = sum(int(np.size(tensors[n])) for n in step.inputs if n in tensors and n not in self.inits)
        return few_elements([self.inits[n] for n in step.inputs if n in self.inits], fed)

    def _session(self, step: OnnxRegion, tensors: "Mapping[str, np.ndarray] | None" = None):
        if step.name in self._sessions:
            return self._sessions[step.name]
        reason = self._deviation(step)
        session = None
        if reason is None:
            from .ort_providers import make_session
            tiny = self._tiny(step, tensors or {})

            def build():     # the sub-model only when this side builds the session
                return make_session(self.submodel(step), self.providers, tiny=tiny, settings=self.settings)
            try:
                if self.shared is None:
                    session = build()
                else:
                    embedded = [n for n in step.inputs if n in self.inits]
                    fed = [n for n in step.inputs if n not in self.inits]
                    key = region_key(self.regions[step.name], fed, embedded, step.outputs, self.providers, self.settings)
                    session = self.shared.get(key, build)
                    if deterministic(self.regions[step.name], self.model):
                        self._shared_keys[step.name] = key
                self.engines[step.name] = f"onnxruntime {', '.join(self.providers)}"
            except Exception as exc:  # onnxruntime raises its own Fail / NotImplemented types
                reason = f"onnxruntime cannot run it: {first_line(exc)}"
        if session is None:      # the Loops onnx.reference gets wrong run on the host, as the oracle does
            session = ReferenceSession(self.submodel(step), self.types)
            self.engines[step.name] = f"onnx.reference ({reason})"
        self._sessions[step.name] = session
        return session

    def __call__(self, step: OnnxRegion, tensors: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        session = self._session(step, tensors)
        feeds = {n: tensors[n] for n in step.inputs if n not in self.inits}
        key = self._shared_keys.get(step.name)
        # The oracle's run of this very region on bit-identical feeds (check runs it first).
        results = self.shared.recall(key, feeds) if key is not None else None
        if results is not None:     # copies: the oracle's values must not alias the lowered run's buffers
            return {name: np.array(results[name], copy=True) for name in step.outputs}
        try:
            results = run_session(session, step.outputs, feeds)
        except Exception as exc:
            nodes = ", ".join(step.onnx_nodes)
            raise DmlLowerError(f"ONNX region {step.name} [{nodes}] failed on "
                                f"{self.engines[step.name]}: {first_line(exc)}") from None
        return {name: np.asarray(value) for name, value in zip(step.outputs, results)}


def _graph_ranks(graph: onnx.GraphProto, outer: "dict") -> dict:
    """Value name -> shape (None: rank unknown) inside a subgraph, from what inference recorded."""
    shapes = dict(outer)
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        tensor = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tensor.HasField("shape"):
            shapes[vi.name] = tuple(tensor.shape.dim)
    for init in graph.initializer:
        shapes[init.name] = tuple(init.dims)
    return shapes


def _scalar_nonzero(nodes, shapes: dict) -> "str | None":
    """Why onnxruntime must not run these nodes: a NonZero on a (possibly) scalar input, where it
    gives (1, nnz) and ONNX says (0, nnz); If / Loop / Scan bodies are looked into as well."""
    for node in nodes:
        if node.op_type == "NonZero" and node.domain in ("", "ai.onnx"):
            shape = shapes.get(node.input[0])
            if shape is None or len(shape) == 0:
                scalar = "a scalar" if shape == () else "a possibly scalar"
                return (f"node {node.name}: onnxruntime gives (1, nnz) for a scalar NonZero, "
                        f"ONNX says (0, nnz), and this is {scalar} input")
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                reason = _scalar_nonzero(attr.g.node, _graph_ranks(attr.g, shapes))
                if reason:
                    return reason
    return None
