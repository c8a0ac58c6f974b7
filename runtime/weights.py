"""Initializers whose data stays in their external files: read through a memory map when a value
is needed, never copied into the ModelProto (a protobuf message cannot pass 2 GB, and a copy would
double the memory a big model takes).

resolve_external is the one reader of external data, for every command and the Python API: a
model file cannot make the tool read outside its own folder (the real path, symlinks resolved,
must lie inside it), nor anything but a regular file, nor past the bytes its tensor takes. It marks
a large tensor with a `basepath` entry (the checked file's real folder, onnx's own ExternalDataInfo
key) next to its `location`, `offset` and `length`; everything that reads an initializer's value
goes through tensor_array, which maps the file at that offset (reads it, under MAP_MIN_BYTES).
onnxruntime gets these tensors as external initializers (ort.model.ort_model; inline past
SMALL_MAPS_MAX small ones), onnx.reference as feeds (reference_evaluator, also the DML EP's
deviation table), the ONNX checker as typed graph inputs (lifted)."""
from __future__ import annotations

import math
import os
import platform
import re
import stat
import weakref
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.lowering.onnx_graphs import all_graphs
from onnx_dml_lowering.runtime import input_files
from onnx_dml_lowering.runtime.model_content import PACKED_BITS, check_tensor, raw_bytes, tensor_problem

if TYPE_CHECKING:
    from google.protobuf.message import Message

BASEPATH = "basepath"
# protobuf's largest message, in bytes (2 GB - 1): the checker, shape inference and onnxruntime
# all serialise the model, so a proto past it cannot reach them.
PROTO_LIMIT = (1 << 31) - 1
# A main-graph initializer of at least this many bytes stays in its file (external data, or the
# .onnx itself for inline raw data), smaller ones are read into the proto; 1-D integer ones always
# are (stays_inline: shape inference and the rules read Reshape shapes, Range limits from the
# proto). 4 KiB, not 1 MiB as before: a model of many sub-megabyte weights (SSDlite: 11 MB in 117
# of them) was parsed into the proto, copied by the checker and shape inference, and held through
# the check (compile +60 MB of peak RSS against +22 MB, and 40 ms of its 100).
LAZY_MIN_BYTES = 1 << 12

# A lazy tensor of at least this many bytes is memory-mapped when its value is asked for; a smaller
# one is read into memory of its own (its pages are few, its map would be one more per tensor).
MAP_MIN_BYTES = 1 << 20

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


def stays_inline(data_type: int, dims: "Sequence[int]") -> bool:
    """A 1-D (or 0-d) integer tensor: shape inference's data propagation reads its values."""
    return len(dims) <= 1 and data_type in _SHAPE_LIKE


def is_lazy(tensor: TensorProto) -> bool:
    """The tensor's data is in an external file that load_model resolved (tensor_array maps it)."""
    return tensor.data_location == TensorProto.EXTERNAL and BASEPATH in _entries(tensor)


def _nbytes(tensor: TensorProto, dtype: np.dtype) -> int:
    return math.prod(int(d) for d in tensor.dims) * dtype.itemsize


_PACKED = frozenset(PACKED_BITS)      # never mapped: numpy holds one element per byte


def data_bytes(tensor: TensorProto) -> "int | None":
    """The bytes of raw data the tensor's type and dims take (None: a string or unknown type)."""
    return raw_bytes(tensor.data_type, math.prod(int(d) for d in tensor.dims))


def _describe(tensor: TensorProto) -> str:
    return f"{helper.tensor_dtype_to_string(tensor.data_type).removeprefix('TensorProto.')} {list(tensor.dims)}"


def _whole_number(entries: "dict[str, str]", key: str, tensor: TensorProto, shown: str, what: str) -> "int | None":
    """An offset or length entry as a non-negative int (None when absent), else one line. Read as
    onnx (int()) and onnxruntime (a stream's >>) both read it: spaces around, a leading '+'."""
    text = entries.get(key)
    if text is None or text == "":
        return None
    if not re.fullmatch(r"\+?[0-9]+", text.strip()):
        raise DmlLowerError(f"{what}: external data of tensor {tensor.name!r} in {shown!r} has {key} {text!r}, "
                            "not a non-negative whole number of bytes")
    return int(text)


def _limit(folder: str, name: str, default: int) -> int:
    try:
        return os.pathconf(folder, name)
    except (OSError, ValueError, AttributeError):     # no pathconf on Windows
        return default


def _unusable(folder: str, location: "str | bytes") -> "str | None":
    """Why the OS cannot take `location` as a path under `folder` (None: it can): the location is
    model data, and a NUL byte, bytes that are not UTF-8 or an over-long name would otherwise
    surface as an exception of os.path instead of the loader's one line."""
    if isinstance(location, bytes):       # protobuf hands a string field that is not UTF-8 back as bytes
        return "is not UTF-8 text (ONNX stores a location as UTF-8)"
    if "\0" in location:
        return "holds a NUL byte, which no file name can"
    try:
        location.encode("utf-8")
    except UnicodeEncodeError:
        return "is not UTF-8 text (ONNX stores a location as UTF-8)"
    name_max, path_max = _limit(folder, "PC_NAME_MAX", 255), _limit(folder, "PC_PATH_MAX", 4096)
    longest = max((len(part.encode("utf-8")) for part in location.split(os.sep)), default=0)
    if longest > name_max:
        return f"has a name of {longest} bytes, over the {name_max} bytes a file name can hold"
    path = len(os.fsencode(os.path.join(os.path.abspath(folder), location)))
    if path >= path_max:
        return f"makes a path of {path} bytes, over the {path_max - 1} bytes a path can hold"
    return None


def _inside(folder: str, location: "str | bytes", tensor: TensorProto, what: str) -> "tuple[str, str]":
    """(path as shown, real path) of an external data file, refused unless it is a regular file whose
    real path (every symlink resolved) lies inside the model's real folder."""
    if not location:
        raise DmlLowerError(f"{what}: tensor {tensor.name!r} is stored as external data but names no location")
    why = _unusable(folder, location)
    if why is not None:
        raise DmlLowerError(f"{what}: tensor {tensor.name!r} names its external data by a location that {why}: "
                            f"{location[:80]!r}{'...' if len(location) > 80 else ''}")
    assert isinstance(location, str)
    shown = os.path.join(folder, location)
    if os.path.isabs(location):
        raise DmlLowerError(f"{what}: tensor {tensor.name!r} names its external data by the absolute path "
                            f"{location!r}; external data is read only from inside the model's folder")
    root = os.path.realpath(folder)
    real = os.path.realpath(shown)
    if os.path.commonpath([root, real]) != root:
        raise DmlLowerError(f"{what}: external data file {location!r} of tensor {tensor.name!r} resolves to "
                            f"{real!r}, outside the model's folder {root!r} (external data is read only from inside it)")
    try:
        info = os.stat(real)
        mode = info.st_mode
    except OSError:
        raise DmlLowerError(f"{what}: external data file {shown!r} of tensor {tensor.name!r} does not exist or is "
                            "not a file (external data is read relative to the model file)") from None
    if not stat.S_ISREG(mode):
        raise DmlLowerError(f"{what}: external data file {shown!r} of tensor {tensor.name!r} is not a regular file "
                            "(a folder, FIFO or device): only regular files are read")
    input_files.note(info, f"external data file {shown!r}")     # no output of this command may replace it
    return shown, real


def _external_region(tensor: TensorProto, folder: str, what: str) -> "tuple[str, int, int]":
    """(real path, offset, length) of an external tensor's data, every number checked against the
    tensor's type and shape and the file's size (one line naming the tensor, the file and them)."""
    entries = _entries(tensor)
    keys = [e.key for e in tensor.external_data if e.key != BASEPATH]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:           # which one counts is the reader's guess: onnxruntime refuses the file
        raise DmlLowerError(f"{what}: tensor {tensor.name!r} names external data entry {twice[0]!r} "
                            f"{keys.count(twice[0])} times (each entry is named once)")
    shown, real = _inside(folder, entries.get("location", ""), tensor, what)
    offset = _whole_number(entries, "offset", tensor, shown, what) or 0
    length = _whole_number(entries, "length", tensor, shown, what)
    expected = data_bytes(tensor)         # the caller checked model_content.tensor_problem first
    if expected is None:
        raise DmlLowerError(f"{what}: tensor {tensor.name!r} of type {_describe(tensor)} cannot be stored as "
                            "external data (ONNX stores raw bytes there; this type has none)")
    size = os.path.getsize(real)
    if length is not None and length != expected:
        raise DmlLowerError(f"{what}: external data of tensor {tensor.name!r} has length {length}, but its type and "
                            f"shape {list(tensor.dims)} take {expected} bytes (file {shown!r})")
    if offset + expected > size:
        raise DmlLowerError(f"{what}: external data file {shown!r} holds {size} bytes, fewer than tensor "
                            f"{tensor.name!r} needs (offset {offset} + length {expected})")
    if length is None and offset + expected != size:
        # ONNX reads a tensor without length to the end of its file.
        raise DmlLowerError(f"{what}: external data of tensor {tensor.name!r} has no length, so it runs from offset "
                            f"{offset} to the end of {shown!r}: {size - offset} bytes, but its type and shape "
                            f"{list(tensor.dims)} take {expected} bytes")
    return real, offset, expected


def _read_region(path: str, offset: int, length: int) -> bytes:
    """Exactly `length` bytes of a regular file from `offset` (the caller checked the file's size)."""
    with open(path, "rb") as file:
        file.seek(offset)
        return file.read(length)


def check_raw_data(tensor: TensorProto, what: str) -> None:
    """A tensor read inline (a test-data file): its data type, shape and values as
    model_content.check_tensor checks them (the name this check had when it read raw_data only)."""
    check_tensor(tensor, what)


def _check_content(proto: onnx.ModelProto, tensors: "list[TensorProto]", index: int, what: str) -> None:
    """model_content.tensor_problem of tensors[index] (all_tensors(proto)) as one line naming the
    tensor and, for any but a main-graph initializer, where it lives (walked again only then)."""
    problem = tensor_problem(tensors[index])
    if problem is not None:
        place = _walk(proto, describe=True)[1][index]
        raise DmlLowerError(f"{what}: tensor '{display(tensors[index].name)}'{place} {problem}")


def no_external(proto: onnx.ModelProto, what: str, own_marks: bool = False) -> None:
    """A model without a folder (bytes, a ModelProto) cannot name external data: refused, never read
    relative to the working directory; inline raw data is checked against its tensor's shape.
    `own_marks`: a ModelProto from the caller's own code may hold tensors load_model left in their
    files (a loaded model passed again); their regions are checked again, from their marked folder.
    Bytes are a file's content: a basepath they carry is never trusted."""
    tensors = all_tensors(proto)          # one walk of the model (thousands of nodes on a big one)
    if not own_marks:
        forget_basepaths(proto, tensors)
    for index, tensor in enumerate(tensors):
        _check_content(proto, tensors, index, what)
        if is_lazy(tensor):
            _external_region(tensor, _entries(tensor)[BASEPATH], what)
        elif tensor.data_location == TensorProto.EXTERNAL:
            location = _entries(tensor).get("location", "")
            raise DmlLowerError(f"{what}: tensor {tensor.name!r} keeps its data in external file {location!r}, "
                                "which a model without a folder cannot name: pass the model file's path")


def forget_basepaths(proto: onnx.ModelProto, tensors: "list[TensorProto] | None" = None) -> None:
    """Drop every basepath entry a file carries (onnx may write one): external data is found from
    the model's own folder, never from a folder the file names. `tensors`: all_tensors(proto), when
    the caller has them."""
    for tensor in all_tensors(proto) if tensors is None else tensors:
        kept = [(e.key, e.value) for e in tensor.external_data if e.key != BASEPATH]
        if len(kept) != len(tensor.external_data):
            del tensor.external_data[:]
            for key, value in kept:
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value


def all_tensors(proto: onnx.ModelProto) -> "list[TensorProto]":
    """Every tensor of the model: initializers (main graph first, then bodies), the tensors of node
    attributes, model-local functions included, and the values and indices of sparse tensors
    (onnx.reference would read theirs relative to the working directory). Nothing has checked the
    model yet, so the walk trusts no schema: a graph behind any attribute is scanned, whatever its
    op and declared type (onnx's own _get_all_tensors follows the declared type only)."""
    return _walk(proto, describe=False)[0]


def _walk(proto: onnx.ModelProto, describe: bool) -> "tuple[list[TensorProto], list[str]]":
    """all_tensors, and with `describe` where each lives, as an error line shows it after the
    tensor's name ("" for a main-graph initializer: its name says it); without, no text is built."""
    graphs = all_graphs(proto, trust_schema=False)
    holders: "list[onnx.GraphProto | onnx.FunctionProto]" = [*graphs, *proto.functions]
    shown = [""] + [f" in graph '{display(g.name)}'" for g in graphs[1:]] + [
        f" in model-local function '{display(f.name)}'" for f in proto.functions] if describe else []
    tensors = [tensor for graph in graphs for tensor in graph.initializer]
    places = [f" (initializer{shown[at]})" if at else "" for at, g in enumerate(graphs) for _ in g.initializer
              ] if describe else []
    sparse = [item for graph in graphs for item in graph.sparse_initializer]
    sparse_places = [f"sparse initializer '{display(item.values.name)}'{shown[at]}" for at, g in enumerate(graphs)
                     for item in g.sparse_initializer] if describe else []
    for at, holder in enumerate(holders):
        for node in holder.node:
            for attribute in node.attribute:
                count = len(tensors), len(sparse)
                if attribute.HasField("t"):
                    tensors.append(attribute.t)
                tensors.extend(attribute.tensors)
                if attribute.HasField("sparse_tensor"):
                    sparse.append(attribute.sparse_tensor)
                sparse.extend(attribute.sparse_tensors)
                if describe:
                    where = (f"attribute '{display(attribute.name)}' of {display(node.op_type)} node "
                             f"'{display(node.name)}'{shown[at]}")
                    places.extend([f" ({where})"] * (len(tensors) - count[0]))
                    sparse_places.extend([f"sparse tensor of {where}"] * (len(sparse) - count[1]))
    for where in sparse_places:         # empty unless describe
        places.extend([f" (the values of {where})", f" (the indices of {where})"])
    return tensors + [part for item in sparse for part in (item.values, item.indices)], places


def resolve_external(proto: onnx.ModelProto, base_dir: str, what: str) -> None:
    """The one reader of external data: every external tensor of `proto` is checked (inside the
    model's folder with symlinks resolved, a regular file, offset and length against the tensor and
    the file; one line naming the tensor, the file and the numbers otherwise); large main-graph
    initializers stay in their files (marked with basepath), every other external tensor is read
    into the proto with a read bounded by its length. Inline raw data is checked likewise."""
    tensors = all_tensors(proto)
    forget_basepaths(proto, tensors)
    main = len(proto.graph.initializer)
    for index, tensor in enumerate(tensors):
        _check_content(proto, tensors, index, what)
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        real, offset, length = _external_region(tensor, base_dir, what)
        if (index < main and mappable_dtype(tensor.data_type) is not None and length >= LAZY_MIN_BYTES
                and not stays_inline(tensor.data_type, tensor.dims)):
            # The checked real path: nothing later resolves the location (or a symlink in it) again.
            del tensor.external_data[:]
            for key, value in (("location", os.path.basename(real)), ("offset", str(offset)),
                               ("length", str(length)), (BASEPATH, os.path.dirname(real))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            continue
        try:
            tensor.raw_data = _read_region(real, offset, length)
        except OSError as exc:
            raise DmlLowerError(f"{what}: external data of tensor {tensor.name!r} cannot be read: "
                                f"{exc.strerror or exc}") from None
        if len(tensor.raw_data) != length:      # the file shrank since it was checked
            raise DmlLowerError(f"{what}: external data file of tensor {tensor.name!r} ends before its "
                                f"{length} bytes")
        tensor.ClearField("data_location")
        del tensor.external_data[:]


def external_path(tensor: TensorProto) -> "tuple[str, int]":
    """The absolute file and byte offset of a lazy tensor's data."""
    entries = _entries(tensor)
    return os.path.join(entries[BASEPATH], entries["location"]), int(entries.get("offset", 0) or 0)


# x86-64 and ARM64 load misaligned data in every instruction onnxruntime's CPU kernels use (checked
# bit for bit on GPT-2, BERT, Whisper and Mask R-CNN: same outputs, no fault): the maps are
# handed over as they are. A copy into fresh memory costs more than onnxruntime's whole load here
# (first-touch page faults: 0.8 s for GPT-2's 370 MB of misaligned weights, against 0.04 s to map them).
UNALIGNED_LOADS = platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64")


def _identity(path: str) -> "tuple[int, ...] | None":
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def tensor_array(tensor: TensorProto, aligned: bool = False) -> np.ndarray:
    """The tensor's value: a read-only-in-effect (copy-on-write) map of its file region when it is
    lazy (a read of it below MAP_MIN_BYTES), else numpy_helper.to_array. Inline weights lie
    wherever protobuf put them (runtime.inline_weights), so a map may be misaligned for its type:
    numpy reads it as it is; `aligned` (for onnxruntime) reads such a tensor into aligned memory
    instead, once per process while something holds it, on a machine that cannot load misaligned
    data (UNALIGNED_LOADS)."""
    if not is_lazy(tensor):
        if tensor.data_location == TensorProto.EXTERNAL:
            # numpy_helper would read it relative to the working directory: only load_model reads files.
            raise DmlLowerError(f"tensor {tensor.name!r} keeps its data in an external file that was not "
                                "loaded with its model: pass the model file's path")
        return numpy_helper.to_array(tensor)
    path, offset = external_path(tensor)
    dtype = mappable_dtype(tensor.data_type)
    if dtype is None:       # resolve_external leaves only mappable types in their files
        raise DmlLowerError(f"tensor {tensor.name!r} ({_describe(tensor)}) cannot be read from its file")
    shape = tuple(int(d) for d in tensor.dims)
    # a small one is read, not mapped: a map per tensor would let a file of 65,530 small weights
    # pass the kernel's limit on maps per process (vm.max_map_count) before any memory runs out
    size = _nbytes(tensor, dtype)
    copy = (aligned and offset % dtype.alignment != 0 and not UNALIGNED_LOADS) or size < MAP_MIN_BYTES
    # the file's identity too: a path replaced since (in-place optimize) is another file's bytes
    key = (path, _identity(path), offset, dtype.str, shape, copy)
    array = _MAPS.get(key)
    if array is None:
        if size == 0:
            return np.zeros(shape, dtype)
        if copy:
            array = np.fromfile(path, dtype=dtype, count=math.prod(shape), offset=offset).reshape(shape)
        else:
            # mode "c": pages are shared with the file cache until something writes (nothing should).
            array = np.memmap(path, dtype=dtype, mode="c", offset=offset, shape=shape)
        _MAPS[key] = array
    return array


def leading_elements(tensor: TensorProto, count: int) -> "np.ndarray | None":
    """The first `count` elements of a lazy tensor's value, read alone from its file (a weight's
    first row, where the rest is not needed); None for any other tensor (tensor_array it)."""
    if not is_lazy(tensor):
        return None
    dtype = mappable_dtype(tensor.data_type)
    if dtype is None:
        return None
    path, offset = external_path(tensor)
    count = max(0, min(count, math.prod(int(d) for d in tensor.dims)))
    return np.fromfile(path, dtype=dtype, count=count, offset=offset)


def inline(tensor: TensorProto) -> None:
    """Put a lazy tensor's data back into the proto (a writer keeping a weight inline)."""
    if not is_lazy(tensor):
        return
    raw = np.ascontiguousarray(tensor_array(tensor)).tobytes()
    del tensor.external_data[:]
    tensor.ClearField("data_location")
    tensor.raw_data = raw


def proto_bytes(tensor: TensorProto) -> int:
    """The bytes the tensor takes in a model file: its message, and its data when that stays in
    its file (a lazy tensor's message holds only where the data is)."""
    return tensor.ByteSize() + ((data_bytes(tensor) or 0) if is_lazy(tensor) else 0)


def stored_bytes(tensor: TensorProto) -> int:
    """The bytes of a tensor's data, wherever it is."""
    return (data_bytes(tensor) or 0) if is_lazy(tensor) else len(tensor.raw_data) or tensor.ByteSize()


def _repeated(field: Any) -> bool:
    repeated = getattr(field, "is_repeated", None)      # protobuf >= 6 drops `label`
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


# a protobuf message type: copy_without returns the type it was given
M = TypeVar("M", bound="Message")


def copy_without(message: M, skip: str) -> M:
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


class _Reference:
    """onnx.reference over `model`, its lazy initializers made inputs and fed their maps, run
    quietly: onnx.reference's numpy warnings (a power of a negative base, a signalling NaN) are
    values ONNX defines, not messages for the user's stderr."""

    def __init__(self, model: onnx.ModelProto, **options: Any) -> None:
        from onnx.reference import ReferenceEvaluator
        if any(is_lazy(t) for t in model.graph.initializer):
            model, lazy = lifted(model)
            self.weights = {t.name: tensor_array(t) for t in lazy}
        else:
            self.weights = {}
        self.evaluator = ReferenceEvaluator(model, **options)

    def run(self, outputs: "Sequence[str] | None", feeds: "Mapping[str, np.ndarray]") -> Any:
        import warnings
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return self.evaluator.run(outputs, {**self.weights, **dict(feeds)})


def reference_evaluator(model: onnx.ModelProto, **options: Any) -> Any:
    """An onnx.reference evaluator of `model` (run(outputs, feeds)) that reads lazy initializers
    from their files and keeps onnx.reference's warnings off stderr; `options` go to
    ReferenceEvaluator (new_ops)."""
    return _Reference(model, **options)
