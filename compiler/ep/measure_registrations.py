"""Measures the DirectML EP registration table of the onnxruntime.dll `make directml` installed, from
the real EP's own placement (ort_host; under Wine off Windows), and writes it beside 1.27's:

    python -m onnx_dml_lowering.compiler.ep.measure_registrations [--out F.json] [--newest-opset N]

For every operator of 1.27's table (its own DML-internal com.microsoft.dml fusions aside), every
since-version of it up to --newest-opset and every DirectML type each type constraint allows, one
node of exactly that since-version and those types (probes.py), the nodes of one opset side by side
in one model, optimisations off; the real EP's VERBOSE "Node placements" says which it claimed. A
kernel's types are measured one constraint at a time, the others held at a claimed type. What a
placement cannot show (graph support, CPU inputs, support queries) is carried from 1.27's row."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import TextIO
import tempfile
from dataclasses import dataclass, field

from onnx_dml_lowering.runtime.directml.ort_host import OrtHost, OrtHostError, SessionRequest
from onnx_dml_lowering.runtime.directml.placement_log import node_providers

from .probes import NO_CPU_KERNEL, Probe, constraint_types, probe_model, valid_alone
from .registry import exact_schema, since_versions, table_rows

SMALL_BATCH = 12
BATCH = 100            # nodes per probe model (one session each: about a second under Wine)
DML = "DmlExecutionProvider"
_SKIPPED_DOMAINS = ("com.microsoft.dml",)     # the EP's own fusions: no model holds them


@dataclass
class Measured:
    claimed: "dict[Probe, bool]" = field(default_factory=dict)
    unprobed: "dict[tuple[str, str, int], str]" = field(default_factory=dict)   # key -> why
    no_cpu_kernel: "set[Probe]" = field(default_factory=set)    # a session fails unless DML claims them


NEWEST_OPSET = 23


def _opsets(probe: Probe) -> "dict[str, int]":
    """The newest opsets at which the op still resolves to the probe's since-version (an opset
    below 6 has Cast-1, whose string `to` onnxruntime's own float16 casts do not write)."""
    if probe.domain != "ai.onnx":
        return {"ai.onnx": 17, probe.domain: probe.since_version}
    later = [v for v in since_versions(probe.op, probe.domain, NEWEST_OPSET) if v > probe.since_version]
    return {"ai.onnx": min(later) - 1 if later else NEWEST_OPSET}


def _baseline(probe_key: "tuple[str, str, int]", allowed: "dict[str, tuple[str, ...]]",
              rows: "dict[tuple[str, str, int], dict]") -> "dict[str, str]":
    """Each constraint's first type: 1.27's first registered one where it has that kernel."""
    row = rows.get(probe_key) or {}
    registered = row.get("type_constraints") or {}
    out = {}
    for c, types in allowed.items():
        mine = [t for t in registered.get(c, []) if t in types]
        out[c] = mine[0] if mine else types[0]
    return out


def _variations(key: "tuple[str, str, int]", base: "dict[str, str]", allowed: "dict[str, tuple[str, ...]]"
                ) -> "list[Probe]":
    probes = [Probe(*key, tuple(sorted(base.items())))]
    for c, types in allowed.items():
        for t in types:
            if t != base[c]:
                probes.append(Probe(*key, tuple(sorted({**base, c: t}.items()))))
    return probes


OLDEST_OPSET = 7       # onnxruntime guarantees models of opset 7 and above only


def _keys(rows: "list[dict]", newest_opset: int) -> "list[tuple[str, str, int]]":
    """Every since-version of the table's operators: 1.27's own, and those from opset 7 on."""
    ops = sorted({(r["domain"], r["op"]) for r in rows if r["domain"] not in _SKIPPED_DOMAINS})
    keys = []
    for domain, op in ops:
        versions = {v for v in since_versions(op, domain, newest_opset) if v >= OLDEST_OPSET or domain != "ai.onnx"}
        versions |= {r["since_version"] for r in rows if (r["domain"], r["op"]) == (domain, op)}
        keys += [(domain, op, v) for v in sorted(versions)]
    return keys


def _placed(host: OrtHost, probes: "list[Probe]", opsets: "dict[str, int]", folder: str
            ) -> "dict[Probe, bool] | str":
    """Which of the probes (one model) the DML EP claimed, or onnxruntime's message when it named
    no placement."""
    named = [(f"p{i}", p) for i, p in enumerate(probes)]
    model = probe_model(named, opsets).SerializeToString()
    request = SessionRequest("disable", None, [], os.path.join(folder, "optimized.onnx"))
    try:
        session = host.create_session(model, request)
        log = session.log
        session.release()
        failure = ""
    except OrtHostError as exc:     # a kernel that fails to build: the placement was logged before it
        log = exc.log
        failure = " ".join(exc.message.split())[:300]
    providers = node_providers(log, [name for name, _ in named])
    if providers is None:
        return failure or "no placement logged"
    return {p: providers.get(name) == DML for name, p in named}


_NO_PROVIDER = re.compile(r"node with name '(p\d+)'")


def _run(host: OrtHost, probes: "list[Probe]", opsets: "dict[str, int]", folder: str, out: Measured,
         batch_size: int = BATCH) -> None:
    """Places the probes in batches. A session that fails naming a probe node that no provider took
    (onnxruntime stops at the first) says the DML EP did not claim it: it is recorded so and the
    batch is tried again without it; another failure splits the batch until the probe is alone."""
    for start in range(0, len(probes), batch_size):
        batch = probes[start:start + batch_size]
        while batch:
            result = _placed(host, batch, opsets, folder)
            if isinstance(result, dict):
                out.claimed.update(result)
                break
            named = _NO_PROVIDER.search(result)
            if named and ("is not set" in result or "Could not find an implementation" in result):
                out.claimed[batch.pop(int(named.group(1)[1:]))] = False
                continue
            if len(batch) == 1:
                out.unprobed.setdefault(batch[0].key, "onnxruntime.dll refused its one-node model: "
                                        + result.split(" : (")[0][:120])
            else:
                _run(host, batch, opsets, folder, out, max(1, len(batch) // 2))
            break


def _save(out: Measured, path: str) -> None:
    data = [[p.domain, p.op, p.since_version, p.types, ok] for p, ok in out.claimed.items()]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)


def _load(path: str) -> Measured:
    out = Measured()
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for domain, op, since, types, ok in json.load(f):
                out.claimed[Probe(domain, op, since, tuple((c, t) for c, t in types))] = ok
    return out


def measure(host: OrtHost, rows: "list[dict]", newest_opset: int, log: "TextIO" = sys.stderr,
            checkpoint: "str | None" = None
            ) -> Measured:
    """Two rounds: every key's variations around its baseline, then, where the baseline was refused
    and a variation claimed, the variations around that claimed one. `checkpoint`: a file the
    placements so far are kept in after each opset, and read back from (a host that dies)."""
    by_key = {(r["domain"], r["op"], r["since_version"]): r for r in rows}
    out = _load(checkpoint) if checkpoint else Measured()
    pending: "dict[tuple[str, str, int], dict[str, str]]" = {}
    allowed_of = {}
    for key in _keys(rows, newest_opset):
        allowed = constraint_types(key[1], key[0], key[2])
        if exact_schema(key[1], key[0], key[2]) is None:
            out.unprobed[key] = "no schema of that since-version (deprecated, or none): no model holds it"
            continue
        if not allowed or not all(allowed.values()):
            out.unprobed[key] = "a type constraint allows no DirectML tensor type"
            continue
        allowed_of[key] = allowed
        pending[key] = _baseline(key, allowed, by_key)
    with tempfile.TemporaryDirectory(prefix="dml-lower-measure-") as folder:
        for round_ in (1, 2):
            probes = _valid(pending, allowed_of, out)
            print(f"round {round_}: {len(probes)} probes", file=log)
            for opsets, group in _groups(probes):
                group = [p for p in group if p not in out.claimed]
                # those no provider may take in small batches: each one unclaimed costs a session
                _run(host, [p for p in group if p not in out.no_cpu_kernel], opsets, folder, out)
                _run(host, [p for p in group if p in out.no_cpu_kernel], opsets, folder, out, SMALL_BATCH)
                if checkpoint:
                    _save(out, checkpoint)
                print(f"  {opsets}: {len(group)} probes, {sum(out.claimed.values())} claimed so far", file=log,
                      flush=True)
            pending = _rebase(pending, allowed_of, out)
    return out


def _valid(pending: "dict[tuple[str, str, int], dict[str, str]]",
           allowed_of: "dict[tuple[str, str, int], dict[str, tuple[str, ...]]]", out: Measured) -> "list[Probe]":
    probes = []
    for key, base in pending.items():
        for p in _variations(key, base, allowed_of[key]):
            if p in out.claimed:
                continue
            why = valid_alone(p, _opsets(p))
            if why in (None, NO_CPU_KERNEL):
                probes.append(p)
                if why == NO_CPU_KERNEL:
                    out.no_cpu_kernel.add(p)
            elif p.types == tuple(sorted(base.items())):
                out.unprobed.setdefault(key, f"its one-node model does not load: {why.split('] ')[-1][:120]}")
    return probes


def _groups(probes: "list[Probe]") -> "list[tuple[dict[str, int], list[Probe]]]":
    groups: "dict[tuple, list[Probe]]" = {}
    for p in probes:
        groups.setdefault(tuple(sorted(_opsets(p).items())), []).append(p)
    return [(dict(k), v) for k, v in sorted(groups.items())]


def _rebase(pending: "dict[tuple[str, str, int], dict[str, str]]",
            allowed_of: "dict[tuple[str, str, int], dict[str, tuple[str, ...]]]", out: Measured
            ) -> "dict[tuple[str, str, int], dict[str, str]]":
    again = {}
    for key, base in pending.items():
        if out.claimed.get(Probe(*key, tuple(sorted(base.items())))):
            continue
        claimed = [p for p in out.claimed if p.key == key and out.claimed[p]]
        if claimed:
            again[key] = dict(claimed[0].types)
    return again


def kernel_types(measured: Measured, key: "tuple[str, str, int]") -> "dict[str, list[str]] | None":
    """Each constraint's claimed types around a claimed baseline, or None when nothing was claimed."""
    claimed = [p for p, ok in measured.claimed.items() if ok and p.key == key]
    if not claimed:
        return None
    out: "dict[str, list[str]]" = {}
    for base in claimed:
        base_types = dict(base.types)
        for c in base_types:
            same_rest = [p for p in claimed if all(t == base_types[k] for k, t in p.types if k != c)]
            out.setdefault(c, [])
            out[c] = sorted(set(out[c]) | {dict(p.types)[c] for p in same_rest})
    return out


def build_table(measured: Measured, rows: "list[dict]", meta: dict, version: str) -> dict:
    """The measured table, in the 1.27 table's format (rows and meta). A 1.27 kernel no probe could
    be made for, or one with a support query (which judges shapes and attributes a one-node probe
    does not have, so its refusal says nothing of the registration), is carried from 1.27's row
    (`measured: false`, `carried`: why), its types joined with any the EP claimed."""
    by_key = {(r["domain"], r["op"], r["since_version"]): r for r in rows}
    out_rows = []
    for key in sorted({p.key for p in measured.claimed} | set(by_key)):
        types = kernel_types(measured, key)
        old = by_key.get(key)
        carried = _carried_why(measured, key, old, types)
        if types is None and carried is None:
            continue
        row = {**(old or _nearest(by_key, key)), "domain": key[0], "op": key[1], "since_version": key[2]}
        if carried is not None and old is not None:
            merged = {c: sorted(set(t) | set((types or {}).get(c, ()))) for c, t in (old["type_constraints"] or {}).items()}
            if not old["type_constraints"] and types is not None:
                merged = types         # 1.27's row checks no type: what was claimed is the row
            if types is not None and merged == types:
                row.update(type_constraints=types, measured=True)       # the query refused no probe
            else:
                row.update(type_constraints=merged or old["type_constraints"], measured=types is not None,
                           carried=carried if types is None else f"types joined with 1.27's: {carried}")
        else:
            row.update(type_constraints=types, measured=True)
        row["in_1_27"] = old is not None
        for dropped in ("macro", "source_line", "compiled_only_if"):
            row.pop(dropped, None)
        out_rows.append(row)
    return {"meta": _meta(meta, version), "rows": out_rows}


def _carried_why(measured: Measured, key: "tuple[str, str, int]", old: "dict | None",
                 types: "dict[str, list[str]] | None") -> "str | None":
    if old is None:
        return None
    if key[0] in _SKIPPED_DOMAINS:
        return "the EP's own fusion: no model holds it"
    if old.get("support_query"):
        return f"its support query {old['support_query']} judges what a one-node probe does not have"
    if types is None and key in measured.unprobed:
        return f"no probe: {measured.unprobed[key]}"
    return None


def _nearest(by_key: "dict[tuple[str, str, int], dict]", key: "tuple[str, str, int]") -> dict:
    same = sorted((k for k in by_key if k[:2] == key[:2]), key=lambda k: abs(k[2] - key[2]))
    return dict(by_key[same[0]])


def _meta(meta: dict, version: str) -> dict:
    return {
        "source": f"onnxruntime.dll {version} (PyPI onnxruntime-directml win_amd64), measured by "
                  "compiler/ep/measure_registrations.py: the real DML EP's node placement of one-node probes",
        "note": "since-versions and type_constraints measured (each constraint's DirectML types, the others held "
                "at a claimed type); graph_support, required_cpu_inputs, required_input_count_for_graph and "
                "support_query are carried from the onnxruntime 1.27 row of that kernel (or its nearest "
                "since-version), which a placement cannot show. Rows with measured=false are 1.27's, carried: "
                "`carried` says why (no probe could be made; a support query; the EP's own fusions).",
        "extra_cpu_implemented_dml_kernels": meta["extra_cpu_implemented_dml_kernels"],
        "custom_registered": meta["custom_registered"],
    }


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(prog="measure_registrations", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="the JSON to write (default: beside 1.27's, named by the measured version)")
    parser.add_argument("--checkpoint", help="keep the placements so far here, and start from them")
    args = parser.parse_args(argv)
    rows, meta = table_rows("1.27.0")
    with OrtHost() as host:
        version = host.version()
        measured = measure(host, rows, NEWEST_OPSET, checkpoint=args.checkpoint)
    table = build_table(measured, rows, meta, version)
    out = args.out or os.path.join(os.path.dirname(__file__), f"dml_ep_registrations_ort{version}.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    print(f"{out}: {len(table['rows'])} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
