"""Runs a CompiledModel on the CPU emulator: DirectML steps emulated, ONNX regions on
onnxruntime / onnx.reference, nodes with run-time sizes specialised (and cached) as they come."""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np

from ir import LowerAtRunTime, OnnxRegion
from lowering import Declined

from .emulator import Emulator
from .feeds import check_feeds
from .onnx_regions import RegionRunner


def strict_default() -> bool:
    return os.environ.get("DML_LOWER_STRICT", "") not in ("", "0")


class EmulatorSession:
    """Per-CompiledModel execution state: region sessions and run-time specialisations."""

    def __init__(self, compiled, operators=None, providers: "list[str] | None" = None) -> None:
        self.compiled = compiled
        self.operators = operators            # None: the numpy kernels; else runtime.ort_operators
        partition = compiled.partition
        self.regions = RegionRunner(compiled.model, dict(partition.regions), compiled.types, providers)
        self.specialised: dict = {}
        self.log: "list[str]" = []

    def _lower_at_run_time(self, step: LowerAtRunTime, tensors: Mapping[str, np.ndarray],
                           strict: bool) -> "dict[str, np.ndarray]":
        info = self.compiled.partition.deferred[step.onnx_node]
        shapes = tuple(None if t is None else tuple(np.shape(tensors[t.name])) for t in info.inputs)
        key = (step.onnx_node, shapes)
        if key not in self.specialised:
            from lowering import rule_for
            node = info.with_shapes(shapes)
            self.specialised[key] = rule_for(node.op_type).lower(node, self.compiled.feature_level)
        result = self.specialised[key]
        if isinstance(result, Declined):
            self.log.append(f"{step.onnx_node} at input shapes {list(shapes)}: left to ONNX: {result.reason}")
            name = f"fallback_{step.onnx_node}"
            node = next(n for n in self.compiled.model.graph.node if n.name == step.onnx_node)
            self.regions.add_region(name, [node])
            region = OnnxRegion(name, (step.onnx_node,), step.inputs, step.outputs)
            return self.regions(region, tensors)
        return Emulator(result, strict, self.operators).run({n: tensors[n] for n in result.inputs})

    def run(self, feeds: Mapping[str, object], strict: "bool | None" = None) -> "dict[str, np.ndarray]":
        strict = strict_default() if strict is None else strict
        tensors = dict(self.compiled.initializers)
        tensors.update(check_feeds(self.compiled.inputs, feeds, self.compiled.optional_inputs))

        def runner(step, env):
            if isinstance(step, OnnxRegion):
                return self.regions(step, env)
            return self._lower_at_run_time(step, env, strict)

        return Emulator(self.compiled.graph, strict, self.operators).run(tensors, runner)
