"""Text and Markdown renderings of a placement and a check report."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from onnx_dml_lowering.ir.display import display, markdown_cell, markdown_code, name_list

if TYPE_CHECKING:
    import numpy as np

    from onnx_dml_lowering.ir import FeatureLevel
    from onnx_dml_lowering.runtime.compiled_view import PlacementView

    from .check_report import CheckReport
    from .compare import OutputResult

# The check's modules (backends, oracle, region engine, compare) are imported by the functions that
# render a check report, not here: compile and inspect print a placement only, and importing them
# cost those commands ~25 ms of CPU.


# Placements that read the same (status, rule, operators, reason, note) share one line from this many on.
GROUP_FROM = 3


def format_placement(placement: "Sequence[PlacementView]", level: "FeatureLevel | str") -> str:
    """One line per placement; on a large model, placements that read the same past their nodes
    (NonZero after NonZero lowered by one rule, with one note) share one line naming the nodes of
    each ('a, b; c, d; ... (40 placements)'). compile --json / check --json keep one entry each."""
    lines = [f"placement (feature level {level}):"]
    if not placement:
        lines.append("  nothing lowered: no NonZero, EyeLike or Trilu node, and no idiom pattern matched")
    groups: "dict[str, list]" = {}
    for p in placement:
        target = " + ".join(p.dml_operators) if p.dml_operators else "no DirectML operator"
        text = f"{p.status} by rule {p.rule}"
        text += f" -> {target}" if p.status == "lowered" else f" ({display(p.reason)})"
        if p.status == "lowered" and p.reason:      # a check's: some calls declined at run time
            text += f" ({display(p.reason)})"
        if p.note:
            text += f"  [{display(p.note)}]"
        groups.setdefault(text, []).append(name_list(p.onnx_nodes))
    for text, labels in groups.items():
        if len(labels) < GROUP_FROM:
            lines += [f"  {label}: {text}" for label in labels]
            continue
        shown = name_list(labels, 5, "placements", "; ")
        count = "" if shown.endswith(" placements)") else f" ({len(labels)} placements)"
        lines.append(f"  {shown}{count}: {text}")
    return "\n".join(lines)


def _shape(shape: "Sequence[int] | None") -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def _rel(value: "float | None") -> str:
    return "undefined" if value is None else f"{value:.3g}"


def _errors(o: OutputResult) -> str:
    """Max (and on a mismatch mean) abs / rel errors; rel leaves out elements expected to be 0."""
    if o.max_abs_error is None:
        return ""
    failed = o.status == "mismatch"
    text = f" max abs err {o.max_abs_error:.3g}" + (f" (mean {o.mean_abs_error:.3g})" if failed else "")
    if o.max_rel_error is None:
        return text + ", rel err undefined (expected 0 wherever it differs)"
    notes = [f"mean {o.mean_rel_error:.3g}"] if failed else []
    if o.rel_undefined:
        notes.append(f"undefined at {o.rel_undefined} element{'s' if o.rel_undefined > 1 else ''} where expected is 0")
    return text + f", max rel err {o.max_rel_error:.3g}" + (f" ({'; '.join(notes)})" if notes else "")


def _number(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def feeds_line(feeds: dict) -> str:
    """The feeds in one line: where they came from (seed, file, script) and per input its dtype,
    shape, smallest and largest value and zeros. `feeds`: {"source", ..., "inputs": feed_summary}."""
    source = feeds.get("source")
    if source == "random":
        seed, count = feeds["seed"], feeds.get("iterations", 1)
        head = f"random, seed {seed}" if count == 1 else f"random, seeds {seed}-{seed + count - 1} (the first shown)"
        defaulted = feeds.get("default_dims", [])
        sizes = [f"{display(name)}={size}" + (" (default)" if name in defaulted else "")
                 for name, size in feeds.get("dims", {}).items()]
        head += f", dims {', '.join(sizes)}" if sizes else ""
    elif source == "file":
        head = f"from {display(feeds['path'])}"
    elif source == "script":
        many = feeds.get("iterations", 1) > 1
        head = f"from data loader {display(feeds['path'])}" + (f", {feeds['iterations']} sets (the first shown)" if many else "")
    else:
        head = "given"
    parts = []
    for name, info in feeds.get("inputs", {}).items():
        text = f"{display(name)} {info['dtype']} [{_shape(info['shape'])}]"
        if info["min"] is not None:
            text += (f" = {_number(info['min'])}" if info["min"] == info["max"] and not info["shape"] else
                     f" in [{_number(info['min'])}, {_number(info['max'])}]")
        elif info["zeros"] is not None and not info["nonfinite"]:
            text += " (empty)"
        if info["zeros"] and info["shape"]:
            size = 1
            for d in info["shape"]:
                size *= d
            text += f", {info['zeros']} of {size} zero"
        if info["nonfinite"]:
            text += f", {info['nonfinite']} NaN / inf"
        parts.append(text)
    return f"feeds: {head}: {'; '.join(parts) or 'nothing to feed'}"


def defaults_line(defaults: "Mapping[str, np.ndarray]") -> str:
    """The initializers-that-are-also-inputs left unfed (name -> the stored value used), in one line."""
    return "inputs not fed, their initializer used as the default: " + name_list(
        [f"{name} ({value.dtype} [{_shape(value.shape)}])" for name, value in defaults.items()], 8, "inputs")


def format_results(report: CheckReport, matches: bool = True) -> str:
    """One line per output and backend (and per backend error); `matches=False` leaves MATCH out."""
    lines = []
    many = report.iterations > 1
    for backend in report.backends:
        if backend.error:
            lines.append(f"  [{display(backend.backend.text)}] ERROR {display(backend.error)}")
        elif backend.is_partial:
            lines.append(f"  [{display(backend.backend.text)}] PARTIAL: {display(backend.partial_text())}"
                         + (" (fails the check)" if report.fail_partial else ""))
        for o in backend.outputs:
            if o.status == "match" and not matches:
                continue
            where = f"[{display(o.backend)}{f' #{o.iteration}' if many else ''}]"
            dtype, shape = produced(o)
            text = f"  {where} {display(o.output)}: {o.status.upper()} ({dtype} [{_shape(shape)}])"
            if o.status in ("match", "mismatch"):
                text += _errors(o)
            if o.detail:
                text += f" - {display(o.detail)}"
            lines.append(text)
    return "\n".join(lines)


def produced(o: OutputResult) -> "tuple[str, list]":
    """A result line's bracket: the dtype and shape the backend produced, whatever the status (the
    oracle's when it produced nothing: UNSUPPORTED, an unread value); a MISMATCH's or DEVIATION's
    detail names the expected ones where they differ."""
    if o.actual_shape is None:
        return o.expected_dtype, o.expected_shape
    return o.actual_dtype or o.expected_dtype, o.actual_shape


def verdict(report: CheckReport) -> str:
    counts: "dict[str, int]" = {}
    for backend in report.backends:
        for o in backend.outputs:
            counts[o.status] = counts.get(o.status, 0) + 1
    errors = sum(1 for b in report.backends if b.error)
    # A run stopped by a later feed set's error covers only the sets before it: the verdict says so.
    partial = (f"; {report.iterations} feed set{'s' if report.iterations > 1 else ''} checked, then stopped at "
               f"{report.stopped.split(':', 1)[0]}" if report.stopped else "")
    # A backend that ran part of the model is never a plain pass: the verdict names it and its nodes.
    partial_backends = "; ".join(f"{b.backend} ({b.partial_text()})" for b in report.partial)
    failing_partial = report.fail_partial and report.partial
    if counts.get("mismatch") or errors or failing_partial:
        parts = [f"{counts[s]} {s.upper()}" for s in ("mismatch",) if counts.get(s)]
        parts += [f"{errors} backend ERROR"] if errors else []
        parts += [f"{len(report.partial)} PARTIAL backend: {partial_backends}"] if failing_partial else []
        if partial_backends and not failing_partial:
            parts.append(f"PARTIAL: {partial_backends}")
        return "FAILED: " + ", ".join(parts) + partial
    text = "all outputs match ONNX semantics"
    others = [f"{counts[s]} {s}" for s in ("deviation", "unsupported", "nondeterministic") if counts.get(s)]
    if others:
        text = "no mismatch (" + ", ".join(others) + ")"
    if partial_backends:
        text += f"; PARTIAL: {partial_backends}"
    if report.unavailable:       # a backend that never ran is not a match: say so in the verdict too
        text += f"; not run (unavailable here): {', '.join(report.unavailable)}"
    if report.interrupted:       # not a pass: the sets after Ctrl-C were never checked
        text += f"; interrupted after {report.iterations} feed set{'s' if report.iterations > 1 else ''}"
    return text + partial


# The text report gives at most this many PARTIAL lines per backend (one per reason).
_PARTIAL_LINES = 20


def format_text(report: CheckReport) -> str:
    from .compare import partial_reasons
    lines = [f"check {display(report.model)} (feature level {report.feature_level}, oracle {report.oracle['description']})",
             format_placement(report.placement, report.feature_level)]
    if report.regions:
        lines.append("onnx regions:")
        lines += [f"  {display(name)} {display(engine)}" for name, engine in report.regions.items()]
    fallbacks = report.oracle.get("fallbacks") or []
    for fb in fallbacks:
        lines.append(f"oracle: node {display(fb['node'])} evaluated by {fb['engine']} ({display(fb['reason'])})")
    if report.feeds:
        lines.append(display(feeds_line(report.feeds)))
    if report.defaults:
        lines.append(defaults_line(report.defaults))
    lines += report.feed_notes
    lines.append("results:")
    lines.append(format_results(report))
    for backend in report.backends:
        if backend.ran and backend.backend.is_provider:
            lines.append(f"  [{backend.backend}] ran {backend.ran}")
        reasons = partial_reasons(backend.partial)
        for why, nodes in reasons[:_PARTIAL_LINES]:     # one line per reason
            lines.append(f"  [{display(backend.backend.text)}] PARTIAL: node{'s' if len(nodes) > 1 else ''} "
                         f"{name_list(nodes, 4)}: {display(why)}")
        if len(reasons) > _PARTIAL_LINES:
            rest = sum(len(nodes) for _, nodes in reasons[_PARTIAL_LINES:])
            lines.append(f"  [{display(backend.backend.text)}] PARTIAL: ... {rest} more nodes (--json lists every one)")
        for note in backend.placement_notes:
            lines.append(f"  [{display(backend.backend.text)}] {display(note)}")
        lines += run_time_lines(report, backend.backend.text)
        if backend.fed_from_oracle:
            lines.append(f"  [{display(backend.backend.text)}] nodes it has no kernel for "
                         f"({', '.join(map(display, backend.unsupported_nodes))}) were cut out; their values "
                         f"{', '.join(map(display, backend.fed_from_oracle))} came from the oracle")
    lines += control_flow_lines(report)
    for name, reason in report.unavailable.items():
        lines.append(f"  [{display(name)}] UNAVAILABLE here, not run: {display(reason)}")
    lines += note_lines(report)
    lines.append("verdict: " + verdict(report))
    return "\n".join(lines)


def run_time_lines(report: CheckReport, backend: str) -> "list[str]":
    """A lowered backend's run-time matches whose rule declined on some call: those calls ran on
    ONNX (text and -q alike)."""
    lines = []
    entries = report.run_time_fallbacks.get(backend, [])
    for entry in entries[:_RUN_TIME_LINES]:
        sets = entry["feed_sets"]
        where = (f" (feed set{'s' if len(sets) > 1 else ''} {name_list([f'#{i}' for i in sets], 8, 'feed sets')})"
                 if report.iterations > 1 else "")
        lines.append(f"  [{display(backend)}] ran on ONNX at run time: {name_list(entry['nodes'])} (rule {entry['rule']}), "
                     f"{entry['calls']} of {entry['of_calls']} call{'s' if entry['of_calls'] > 1 else ''}{where}: "
                     f"{display(entry['reason'])}")
    if len(entries) > _RUN_TIME_LINES:
        lines.append(f"  [{display(backend)}] ran on ONNX at run time: ... {len(entries) - _RUN_TIME_LINES} more "
                     "(--json lists every one)")
    return lines


# The text report gives at most this many run-time fallback lines per backend (one per match and reason).
_RUN_TIME_LINES = 10


def note_lines(report: CheckReport) -> "list[str]":
    """The notes under the results (text, -q and Markdown): what a pass did not compare, and what
    the model declares otherwise than it computes."""
    return empty_nonzero_lines(report) + declared_shape_lines(report)


def declared_shape_lines(report: CheckReport) -> "list[str]":
    """A graph output whose shape contradicts the model's declaration: every engine may agree on
    it (a MATCH), and still the model says otherwise."""
    def dims(shape: list) -> str:
        return "[" + ", ".join("?" if d is None else display(str(d)) for d in shape) + "]"
    gave = _ORACLE_WORDS.get(report.oracle.get("kind", ""), "the oracle (ONNX semantics)")
    return [f"  note: the model declares output '{display(name)}' {dims(entry['declared'])}; {gave} gave "
            f"{dims(entry['oracle'])} at feed set #0, so the declaration does not hold at these "
            "feeds (onnxruntime warns of it and runs the model)" for name, entry in report.declared_shapes.items()]


# Who gave the expected values, by oracle kind (OracleKind's values): a golden file is not ONNX semantics.
_ORACLE_WORDS = {"golden": "the saved outputs of --oracle", "ort-cpu": "the oracle (onnxruntime's CPU provider)"}


def empty_nonzero_lines(report: CheckReport) -> "list[str]":
    """A check whose NonZero nodes never returned a coordinate compared none: say so."""
    if not report.empty_nonzero:
        return []
    every = "the NonZero node" if len(report.empty_nonzero) == 1 else f"all {len(report.empty_nonzero)} NonZero nodes"
    sets = "this feed set" if report.iterations == 1 else f"all {report.iterations} feed sets"
    never = report.nonzero_never_ran
    if len(never) == len(report.empty_nonzero):     # none of them ran: what they were fed is not why
        return [f"  note: {every} ({name_list(never, 4)}) never ran at {sets} ({_NOT_RUN}), so no coordinate "
                "was compared; feed values that take the branch or run the body that holds it"]
    empty = [name for name, info in (report.feeds or {}).get("inputs", {}).items() if 0 in info.get("shape", [1])]
    remedy = (f"{name_list(empty, 4, 'inputs')} fed empty (a dimension of size 0{_zero_dims(report)}): to compare "
              "coordinates, give every dimension a size of 1 or more" if empty else
              "feed non-zeros with --inputs, --data-loader-script, --zero-fraction or --val-range")
    ran = f" ({name_list(never, 4)} never ran: {_NOT_RUN})" if never else ""
    return [f"  note: {every} ({name_list(report.empty_nonzero, 4)}) returned no coordinate at {sets}{ran}, so no "
            f"coordinate was compared; {remedy}"]


# why a NonZero inside a body never ran
_NOT_RUN = "an If branch not taken, or a Loop / Scan body that did not iterate"


def _zero_dims(report: CheckReport) -> str:
    """', seq=0' for the symbolic dimensions the random feeds drew at size 0, '' when none is known."""
    dims = [name for name, size in (report.feeds or {}).get("dims", {}).items() if size == 0]
    return f": {', '.join(f'{display(name)}=0' for name in dims)}" if dims else ""


def format_quiet(report: CheckReport) -> str:
    """`check -q`: every result line that is not MATCH (errors, unavailable backends included),
    then the verdict, so nothing that did not run or did not match hides behind it."""
    lines = [line for line in format_results(report, matches=False).splitlines() if line]
    lines += [line for backend in report.backends for line in run_time_lines(report, backend.backend.text)]
    lines += [f"  [{display(backend)}] UNAVAILABLE here, not run: {display(reason)}"
              for backend, reason in report.unavailable.items()]
    lines += note_lines(report)
    return "\n".join(lines + ["verdict: " + verdict(report)])


def control_flow_lines(report: CheckReport) -> "list[str]":
    """Control flow (issue 11): how many branches / iterations ran a lowered body per backend."""
    return [f"  [{backend}] control flow: {count} branch / iteration runs of lowered bodies"
            for backend, count in report.control_flow_iterations.items()]


def format_timing(report: CheckReport) -> str:
    parts = [f"{b.backend} {b.seconds:.3f} s" for b in report.backends if not b.backend.is_saved]
    return "time: " + ", ".join(parts)


def format_markdown(report: CheckReport) -> str:
    text = verdict(report)
    text = text if report.ok else f"**{text}**"
    many = report.iterations > 1        # the iteration column: seeds SEED + iteration
    lines = [f"### dml-lower check: {markdown_code(report.model, in_table=False)}", "",
             f"Feature level {report.feature_level}; oracle: {markdown_cell(report.oracle['description'])}; verdict: {text}.", "",
             *([markdown_cell("Feeds" + feeds_line(report.feeds)[len("feeds"):]) + ".", ""] if report.feeds else []),
             "| backend | " + ("iteration | " if many else "") +
             "output | status | dtype | shape | max abs err | max rel err | detail |",
             "|---|" + ("---|" if many else "") + "---|---|---|---|---|---|---|"]
    for backend in report.backends:
        if backend.error:
            lines.append(f"| {markdown_cell(backend.backend.text)} | " + ("| " if many else "") + f"- | ERROR | | | | | {markdown_cell(backend.error)} |")
        elif backend.is_partial:
            lines.append(f"| {markdown_cell(backend.backend.text)} | " + ("| " if many else "") +
                         f"- | PARTIAL | | | | | {markdown_cell(backend.partial_text())} |")
        for o in backend.outputs:
            abs_err = "" if o.max_abs_error is None else f"{o.max_abs_error:.3g}"
            rel_err = "" if o.max_rel_error is None else _rel(o.max_rel_error)
            dtype, shape = produced(o)
            lines.append(f"| {markdown_cell(o.backend)} | " + (f"{o.iteration} | " if many else "") +
                         f"{markdown_code(o.output)} | {o.status} | {dtype} | "
                         f"{_shape(shape)} | {abs_err} | {rel_err} | {markdown_cell(o.detail)} |")
    for line in note_lines(report):
        note = line.strip()[len("note: "):]
        lines.append(f"\n{markdown_cell(note[:1].upper() + note[1:])}.")
    lines += ["", "| node(s) | placement | rule | DirectML operators / reason |", "|---|---|---|---|"]
    for p in report.placement:
        what = " + ".join(p.dml_operators) or "none (empty result)" if p.status == "lowered" else p.reason
        lines.append(f"| {markdown_cell(', '.join(p.onnx_nodes))} | {p.status} | {p.rule} | {markdown_cell(what)} |")
    lines += ["", "Backends: " + "; ".join(f"{markdown_code(b.backend.text, in_table=False)} = {markdown_cell(b.backend.description)}"
                                            + (f" (ran {markdown_cell(b.ran)})" if b.ran and b.backend.is_provider else "")
                                            for b in report.backends)]
    return "\n".join(lines) + "\n"
