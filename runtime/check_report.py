"""The report of one check: per backend (compare.BackendReport) and over the run; its JSON
document (the contract of `check --json`)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .compare import BackendReport

__all__ = ["CheckReport"]


@dataclass(frozen=True)
class CheckReport:
    """What one check found, built once by CheckRun.report() (runtime/check.py) from the run and
    the caller's CheckAbout; nothing changes it afterwards."""
    model: str
    feature_level: str
    placement: list
    regions: "dict[str, str]"
    backends: "list[BackendReport]"
    oracle: "dict" = field(default_factory=lambda: {"kind": "reference", "description": "onnx.reference"})
    iterations: int = 1
    unavailable: "dict[str, str]" = field(default_factory=dict)
    expected: "dict" = field(default_factory=dict, repr=False)    # the oracle's, first feed set
    # control flow (issue 11): per lowered backend, If branches / Loop and Scan iterations that
    # ran a body's lowered graph, summed over the feed sets (EmulatorSession.lowered_iterations)
    control_flow_iterations: "dict[str, int]" = field(default_factory=dict)
    # initializers that are also graph inputs and were not fed: their stored value was used
    defaults: "dict[str, np.ndarray]" = field(default_factory=dict, repr=False)
    # Ctrl-C: the feed sets fully checked before it (`iterations`) are the report; the one under
    # way when it came is dropped.
    interrupted: bool = False
    # A later feed set that could not be checked (the oracle failed on it, or it did not fit the
    # inputs): its one-line error; the report covers the `iterations` sets before it.
    stopped: str = ""
    # The NonZero nodes (a body's by path) when every one of them returned no coordinate at every
    # feed set checked, a body's at every branch and iteration that ran (known with the hybrid
    # oracle): no coordinate was compared.
    empty_nonzero: "list[str]" = field(default_factory=list)
    # Those of them that never ran: in an If branch not taken, a Loop / Scan body that did not
    # iterate, at every feed set checked (a subset of empty_nonzero).
    nonzero_never_ran: "list[str]" = field(default_factory=list)
    # The --dim sizes the random feeds were drawn at (set by the CLI; a zoo reads them back).
    dims: "dict[str, int]" = field(default_factory=dict)
    # A PARTIAL backend (it ran only part of the model) fails the check (check(fail_partial=True)).
    fail_partial: bool = False
    # Feeds of the first set that depart from the model's dimension names (feeds.dimension_notes).
    feed_notes: "list[str]" = field(default_factory=list)
    # Where the feeds came from and what the first set holds (set by the CLI; report.feeds_line).
    feeds: dict = field(default_factory=dict)
    # Graph outputs whose shape on feed set #0 (the oracle's, ONNX semantics) contradicts the
    # model's declaration (rank, or a fixed size): {output: {"declared": [size or name or None],
    # "oracle": [sizes]}}. Every engine may agree and MATCH: the declaration is what is wrong.
    declared_shapes: "dict[str, dict]" = field(default_factory=dict)
    # Per lowered backend, its run-time matches whose rule declined on some call, so those calls
    # ran on ONNX (run_time_fallbacks.FallbackTally.to_list: nodes, rule, reason, calls, of_calls,
    # feed_sets); the placement entries are marked alike (run_time_fallbacks.CheckedPlacement).
    run_time_fallbacks: "dict[str, list[dict]]" = field(default_factory=dict)

    @property
    def partial(self) -> "list[BackendReport]":
        """The backends that ran without error but not the whole model themselves."""
        return [b for b in self.backends if not b.error and b.is_partial]

    @property
    def ok(self) -> bool:
        """No MISMATCH and no backend ERROR (nor PARTIAL when it fails), and every feed set asked
        for was checked (a run a later set stopped, or Ctrl-C cut short, is not a pass)."""
        return (all(b.ok for b in self.backends) and not self.stopped and not self.interrupted
                and not (self.fail_partial and self.partial))

    def to_dict(self) -> dict:
        return {"model": self.model, "feature_level": self.feature_level, "ok": self.ok,
                "fail_partial": self.fail_partial,
                "oracle": self.oracle, "iterations": self.iterations, "interrupted": self.interrupted,
                "stopped": self.stopped, "empty_nonzero": list(self.empty_nonzero),
                "nonzero_never_ran": list(self.nonzero_never_ran), "dims": dict(self.dims),
                "feeds": dict(self.feeds),
                "placement": [p.to_dict() for p in self.placement],
                "onnx_regions": dict(self.regions),
                "unavailable_backends": dict(self.unavailable),
                "control_flow_iterations": dict(self.control_flow_iterations),
                "feed_notes": list(self.feed_notes),
                "declared_shapes_differ": {name: dict(entry) for name, entry in self.declared_shapes.items()},
                "initializer_defaults": {name: {"dtype": str(v.dtype), "shape": list(v.shape)}
                                         for name, v in self.defaults.items()},
                "backends": [{**b.to_dict(), **({"run_time_fallbacks": self.run_time_fallbacks.get(b.backend.text, [])}
                                                if b.backend.is_lowered else {})} for b in self.backends]}
