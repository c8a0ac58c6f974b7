"""Per-output comparison of a backend's results with the oracle's: shape and dtype first, then
exact equality for integers and bool, atol/rtol for floats (NaN must match NaN). A mismatch
carries how many elements differ of how many, the first differing index and its two values,
and max / mean absolute and relative errors (relative ones only where the expected value is
not 0)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
import numpy as np


@dataclass
class OutputResult:
    output: str
    backend: str
    status: str      # match | mismatch | deviation (named, known) | unsupported | nondeterministic
    expected_shape: "list[int]"
    actual_shape: "list[int] | None"
    expected_dtype: str
    actual_dtype: "str | None"
    detail: str = ""
    max_abs_error: "float | None" = None
    max_rel_error: "float | None" = None
    first_mismatch: "list[int] | None" = None
    mismatches: int = 0
    iteration: int = 0
    # added after the keys above (JSON readers of those keep working)
    elements: int = 0                              # how many elements were compared
    mean_abs_error: "float | None" = None
    mean_rel_error: "float | None" = None          # over the elements where it is defined
    rel_undefined: int = 0                         # elements differing from an expected 0

    def to_dict(self) -> dict:
        return asdict(self)


def compare(output: str, backend: str, expected: np.ndarray, actual: "np.ndarray | None",
            atol: float, rtol: float) -> OutputResult:
    expected = np.asarray(expected)
    result = OutputResult(output, backend, "match", list(expected.shape), None, str(expected.dtype), None)
    if actual is None:
        result.status, result.detail = "mismatch", "output missing"
        return result
    actual = np.asarray(actual)
    result.actual_shape, result.actual_dtype = list(actual.shape), str(actual.dtype)
    result.elements = int(expected.size)
    if actual.shape != expected.shape:
        result.status, result.detail = "mismatch", f"shape {list(actual.shape)} != expected {list(expected.shape)}"
        return result
    if actual.dtype != expected.dtype:
        result.status, result.detail = "mismatch", f"dtype {actual.dtype} != expected {expected.dtype}"
        return result
    if expected.dtype.kind == "f":
        e64, a64 = expected.astype(np.float64), actual.astype(np.float64)
        both_nan = np.isnan(e64) & np.isnan(a64)
        with np.errstate(invalid="ignore", over="ignore"):
            # NaN on one side only is an infinite error (NaN in the figures would hide it)
            diff = np.where(both_nan | (e64 == a64), 0.0,
                            np.where(np.isnan(e64) | np.isnan(a64), np.inf, np.abs(a64 - e64)))
            bad = ~both_nan & ~(e64 == a64) & ~(diff <= atol + rtol * np.abs(e64))
        _errors(result, diff, e64)
    else:
        bad = actual != expected
        if np.any(bad) and expected.dtype.kind in "iu":
            _errors(result, np.abs(actual.astype(np.float64) - expected.astype(np.float64)), expected.astype(np.float64))
    if np.any(bad):
        result.status = "mismatch"
        result.mismatches = int(np.count_nonzero(bad))
        index = np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape) if bad.ndim else ()
        result.first_mismatch = [int(i) for i in index]
        result.detail = (f"{result.mismatches} of {bad.size} elements differ; first at {result.first_mismatch}: "
                         f"got {value_text(actual[index])}, expected {value_text(expected[index])}")
    return result


def value_text(value) -> str:
    """One element as a person writes it: 1.5, -0.0, nan, 7 (never np.float32(1.5))."""
    value = np.asarray(value)
    return str(value.item()) if value.dtype.kind in "iub" else str(value)


def _errors(result: OutputResult, diff: np.ndarray, expected: np.ndarray) -> None:
    """Max / mean absolute error over every element; relative error only where it is defined: an
    element equal to the oracle's has 0, one that differs from an expected 0 has none (counted
    in `rel_undefined`, left out of the relative figures)."""
    if not diff.size:
        return
    finite = ~np.isnan(diff)
    result.max_abs_error = float(np.max(diff[finite])) if finite.any() else float("nan")
    with np.errstate(invalid="ignore", over="ignore"):
        result.mean_abs_error = float(np.mean(diff[finite])) if finite.any() else float("nan")
        undefined = (diff != 0) & (expected == 0)
        defined = finite & ~undefined
        rel = np.where(diff == 0, 0.0, diff / np.where(expected == 0, 1.0, np.abs(expected)))[defined]
    result.rel_undefined = int(np.count_nonzero(undefined))
    if rel.size and not (result.rel_undefined and not np.any(rel)):   # else every difference is at an expected 0
        result.max_rel_error, result.mean_rel_error = float(np.max(rel)), float(np.mean(rel))


@dataclass
class BackendReport:
    backend: str
    outputs: "list[OutputResult]" = field(default_factory=list)
    error: str = ""                    # the backend crashed: status ERROR, a failure
    seconds: float = 0.0               # wall time of its runs (all iterations)
    unsupported_nodes: "dict[str, str]" = field(default_factory=dict)
    fed_from_oracle: "list[str]" = field(default_factory=list)   # values of unsupported nodes fed in
    node_providers: "dict[str, str] | None" = None
    placement_notes: "list[str]" = field(default_factory=list)   # provider fallbacks, folded nodes
    values: "dict" = field(default_factory=dict, repr=False)   # its outputs for the first feed set
    ran: str = ""                      # what it ran (a provider: the file as shipped, or a modified copy)
    # node -> why the backend did not run it itself (cut out, or run by another provider): PARTIAL
    partial: "dict[str, str]" = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.error and all(o.status != "mismatch" for o in self.outputs)

    @property
    def not_compared(self) -> "list[str]":
        """Outputs it did not produce itself (UNSUPPORTED), each once."""
        return list(dict.fromkeys(o.output for o in self.outputs if o.status == "unsupported"))

    @property
    def is_partial(self) -> bool:
        """It ran only part of the model: a node cut out or run elsewhere, or an output not compared."""
        return bool(self.partial or self.not_compared)

    @property
    def status(self) -> str:
        """error | mismatch | partial | ok: what every view (text, JSON, zoo, JUnit) says of it."""
        if self.error:
            return "error"
        if not self.ok:
            return "mismatch"
        return "partial" if self.is_partial else "ok"

    def partial_text(self) -> str:
        """The nodes (and outputs) it did not run itself, in one short clause."""
        parts = []
        if self.partial:
            nodes = list(self.partial)
            shown = ", ".join(nodes[:4]) + (f", ... ({len(nodes)} nodes)" if len(nodes) > 4 else "")
            parts.append(f"node{'s' if len(nodes) > 1 else ''} {shown} not run on it")
        if self.not_compared:
            parts.append(f"output{'s' if len(self.not_compared) > 1 else ''} {', '.join(self.not_compared)} "
                         "not compared")
        return "; ".join(parts)

    def to_dict(self, description: str) -> dict:
        data = {"backend": self.backend, "description": description, "ok": self.ok,
                "status": self.status, "ran": self.ran, "partial": dict(self.partial),
                "not_compared": self.not_compared,
                "error": self.error, "seconds": round(self.seconds, 6),
                "unsupported_nodes": dict(self.unsupported_nodes), "fed_from_oracle": list(self.fed_from_oracle),
                "outputs": [o.to_dict() for o in self.outputs]}
        if self.node_providers is not None:
            data["node_providers"] = dict(self.node_providers)
        if self.placement_notes:
            data["placement_notes"] = list(self.placement_notes)
        return data
