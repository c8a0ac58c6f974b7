"""--data-loader-script FILE.py[:FUNC]: feed sets from a user's Python function (Polygraphy's
convention: FUNC, default load_data, returns or yields dicts of input name to array; each dict is
one iteration). Feed sets come out one at a time, checked against the model's inputs, and every
failure of the script is one line naming it (and the iteration)."""
from __future__ import annotations

from typing import Any, Callable

import contextlib
import hashlib
import os
import signal
import sys
import importlib.util
import threading
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import brief
from onnx_dml_lowering.runtime.input_files import regular_file

from .loader_spec import parse_spec


# What the user's code may raise, said in one line: any exception, SystemExit and GeneratorExit
# too; a KeyboardInterrupt (Ctrl-C, SIGTERM: runtime.interrupt) is the user stopping the command.
_SCRIPT_FAILURES = (Exception, SystemExit, GeneratorExit)


_STREAMS = ("standard input", "standard output", "standard error")
_END = object()             # next()'s default: the script gave no more sets


def _streams() -> "list[tuple[int, int] | None]":
    """What descriptors 0-2 are (device and inode; None: closed)."""
    found: "list[tuple[int, int] | None]" = []
    for fd in range(3):
        try:
            info = os.fstat(fd)
        except OSError:
            found.append(None)
        else:
            found.append((info.st_dev, info.st_ino))
    return found


@contextlib.contextmanager
def _kept_streams(what: str) -> "Iterator[None]":
    """Around the script's code: a script that closes or replaces descriptor 0-2 gets them back as
    they were, and is refused in one line before anything else is printed (what the command prints
    would be lost, or land in a file the script opened in its place)."""
    before = _streams()
    copies = [os.dup(fd) if before[fd] is not None else None for fd in range(3)]
    objects = [sys.stdin, sys.stdout, sys.stderr]       # and Python's stream objects over them
    try:
        yield
    finally:
        changed = [fd for fd, now in enumerate(_streams()) if now != before[fd]]
        for fd in changed:
            copy = copies[fd]
            if copy is not None:
                os.dup2(copy, fd)
        for copy in copies:
            if copy is not None:
                os.close(copy)
        changed += _kept_objects(objects)
    if changed:
        fd = changed[0]
        raise DmlLowerError(f"{what} closed or replaced the command's {_STREAMS[fd]} (descriptor {fd}): a data "
                            "loader only gives feeds")


def _kept_objects(objects: "list[Any]") -> "list[int]":
    """sys.stdin / stdout / stderr as they were before the script's code (a script that set
    sys.stdout = StringIO() swallowed the report; one that closed sys.stderr lost the error line):
    the originals back, a closed one replaced by a new one over its descriptor. Returns the
    descriptors whose stream changed."""
    changed = []
    for fd, (name, was) in enumerate(zip(("stdin", "stdout", "stderr"), objects)):
        if getattr(sys, name) is was and not getattr(was, "closed", False):
            continue
        changed.append(fd)
        if getattr(was, "closed", False):
            was = open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        setattr(sys, name, was)
    return changed


class _Folder:
    """A working directory: an open descriptor where the system can change to one (a folder renamed
    or removed meanwhile is still the same folder), else its path; equal when the same folder."""

    def __init__(self) -> None:
        self.handle: "int | str" = os.curdir
        if hasattr(os, "fchdir"):
            with contextlib.suppress(OSError):
                self.handle = os.open(os.curdir, getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0))
                info = os.fstat(self.handle)
                self.key: object = (info.st_dev, info.st_ino)
                return
        with contextlib.suppress(OSError):      # removed: where it is now, as good as any
            self.handle = os.getcwd()
        self.key = self.handle

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Folder) and self.key == other.key

    def enter(self) -> None:
        if isinstance(self.handle, int):
            os.fchdir(self.handle)
        else:
            os.chdir(self.handle)

    def release(self) -> None:
        if isinstance(self.handle, int):
            os.close(self.handle)
            self.handle = os.curdir


_ABSENT = object()          # an environment variable that is not set


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _globals() -> "dict[tuple, Any]":
    """The process-wide state the command reads after a data loader's code has run, which that code
    may change: the working directory (relative paths: the model, --json, the session's external
    data), the environment (DML_LOWER_STRICT), the umask (the mode of the files written), sys.path
    (the command's lazy imports), the Ctrl-C / SIGTERM handlers, numpy's floating-point error
    handling (onnx.reference's arithmetic) and print options (run's previews)."""
    state: "dict[tuple, Any]" = {("cwd",): _Folder(), ("umask",): _umask(), ("path",): list(sys.path),
                                 ("numpy_errors",): dict(np.geterr()), ("numpy_errcall",): np.geterrcall(),
                                 ("numpy_print",): dict(np.get_printoptions())}
    state.update({("environ", name): value for name, value in os.environ.items()})
    if threading.current_thread() is threading.main_thread():       # handlers are the main thread's
        handlers = {("signal", s): signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        state.update({key: h for key, h in handlers.items() if h is not None})  # None: not set from Python
    return state


_SETTERS: "dict[str, Callable[[Any], object]]" = {
    "cwd": lambda folder: folder.enter(), "umask": os.umask, "path": lambda path: sys.path.__setitem__(slice(None), path),
    "numpy_errors": lambda errors: np.seterr(**errors), "numpy_errcall": np.seterrcall,
    "numpy_print": lambda options: np.set_printoptions(**options)}


def _apply(values: "dict[tuple, Any]") -> None:
    for key, value in values.items():
        if key[0] == "environ":
            if value is _ABSENT:
                os.environ.pop(key[1], None)
            else:
                os.environ[key[1]] = value
        elif key[0] == "signal":
            signal.signal(key[1], value)
        else:
            _SETTERS[key[0]](value)


def _differences(was: "dict[tuple, Any]", now: "dict[tuple, Any]") -> "dict[tuple, Any]":
    """What `now` holds where it differs from `was` (an environment variable unset: _ABSENT)."""
    return {key: now.get(key, _ABSENT) for key in was.keys() | now.keys()
            if was.get(key, _ABSENT) != now.get(key, _ABSENT)}


def _release(*states: "dict[tuple, Any]") -> None:
    for state in states:
        folder = state.get(("cwd",))
        if isinstance(folder, _Folder):
            folder.release()


class LoaderGlobals:
    """A data loader's code runs with its own changes to the process-wide state (_globals), kept
    from one call to the next (a loader that changes to its data folder in load_data() reads from
    there at every later step), and the command gets its own back after each call: a loader's
    os.chdir does not change which model the command runs or where --json lands, its os.environ or
    np.seterr does not change a result. Only what the loader changed is swapped."""

    def __init__(self) -> None:
        self._own: "dict[tuple, Any]" = {}       # where the loader's state differs from the command's

    @contextlib.contextmanager
    def entered(self, what: str) -> "Iterator[None]":
        command = _globals()
        try:
            try:
                _apply(self._own)
            except OSError as exc:      # its folder, known by path only, is gone
                raise DmlLowerError(f"{what}: cannot go back to its own working directory "
                                    f"({exc.strerror or exc})") from None
            yield
        finally:
            after = _globals()
            own = _differences(command, after)
            _apply(_differences(after, command))
            self.close()
            self._own = own
            _release(command, {} if ("cwd",) in own else after)

    def close(self) -> None:
        _release(self._own)
        self._own = {}


@contextlib.contextmanager
def _loader_code(what: str, state: LoaderGlobals) -> "Iterator[None]":
    """Around every call into the loader's code: its own process-wide state, the command's
    standard streams kept."""
    with state.entered(what), _kept_streams(what):
        yield


def _where(exc: BaseException, path: Path) -> str:
    """' (line N)' of the deepest frame of the traceback inside the script, if any."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    if isinstance(exc, SyntaxError) and exc.lineno:
        lines.append(exc.lineno)
    return f" (line {lines[-1]})" if lines else ""


def _failure(exc: BaseException, path: Path) -> str:
    message = brief(str(exc))
    return f"{type(exc).__name__}{': ' + message if message else ''}{_where(exc, path)}"


def load_function(spec: str, state: "LoaderGlobals | None" = None) -> "tuple[Callable[[], object], str, Path]":
    """The script's function, or DmlLowerError naming the script; its module runs in `state` (a
    state of its own when not given, dropped after)."""
    path, function = parse_spec(spec)
    what = f"data loader script {str(path)!r}"
    regular_file(path, what, "a Python script")       # and an input no output may replace
    resolved = path.resolve()
    name = "dml_lower_data_loader_" + hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    module_spec = importlib.util.spec_from_file_location(name, resolved)
    if module_spec is None or module_spec.loader is None:      # a suffix importlib has no loader for
        raise DmlLowerError(f"{what} is not Python source by its name: call it FILE.py")
    own = state or LoaderGlobals()
    with _loader_code(f"{what}, loading,", own):
        try:
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        except _SCRIPT_FAILURES as exc:  # whatever the user's code raises, said in one line
            raise DmlLowerError(f"{what} failed to load: {_failure(exc, resolved)}") from None
        finally:
            if state is None:
                own.close()
    func = getattr(module, function, None)
    if func is None:
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                         and getattr(v, "__module__", None) == name)
        raise DmlLowerError(f"{what} has no function {function!r} "
                            f"(its functions: {', '.join(defined) or 'none'}; choose one with FILE.py:FUNC)")
    if not callable(func):
        raise DmlLowerError(f"{what}: {function!r} is a {type(func).__name__}, not a function")
    return func, what, resolved


def feed_sets(spec: str, inputs: "list[onnx.ValueInfoProto]",
              optional: "Sequence[onnx.ValueInfoProto]" = ()) -> "Iterator[dict[str, np.ndarray]]":
    """The script's feed sets one at a time, each checked against the model's inputs (names,
    types, ranks, fixed dimensions); the script runs lazily, as the sets are consumed, each call
    into its code in its own process-wide state (LoaderGlobals)."""
    state = LoaderGlobals()
    try:
        func, what, resolved = load_function(spec, state)
        function = parse_spec(spec)[1]
        with _loader_code(f"{what}: {function}()", state):
            try:
                produced = func()
            except _SCRIPT_FAILURES as exc:
                raise DmlLowerError(f"{what}: {function}() raised {_failure(exc, resolved)}") from None
        if isinstance(produced, Mapping):
            produced = [produced]
        if not isinstance(produced, Iterable) or isinstance(produced, (str, bytes)):
            raise DmlLowerError(f"{what}: {function}() returned {type(produced).__name__}, not feed dicts "
                                "(return a dict, a list of dicts or yield dicts)")
        with _loader_code(f"{what}: {function}()", state):
            iterator = iter(produced)           # a class's __iter__ is the script's code too
        try:
            yield from _sets(iterator, inputs, optional, (what, function, resolved), state)
        finally:
            _close(iterator, f"{what}: {function}()", state)
    finally:
        state.close()


def _sets(iterator: Iterator, inputs: "list[onnx.ValueInfoProto]", optional: "Sequence[onnx.ValueInfoProto]",
          script: "tuple[str, str, Path]", state: LoaderGlobals) -> "Iterator[dict[str, np.ndarray]]":
    """Each set the script's `iterator` gives, checked; its code (next(), a feed's __array__) runs
    in `state`."""
    from onnx_dml_lowering.runtime.feeds import check_feeds
    what, function, resolved = script
    index = 0
    while True:
        with _loader_code(f"{what}, iteration #{index}: {function}()", state):
            try:
                feeds = next(iterator, _END)
            except _SCRIPT_FAILURES as exc:
                raise DmlLowerError(f"{what}, iteration #{index}: {function}() raised "
                                    f"{_failure(exc, resolved)}") from None
            if feeds is _END:
                break
            if not isinstance(feeds, Mapping):
                raise DmlLowerError(f"{what}, iteration #{index}: {function}() gave a {type(feeds).__name__}, "
                                    "not a dict of input name to array")
            try:
                checked = check_feeds(inputs, {str(k): v for k, v in feeds.items()}, optional)
            except DmlLowerError as exc:
                raise DmlLowerError(f"{what}, iteration #{index}: {exc}") from None
            except _SCRIPT_FAILURES as exc:     # a feed's own code (__array__, a dict's items) raised
                raise DmlLowerError(f"{what}, iteration #{index}: its feeds could not be read: "
                                    f"{_failure(exc, resolved)}") from None
        yield checked
        index += 1
    if index == 0:
        raise DmlLowerError(f"{what}: {function}() gave no feed sets")


def _close(iterator: Iterator, what: str, state: LoaderGlobals) -> None:
    """The script's generator closed in its own state when the command stops taking sets (a check
    stopped by a failure, or done with the first set): its `finally` would otherwise run whenever
    the garbage collector gets to it, changing the command's working directory then. What its
    clean-up raises is dropped: no set is taken from it any more, and this may run in a `finally`
    or from the garbage collector, where an error would be a traceback."""
    close = getattr(iterator, "close", None)
    if close is None:
        return
    with contextlib.suppress(*_SCRIPT_FAILURES):
        with _loader_code(f"{what}, closing,", state):
            close()
