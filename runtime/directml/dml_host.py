"""The client of hosts/dml_host.c: DirectML operators run by Microsoft's DirectML.dll.

`DmlHost.execute(op, tensors, fields, buffers)` sends one operator — its DML_OPERATOR_TYPE, its
tensor descriptors (ir.TensorDesc: data type, sizes, strides, TotalTensorSizeInBytes) in the
description's order, its scalar fields — and the whole bytes of every bound buffer, and returns the
whole bytes of every output buffer as DirectML left them. A refusal by the device (E_INVALIDARG or
E_NOTIMPL when the operator is created or compiled) is DirectMLRefused, the backend's UNSUPPORTED;
any other failure DirectMLCallFailed, its ERROR. Both name the operator, descriptors and HRESULT.

`shared_host()` is this thread's host, started on first use and closed at exit: one per command,
one per worker thread. A zoo worker hands its host to each model's check process in turn
(`handover`): the check finds it in HANDED_ENV and uses it instead of starting one, so a zoo starts
one host per worker, not one per model."""
from __future__ import annotations

import atexit
import functools
import json
import os
import stat
import struct
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from onnx_dml_lowering.ir import DmlLowerError

from .home import DirectMLHome, find_home
from .wine import HostProcess

if TYPE_CHECKING:
    from onnx_dml_lowering.ir import DataType, TensorDesc
# The IR's tensor types and support tables import numpy (0.1-0.2 s): this module reads them when
# an operator runs, so a command can start the host's process (start_early) before numpy loads.

EXE = "dml_host"
EXECUTE, CAPS = 1, 2
OK, FAILED, REFUSED = 0, 1, 2
E_INVALIDARG, E_NOTIMPL = 0x80070057, 0x80004001
# Where a refusal means "this device does not take this descriptor", not a broken device.
REFUSING_STAGES = ("CreateOperator", "CompileOperator")


@functools.lru_cache(maxsize=None)
def operator_type(operator: str) -> int:
    """The operator's DML_OPERATOR_TYPE value, from the IR's support tables."""
    from onnx_dml_lowering.ir.support import OPERATORS
    return OPERATORS[operator].number


@functools.lru_cache(maxsize=None)
def input_count(operator: str) -> int:
    """How many of the operator's description tensors are inputs (the tables name them as in the
    description, inputs first)."""
    from onnx_dml_lowering.ir.support import OPERATORS
    return sum(not t.startswith("Output") for t in OPERATORS[operator].rows[0].tensors)


class HostRefused(DmlLowerError):
    """The host will not run operators: its start-up self-test failed (a wrong answer from a
    known operator), or it called a request malformed."""


class DirectMLCallFailed(DmlLowerError):
    """DirectML.dll or D3D12 returned a failing HRESULT for one operator."""

    def __init__(self, operator: str, descriptors: str, hresult: int, stage: str) -> None:
        self.operator, self.descriptors, self.hresult, self.stage = operator, descriptors, hresult, stage
        super().__init__(f"DirectML {operator} {descriptors}: {stage} failed with HRESULT {hresult:#010x}"
                         f"{' (E_INVALIDARG)' if hresult == E_INVALIDARG else ''}")


class DirectMLRefused(DirectMLCallFailed):
    """The device refuses the descriptor (E_INVALIDARG / E_NOTIMPL when creating or compiling)."""


def call_failed(operator: str, descriptors: str, hresult: int, stage: str) -> DirectMLCallFailed:
    refused = hresult in (E_INVALIDARG, E_NOTIMPL) and stage in REFUSING_STAGES
    return (DirectMLRefused if refused else DirectMLCallFailed)(operator, descriptors, hresult, stage)


def encode_tensor(desc: "TensorDesc | None") -> bytes:
    """One tensor slot of an EXECUTE request (an absent optional tensor: present = 0)."""
    if desc is None:
        return struct.pack("<I", 0)
    sizes = desc.concrete_sizes()
    out = struct.pack(f"<4I{len(sizes)}I", 1, int(desc.data_type), desc.flags, len(sizes), *sizes)
    if desc.strides is None:
        out += struct.pack("<I", 0)
    else:
        out += struct.pack(f"<I{len(sizes)}I", 1, *desc.strides)
    return out + struct.pack("<QI", desc.total_bytes, desc.alignment)


def describe(tensors: "Sequence[TensorDesc | None]") -> str:
    return ", ".join(t.describe() if t is not None else "(none)" for t in tensors)


@dataclass
class Executed:
    outputs: "list[bytes]"     # every output buffer's whole bytes, in the description's order
    cached: bool               # the compiled operator came from the host's cache


class DmlHost:
    """One dml_host process (started on first use; or handed over by the process that started it)."""

    def __init__(self, home: "DirectMLHome | None" = None, process: "HostProcess | None" = None) -> None:
        self.process = process or HostProcess(home or find_home(EXE), EXE)

    def close(self, wait: bool = True) -> None:
        self.process.close(wait)

    def __enter__(self) -> "DmlHost":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> str:
        """Start the host (Wine, device, heap, self-test) if it is not running; its hello line."""
        self.process.start()
        return self.process.hello

    @property
    def hello(self) -> str:
        return self.start()

    def _ready(self) -> None:
        if not self.hello.startswith("ok"):
            raise HostRefused(f"the DirectML host refuses to run operators: its self-test {self.hello} "
                              "(run `make directml` again; docs/directml-on-linux.md)")

    def caps(self) -> "dict[str, Any]":
        """The device facts: directml_version, feature_level, data_types, d3d12, self_test."""
        answer = self.process.request(struct.pack("<I", CAPS))
        status, body = struct.unpack_from("<I", answer)[0], answer[4:]
        if status != OK:
            raise HostRefused(f"the DirectML host would not say its device facts: {body.decode('utf-8', 'replace')}")
        return dict(json.loads(body.decode("utf-8")))

    def execute(self, operator: str, tensors: "Sequence[TensorDesc | None]", fields: bytes,
                buffers: "Sequence[bytes | None]") -> Executed:
        """Run one operator; `buffers[i]` is tensor i's whole buffer (TotalTensorSizeInBytes)."""
        self._ready()
        request = [struct.pack("<3I", EXECUTE, operator_type(operator), len(tensors))]
        request += [encode_tensor(t) for t in tensors]
        request.append(struct.pack("<I", len(fields)) + fields)
        for desc, data in zip(tensors, buffers):
            if desc is not None:
                if data is None or len(data) != desc.total_bytes:
                    raise DmlLowerError(f"DirectML {operator} {desc.describe()}: a buffer of "
                                        f"{0 if data is None else len(data)} bytes for {desc.total_bytes}")
                request.append(bytes(data))
        answer = self.process.request(b"".join(request))
        status = struct.unpack_from("<I", answer)[0]
        if status == FAILED:
            hresult, length = struct.unpack_from("<2I", answer, 4)
            raise call_failed(operator, describe(tensors), hresult, answer[12:12 + length].decode("utf-8", "replace"))
        if status != OK:
            raise HostRefused(f"the DirectML host refused {operator} {describe(tensors)}: "
                              f"{answer[4:].decode('utf-8', 'replace')}")
        cached = bool(struct.unpack_from("<I", answer, 4)[0])
        outputs, at = [], 8
        for desc in tensors[input_count(operator):]:
            size = desc.total_bytes if desc is not None else 0
            outputs.append(answer[at:at + size])
            at += size
        if at != len(answer):
            raise HostRefused(f"the DirectML host answered {operator} with {len(answer)} bytes, not {at}")
        return Executed(outputs, cached)


_local = threading.local()          # this thread's host, with the pid that started it
_started: "list[tuple[int, DmlHost]]" = []
_lock = threading.Lock()


HANDED_ENV = "DML_LOWER_DML_HOST_PIPE"   # "<host's stdin fd>,<host's stdout fd>,<its hello>"


def shared_host() -> DmlHost:
    """This thread's host, started on first use: one per command, one per zoo worker (a thread
    of the zoo's pool, or a process of its own; a forked child never shares its parent's pipe).
    A host dies with the thread that started it (wine.HostProcess). The first thread of a process
    whose parent handed it a host (HANDED_ENV) uses that one."""
    mine = getattr(_local, "host", None)
    if mine is None or mine[0] != os.getpid():
        mine = _local.host = (os.getpid(), _handed_over() or DmlHost())
        with _lock:
            _started.append(mine)
    return mine[1]


def start_early() -> None:
    """Start this thread's host's process now without waiting for it: a command that will run
    `dml` calls it before it loads and compiles the model, so Wine's and the devices' start-up
    (1-2 s) overlaps that work too. What fails here (DirectML not set up, Wine missing) is left
    for the backend to say in its one line, as it would without this call."""
    try:
        shared_host().process.spawn()
    except DmlLowerError:
        drop_shared_host()


def _handed_over() -> "DmlHost | None":
    handed = os.environ.get(HANDED_ENV)
    if not handed:
        return None
    write_fd, read_fd, hello = _handed_pipe(handed)     # a bad value stays: every later ask says so
    del os.environ[HANDED_ENV]                      # one user of the pipe: the first thread asking
    return DmlHost(process=HostProcess.attached(find_home(EXE), EXE, write_fd, read_fd, hello))


def _handed_pipe(value: str) -> "tuple[int, int, str]":
    """HANDED_ENV's (write fd, read fd, hello): two pipes this process holds (never 0-2), or one
    line naming the variable (a zoo sets it for its check processes; anything else is a mistake)."""
    from onnx_dml_lowering.ir.digits import ascii_digits
    from onnx_dml_lowering.ir.display import display
    parts = value.split(",", 2)
    fds = parts[:2]
    if len(parts) != 3 or not all(ascii_digits(fd) and len(fd) < 10 for fd in fds):
        raise DmlLowerError(f"{HANDED_ENV}={display(value)}: not '<fd>,<fd>,<hello>' (a zoo hands its DirectML "
                            "host to each check process so; unset it)")
    for fd in map(int, fds):
        try:
            is_pipe = fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode)
        except OSError:
            is_pipe = False
        if not is_pipe:
            raise DmlLowerError(f"{HANDED_ENV}={display(value)}: descriptor {fd} is not a pipe this process "
                                "holds (a zoo hands its DirectML host to each check process so; unset it)")
    return int(fds[0]), int(fds[1]), parts[2]


def handover() -> "tuple[dict[str, str], tuple[int, int]] | None":
    """(the environment entry, the fds to pass) that hand this thread's host to one child process,
    started here if it is not running; None where it cannot start (the child then says why itself)."""
    host = shared_host()
    try:
        host.start()
        fds = host.process.pipe_fds()
    except DmlLowerError:
        drop_shared_host()
        return None
    return {HANDED_ENV: f"{fds[0]},{fds[1]},{host.hello}"}, fds


def drop_shared_host() -> None:
    """Close this thread's host and forget it (a child that used it died mid-request, perhaps
    mid-frame): the next use starts a new one."""
    mine = getattr(_local, "host", None)
    _local.host = None
    if mine is not None and mine[0] == os.getpid():
        with _lock:
            if mine in _started:
                _started.remove(mine)
        mine[1].close()


def _close_shared() -> None:
    with _lock:
        for pid, host in _started:
            if pid == os.getpid():
                host.close(wait=False)      # the process is ending: its host need not be waited for
        _started.clear()


atexit.register(_close_shared)


def data_type_of(dtype: Any) -> DataType:
    """The DirectML type of a numpy dtype the emulator's buffers hold."""
    from onnx_dml_lowering.ir import DataType
    for data_type in DataType:
        try:
            if data_type.numpy == dtype:
                return data_type
        except DmlLowerError:
            continue
    raise DmlLowerError(f"numpy dtype {dtype} has no DirectML tensor type")
