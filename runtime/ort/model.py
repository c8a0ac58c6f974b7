"""The one hand-over of a ModelProto to onnxruntime: the IR version it reads, the weights left in
their files as external initializers, the big inline ones bound as inputs (WeightedSession)."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

if TYPE_CHECKING:
    import numpy as np
    import onnx

# The newest IR version onnxruntime 1.2x/1.3x reads; models handed to it never need more.
MAX_IR_VERSION = 10


def ort_ir_version(ir_version: int) -> int:
    """The IR version a model is handed to onnxruntime with: at most what it reads, and at least 4,
    since below 4 onnxruntime treats an initializer that is also a graph input as a constant where
    ONNX makes it a default that a feed overrides."""
    return max(4, min(ir_version, MAX_IR_VERSION))

# Initializers kept inline but above this size leave the proto when it would not serialise: when
# it comes within _PROTO_HEADROOM of protobuf's limit (weights.PROTO_LIMIT), room for the graph
# inputs the copy gains.
_INLINE_MOVE_BYTES = 1 << 20
_PROTO_HEADROOM = 1 << 24


@dataclass
class OrtModel:
    """What onnxruntime reads for one model: small proto bytes whose weights still in their files
    are external initializers relative to `folder` (onnxruntime maps them itself), and the big
    inline initializers that became graph inputs with the arrays bound to them."""
    data: bytes
    weights: "dict[str, np.ndarray]"
    added: "set[str]"              # weights that were not graph inputs of the model (callers never feed them)
    folder: "str | None" = None    # where the external initializers' locations point from


# The session config entry telling onnxruntime where a model given as bytes keeps its external data.
EXTERNAL_FOLDER_OPTION = "session.model_external_initializers_file_folder_path"


def ort_model(model: "onnx.ModelProto") -> OrtModel:
    """The one way a ModelProto reaches onnxruntime: a copy with ir_version capped at
    MAX_IR_VERSION whose initializers still in their files (load_model's lazy ones: external data,
    or inline weights left in the .onnx file) stay initializers with external data pointing into
    those same files, relative to one folder that the session is told (EXTERNAL_FOLDER_OPTION).

    Why external initializers: onnxruntime then treats them as it treats the shipped file's own
    (Conv+BatchNormalization fusion, constant folding, pre-packing), so a region computes what the
    whole model computes in onnxruntime, bit for bit (bound as graph inputs they were unfused, 2e-4
    apart on Mask R-CNN); and onnxruntime maps the files itself on CPU instead of reading them
    (SessionOptions.add_external_initializers copies them: +400 MB on Mask R-CNN).

    Big inline initializers of a proto that would pass 2 GB (a ModelProto made in memory, no file
    to point at) become graph inputs bound to their arrays by WeightedSession; so do lazy ones at
    an offset misaligned for their type on a machine that cannot load misaligned data (onnxruntime
    would use the map as it lies; tensor_array gives an aligned copy)."""
    import os

    from onnx import helper

    from onnx_dml_lowering.runtime.weights import PROTO_LIMIT, copy_without, external_path, is_lazy, tensor_array
    as_is = model.ir_version == ort_ir_version(model.ir_version) and not any(map(is_lazy, model.graph.initializer))
    if as_is:
        # The common case: nothing to move or change, so no copy (the ByteSize walk and the copy of
        # every node cost as much as serialising the model again).
        data = _serialised_below_limit(model)
        if data is not None:
            return OrtModel(data, {}, set())
    # as_is here: its serialisation was refused or came near the limit. Else asked only of an inline
    # weight of _INLINE_MOVE_BYTES or more: upb's ByteSize serialises the whole model (14 ms on
    # SSDlite320's main region, whose weights are all smaller).
    oversized = functools.cache(lambda: as_is or model.ByteSize() > PROTO_LIMIT - _PROTO_HEADROOM)

    def fed(tensor: "onnx.TensorProto") -> bool:
        return _fed(tensor, oversized)

    proto = copy_without(model, "graph")
    proto.graph.CopyFrom(copy_without(model.graph, "initializer"))
    proto.ir_version = ort_ir_version(proto.ir_version)
    embedded = _embedded(model)
    mapped = [t for t in model.graph.initializer if is_lazy(t) and not fed(t) and t.name not in embedded]
    files = {t.name: external_path(t) for t in mapped}
    folder = os.path.commonpath([os.path.dirname(path) for path, _ in files.values()]) if files else None
    inputs = {vi.name for vi in proto.graph.input}
    weights, added = {}, set()
    for tensor in model.graph.initializer:
        if tensor.name in files:
            _point_into_file(proto.graph.initializer.add(), tensor, files[tensor.name], folder)
        elif tensor.name in embedded and not fed(tensor):
            _add_inline(proto, tensor)
        elif fed(tensor):
            if tensor.name not in inputs:
                proto.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
                added.add(tensor.name)
            weights[tensor.name] = tensor_array(tensor, aligned=True)
        else:
            proto.graph.initializer.add().CopyFrom(tensor)
    return OrtModel(proto.SerializeToString(), weights, added, folder)


# How many small lazy weights (under MAP_MIN_BYTES) a model's sessions may map before they go inline.
SMALL_MAPS_MAX = 4096


def _embedded(model: "onnx.ModelProto") -> "set[str]":
    """The lazy weights that go to onnxruntime inline. onnxruntime maps each external initializer
    on its own, once per session: past SMALL_MAPS_MAX weights under MAP_MIN_BYTES those go inline,
    so a file of many small weights stays under the kernel's limit on maps per process
    (vm.max_map_count); below it they stay mapped (inline, SSDlite's 117 cost its check 11.5 MB
    of peak RSS)."""
    from onnx_dml_lowering.runtime.weights import MAP_MIN_BYTES, data_bytes, is_lazy
    small = [t.name for t in model.graph.initializer if is_lazy(t) and (data_bytes(t) or 0) < MAP_MIN_BYTES]
    return set(small) if len(small) > SMALL_MAPS_MAX else set()


def _add_inline(proto: "onnx.ModelProto", tensor: "onnx.TensorProto") -> None:
    """The lazy `tensor` as an initializer of `proto` holding its bytes (weights.inline)."""
    from onnx_dml_lowering.runtime.weights import inline
    added = proto.graph.initializer.add()
    added.CopyFrom(tensor)                  # a lazy tensor's message: only where its bytes are
    inline(added)


def _fed(tensor: "onnx.TensorProto", oversized: "Callable[[], bool]") -> bool:
    """The initializer goes to onnxruntime as a graph input bound to its array (ort_model says when;
    `oversized`: whether the model's proto comes near the limit, asked last: it may serialise it)."""
    import onnx

    from onnx_dml_lowering.runtime.weights import UNALIGNED_LOADS, external_path, is_lazy, mappable_dtype
    if is_lazy(tensor):
        offset, dtype = external_path(tensor)[1], mappable_dtype(tensor.data_type)
        # a lazy tensor's type is mappable (the loader leaves only those in their files)
        return not UNALIGNED_LOADS and dtype is not None and offset % dtype.alignment != 0
    return (tensor.data_location != onnx.TensorProto.EXTERNAL and tensor.data_type != onnx.TensorProto.STRING
            and tensor.ByteSize() >= _INLINE_MOVE_BYTES and oversized())


def _point_into_file(external: "onnx.TensorProto", tensor: "onnx.TensorProto", where: "tuple[str, int]",
                     folder: "str | None") -> None:
    """`external`: `tensor` as an external initializer reading its bytes where they lie in its file."""
    import os

    from onnx_dml_lowering.runtime.weights import copy_without, data_bytes
    path, offset = where
    external.CopyFrom(copy_without(tensor, "external_data"))
    for key, value in (("location", os.path.relpath(path, folder)), ("offset", str(offset)),
                       ("length", str(data_bytes(tensor)))):
        entry = external.external_data.add()
        entry.key, entry.value = key, value


def _serialised_below_limit(model: "onnx.ModelProto") -> "bytes | None":
    """The model's bytes, or None when they would reach the protobuf limit (or protobuf refuses)."""
    from onnx_dml_lowering.runtime.weights import PROTO_LIMIT
    try:
        data = model.SerializeToString()
    except Exception:            # upb refuses a message past 2 GB (ValueError or EncodeError)
        return None
    return data if len(data) <= PROTO_LIMIT - _PROTO_HEADROOM else None


class WeightedSession:
    """An onnxruntime session whose weight inputs are always fed their arrays unless a feed names
    them: callers see only the model's own inputs (a weight that is also a graph input is one)."""

    # session: an onnxruntime.InferenceSession, which has no type information (Any)
    def __init__(self, session: Any, weights: "dict[str, np.ndarray]", added: "set[str]") -> None:
        from onnx_dml_lowering.runtime.ort_values import to_ort_value
        self.session = session
        self.weights = weights
        self.added = added
        self._values = {name: to_ort_value(array) for name, array in weights.items()}   # CPU: no copy

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    def get_inputs(self) -> list:
        return [i for i in self.session.get_inputs() if i.name not in self.added]

    def run(self, outputs: "Sequence[str] | None", feeds: "Mapping[str, Any]", *args: Any,
            **kwargs: Any) -> "list[Any]":
        return self.session.run(outputs, {**self.weights, **dict(feeds)}, *args, **kwargs)

    def run_with_ort_values(self, outputs: "Sequence[str] | None", feeds: "Mapping[str, Any]", *args: Any,
                            **kwargs: Any) -> "list[Any]":
        return self.session.run_with_ort_values(outputs, {**self._values, **dict(feeds)}, *args, **kwargs)
