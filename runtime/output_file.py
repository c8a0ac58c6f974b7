"""The one way this project writes a file a user asked for (reports, .npz, models, their data):
to a temporary name beside it, renamed over the target only once complete. A failure part way
(disk full, Ctrl-C, SIGTERM, a bug) leaves the previous file as it was and no temporary behind;
the exact path asked for is the one written."""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Callable, Iterator

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _target(path: "str | os.PathLike") -> str:
    """The file to replace: a symlink's target (replacing the link itself would cut it)."""
    return os.path.realpath(path) if os.path.islink(path) else os.fspath(path)


@contextlib.contextmanager
def staged(path: "str | os.PathLike", what: str) -> Iterator[str]:
    """`with staged(path, what) as temp:` write `temp`; on leaving without an exception it
    replaces `path` (mode as a new file would get); on any exception it is removed. An OSError
    is one line naming `what` and the path."""
    target = _target(path)
    folder, name = os.path.split(target)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{name[:100]}.", suffix=".partial", dir=folder or ".")
        os.close(fd)
    except OSError as exc:
        raise DmlLowerError(f"cannot write {what} to {display(os.fspath(path))!r}: {exc.strerror or exc}") from None
    try:
        yield temp
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise DmlLowerError(f"cannot write {what} to {display(os.fspath(path))!r}: "
                                f"{exc.strerror or exc}") from None
        raise


def write_output(path: "str | os.PathLike", what: str, write: Callable[[str], object]) -> None:
    """`write(temp)` writes the whole file at `temp`; then it replaces `path` (see staged)."""
    with staged(path, what) as temp:
        write(temp)


def write_text(path: "str | os.PathLike", what: str, text: str) -> None:
    """A text report (UTF-8), atomically."""
    def write(temp: str) -> None:
        with open(temp, "w", encoding="utf-8", newline="\n") as sink:
            sink.write(text)
    write_output(path, what, write)
