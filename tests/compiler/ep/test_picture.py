"""inspect --ep dml --html: the placement picture is one self-contained page whose nodes carry
their predicted provider; opened for real in headless Chromium (make picture-check; skipped
where Chromium is absent unless DML_LOWER_REQUIRE_CHROMIUM=1), the browser draws every node of the
partitioned graph with its provider's colour and every copy edge, as the page says it should."""
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler.ep.overview import build
from onnx_dml_lowering.compiler.ep.picture import BH, BW, READABLE, SCREEN, layout
from onnx_dml_lowering.compiler.ep.placement import CPU, DML
from onnx_dml_lowering.ir.display import display
from tests import paths, picture_models
from tests.cli_runner import cli

MODELS = paths.MODELS


def shape_copy_model():
    """Shape -> Gather on the CPU, Cast -> Add reading it on the GPU (a MemcpyFromHost), a NonZero
    over int64 on the CPU between DML nodes (a MemcpyToHost and a MemcpyFromHost), a node whose
    name would break HTML if it were not escaped."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["a", "b"])
    i0 = h.make_tensor("i0", T.INT64, [], [0])
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("Gather", ["s", "i0"], ["g"], name="gather", axis=0),
             h.make_node("Cast", ["g"], ["gf"], name="cast", to=T.FLOAT),
             h.make_node("Relu", ["x"], ["rx"], name="relu"),
             h.make_node("Add", ["rx", "gf"], ["y"], name='<b>"add"</b>'),
             h.make_node("Cast", ["y"], ["yi"], name="to_int", to=T.INT64),
             h.make_node("NonZero", ["yi"], ["nz"], name="nonzero"),
             h.make_node("Transpose", ["nz"], ["t"], name="transpose")]
    graph = h.make_graph(nodes, "g", [x], [h.make_tensor_value_info("t", T.INT64, [None, 2])], [i0])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10)


HOSTILE = '</script><script>alert("x")</script>\x1b[31m\'"<!--'


@pytest.fixture
def page(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(shape_copy_model(), str(path))
    out = tmp_path / "m.html"
    code, _, err = cli(["inspect", path, "--ep", "dml", "--html", out, "--json", tmp_path / "r.json"], capsys)
    assert code == 0, err
    return out, json.loads((tmp_path / "r.json").read_text())["ep_placement"]


def page_json(text: str, element: str) -> dict:
    return json.loads(re.search(f'<script type="application/json" id="{element}">(.*?)</script>', text, re.S).group(1))


def test_page_is_self_contained_and_carries_the_placement(page):
    out, placement = page
    text = out.read_text()
    # the SVG namespace is a name, not a fetch (xmlns, createElementNS)
    assert not re.search(r"(src|href)\s*=|https?://|<link|@import|fetch\(|XMLHttpRequest|import\(",
                         text.replace("http://www.w3.org/2000/svg", ""))
    data = page_json(text, "data")
    drawn = {n[0]: data["providers"][n[2]] for n in data["nodes"]}
    providers = {n["node"]: n["provider"] for n in placement["nodes"]}
    assert drawn["gather"] == CPU and drawn["nonzero"] == CPU and drawn["relu"] == DML
    assert drawn['<b>"add"</b>'] == providers['<b>"add"</b>'] == DML
    assert "<b>" not in text.split("<svg", 1)[1].split("</svg>")[0]
    assert len(data["copies"]) == len(placement["copies"]) == 3
    cuts = {n[0]: n[5] for n in data["nodes"]}
    assert cuts["shape"] == 1 and cuts["relu"] == 0                      # Shape cuts the fused DML graph


def test_overview_blocks_follow_the_copies(page):
    """Every copy crosses into a later stage; the copies between blocks add up to the placement's
    (one per copy and target block), and every node is in exactly one block."""
    out, placement = page
    text = out.read_text()
    data = page_json(text, "data")
    blocks = re.findall(r'<g class="block" data-block="(\d+)" data-kind="(\w+)"', text)
    assert len(blocks) == len(data["blocks"]) == page_json(text, "expected")["blocks"]
    assert sum(b["nodes"] for b in data["blocks"]) == len(data["nodes"])
    stage = {i: data["blocks"][n[6]]["stage"] for i, n in enumerate(data["nodes"])}
    index = {n[0]: i for i, n in enumerate(data["nodes"])}
    for c in placement["copies"]:
        if c["from"] in index:
            assert all(stage[index[t]] > stage[index[c["from"]]] for t in c["to"])
    labelled = sum(int(n) for n in re.findall(r'data-copies="(\d+)"', text))
    assert labelled == sum(len(set(c["dst"]) - {c["src"]}) for c in data["copies"] if c["src"] >= 0)
    kinds = {k for _, k in blocks}
    assert {"dml", "cpu"} <= kinds


def test_hostile_names_stay_text(tmp_path, capsys):
    """A node named with </script>, quotes, a comment opener and an ESC reaches the page only
    displayed (ir.display) and escaped: no markup of it survives, the data reads it back."""
    model = shape_copy_model()
    model.graph.node[3].name = HOSTILE
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    out = tmp_path / "m.html"
    code, _, err = cli(["inspect", path, "--ep", "dml", "--html", out], capsys)
    assert code == 0, err
    text = out.read_text()
    data = re.search('<script type="application/json" id="data">(.*?)</script>', text, re.S).group(1)
    assert HOSTILE not in text and "</" not in data
    # outside the data the name shows only as escaped text (a warning naming the node: its Relu's)
    outside = text.replace(data, "")
    assert all(outside[:at].endswith("&lt;script&gt;") for at in [m.start() for m in re.finditer(r"alert\(", outside)])
    assert text.count("<script") == 3 and text.count("</script>") == 3
    assert "<!--" not in text and "\x1b" not in text
    names = [n[0] for n in page_json(text, "data")["nodes"]]
    assert display(HOSTILE) in names


def test_a_graph_without_nodes_draws_an_empty_overview(tmp_path, capsys):
    """A graph with no node (its input is its output): a page with no block, not a failure."""
    x = h.make_tensor_value_info("x", T.FLOAT, [2])
    graph = h.make_graph([], "g", [x], [h.make_tensor_value_info("x", T.FLOAT, [2])])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(path))
    code, _, err = cli(["inspect", path, "--ep", "dml", "--html", tmp_path / "m.html"], capsys)
    assert code == 0, err
    text = (tmp_path / "m.html").read_text()
    assert page_json(text, "expected")["blocks"] == 0 and 'class="block"' not in text
    assert "0 nodes in 0 blocks" in text


def test_a_real_size_overview_fits_one_screen():
    """Mask R-CNN- and SSDlite-shaped graphs of ~3,000 nodes: the overview's blocks are laid out
    at a scale where their text reads on the 1600 x 1000 screen."""
    for model in (picture_models.mask_rcnn_shaped(), picture_models.ssdlite_shaped()):
        assert len(model.graph.node) > 2500
        report, graph = placement_for_model(model)
        lowered = {}
        view = build(report, graph.graph, lowered)
        pos, width, height = layout(view.blocks)
        assert len(view.blocks) >= 6 and any(b.kind == "cpu" for b in view.blocks)
        assert min(SCREEN[0] / width, SCREEN[1] / height) >= READABLE
        assert all(x + BW <= width and y + BH <= height for x, y in pos.values())


def placement_for_model(model: onnx.ModelProto):
    from onnx_dml_lowering.compiler.ep.placement import predict_with_graph
    return predict_with_graph(model, None)


def test_html_needs_ep_dml(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(shape_copy_model(), str(path))
    code, _, err = cli(["inspect", path, "--html", tmp_path / "m.html"], capsys)
    assert code == 2 and err == "dml-lower: error: --html draws the DML EP placement: add --ep dml\n"


def _chromium() -> "str | None":
    found = os.environ.get("DML_LOWER_CHROMIUM") or shutil.which("chromium")
    if not found and os.environ.get("DML_LOWER_REQUIRE_CHROMIUM") == "1":
        pytest.fail("Chromium is required here (make picture-check) but not found")
    return found


BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--hide-scrollbars", "--window-size=1600,1000"]
ARTEFACTS = Path(__file__).resolve().parents[3] / "build" / "picture"     # kept for CI (make picture-check)


def _browser() -> str:
    browser = _chromium()
    if not browser:
        pytest.skip("Debian's chromium is not installed (make picture-check installs it)")
    return browser


def render_in_chromium(html_file: Path, tmp_path: Path, hash: str = "") -> "tuple[dict, dict]":
    """(what the page expects, what the browser drew) read back from the DOM after its script ran;
    `hash` drives the page's own search / open / select / zoom functions."""
    url = html_file.resolve().as_uri() + (f"#{hash}" if hash else "")
    dom = subprocess.run([_browser(), *BROWSER_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=180).stdout
    expected = json.loads(re.search(r'<script type="application/json" id="expected">(.*?)</script>', dom, re.S).group(1))
    rendered = json.loads(html.unescape(re.search(r'<pre id="rendered" hidden="">(.*?)</pre>', dom, re.S).group(1)))
    return expected, rendered


def screenshot(html_file: Path, tmp_path: Path, name: str, hash: str = "") -> Path:
    """A 1600 x 1000 PNG of the page, kept under build/picture/ for CI's artefacts."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTEFACTS / name
    png.unlink(missing_ok=True)
    url = html_file.resolve().as_uri() + (f"#{hash}" if hash else "")
    subprocess.run([_browser(), *BROWSER_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", url],
                   capture_output=True, timeout=180, check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    return png


@pytest.mark.chromium
def test_chromium_draws_every_block_and_copy_count(page, tmp_path):
    out, placement = page
    expected, rendered = render_in_chromium(out, tmp_path)
    assert rendered["blocks"] == expected["blocks"] > 0
    assert len(rendered["copy_labels"]) == expected["copy_edges"] > 0
    assert rendered["legend"] == 7
    data = page_json(out.read_text(), "data")
    counted = sum(int(label.split()[0]) for label in rendered["copy_labels"])
    assert counted == sum(len(set(c["dst"]) - {c["src"]}) for c in data["copies"] if c["src"] >= 0)


@pytest.mark.chromium
def test_chromium_opens_selects_and_shows_a_node(page, tmp_path):
    """A click on a copy in the list opens its source block at its node: the panel names the
    node, its provider and reason; a hostile-looking name is shown as text."""
    out, placement = page
    k = next(i for i, c in enumerate(placement["copies"]) if c["from"] == "cast")
    _, rendered = render_in_chromium(out, tmp_path, f"copy={k}")
    assert rendered["selected"].startswith("nodecast") and CPU in rendered["selected"]
    assert "shape sub-graph" in rendered["selected"]
    _, rendered = render_in_chromium(out, tmp_path, "node=" + quote('<b>"add"</b>'))
    assert '<b>"add"</b>' in rendered["selected"] and DML in rendered["selected"]


@pytest.fixture(scope="module")
def detection_pages(tmp_path_factory):
    """The two real-size generated graphs (tests/picture_models.py) drawn by inspect --ep dml --html."""
    folder = tmp_path_factory.mktemp("detection")
    pages = {}
    for name, model in (("mask_rcnn_shaped", picture_models.mask_rcnn_shaped()),
                        ("ssdlite_shaped", picture_models.ssdlite_shaped())):
        onnx.save(model, str(folder / f"{name}.onnx"))
        code = subprocess.run(["dml-lower" if shutil.which("dml-lower") else str(Path(sys.executable).parent / "dml-lower"),
                               "inspect", str(folder / f"{name}.onnx"), "--ep", "dml",
                               "--html", str(folder / f"{name}.html")], capture_output=True, text=True)
        assert code.returncode == 0, code.stderr
        pages[name] = (folder / f"{name}.html", len(model.graph.node))
    return pages


@pytest.mark.chromium
@pytest.mark.parametrize("name", ["mask_rcnn_shaped", "ssdlite_shaped"])
def test_chromium_overview_of_a_detection_graph_reads_on_one_screen(detection_pages, tmp_path, name):
    """~3,000 nodes: every block drawn, every copy count on its edge, the legend, block text at
    10 px or more on the 1600 x 1000 screen; the screenshot is kept as build/picture/NAME.png."""
    html_file, nodes = detection_pages[name]
    expected, rendered = render_in_chromium(html_file, tmp_path)
    assert nodes >= expected["nodes"] > 2500           # level 1 folds a few constants away
    assert rendered["blocks"] == expected["blocks"] >= 6
    assert len(rendered["copy_labels"]) == expected["copy_edges"] >= 3
    assert sum(int(label.split()[0]) for label in rendered["copy_labels"]) >= expected["copies"] - 1
    assert rendered["legend"] == 7 and rendered["block_text_px"] >= 10
    screenshot(html_file, tmp_path, f"{name}.png")


@pytest.mark.chromium
def test_chromium_search_and_open_a_partition(detection_pages, tmp_path):
    html_file, _ = detection_pages["mask_rcnn_shaped"]
    data = page_json(html_file.read_text(), "data")
    _, rendered = render_in_chromium(html_file, tmp_path, "search=NonMaxSuppression")
    assert rendered["search"] == sum(1 for n in data["nodes"] if n[1] == "NonMaxSuppression") == 2
    largest = max(range(len(data["blocks"])), key=lambda b: data["blocks"][b]["nodes"])
    _, rendered = render_in_chromium(html_file, tmp_path, f"open={largest}&zoom")
    assert rendered["opened_nodes"] == data["blocks"][largest]["nodes"] > 1000
    assert rendered["viewbox"] != "0 0" and rendered["zoom_ms"] >= 0
    screenshot(html_file, tmp_path, "mask_rcnn_shaped_search.png", "search=nms&copy=6")
    # zooming in with the wheel over a block opens it, as a click does
    _, rendered = render_in_chromium(html_file, tmp_path, f"wheel={largest}")
    assert rendered["opened_block"] == largest and 1 < rendered["wheel_steps"] < 40


@pytest.mark.chromium
def test_chromium_draws_a_real_export(tmp_path, capsys):
    """torchvision's Mask R-CNN (MobileNetV3, exported by tests/models/real): the blocks and the
    copies of its real placement, one block per stage and side, drawn."""
    out = tmp_path / "maskrcnn.html"
    code, _, err = cli(["inspect", MODELS / "real" / "mask_rcnn_mobilenet_v3.torchscript.onnx", "--ep", "dml",
                        "--html", out, "--json", tmp_path / "r.json"], capsys)
    assert code == 0, err
    expected, rendered = render_in_chromium(out, tmp_path)
    assert rendered["blocks"] == expected["blocks"] > 5
    assert len(rendered["copy_labels"]) == expected["copy_edges"] > 5
    assert expected["copies"] == len(json.loads((tmp_path / "r.json").read_text())["ep_placement"]["copies"])
    assert rendered["block_text_px"] >= 10


@pytest.mark.chromium
def test_chromium_stays_interactive_at_ten_thousand_nodes(tmp_path):
    """A 14,000-node graph: the page is ready, its largest block opens and a zoom step is drawn
    within budgets far under a person's patience; the times go to build/picture/timings.json
    (docs/commands/inspect.md quotes them)."""
    model = picture_models.mask_rcnn_shaped(levels=8, blocks=300, head_depth=60)
    path = tmp_path / "big.onnx"
    onnx.save(model, str(path))
    out = tmp_path / "big.html"
    dml_lower = shutil.which("dml-lower") or str(Path(sys.executable).parent / "dml-lower")
    done = subprocess.run([dml_lower, "inspect", str(path), "--ep", "dml", "--html", str(out)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    data = page_json(out.read_text(), "data")
    largest = max(range(len(data["blocks"])), key=lambda b: data["blocks"][b]["nodes"])
    _, rendered = render_in_chromium(out, tmp_path, f"open={largest}&zoom")
    assert len(data["nodes"]) > 10_000 and rendered["opened_nodes"] == data["blocks"][largest]["nodes"] > 5000
    timings = {"nodes": len(data["nodes"]), "ready_ms": round(rendered["ready_ms"]),
               "open_ms": round(rendered["open_ms"]), "open_nodes": rendered["opened_nodes"],
               "zoom_step_ms": round(rendered["zoom_ms"], 1)}
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    (ARTEFACTS / "timings.json").write_text(json.dumps(timings, indent=1) + "\n")
    assert timings["ready_ms"] < 5000 and timings["open_ms"] < 5000 and timings["zoom_step_ms"] < 500, timings
