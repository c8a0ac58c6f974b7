"""The ort-dml backend off Windows: the shipped file on onnxruntime.dll's DML EP through ort_host, with
outputs and node_providers as every provider backend gives them, and the named DML EP failures."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.builders import relu_then_unique
from onnx_dml_lowering.runtime.dml_deviations import FAILURES, failing_nodes
from onnx_dml_lowering.runtime.directml import home as directml_home
from tests.cli_runner import cli
from tests.paths import REPO

EXAMPLES = REPO / "compiler" / "examples"
directml = pytest.mark.directml
RESHAPE_FAILURE = FAILURES["reshape_allowzero_infer"]


def check_json(capsys, tmp_path, model, *extra):
    out = tmp_path / "r.json"
    code, text, err = cli(["check", model, "--backends", "cpu,ort-dml", "--json", out, *extra], capsys)
    report = json.loads(out.read_text())
    return code, text + err, report, {b["backend"]: b for b in report["backends"]}


@directml
@pytest.mark.parametrize("name", ["banded_mix", "masked_select", "exporter_idioms"])
def test_shipped_examples_match_and_name_every_nodes_provider(capsys, tmp_path, name):
    path = EXAMPLES / f"{name}.onnx"
    code, text, report, backends = check_json(capsys, tmp_path, path)
    assert code == 0, text
    ort_dml = backends["ort-dml"]
    assert ort_dml["status"] == "ok" and ort_dml["outputs"]
    assert all(o["status"] == "match" for o in ort_dml["outputs"])
    providers = ort_dml["node_providers"]
    assert providers and set(providers.values()) <= {"DmlExecutionProvider", "CPUExecutionProvider"}
    # the nodes of onnxruntime's optimised graph, not the DML EP's fused partitions
    assert not any(n.startswith("DmlFusedNode") for n in providers), providers
    names = {n.name for n in onnx.load(path).graph.node}
    assert names & set(providers)


@directml
def test_a_node_on_cpu_makes_ort_dml_partial(capsys, tmp_path):
    path = relu_then_unique(tmp_path / "m.onnx")
    code, text, report, backends = check_json(capsys, tmp_path, path)
    ort_dml = backends["ort-dml"]
    assert ort_dml["node_providers"]["uniq"] == "CPUExecutionProvider"
    assert ort_dml["node_providers"]["relu0"] == "DmlExecutionProvider"
    assert "uniq" in ort_dml["partial"] and "CPUExecutionProvider" in ort_dml["partial"]["uniq"]
    assert ort_dml["status"] == "partial", ort_dml


def reshape_model(dims, shape):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu0"),
                               helper.make_node("Reshape", ["r", "s"], ["y"], name="flatten_rows", allowzero=1)],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * len(shape))],
                              [helper.make_tensor("s", TensorProto.INT64, [len(shape)], shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@directml
@pytest.mark.parametrize("dims,when", [([2, 3], "cannot load the model"), (["n", 3], "failed to run the model")])
def test_reshape_allowzero_with_minus_one_is_a_named_deviation(capsys, tmp_path, dims, when):
    path = tmp_path / "m.onnx"
    onnx.save(reshape_model(dims, [3, -1]), path)
    assert [f.node for f in failing_nodes(onnx.load(path))] == ["flatten_rows"]
    code, text, report, backends = check_json(capsys, tmp_path, path, *(["--dim", "n=2"] if "n" in dims else []))
    assert code == 1
    error = backends["ort-dml"]["error"]
    assert when in error and RESHAPE_FAILURE in error and "flatten_rows" in error, error
    assert "onnxruntime: " in error and "\n" not in error
    assert backends["cpu"]["status"] == "ok"


@directml
def test_the_same_reshape_without_minus_one_runs(capsys, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(reshape_model([2, 3], [3, 2]), path)
    assert failing_nodes(onnx.load(path)) == []
    code, text, report, backends = check_json(capsys, tmp_path, path)
    assert code == 0, text
    assert backends["ort-dml"]["node_providers"]["flatten_rows"] == "DmlExecutionProvider"


@directml
@pytest.mark.parametrize("dims", [[2, 3], ["n", 3]], ids=["static", "dynamic"])
def test_optimize_for_dml_takes_the_reshape_failure_away(capsys, tmp_path, dims):
    """The rewritten Reshape (allowzero=0) runs on the real DML EP and matches ONNX."""
    path, fixed = tmp_path / "m.onnx", tmp_path / "fixed.onnx"
    onnx.save(reshape_model(dims, [3, -1]), path)
    code, text, err = cli(["optimize", path, "-o", fixed, "--for", "dml"], capsys)
    assert code == 0 and "predicted DML EP failures 1 -> 0" in text, text + err
    code, text, report, backends = check_json(capsys, tmp_path, fixed, *(["--dim", "n=2"] if "n" in dims else []))
    assert code == 0, text
    assert backends["ort-dml"]["node_providers"]["flatten_rows"] == "DmlExecutionProvider"
    assert all(o["status"] == "match" for o in backends["ort-dml"]["outputs"])


@directml
def test_a_dynamo_decoder_optimized_for_dml_runs_on_the_real_ep(capsys, tmp_path):
    """llama.dynamo's eight views (allowzero=1, Concat(..., [-1, ...])) fail on the DML EP as exported
    and run once optimize --for dml has rewritten them."""
    source, fixed = REPO / "tests" / "models" / "real" / "llama.dynamo.onnx", tmp_path / "fixed.onnx"
    code, _, report, backends = check_json(capsys, tmp_path, source)
    assert code == 1 and RESHAPE_FAILURE in backends["ort-dml"]["error"]
    code, text, err = cli(["optimize", source, "-o", fixed, "--for", "dml"], capsys)
    assert code == 0 and "predicted DML EP failures 8 -> 0" in text, text + err
    code, text, report, backends = check_json(capsys, tmp_path, fixed)
    assert code == 0, text
    assert backends["ort-dml"]["outputs"] and all(o["status"] == "match" for o in backends["ort-dml"]["outputs"])


def test_without_the_setup_ort_dml_is_one_unavailable_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(directml_home.HOME_ENV, str(tmp_path / "none"))
    code, text, err = cli(["check", EXAMPLES / "banded_mix.onnx", "--backends", "cpu,ort-dml"], capsys)
    line = next(ln for ln in (text + err).splitlines() if "[ort-dml] UNAVAILABLE" in ln)
    assert "make directml" in line and "needs Windows" in line
    assert code == 0


@directml
def test_feeds_of_each_type_cross_the_pipe(capsys, tmp_path):
    rng = np.random.default_rng(3)
    graph = helper.make_graph([helper.make_node("Identity", [n], [n + "_out"], name=n + "_id") for n in "abc"], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [4]),
                               helper.make_tensor_value_info("b", TensorProto.INT64, [4]),
                               helper.make_tensor_value_info("c", TensorProto.BOOL, [4])],
                              [helper.make_tensor_value_info(n + "_out", t, [4])
                               for n, t in zip("abc", (TensorProto.FLOAT16, TensorProto.INT64, TensorProto.BOOL))])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), path)
    feeds = tmp_path / "f.npz"
    np.savez(feeds, a=rng.standard_normal(4).astype(np.float16), b=np.array([2**40, -1, 0, 2**62]),
             c=np.array([True, False, True, True]))
    code, text, report, backends = check_json(capsys, tmp_path, path, "--inputs", feeds)
    assert code == 0, text
    assert all(o["status"] == "match" for o in backends["ort-dml"]["outputs"])


@directml
def test_a_dropped_session_is_released_in_the_host():
    """On lavapipe each session in the host keeps its device heaps (hundreds of MB): a session the
    backend drops must be released there (a conformance run of 340 cases grew one host past 20 GB).
    The host's memory after twelve sessions made and dropped in turn is about what it was after two."""
    import gc

    from onnx_dml_lowering.runtime.directml.ort_dml import HostOptions, create, shared_host
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    data, host = model.SerializeToString(), shared_host()

    def session_made_and_dropped() -> None:
        session = create(host, data, HostOptions(), model)
        assert session.run(None, {"x": np.array([-1, 2], np.float32)})[0].tolist() == [0, 2]
        del session
        gc.collect()

    def host_rss() -> int:
        status = open(f"/proc/{host.process.pid}/status").read()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) * 1024

    for _ in range(2):
        session_made_and_dropped()
    before = host_rss()
    for _ in range(10):
        session_made_and_dropped()
    assert host_rss() - before < 256 * 2 ** 20, (before, host_rss())


def scalar_nonzero_model(elem, reader, **attrs):
    graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
                               helper.make_node(reader, ["nz"], ["y"], name="reader", **attrs)], "g",
                              [helper.make_tensor_value_info("x", elem, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT if reader == "Cast" else
                                                             TensorProto.INT64, [None, None])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@directml
@pytest.mark.parametrize("elem,reader,attrs", [
    (TensorProto.FLOAT, "Transpose", {"perm": [1, 0]}), (TensorProto.BOOL, "Transpose", {}),
    (TensorProto.FLOAT, "Cast", {"to": TensorProto.FLOAT}),
    (TensorProto.INT64, "Transpose", {"perm": [1, 0]})],          # NonZero on the CPU EP: its copy fails
    ids=["float-transpose", "bool-transpose", "float-cast", "int64-transpose"])
def test_a_node_reading_a_scalar_nonzero_is_a_named_failure(capsys, tmp_path, elem, reader, attrs):
    path = tmp_path / "m.onnx"
    onnx.save(scalar_nonzero_model(elem, reader, **attrs), path)
    assert [f.node for f in failing_nodes(onnx.load(path))] == ["reader"]
    code, text, report, backends = check_json(capsys, tmp_path, path)
    assert code == 1
    error = backends["ort-dml"]["error"]
    assert "failed to run the model" in error and FAILURES["scalar_nonzero_read"] + " (node reader)" in error, error
    assert "80070057" in error and "\n" not in error
    assert backends["cpu"]["status"] == "ok"
