"""`inspect --ep dml --html OUT.html`: the predicted DML EP placement as one self-contained page
(inline SVG, CSS and script written here; nothing from the network).

It opens on the overview (overview.py): blocks by stage and side (DirectML stretches with node
counts, CPU islands with their reason, lowered NonZero / eye / mask regions), the data and copy
edges between them counted, laid out in columns by stage and wrapped into bands so that the whole
fits one screen. The script (picture.js) opens a block to its nodes, searches names and op types,
shows each node's provider, reason and rule, lists the copies and zooms; the overview reads without
it. Every name goes through ir.display (html_text for markup, script_json for the data)."""
from __future__ import annotations

import math
from collections import Counter
from importlib import resources

import onnx

from onnx_dml_lowering.ir.display import display, html_text, script_json
from onnx_dml_lowering.lowering.onnx_graphs import graph_attributes, standard_opset

from .overview import Block, Overview, build
from .placement import CPU, DML, NONE, REMOVED
from .registry import dml_kernels, schema

COLOURS = {DML: "#2f6fd0", CPU: "#e08a1e", NONE: "#c62828"}
LOWERED_COLOUR = "#2e9d5b"
LABELS = {DML: "DmlExecutionProvider", CPU: "CPUExecutionProvider", NONE: "no provider (session fails)"}
KIND_COLOUR = {"dml": COLOURS[DML], "cpu": COLOURS[CPU], "none": COLOURS[NONE], "lowered": LOWERED_COLOUR}
BW, BH, GX, GY, BAND_GAP, MARGIN = 236, 62, 90, 18, 56, 16
SCREEN = (1190, 950)       # the drawing area beside the side panel at 1600 x 1000
READABLE = 0.8             # the smallest scale at which a block's 13 px text still reads


def _cuts_fusion(node: onnx.NodeProto, opset: int, version: str) -> bool:
    """A DML node onnxruntime never puts in a fused DML graph: its kernel (in the registration
    table of onnxruntime `version`, the one the placement modelled) has no graph support
    (DmlGraphSupport::NotSupported), or it holds a body."""
    if graph_attributes(node):
        return True
    sch = schema(node.op_type, node.domain, opset)
    kernel = dml_kernels(node.op_type, node.domain, version).get(sch.since_version) if sch else None
    return kernel is not None and kernel.graph_support == "NotSupported"


def _columns(blocks: "list[Block]") -> "dict[int, list[Block]]":
    stages: "dict[int, list[Block]]" = {}
    for block in blocks:
        stages.setdefault(block.stage, []).append(block)
    return stages


def layout(blocks: "list[Block]") -> "tuple[dict[int, tuple[float, float]], float, float]":
    """Block positions: stages as columns, wrapped into the number of bands that draws the whole at
    the largest scale on one screen. Returns (block -> (x, y), width, height)."""
    stages = _columns(blocks)
    order = sorted(stages)
    if not order:                               # nothing left to partition (no node, or all folded away)
        return {}, float(SCREEN[0]), float(SCREEN[1])
    best: "tuple[float, int]" = (0.0, 1)
    for bands in range(1, len(order) + 1):      # the fewest bands that read, else the largest scale
        per = math.ceil(len(order) / bands)
        rows = [max(len(stages[s]) for s in order[b * per:(b + 1) * per]) for b in range(bands)
                if order[b * per:(b + 1) * per]]
        wide = 2 * MARGIN + per * (BW + GX) - GX
        tall = 2 * MARGIN + sum(r * (BH + GY) - GY for r in rows) + BAND_GAP * (len(rows) - 1)
        scale = min(1.0, SCREEN[0] / wide, SCREEN[1] / tall)
        if scale > best[0]:
            best = (scale, bands)
        if scale >= READABLE:
            break
    per = math.ceil(len(order) / best[1])
    pos: "dict[int, tuple[float, float]]" = {}
    top, width, height = float(MARGIN), 0.0, 0.0
    for start in range(0, len(order), per):
        band = order[start:start + per]
        for col, s in enumerate(band):
            for row, block in enumerate(stages[s]):
                pos[block.index] = (MARGIN + col * (BW + GX), top + row * (BH + GY))
        width = max(width, 2 * MARGIN + len(band) * (BW + GX) - GX)
        top += max(len(stages[s]) for s in band) * (BH + GY) - GY + BAND_GAP
        height = top - BAND_GAP + MARGIN
    return pos, max(width, SCREEN[0]), max(height, SCREEN[1])   # never drawn larger than life


def _fit(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "\u2026"


def block_lines(block: Block, ops: "list[str]") -> "tuple[str, str, str]":
    """The three lines a block shows (plain text, names displayed; escaped where drawn)."""
    count = f"{len(block.nodes)} node{'s' if len(block.nodes) != 1 else ''}"
    head = {"dml": f"DirectML \u00b7 {count}", "cpu": f"CPU island \u00b7 {count}",
            "none": f"no provider \u00b7 {count}", "lowered": f"lowered \u00b7 {count}"}[block.kind]
    if block.kind == "lowered":
        why = f"rule {block.why}, on {'DirectML' if block.provider == DML else block.provider}"
    else:
        why = block.why or "runs on the GPU"
    return head, display(why), display(block.op_summary(ops))


def _block_svg(block: Block, xy: "tuple[float, float]", ops: "list[str]") -> str:
    x, y = xy
    head, why, summary = block_lines(block, ops)
    tip = f"{head}; stage {block.stage} (copies behind it); {why}; {summary}"
    return (f'<g class="block" data-block="{block.index}" data-kind="{block.kind}" tabindex="0" role="button"'
            f' aria-label="{html_text(tip)}"><title>{html_text(tip)}</title>'
            f'<rect x="{x}" y="{y}" width="{BW}" height="{BH}" rx="6" fill="{KIND_COLOUR[block.kind]}"/>'
            f'<text x="{x + 8}" y="{y + 18}" class="head">{html_text(head)}</text>'
            f'<text x="{x + 8}" y="{y + 36}">{html_text(_fit(why, 34))}</text>'
            f'<text x="{x + 8}" y="{y + 53}">{html_text(_fit(summary, 34))}</text></g>')


LW, LH = 60, 18            # a copy count's label


def _curve(a: "tuple[float, float]", b: "tuple[float, float]") -> "list[tuple[float, float]]":
    """The cubic Bezier's four points from block a to block b: right side to left side, or, into
    the next band (or the same column), bottom to top."""
    (x1, y1), (x2, y2) = a, b
    start, end = (x1 + BW, y1 + BH / 2), (x2, y2 + BH / 2)
    if end[0] <= start[0]:
        start, end = (x1 + BW / 2, y1 + BH), (x2 + BW / 2, y2)
        return [start, (start[0], start[1] + 40), (end[0], end[1] - 40), end]
    mid = (start[0] + end[0]) / 2
    return [start, (mid, start[1]), (mid, end[1]), end]


def _at(points: "list[tuple[float, float]]", t: float) -> "tuple[float, float]":
    (p0, p1, p2, p3), u = points, 1 - t
    return (u ** 3 * p0[0] + 3 * u * u * t * p1[0] + 3 * u * t * t * p2[0] + t ** 3 * p3[0],
            u ** 3 * p0[1] + 3 * u * u * t * p1[1] + 3 * u * t * t * p2[1] + t ** 3 * p3[1])


def _label_spot(points: "list[tuple[float, float]]", taken: "list[tuple[float, float, float, float]]"
                ) -> "tuple[float, float]":
    """Where on the curve a label covers no block and no other label (the middle if nowhere)."""
    for t in sorted((k / 40 for k in range(1, 40)), key=lambda t: abs(t - 0.5)):     # nearest the middle first
        x, y = _at(points, t)
        box = (x - LW / 2, y - LH / 2, x + LW / 2, y + LH / 2)
        if not any(box[0] < r[2] and r[0] < box[2] and box[1] < r[3] and r[1] < box[3] for r in taken):
            taken.append(box)
            return x, y
    return _at(points, 0.5)


def _edge_svg(a: int, b: int, counts: "list[int]", pos: "dict[int, tuple[float, float]]",
              taken: "list[tuple[float, float, float, float]]") -> "tuple[str, str]":
    """The edge's path, and its copy count's label (drawn after every edge and block, placed where
    it covers neither a block nor another label: `taken` holds their boxes)."""
    points = _curve(pos[a], pos[b])
    d = "M{},{} C{},{} {},{} {},{}".format(*(c for point in points for c in point))
    values, copies = counts
    if not copies:
        width = 1 + min(3.0, math.log10(values + 1))
        return f'<path class="edge" data-from="{a}" data-to="{b}" d="{d}" stroke-width="{width:.1f}"/>', ""
    label = f"{copies} cop{'ies' if copies != 1 else 'y'}"
    lx, ly = _label_spot(points, taken)
    return (f'<path class="edge copy" data-from="{a}" data-to="{b}" data-copies="{copies}" d="{d}"/>',
            f'<g class="copylabel" data-from="{a}" data-to="{b}"><rect x="{lx - LW / 2}" y="{ly - LH / 2}" '
            f'width="{LW}" height="{LH}" rx="4"/><text x="{lx}" y="{ly + 3}">{label}</text></g>')


def overview_svg(view: Overview, ops: "list[str]") -> "tuple[str, float, float]":
    pos, width, height = layout(view.blocks)
    taken = [(x, y, x + BW, y + BH) for x, y in pos.values()]
    edges = [_edge_svg(a, b, counts, pos, taken) for (a, b), counts in sorted(view.block_edges.items())]
    parts = [path for path, _ in edges] + [_block_svg(block, pos[block.index], ops) for block in view.blocks]
    parts += [label for _, label in edges if label]
    return "\n".join(parts), width, height


def page_data(report: dict, graph_model: onnx.ModelProto, view: Overview, lowered: "dict[str, dict]") -> dict:
    """What the script needs, names displayed (the data goes in through script_json)."""
    placement = report["ep_placement"]
    by_node = {n["node"]: n for n in placement["nodes"]}
    graph = graph_model.graph
    opset = standard_opset(graph_model, 0)
    providers = [DML, CPU, NONE, "?"]
    reasons: "dict[str, int]" = {}
    nodes = []
    for i, node in enumerate(graph.node):
        entry = by_node.get(node.name, {})
        provider = entry.get("provider", "?")
        anchor = lowered.get(node.name)
        rule = display(f"{anchor['rule']} -> {' + '.join(anchor['dml_operators']) or 'no operator'}") if anchor else ""
        reason = display(entry.get("reason", ""))
        nodes.append([display(node.name), display(node.op_type), providers.index(provider) if provider in providers
                      else 3, reasons.setdefault(reason, len(reasons)), rule,
                      int(provider == DML and _cuts_fusion(node, opset, placement["onnxruntime"])), view.node_block[i], view.layer[i],
                      view.inputs[i], entry.get("since_version")])
    copies = [{"kind": c["copy"], "value": display(c["value"]), "from": display(c["from"]),
               "to": [display(t) for t in c["to"]], "src": src, "dst": dst}
              for c, (src, dst) in zip(placement["copies"], view.copy_blocks)]
    blocks = [{"kind": b.kind, "stage": b.stage, "lines": block_lines(b, [n[1] for n in nodes]),
               "nodes": len(b.nodes)} for b in view.blocks]
    return {"providers": providers, "reasons": list(reasons), "nodes": nodes, "copies": copies, "blocks": blocks}


def _legend(counts: "Counter[str]") -> str:
    keys = [(KIND_COLOUR["dml"], f"DirectML: {counts.get(DML, 0)} nodes"),
            (KIND_COLOUR["cpu"], f"CPU: {counts.get(CPU, 0)} nodes"),
            (KIND_COLOUR["lowered"], "lowered by this project (NonZero / eye / mask)"),
            (KIND_COLOUR["none"], f"no provider: {counts.get(NONE, 0)} nodes")]
    items = [f'<li><span class="key" style="background:{c}"></span>{html_text(t)}</li>' for c, t in keys]
    items.append('<li><span class="key line copy"></span>device-host copies (count on the edge)</li>')
    items.append('<li><span class="key line"></span>data between blocks (no copy)</li>')
    items.append('<li><span class="key cut"></span>cuts the fused DML graph (node view)</li>')
    return "".join(items)


def _copies_list(report: dict) -> str:
    return "".join(f'<li data-copy="{k}" tabindex="0">{html_text(c["copy"])} of {html_text(repr(c["value"]))}: '
                   f'{html_text(c["from"])} \u2192 {html_text(", ".join(c["to"]))}</li>'
                   for k, c in enumerate(report["ep_placement"]["copies"]))


def render(report: dict, graph_model: onnx.ModelProto, title: str) -> str:
    """The page for an inspect report that holds `ep_placement`, drawn over `graph_model` (the
    graph the prediction ran on)."""
    placement = report["ep_placement"]
    lowered_anchors = {a["node"]: a for a in report.get("anchors", []) if a.get("lowers")}
    lowered_rules = {member: a["rule"] for a in lowered_anchors.values() for member in a["nodes"]}
    view = build(placement, graph_model.graph, lowered_rules)
    data = page_data(report, graph_model, view, lowered_anchors)
    svg, width, height = overview_svg(view, [n[1] for n in data["nodes"]])
    drawn = Counter(by["provider"] for by in placement["nodes"] if by["provider"] != REMOVED)
    in_graph = {n.name for n in graph_model.graph.node}
    elsewhere = [n for n in placement["nodes"] if n["node"] not in in_graph]
    listing = "".join(f"<li>{html_text(n['node'])} ({html_text(n['op_type'])}): {html_text(n['provider'])}"
                      f"{' - ' + html_text(n['reason']) if n['reason'] else ''}</li>" for n in elsewhere)
    expected = {"blocks": len(view.blocks), "copy_edges": sum(1 for c in view.block_edges.values() if c[1]),
                "copies": len(placement["copies"]), "nodes": len(graph_model.graph.node)}
    summary = (f"{len(graph_model.graph.node)} nodes in {len(view.blocks)} blocks: DirectML {drawn.get(DML, 0)}, "
               f"CPU {drawn.get(CPU, 0)}; {len(placement['copies'])} device-host copies")
    script = resources.files(__package__).joinpath("picture.js").read_text(encoding="utf-8")
    style = resources.files(__package__).joinpath("picture.css").read_text(encoding="utf-8")
    return PAGE.format(
        title=html_text(title), ort=html_text(placement["onnxruntime"]), summary=html_text(summary),
        legend=_legend(drawn), svg=svg, width=f"{width:.0f}", height=f"{height:.0f}", copies=_copies_list(report),
        copy_count=len(placement["copies"]), listing=listing, not_drawn=len(elsewhere), style=style, script=script,
        warnings="".join(f"<li>{html_text(w)}</li>" for w in placement["warnings"]),
        data=script_json(data), expected=script_json(expected))


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>DML EP placement: {title}</title>
<style>{style}</style></head><body>
<main id="stage">
<div id="toolbar"><button id="back" hidden>\u2190 overview</button> <span id="where">overview: blocks by stage
(copies behind them), click a block for its nodes</span>
<span class="zoom"><button id="zoomin" title="zoom in">+</button><button id="zoomout" title="zoom out">\u2212</button>
<button id="fit" title="fit to the screen">fit</button></span></div>
<svg id="overview" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" preserveAspectRatio="xMidYMin meet"
 data-width="{width}" data-height="{height}" role="img" aria-label="placement overview">
{svg}
</svg>
<svg id="detail" xmlns="http://www.w3.org/2000/svg" hidden></svg>
</main>
<aside id="panel">
<h1>DML EP placement: {title}</h1>
<p id="summary">{summary}</p>
<p class="small">Predicted from onnxruntime {ort}'s registration table, after onnxruntime's level-1 optimisations.</p>
<h2>Legend</h2><ul id="legend">{legend}</ul>
<h2>Search</h2><input id="search" type="search" placeholder="node name or op type" aria-label="search nodes">
<p id="found" class="small"></p><ol id="results"></ol>
<h2>Selected</h2><dl id="selected"><dt>nothing</dt><dd>hover or click a node</dd></dl>
<h2>Copies ({copy_count})</h2><ul id="copies">{copies}</ul>
<details><summary>Not drawn: {not_drawn} removed before partitioning or inside bodies</summary><ul>{listing}</ul></details>
<details><summary>Warnings</summary><ul>{warnings}</ul></details>
</aside>
<script type="application/json" id="data">{data}</script>
<script type="application/json" id="expected">{expected}</script>
<pre id="rendered" hidden></pre>
<script>{script}</script></body></html>
"""
