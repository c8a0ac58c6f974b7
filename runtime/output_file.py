"""The one way this project writes a file a user asked for (reports, .npz, models, their data, the
conformance suite), by the rules of runtime.output_target:

- a new name or a regular file is written whole under a temporary name beside it and renamed over
  it only once complete (an existing file's mode, owner and group kept). A failure part way (disk
  full, Ctrl-C, SIGTERM, a bug) leaves the previous file as it was and no temporary behind;
- a character device, a FIFO or an open descriptor (`/dev/null`, `/dev/stdout`, a pipe) is written
  in place: the bytes are made whole in the temporary folder first, then poured into it, so a
  failure part way sends nothing; a device that refuses them (`/dev/full`) is one line;
- the path is resolved (links followed) before the bytes are made and checked again before they
  land: a path that changed kind meanwhile is left as it is;
- a file this process read as input (a model, its external data, an .npz: runtime.input_files) is
  never replaced: one line, nothing written.
"""
from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from typing import Callable, Iterator

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display

from .input_files import note_written, refusal
from .output_target import OutputKind, OutputTarget, Unwritable, reason, resolve

_CHUNK = 1 << 20


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def staged(path: "str | os.PathLike", what: str) -> Iterator[str]:
    """`with staged(path, what) as temp:` write the whole file at `temp`; on leaving without an
    exception it lands at `path` (renamed over it, or poured into a device / FIFO / descriptor); on
    any exception it is removed and `path` is untouched. An OSError is one line naming `what`, the
    path and the errno."""
    label = f"cannot write {what} to '{display(os.fspath(path))}'"
    try:
        target = resolve(path)
    except Unwritable as exc:
        raise DmlLowerError(f"{label}: {exc}") from None
    for info in target.regular_files():     # by any route, a descriptor's file included
        _not_an_input(info, label)
    folder = tempfile.gettempdir() if target.kind.in_place else os.path.dirname(target.path)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(target.path)[:100]}.", suffix=".partial",
                                    dir=folder)
        os.close(fd)
    except OSError as exc:
        raise DmlLowerError(f"{label}: {reason(exc)}") from None
    try:
        yield temp
        if target.kind.in_place:
            _pour(temp, target)
        else:
            _replace(temp, target, label)
            note_written(target.path, what)
    except OSError as exc:
        raise DmlLowerError(f"{label}: {reason(exc)}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def _not_an_input(info: "os.stat_result | None", label: str) -> None:
    """A file this process read as input (runtime.input_files) is never replaced by an output, nor
    written into through a descriptor open on it (`--json /dev/fd/3` of `3<>model.onnx`)."""
    why = refusal(info)
    if why is not None:
        raise DmlLowerError(f"{label}: {why}")


def _replace(temp: str, target: OutputTarget, label: str) -> None:
    """Rename `temp` over the file (or new name) `target`, giving it the mode, owner and group the
    file has, after checking the path is still what it was: nothing that exists changes type."""
    info = target.info
    if info is None:
        os.chmod(temp, 0o666 & ~_umask())
    else:
        mine = os.stat(temp)
        if (mine.st_uid, mine.st_gid) != (info.st_uid, info.st_gid):
            os.chown(temp, info.st_uid, info.st_gid)      # before chmod: a chown clears set-id bits
        os.chmod(temp, stat.S_IMODE(info.st_mode))
    try:
        now = os.lstat(target.path)
    except FileNotFoundError:
        now = None
    if (now is None) != (target.kind is OutputKind.NEW) or (now is not None and not stat.S_ISREG(now.st_mode)):
        raise DmlLowerError(f"{label}: it changed while the output was being made (it was "
                            f"{target.kind.value}): left as it is, nothing written")
    _not_an_input(now, label)           # read meanwhile
    os.replace(temp, target.path)


def _pour(temp: str, target: OutputTarget) -> None:
    """Copy the finished `temp` into the device, FIFO or descriptor `target` where it is. Opening a
    FIFO waits for its reader, as a shell's `>` does."""
    if target.fd is not None:
        for stream in (sys.stdout, sys.stderr):       # what was printed before stays before
            with contextlib.suppress(Exception):
                stream.flush()
        fd = target.fd
    else:
        fd = os.open(target.path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if target.fd is None and not (stat.S_ISCHR(os.fstat(fd).st_mode) or stat.S_ISFIFO(os.fstat(fd).st_mode)):
            raise OSError(0, "it is no longer a device or FIFO: nothing written")
        with open(temp, "rb") as source:
            while chunk := source.read(_CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
    finally:
        if target.fd is None:
            os.close(fd)


def write_output(path: "str | os.PathLike", what: str, write: Callable[[str], object]) -> None:
    """`write(temp)` writes the whole file at `temp`; then it lands at `path` (see staged)."""
    with staged(path, what) as temp:
        write(temp)


def write_bytes(path: "str | os.PathLike", what: str, data: bytes) -> None:
    """Bytes made in memory (a serialised model, a tensor), by the same rules."""
    def write(temp: str) -> None:
        with open(temp, "wb") as sink:
            sink.write(data)
    write_output(path, what, write)


def write_text(path: "str | os.PathLike", what: str, text: str) -> None:
    """A text report (UTF-8), by the same rules."""
    def write(temp: str) -> None:
        with open(temp, "w", encoding="utf-8", newline="\n") as sink:
            sink.write(text)
    write_output(path, what, write)
