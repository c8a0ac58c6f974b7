"""The client of hosts/ort_host.c: onnxruntime.dll's DirectML execution provider in a long-lived host
process (under Wine off Windows), spoken to over wine.HostProcess's framed pipe.

`OrtHost` starts the host on first use (one per command); `create_session` gives an `OrtHostSession`
that answers like an onnxruntime InferenceSession where the provider backend asks (get_inputs,
get_outputs, run) and carries the VERBOSE log of its creation, from which placement.py reads which
provider onnxruntime gave each node. Failures are typed: `SessionCreationFailed` and `RunFailed` carry
onnxruntime's own message. The wire format is described at the top of hosts/ort_host.c."""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.dtypes import numpy_to_onnx, onnx_to_numpy
from onnx_dml_lowering.runtime.ort_values import pack_4bit, unpack_4bit

from .home import DirectMLHome, find_home, on_windows
from .wine import HostProcess

EXE = "ort_host"
OK, CREATE_FAILED, RUN_FAILED, BAD_REQUEST = 0, 1, 2, 3
STRING, FOUR_BIT = 8, (21, 22, 23)
EMPTY_VALUE = -2        # the element type ort_host sends for an output onnxruntime left empty (ort_host.c)
OPTIMIZATION_LEVELS = {"disable": 0, "basic": 1, "extended": 2, "all": 99}


class OrtHostError(DmlLowerError):
    """onnxruntime.dll (in the host) refused: `message` is onnxruntime's own, `log` what it logged."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.message, self.log = message, log


class SessionCreationFailed(OrtHostError):
    """The DML EP's session could not be created (a node it claimed and could not compile included)."""


class RunFailed(OrtHostError):
    """The session was created and its run failed."""


def host_path(path: "str | os.PathLike[str]") -> str:
    """A Linux path as the Windows program sees it under Wine (Z: is the root); unchanged on Windows."""
    full = os.path.abspath(os.fspath(path))
    return full if on_windows() else "Z:" + full.replace("/", "\\")


# -- the wire format ---------------------------------------------------------------------------------
def _blob(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


def _text(value: str) -> bytes:
    return _blob(value.encode("utf-8", "surrogateescape"))


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise DmlLowerError(f"ort_host sent a truncated reply ({len(self.data)} bytes)")
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return int(struct.unpack("<I", self.take(4))[0])

    def i32(self) -> int:
        return int(struct.unpack("<i", self.take(4))[0])

    def dims(self) -> "list[int]":
        rank = self.u32()
        return list(struct.unpack(f"<{rank}q", self.take(8 * rank)))

    def blob(self) -> bytes:
        return self.take(self.u32())

    def text(self) -> str:
        return self.blob().decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class HostValueInfo:
    """An input or output of a host session, as onnxruntime's NodeArg shows it."""
    name: str
    element_type: int                       # ONNX's number; -1: not a tensor
    shape: "list[int | None]"               # None: a symbolic dimension


def _value_infos(reader: _Reader) -> "list[HostValueInfo]":
    infos = []
    for _ in range(reader.u32()):
        name, element_type = reader.text(), reader.i32()
        infos.append(HostValueInfo(name, element_type, [d if d >= 0 else None for d in reader.dims()]))
    return infos


def _status(reader: _Reader, what: str) -> None:
    status = reader.u8()
    if status == OK:
        return
    message, log = reader.text(), reader.text()
    kind = {CREATE_FAILED: SessionCreationFailed, RUN_FAILED: RunFailed}.get(status)
    if kind is None:
        raise DmlLowerError(f"ort_host refused the {what} request: {message}")
    raise kind(message, log)


# -- sessions ----------------------------------------------------------------------------------------
@dataclass
class SessionRequest:
    """What a session is created with: the user's settings, our own config entries, DML appended."""
    optimization_level: "str | None" = None          # an OPTIMIZATION_LEVELS key; None: onnxruntime's default
    threads: "int | None" = None
    config: "list[tuple[str, str]]" = field(default_factory=list)
    optimized_model_path: "str | None" = None        # a Linux path onnxruntime writes the optimised model to
    dml: bool = True

    def encode(self) -> bytes:
        level = -1 if self.optimization_level is None else OPTIMIZATION_LEVELS[self.optimization_level]
        threads = -1 if self.threads is None else self.threads
        parts = [struct.pack("<iiI", level, threads, len(self.config))]
        parts += [_text(k) + _text(v) for k, v in self.config]
        parts.append(_text(host_path(self.optimized_model_path) if self.optimized_model_path else ""))
        parts.append(bytes([1 if self.dml else 0]))
        return b"".join(parts)


class OrtHostSession:
    """One session in the host: answers as much of InferenceSession as the provider backend uses."""

    def __init__(self, host: "OrtHost", session_id: int, inputs: "list[HostValueInfo]",
                 outputs: "list[HostValueInfo]", log: str) -> None:
        self.host, self.id, self.inputs, self.outputs, self.log = host, session_id, inputs, outputs, log

    def get_inputs(self) -> "list[HostValueInfo]":
        return list(self.inputs)

    def get_outputs(self) -> "list[HostValueInfo]":
        return list(self.outputs)

    def get_overridable_initializers(self) -> "list[HostValueInfo]":
        return []          # the C API of version 12 lists them apart; the feeds name them anyway

    def run(self, output_names: "Sequence[str] | None", feeds: Mapping[str, np.ndarray]) -> "list[np.ndarray | None]":
        names = list(output_names) if output_names else [o.name for o in self.outputs]
        payload = [b"R", struct.pack("<II", self.id, len(feeds))]
        payload += [_text(name) + _encode_tensor(name, np.asarray(value)) for name, value in feeds.items()]
        payload.append(struct.pack("<I", len(names)))
        payload += [_text(name) for name in names]
        reader = _Reader(self.host.request(b"".join(payload)))
        _status(reader, "run")
        values = [_decode_tensor(reader, name) for name in names[:reader.u32()]]
        self.host.last_log = reader.text()
        return values

    def release(self) -> None:
        if self.host.running:
            reader = _Reader(self.host.request(b"X" + struct.pack("<I", self.id)))
            _status(reader, "release")


def _encode_tensor(name: str, array: np.ndarray) -> bytes:
    if array.dtype.kind in "OSU":
        raise DmlLowerError(f"input {name}: string tensors are not carried to onnxruntime.dll's DirectML EP "
                            "(the DirectML EP takes no string tensor)")
    element_type = numpy_to_onnx(array.dtype)
    data = np.ascontiguousarray(array)
    raw = pack_4bit(data).tobytes() if element_type in FOUR_BIT else data.tobytes()
    return struct.pack(f"<iI{array.ndim}q", element_type, array.ndim, *array.shape) + _blob(raw)


def _decode_tensor(reader: _Reader, name: str) -> "np.ndarray | None":
    """An output as the host sent it; None where onnxruntime left it empty, as the Python binding gives it
    (a provider backend says so: backends.Provider.run)."""
    element_type, shape = reader.i32(), tuple(reader.dims())
    data = reader.blob()
    if element_type == EMPTY_VALUE:
        return None
    dtype = onnx_to_numpy(element_type)
    if element_type in FOUR_BIT:
        return unpack_4bit(np.frombuffer(data, np.uint8), shape, dtype)
    return np.frombuffer(data, dtype).reshape(shape).copy()


class OrtHost:
    """ort_host.exe, started on first use, closed with the command (a context manager)."""

    def __init__(self, home: "DirectMLHome | None" = None) -> None:
        self.home = home if home is not None else find_home(EXE)
        self.process = HostProcess(self.home, EXE)
        self.last_log = ""
        self._version: "tuple[str, list[str]] | None" = None

    @property
    def running(self) -> bool:
        return self.process.pid is not None

    def request(self, payload: bytes) -> bytes:
        answer = self.process.request(payload)
        if not self.process.hello.startswith("ok"):
            raise DmlLowerError(f"onnxruntime.dll's DirectML EP failed its self-test in {self.process.name}: "
                                f"{self.process.hello.removeprefix('failed: ')}")
        return answer

    def version(self) -> str:
        """onnxruntime.dll's version (e.g. "1.24.4")."""
        if self._version is None:
            reader = _Reader(self.request(b"V"))
            _status(reader, "version")
            self._version = (reader.text(), reader.text().split(","))
        return self._version[0]

    def create_session(self, model: "bytes | str | os.PathLike[str]", request: "SessionRequest | None" = None
                       ) -> OrtHostSession:
        """A session over model bytes, or a model path (a model with external data loads from its folder)."""
        request = request or SessionRequest()
        if isinstance(model, (bytes, bytearray)):
            source = b"\x00" + _blob(bytes(model))
        else:
            source = b"\x01" + _text(host_path(model))
        reader = _Reader(self.request(b"C" + source + request.encode()))
        _status(reader, "session")
        session_id = reader.u32()
        inputs, outputs = _value_infos(reader), _value_infos(reader)
        return OrtHostSession(self, session_id, inputs, outputs, reader.text())

    def close(self) -> None:
        self.process.close()

    def __enter__(self) -> "OrtHost":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
