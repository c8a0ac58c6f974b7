"""Backend names: the one parser of the text a user gives (`--backends`, the Python API, a saved
file's labels) into a `BackendName`, and everything decided by what a backend is.

    cpu                 the lowered graph, DirectML operators on the numpy emulator
    ort                 the lowered graph, each DirectML operator on onnxruntime (stand-ins)
    dml                 the lowered graph, each DirectML operator on Microsoft's DirectML.dll
    ort-cpu, ort-dml,   the model as the user ships it on that onnxruntime execution provider
    ort:<ProviderName>
    saved:<LABEL>       outputs saved earlier (saved_outputs.py), read back: saved:oracle,
                        saved:<BACKEND> (a check's), saved:run-<BACKEND> (a run's), saved:outputs

Everything else asks a BackendName what it is (`kind`, `lowering`, `provider`, `from_dml_ep`);
no other module compares a backend's text with a literal (tests/test_kinds_are_types.py).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

from onnx_dml_lowering.ir import DmlLowerError

__all__ = ["BackendKind", "BackendName", "CHOICES", "Lowering", "SavedBy", "as_backend_name", "parse_backend",
           "provider_backend"]


class BackendKind(str, enum.Enum):
    """What a backend is. A str enum: it equals the word BackendName.kind always was ("lowered",
    "provider", "saved"), for callers of the Python API; our code compares members."""
    LOWERED = "lowered"        # our lowered graph (Lowering says on what)
    PROVIDER = "provider"      # the model itself on an onnxruntime execution provider
    SAVED = "saved"            # outputs saved earlier, read back


class Lowering(enum.Enum):
    """What runs a lowered backend's DirectML operators."""
    EMULATOR = "cpu"           # the numpy emulator
    STAND_INS = "ort"          # each operator's minimal ONNX sub-graph on onnxruntime
    DIRECTML = "dml"           # Microsoft's DirectML.dll (runtime/directml)


class SavedBy(enum.Enum):
    """Who saved a saved:<LABEL> backend's outputs."""
    ORACLE = "oracle"          # check --save-outputs, the oracle's outputs
    CHECK = "check"            # check --save-outputs, one backend's
    RUN = "run"                # run --backend B --save-outputs
    UNKNOWN = "outputs"        # a file that does not say


LOWERED_DESCRIPTIONS = {
    Lowering.EMULATOR: "lowered graph, DirectML operators on the numpy emulator",
    Lowering.STAND_INS: "lowered graph, DirectML operators on onnxruntime CPUExecutionProvider",
    Lowering.DIRECTML: "lowered graph, DirectML operators on DirectML.dll",
}
# Provider backends named without PROVIDER_PREFIX.
PROVIDER_ALIASES = {"ort-cpu": "CPUExecutionProvider", "ort-dml": "DmlExecutionProvider"}
PROVIDER_PREFIX = "ort:"
SAVED_PREFIX = "saved:"
RUN_PREFIX = "run-"
DML_PROVIDER = "DmlExecutionProvider"
CHOICES = ", ".join([*(k.value for k in Lowering), *PROVIDER_ALIASES, PROVIDER_PREFIX + "<ProviderName>"])


@dataclass(frozen=True, eq=False)
class BackendName:
    """A backend name parsed (parse_backend): `text` as the user wrote it (what reports show). It
    equals (and hashes as) that text, so a caller of the Python API that keys reports by the
    names it gave ("cpu", "ort-cpu") keeps working; our code asks the object instead."""
    text: str
    kind: BackendKind
    lowering: "Lowering | None" = None      # LOWERED: what runs its operators
    provider: str = ""                      # PROVIDER: onnxruntime's full provider name
    saved_by: "SavedBy | None" = None       # SAVED: who saved it
    source: str = ""                        # SAVED by CHECK / RUN: the backend that computed it

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BackendName):
            return self.text == other.text
        return isinstance(other, str) and self.text == other

    def __hash__(self) -> int:
        return hash(self.text)

    @property
    def is_lowered(self) -> bool:
        return self.kind is BackendKind.LOWERED

    @property
    def is_provider(self) -> bool:
        return self.kind is BackendKind.PROVIDER

    @property
    def is_saved(self) -> bool:
        return self.kind is BackendKind.SAVED

    @property
    def from_dml_ep(self) -> bool:
        """Results of onnxruntime's DML EP: run here, or saved by a check / run on Windows and
        loaded (saved:ort-dml, saved:run-ort-dml, saved:ort:DmlExecutionProvider)."""
        if self.is_saved:
            source = _quiet_parse(self.source)
            return source is not None and source.from_dml_ep
        return self.provider == DML_PROVIDER

    @property
    def from_provider(self) -> bool:
        """Results of the model on an onnxruntime execution provider: run here, or saved by a check
        / run and loaded (saved:ort-cpu, saved:run-ort-cpu): its known deviations are named alike."""
        if self.is_saved:
            source = _quiet_parse(self.source)
            return source is not None and source.is_provider
        return self.is_provider

    @property
    def description(self) -> str:
        if self.lowering is not None:
            return LOWERED_DESCRIPTIONS[self.lowering]
        if self.is_provider:
            return f"the model as shipped on onnxruntime {self.provider}"
        return _SAVED_DESCRIPTIONS[self.saved_by or SavedBy.UNKNOWN].format(source=self.source)


_SAVED_DESCRIPTIONS = {
    SavedBy.ORACLE: "the oracle's outputs saved by check --save-outputs (--load-outputs)",
    SavedBy.RUN: "outputs saved by run --backend {source} --save-outputs (--load-outputs)",
    SavedBy.UNKNOWN: "outputs loaded from a file that does not say who saved them (--load-outputs)",
    SavedBy.CHECK: "outputs of backend {source} saved by check --save-outputs (--load-outputs)",
}


def parse_backend(name: str) -> BackendName:
    """The one decoder of backend names; an unknown one is one line listing the known ones."""
    lowering = next((k for k in Lowering if k.value == name), None)
    if lowering is not None:
        return BackendName(name, BackendKind.LOWERED, lowering=lowering)
    if name in PROVIDER_ALIASES:
        return BackendName(name, BackendKind.PROVIDER, provider=PROVIDER_ALIASES[name])
    if name.startswith(PROVIDER_PREFIX):
        provider = name[len(PROVIDER_PREFIX):].strip()
        if not provider:
            raise DmlLowerError(f"backend {name!r} names no execution provider (e.g. "
                                f"{PROVIDER_PREFIX}OpenVINOExecutionProvider)")
        return BackendName(name, BackendKind.PROVIDER, provider=provider)
    if name.startswith(SAVED_PREFIX):
        return _saved(name)
    raise DmlLowerError(f"unknown backend {name!r}{_hint(name)}; choose from {CHOICES}")


def _saved(name: str) -> BackendName:
    label = name[len(SAVED_PREFIX):]
    by = {SavedBy.ORACLE.value: SavedBy.ORACLE, SavedBy.UNKNOWN.value: SavedBy.UNKNOWN}.get(label)
    if by is not None:
        return BackendName(name, BackendKind.SAVED, saved_by=by)
    if label.startswith(RUN_PREFIX):
        return BackendName(name, BackendKind.SAVED, saved_by=SavedBy.RUN, source=label[len(RUN_PREFIX):])
    return BackendName(name, BackendKind.SAVED, saved_by=SavedBy.CHECK, source=label)


def _hint(name: str) -> str:
    """For ort-<provider> as Polygraphy spells it (ort-cuda, ort-trt): onnxruntime's name for it."""
    from .ort.providers import backend_hint
    spelt = "ort-"
    return backend_hint(name[len(spelt):]) if name.lower().startswith(spelt) else ""


def _quiet_parse(name: str) -> "BackendName | None":
    try:
        return parse_backend(name)
    except DmlLowerError:
        return None


BackendLike = Union[str, BackendName]


def as_backend_name(name: BackendLike) -> BackendName:
    """A name the Python API was given as text parsed here, once; a BackendName as it is."""
    return name if isinstance(name, BackendName) else parse_backend(name)


def provider_backend(provider: str) -> BackendName:
    """The backend that runs the model on onnxruntime provider `provider` (full name)."""
    return BackendName(PROVIDER_PREFIX + provider, BackendKind.PROVIDER, provider=provider)


def is_provider(name: BackendLike) -> bool:
    """`name` runs the model on an onnxruntime execution provider (an unknown name is not one)."""
    parsed = name if isinstance(name, BackendName) else _quiet_parse(name)
    return parsed is not None and parsed.is_provider


def describe_backend(name: BackendLike) -> str:
    return as_backend_name(name).description
