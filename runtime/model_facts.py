"""What runtime reads of an ONNX model to feed and type it: the inputs a caller must feed, those an
initializer gives a default, the initializers' values and every value's TensorInfo. compile_model
and the runtime's own ModelView (runtime/compiled_view.py) read a model through these."""
from __future__ import annotations

from typing import AbstractSet, Any, Callable, Iterable, Iterator, Mapping, Union

import onnx

from onnx_dml_lowering.lowering import TensorInfo
from onnx_dml_lowering.runtime.weights import tensor_array


def _shape_of(type_proto: onnx.TypeProto) -> Any:
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims: "list[int | str | None]" = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return tuple(dims)


def value_types(model: onnx.ModelProto) -> "dict[str, TensorInfo]":
    """Every tensor name the (inferred) graph knows: element type and shape."""
    infos: "dict[str, TensorInfo]" = {}
    graph = model.graph
    # Reading a TypeProto field by field costs ~10 us in protobuf; its serialized bytes ~1 us, and
    # the values of a model share a few types: each distinct type is read once.
    described: "dict[bytes, tuple | None]" = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        key = vi.type.SerializeToString()
        if key not in described:
            described[key] = ((vi.type.tensor_type.elem_type, _shape_of(vi.type))
                              if vi.type.HasField("tensor_type") else None)
        known = described[key]
        if known is not None:
            infos[vi.name] = TensorInfo(vi.name, known[0], known[1])
    inputs = {vi.name for vi in graph.input}
    for init in graph.initializer:
        if init.name not in inputs:       # an input's initializer is a default: a feed may reshape it
            infos[init.name] = TensorInfo(init.name, init.data_type, tuple(int(d) for d in init.dims))
    return infos


def graph_inputs(model: onnx.ModelProto) -> "list[onnx.ValueInfoProto]":
    """The inputs a caller must feed (initializers that double as inputs are optional)."""
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def overridable_inputs(model: onnx.ModelProto) -> "list[onnx.ValueInfoProto]":
    """Graph inputs that also have an initializer: a feed may replace the default."""
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name in inits]


def initializer_arrays(model: onnx.ModelProto, leave: "Leave" = frozenset(),
                       kept: "AbstractSet[str]" = frozenset()) -> "InitializerArrays":
    """Every initializer's value but those named in `leave`, each read when first asked for.

    `leave` may be a function giving those names, called the first time they matter (a compiled
    model's partition names them, and a provider-only run never computes it); `kept`: names that
    are never in it, so looking one up calls no function (compile_model: the inputs a feed may
    override, which no lowering generates)."""
    return InitializerArrays(model.graph.initializer, leave, kept)


Leave = Union[AbstractSet[str], Callable[[], AbstractSet[str]]]


class InitializerArrays(Mapping[str, Any]):
    """Initializers' values by name, each read (weights.tensor_array: a lazy one mapped, an inline
    one copied out of the proto) when first asked for, then kept. Most are never asked for: the
    onnxruntime regions embed their weights from the proto, so only a default a feed may override
    and a value the lowered graph reads itself become arrays (SSDlite320: 10.6 MB of copies of
    its inline weights no longer made). The load checked every tensor's data, so a read here
    does not fail where reading them all at compile would not have."""

    def __init__(self, tensors: "Iterable[onnx.TensorProto]", leave: "Leave" = frozenset(),
                 kept: "AbstractSet[str]" = frozenset()) -> None:
        self._all = {t.name: t for t in tensors}
        self._leave = leave
        self._kept = kept
        self._held: "dict[str, onnx.TensorProto] | None" = None if callable(leave) else self._without(leave)
        self._arrays: "dict[str, Any]" = {}

    def _without(self, leave: "AbstractSet[str]") -> "dict[str, onnx.TensorProto]":
        assert not leave & self._kept, f"initializers {sorted(leave & self._kept)} are both kept and left"
        if not leave:
            return self._all
        return {name: t for name, t in self._all.items() if name not in leave}

    @property
    def _tensors(self) -> "dict[str, onnx.TensorProto]":
        if self._held is None:
            assert callable(self._leave)
            self._held = self._without(self._leave())
        return self._held

    def _has(self, name: object) -> bool:
        if name in self._kept:
            return name in self._all
        return name in self._tensors

    def __getitem__(self, name: str) -> Any:
        if name not in self._arrays:
            if not self._has(name):
                raise KeyError(name)
            self._arrays[name] = tensor_array(self._all[name])
        return self._arrays[name]

    def __contains__(self, name: object) -> bool:
        return self._has(name)

    def __iter__(self) -> "Iterator[str]":
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)
