"""Outputs saved to an .npz (`check --save-outputs`, `run --save-outputs`) and read back
(`check --load-outputs`, `--oracle F.npz`), with two reserved entries beside the outputs:

- FEEDS_KEY: a SHA-256 of the feeds the outputs were computed from (names, shapes, bytes), so a
  file compared with results of other feeds is refused instead of reported as a mismatch;
- SAVED_BY_KEY: who saved it, "check" or "run:<backend>", which names the loaded results;
- CONTENTS_KEY: what it holds, as JSON: {"outputs": [the outputs saved], "left_out": {BACKEND:
  {OUTPUT: why}}}: each group of the file (the oracle's OUTPUT entries, a run's, each BACKEND:OUTPUT
  group; "" for the plain entries) holds every one of "outputs" or records why its backend did not
  compute it (its check or run said it not compared). Read back, a left-out output is UNSUPPORTED
  with the saved reason, as live; one neither held nor recorded is a damaged or edited file (one
  line), never a MISMATCH.

Labels of loaded results: `saved:<BACKEND>` for a check file's BACKEND:OUTPUT entries,
`saved:oracle` for its OUTPUT entries (the oracle's outputs there), `saved:run-<backend>` for a
run file, `saved:outputs` for a file without SAVED_BY_KEY (older or made by hand).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display

from .backend_names import SAVED_PREFIX
from .npz import load_npz
from .output_target import set_path  # noqa: F401  (where feed set #i goes: output_target, light)

FEEDS_KEY = "__feeds_sha256__"
SAVED_BY_KEY = "__saved_by__"
CONTENTS_KEY = "__contents__"
RESERVED = (FEEDS_KEY, SAVED_BY_KEY, CONTENTS_KEY)
PREFIX = SAVED_PREFIX        # the labels of loaded results are backend names (backend_names.py)


def wrote_line(path: str, count: int) -> str:
    """What --save-inputs / --save-outputs wrote, in one line."""
    if count <= 1:
        return f"wrote {display(path)}"
    if set_path(path, 1) == path:
        return f"wrote {display(path)} (feed sets #0-#{count - 1}, one after another)"
    return (f"wrote {display(path)} and {display(set_path(path, 1))}"
            + (f" .. {display(set_path(path, count - 1))}" if count > 2 else "")
            + f" (feed sets #0-#{count - 1}, one file each)")


def load_golden(path: str, what: str = "oracle file") -> "dict[str, np.ndarray]":
    return load_npz(path, what)


def feeds_fingerprint(feeds: Mapping[str, object]) -> str:
    """SHA-256 over each feed's name, shape and bytes (native byte order, C order), by name."""
    digest = hashlib.sha256()
    for name in sorted(feeds):
        array = np.asarray(feeds[name])
        array = np.ascontiguousarray(array.astype(array.dtype.newbyteorder("="), copy=False))
        digest.update(f"{name}\0{list(array.shape)}\0{array.dtype.itemsize}\0".encode())
        flat = array.reshape(-1).view(np.uint8)
        for start in range(0, flat.size, 1 << 24):     # read in place (a mapped weight is not copied)
            digest.update(flat[start:start + (1 << 24)])  # type: ignore[arg-type]  # numpy stubs: a Buffer only for 3.12+ targets
    return digest.hexdigest()


def metadata(feeds: Mapping[str, object], saved_by: str, outputs: "Iterable[str] | None" = None,
             left_out: "Mapping[str, Mapping[str, str]] | None" = None) -> "dict[str, np.ndarray]":
    """The reserved entries to save beside the outputs: with `outputs` (the outputs saved) also the
    record of what the file holds, `left_out` by backend ("" the plain entries' backend): the
    outputs it did not compute itself and why."""
    meta = {FEEDS_KEY: np.array(feeds_fingerprint(feeds)), SAVED_BY_KEY: np.array(saved_by)}
    if outputs is not None:
        record = {"outputs": list(outputs),
                  "left_out": {backend: dict(why) for backend, why in (left_out or {}).items() if why}}
        meta[CONTENTS_KEY] = np.array(json.dumps(record))       # ASCII: names escaped
    return meta


def saved_file(*groups: "tuple[Callable[[str], str], Mapping[str, np.ndarray]]") -> "dict[str, np.ndarray]":
    """The entries of a saved-outputs file from (describe, {key: value}) groups, or one line naming
    the two values one key would hold (a model output named 'cpu:y' beside backend cpu's 'y', or
    one named like the file's metadata): a file holds each key once, so one would silently go."""
    out: "dict[str, np.ndarray]" = {}
    owner: "dict[str, str]" = {}
    for describe, entries in groups:
        for key, value in entries.items():
            if key in out:
                raise DmlLowerError(f"--save-outputs: {owner[key]} and {describe(key)} would both be saved as "
                                    f"{key!r}, and a file holds each name once (rename the output, or leave "
                                    "--save-outputs out)")
            out[key], owner[key] = value, describe(key)
    return out


def split_metadata(data: Mapping[str, np.ndarray]) -> "tuple[dict[str, np.ndarray], dict[str, str]]":
    """(the outputs, the reserved entries as text)."""
    outputs = {k: v for k, v in data.items() if k not in RESERVED}
    return outputs, {k: str(np.asarray(data[k])) for k in RESERVED if k in data}


def verify_feeds(option: str, path: str, meta: Mapping[str, str], feeds: Mapping[str, object]) -> None:
    """A file saved from other feeds than these is a usage error (a file without a fingerprint
    is taken as it is)."""
    saved = meta.get(FEEDS_KEY)
    if saved is not None and saved != feeds_fingerprint(feeds):
        raise DmlLowerError(f"{option} {path!r} was saved from other feeds than these (their fingerprints "
                            "differ): pass the --inputs it was saved with")


@dataclass(frozen=True)
class _Contents:
    """A saved file's record of what it holds (CONTENTS_KEY), read back."""
    outputs: "tuple[str, ...]"
    left_out: "dict[str, dict[str, str]]"

    @staticmethod
    def read(path: str, text: "str | None") -> "_Contents | None":
        if text is None:
            return None
        try:
            record = json.loads(text)
            outputs = tuple(record["outputs"])
            left_out = {str(b): {str(o): str(why) for o, why in entries.items()}
                        for b, entries in record["left_out"].items()}
            if not all(isinstance(o, str) for o in outputs):
                raise TypeError
        except (ValueError, KeyError, TypeError, AttributeError):
            raise DmlLowerError(f"outputs file '{display(path)}': its {CONTENTS_KEY!r} entry is not the record "
                                "--save-outputs writes: the file was damaged or edited (save it again)") from None
        return _Contents(outputs, left_out)


@dataclass
class LoadedOutputs:
    """Results read by `check --load-outputs`, by label (see the module docstring); `left_out`, by
    label: the outputs the file records its backend did not compute itself, and why."""
    by_backend: "dict[str, dict[str, np.ndarray]]"
    path: str = ""
    meta: "dict[str, str]" = field(default_factory=dict)
    left_out: "dict[str, dict[str, str]]" = field(default_factory=dict)
    entries: "dict[str, np.ndarray]" = field(default_factory=dict, repr=False)   # as in the file

    @staticmethod
    def load(path: str) -> "LoadedOutputs":
        data, meta = split_metadata(load_golden(path, "outputs file"))
        loaded = LoadedOutputs({}, path, meta, entries=data)
        loaded.bind(())
        return loaded

    @property
    def _plain(self) -> str:
        """The label of the file's plain OUTPUT entries."""
        saved_by = self.meta.get(SAVED_BY_KEY, "")
        return ("oracle" if saved_by == "check" else
                f"run-{saved_by[4:]}" if saved_by.startswith("run:") else "outputs")

    def bind(self, names: "Sequence[str]") -> None:
        """The entries grouped by label, BACKEND:OUTPUT split at an output the file records or the
        model (`names`: the outputs compared) has; a group short of an output the file says it
        holds is one line naming the file and the entry (a damaged or edited file)."""
        contents = _Contents.read(self.path, self.meta.get(CONTENTS_KEY))
        known = (set(contents.outputs) if contents is not None else set()) | set(names)
        saved_by = self.meta.get(SAVED_BY_KEY, "")
        groups: "dict[str, dict[str, np.ndarray]]" = {}
        for key, value in self.entries.items():
            backend, output = _split_key(key, self.entries, known, bool(saved_by))
            groups.setdefault(backend, {})[output] = value
        groups.setdefault("", {})
        if contents is not None:
            self._claimed(groups, contents.outputs, contents.left_out)
        elif saved_by == "check":        # an older check file: the oracle's value of every output it holds
            self._claimed({"": groups[""]}, [o for b, held in groups.items() if b for o in held], {})
        self.by_backend = {PREFIX + (b or self._plain): held for b, held in groups.items() if b or held}
        self.left_out = {PREFIX + (b or self._plain): dict(why) for b, why in (contents.left_out if contents
                                                                               else {}).items()}

    def _claimed(self, groups: "Mapping[str, Mapping[str, object]]", outputs: "Sequence[str]",
                 left_out: "Mapping[str, Mapping[str, str]]") -> None:
        """Each group holds every output of `outputs` or records why its backend left it out."""
        for backend, held in groups.items():
            missing = next((o for o in outputs if o not in held and o not in left_out.get(backend, {})), None)
            if missing is not None:
                key = f"{backend}:{missing}" if backend else missing
                whose = (f"backend {display(backend)}'s '{display(missing)}'" if backend else "the oracle's"
                         if self._plain == "oracle" else f"backend {display(self._plain[4:])}'s")
                raise DmlLowerError(f"outputs file '{display(self.path)}' has no output '{display(key)}' ({whose}), "
                                    "which the file says it holds: it was damaged or edited (save it again)")

    def results(self, label: str, names: "Sequence[str]") -> "tuple[dict[str, np.ndarray], dict[str, str]]":
        """(label's outputs, the outputs of `names` not compared and why): each the file records
        left out, with its saved reason, or holds no value of."""
        held = self.by_backend.get(label, {})
        left = dict(self.left_out.get(label, {}))
        for name in names:
            if name not in held and name not in left:
                left[name] = f"the saved file '{display(self.path)}' holds no value of it"
        return held, left


def _split_key(key: str, keys: "Mapping[str, object]", known: "set[str]", saved_by: bool) -> "tuple[str, str]":
    """(backend, output) of a saved key: ('', key) where the key is an output the file records or
    the model has (`known`); else BACKEND:OUTPUT where OUTPUT is such an output or a key of the file
    (a check file holds the oracle's value of every output it holds a backend's of), the longest
    such; else a plain output ('', key), whatever colons its name has (tf2onnx's 'y:0'). A file that
    does not say who saved it (older, or made by hand) splits at the last colon as before."""
    if key in known:            # an output itself (a BACKEND:OUTPUT of that name is refused on saving)
        return "", key
    # each colon, leftmost first: the longest output after a non-empty backend name
    for at in (i for i, c in enumerate(key) if c == ":" and i > 0):
        output = key[at + 1:]
        if output in known or output in keys:
            return key[:at], output
    if saved_by:
        return "", key
    backend, sep, output = key.rpartition(":")
    return (backend, output) if sep else ("", key)
