"""`check --localize`: where in the graph a MISMATCH begins.

After the check, each backend with a MISMATCH is checked again on feed set #0 with every tensor
value of the main graph made an output (compile_model(outputs="all"), as `--outputs all`), so the
oracle and the backend report each value they compute. A node *starts* the difference when one of
its outputs differs (a MISMATCH, or a named DEVIATION: its cause is known, and said) while every input agrees (matches the oracle, or is a graph input or an
initializer, the same feed on both sides). Where an input was not compared (the backend does not
materialise it, the value is no tensor (a sequence, no type), or the comparison was not a match / mismatch) the node is
listed as a *candidate*: the difference starts there or before it, in what could not be compared.
Making values outputs keeps onnxruntime from fusing across them and a lowering idiom from taking
them, so the difference may not come back: that is said, not hidden.

A node's inputs are what it reads (lowering.onnx_graphs.node_reads): an If / Loop / Scan reads
what its bodies capture from outside too. Where the node that starts the difference ranks (a
NonMaxSuppression, TopK, ArgMax or ArgMin, itself or in its bodies) and its inputs agree within
tolerance but not bit for bit, that is said beside it: near-equal values ranked by differences of
rounding part the outputs there, without the node computing otherwise than ONNX says."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

from onnx_dml_lowering.ir import DmlLowerError

if TYPE_CHECKING:
    import onnx

    from onnx_dml_lowering.ir import FeatureLevel
    from onnx_dml_lowering.runtime.backend_names import BackendName
    from onnx_dml_lowering.runtime.backends import BackendOptions
    from onnx_dml_lowering.runtime.check_report import CheckReport
    from onnx_dml_lowering.runtime.oracle import OracleName
    from onnx_dml_lowering.runtime.compare import BackendReport
    from onnx_dml_lowering.runtime.tolerances import Tolerances

    from .compiled import CompiledModel


@dataclass
class Localized:
    backend: str
    reproduced: bool                                            # a value mismatched with every value an output
    first: "list[dict]" = field(default_factory=list)          # {node, op_type, outputs {value: error}, inputs}
    candidates: "list[dict]" = field(default_factory=list)     # as first, with `not_compared` inputs
    not_compared: "list[str]" = field(default_factory=list)    # values of the main graph no comparison covered
    error: str = ""                                             # the backend failed on the run with every value an output

    def to_dict(self) -> dict:
        return {"backend": self.backend, "reproduced": self.reproduced, "first": self.first,
                "candidates": self.candidates, "not_compared": self.not_compared, "error": self.error}


def refuse_golden(oracle: OracleName) -> None:
    """A golden file holds the graph's outputs only: nothing to compare the intermediates with."""
    from onnx_dml_lowering.runtime.oracle_names import OracleKind
    if oracle.kind is OracleKind.GOLDEN:
        raise DmlLowerError(f"--localize compares every intermediate value with the oracle's, which --oracle "
                            f"{oracle} (graph outputs only) does not hold: use --oracle hybrid, reference or ort-cpu")


# The statuses of a value that differs from the oracle's: a named DEVIATION is a difference too
# (a scalar NonZero's row on onnxruntime), one whose cause the check already knows
DIFFERS = ("mismatch", "deviation")


def _status(backend: BackendReport) -> "dict[str, tuple[str, float | None]]":
    """value -> (match | mismatch | deviation | other, the largest error) over every feed set."""
    out: "dict[str, tuple[str, float | None]]" = {}
    for o in backend.outputs:
        was, error = out.get(o.output, ("match", None))
        now = "other" if o.status == "mismatch" and o.actual_shape is None else o.status    # not materialised
        now = now if now in ("match", *DIFFERS) else "other"
        status = next((s for s in (*DIFFERS, "other") if s in (was, now)), "match")
        errors = [e for e in (error, o.max_abs_error) if e is not None]
        out[o.output] = (status, max(errors) if errors else None)
    return out


# Operators whose output orders or selects by comparing values: near-equal inputs may go either way
RANKING = frozenset({"NonMaxSuppression", "TopK", "ArgMax", "ArgMin", "Hardmax"})


def localize_backend(backend: BackendReport, compiled: CompiledModel) -> Localized:
    from onnx_dml_lowering.lowering.onnx_graphs import node_reads
    graph = compiled.model.graph
    status = _status(backend)
    named = {o.output: o.detail for o in backend.outputs if o.status == "deviation"}
    produced = {o for n in graph.node for o in n.output if o}
    found = Localized(backend.backend.text, any(s in DIFFERS for s, _ in status.values()))
    found.not_compared = sorted(v for v in produced if status.get(v, ("other", None))[0] == "other")
    for node in graph.node:
        bad = {o: status[o][1] for o in node.output if o and status.get(o, ("", None))[0] in DIFFERS}
        inputs = [i for i in dict.fromkeys(node_reads(node)) if i in produced]
        if not bad or any(status.get(i, ("other", None))[0] in DIFFERS for i in inputs):
            continue
        unknown = [i for i in inputs if status.get(i, ("other", None))[0] != "match"]
        entry = {"node": node.name, "op_type": node.op_type, "outputs": bad, "inputs": inputs}
        deviations = {o: named[o] for o in bad if o in named}
        if deviations:
            entry["deviations"] = deviations
        if unknown:
            found.candidates.append({**entry, "not_compared": unknown})
        else:
            found.first.append({**entry, **_ranking(node, inputs, status)})
    return found


def _ranking(node: onnx.NodeProto, inputs: "list[str]", status: "dict[str, tuple[str, float | None]]") -> dict:
    """{"ranks": {"nodes": [[name, op type], ...], "input_error": e}} for a node that ranks, itself or
    a node of its bodies, some input it depends on agreeing within tolerance, not bit for bit (e > 0,
    the largest such); else {}. In a body only the inputs a ranking node reads (through the body's
    nodes) count: a TopK over exact values beside an inexact value read elsewhere is its own."""
    from onnx_dml_lowering.lowering.onnx_graphs import is_standard
    inexact = {i: e for i in inputs for e in [status[i][1]] if e is not None and e > 0}
    if not inexact:
        return {}
    if node.op_type in RANKING and is_standard(node):
        return {"ranks": {"nodes": [[node.name, node.op_type]], "input_error": max(inexact.values())}}
    ranked, worst = [], 0.0
    for ranking, reads in _body_rankings(node):
        relevant = [inexact[name] for name in reads if name in inexact]
        if relevant:
            ranked.append([ranking.name, ranking.op_type])
            worst = max(worst, *relevant)
    return {"ranks": {"nodes": ranked, "input_error": worst}} if ranked else {}


def _body_rankings(node: onnx.NodeProto) -> "list[tuple[onnx.NodeProto, set[str]]]":
    """(ranking node of `node`'s bodies, the outer values it depends on through them): a body's
    formal input (a Loop's carried value, a Scan's slice) stands for every input of `node`."""
    from onnx_dml_lowering.lowering.onnx_graphs import body_nodes, is_standard, iter_graphs, node_bodies, node_reads
    nodes = list(body_nodes(node))
    rankings = [n for n in nodes if n.op_type in RANKING and is_standard(n)]
    if not rankings:
        return []
    producers = {out: n for n in nodes for out in n.output if out}
    formal = {vi.name for body in node_bodies(node) for graph, _ in iter_graphs(body) for vi in graph.input}
    found = []
    for ranking in rankings:
        outer: "set[str]" = set()
        stack, seen = list(node_reads(ranking)), set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in producers:
                stack.extend(node_reads(producers[name]))
            elif name in formal:
                outer.update(i for i in node.input if i)
            else:
                outer.add(name)
        found.append((ranking, outer))
    return found


def every_value_check(path: str, level: "FeatureLevel", feeds: "Mapping[str, object]", failing: "Sequence[BackendName]",
                      tolerances: "Tolerances", options: "BackendOptions", oracle: "OracleName | str",
                      kept: "Sequence[str]") -> "tuple[CompiledModel, CheckReport]":
    """The check --localize makes: `failing` on feed set #0 with every value an output, a provider
    backend on its modified copy (the file as shipped has no value but its outputs). On the DML EP
    one value empty on these feeds leaves the run's other outputs unread (CopyTensors,
    docs/directml-ep-on-linux.md): there it runs again with those values left out (not compared),
    but for `kept`, the outputs the first check compared."""
    from onnx_dml_lowering.runtime.backend_names import DML_PROVIDER
    from onnx_dml_lowering.runtime.check import check

    from .compiled import compile_model
    options = dataclasses.replace(options, provider_model="modified")

    def checked(outputs: "str | list[str]") -> "tuple[CompiledModel, CheckReport]":
        compiled = compile_model(path, feature_level=level, outputs=outputs)
        return compiled, check(compiled, feeds, failing, tolerances, options, oracle=oracle, model_name=path)[1]

    compiled, report = checked("all")
    if not any(b.provider == DML_PROVIDER for b in failing):
        return compiled, report
    results = [o for b in report.backends for o in b.outputs]
    empty = {o.output for o in results if 0 in o.expected_shape} - set(kept)
    if not empty:
        return compiled, report
    return checked([name for name in dict.fromkeys(o.output for o in results) if name not in empty])


def localize(report_all: CheckReport, compiled_all: CompiledModel, backends: "Sequence[BackendName]") -> "list[Localized]":
    """The findings for `backends` (the ones that mismatched) in the report of the run with every
    value an output (a saved-outputs file adds its other backends there: they are left out). A
    backend that failed on that run has its error instead, never nothing."""
    return [Localized(b.backend.text, False, error=b.error) if b.error else localize_backend(b, compiled_all)
            for b in report_all.backends if b.backend in backends]


def _values(names: "list[str]", what: str) -> str:
    return f"{what}{'s' if len(names) != 1 else ''} " + ", ".join(repr(n) for n in names)


def _node_text(entry: dict) -> str:
    deviations = entry.get("deviations", {})
    differing = [o for o in entry["outputs"] if o not in deviations]
    errors = [entry["outputs"][o] for o in differing if entry["outputs"][o] is not None]
    outs = "; ".join([_values(differing, "output") + (" differ" if len(differing) > 1 else " differs")
                      + (f" (max abs err {max(errors):.3g})" if errors else "")] * bool(differing)
                     + [f"output {o!r} is a named DEVIATION ({detail})" for o, detail in deviations.items()])
    if "not_compared" in entry:
        return f"{entry['node']} ({entry['op_type']}): {outs}; not compared: {_values(entry['not_compared'], 'input')}"
    ins = _values(entry["inputs"], "input") + (" agree" if len(entry["inputs"]) > 1 else " agrees") \
        if entry["inputs"] else "it reads only graph inputs and initializers"
    return f"{entry['node']} ({entry['op_type']}): {outs} while {'its ' if entry['inputs'] else ''}{ins}" \
        + (_ranking_text(entry["ranks"]) if "ranks" in entry else "")


def _ranking_text(ranks: dict) -> str:
    nodes = ", ".join(f"{name} ({op_type})" for name, op_type in ranks["nodes"][:4]) \
        + (", ..." if len(ranks["nodes"]) > 4 else "")
    return (f", within tolerance but not bit for bit (max abs err {ranks['input_error']:.3g}), and it ranks "
            f"({nodes}): near-equal values ordered by rounding differences part there, not necessarily a node "
            "computing otherwise than ONNX says")


def format_localized(found: "list[Localized]") -> "list[str]":
    """The lines check --localize prints (names not yet displayed: the caller displays each)."""
    lines = []
    for f in found:
        head = f"localize [{f.backend}]"
        if f.error:
            lines.append(f"{head}: its run with every value an output failed, so nothing is localized: {f.error}")
            continue
        if not f.reproduced:
            lines.append(f"{head}: with every value made an output no value differs on feed set #0: the difference "
                         "needs the fused form (onnxruntime's fusion or a lowering idiom across those values)")
            continue
        for entry in f.first:
            lines.append(f"{head}: the difference starts at {_node_text(entry)}")
        for entry in f.candidates:
            lines.append(f"{head}: the difference starts at or before {_node_text(entry)}")
        if f.not_compared:
            shown = ", ".join(repr(v) for v in f.not_compared[:8]) + (", ..." if len(f.not_compared) > 8 else "")
            many = "s" if len(f.not_compared) != 1 else ""
            lines.append(f"{head}: {len(f.not_compared)} value{many} could not be compared: {shown}")
    return lines
