// The placement picture's behaviour (compiler/ep/picture.py inlines it into the page). Names come
// from the data element, already displayed by Python; they only ever reach the page as text
// (textContent, setAttribute), never as markup.
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("data").textContent);
  var COLOUR = {0: "#2f6fd0", 1: "#e08a1e", 2: "#c62828", 3: "#777777"};
  var LOWERED = "#2e9d5b";
  var NW = 170, NH = 38, NGX = 46, NGY = 12;
  var overview = document.getElementById("overview");
  var detail = document.getElementById("detail");
  var active = overview, openBlock = -1, nodeBoxes = {};
  var byBlock = data.blocks.map(function () { return []; });
  data.nodes.forEach(function (n, i) { byBlock[n[6]].push(i); });

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVGNS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, content, cls) {
    var t = el("text", {x: x, y: y}, parent);
    if (cls) t.setAttribute("class", cls);
    t.textContent = content;
    return t;
  }
  function fitted(s, n) { return s.length <= n ? s : s.slice(0, n - 1) + "\u2026"; }

  // zoom and pan: the active drawing's viewBox
  function box(svg) { return svg.getAttribute("viewBox").split(" ").map(Number); }
  function full(svg) { return [0, 0, Number(svg.getAttribute("data-width")), Number(svg.getAttribute("data-height"))]; }
  function zoom(factor, cx, cy) {
    var b = box(active);
    if (cx === undefined) { cx = b[0] + b[2] / 2; cy = b[1] + b[3] / 2; }
    var w = b[2] * factor, h = b[3] * factor;
    active.setAttribute("viewBox", [cx - (cx - b[0]) * factor, cy - (cy - b[1]) * factor, w, h].join(" "));
    changed();
  }
  function fit() { active.setAttribute("viewBox", full(active).join(" ")); changed(); }
  function centreOn(x, y, w) {
    var b = box(active), scale = Math.min(1, w / b[2]) || 1, nw = b[2] * scale, nh = b[3] * scale;
    active.setAttribute("viewBox", [x - nw / 2, y - nh / 2, nw, nh].join(" "));
  }
  function pointer(svg, ev) {
    var b = box(svg), r = svg.getBoundingClientRect();
    var s = Math.max(b[2] / r.width, b[3] / r.height);
    return [b[0] + (ev.clientX - r.left) * s, b[1] + (ev.clientY - r.top) * s, s];
  }
  [overview, detail].forEach(function (svg) {
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var p = pointer(svg, ev);
      zoom(ev.deltaY > 0 ? 1.2 : 1 / 1.2, p[0], p[1]);
      // zoomed in far over a block (3 screen pixels per unit: its 13-unit text at 39 px), it opens
      var over = ev.target.closest ? ev.target.closest("g.block") : null;
      if (svg === overview && ev.deltaY < 0 && over && 1 / p[2] > 3) open(Number(over.getAttribute("data-block")));
    }, {passive: false});
    var drag = null;
    svg.addEventListener("mousedown", function (ev) { drag = [ev.clientX, ev.clientY, box(svg), pointer(svg, ev)[2]]; });
    window.addEventListener("mouseup", function () { drag = null; });
    svg.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      var b = drag[2].slice();
      b[0] -= (ev.clientX - drag[0]) * drag[3];
      b[1] -= (ev.clientY - drag[1]) * drag[3];
      svg.setAttribute("viewBox", b.join(" "));
      changed();
    });
  });
  document.getElementById("zoomin").onclick = function () { zoom(1 / 1.5); };
  document.getElementById("zoomout").onclick = function () { zoom(1.5); };
  document.getElementById("fit").onclick = fit;

  // the selection panel
  function describe(i) {
    var n = data.nodes[i], dl = document.getElementById("selected");
    dl.textContent = "";
    var rows = [["node", n[0]], ["op type", n[1] + (n[9] !== null ? "-" + n[9] : "")],
                ["provider", data.providers[n[2]]], ["reason", data.reasons[n[3]] || "(placed on DirectML)"],
                ["lowered by", n[4] || "not lowered by this project"], ["block", blockTitle(n[6])]];
    if (n[5]) rows.push(["fusion", "cuts onnxruntime's fused DML graph"]);
    rows.forEach(function (r) {
      var dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = r[0]; dd.textContent = r[1];
      dl.appendChild(dt); dl.appendChild(dd);
    });
  }
  function blockTitle(b) { var l = data.blocks[b].lines; return l[0] + " (stage " + data.blocks[b].stage + "): " + l[1]; }

  // a block opened to its nodes: columns by the node's layer in the whole graph, compressed
  function layoutBlock(b) {
    var members = byBlock[b], cols = {}, colOf = {}, pos = {};
    members.forEach(function (i) { cols[data.nodes[i][7]] = true; });
    Object.keys(cols).map(Number).sort(function (x, y) { return x - y; })
      .forEach(function (layer, k) { colOf[layer] = k; });
    var rows = {};
    members.forEach(function (i) {
      var c = colOf[data.nodes[i][7]], r = rows[c] || 0;
      rows[c] = r + 1;
      pos[i] = [20 + c * (NW + NGX), 20 + r * (NH + NGY)];
    });
    var width = 40 + Object.keys(colOf).length * (NW + NGX);
    var height = 40 + Math.max.apply(null, Object.keys(rows).map(function (c) { return rows[c]; })) * (NH + NGY);
    return {pos: pos, width: width, height: height};
  }
  function drawNode(i, p, g, detailed) {
    var n = data.nodes[i];
    var node = el("g", {"class": "node", "data-node": i, tabindex: "0"}, g);
    var r = el("rect", {x: p[0], y: p[1], width: NW, height: NH, rx: 5, fill: n[4] ? LOWERED : COLOUR[n[2]]}, node);
    if (n[5]) r.setAttribute("class", "cut");
    if (detailed) {
      el("title", {}, node).textContent = n[0] + " (" + n[1] + "): " + data.providers[n[2]] +
        (data.reasons[n[3]] ? " - " + data.reasons[n[3]] : "") + (n[4] ? " - lowered by rule " + n[4] : "");
      text(node, p[0] + 6, p[1] + 15, fitted(n[1], 24), "op");
      text(node, p[0] + 6, p[1] + 31, fitted(n[0], 26));
    }
    node.addEventListener("mouseenter", function () { describe(i); });
    node.addEventListener("click", function (ev) { ev.stopPropagation(); select(i); });
    nodeBoxes[i] = node;
  }
  // Only what the view shows is in the DOM, and text only where it can be read: a 10^4-node block
  // zooms and pans at the cost of what is on the screen (SVG lays out every text again on a zoom).
  var lay = null, inBlock = {}, selected = -1;
  function drawVisible() {
    var b = box(detail), r = detail.getBoundingClientRect();
    var scale = Math.min(r.width / b[2], r.height / b[3]) || 1, detailed = scale * NH >= 14;
    var x0 = b[0] - b[2] / 4, x1 = b[0] + b[2] * 1.25, y0 = b[1] - b[3] / 4, y1 = b[1] + b[3] * 1.25;
    var visible = byBlock[openBlock].filter(function (i) {
      var p = lay.pos[i];
      return p[0] + NW >= x0 && p[0] <= x1 && p[1] + NH >= y0 && p[1] <= y1;
    });
    detail.textContent = "";
    nodeBoxes = {};
    var edges = el("g", {}, detail), nodes = el("g", {}, detail);
    if (detailed || visible.length < 3000) visible.forEach(function (i) {
      data.nodes[i][8].forEach(function (j) {
        if (!inBlock[j]) return;
        var a = lay.pos[j], c = lay.pos[i], mid = (a[0] + NW + c[0]) / 2;
        el("path", {"class": "edge", d: "M" + (a[0] + NW) + "," + (a[1] + NH / 2) + " C" + mid + "," + (a[1] + NH / 2) +
                    " " + mid + "," + (c[1] + NH / 2) + " " + c[0] + "," + (c[1] + NH / 2)}, edges);
      });
    });
    visible.forEach(function (i) { drawNode(i, lay.pos[i], nodes, detailed); });
    if (nodeBoxes[selected]) nodeBoxes[selected].classList.add("selected");
    detail.setAttribute("data-drawn", visible.length);
  }
  var pending = false;
  function changed() {
    if (active !== detail || pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; drawVisible(); });
  }
  function open(b) {
    var t = performance.now();
    lay = layoutBlock(b);
    inBlock = {};
    byBlock[b].forEach(function (i) { inBlock[i] = true; });
    detail.setAttribute("data-width", lay.width);
    detail.setAttribute("data-height", lay.height);
    detail.setAttribute("viewBox", "0 0 " + lay.width + " " + lay.height);
    detail.setAttribute("data-block", b);
    overview.setAttribute("hidden", "");
    detail.removeAttribute("hidden");
    document.getElementById("back").removeAttribute("hidden");
    document.getElementById("where").textContent = blockTitle(b) + "; " + byBlock[b].length + " nodes";
    active = detail;
    openBlock = b;
    selected = -1;
    drawVisible();
    return performance.now() - t;
  }
  function back() {
    detail.setAttribute("hidden", "");
    overview.removeAttribute("hidden");
    document.getElementById("back").setAttribute("hidden", "");
    document.getElementById("where").textContent = "overview: blocks by stage (copies behind them), click a block for its nodes";
    active = overview;
    openBlock = -1;
  }
  function select(i) {
    var b = data.nodes[i][6];
    if (openBlock !== b) open(b);
    selected = i;
    centreOn(lay.pos[i][0] + NW / 2, lay.pos[i][1] + NH / 2, 8 * NW);
    drawVisible();
    describe(i);
  }
  document.getElementById("back").onclick = back;
  Array.prototype.forEach.call(overview.querySelectorAll("g.block"), function (g) {
    var b = Number(g.getAttribute("data-block"));
    g.addEventListener("click", function () { open(b); });
    g.addEventListener("keydown", function (ev) { if (ev.key === "Enter") open(b); });
  });

  // search by node name or op type
  function search(query) {
    var q = query.trim().toLowerCase(), list = document.getElementById("results"), hits = [];
    list.textContent = "";
    if (q) data.nodes.forEach(function (n, i) {
      if (n[0].toLowerCase().indexOf(q) >= 0 || n[1].toLowerCase() === q) hits.push(i);
    });
    hits.slice(0, 200).forEach(function (i) {
      var li = document.createElement("li"), n = data.nodes[i];
      li.textContent = n[0] + " (" + n[1] + ", " + data.providers[n[2]] + ")";
      li.setAttribute("data-node", i);
      li.tabIndex = 0;
      li.onclick = function () { select(i); };
      list.appendChild(li);
    });
    document.getElementById("found").textContent = q ? hits.length + " found" + (hits.length > 200 ? ", first 200 listed" : "") : "";
    Array.prototype.forEach.call(overview.querySelectorAll("g.block"), function (g) {
      var b = Number(g.getAttribute("data-block"));
      g.classList.toggle("hit", hits.some(function (i) { return data.nodes[i][6] === b; }));
    });
    return hits;
  }
  document.getElementById("search").addEventListener("input", function (ev) { search(ev.target.value); });

  // the copies list: a click opens the copy's source block at its node
  var names = {};
  data.nodes.forEach(function (n, i) { names[n[0]] = i; });
  function showCopy(k) {
    var c = data.copies[k], at = c.from in names ? names[c.from] : names[c.to[0]];
    if (at !== undefined) select(at);
    Array.prototype.forEach.call(document.querySelectorAll("#copies li"), function (li) {
      li.classList.toggle("selected", Number(li.getAttribute("data-copy")) === k);
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("#copies li"), function (li) {
    li.addEventListener("click", function () { showCopy(Number(li.getAttribute("data-copy"))); });
  });

  // Self-test for a headless browser (make picture-check): what was drawn and how long it took;
  // #search=, #open=, #node=, #copy= and #zoom drive the same functions a click does.
  var out = {blocks: 0, copy_labels: [], legend: 0, ready_ms: 0};
  Array.prototype.forEach.call(overview.querySelectorAll("g.block"), function (g) {
    var r = g.getBBox();
    if (r.width > 0 && r.height > 0) out.blocks += 1;
  });
  Array.prototype.forEach.call(overview.querySelectorAll("g.copylabel text"), function (t) { out.copy_labels.push(t.textContent); });
  out.legend = document.querySelectorAll("#legend li").length;
  out.block_text_px = 13 * overview.getScreenCTM().a;     // a block's text as the screen shows it
  out.ready_ms = performance.now();   // from navigation start: parsing, layout and this script
  var hash = new URLSearchParams(location.hash.slice(1));
  if (hash.has("search")) out.search = search(hash.get("search")).length;
  if (hash.has("open")) {
    out.open_ms = open(Number(hash.get("open")));
    out.opened_nodes = detail.querySelectorAll("g.node").length;
  }
  if (hash.has("wheel")) {       // wheel steps over a block's middle until the overview opens it
    var target = overview.querySelector('g.block[data-block="' + Number(hash.get("wheel")) + '"] rect');
    for (var w = 0; w < 40 && active === overview; w++) {
      var r = target.getBoundingClientRect();
      target.dispatchEvent(new WheelEvent("wheel", {deltaY: -100, clientX: r.left + r.width / 2,
                                                    clientY: r.top + r.height / 2, bubbles: true, cancelable: true}));
    }
    out.wheel_steps = w;
    out.opened_block = openBlock;
  }
  if (hash.has("node")) { select(names[hash.get("node")]); out.selected = document.getElementById("selected").textContent; }
  if (hash.has("copy")) { showCopy(Number(hash.get("copy"))); out.selected = document.getElementById("selected").textContent; }
  if (hash.has("zoom")) {
    var tz = performance.now();
    // each step: the view, the nodes it shows drawn again, and the layout they force; painting not included
    for (var z = 0; z < 10; z++) {
      zoom(1 / 1.2);
      if (active === detail) drawVisible();
      var probe = active.querySelector("g.node, g.block");
      if (probe) probe.getBoundingClientRect();
    }
    out.drawn_after_zoom = Number(detail.getAttribute("data-drawn") || 0);
    out.zoom_ms = (performance.now() - tz) / 10;
    out.viewbox = active.getAttribute("viewBox");
  }
  document.getElementById("rendered").textContent = JSON.stringify(out);
})();
