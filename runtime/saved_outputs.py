"""Outputs saved to an .npz (`check --save-outputs`, `run --save-outputs`) and read back
(`check --load-outputs`, `--oracle F.npz`), with two reserved entries beside the outputs:

- FEEDS_KEY: a SHA-256 of the feeds the outputs were computed from (names, shapes, bytes), so a
  file compared with results of other feeds is refused instead of reported as a mismatch;
- SAVED_BY_KEY: who saved it, "check" or "run:<backend>", which names the loaded results.

Labels of loaded results: `saved:<BACKEND>` for a check file's BACKEND:OUTPUT entries,
`saved:oracle` for its OUTPUT entries (the oracle's outputs there), `saved:run-<backend>` for a
run file, `saved:outputs` for a file without SAVED_BY_KEY (older or made by hand).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display

from .backend_names import SAVED_PREFIX
from .npz import load_npz
from .output_target import set_path  # noqa: F401  (where feed set #i goes: output_target, light)

FEEDS_KEY = "__feeds_sha256__"
SAVED_BY_KEY = "__saved_by__"
RESERVED = (FEEDS_KEY, SAVED_BY_KEY)
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


def metadata(feeds: Mapping[str, object], saved_by: str) -> "dict[str, np.ndarray]":
    """The reserved entries to save beside the outputs."""
    return {FEEDS_KEY: np.array(feeds_fingerprint(feeds)), SAVED_BY_KEY: np.array(saved_by)}


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


@dataclass
class LoadedOutputs:
    """Results read by `check --load-outputs`, by label (see the module docstring)."""
    by_backend: "dict[str, dict[str, np.ndarray]]"
    path: str = ""
    meta: "dict[str, str]" = field(default_factory=dict)

    @staticmethod
    def load(path: str) -> "LoadedOutputs":
        data, meta = split_metadata(load_golden(path, "outputs file"))
        saved_by = meta.get(SAVED_BY_KEY, "")
        plain = ("oracle" if saved_by == "check" else
                 f"run-{saved_by[4:]}" if saved_by.startswith("run:") else "outputs")
        groups: "dict[str, dict[str, np.ndarray]]" = {}
        for key, value in data.items():
            backend, output = _split_key(key, data, known=bool(saved_by))
            groups.setdefault(PREFIX + (backend or plain), {})[output] = value
        return LoadedOutputs(groups, path, meta)


def _split_key(key: str, keys: "Mapping[str, object]", known: bool) -> "tuple[str, str]":
    """(backend, output) of a saved key: BACKEND:OUTPUT where OUTPUT is itself a key of the file (a
    check file holds the oracle's value of every output it holds a backend's of), the longest such;
    else a plain output ('', key), whatever colons its name has (tf2onnx's 'y:0'). A file that does
    not say who saved it (older, or made by hand) splits at the last colon as before."""
    matches = [o for o in keys if o != key and key.endswith(":" + o) and len(key) > len(o) + 1]
    if matches:
        output = max(matches, key=len)
        return key[:len(key) - len(output) - 1], output
    if known:
        return "", key
    backend, sep, output = key.rpartition(":")
    return (backend, output) if sep else ("", key)
