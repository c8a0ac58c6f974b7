"""A conformance suite written whole or not at all: `conformance export` builds it in a temporary
folder on the target's file system (inside the target when that folder exists, beside it
otherwise) and moves it into place only once every file is written. A write that fails part way
(a full disk) removes the temporary folder: the target is as it was (an earlier suite there
intact, a folder that did not exist not made), and the one line says so."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Callable, Iterator

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.runtime.output_target import reason

# The temporary folder's name: an export that was killed leaves one, which the next one ignores
# when it asks whether the target is empty.
STAGING_PREFIX = ".dml-lower-export-"
LAST = "manifest.json"      # moved in last: a folder without it is an export that did not finish


def is_staging(entry: str) -> bool:
    return entry.startswith(STAGING_PREFIX)


@contextlib.contextmanager
def staged_suite(directory: str, clear: "Callable[[str], None]") -> Iterator[str]:
    """`with staged_suite(DIR, clear) as build:` write the whole suite in `build`. On leaving without
    an exception it takes DIR's place: renamed to DIR when DIR did not exist; else `clear(DIR)`
    removes the earlier export's files and the new ones are moved in, the manifest last. On any
    exception `build` is removed and DIR is as it was; a write's failure (OSError, or the writer's
    own line) is one line naming the file as the suite would hold it and saying nothing was left."""
    existed = os.path.isdir(directory)
    made = [] if existed else _make_parents(directory)
    try:
        build = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=directory if existed else os.path.dirname(
            os.path.abspath(directory)))
    except OSError as exc:
        _remove_made(made)
        raise DmlLowerError(f"cannot write the conformance suite to '{display(directory)}': {reason(exc)}") from None
    try:
        yield build
    except (OSError, DmlLowerError) as exc:
        shutil.rmtree(build, ignore_errors=True)
        _remove_made(made)
        raise DmlLowerError(_failed(exc, build, directory, existed)) from None
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)        # Ctrl-C: nothing half-made either
        _remove_made(made)
        raise
    try:            # renames on one file system: nothing is written any more
        _move_in(build, directory, existed, clear)
    except OSError as exc:
        shutil.rmtree(build, ignore_errors=True)
        raise DmlLowerError(f"cannot move the finished conformance suite into '{display(directory)}': {reason(exc)}; "
                            "the suite there is incomplete: export it again") from None


def _failed(exc: "OSError | DmlLowerError", build: str, directory: str, existed: bool) -> str:
    """The one line of a suite that could not be written: the writer's line with the file named
    where the suite would hold it, and what was left (nothing)."""
    line = (str(exc).replace(display(build), display(directory)) if isinstance(exc, DmlLowerError)
            else f"cannot write the conformance suite to '{display(directory)}': {reason(exc)}")
    left = ("the folder and the suite in it are as they were" if existed
            else f"'{display(directory)}' was not made")
    return f"{line}; nothing was left: {left}"


def _make_parents(directory: str) -> "list[str]":
    """The folders above `directory` that do not exist, made (outermost first) and returned, so a
    failed export removes them again."""
    missing = []
    parent = os.path.dirname(os.path.abspath(directory))
    while not os.path.exists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    made = []
    try:
        for folder in reversed(missing):
            os.mkdir(folder)
            made.append(folder)
    except OSError as exc:
        _remove_made(made)
        raise DmlLowerError(f"cannot write the conformance suite to '{display(directory)}': {reason(exc)}") from None
    return made


def _remove_made(made: "list[str]") -> None:
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def _move_in(build: str, directory: str, existed: bool, clear: "Callable[[str], None]") -> None:
    """The finished suite in `build` into `directory`."""
    if not existed:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(build, 0o777 & ~umask)         # mkdtemp's folder is private; the suite's is not
        os.rename(build, directory)
        return
    clear(directory)
    entries = sorted(os.listdir(build), key=lambda e: e == LAST)
    for entry in entries:
        _merge(os.path.join(build, entry), os.path.join(directory, entry))
    os.rmdir(build)


def _merge(source: str, target: str) -> None:
    """`source` moved to `target`; into a folder that is there (a case folder holding a file the
    user added), entry by entry. A link at a name the suite writes goes itself, never followed."""
    if os.path.islink(target):
        os.unlink(target)
    if os.path.isdir(source) and os.path.isdir(target):
        for entry in os.listdir(source):
            _merge(os.path.join(source, entry), os.path.join(target, entry))
        os.rmdir(source)
        return
    os.replace(source, target)
