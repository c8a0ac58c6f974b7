"""Runs a CompiledModel on the CPU emulator: DirectML steps emulated, ONNX regions on
onnxruntime / onnx.reference, nodes with run-time sizes specialised (and cached) as they come."""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np

from onnx_dml_lowering.ir import LowerAtRunTime, OnnxRegion
from onnx_dml_lowering.lowering import Declined

from .feeds import check_feeds
from .binding import analyse
from .interpreter import Interpreter
from .memory import buffer_bytes, check_memory, default_limit, parse_size
from .onnx_regions import RegionRunner
from .ort_operators import OrtOperators


def strict_default() -> bool:
    return os.environ.get("DML_LOWER_STRICT", "") not in ("", "0")


class EmulatorSession:
    """Per-CompiledModel execution state: region sessions and run-time specialisations."""

    def __init__(self, compiled, operators=None, providers: "list[str] | None" = None) -> None:
        self.compiled = compiled
        self.operators = operators            # None: the numpy kernels; else runtime.ort_operators
        partition = compiled.partition
        self.regions = RegionRunner(compiled.model, dict(partition.regions), compiled.types, providers,
                                    generated=partition.generated)
        self.specialised: dict = {}
        self.lifetimes: dict = {}
        self.buffer_sizes: dict = {}
        self.validated: dict = {}
        self.log: "list[str]" = []
        self.unvalidated_outputs: "dict[str, str]" = {}
        # The onnxruntime stand-ins list the operators they ran on numpy for want of a kernel.
        self.fallbacks = operators.fallbacks if isinstance(operators, OrtOperators) else None

    def _lower_at_run_time(self, step: LowerAtRunTime, tensors: Mapping[str, np.ndarray],
                           strict: bool) -> "dict[str, np.ndarray]":
        match = self.compiled.partition.deferred[step.onnx_node]
        shapes = {t.name: tuple(np.shape(tensors[t.name])) for t in match.inputs}
        values = {name: np.asarray(tensors[name]) for name in match.value_inputs}
        key = (step.onnx_node, tuple(shapes.items()),
               tuple((n, v.dtype.str, v.shape, v.tobytes()) for n, v in values.items()))
        if key not in self.specialised:
            built = self.specialised[key] = match.build(shapes, values, self.compiled.feature_level)
            if not isinstance(built, Declined):
                # Once per specialisation, not per run: lifetimes, buffer sizes, validated descriptors.
                self.lifetimes[key] = analyse(built)
                self.buffer_sizes[key] = buffer_bytes(built)
                self.validated[key] = set()
        result = self.specialised[key]
        if isinstance(result, Declined):
            self.log.append(f"{', '.join(match.nodes)} at input shapes {list(shapes.values())}: "
                            f"left to ONNX: {result.reason}")
            # The compiler precomputed the ONNX region for exactly this case.
            fallback = self.compiled.partition.fallbacks[step.onnx_node]
            self.regions.add_region(fallback.region.name, list(fallback.nodes))
            return self.regions(fallback.region, tensors)
        check_memory(result, self.memory_limit, f"node {step.onnx_node} at input shapes {list(shapes.values())}",
                     self.buffer_sizes[key])
        return Interpreter(result, strict, self.operators, self.fallbacks, self.lifetimes[key],
                           self.validated[key]).run(
            {n: tensors[n] for n in result.inputs})

    def run(self, feeds: Mapping[str, object], strict: "bool | None" = None,
            memory_limit: "int | str | None" = None) -> "dict[str, np.ndarray]":
        strict = strict_default() if strict is None else strict
        self.memory_limit = default_limit() if memory_limit is None else parse_size(memory_limit)
        tensors = dict(self.compiled.initializers)
        tensors.update(check_feeds(self.compiled.inputs, feeds, self.compiled.optional_inputs))
        check_memory(self.compiled.graph, self.memory_limit)

        def runner(step, env):
            if isinstance(step, OnnxRegion):
                return self.regions(step, env)
            return self._lower_at_run_time(step, env, strict)

        interpreter = Interpreter(self.compiled.graph, strict, self.operators, self.fallbacks)
        outputs = interpreter.run(tensors, runner)
        # Outputs a numpy kernel computed where the provider had none: not validated on it.
        self.unvalidated_outputs = {n: interpreter.unvalidated[n] for n in outputs if n in interpreter.unvalidated}
        return outputs
