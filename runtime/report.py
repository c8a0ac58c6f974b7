"""Text and Markdown renderings of a placement and a check report."""
from __future__ import annotations

from .check import BACKENDS, CheckReport


def format_placement(placement, level) -> str:
    lines = [f"placement (feature level {level}):"]
    if not placement:
        lines.append("  no NonZero or EyeLike node in this model")
    for p in placement:
        target = " + ".join(p.dml_operators) if p.dml_operators else "no DirectML operator"
        text = f"  {', '.join(p.onnx_nodes)}: {p.status} by rule {p.rule}"
        text += f" -> {target}" if p.status == "lowered" else f" ({p.reason})"
        if p.note:
            text += f"  [{p.note}]"
        lines.append(text)
    return "\n".join(lines)


def _shape(shape) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def format_results(report: CheckReport) -> str:
    lines = []
    for backend in report.backends:
        if backend.error:
            lines.append(f"  [{backend.backend}] ERROR {backend.error}")
        for o in backend.outputs:
            text = f"  [{o.backend}] {o.output}: {o.status.upper()} ({o.expected_dtype} [{_shape(o.expected_shape)}])"
            if o.max_abs_error is not None and o.status == "match":
                text += f" max abs err {o.max_abs_error:.3g}, max rel err {o.max_rel_error:.3g}"
            if o.detail:
                text += f" - {o.detail}"
            lines.append(text)
    return "\n".join(lines)


def format_text(report: CheckReport) -> str:
    lines = [f"check {report.model} (feature level {report.feature_level}, oracle onnx.reference)",
             format_placement(report.placement, report.feature_level)]
    if report.regions:
        lines.append("onnx regions:")
        lines += [f"  {name} {engine}" for name, engine in report.regions.items()]
    lines.append("results:")
    lines.append(format_results(report))
    lines.append("verdict: " + ("all outputs match ONNX semantics" if report.ok else "MISMATCH"))
    return "\n".join(lines)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def format_markdown(report: CheckReport) -> str:
    verdict = "all outputs match ONNX semantics" if report.ok else "**MISMATCH**"
    lines = [f"### dml-lower check: `{report.model}`", "",
             f"Feature level {report.feature_level}; oracle `onnx.reference`; verdict: {verdict}.", "",
             "| backend | output | status | dtype | shape | max abs err | max rel err | detail |",
             "|---|---|---|---|---|---|---|---|"]
    for backend in report.backends:
        if backend.error:
            lines.append(f"| {backend.backend} | - | ERROR | | | | | {_cell(backend.error)} |")
        for o in backend.outputs:
            abs_err = "" if o.max_abs_error is None else f"{o.max_abs_error:.3g}"
            rel_err = "" if o.max_rel_error is None else f"{o.max_rel_error:.3g}"
            lines.append(f"| {o.backend} | `{_cell(o.output)}` | {o.status} | {o.expected_dtype} | "
                         f"{_shape(o.expected_shape)} | {abs_err} | {rel_err} | {_cell(o.detail)} |")
    lines += ["", "| node(s) | placement | rule | DirectML operators / reason |", "|---|---|---|---|"]
    for p in report.placement:
        what = " + ".join(p.dml_operators) or "none (empty result)" if p.status == "lowered" else p.reason
        lines.append(f"| {_cell(', '.join(p.onnx_nodes))} | {p.status} | {p.rule} | {_cell(what)} |")
    lines += ["", "Backends: " + "; ".join(f"`{b.backend}` = {BACKENDS[b.backend]}" for b in report.backends)]
    return "\n".join(lines) + "\n"
