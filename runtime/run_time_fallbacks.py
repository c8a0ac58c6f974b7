"""Run-time fallbacks of the lowered graph. A match whose sizes are bound only when it runs
(a LowerAtRunTime step) is specialised per call; where the concrete sizes or values do not fit (a
Cast of an index that would wrap, a mask whose diagonals are no band, an Expand that stretches the
eye), its rule declines for that call and its nodes run on the ONNX region the compiler
precomputed for it. The session counts here every call of every such match and every decline
with its reason; check reports them per backend and on the placement entry, so that no entry reads
'lowered' while its fallback did the work (docs/lowering.md#run-time-sizes)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from onnx_dml_lowering.runtime.compiled_view import PlacementView

# A placement entry's reason names this many distinct reasons (each call size may give its own).
REASONS_SHOWN = 2


@dataclass(frozen=True)
class RunTimeFallback:
    """Calls of one match (its nodes, a body's by path as the placement names them) that its rule
    declined at run time for one reason; those calls ran on ONNX."""
    nodes: "tuple[str, ...]"
    rule: str
    reason: str
    calls: int


@dataclass(frozen=True)
class RunTimeCounts:
    """What one run (or several) did at run time: calls per match, and those that fell back."""
    calls: "Mapping[tuple[str, ...], int]" = field(default_factory=dict)
    fallbacks: "Sequence[RunTimeFallback]" = ()


class RunTimeCalls:
    """Every call of a session's run-time matches (a body's at every branch and iteration)."""

    def __init__(self) -> None:
        self.calls: "Counter[tuple[str, ...]]" = Counter()
        self.declined: "Counter[tuple[tuple[str, ...], str, str]]" = Counter()    # (nodes, rule, reason)

    def called(self, nodes: "tuple[str, ...]", rule: str, declined: "str | None") -> None:
        """One call of the match of `nodes`; `declined`: the reason it ran on ONNX, None if lowered."""
        self.calls[nodes] += 1
        if declined is not None:
            self.declined[(nodes, rule, declined)] += 1

    def mark(self) -> "tuple[Counter, Counter]":
        return Counter(self.calls), Counter(self.declined)

    def since(self, mark: "tuple[Counter, Counter]") -> RunTimeCounts:
        """What the calls after `mark` (a mark() of this object) did."""
        calls, declined = self.calls - mark[0], self.declined - mark[1]
        return RunTimeCounts(dict(calls), tuple(RunTimeFallback(n, rule, why, count)
                                                for (n, rule, why), count in declined.items()))


class FallbackTally:
    """One backend's run-time fallbacks over the feed sets of a check."""

    def __init__(self) -> None:
        self.calls: "Counter[tuple[str, ...]]" = Counter()
        self.entries: "dict[tuple[tuple[str, ...], str], dict]" = {}

    def add(self, counts: RunTimeCounts, feed_set: int) -> None:
        self.calls.update(counts.calls)
        for fb in counts.fallbacks:
            entry = self.entries.setdefault((fb.nodes, fb.reason), {
                "nodes": list(fb.nodes), "rule": fb.rule, "reason": fb.reason, "calls": 0, "feed_sets": []})
            entry["calls"] += fb.calls
            if feed_set not in entry["feed_sets"]:
                entry["feed_sets"].append(feed_set)

    def to_list(self) -> "list[dict]":
        """{nodes, rule, reason, calls (that fell back for it), of_calls (of the match), feed_sets}."""
        return [{**entry, "of_calls": self.calls[key[0]]} for key, entry in self.entries.items()]


def fallback_reason(entries: "Iterable[dict]") -> str:
    """The one reason a placement entry gives for its calls that ran on ONNX (one backend's)."""
    entries = list(entries)
    calls, of_calls = sum(e["calls"] for e in entries), entries[0]["of_calls"]
    distinct = list(dict.fromkeys(e["reason"] for e in entries))   # a size each: the first ones, and a count
    reasons = "; ".join(distinct[:REASONS_SHOWN]) + (
        f" ({len(distinct) - REASONS_SHOWN} more reasons)" if len(distinct) > REASONS_SHOWN else "")
    if calls == of_calls:
        return f"declined at run time at every call ({calls}), which ran on ONNX: {reasons}"
    return f"declined at run time at {calls} of {of_calls} calls, which ran on ONNX: {reasons}"


@dataclass
class CheckedPlacement:
    """A placement entry as a check ran it: a lowered match whose rule declined at run time is
    'onnx' when every call of it did (on every lowered backend), its reason saying why (and no
    operator or note: nothing was lowered), and keeps 'lowered' with that reason when only some
    did; `fallbacks` per backend (FallbackTally.to_list)."""
    onnx_nodes: "list[str]"
    status: str
    rule: str
    dml_operators: "list[str]"
    reason: str
    note: str
    initializer: str
    fallbacks: "dict[str, list[dict]]"
    compiled: dict                          # the compiled entry's to_dict()

    @classmethod
    def of(cls, entry: "PlacementView", status: str, reason: str, fallbacks: "dict[str, list[dict]]"
           ) -> "CheckedPlacement":
        lowered = status == "lowered"
        return cls(list(entry.onnx_nodes), status, entry.rule, list(entry.dml_operators) if lowered else [], reason,
                   entry.note if lowered else "", entry.initializer, fallbacks, entry.to_dict())

    def to_dict(self) -> dict:
        out = {**self.compiled, "status": self.status, "reason": self.reason,
               "dml_operators": list(self.dml_operators), "run_time_fallbacks": self.fallbacks}
        if not self.note:
            out.pop("note", None)
        return out


def checked_placement(placement: "Sequence[PlacementView]", fallbacks: "Mapping[str, list[dict]]"
                      ) -> "list[PlacementView]":
    """The placement with each entry whose rule declined at run time marked (CheckedPlacement);
    `fallbacks`: backend -> FallbackTally.to_list()."""
    by_nodes: "dict[tuple[str, ...], dict[str, list[dict]]]" = {}
    for backend, entries in fallbacks.items():
        for entry in entries:
            by_nodes.setdefault(tuple(entry["nodes"]), {}).setdefault(backend, []).append(entry)
    out: "list[PlacementView]" = []
    for p in placement:
        found = by_nodes.get(tuple(p.onnx_nodes)) if p.status == "lowered" else None
        if not found:
            out.append(p)
            continue
        every = all(sum(e["calls"] for e in entries) == entries[0]["of_calls"] for entries in found.values())
        first = next(iter(found.values()))
        out.append(CheckedPlacement.of(p, "onnx" if every else "lowered", fallback_reason(first), found))
    return out
