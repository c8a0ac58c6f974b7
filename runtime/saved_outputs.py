"""Outputs saved to an .npz (`check --save-outputs`, `run --save-outputs`) and read back
(`check --load-outputs`, `--oracle F.npz`), with two reserved entries beside the outputs:

- FEEDS_KEY: a SHA-256 of the feeds the outputs were computed from (names, shapes, bytes), so a
  file compared with results of other feeds is refused instead of reported as a mismatch;
- SAVED_BY_KEY: who saved it, "check" or "run:<backend>", which names the loaded results;
- CONTENTS_KEY: what it holds, as JSON: {"outputs": [the outputs saved], "left_out": {BACKEND:
  {OUTPUT: why}}}: each group of the file (the oracle's OUTPUT entries, a run's, each BACKEND:OUTPUT
  group; "" for the plain entries) holds every one of "outputs" or records why its backend did not
  compute it (its check or run said it not compared). Read back, a left-out output is UNSUPPORTED
  with the saved reason, as live; one neither held nor recorded, or both held and recorded left out,
  is a damaged or edited file (one line), never a MISMATCH.

Every entry must name a value of the model (`check --load-outputs` and `--oracle F.npz` alike): an
output compared, or an intermediate value, which `--outputs` and `--localize` compare: an entry
naming none is one line, not silently skipped (a file of another model would otherwise compare
nothing and pass), and so is a `--load-outputs` file holding no output.

Labels of loaded results: `saved:<BACKEND>` for a check file's BACKEND:OUTPUT entries,
`saved:oracle` for its OUTPUT entries (the oracle's outputs there), `saved:run-<backend>` for a
run file, `saved:outputs` for a file without SAVED_BY_KEY (older or made by hand).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display, name_list

from .backend_names import SAVED_PREFIX
from .npz import load_npz
from .output_target import set_path  # noqa: F401  (where feed set #i goes: output_target, light)

if TYPE_CHECKING:
    import onnx

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


def verify_golden(path: str, golden: Mapping[str, np.ndarray], meta: Mapping[str, str],
                  model: "onnx.ModelProto", names: "Sequence[str]") -> None:
    """--oracle F.npz read as --load-outputs reads a file (split_metadata's `golden` and `meta`): each
    entry a value of `model` (`names`: the outputs compared) or, in a check file, a backend's
    BACKEND:OUTPUT of one; the file's record kept. Else one line naming the entry (the outputs it
    lacks are GoldenOracle's to say)."""
    LoadedOutputs({}, path, dict(meta), entries=dict(golden), what="oracle file").bind(names, model_values(model))


def model_values(model: "onnx.ModelProto") -> "set[str]":
    """Every value name of the model (inputs, initializers, node outputs, in its bodies too): what
    a saved file may hold beside the outputs compared (--outputs, --localize compare the others)."""
    from onnx_dml_lowering.lowering.onnx_graphs import all_graphs     # onnx: only where a model is read
    values: "set[str]" = set()
    for graph in all_graphs(model):
        values.update(v.name for v in graph.input)
        values.update(i.name for i in graph.initializer)
        values.update(o for node in graph.node for o in node.output if o)
    return values


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
    what: str = "outputs file"                  # how messages name the file (--oracle: "oracle file")

    @staticmethod
    def load(path: str) -> "LoadedOutputs":
        data, meta = split_metadata(load_golden(path, "outputs file"))
        if not data:
            raise DmlLowerError(f"outputs file '{display(path)}' holds no outputs, so nothing would be compared "
                                "(--save-outputs writes the oracle's as OUTPUT and each backend's as BACKEND:OUTPUT)")
        loaded = LoadedOutputs({}, path, meta, entries=data)
        loaded.bind(None)
        return loaded

    @property
    def _plain(self) -> str:
        """The label of the file's plain OUTPUT entries."""
        saved_by = self.meta.get(SAVED_BY_KEY, "")
        return ("oracle" if saved_by == "check" else
                f"run-{saved_by[4:]}" if saved_by.startswith("run:") else "outputs")

    def bind(self, names: "Sequence[str] | None", values: "Collection[str]" = ()) -> None:
        """The entries grouped by label, BACKEND:OUTPUT split at an output the file records or the
        model (`names`: the outputs compared, `values`: its other values; None: not known yet)
        has. One line naming the file and the entry: a group short of an output the file says it
        holds, or holding one it says its backend left out (a damaged or edited file), an entry for
        no value of the model."""
        contents = _Contents.read(self.path, self.meta.get(CONTENTS_KEY))
        known = (set(contents.outputs) if contents is not None else set()) | set(names or ()) | set(values)
        saved_by = self.meta.get(SAVED_BY_KEY, "")
        groups: "dict[str, dict[str, np.ndarray]]" = {}
        for key, value in self.entries.items():
            backend, output = _split_key(key, self.entries, known, bool(saved_by))
            groups.setdefault(backend, {})[output] = value
        groups.setdefault("", {})
        if names is not None:
            self._compared(groups, names, values)
        if contents is not None:
            self._left_out_but_held(groups, contents.left_out)
            self._claimed(groups, contents.outputs, contents.left_out)
        elif saved_by == "check":        # an older check file: the oracle's value of every output it holds
            self._claimed({"": groups[""]}, [o for b, held in groups.items() if b for o in held], {})
        self.by_backend = {PREFIX + (b or self._plain): held for b, held in groups.items() if b or held}
        self.left_out = {PREFIX + (b or self._plain): dict(why) for b, why in (contents.left_out if contents
                                                                               else {}).items()}

    def _whose(self, backend: str, output: str) -> str:
        """An entry as messages name it: its key and whose value it is."""
        key = f"{backend}:{output}" if backend else output
        whose = (f"backend {display(backend)}'s '{display(output)}'" if backend else "the oracle's"
                 if self._plain == "oracle" else f"backend {display(self._plain[4:])}'s"
                 if self._plain.startswith("run-") else "a plain entry")
        return f"'{display(key)}' ({whose})"

    def _compared(self, groups: "Mapping[str, Mapping[str, object]]", names: "Sequence[str]",
                  values: "Collection[str]") -> None:
        """Every entry is a value of the model: another model's file would otherwise be skipped
        without a word (an intermediate value is kept for --outputs and --localize)."""
        for backend, held in groups.items():
            output = next((o for o in held if o not in names and o not in values), None)
            if output is not None:
                key = f"{backend}:{output}" if backend else output
                raise DmlLowerError(
                    f"{self.what} '{display(self.path)}' holds '{display(key)}', which is no value of the model "
                    f"nor a backend's value of one (its outputs: {name_list(list(names), noun='outputs')}): "
                    "the file is from another model, or was edited")

    def _left_out_but_held(self, groups: "Mapping[str, Mapping[str, object]]",
                           left_out: "Mapping[str, Mapping[str, str]]") -> None:
        """A value the file both holds and records its backend did not compute is a contradiction."""
        for backend, held in groups.items():
            output = next((o for o in held if o in left_out.get(backend, {})), None)
            if output is not None:
                raise DmlLowerError(f"{self.what} '{display(self.path)}' holds {self._whose(backend, output)}, which "
                                    "the file also says that backend left out: it was damaged or edited (save it again)")

    def _claimed(self, groups: "Mapping[str, Mapping[str, object]]", outputs: "Sequence[str]",
                 left_out: "Mapping[str, Mapping[str, str]]") -> None:
        """Each group holds every output of `outputs` or records why its backend left it out."""
        for backend, held in groups.items():
            missing = next((o for o in outputs if o not in held and o not in left_out.get(backend, {})), None)
            if missing is not None:
                raise DmlLowerError(f"{self.what} '{display(self.path)}' has no output {self._whose(backend, missing)}, "
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
