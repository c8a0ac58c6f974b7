"""The CPU emulator's interpreter: runs an ir.Graph's steps in order over runtime.binding's
memory, each step through its handler in STEP_HANDLERS, DirectML operators on a kernel set
(runtime.kernel_set.DmlKernels: the numpy kernels, or onnxruntime's stand-ins).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from onnx_dml_lowering.ir import (ClearBuffer, ControlFlow, DmlLowerError, Download, ElementWiseIdentity, EmptyTensor,
                                  Graph, LowerAtRunTime, NonZeroCoordinates, OnnxRegion, ReadCount, Step, Upload)
from onnx_dml_lowering.ir.dtypes import onnx_to_numpy
from onnx_dml_lowering.ir.errors import ModelContradiction
from onnx_dml_lowering.ir.operators import STEP_TYPES

from . import kernels as numpy_kernels
from .binding import Bindings, Lifetimes
from .kernel_set import DmlKernels

RegionCallback = Callable[["OnnxRegion | LowerAtRunTime | ControlFlow", Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


class Interpreter:
    """One execution of one graph: its bindings (buffers, symbols), host tensors and kernel set."""

    def __init__(self, graph: Graph, strict: bool = False, kernels: "DmlKernels | None" = None,
                 fallbacks: "list[str] | None" = None, lifetimes: "Lifetimes | None" = None,
                 validated: "set | None" = None) -> None:
        """`fallbacks`: the kernel set's list of operators it ran without the provider (OrtOperators);
        given, the interpreter tracks which values depend on them in `unvalidated`."""
        self.graph = graph
        self.strict = strict
        self.kernels: DmlKernels = kernels if kernels is not None else numpy_kernels
        self.bindings = Bindings(graph, strict, lifetimes)
        self.tensors: "dict[str, np.ndarray]" = {}
        self.region_runner: "RegionCallback | None" = None
        # Values computed by a numpy kernel standing in for a provider without one: name -> why.
        self.unvalidated: "dict[str, str]" = {}
        self.fallbacks = fallbacks
        # (step index, bound descriptors) already validated against the level, when the caller
        # runs this graph again and again (a run-time specialisation): validated once, not per run.
        self.validated = validated

    def run(self, feeds: Mapping[str, np.ndarray],
            region_runner: "RegionCallback | None" = None) -> "dict[str, np.ndarray]":
        """Run every step on host tensors `feeds`; returns the graph's output tensors.
        region_runner runs ONNX regions and run-time lowering (a graph without them needs none)."""
        self.tensors.update(feeds)
        if self.graph.built_shapes:
            self._check_built_shapes(feeds)
        self.region_runner = region_runner
        bindings = self.bindings
        level = self.graph.feature_level
        seen = self.validated
        fallbacks = self.fallbacks
        desc = bindings.desc
        for index, (step, downloads, is_dml, static_empty, symbolic, dies) in enumerate(bindings.step_table()):
            bindings.index = index                        # the step about to run (Bindings.enter)
            # A step over a view that a zero count leaves empty does not run (nnz = 0); a
            # download of it still yields the empty host tensor.
            if downloads or not (static_empty or (symbolic and any(0 in desc(n).sizes for n in symbolic))):
                if is_dml and (seen is None or index not in seen):
                    descs = {name: desc(name) for name in step.reads() + step.writes()}
                    if seen is None:
                        step.validate(descs, level)
                    elif (index, *descs.values()) not in seen:
                        step.validate(descs, level)
                        seen.add((index, *descs.values()))
                        if not symbolic:
                            seen.add(index)       # no size symbol: the same descriptors every run
                handler = STEP_HANDLERS.get(type(step))
                if handler is None:
                    raise DmlLowerError(f"the emulator has no kernel for step {step.kind}")
                if fallbacks is None:
                    handler(self, step)
                else:
                    before = len(fallbacks)
                    handler(self, step)
                    self._track(step, fallbacks[before:])
            if dies:
                bindings.retire(index)
        return {name: self.tensors[name] for name in self.graph.outputs}

    def _check_built_shapes(self, tensors: Mapping[str, np.ndarray]) -> None:
        """Host tensors a static lowering reads must have the shape it was built for (the model's
        declared or inferred one): another shape, even of the same element count, would be read
        through the wrong descriptors and give a wrong answer silently."""
        built = self.graph.built_shapes
        # Whichever is smaller is walked: a model's feeds hold every weight, a region hands back few.
        names = tensors if len(tensors) < len(built) else [n for n in built if n in tensors]
        for name in names:
            expected, value = built.get(name), tensors[name]
            if expected is not None and tuple(np.shape(value)) != expected[0]:
                shape, node = expected
                raise ModelContradiction(
                    f"value {name!r} has shape {list(np.shape(value))} when the model runs, but node {node!r} was "
                    f"lowered for {list(shape)}, the shape the model declares for it (or onnx infers from its "
                    "declarations): its value_info or input shapes contradict its computation; fix or remove "
                    "that declaration")

    def _track(self, step: Step, fresh: "list[str]") -> None:
        """Carry 'computed without the provider' from what a step reads to what it writes."""
        views = self.graph.views
        reads = [f"buffer:{views[v].buffer}" for v in step.reads() if v in views] + list(_host_reads(step))
        reason = fresh[0] if fresh else next((self.unvalidated[r] for r in reads if r in self.unvalidated), None)
        if reason is not None:
            for name in [f"buffer:{views[v].buffer}" for v in step.writes() if v in views] + list(_host_writes(step)):
                self.unvalidated[name] = reason

    def _shape(self, shape: "tuple[int | str, ...]") -> "tuple[int, ...]":
        symbols = self.bindings.symbols
        return tuple(symbols[s] if isinstance(s, str) else s for s in shape)

    # -- host steps -----------------------------------------------------------------------
    def upload(self, step: Upload) -> None:
        host = self.tensors[step.tensor]
        if not self.bindings.bind_upload(step.view, host):        # bound: the buffer is the host tensor
            numpy_kernels.upload(host, self.bindings.array(step.view), step.tensor)

    def download(self, step: Download) -> None:
        shape = self._shape(step.shape)
        dtype = onnx_to_numpy(step.onnx_type)
        if 0 in shape:
            self.tensors[step.tensor] = np.zeros(shape, dtype)
        else:
            self.tensors[step.tensor] = numpy_kernels.download(self.bindings.array(step.view), dtype, shape,
                                                               share=self.bindings.may_share(step.view))

    def clear(self, step: ClearBuffer) -> None:
        if not self.bindings.clear_by_allocation(step.buffer, step.value):
            numpy_kernels.clear(self.bindings.buffer(step.buffer), step.value)

    def read_count(self, step: ReadCount) -> None:
        self.bindings.symbols[step.symbol] = int(self.bindings.array(step.view).reshape(-1)[0])

    def empty_tensor(self, step: EmptyTensor) -> None:
        self.tensors[step.tensor] = np.zeros(self._shape(step.shape), onnx_to_numpy(step.onnx_type))

    def onnx(self, step: "OnnxRegion | LowerAtRunTime | ControlFlow") -> None:
        if self.region_runner is None:
            raise DmlLowerError(f"step {step.kind} needs a runner for ONNX regions and run-time lowering")
        produced = self.region_runner(step, self.tensors)
        if self.graph.built_shapes:
            self._check_built_shapes(produced)
        self.tensors.update(produced)

    # -- DirectML operators, on the kernel set --------------------------------------------
    def operator(self, step: Step) -> None:
        """A DirectML operator: its kernel-set method (step.kernel) on its fields (step.kernel_args),
        a view as the array it names, an absent optional view as None."""
        array, views = self.bindings.array, step.reads() + step.writes()
        args = [getattr(step, name) for name in step.kernel_args]
        getattr(self.kernels, step.kernel)(*(array(a) if a in views else a for a in args))

    def nonzero_coordinates(self, step: NonZeroCoordinates) -> None:
        """NONZERO_COORDINATES also takes strict: the kernel poisons the rows past the count."""
        array = self.bindings.array
        self.kernels.nonzero_coordinates(array(step.input), array(step.output_count),
                                         array(step.output_coordinates), self.strict)

    def identity(self, step: ElementWiseIdentity) -> None:
        """ELEMENT_WISE_IDENTITY also takes release: a copy may free its source as it advances."""
        bindings = self.bindings
        source, out = bindings.array(step.input), bindings.array(step.output)
        self.kernels.identity(source, out, release=bindings.release_behind(step.input, step.output))


def _host_reads(step: Step) -> "tuple[str, ...]":
    if isinstance(step, Upload):
        return (step.tensor,)
    return tuple(step.inputs) if isinstance(step, (OnnxRegion, LowerAtRunTime)) else ()


def _host_writes(step: Step) -> "tuple[str, ...]":
    if isinstance(step, (Download, EmptyTensor)):
        return (step.tensor,)
    return tuple(step.outputs) if isinstance(step, (OnnxRegion, LowerAtRunTime)) else ()


# Step type -> its handler (every type in ir.operators.STEP_TYPES): a host step's one line each; a
# DirectML operator's is Interpreter.operator, derived from the step class, unless it needs more.
_OPERATOR_EXTRAS: "dict[type[Step], Callable[[Interpreter, Any], None]]" = {
    NonZeroCoordinates: Interpreter.nonzero_coordinates, ElementWiseIdentity: Interpreter.identity}
STEP_HANDLERS: "dict[type[Step], Callable[[Interpreter, Any], None]]" = {
    Upload: Interpreter.upload,
    Download: Interpreter.download,
    ClearBuffer: Interpreter.clear,
    ReadCount: Interpreter.read_count,
    EmptyTensor: Interpreter.empty_tensor,
    OnnxRegion: Interpreter.onnx,
    LowerAtRunTime: Interpreter.onnx,
    ControlFlow: Interpreter.onnx,
    **{cls: _OPERATOR_EXTRAS.get(cls, Interpreter.operator) for cls in STEP_TYPES.values() if cls.is_dml_operator},
}


def execute(graph: Graph, feeds: Mapping[str, np.ndarray], strict: bool = False,
            region_runner: "RegionCallback | None" = None,
            kernels: "DmlKernels | None" = None) -> "dict[str, np.ndarray]":
    """Run `graph` on host tensors `feeds`; returns the graph's output tensors."""
    return Interpreter(graph, strict, kernels).run(feeds, region_runner)
