"""inspect --ep dml --html: the placement picture is one self-contained page whose nodes carry
their predicted provider; opened for real in headless Chromium (make picture-check; skipped
where Chromium is absent unless DML_LOWER_REQUIRE_CHROMIUM=1), the browser draws every node of the
partitioned graph with its provider's colour and every copy edge, as the page says it should."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler.ep.picture import COLOURS
from onnx_dml_lowering.compiler.ep.placement import CPU, DML
from tests import paths
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


@pytest.fixture
def page(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(shape_copy_model(), str(path))
    out = tmp_path / "m.html"
    code, _, err = cli(["inspect", path, "--ep", "dml", "--html", out, "--json", tmp_path / "r.json"], capsys)
    assert code == 0, err
    return out, json.loads((tmp_path / "r.json").read_text())["ep_placement"]


def test_page_is_self_contained_and_carries_the_placement(page):
    out, placement = page
    text = out.read_text()
    assert not re.search(r"(src|href)\s*=|https?://|<link|@import", text.replace('xmlns="http://www.w3.org/2000/svg"', ""))
    drawn = dict(re.findall(r'data-node="([^"]*)" data-provider="([^"]*)"', text))
    providers = {n["node"]: n["provider"] for n in placement["nodes"]}
    assert drawn["gather"] == CPU and drawn["nonzero"] == CPU and drawn["relu"] == DML
    assert drawn["&lt;b&gt;&quot;add&quot;&lt;/b&gt;"] == providers['<b>"add"</b>'] == DML
    assert "<b>" not in text.split("<svg", 1)[1].split("</svg>")[0]
    assert text.count('class="edge copy"') == len(placement["copies"]) == 3
    assert 'data-node="shape" data-provider="DmlExecutionProvider" data-cut="1"' in text   # Shape cuts fusion


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


def render_in_chromium(html_file: Path, tmp_path: Path) -> "tuple[dict, dict]":
    """(what the page expects, what the browser drew) read back from the DOM after its script ran."""
    browser = _chromium()
    if not browser:
        pytest.skip("Debian's chromium is not installed (make picture-check installs it)")
    profile = tmp_path / "profile"
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={profile}", "--dump-dom", html_file.resolve().as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    expected = json.loads(re.search(r'<pre id="expected" hidden="">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"'))
    rendered = json.loads(re.search(r'<pre id="rendered" hidden="">(.*?)</pre>', dom, re.S).group(1))
    return expected, rendered


def _rgb(colour: str) -> str:
    return "rgb({}, {}, {})".format(*(int(colour[i:i + 2], 16) for i in (1, 3, 5)))


@pytest.mark.chromium
def test_chromium_draws_every_node_in_its_provider_colour_and_every_copy(page, tmp_path):
    out, placement = page
    expected, rendered = render_in_chromium(out, tmp_path)
    assert rendered["drawn"] == expected["drawn"] > 0
    assert rendered["providers"] == expected["providers"]
    assert rendered["copies"] == expected["copies"] == 3
    assert rendered["colours"] == {p: _rgb(COLOURS[p]) for p in expected["providers"]}


@pytest.mark.chromium
def test_chromium_draws_a_real_export(tmp_path, capsys):
    out = tmp_path / "t5.html"
    code, _, err = cli(["inspect", MODELS / "real" / "t5_encoder.torchscript.onnx", "--ep", "dml", "--html", out], capsys)
    assert code == 0, err
    expected, rendered = render_in_chromium(out, tmp_path)
    assert rendered["drawn"] == expected["drawn"] > 100
    assert rendered["providers"] == expected["providers"] and set(rendered["providers"]) == {DML, CPU}
    assert rendered["copies"] == expected["copies"]
