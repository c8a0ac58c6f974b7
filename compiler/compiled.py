"""compile_model and the CompiledModel it returns."""
from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import json
import os
import sys
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

import numpy as np
import onnx

from onnx_dml_lowering.ir import DEFAULT_LEVEL, DmlLowerError, FeatureLevel, parse_level
from onnx_dml_lowering.runtime.backend_names import Lowering, parse_backend

from .frontend import ModelLike, check_and_infer, load_model, mark_outputs, resolved
from onnx_dml_lowering.runtime.model_facts import graph_inputs, initializer_arrays, overridable_inputs, value_types
from .node_ids import identify_nodes
from .functions import inline_functions, refuse_references

if TYPE_CHECKING:
    from onnx_dml_lowering.ir import Graph

    from .partition import Partition, Placement
    from onnx_dml_lowering.runtime.ort.settings import SessionSettings
    from onnx_dml_lowering.runtime.region_engine import SessionCache
    from onnx_dml_lowering.runtime.session import EmulatorSession


class CompiledModel:
    """A model lowered at one feature level: its IR graph, placement report and runners.

    `part`: its partition, or the function that computes it when first asked for (compile_model:
    a run whose backends all run the model on an onnxruntime provider never asks)."""

    def __init__(self, model: onnx.ModelProto, level: FeatureLevel, part: "Partition | Callable[[], Partition]",
                 types: "dict | Callable[[], dict] | None" = None) -> None:
        self.model = model                        # checked, node-named, shape-inferred
        self.feature_level = level
        self._partition = _OnFirstAsk(part)
        self._types = types
        self.inputs = graph_inputs(model)
        self.optional_inputs = overridable_inputs(model)
        self.output_names = [o.name for o in model.graph.output]
        # read when asked for; the lowering generates only initializers no feed overrides
        # (partition.generate_constants), so looking up a default does not compute the partition
        # (the function reads the holder, not self: no cycle keeps a compiled model alive)
        partition = self._partition
        self.initializers = initializer_arrays(model, leave=lambda: partition().generated,
                                               kept={vi.name for vi in self.optional_inputs})
        self._sessions: dict = {}
        self._shared_sessions: "SessionCache | None" = None
        # What the user gave compile_model (a path, bytes or their own ModelProto, unmodified):
        # provider backends run this, not our checked and shape-inferred `model`.
        self.source: "str | bytes | onnx.ModelProto | None" = None

    @property
    def types(self) -> dict:
        """Every value's TensorInfo, read from the inferred model when first asked for (a session
        asks; compiling a model where nothing is lowered does not)."""
        if not isinstance(self._types, dict):
            self._types = value_types(self.model) if self._types is None else self._types()
        return self._types

    @property
    def partition(self) -> Partition:
        """Lowered and partitioned when first asked for (_OnFirstAsk), then kept."""
        return self._partition()

    @property
    def graph(self) -> Graph:
        return self.partition.graph

    @property
    def placement(self) -> "list[Placement]":
        return self.partition.placement

    def to_dict(self) -> dict:
        from onnx_dml_lowering.ir import graph_to_dict
        return {"feature_level": self.feature_level.name,
                "placement": [p.to_dict() for p in self.placement],
                "graph": graph_to_dict(self.graph)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @property
    def shared_sessions(self) -> SessionCache:
        """onnxruntime region sessions (and results) the lowered runs and the hybrid oracle share
        (runtime/region_engine: the one cache their region engines open sessions through)."""
        if self._shared_sessions is None:
            from onnx_dml_lowering.runtime.region_engine import SessionCache
            self._shared_sessions = SessionCache()
        return self._shared_sessions

    def session(self, backend: "str | Lowering" = "cpu", providers: "list[str] | None" = None,
                session_settings: "SessionSettings | None" = None) -> EmulatorSession:
        """The cached execution state of one lowered backend (a name the Python API gives, or its
        Lowering); `session_settings` (a runtime.ort.settings SessionSettings) applies to every
        onnxruntime session it creates."""
        lowering = _lowering(backend)
        key = (lowering, tuple(providers or ()), session_settings)
        if key not in self._sessions:
            self._sessions[key] = _SESSIONS[lowering](self, providers, session_settings)
        return self._sessions[key]

    def run(self, feeds: Mapping[str, object], backend: "str | Lowering" = "cpu",
            providers: "list[str] | None" = None, strict: "bool | None" = None,
            memory_limit: "int | str | None" = None,
            session_settings: "SessionSettings | None" = None) -> "dict[str, np.ndarray]":
        """Execute on host feeds (name -> array); returns every graph output by name.

        backend "cpu": the numpy emulator of the DirectML operators; "ort": the same lowered
        graph with each DirectML operator run by onnxruntime on `providers` (default CPU); "dml":
        each DirectML operator run by Microsoft's DirectML.dll (the DirectML host; make directml).
        memory_limit (bytes or a size like "512MiB"; default three quarters of physical memory)
        bounds the buffers a run allocates, summed before allocating: over it, DmlLowerError.
        session_settings: a runtime.ort.settings.SessionSettings for every onnxruntime session.
        """
        return self.session(backend, providers, session_settings).run(feeds, strict=strict, memory_limit=memory_limit)


class _OnFirstAsk:
    """A partition, or the function computing it: called the first time it is asked for, under the
    same collector pause as the compile, then kept. An error it raises (DmlLowerError) is raised
    again at each ask until one succeeds."""

    def __init__(self, part: "Partition | Callable[[], Partition]") -> None:
        self._value: "Partition | None" = None if callable(part) else part
        self._compute = part if callable(part) else None

    def __call__(self) -> Partition:
        if self._value is None:
            assert self._compute is not None
            _return_freed_heap()
            with _cycle_collector_paused():
                self._value = self._compute()
            self._compute = None
        return self._value


def _return_freed_heap() -> None:
    """Give the pages C's allocator holds free back to the system (glibc's malloc_trim; nothing
    elsewhere). A compile's protobuf messages (the file's, the checker's copy, the inferred model's
    transients) live in malloc's heap and leave it full of free pages once they are gone; the
    partition's Python objects cannot reuse them (they live in mmapped arenas of their own), so
    without this the partition's memory adds onto the emptied heap: 1.0 MiB of the Mask R-CNN
    export's inspect peak, 0.8 MiB of the Mixtral router's."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None) if sys.platform.startswith("linux") else None
    if trim is not None:
        trim(0)


def _lowering(backend: "str | Lowering") -> Lowering:
    """What runs the DirectML operators of the lowered backend `backend` names."""
    if isinstance(backend, Lowering):
        return backend
    try:
        lowering = parse_backend(backend).lowering
    except DmlLowerError:
        lowering = None
    if lowering is None:
        raise DmlLowerError(f"CompiledModel.run backend {backend!r}: it runs the lowered graph, 'cpu' (the "
                            "DirectML emulator), 'ort' (each DirectML operator on onnxruntime) or 'dml' "
                            "(each DirectML operator on DirectML.dll: make directml)")
    return lowering


def _emulator(compiled: CompiledModel, providers: "list[str] | None",
              settings: "SessionSettings | None") -> EmulatorSession:
    from onnx_dml_lowering.runtime.session import EmulatorSession
    return EmulatorSession(compiled, settings=settings)


def _stand_ins(compiled: CompiledModel, providers: "list[str] | None",
               settings: "SessionSettings | None") -> EmulatorSession:
    from onnx_dml_lowering.runtime.ort_operators import OrtOperators
    from onnx_dml_lowering.runtime.session import EmulatorSession
    operators = OrtOperators(providers, settings)
    return EmulatorSession(compiled, operators, operators.providers, settings)


def _directml(compiled: CompiledModel, providers: "list[str] | None",
              settings: "SessionSettings | None") -> EmulatorSession:
    from onnx_dml_lowering.runtime.directml.kernels import DirectMLKernels
    from onnx_dml_lowering.runtime.session import EmulatorSession
    return EmulatorSession(compiled, DirectMLKernels(), settings=settings)


# the execution state of each lowered backend, by what runs its DirectML operators
_SESSIONS = {Lowering.EMULATOR: _emulator, Lowering.STAND_INS: _stand_ins, Lowering.DIRECTML: _directml}


def compile_model(model: ModelLike, feature_level: "str | int | FeatureLevel" = DEFAULT_LEVEL,
                  outputs: "list[str] | str | None" = None, stored: "onnx.ModelProto | None" = None,
                  take_stored: bool = False) -> CompiledModel:
    """Load, check and shape-infer `model` (a path, bytes or ModelProto); lowered and partitioned
    when the partition is first asked for (CompiledModel.partition).

    `outputs`: intermediate value names (or "all") to expose as extra graph outputs, so that
    check compares them too; a fused idiom whose intermediate becomes an output is then not taken.
    `stored`: the file `model` names as frontend.load_stored read it (inspect reads it for its
    report too): copied, not read and parsed again (30 ms of SSDlite320's inspect).
    `take_stored`: `stored` is taken over, not copied, and changed (its nodes renamed, its external
    data resolved): for a caller that reads it no more (inspect without --ep, its report read
    first); one copy of the model fewer at the peak (1.2 MiB of the Mask R-CNN export's inspect).
    """
    if not isinstance(model, (str, os.PathLike, bytes, bytearray, onnx.ModelProto)):
        raise DmlLowerError(f"compile_model takes a path, bytes or an onnx.ModelProto, not a {type(model).__name__}")
    level = parse_level(feature_level)
    with _cycle_collector_paused():
        proto = load_model(model) if stored is None else _stored_copy(stored, model, take_stored)
        identify_nodes(proto)                 # names may repeat, be empty or not be UTF-8
        if proto.functions:
            proto = inline_functions(proto)
            identify_nodes(proto)             # the inlined nodes
        refuse_references(proto)
        inferred = check_and_infer(proto, "" if isinstance(model, (onnx.ModelProto, bytes, bytearray))
                                   else f"model file {os.fspath(model)!r}")
        if outputs:
            mark_outputs(inferred, outputs)
        types = functools.cache(lambda: value_types(inferred))      # read once, and only if asked
        compiled = CompiledModel(inferred, level, functools.partial(_partition, inferred, level, types), types)
    compiled.source = _as_given(model)
    return compiled


def _as_given(model: "str | os.PathLike | bytes | bytearray | onnx.ModelProto") -> "str | bytes | onnx.ModelProto":
    """What a provider backend runs "as given": the model as it was at compile time. A caller's
    ModelProto or bytearray is copied (a graph pass that goes on editing its proto after compiling
    made ort-cpu run the edited model: a false MISMATCH blamed on onnxruntime); bytes cannot change."""
    if isinstance(model, onnx.ModelProto):
        given = onnx.ModelProto()
        given.CopyFrom(model)
        return given
    if isinstance(model, bytearray):
        return bytes(model)
    return model if isinstance(model, bytes) else os.fspath(model)


def _partition(model: onnx.ModelProto, level: FeatureLevel, types: Callable[[], dict]) -> Partition:
    # the partition module (and the lowering it imports) loads with its first use too
    from .partition import partition
    return partition(model, level, types)


def _stored_copy(stored: onnx.ModelProto, model: ModelLike, take: bool = False) -> onnx.ModelProto:
    """What load_model(model) gives, from the file as load_stored read it (left as it is unless
    `take`: then it is what is given)."""
    if isinstance(model, (onnx.ModelProto, bytes, bytearray)):
        raise TypeError("compile_model's stored is the file a path names, as load_stored read it")
    if take:
        return resolved(stored, model)
    copy = onnx.ModelProto()
    copy.CopyFrom(stored)
    return resolved(copy, model)


@contextlib.contextmanager
def _cycle_collector_paused() -> Iterator[None]:
    """Compile allocates hundreds of thousands of small containers that all stay alive until it
    returns, so every cyclic collection it triggers finds nothing, yet walks them all (10-25% of
    compile at 10,000 nodes). Reference counting still frees everything; the collector resumes
    afterwards (if another thread paused it first, that thread resumes it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


if TYPE_CHECKING:
    from onnx_dml_lowering.runtime.compiled_view import LoweredView

    def _what_runtime_reads(compiled: CompiledModel) -> LoweredView:
        return compiled        # make typecheck: CompiledModel has everything runtime reads of it
