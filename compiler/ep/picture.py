"""`inspect --ep dml --html OUT.html`: the predicted DML EP placement as a picture, one
self-contained HTML page with an inline SVG (no script or style from elsewhere, opens offline):
the graph onnxruntime partitions (after its level-1 optimisations), each node coloured by its
predicted provider, the DirectML operators this project lowers an anchor to, the DML nodes that
cut onnxruntime's fused DML graph (no graph support: Shape, Size, NonZero, ...; control flow), and
the device-host copies as red edges. Hovering a node shows its reason. Bodies and the nodes
level 1 removed are listed under the picture, not drawn.

Layout: longest-path layers left to right, nodes in a layer in graph order."""
from __future__ import annotations

import html
import json
from collections import Counter

import onnx

from onnx_dml_lowering.lowering.onnx_graphs import graph_attributes

from .placement import CPU, DML, NONE, REMOVED
from .registry import dml_kernels, schema

COLOURS = {DML: "#2f6fd0", CPU: "#e08a1e", NONE: "#c62828"}
LABELS = {DML: "DmlExecutionProvider", CPU: "CPUExecutionProvider", NONE: "no provider (session fails)"}
W, H, GAP_X, GAP_Y, MARGIN = 170, 40, 60, 14, 20


def _esc(text: str) -> str:
    return html.escape(str(text), quote=True)


def _cuts_fusion(node: onnx.NodeProto, opset: int) -> bool:
    """A DML node onnxruntime never puts in a fused DML graph: its kernel has no graph support
    (DmlGraphSupport::NotSupported), or it holds a body."""
    if graph_attributes(node):
        return True
    sch = schema(node.op_type, node.domain, opset)
    kernel = dml_kernels(node.op_type, node.domain).get(sch.since_version) if sch else None
    return kernel is not None and kernel.graph_support == "NotSupported"


def _layers(graph: onnx.GraphProto) -> "list[int]":
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    layer: "list[int]" = []
    for node in graph.node:
        ins = [layer[producer[x]] for x in node.input if x in producer and producer[x] < len(layer)]
        layer.append(1 + max(ins) if ins else 0)
    return layer


def render(report: dict, graph_model: onnx.ModelProto, title: str) -> str:
    """The page for an inspect report that holds `ep_placement`, drawn over `graph_model` (the
    graph the prediction ran on)."""
    placement = report["ep_placement"]
    by_node = {n["node"]: n for n in placement["nodes"]}
    lowered = {a["node"]: a for a in report.get("anchors", []) if a.get("lowers")}
    graph = graph_model.graph
    opset = next((o.version for o in graph_model.opset_import if o.domain in ("", "ai.onnx")), 0)
    layers = _layers(graph)
    rows: "Counter[int]" = Counter()
    pos = {}
    for index, node in enumerate(graph.node):
        pos[node.name] = (MARGIN + layers[index] * (W + GAP_X), MARGIN + 40 + rows[layers[index]] * (H + GAP_Y))
        rows[layers[index]] += 1
    width = MARGIN * 2 + (max(layers, default=0) + 1) * (W + GAP_X)
    height = MARGIN * 2 + 40 + max(rows.values(), default=1) * (H + GAP_Y)
    producer = {o: n.name for n in graph.node for o in n.output if o}
    copies = {(c["value"], target): c["copy"] for c in placement["copies"] for target in c["to"]}
    parts = []
    drawn_copies = 0
    for node in graph.node:                      # edges first, under the nodes
        x2, y2 = pos[node.name]
        for value in dict.fromkeys(v for v in node.input if v in producer):
            x1, y1 = pos[producer[value]]
            a, b = (x1 + W, y1 + H / 2), (x2, y2 + H / 2)
            copy = copies.get((value, node.name))
            mid = (a[0] + b[0]) / 2
            path = f"M{a[0]},{a[1]} C{mid},{a[1]} {mid},{b[1]} {b[0]},{b[1]}"
            if copy:
                drawn_copies += 1
                parts.append(f'<path class="edge copy" data-copy="{_esc(copy)}" d="{path}">'
                             f'<title>{_esc(copy)} of {_esc(value)}</title></path>'
                             f'<text class="copylabel" x="{mid}" y="{(a[1] + b[1]) / 2 - 3}">{_esc(copy)}</text>')
            else:
                parts.append(f'<path class="edge" d="{path}"/>')
    for node in graph.node:
        entry = by_node.get(node.name, {})
        provider = entry.get("provider", "?")
        x, y = pos[node.name]
        cut = provider == DML and _cuts_fusion(node, opset)
        anchor = lowered.get(node.name)
        second = ("-> " + " + ".join(anchor["dml_operators"])) if anchor and anchor["dml_operators"] else node.name
        tip = f"{node.name} ({node.op_type}): {provider}" + (f" - {entry['reason']}" if entry.get("reason") else "") \
            + (" - cuts the fused DML graph" if cut else "") \
            + (f" - lowered by rule {anchor['rule']}" if anchor else "")
        cut_class = ' class="cut"' if cut else ""
        parts.append(
            f'<g class="node" data-node="{_esc(node.name)}" data-provider="{_esc(provider)}"'
            f' data-cut="{int(cut)}" data-lowered="{int(bool(anchor))}"><title>{_esc(tip)}</title>'
            f'<rect x="{x}" y="{y}" width="{W}" height="{H}" rx="5" fill="{COLOURS.get(provider, "#777")}"'
            f'{cut_class}/>'
            f'<text x="{x + 6}" y="{y + 16}" class="op">{_esc(node.op_type[:24])}</text>'
            f'<text x="{x + 6}" y="{y + 32}" class="name">{_esc(second[:28])}</text></g>')
    counts = Counter(n["provider"] for n in placement["nodes"])
    legend = " ".join(f'<span class="key" style="background:{c}"></span>{_esc(LABELS[p])}: {counts.get(p, 0)}'
                      for p, c in COLOURS.items())
    removed = [n for n in placement["nodes"] if n["provider"] == REMOVED]
    drawn = {n.name for n in graph.node}
    elsewhere = [n for n in placement["nodes"] if n["provider"] != REMOVED and n["node"] not in drawn]
    listing = "".join(f"<li>{_esc(n['node'])} ({_esc(n['op_type'])}): {_esc(n['provider'])}"
                      f"{' - ' + _esc(n['reason']) if n['reason'] else ''}</li>" for n in elsewhere + removed)
    warnings = "".join(f"<li>{_esc(w)}</li>" for w in placement["warnings"])
    expected = {"drawn": len(graph.node), "copies": drawn_copies,
                "providers": dict(Counter(by_node.get(n.name, {}).get("provider", "?") for n in graph.node))}
    return PAGE.format(title=_esc(title), legend=legend, width=width, height=height, svg="\n".join(parts),
                       copies=len(placement["copies"]), removed=len(removed), listing=listing, warnings=warnings,
                       expected=_esc(json.dumps(expected, sort_keys=True)), ort=_esc(placement["onnxruntime"]))


# The script only measures what the browser drew (a self-test a headless browser can read back);
# the page shows everything without it.
PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>DML EP placement: {title}</title>
<style>
body {{ font: 13px sans-serif; margin: 12px; }}
.key {{ display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 14px; vertical-align: middle; }}
.edge {{ fill: none; stroke: #999; stroke-width: 1.2; }}
.edge.copy {{ stroke: #d00; stroke-width: 3; stroke-dasharray: 6 3; }}
.copylabel {{ fill: #d00; font-size: 10px; }}
.node text {{ fill: #fff; font-size: 11px; }}
.node text.op {{ font-weight: bold; }}
rect.cut {{ stroke: #000; stroke-width: 3; stroke-dasharray: 4 2; }}
</style></head><body>
<h2>Predicted DirectML EP placement: {title}</h2>
<p>onnxruntime {ort} registration table, after onnxruntime's level-1 optimisations. {legend}
<span class="key" style="background:#fff;border:3px dashed #000"></span>cuts the fused DML graph
<span class="key" style="background:#d00"></span>device-host copy ({copies}); {removed} nodes removed before partitioning
(listed below). Hover a node for its reason.</p>
<svg id="graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">
{svg}
</svg>
<h3>Not drawn: removed before partitioning, or inside bodies</h3><ul>{listing}</ul>
<h3>Warnings</h3><ul>{warnings}</ul>
<pre id="expected" hidden>{expected}</pre>
<pre id="rendered" hidden></pre>
<script>
(function () {{
  var out = {{drawn: 0, copies: 0, providers: {{}}, colours: {{}}}};
  document.querySelectorAll("g.node").forEach(function (g) {{
    var box = g.getBBox();
    if (box.width > 0 && box.height > 0) {{
      out.drawn += 1;
      var p = g.getAttribute("data-provider");
      out.providers[p] = (out.providers[p] || 0) + 1;
      out.colours[p] = getComputedStyle(g.querySelector("rect")).fill;
    }}
  }});
  document.querySelectorAll("path.copy").forEach(function (e) {{
    if (e.getTotalLength() > 0 && getComputedStyle(e).stroke === "rgb(221, 0, 0)") out.copies += 1;
  }});
  document.getElementById("rendered").textContent = JSON.stringify(out);
}})();
</script></body></html>
"""
