"""The differences between two DML EP registration tables (docs/directml-ep-on-linux.md shows those
between 1.24.4's and 1.27's, and a test holds the page to this): kernels one table has and the
other not, and per type constraint the DirectML types one kernel takes and the other's not. Types
are compared over what a measurement can see: the DirectML tensor types the operator's schema
allows ('ALL' and a kernel without type constraints stand for every one of them)."""
from __future__ import annotations

from dataclasses import dataclass

from .probes import constraint_types
from .registry import table_rows

Key = "tuple[str, str, int]"


@dataclass(frozen=True)
class Difference:
    domain: str
    op: str
    since_version: int
    what: str         # "kernel only in V", "C: only V: types", or "not measured in V, carried ..."

    def row(self) -> "tuple[str, str, str]":
        name = self.op if self.domain == "ai.onnx" else f"{self.domain}:{self.op}"
        return name, str(self.since_version), self.what


def _kernel_types(row: dict) -> "dict[str, frozenset[str]]":
    allowed = constraint_types(row["op"], row["domain"], row["since_version"])
    registered = row.get("type_constraints") or {}
    out = {}
    for c, types in allowed.items():
        mine = registered.get(c)
        out[c] = frozenset(types) if mine is None or "ALL" in mine else frozenset(types) & frozenset(mine)
    return out


def _keyed(version: str) -> "dict[tuple[str, str, int], dict]":
    """The table's kernels a node can match (a kernel whose types the schema never allows can
    match none: 1.27's Equal-7 registers float, which Equal-7 does not take)."""
    rows, _ = table_rows(version)
    return {(r["domain"], r["op"], r["since_version"]): r for r in rows
            if r["domain"] != "com.microsoft.dml" and all(_kernel_types(r).values())}


def differences(a: str, b: str) -> "list[Difference]":
    """What table `a` (an onnxruntime version) registers that `b` does not, and the reverse, sorted."""
    rows_a, rows_b = _keyed(a), _keyed(b)
    out = []
    for key in sorted(set(rows_a) | set(rows_b)):
        carried = [f"{v}: {'' if rows[key]['measured'] else 'not measured, '}carried from the other table: "
                   f"{rows[key]['carried']}" for v, rows in ((a, rows_a), (b, rows_b)) if "carried" in rows.get(key, {})]
        if carried:
            out.append(Difference(*key, carried[0]))
        elif key not in rows_b:
            out.append(Difference(*key, f"kernel only in {a}"))
        elif key not in rows_a:
            out.append(Difference(*key, f"kernel only in {b}"))
        else:
            types_a, types_b = _kernel_types(rows_a[key]), _kernel_types(rows_b[key])
            for c in sorted(types_a):
                only_a, only_b = types_a[c] - types_b.get(c, frozenset()), types_b.get(c, frozenset()) - types_a[c]
                parts = [f"only {v}: {', '.join(sorted(t))}" for v, t in ((a, only_a), (b, only_b)) if t]
                if parts:
                    out.append(Difference(*key, f"{c}: " + "; ".join(parts)))
    return out


def markdown(a: str, b: str) -> "list[str]":
    """The differences as the markdown table the docs page holds."""
    lines = ["| operator | since-version | difference |", "|---|---|---|"]
    lines += [f"| {op} | {since} | {what} |" for op, since, what in (d.row() for d in differences(a, b))]
    return lines
