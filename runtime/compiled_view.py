"""What runtime reads of a compiled model, as types: `CompiledView` (what check, the oracle and the
provider and saved-output backends read), `LoweredView` (what running the lowered graph reads as
well). compiler.compiled.CompiledModel is both; runtime never imports it.

`ModelView` is the runtime's own CompiledView of an ONNX model nothing of which is lowered: the
oracle, `ort-*` / `ort:<Name>` and `saved:` backends run on it without the compiler (a check of
provider backends against the oracle needs no lowering). It has no lowered graph, so the lowered
backends (cpu, ort, dml) refuse it in one line (lowered_view)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Collection, Mapping, Protocol, Sequence, cast

import onnx

from onnx_dml_lowering.ir import DEFAULT_LEVEL, DmlLowerError, FeatureLevel
from onnx_dml_lowering.ir.errors import first_line
from onnx_dml_lowering.lowering.onnx_graphs import node_paths
from onnx_dml_lowering.runtime.model_facts import graph_inputs, initializer_arrays, overridable_inputs, value_types
from onnx_dml_lowering.runtime.onnx_inference import inference_notes, infer_shapes

if TYPE_CHECKING:
    import numpy as np

    from onnx_dml_lowering.runtime.backend_names import Lowering

    from onnx_dml_lowering.ir import Graph
    from onnx_dml_lowering.lowering import TensorInfo
    from onnx_dml_lowering.runtime.region_engine import SessionCache


class PlacementView(Protocol):
    """One placement entry (compiler.partition.Placement): the ONNX nodes, what became of them."""
    onnx_nodes: "list[str]"
    status: str                      # "lowered" | "onnx"
    rule: str
    dml_operators: "list[str]"
    reason: str
    note: str
    initializer: str                 # the initializer it generates instead of storing, or ""

    def to_dict(self) -> dict: ...


class PartitionView(Protocol):
    """What check reads of a partition: the values the lowering generates (no initializer feeds
    them) and the control-flow nodes whose bodies hold lowered nodes."""

    @property
    def generated(self) -> "Collection[str]": ...

    @property
    def bodies(self) -> "Mapping[str, Any]": ...


class CompiledView(Protocol):
    """A model as check, the oracle and the provider / saved backends read it."""
    model: onnx.ModelProto                   # checked and shape-inferred: what the oracle evaluates
    feature_level: FeatureLevel
    inputs: "list[onnx.ValueInfoProto]"          # what a caller must feed
    optional_inputs: "list[onnx.ValueInfoProto]"  # inputs an initializer gives a default
    output_names: "list[str]"
    source: "str | bytes | onnx.ModelProto | None"   # what the provider backends hand onnxruntime

    # those no lowering generates, by name (model_facts.InitializerArrays: each read when asked for)
    @property
    def initializers(self) -> "Mapping[str, np.ndarray]": ...

    @property
    def types(self) -> "dict[str, TensorInfo]": ...

    @property
    def placement(self) -> "Sequence[PlacementView]": ...

    @property
    def partition(self) -> PartitionView: ...

    @property
    def shared_sessions(self) -> "SessionCache": ...


class LoweredView(CompiledView, Protocol):
    """A compiled model whose lowered graph runs (the cpu / ort / dml backends, EmulatorSession)."""

    @property
    def graph(self) -> "Graph": ...

    def session(self, backend: "str | Lowering" = "cpu", providers: "list[str] | None" = None,
                session_settings: Any = None) -> Any: ...

    def run(self, feeds: "Mapping[str, object]", backend: "str | Lowering" = "cpu", providers: "list[str] | None" = None,
            strict: "bool | None" = None, memory_limit: "int | str | None" = None,
            session_settings: Any = None) -> "dict[str, np.ndarray]": ...


@dataclass(frozen=True)
class NothingLowered:
    """The partition of a model nothing of which is lowered."""
    generated: "frozenset[str]" = frozenset()
    bodies: "Mapping[str, Any]" = field(default_factory=dict)


class ModelView:
    """The CompiledView of `model` as given, nothing lowered (see the module's docstring). `infer`:
    run onnx's shape inference first (strict, with data propagation), so every value the oracle
    cuts a sub-model at has its type; a model it refuses is one line. The oracle knows nodes by
    their paths, so each must be named, once (compile_model names them itself; this reads only)."""

    def __init__(self, model: onnx.ModelProto, infer: bool = True, feature_level: FeatureLevel = DEFAULT_LEVEL,
                 source: "str | bytes | onnx.ModelProto | None" = None) -> None:
        if not isinstance(model, onnx.ModelProto):     # a path is compile_model's to load
            raise DmlLowerError(f"ModelView takes an onnx.ModelProto, not a {type(model).__name__} "
                                "(compile_model takes a path, bytes or a ModelProto)")
        given = model                  # what the provider backends run: the model as given, not inferred
        if infer:
            try:
                model = infer_shapes(model, strict_mode=True, data_prop=True)
            except Exception as exc:  # onnx's checker and inference raise several types
                raise DmlLowerError(f"model {model.graph.name!r}: onnx shape inference refuses it: "
                                    f"{first_line(exc)}{inference_notes(exc)}") from None
        _named_once(model)
        self.model = model
        self.feature_level = feature_level
        self.inputs = graph_inputs(model)
        self.optional_inputs = overridable_inputs(model)
        self.output_names = [o.name for o in model.graph.output]
        self.initializers = initializer_arrays(model)
        self.source = given if source is None else source
        self.partition = NothingLowered()
        self.placement: "list[PlacementView]" = []
        self._types: "dict[str, TensorInfo] | None" = None
        self._shared: "SessionCache | None" = None

    @property
    def types(self) -> "dict[str, TensorInfo]":
        if self._types is None:
            self._types = value_types(self.model)
        return self._types

    @property
    def shared_sessions(self) -> "SessionCache":
        if self._shared is None:
            from onnx_dml_lowering.runtime.region_engine import SessionCache
            self._shared = SessionCache()
        return self._shared


def _named_once(model: onnx.ModelProto) -> None:
    """One line for the first node (at any depth) with no name, or a path named twice."""
    seen: "set[str]" = set()
    for path, node in node_paths(model.graph):
        if not node.name:
            raise DmlLowerError(f"model {model.graph.name!r}: a {node.op_type} node has no name; a ModelView "
                                "reads nodes by name (compile_model names them)")
        if path in seen:
            raise DmlLowerError(f"model {model.graph.name!r}: node {path!r} is named twice; a ModelView reads "
                                "nodes by name (compile_model names them)")
        seen.add(path)


def lowered_view(compiled: CompiledView, backend: str) -> LoweredView:
    """`compiled` as the LoweredView a lowered backend runs, or one line: a ModelView has no
    lowered graph (a class test: a protocol's isinstance would evaluate every property)."""
    if isinstance(compiled, ModelView):
        raise DmlLowerError(f"backend {backend!r} runs the lowered graph, and this model is a runtime ModelView "
                            "(nothing lowered): compile_model gives the compiled model it runs")
    return cast(LoweredView, compiled)
