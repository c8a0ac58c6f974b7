"""What an output path names, and whether it may be written: the rules every writing option shares
(runtime.output_file writes by them; compiler.output_files checks them before the work).

- a new name in an existing folder, or a regular file: written whole under a temporary name beside
  it and renamed over it (mode, owner and group of an existing file kept);
- a character device or a FIFO: opened and written in place (`/dev/null`, a terminal, a pipe);
- `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: this process's descriptor N, written in
  place whatever it is (a pipe, a terminal, a file `>` opened);
- whatever the route, the file the kernel reaches through the path (every link, the magic /proc
  descriptor links too: `/dev/fd/3` of `3<>model.onnx`) is kept in `reached`, so the writer's
  refusal of a file the command reads (runtime.input_files) sees it, whatever name led there;
- a symbolic link: followed hop by hop (at most 40, as the kernel does); its final target gets these
  rules. A dangling link whose target's folder exists creates the target, as the shell's `>` does;
- a directory, a socket, a block device, a link loop, a missing folder, and `-` (standard output
  to many tools, a file name to the OS): refused.
"""
from __future__ import annotations

import enum
import errno
import os
import re
import stat
from dataclasses import dataclass

# Linux's MAXSYMLINKS: as many hops as the kernel follows before it says ELOOP.
MAX_LINKS = 40
_ABSENT = (errno.ENOENT, errno.ENOTDIR)
_DESCRIPTOR = re.compile(r"/proc/(self|thread-self|\d+)/fd/(\d+)")


class OutputKind(enum.Enum):
    NEW = "a new file"
    FILE = "a regular file"
    STREAM = "a character device or FIFO"
    DESCRIPTOR = "an open descriptor of this process"

    @property
    def in_place(self) -> bool:
        """Written where it is (no temporary and rename): it is not a file a rename could replace."""
        return self in (OutputKind.STREAM, OutputKind.DESCRIPTOR)


@dataclass(frozen=True)
class OutputTarget:
    path: str                               # what is written: every link followed
    kind: OutputKind
    info: "os.stat_result | None" = None    # an existing file's (FILE, STREAM), a descriptor's (fstat)
    fd: "int | None" = None                 # DESCRIPTOR's number
    # what the kernel reaches through the path as asked (os.stat follows the magic /proc/PID/fd links
    # to the open file itself, which the text of their readlink may not name: a deleted or renamed file)
    reached: "os.stat_result | None" = None

    def regular_files(self) -> "list[os.stat_result]":
        """The regular files writing this target would replace or write into (by any route): the
        ones an output must never be when the command reads them."""
        return [info for info in (self.info, self.reached) if info is not None and stat.S_ISREG(info.st_mode)]


class Unwritable(Exception):
    """Why a path cannot be written, as the end of one line ('it is a directory')."""


def reason(exc: OSError) -> str:
    """An OSError as words and its errno's name: 'No space left on device (ENOSPC)'."""
    name = errno.errorcode.get(exc.errno or 0)
    return f"{exc.strerror or exc} ({name})" if name else str(exc.strerror or exc)


def resolve(path: "str | os.PathLike") -> OutputTarget:
    """The target `path` names under the module's rules, or Unwritable saying why not."""
    asked = os.fsdecode(os.fspath(path))
    if asked == "-":            # many tools' standard output: never a file named '-' made in silence
        raise Unwritable("'-' stands for no stream here: for standard output give /dev/stdout (written after "
                         "what the command prints), for a file named '-' its full path")
    if not asked:
        raise Unwritable("an empty path names no file (a variable that was never set?)")
    if "\0" in asked:
        raise Unwritable("it holds a NUL byte, which no path can")
    if asked.endswith(os.sep) and not os.path.isdir(asked):
        raise Unwritable(f"it ends with {os.sep!r}, as a folder's name does, and no such folder exists")
    final, fd, via_link = _follow(asked)
    if fd is not None:
        return _descriptor(fd)
    try:
        info = os.stat(final)
    except OSError as exc:
        if exc.errno in _ABSENT:
            return _reached(_new_file(asked, final, via_link), asked)
        raise Unwritable(_lookup_failure(exc)) from None
    return _reached(_existing(final, info), asked)


def _reached(target: OutputTarget, asked: str) -> OutputTarget:
    """`target` with the file the kernel reaches through `asked` (a magic /proc/PID/fd link of
    another process is followed to the open file, not to the path its text names)."""
    try:
        reached = os.stat(asked)
    except (OSError, ValueError):
        return target
    return OutputTarget(target.path, target.kind, target.info, target.fd, reached)


def _follow(asked: str) -> "tuple[str, int | None, bool]":
    """(the path every link leads to, the descriptor when one is this process's, whether a link
    was followed). Each hop's folder is resolved first, so a link's relative target is read from
    where the link is."""
    # joined, not normalised: 'link/../x' is the folder above the link's target, as the system
    # resolves it ('..' after the link), not the link's own folder (abspath drops 'link/..' as text)
    current, via_link = (asked if os.path.isabs(asked) else os.path.join(os.getcwd(), asked)), False
    for _ in range(MAX_LINKS + 1):
        folder, name = os.path.split(current)
        # the folder as the system walks it, before realpath (which drops 'missing/..' as text):
        # a path the system cannot reach is refused whether or not its resolved form exists
        blocked = _unwalkable(os.path.dirname(asked) or "." if not via_link else folder)
        if blocked is not None:
            lead = f"it is a dangling symbolic link to {current!r}, and " if via_link else ""
            prefix, is_file = blocked
            raise Unwritable(f"{lead}{prefix!r} is a file, not a folder" if is_file
                             else f"{lead}folder {prefix!r} does not exist")
        current = os.path.join(os.path.realpath(folder), name)
        match = _DESCRIPTOR.fullmatch(current)
        if match and match.group(1) in ("self", "thread-self", str(os.getpid())):
            return current, int(match.group(2)), via_link
        try:
            if not stat.S_ISLNK(os.lstat(current).st_mode):
                return current, None, via_link
            target = os.readlink(current)
        except OSError as exc:
            if exc.errno in _ABSENT:        # said by _new_file: which folder is missing or a file
                return current, None, via_link
            raise Unwritable(_lookup_failure(exc)) from None
        current, via_link = os.path.join(os.path.dirname(current), target), True
    raise Unwritable(f"it is a symbolic link loop (more than {MAX_LINKS} links: ELOOP)")


def _unwalkable(folder: str) -> "tuple[str, bool] | None":
    """(the first part of `folder`, as written, the system cannot walk, whether it is a file (else
    it does not exist)), or None when `folder` is a folder the system reaches."""
    try:
        if stat.S_ISDIR(os.stat(folder).st_mode):
            return None
    except OSError as exc:
        if exc.errno not in _ABSENT:
            return None                 # another failure: the checks that follow name it
    prefix = os.sep if folder.startswith(os.sep) else ""
    for part in [p for p in folder.split(os.sep) if p]:
        previous, prefix = prefix, os.path.join(prefix, part)
        try:
            info = os.stat(prefix)
        except FileNotFoundError:
            return prefix, False
        except NotADirectoryError:
            return previous.rstrip(os.sep) or os.sep, True
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return prefix, True
    return None


def _lookup_failure(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return f"it is a symbolic link loop (more than {MAX_LINKS} links: ELOOP)"
    if exc.errno == errno.ENAMETOOLONG:
        return f"the path or one of its names is too long ({reason(exc)})"
    return reason(exc)


def _new_file(asked: str, final: str, via_link: bool) -> OutputTarget:
    """A name that does not exist yet: its folder must exist and be writable."""
    folder = os.path.dirname(final)
    shown = folder if via_link else (os.path.dirname(asked) or ".")
    lead = f"it is a dangling symbolic link to {final!r}, and " if via_link else ""
    if not os.path.exists(folder):
        raise Unwritable(f"{lead}folder {shown!r} does not exist")
    if not os.path.isdir(folder):
        raise Unwritable(f"{lead}{shown!r} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise Unwritable(f"{lead}folder {shown!r} is not writable")
    return OutputTarget(final, OutputKind.NEW)


_REFUSED = {stat.S_IFDIR: "it is a directory", stat.S_IFSOCK: "it is a socket",
            stat.S_IFBLK: "it is a block device: writing it would overwrite a disk"}


def _existing(final: str, info: os.stat_result) -> OutputTarget:
    kind = stat.S_IFMT(info.st_mode)
    if kind in _REFUSED:
        raise Unwritable(_REFUSED[kind])
    if kind in (stat.S_IFCHR, stat.S_IFIFO):
        if not os.access(final, os.W_OK):
            raise Unwritable(f"the {'device' if kind == stat.S_IFCHR else 'FIFO'} is not writable")
        return OutputTarget(final, OutputKind.STREAM, info)
    if kind != stat.S_IFREG:
        raise Unwritable("it is not a regular file, a device or a FIFO")
    if not os.access(final, os.W_OK):
        raise Unwritable("the file is not writable")
    folder = os.path.dirname(final)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise Unwritable(f"folder {folder!r} is not writable (the file is replaced through a temporary "
                         "file beside it)")
    _check_owner(info)
    return OutputTarget(final, OutputKind.FILE, info)


def _check_owner(info: os.stat_result) -> None:
    """A replacement keeps the file's owner and group; one this user cannot give it is refused
    (POSIX only: Windows has no owner a rename would change this way)."""
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        return
    if info.st_uid != os.geteuid():
        raise Unwritable(f"it belongs to another user (uid {info.st_uid}): replacing it would change its owner")
    if info.st_gid != os.getegid() and info.st_gid not in os.getgroups():
        raise Unwritable(f"its group (gid {info.st_gid}) is not one of yours: replacing it would change its group")


def _descriptor(fd: int) -> OutputTarget:
    import fcntl                # POSIX: only a /proc path (Linux) leads here
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError:
        raise Unwritable(f"it is descriptor {fd} of this process, which is not open") from None
    if flags & os.O_ACCMODE == os.O_RDONLY:
        raise Unwritable(f"it is descriptor {fd} of this process, which is open for reading only")
    # what it is open on: a regular file there may be one the command reads (`3<>model.onnx`)
    return OutputTarget(f"/proc/self/fd/{fd}", OutputKind.DESCRIPTOR, info=os.fstat(fd), fd=fd)


def landing(path: str) -> str:
    """Where a file written to `path` lands: the final target of its links (a file whose siblings,
    such as a model's external data, must lie beside it, where the model's relative location is
    read from), or `path` itself when it is no link (or is refused: the writer says why)."""
    try:
        target = resolve(path)
    except Unwritable:
        return path
    return target.path if target.kind in (OutputKind.NEW, OutputKind.FILE) else path


def sibling(path: str, derive: str) -> str:
    """Where a file written beside the output `path` goes (feed set #i's STEM.i.npz, MIN.inputs.npz,
    OUT.onnx.data): `derive`, the path beside it, unless `path` is written in place (a device, a
    FIFO, a descriptor): a device has no folder of its own, so its siblings go to it as well, one
    after another."""
    try:
        return path if resolve(path).kind.in_place else derive
    except Unwritable:
        return derive


def set_path(path: str, index: int) -> str:
    """Where feed set #`index` of several is saved (--save-inputs / --save-outputs): set #0 at
    `path` itself, in the single-set layout, and set #i beside it as STEM.i.npz (in.npz, in.1.npz,
    in.2.npz ...): every file is one set, read back by --inputs / --load-outputs / --oracle. A
    device, FIFO or descriptor (`/dev/null`) takes every set itself, one after another."""
    if index == 0:
        return path
    stem, dot, suffix = path.rpartition(".")
    return sibling(path, f"{stem}.{index}.{suffix}" if dot and suffix == "npz" else f"{path}.{index}")
