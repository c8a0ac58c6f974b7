"""A conformance suite written whole or not at all: `conformance export` builds it in a temporary
folder on the target's file system (inside the target when that folder exists, beside it
otherwise) and moves it into place only once every file is written. A write that fails part way
(a full disk) removes the temporary folder: the target is as it was (an earlier suite there
intact, a folder that did not exist not made), and the one line says so.

A target that does not exist is made in a folder that must (check_target, before any work): a
missing one is refused as every writer refuses it (runtime/output_target.py), never made: a typo
in it would make a tree of folders anywhere the user can write."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Callable, Iterator

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.runtime.output_target import Unwritable, reason, resolve

# The temporary folder's name: an export that was killed leaves one, which the next one ignores
# when it asks whether the target is empty.
STAGING_PREFIX = ".dml-lower-export-"
LAST = "manifest.json"      # moved in last: a folder without it is an export that did not finish


def is_staging(entry: str) -> bool:
    return entry.startswith(STAGING_PREFIX)


def check_target(directory: str) -> None:
    """DmlLowerError when the suite's folder could not be made where `directory` names it: its
    parent missing, a file, or not writable (the output rules' words), or `directory` a symbolic
    link that leads nowhere (the finished suite would replace the link, not make its target)."""
    if os.path.isdir(directory):
        return
    if os.path.islink(directory):
        raise DmlLowerError(f"conformance directory {directory!r}: cannot write there: it is a symbolic link that "
                            "leads nowhere (dangling, or a loop): give the folder itself")
    try:
        resolve(directory.rstrip(os.sep))        # a new folder's name, as a new file's: its folder must exist
    except Unwritable as exc:
        raise DmlLowerError(f"conformance directory {directory!r}: cannot write there: {exc}") from None


@contextlib.contextmanager
def staged_suite(directory: str, clear: "Callable[[str], None]") -> Iterator[str]:
    """`with staged_suite(DIR, clear) as build:` write the whole suite in `build`. On leaving without
    an exception it takes DIR's place: renamed to DIR when DIR did not exist; else `clear(DIR)`
    removes the earlier export's files and the new ones are moved in, the manifest last. On any
    exception `build` is removed and DIR is as it was; a write's failure (OSError, or the writer's
    own line) is one line naming the file as the suite would hold it and saying nothing was left."""
    existed = os.path.isdir(directory)
    try:            # beside a new DIR: in its folder, which check_target found (a folder gone since: the line)
        build = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=directory if existed else os.path.dirname(
            os.path.abspath(directory)))
    except OSError as exc:
        raise DmlLowerError(f"cannot write the conformance suite to '{display(directory)}': {reason(exc)}") from None
    try:
        yield build
    except (OSError, DmlLowerError) as exc:
        shutil.rmtree(build, ignore_errors=True)
        raise DmlLowerError(_failed(exc, build, directory, existed)) from None
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)        # Ctrl-C: nothing half-made either
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
