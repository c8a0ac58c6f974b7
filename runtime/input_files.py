"""The files this process has read as input: model files, their external data, .npz inputs and
golden outputs. Their readers note each one here; the one writer (runtime.output_file) refuses to
replace a file noted here, so an output option that names an input (`check m.onnx --json m.onnx`,
`check m.onnx --json m.data`) is one line, not a destroyed model. A file is known by its device
and inode, through any name or link, as long as it is the file that was read (same size and
modification time: an inode freed and reused by another file is not it)."""
from __future__ import annotations

import os
import stat
import threading

from onnx_dml_lowering.ir.errors import DmlLowerError

_READ: "dict[tuple[int, int], tuple[str, int, int]]" = {}   # (device, inode) -> (read as, size, mtime)
_WRITTEN: "dict[tuple[int, int], tuple[str, int, int]]" = {}   # the same, of the files this command wrote
_LOCK = threading.Lock()


def note(info: os.stat_result, what: str) -> None:
    """The file `info` describes was read as `what` ("model file 'm.onnx'")."""
    with _LOCK:
        _READ.setdefault((info.st_dev, info.st_ino), (what, info.st_size, info.st_mtime_ns))


def _known(table: "dict[tuple[int, int], tuple[str, int, int]]", info: os.stat_result) -> "str | None":
    """What `table` noted `info`'s file as, while it is still that file (same size and modification
    time: an inode freed and reused by another file is not it)."""
    with _LOCK:
        entry = table.get((info.st_dev, info.st_ino))
    return entry[0] if entry is not None and entry[1:] == (info.st_size, info.st_mtime_ns) else None


def note_path(path: "str | os.PathLike", what: str) -> None:
    try:
        note(os.stat(path), what)
    except OSError:
        pass                # its reader says what is wrong with it


def named_stat(path: "str | os.PathLike", what: str) -> os.stat_result:
    """os.stat of a path the user named, or one line naming `what`: it does not exist, or it cannot
    be reached (too long, through a file, a loop, a NUL byte)."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise DmlLowerError(f"{what} does not exist") from None
    except OSError as exc:
        raise DmlLowerError(f"{what} cannot be read: {exc.strerror or exc}") from None
    except ValueError:      # a NUL byte in the path (the Python API; argv cannot hold one)
        raise DmlLowerError(f"{what} cannot be read: its path holds a NUL byte") from None


def regular_file(path: "str | os.PathLike", what: str, kind: str = "a file") -> os.stat_result:
    """The stat of a regular file the command reads (a model, an .npz, a data loader script), from
    one stat before anything opens it (opening a FIFO blocks; a device never ends), noted as an
    input no output of this command may replace. The one check of every reader: a path that is
    missing, cannot be reached (too long, through a file, a loop), a directory, FIFO, device or
    socket is one line naming `what`; `kind` is what a directory is not ("an .npz archive")."""
    info = named_stat(path, what)
    if stat.S_ISDIR(info.st_mode):
        raise DmlLowerError(f"{what} is a directory, not {kind}")
    if not stat.S_ISREG(info.st_mode):
        raise DmlLowerError(f"{what} is not a regular file (a FIFO, device or socket): only regular files are read")
    note(info, what)
    return info


def forget_all() -> None:
    """Nothing is an input any more: a new command in this process, or one that rewrites its model in
    place on purpose once it has read every byte it needs (optimize -o IN.onnx)."""
    with _LOCK:
        _READ.clear()
        _WRITTEN.clear()


def note_written(path: "str | os.PathLike", what: str) -> None:
    """The regular file at `path` is `what` this command has just written: no later output of the
    same command may replace it (one option's file named as another's derived file, a feed set's
    `F.1.npz` given to --json, would be lost after its `wrote` line)."""
    try:
        info = os.stat(path)
    except OSError:
        return
    with _LOCK:
        _WRITTEN[(info.st_dev, info.st_ino)] = (what, info.st_size, info.st_mtime_ns)


def refusal(info: "os.stat_result | None") -> "str | None":
    """Why an output may not replace the file `info` describes (the end of one line), or None
    when this process neither read it nor wrote it in this command."""
    if info is None:
        return None
    read, written = _known(_READ, info), _known(_WRITTEN, info)
    if read is not None:
        return f"that is the {read} this command reads, which the output would replace: give the output another path"
    if written is not None:
        return (f"this command has already written {written} there, which the output would replace: give each "
                "output its own file")
    return None
