"""What the Model Explorer overlays hold (explorer.py writes them): the DML EP's predicted
placement, this project's lowering, and check's largest error per node. Model Explorer's node
data is numbers, so each set is a code per node whose meaning the set's name spells out."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .ep.placement import CPU, DML, NONE, REMOVED
from .explorer import BLUE, GREEN, GREY, LARGEST, LIGHT_GREEN, ORANGE, RED, Overlay

if TYPE_CHECKING:
    from onnx_dml_lowering.runtime.compare import OutputResult
    from onnx_dml_lowering.runtime.check_report import CheckReport

    from .compiled import CompiledModel

PROVIDER_CODES = {DML: 0, CPU: 1, NONE: 2, REMOVED: 3}


def placement_overlay(ep_placement: dict) -> Overlay:
    """inspect --ep dml: the provider onnxruntime's DirectML EP is predicted to give each node."""
    values = {n["node"]: float(PROVIDER_CODES[n["provider"]]) for n in ep_placement["nodes"]
              if n["provider"] in PROVIDER_CODES}
    title = (f"DML EP placement predicted (onnxruntime {ep_placement['onnxruntime']}): 0 DirectML, 1 CPU, "
             "2 no provider, 3 removed before partitioning")
    return Overlay("placement", title, values, [(0, BLUE), (1, ORANGE), (2, RED), (3, GREY)])


def lowering_overlay(entries: "list[tuple[list[str], bool, str | None]]", level: str) -> Overlay:
    """(nodes, lowered, rule) per anchor: 0 where it stays on ONNX, k where rule #k lowers it."""
    rules: "dict[str, int]" = {}
    values: "dict[str, float]" = {}
    for nodes, lowered, rule in entries:
        code = rules.setdefault(rule, len(rules) + 1) if lowered and rule else 0
        for node in nodes:
            values.setdefault(node, float(code))
    names = "; ".join(f"{code} {rule}" for rule, code in rules.items())
    title = f"lowering at feature level {level}: 0 stays on ONNX" + (f"; lowered by rule {names}" if names else "")
    return Overlay("lowering", title, values, [(0, ORANGE), (max(1, len(rules)), GREEN)])


def compiled_lowering(compiled: CompiledModel) -> Overlay:
    """compile / check: the placement compile_model made."""
    return lowering_overlay([(list(p.onnx_nodes), p.status == "lowered", p.rule) for p in compiled.placement],
                            compiled.feature_level.name)


def error_overlays(report: CheckReport, compiled: CompiledModel, intermediates: bool) -> "list[Overlay]":
    """check: per backend, each node's largest absolute error against the oracle over the values
    compared (the graph's outputs, and with --outputs the intermediates), on the node producing it."""
    from onnx_dml_lowering.lowering.onnx_graphs import node_paths
    producer = {o: path for path, node in node_paths(compiled.model.graph) for o in node.output if o}
    where = "every value compared" if intermediates else \
        "graph outputs only, on the nodes producing them (check --outputs all compares every value)"
    out = []
    for backend in report.backends:
        values: "dict[str, float]" = {}
        for o in backend.outputs:
            node, error = producer.get(o.output), _error(o)
            if node is not None and error is not None:
                values[node] = max(values.get(node, 0.0), error)
        if not values:
            continue
        atol = max((o.atol for o in backend.outputs if o.atol is not None), default=0.0)
        title = (f"largest |error| against the oracle, {backend.backend}: {where}; green 0, light green within "
                 f"atol {atol:g}, red beyond ({LARGEST:g}: no error to compute, a shape, type or missing output)")
        out.append(Overlay(f"error-{backend.backend.text.replace(':', '-')}", title, values,
                           [(0, GREEN), (atol, LIGHT_GREEN), (LARGEST, RED)]))
    return out


def _error(o: OutputResult) -> "float | None":
    """An output's largest absolute error: 0 when it matched exactly (integers say none then),
    LARGEST when it mismatched without one (shape, type, missing); None when not compared."""
    if o.max_abs_error is not None:
        return float(o.max_abs_error)
    if o.status == "match":
        return 0.0
    return LARGEST if o.status == "mismatch" else None
