"""Initializers whose data stays in their external files: read through a memory map when a value
is needed, never copied into the ModelProto (a protobuf message cannot pass 2 GB, and a copy would
double the memory a big model takes).

load_model marks such a tensor with a `basepath` entry (the model's folder, onnx's own
ExternalDataInfo key) next to its `location`, `offset` and `length`; everything that reads an
initializer's value goes through tensor_array, which maps the file at that offset. onnxruntime gets
these tensors as external initializers (ort_providers.ort_model), onnx.reference as feeds
(reference_evaluator), the ONNX checker as typed graph inputs (lifted)."""
from __future__ import annotations

import math
import os
import weakref
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper, helper, numpy_helper

from onnx_dml_lowering.ir import DmlLowerError

BASEPATH = "basepath"
# External tensors smaller than this are read into the proto as before: shape inference and the
# rules read small constants (Reshape shapes, Range limits) from the proto itself.
LAZY_MIN_BYTES = 1 << 20

# One mapping per file region for the whole process: every session (emulator, ONNX regions,
# onnxruntime backends, oracle) then shares the same resident pages instead of one copy each.
_MAPS: "weakref.WeakValueDictionary[tuple, np.ndarray]" = weakref.WeakValueDictionary()


def _entries(tensor: TensorProto) -> "dict[str, str]":
    return {e.key: e.value for e in tensor.external_data}


def mappable_dtype(data_type: int) -> "np.dtype | None":
    """The numpy dtype whose bytes are the tensor's raw data (None: packed 4-bit, strings)."""
    if data_type in (TensorProto.STRING, TensorProto.UNDEFINED) or data_type in _PACKED:
        return None
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(data_type))
    except (KeyError, TypeError, ValueError):
        return None
    return dtype if dtype.kind in "biufcV" else None


# Shape inference's data propagation reads 1-D integer initializers' values: those are loaded.
_SHAPE_LIKE = {TensorProto.INT64, TensorProto.INT32}
_PACKED = {getattr(TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2") if hasattr(TensorProto, n)}


def stays_inline(data_type: int, dims) -> bool:
    """A 1-D (or 0-d) integer tensor: shape inference's data propagation reads its values."""
    return len(dims) <= 1 and data_type in _SHAPE_LIKE


def is_lazy(tensor: TensorProto) -> bool:
    """The tensor's data is in an external file that load_model resolved (tensor_array maps it)."""
    return tensor.data_location == TensorProto.EXTERNAL and BASEPATH in _entries(tensor)


def _nbytes(tensor: TensorProto, dtype: np.dtype) -> int:
    count = 1
    for d in tensor.dims:
        count *= int(d)
    return count * dtype.itemsize


def resolve_external(proto: onnx.ModelProto, base_dir: str, what: str) -> None:
    """Check every external tensor of `proto` against its file (one line naming the tensor and the
    file when it is missing or too short); large main-graph initializers stay in their files
    (marked with basepath), every other external tensor is read into the proto."""
    # Main-graph initializers first (only they may stay in their files), then every other tensor.
    tensors = list(proto.graph.initializer) + list(external_data_helper._get_all_tensors(proto))
    for index, tensor in enumerate(tensors):
        if tensor.data_location != TensorProto.EXTERNAL or is_lazy(tensor):
            continue
        entries = _entries(tensor)
        location = entries.get("location", "")
        path = os.path.join(base_dir, location)
        if not location or os.path.isabs(location) or not os.path.isfile(path):
            raise DmlLowerError(f"{what}: external data file {path!r} of tensor {tensor.name!r} does not exist "
                                "or is not a file (external data is read relative to the model file)")
        dtype = mappable_dtype(tensor.data_type)
        offset = int(entries.get("offset", 0) or 0)
        length = int(entries["length"]) if entries.get("length") else None
        if dtype is not None:
            expected = _nbytes(tensor, dtype)
            if length is not None and length != expected:
                raise DmlLowerError(f"{what}: external data of tensor {tensor.name!r} has length {length}, but "
                                    f"its type and shape {list(tensor.dims)} take {expected} bytes")
            length = expected
        size = os.path.getsize(path)
        if length is not None and offset + length > size:
            raise DmlLowerError(f"{what}: external data file {path!r} holds {size} bytes, fewer than tensor "
                                f"{tensor.name!r} needs (offset {offset} + length {length})")
        if (index < len(proto.graph.initializer) and dtype is not None and length >= LAZY_MIN_BYTES
                and not stays_inline(tensor.data_type, tensor.dims)):
            entry = tensor.external_data.add()
            entry.key, entry.value = BASEPATH, os.path.abspath(base_dir)
            continue
        try:
            external_data_helper.load_external_data_for_tensor(tensor, base_dir)
        except Exception as exc:  # onnx raises OSError or ValueError
            from onnx_dml_lowering.ir.errors import first_line
            raise DmlLowerError(f"{what}: external data of tensor {tensor.name!r} cannot be loaded: "
                                f"{first_line(exc)}") from None
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]


def external_path(tensor: TensorProto) -> "tuple[str, int]":
    """The absolute file and byte offset of a lazy tensor's data."""
    entries = _entries(tensor)
    return os.path.join(entries[BASEPATH], entries["location"]), int(entries.get("offset", 0) or 0)


def _identity(path: str) -> "tuple[int, ...] | None":
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def tensor_array(tensor: TensorProto, aligned: bool = False) -> np.ndarray:
    """The tensor's value: a read-only-in-effect (copy-on-write) map of its file region when it is
    lazy, else numpy_helper.to_array. Inline weights lie wherever protobuf put them
    (runtime.inline_weights), so a map may be misaligned for its type: numpy reads it as it is;
    `aligned` (for onnxruntime, whose kernels expect aligned data) reads such a tensor into aligned
    memory instead, once per process while something holds it."""
    if not is_lazy(tensor):
        return numpy_helper.to_array(tensor)
    path, offset = external_path(tensor)
    dtype = mappable_dtype(tensor.data_type)
    shape = tuple(int(d) for d in tensor.dims)
    copy = aligned and offset % dtype.alignment != 0
    # the file's identity too: a path replaced since (in-place optimize) is another file's bytes
    key = (path, _identity(path), offset, dtype.str, shape, copy)
    array = _MAPS.get(key)
    if array is None:
        if _nbytes(tensor, dtype) == 0:
            return np.zeros(shape, dtype)
        if copy:
            array = np.fromfile(path, dtype=dtype, count=math.prod(shape), offset=offset).reshape(shape)
        else:
            # mode "c": pages are shared with the file cache until something writes (nothing should).
            array = np.memmap(path, dtype=dtype, mode="c", offset=offset, shape=shape)
        _MAPS[key] = array
    return array


def inline(tensor: TensorProto) -> None:
    """Put a lazy tensor's data back into the proto (a writer keeping a weight inline)."""
    if not is_lazy(tensor):
        return
    raw = np.ascontiguousarray(tensor_array(tensor)).tobytes()
    del tensor.external_data[:]
    tensor.data_location = TensorProto.DEFAULT
    tensor.raw_data = raw


def stored_bytes(tensor: TensorProto) -> int:
    """The bytes of a tensor's data, wherever it is."""
    return tensor_array(tensor).nbytes if is_lazy(tensor) else len(tensor.raw_data) or tensor.ByteSize()


def _repeated(field) -> bool:
    repeated = getattr(field, "is_repeated", None)      # protobuf >= 6 drops `label`
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


def copy_without(message, skip: str):
    """A copy of a protobuf message without the repeated field `skip` (so big tensors in it are
    not copied)."""
    out = type(message)()
    for field, value in message.ListFields():
        if field.name == skip:
            continue
        if _repeated(field):
            getattr(out, field.name).extend(value)
        elif field.message_type is not None:
            getattr(out, field.name).CopyFrom(value)
        else:
            setattr(out, field.name, value)
    return out


def split_initializers(model: onnx.ModelProto, moved: Callable[[TensorProto], bool]
                       ) -> "tuple[onnx.ModelProto, list[TensorProto]]":
    """A copy of `model` whose main graph lacks the initializers `moved` selects, and those."""
    out = copy_without(model, "graph")
    out.graph.CopyFrom(copy_without(model.graph, "initializer"))
    taken = []
    for tensor in model.graph.initializer:
        if moved(tensor):
            taken.append(tensor)
        else:
            out.graph.initializer.add().CopyFrom(tensor)
    return out, taken


def lifted(model: onnx.ModelProto) -> "tuple[onnx.ModelProto, list[TensorProto]]":
    """`model` with its lazy initializers turned into typed graph inputs (appended last): what the
    ONNX checker (which would look for the files beside the working directory) and onnx.reference
    are given."""
    out, lazy = split_initializers(model, is_lazy)
    inputs = {vi.name for vi in model.graph.input}
    for tensor in lazy:
        if tensor.name not in inputs:
            out.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    return out, lazy


class _ReferenceWithWeights:
    """onnx.reference over a model whose lazy initializers were made inputs, fed their maps."""

    def __init__(self, model: onnx.ModelProto) -> None:
        from onnx.reference import ReferenceEvaluator
        proto, lazy = lifted(model)
        self.weights = {t.name: tensor_array(t) for t in lazy}
        self.evaluator = ReferenceEvaluator(proto)

    def run(self, outputs, feeds):
        return self.evaluator.run(outputs, {**self.weights, **dict(feeds)})


def reference_evaluator(model: onnx.ModelProto):
    """An onnx.reference evaluator of `model` that reads lazy initializers from their files."""
    if not any(is_lazy(t) for t in model.graph.initializer):
        from onnx.reference import ReferenceEvaluator
        return ReferenceEvaluator(model)
    return _ReferenceWithWeights(model)
