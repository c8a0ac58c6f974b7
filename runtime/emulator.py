"""The CPU emulator: executes an ir.Graph over numpy byte buffers, reading and writing through
each view's element strides exactly as DirectML would address the GPU buffer.

Buffers are allocated at their declared byte sizes; a view that reaches past its buffer or past
its own TotalTensorSizeInBytes is an error naming both. In strict mode fresh buffers and the
undefined rows of NONZERO_COORDINATES are filled with poison, so a result that depends on them
is caught.
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ir import DmlLowerError, Graph
from ir.dtypes import onnx_to_numpy
from ir.operators import (ClearBuffer, DiagonalMatrix, DiagonalMatrix1, Download,
                          ElementWiseIdentity, EmptyTensor, LowerAtRunTime, NonZeroCoordinates,
                          OnnxRegion, ReadCount, Step, Upload)
from ir.tensor_desc import TensorDesc

from . import kernels

POISON_BYTE = 0xCD

RegionRunner = Callable[["OnnxRegion | LowerAtRunTime", Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


class Emulator:
    """One execution of one graph: buffers, bound symbols and host tensors."""

    def __init__(self, graph: Graph, strict: bool = False, operators=None) -> None:
        self.graph = graph
        self.strict = strict
        # The four DirectML operator kernels: numpy here, or onnxruntime's (runtime.ort_operators).
        self.ops = operators if operators is not None else kernels
        self.symbols: "dict[str, int]" = {}
        self.buffers: "dict[str, np.ndarray]" = {}
        self.tensors: "dict[str, np.ndarray]" = {}

    # -- memory ---------------------------------------------------------------------------
    def buffer(self, name: str) -> np.ndarray:
        if name not in self.buffers:
            size = self.graph.buffers[name].size(self.symbols)
            words = np.empty((size + 7) // 8, dtype=np.uint64)  # 8-byte aligned backing store
            raw = words.view(np.uint8)[:size]
            if self.strict:
                raw.fill(POISON_BYTE)
            self.buffers[name] = raw
        return self.buffers[name]

    def desc(self, view_name: str) -> TensorDesc:
        return self.graph.views[view_name].desc.bind(self.symbols)

    def array(self, view_name: str) -> np.ndarray:
        """A numpy view through the descriptor's strides; bounds-checked against the buffer."""
        view = self.graph.views[view_name]
        desc = self.desc(view_name)
        desc.validate(f"view {view_name} over buffer {view.buffer}")
        raw = self.buffer(view.buffer)
        if view.offset < 0 or view.offset + desc.total_bytes > raw.size:
            raise DmlLowerError(
                f"view {view_name}: offset {view.offset} + TotalTensorSizeInBytes "
                f"{desc.total_bytes} exceeds buffer {view.buffer} of {raw.size} bytes")
        dtype = desc.data_type.numpy
        strides = tuple(s * dtype.itemsize for s in desc.effective_strides)
        return np.ndarray(desc.concrete_sizes(), dtype=dtype, buffer=raw, offset=view.offset, strides=strides)

    # -- execution ------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, np.ndarray],
            region_runner: "RegionRunner | None" = None) -> "dict[str, np.ndarray]":
        self.tensors.update(feeds)
        for step in self.graph.steps:
            if self._skipped(step):
                continue
            self.execute(step, region_runner)
        return {name: self.tensors[name] for name in self.graph.outputs}

    def _skipped(self, step: Step) -> bool:
        """A step over a view that a zero count leaves empty does not run (nnz = 0); a download
        of it still yields the empty host tensor."""
        if isinstance(step, Download):
            return False
        for name in step.reads() + step.writes():
            desc = self.desc(name)
            if any(s == 0 for s in desc.sizes):
                return True
        return False

    def execute(self, step: Step, region_runner: "RegionRunner | None") -> None:
        if step.is_dml_operator:
            descs = {name: self.desc(name) for name in step.reads() + step.writes()}
            step.validate(descs, self.graph.feature_level)
        if isinstance(step, Upload):
            kernels.upload(self.tensors[step.tensor], self.array(step.view), step.tensor)
        elif isinstance(step, Download):
            shape = tuple(self.symbols[s] if isinstance(s, str) else s for s in step.shape)
            dtype = onnx_to_numpy(step.onnx_type)
            if 0 in shape:
                self.tensors[step.tensor] = np.zeros(shape, dtype)
            else:
                self.tensors[step.tensor] = kernels.download(self.array(step.view), dtype, shape)
        elif isinstance(step, ClearBuffer):
            kernels.clear(self.buffer(step.buffer), step.value)
        elif isinstance(step, ReadCount):
            self.symbols[step.symbol] = int(self.array(step.view).reshape(-1)[0])
        elif isinstance(step, EmptyTensor):
            shape = tuple(self.symbols[s] if isinstance(s, str) else s for s in step.shape)
            self.tensors[step.tensor] = np.zeros(shape, onnx_to_numpy(step.onnx_type))
        elif isinstance(step, NonZeroCoordinates):
            self.ops.nonzero_coordinates(self.array(step.input), self.array(step.output_count),
                                        self.array(step.output_coordinates), self.strict)
        elif isinstance(step, DiagonalMatrix):
            self.ops.diagonal_matrix(self.array(step.output), step.offset, step.value)
        elif isinstance(step, DiagonalMatrix1):
            source = self.array(step.input) if step.input else None
            self.ops.diagonal_matrix1(source, self.array(step.output), step.value,
                                     step.fill_begin, step.fill_end)
        elif isinstance(step, ElementWiseIdentity):
            self.ops.identity(self.array(step.input), self.array(step.output))
        elif isinstance(step, (OnnxRegion, LowerAtRunTime)):
            if region_runner is None:
                raise DmlLowerError(f"step {step.kind} needs a runner for ONNX regions and run-time lowering")
            self.tensors.update(region_runner(step, self.tensors))
        else:
            raise DmlLowerError(f"the emulator has no kernel for step {step.kind}")


def execute(graph: Graph, feeds: Mapping[str, np.ndarray], strict: bool = False,
            region_runner: "RegionRunner | None" = None, operators=None) -> "dict[str, np.ndarray]":
    """Run `graph` on host tensors `feeds`; returns the graph's output tensors."""
    return Emulator(graph, strict, operators).run(feeds, region_runner)
