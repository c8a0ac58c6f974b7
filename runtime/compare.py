"""Per-output comparison of a backend's results with the oracle's: shape and dtype first, then
exact equality for integers and bool, atol/rtol for floats (NaN must match NaN)."""
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
            diff = np.where(both_nan | (e64 == a64), 0.0, np.abs(a64 - e64))
            bad = ~both_nan & ~(e64 == a64) & ~(diff <= atol + rtol * np.abs(e64))
            rel = np.where(diff == 0, 0.0, diff / np.maximum(np.abs(e64), np.finfo(np.float64).tiny))
        if diff.size:
            result.max_abs_error = float(np.nanmax(diff)) if not np.all(np.isnan(diff)) else float("nan")
            result.max_rel_error = float(np.nanmax(rel)) if not np.all(np.isnan(rel)) else float("nan")
    else:
        bad = actual != expected
    if np.any(bad):
        result.status = "mismatch"
        result.mismatches = int(np.count_nonzero(bad))
        index = np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape) if bad.ndim else ()
        result.first_mismatch = [int(i) for i in index]
        result.detail = (f"{result.mismatches} of {bad.size} elements differ; first at {result.first_mismatch}: "
                         f"got {actual[index]!r}, expected {expected[index]!r}")
    return result


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

    @property
    def ok(self) -> bool:
        return not self.error and all(o.status != "mismatch" for o in self.outputs)

    def to_dict(self, description: str) -> dict:
        data = {"backend": self.backend, "description": description, "ok": self.ok,
                "status": "error" if self.error else ("ok" if self.ok else "mismatch"),
                "error": self.error, "seconds": round(self.seconds, 6),
                "unsupported_nodes": dict(self.unsupported_nodes), "fed_from_oracle": list(self.fed_from_oracle),
                "outputs": [o.to_dict() for o in self.outputs]}
        if self.node_providers is not None:
            data["node_providers"] = dict(self.node_providers)
        if self.placement_notes:
            data["placement_notes"] = list(self.placement_notes)
        return data
