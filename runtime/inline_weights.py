"""Inline weights read like external ones: a model file's large initializers are found in its bytes
(protobuf's wire format, without parsing them into messages) and the ModelProto is parsed from a
copy of the file that lacks them, each pointing at its own bytes in the .onnx file instead
(location = the file itself, offset, length). weights.resolve_external then marks them lazy like
any external tensor: the checker, shape inference, sub-models and serialisation work on a
weight-free proto, and a value is read through a memory map of the file when it is needed.

Only main-graph initializers stored as `raw_data` of LAZY_MIN_BYTES or more are moved, and not the
1-D integer ones shape inference reads as values. Anything this scan does not expect (a group
field, a truncated field, the graph given twice) leaves the file to the ordinary parse."""
from __future__ import annotations

from typing import Callable, Iterator

import mmap
import os

import onnx
from onnx import TensorProto

from .weights import LAZY_MIN_BYTES, mappable_dtype, stays_inline

# Field numbers of onnx.proto (ModelProto.graph, GraphProto.initializer, TensorProto's fields).
_MODEL_GRAPH, _GRAPH_INITIALIZER = 7, 5
_DIMS, _DATA_TYPE, _SEGMENT, _RAW_DATA, _EXTERNAL_DATA, _DATA_LOCATION = 1, 2, 3, 9, 13, 14
_TYPED_DATA = {4, 5, 6, 7, 10, 11}          # float_data, int32_data, string_data, int64_data, double, uint64
_LEN, _VARINT, _I64, _I32 = 2, 0, 1, 5


class _Unexpected(Exception):
    """The bytes are not what this scan reads: the ordinary parse decides."""


def _varint(data: "bytes | memoryview", pos: int, end: int) -> "tuple[int, int]":
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Unexpected
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: "bytes | memoryview", start: int, end: int) -> "Iterator[tuple[int, int, int, int, int]]":
    """(field number, wire type, start of the whole field, start of its payload, end) per field."""
    pos = start
    while pos < end:
        first = pos
        key, pos = _varint(data, pos, end)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, after = _varint(data, pos, end)
        elif wire == _LEN:
            length, pos = _varint(data, pos, end)
            after = pos + length
        elif wire == _I64:
            after = pos + 8
        elif wire == _I32:
            after = pos + 4
        else:
            raise _Unexpected                        # groups: not in onnx.proto
        if after > end or number == 0:
            raise _Unexpected
        yield number, wire, first, pos, after
        pos = after


def _key(number: int, wire: int) -> bytes:
    return _encode_varint(number << 3 | wire)


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _key(number, _LEN) + _encode_varint(len(payload)) + payload


def _entry(key: str, value: str) -> bytes:
    """One StringStringEntryProto of TensorProto.external_data."""
    return _len_field(_EXTERNAL_DATA, _len_field(1, key.encode()) + _len_field(2, value.encode()))


def _movable(data: "bytes | memoryview", start: int, end: int) -> "tuple[int, int, int] | None":
    """Where the raw_data field of the initializer at data[start:end] lies (field start, data start,
    data end) when it may be left in the file, else None."""
    dims: "list[int]" = []
    data_type = 0
    raw = None
    for number, wire, first, payload, after in _fields(data, start, end):
        if number == _DIMS:
            if wire == _VARINT:
                dims.append(_varint(data, payload, after)[0])
            elif wire == _LEN:                               # packed
                pos = payload
                while pos < after:
                    value, pos = _varint(data, pos, after)
                    dims.append(value)
        elif number == _DATA_TYPE and wire == _VARINT:
            data_type = _varint(data, payload, after)[0]
        elif number == _RAW_DATA and wire == _LEN:
            raw = (first, payload, after)
        elif number in _TYPED_DATA or number in (_SEGMENT, _EXTERNAL_DATA):
            return None                                      # not plain raw data
        elif number == _DATA_LOCATION and _varint(data, payload, after)[0] != TensorProto.DEFAULT:
            return None
    if raw is None or raw[2] - raw[1] < LAZY_MIN_BYTES:
        return None
    dtype = mappable_dtype(data_type)
    if dtype is None or stays_inline(data_type, dims):
        return None
    count = 1
    for d in dims:
        count *= d
    if any(d >= 1 << 62 for d in dims) or count * dtype.itemsize != raw[2] - raw[1]:
        return None                     # a size mismatch: the ordinary path names it
    return raw


def _graph_without(data: "bytes | memoryview", start: int, end: int, location: str,
                   passed: "Callable[[int], None]" = lambda upto: None) -> "tuple[bytes, int] | None":
    """The GraphProto payload with every movable initializer's raw_data replaced by a pointer
    into the file, and how many were moved; None when none is. `passed(upto)`: this scan reads
    nothing before data[upto] again."""
    pieces: "list[bytes]" = []
    moved = 0
    copied = start                     # data[copied:first] is still to be copied verbatim
    for number, wire, first, payload, after in _fields(data, start, end):
        if number != _GRAPH_INITIALIZER or wire != _LEN:
            continue
        raw = _movable(data, payload, after)
        if raw is None:
            continue
        field_start, data_start, data_end = raw
        body = (bytes(data[payload:field_start]) + bytes(data[data_end:after])
                + _key(_DATA_LOCATION, _VARINT) + _encode_varint(TensorProto.EXTERNAL)
                + _entry("location", location) + _entry("offset", str(data_start))
                + _entry("length", str(data_end - data_start)))
        pieces.append(bytes(data[copied:first]))
        pieces.append(_len_field(_GRAPH_INITIALIZER, body))
        copied = after
        moved += 1
        passed(copied)
    if not moved:
        return None
    pieces.append(bytes(data[copied:end]))
    return b"".join(pieces), moved


def parse_without_weights(path: str) -> "onnx.ModelProto | None":
    """The model in `path` with its large inline initializers pointing at their bytes in the file
    (external data whose location is the file itself), or None when there are none to move or the
    bytes are not as expected (then the caller parses the file as usual)."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size < LAZY_MIN_BYTES:
            return None
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            view = memoryview(data)
            try:
                return _parse(view, size, os.path.basename(path), _Unmapper(data))
            except _Unexpected:
                return None
            finally:
                view.release()


class _Unmapper:
    """Unmaps from this process the pages of the file the scan has passed (they stay in the page
    cache). The scan reads a few bytes between weights, but each read maps the page-cache folio
    it falls in whole, up to 2 MB: Whisper-small's 924 MB file had 404 MB of it resident at the
    end of the scan (RssFile, against 29 MB of the process's own memory), which was the peak RSS
    of its compile. Unmapped every _STEP bytes passed, the scan keeps a window resident."""
    _STEP = 8 << 20

    def __init__(self, data: mmap.mmap) -> None:
        self.data, self.done = data, 0

    def __call__(self, upto: int) -> None:
        upto -= upto % mmap.PAGESIZE
        if upto - self.done >= self._STEP and hasattr(mmap, "MADV_DONTNEED"):
            try:
                self.data.madvise(mmap.MADV_DONTNEED, self.done, upto - self.done)
            except OSError:               # a locked mapping (mlockall): the scan goes on, mapped
                self.done = len(self.data)
                return
            self.done = upto


def _parse(data: "bytes | memoryview", size: int, location: str,
           passed: "Callable[[int], None]" = lambda upto: None) -> "onnx.ModelProto | None":
    graphs = [(first, payload, after) for number, wire, first, payload, after in _fields(data, 0, size)
              if number == _MODEL_GRAPH and wire == _LEN]
    if len(graphs) != 1:
        return None                                  # protobuf merges repeated graphs: leave it to it
    first, payload, after = graphs[0]
    rewritten = _graph_without(data, payload, after, location, passed)
    if rewritten is None:
        return None
    graph, _ = rewritten
    proto = onnx.ModelProto()
    proto.ParseFromString(bytes(data[:first]) + _len_field(_MODEL_GRAPH, graph) + bytes(data[after:]))
    return proto


def in_model_file(tensor: TensorProto, file_name: str) -> bool:
    """An external tensor whose location is the model file itself: inline data left in place."""
    return (tensor.data_location == TensorProto.EXTERNAL and bool(file_name)
            and any(e.key == "location" and e.value == file_name for e in tensor.external_data))
