"""Which folders of a suite are its cases, for `conformance run`: nothing that looks like a case is
passed over in silence.

- A folder holding `model.onnx` (whatever it is: the model reader refuses a link that leads nowhere,
  a directory, a FIFO) is a case.
- A folder holding a case's other content but no `model.onnx` (a `test_data_set_*`, or another
  `*.onnx` such as `Model.onnx`, which onnx_test_runner would take for the model) is a case that
  cannot be run: one line naming it.
- A case the manifest (written by export) lists whose folder is gone, is no folder, or holds no
  `model.onnx`: one line naming it. A suite without a manifest (hand-made) has its folders only.
- An entry that is a link leading nowhere (dangling, a loop) may have been a case: one line.
- Anything else (README.txt, a `notes/` or `.git/` folder holding none of these, a killed export's
  temporary folder) is not a case and is not read.

With --filter only the names the glob matches are looked at. Every case that cannot be run is
named in the one line, the first in full."""
from __future__ import annotations

import fnmatch
import json
import os
import stat
from pathlib import Path
from typing import Sequence

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display, name_list
from onnx_dml_lowering.ir.errors import first_line

from ..frontend import read_regular_file

MANIFEST = "manifest.json"
MODEL = "model.onnx"
DATA_SET = "test_data_set_"
# Every export's manifest holds these (dml_ep_table came later).
KEYS = ("feature_level", "seeds", "cases", "providers")


def not_a_manifest(manifest: object) -> "str | None":
    """Why a manifest.json's JSON is not one conformance export wrote, or None: export's holds
    KEYS, its cases and providers are objects, and each case is named by a folder name."""
    if not isinstance(manifest, dict) or any(k not in manifest for k in KEYS) or \
            not isinstance(manifest["cases"], dict) or not isinstance(manifest["providers"], dict):
        return f"no {', '.join(KEYS)}"
    unsafe = [n for n in manifest["cases"] if n in ("", ".", "..") or "/" in n or "\\" in n or "\0" in n]
    if unsafe:
        return f"case '{display(unsafe[0])}' is not a folder name"
    if not all(isinstance(entry, dict) for entry in [*manifest["cases"].values(), *manifest["providers"].values()]):
        return "a case or provider entry that is not an object"
    return None


def read_manifest(directory: str) -> dict:
    """The suite's manifest, checked, or {} for a suite without one (a hand-made folder). One that
    is not export's is refused: its case list and deviations could not be read."""
    path = os.path.join(directory, MANIFEST)
    if not os.path.lexists(path):
        return {}
    try:
        manifest = json.loads(read_regular_file(Path(path), f"conformance manifest {path!r}"))
    except ValueError as exc:
        raise DmlLowerError(f"conformance manifest {path!r} is not JSON: {first_line(exc)}") from None
    why = not_a_manifest(manifest)
    if why is not None:
        raise DmlLowerError(f"conformance manifest {path!r} is not one conformance export wrote ({why}): its case list "
                            "and deviations cannot be read; move it away to run the folder's cases without it")
    return manifest


def case_names(directory: str, listed: "Sequence[str]", pattern: "str | None") -> "list[str]":
    """The cases of `directory` (`pattern`: those whose name the fnmatch glob matches), sorted;
    `listed`: the manifest's cases. DmlLowerError naming every chosen case that cannot be run."""
    on_list = set(listed)
    names = sorted(set(_entries(directory, f"conformance directory '{display(directory)}'")) | on_list)
    cases, problems = [], []
    for name in names:
        if pattern is not None and not fnmatch.fnmatchcase(name, pattern):
            continue
        is_case, problem = _examine(directory, name, name in on_list)
        if problem is not None:
            problems.append((name, problem))
        elif is_case:
            cases.append(name)
    if problems:
        more = [name for name, _ in problems[1:]]
        also = (f"; {len(more)} more {'case' if len(more) == 1 else 'cases'} cannot be run either: "
                f"{name_list(more, noun='cases')}" if more else "")
        raise DmlLowerError(problems[0][1] + also)
    return cases


def _examine(directory: str, name: str, listed: bool) -> "tuple[bool, str | None]":
    """(whether the entry `name` of the suite is a case, why it cannot be run or None)."""
    folder = os.path.join(directory, name)
    case = f"conformance case '{display(name)}' in '{display(directory)}'"
    on_list = f" ({MANIFEST} lists it)" if listed else ""
    try:
        info = os.stat(folder)
    except OSError as exc:
        if not os.path.lexists(folder):
            return True, (f"conformance case '{display(name)}' that {MANIFEST} lists is missing from "
                          f"'{display(directory)}': the suite is incomplete (copy or export it again)")
        if os.path.islink(folder):
            return True, f"{case} is a symbolic link that leads nowhere ({exc.strerror or exc}){on_list}"
        return True, f"{case} cannot be read: {exc.strerror or exc}{on_list}"
    if not stat.S_ISDIR(info.st_mode):
        return listed, f"{case} is not a folder{on_list}" if listed else None
    entries = _entries(folder, case)
    if MODEL in entries:
        return True, None
    other = sorted(e for e in entries if e.lower().endswith(".onnx"))
    data = sorted(e for e in entries if e.startswith(DATA_SET))
    if other:
        return True, (f"{case} holds '{display(other[0])}' but no {MODEL}: a case's model is read by that "
                      f"exact name{on_list}")
    if data:
        return True, f"{case} holds {display(data[0])} but no {MODEL}: nothing to run{on_list}"
    if listed:
        return True, f"{case} holds no {MODEL}{on_list}"
    return False, None          # notes/, .git/: no case


def _entries(folder: str, what: str) -> "list[str]":
    try:
        return os.listdir(folder)
    except OSError as exc:
        raise DmlLowerError(f"{what} cannot be read: {exc.strerror or exc}") from None
