"""Model Explorer overlays (--model-explorer on inspect, compile and check) and dml-lower view.

The files are read back with Model Explorer's own loader (dacite, strict, into its node-data
classes) and their node ids compared with what model-explorer-onnx's adapter makes of the same
file; the view test starts Model Explorer's server on a free 127.0.0.1 port, opens it in headless
Chromium (make picture-check) and keeps a screenshot. Tests marked view need the [view] extra
(make picture-check installs it; DML_LOWER_REQUIRE_VIEW=1 makes its absence a failure)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir.display import display
from tests.cli_runner import cli

HOSTILE = '</script>"q\x1b[2J'
ARTEFACTS = Path(__file__).resolve().parents[2] / "build" / "picture"


def _have_view() -> bool:
    try:
        import model_explorer.node_data_builder  # noqa: F401
        import model_explorer_onnx.main  # noqa: F401
    except ImportError:
        if os.environ.get("DML_LOWER_REQUIRE_VIEW") == "1":
            pytest.fail("the [view] extra is required here (make picture-check) but not installed")
        return False
    return True


needs_view = pytest.mark.skipif(not _have_view(), reason="the [view] extra (Model Explorer) is not installed: "
                                "pip install onnx-dml-lowering[view], or make picture-check")


def awkward_model() -> onnx.ModelProto:
    """Names Model Explorer and this project both have to make something of: an unnamed node, two
    nodes named alike, a hostile name, an If whose branches the adapter folds into the main graph,
    a NonZero this project lowers and an EyeLike; float outputs so check has errors to report."""
    x = h.make_tensor_value_info("x", T.FLOAT, [3, 3])
    flag = h.make_tensor_value_info("flag", T.BOOL, [])
    then_graph = h.make_graph([h.make_node("Neg", ["r"], ["t_out"], name="neg")], "then", [],
                              [h.make_tensor_value_info("t_out", T.FLOAT, [3, 3])])
    else_graph = h.make_graph([h.make_node("Abs", ["r"], ["e_out"], name="abs")], "else", [],
                              [h.make_tensor_value_info("e_out", T.FLOAT, [3, 3])])
    nodes = [h.make_node("Relu", ["x"], ["r"]),                               # unnamed
             h.make_node("Sigmoid", ["r"], ["s"], name="twice"),
             h.make_node("Tanh", ["s"], ["t"], name="twice"),
             h.make_node("If", ["flag"], ["branch"], name="choose", then_branch=then_graph, else_branch=else_graph),
             h.make_node("Add", ["t", "branch"], ["y"], name=HOSTILE),
             h.make_node("EyeLike", ["x"], ["eye"], name="eye"),
             h.make_node("Cast", ["x"], ["xi"], name="to_int", to=T.INT64),
             h.make_node("NonZero", ["xi"], ["nz"], name="nonzero")]
    outputs = [h.make_tensor_value_info("y", T.FLOAT, [3, 3]), h.make_tensor_value_info("eye", T.FLOAT, [3, 3]),
               h.make_tensor_value_info("nz", T.INT64, [2, None])]
    graph = h.make_graph(nodes, "awkward", [x, flag], outputs)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.fixture
def model_file(tmp_path) -> Path:
    path = tmp_path / "awkward.onnx"
    onnx.save(awkward_model(), str(path))
    return path


def adapter_op_ids(path: Path) -> "dict[str, set[str]]":
    """Model Explorer's own node ids for the file's operator nodes, per graph."""
    from model_explorer_onnx.main import ONNXAdapter
    graphs = ONNXAdapter().convert(str(path), {})["graphs"]
    return {g.id: {n.id for n in g.nodes if n.label not in ("Input", "Output", "Initializer", "InitializedInput",
                                                              "(Phi)", "(Capture)")} for g in graphs}


def loaded(path: Path) -> dict:
    from onnx_dml_lowering.compiler.explorer import load_node_data
    return load_node_data(str(path))


@needs_view
@pytest.mark.view
def test_inspect_overlays_load_and_name_every_node_as_the_adapter_does(model_file, tmp_path, capsys):
    out = tmp_path / "me.json"
    code, text, err = cli(["inspect", model_file, "--ep", "dml", "--model-explorer", out, "--json",
                           tmp_path / "r.json"], capsys)
    assert code == 0, err
    placement, lowering = loaded(out), loaded(tmp_path / "me.lowering.json")
    ops = adapter_op_ids(model_file)
    graph = next(iter(ops))
    # every node of the file that onnxruntime keeps or removes is there, under the adapter's own id
    # (its name for the unnamed node, the repeated name and the If branches folded in)
    assert set(placement) == {graph} and set(placement[graph].results) == ops[graph]
    report = json.loads((tmp_path / "r.json").read_text())
    codes = {"DmlExecutionProvider": 0, "CPUExecutionProvider": 1, "none": 2, "removed": 3}
    values = sorted(r.value for r in placement[graph].results.values())
    assert values == sorted(codes[n["provider"]] for n in report["ep_placement"]["nodes"])
    assert placement[graph].results[HOSTILE].value == codes["DmlExecutionProvider"]
    assert "0 DirectML, 1 CPU" in placement[graph].name
    lowered = {n: r.value for n, r in lowering[graph].results.items()}
    assert lowered["nonzero"] >= 1 and lowered["eye"] >= 1 and "stays on ONNX" in lowering[graph].name
    assert f"wrote {display(out)} (Model Explorer node data: DML EP placement" in text
    assert HOSTILE not in text                   # printed lines are displayed


@needs_view
@pytest.mark.view
def test_check_overlay_holds_each_outputs_error_on_its_producer(model_file, tmp_path, capsys):
    """Graph outputs only (no --outputs): each output's max abs error from the check report,
    computed by check's comparator, on the node producing it; the set's name says so."""
    out = tmp_path / "c.json"
    feeds = tmp_path / "in.npz"
    np.savez(feeds, x=np.linspace(-2, 2, 9, dtype=np.float32).reshape(3, 3), flag=np.array(True))
    code, _, err = cli(["check", model_file, "--backends", "cpu,ort", "--inputs", feeds, "--json", tmp_path / "r.json",
                        "--model-explorer", out], capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    producer = {"y": HOSTILE, "eye": "eye", "nz": "nonzero"}
    for backend in report["backends"]:
        data = loaded(tmp_path / f"c.error-{backend['backend']}.json")
        (graph, node_data), = data.items()
        assert "graph outputs only" in node_data.name
        for o in backend["outputs"]:
            expected = o["max_abs_error"] if o["max_abs_error"] is not None else 0.0
            assert node_data.results[producer[o["output"]]].value == pytest.approx(expected)
        assert set(node_data.results) == set(producer.values())
    assert loaded(out)                            # the lowering, as compile writes it


@needs_view
@pytest.mark.view
def test_check_with_intermediates_puts_an_error_on_every_compared_node(model_file, tmp_path, capsys):
    out = tmp_path / "c.json"
    code, _, err = cli(["check", model_file, "--backends", "cpu", "--outputs", "all", "--model-explorer", out], capsys)
    assert code == 0, err
    (graph, node_data), = loaded(tmp_path / "c.error-cpu.json").items()
    assert "every value compared" in node_data.name
    assert {"twice", "eye", HOSTILE, "nonzero"} <= set(node_data.results)
    assert set(node_data.results) <= adapter_op_ids(model_file)[graph]


@needs_view
@pytest.mark.view
def test_compile_overlay(model_file, tmp_path, capsys):
    out = tmp_path / "l.json"
    code, text, err = cli(["compile", model_file, "--model-explorer", out], capsys)
    assert code == 0, err
    (graph, node_data), = loaded(out).items()
    assert node_data.results["nonzero"].value >= 1 and f"wrote {out}" in text


@needs_view
@pytest.mark.view
def test_view_refuses_what_it_cannot_show_in_one_line(model_file, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"main": {"results": {"n": {"value": "high"}}}}')
    code, _, err = cli(["view", model_file, "--overlay", bad, "--no-open"], capsys)
    assert code == 2 and err.startswith(f"dml-lower: error: --overlay '{bad}': not Model Explorer node data")
    assert err.count("\n") == 1
    code, _, err = cli(["view", tmp_path / "missing.onnx", "--no-open"], capsys)
    assert code == 2 and "missing.onnx" in err and err.count("\n") == 1
    os.mkfifo(tmp_path / "pipe.json")        # refused from its stat: reading it would block
    code, _, err = cli(["view", model_file, "--overlay", tmp_path / "pipe.json", "--no-open"], capsys)
    assert code == 2 and err.count("\n") == 1 and "not a regular file" in err and "pipe.json" in err
    code, _, err = cli(["check", model_file, model_file, "--model-explorer", tmp_path / "z.json"], capsys)
    assert code == 2 and "--model-explorer works on one model" in err


def test_without_the_extra_one_line_names_it(model_file, tmp_path):
    """Model Explorer made unimportable in a fresh interpreter: each way in says how to get it."""
    blocked = ("import sys; sys.modules['model_explorer'] = None; sys.modules['model_explorer_onnx'] = None; "
               "from onnx_dml_lowering.compiler.cli import entry; sys.argv = ['dml-lower'] + sys.argv[1:]; entry()")
    for args in (["view", str(model_file), "--no-open"],
                 ["inspect", str(model_file), "--model-explorer", str(tmp_path / "a.json")],
                 ["compile", str(model_file), "--model-explorer", str(tmp_path / "b.json")]):
        done = subprocess.run([sys.executable, "-c", blocked, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "pip install onnx-dml-lowering[view]" in done.stderr
        assert done.stdout == "" and not (tmp_path / "a.json").exists()


def _chromium() -> "str | None":
    found = os.environ.get("DML_LOWER_CHROMIUM") or shutil.which("chromium")
    if not found and os.environ.get("DML_LOWER_REQUIRE_CHROMIUM") == "1":
        pytest.fail("Chromium is required here (make picture-check) but not found")
    return found


@needs_view
@pytest.mark.view
@pytest.mark.chromium
def test_view_shows_the_model_with_its_overlays_in_chromium(model_file, tmp_path, capsys):
    """dml-lower view --no-open on a free 127.0.0.1 port, opened in headless Chromium: Model
    Explorer lists both overlays and shows their values on the nodes; screenshot build/picture/view.png."""
    from tests.chromium_cdp import Chromium
    browser = _chromium()
    if not browser:
        pytest.skip("Debian's chromium is not installed (make picture-check installs it)")
    out = tmp_path / "me.json"
    code, _, err = cli(["inspect", model_file, "--ep", "dml", "--model-explorer", out], capsys)
    assert code == 0, err
    from onnx_dml_lowering.compiler.explorer import free_port
    port = free_port()
    dml_lower = shutil.which("dml-lower") or str(Path(sys.executable).parent / "dml-lower")
    server = subprocess.Popen([dml_lower, "view", str(model_file), "--overlay", str(out), "--overlay",
                               str(tmp_path / "me.lowering.json"), "--no-open", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        address = None
        for line in server.stdout:
            if line.startswith(f"http://127.0.0.1:{port}/"):
                address = line.strip()
                break
        assert address, "the server printed no address"
        with Chromium(browser, tmp_path / "profile") as page:
            page.open(address)
            page.wait_for("document.body && document.body.innerText.includes('NODE DATA PROVIDERS') && "
                          "document.body.innerText.includes('EyeLike')", timeout=120)
            text = page.evaluate("document.body.innerText")
            assert "DML EP placement predicted" in text and "lowering at feature level" in text
            # the node data table: a row per node (by op) with its value under each overlay, as written
            (_, placed), = loaded(out).items()
            (_, lowering), = loaded(tmp_path / "me.lowering.json").items()
            for node, op in (("nonzero", "NonZero"), ("eye", "EyeLike")):
                row = f"\t{op}\t{placed.results[node].value:g}\t{lowering.results[node].value:g}\n"
                assert row in text, text[-1500:]
            page.evaluate("Array.from(document.querySelectorAll('button, mat-icon')).filter("
                          "b => b.textContent.trim() === 'unfold_more_double').forEach(b => b.click())")
            page.wait_for("document.body.innerText.includes('EyeLike')")
            ARTEFACTS.mkdir(parents=True, exist_ok=True)
            png = page.screenshot(ARTEFACTS / "view.png")
            assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 20_000
    finally:
        server.terminate()
        server.wait(timeout=30)
