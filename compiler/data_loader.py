"""--data-loader-script FILE.py[:FUNC]: feed sets from a user's Python function (Polygraphy's
convention: FUNC, default load_data, returns or yields dicts of input name to array; each dict is
one iteration). Feed sets come out one at a time, checked against the model's inputs, and every
failure of the script is one line naming it (and the iteration)."""
from __future__ import annotations

from typing import Any, Callable

import contextlib
import hashlib
import os
import sys
import importlib.util
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


def _where(exc: BaseException, path: Path) -> str:
    """' (line N)' of the deepest frame of the traceback inside the script, if any."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    if isinstance(exc, SyntaxError) and exc.lineno:
        lines.append(exc.lineno)
    return f" (line {lines[-1]})" if lines else ""


def _failure(exc: BaseException, path: Path) -> str:
    message = brief(str(exc))
    return f"{type(exc).__name__}{': ' + message if message else ''}{_where(exc, path)}"


def load_function(spec: str) -> "tuple[Callable[[], object], str, Path]":
    """The script's function, or DmlLowerError naming the script."""
    path, function = parse_spec(spec)
    what = f"data loader script {str(path)!r}"
    regular_file(path, what, "a Python script")       # and an input no output may replace
    resolved = path.resolve()
    name = "dml_lower_data_loader_" + hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    module_spec = importlib.util.spec_from_file_location(name, resolved)
    if module_spec is None or module_spec.loader is None:      # a suffix importlib has no loader for
        raise DmlLowerError(f"{what} is not Python source by its name: call it FILE.py")
    with _kept_streams(f"{what}, loading,"):
        try:
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        except _SCRIPT_FAILURES as exc:  # whatever the user's code raises, said in one line
            raise DmlLowerError(f"{what} failed to load: {_failure(exc, resolved)}") from None
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
    types, ranks, fixed dimensions); the script runs lazily, as the sets are consumed."""
    from onnx_dml_lowering.runtime.feeds import check_feeds
    func, what, resolved = load_function(spec)
    function = parse_spec(spec)[1]
    with _kept_streams(f"{what}: {function}()"):
        try:
            produced = func()
        except _SCRIPT_FAILURES as exc:
            raise DmlLowerError(f"{what}: {function}() raised {_failure(exc, resolved)}") from None
    if isinstance(produced, Mapping):
        produced = [produced]
    if not isinstance(produced, Iterable) or isinstance(produced, (str, bytes)):
        raise DmlLowerError(f"{what}: {function}() returned {type(produced).__name__}, not feed dicts "
                            "(return a dict, a list of dicts or yield dicts)")
    iterator = iter(produced)
    index = 0
    while True:
        with _kept_streams(f"{what}, iteration #{index}: {function}()"):
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
