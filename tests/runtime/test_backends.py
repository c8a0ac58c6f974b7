"""runtime/backends.py: a provider backend runs the model as the user ships it, a backend that
runs part of the model is PARTIAL, and check, run, reduce and conformance run, which all run
the same backends, give the same status for the same model, backend and feeds."""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler import conformance
from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.compiler.reduce import reduce_model
from onnx_dml_lowering.compiler.run_backends import RunBackends
from onnx_dml_lowering.runtime.check import BackendOptions, CheckRun, Tolerances, check
from onnx_dml_lowering.runtime.feeds import random_feeds

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MASKED = str(next(p for p in example_paths() if p.stem == "masked_select"))


def _default_overridden() -> onnx.ModelProto:
    """IR version 3: onnxruntime takes the initializer `b`, which is also a graph input, as a
    constant, and has no input `b`. Our own processing (the IR version handed to onnxruntime is at
    least 4) makes `b` an input a feed overrides: what onnxruntime runs then is not the file."""
    graph = h.make_graph([h.make_node("Add", ["x", "b"], ["y"], name="add")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [2]), h.make_tensor_value_info("b", T.FLOAT, [2])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2])], [h.make_tensor("b", T.FLOAT, [2], [1, 1])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 7)], ir_version=3)


def _bfloat16_mul() -> onnx.ModelProto:
    """onnxruntime's CPU provider has no bfloat16 Mul kernel."""
    graph = h.make_graph([h.make_node("Mul", ["x", "x"], ["m"], name="mul"),
                          h.make_node("Cast", ["m"], ["y"], to=T.FLOAT, name="cast")], "g",
                         [h.make_tensor_value_info("x", T.BFLOAT16, [2, 3])], [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def _plain(path: str, feeds: dict) -> "dict[str, np.ndarray]":
    """A plain onnxruntime session on the file, fed the inputs it declares."""
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, {i.name: feeds[i.name] for i in session.get_inputs()})))


def test_a_provider_backend_runs_the_file_as_shipped(tmp_path):
    """ort-cpu's outputs are a plain InferenceSession's on the same file (they were those of our
    processed copy: x + the fed b, where onnxruntime on the file adds the stored b), and the
    report names the file."""
    path = str(tmp_path / "ir3.onnx")
    onnx.save(_default_overridden(), path)
    feeds = {"x": np.array([1, 2], np.float32), "b": np.array([5, 5], np.float32)}
    _, report = check(compile_model(path), feeds, ["ort-cpu"], Tolerances())
    (backend,) = report.backends
    np.testing.assert_array_equal(backend.values["y"], _plain(path, feeds)["y"])
    assert backend.ran == f"the model file as shipped ({path})"
    # against ONNX semantics (the feed overrides the default) that is a MISMATCH, as it is
    assert backend.status == "mismatch" and report.expected["y"].tolist() == [6, 7]


def test_a_model_proto_is_run_as_given_and_said(tmp_path):
    model = onnx.load(MASKED)
    compiled = compile_model(model)
    _, report = check(compiled, random_feeds(compiled.inputs, seed=2), ["ort-cpu"], Tolerances())
    assert report.ok and report.backends[0].ran == "the ModelProto as given (serialised unmodified)"


@pytest.mark.parametrize("form", ["proto", "bytearray"])
@pytest.mark.parametrize("edit", ["threshold", "nodes", "cleared"])
def test_a_model_given_is_run_as_it_was_when_compiled(form, edit):
    """A graph pass that goes on editing its proto (or bytearray) after compile_model: the oracle and
    cpu used the compile-time copy while ort-cpu serialised the edited object at check time (a false
    MISMATCH, or an ERROR, blamed on onnxruntime)."""
    model = onnx.load(MASKED)
    given = model if form == "proto" else bytearray(model.SerializeToString())
    compiled = compile_model(given)
    if form == "proto" and edit == "threshold":
        for init in model.graph.initializer:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 0 + 0.5, init.name))
    elif form == "proto":
        model.graph.ClearField("node")
    elif edit == "cleared":
        given[:] = b""
    else:
        given[: len(given) // 2] = bytes(len(given) // 2)
    _, report = check(compiled, random_feeds(compiled.inputs, seed=2), ["cpu", "ort-cpu"], Tolerances())
    assert report.ok, [(b.backend, b.status, b.error) for b in report.backends]


def test_external_data_is_read_by_onnxruntime_from_the_file(tmp_path):
    """The shipped file with its weights in an external file beside it: onnxruntime gets the path."""
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    graph = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [4, 2])], [h.make_tensor_value_info("y", T.FLOAT, [4, 3])],
                         [numpy_helper.from_array(weight, "w")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    path = str(tmp_path / "ext.onnx")
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
              size_threshold=0)
    feeds = {"x": np.ones((4, 2), np.float32)}
    _, report = check(compile_model(path), feeds, ["ort-cpu"], Tolerances())
    assert report.ok and report.backends[0].ran == f"the model file as shipped ({path})"
    np.testing.assert_array_equal(report.backends[0].values["y"], _plain(path, feeds)["y"])


# -- one status, whichever command runs the backend --------------------------------------------

MODELS = {
    "masked_select": (lambda tmp: MASKED, {}),
    "bfloat16_mul": (lambda tmp: _save(_bfloat16_mul(), tmp / "bf16.onnx"), {}),
    "scalar_nonzero_deep": (lambda tmp: os.path.join(REPO, "tests", "models", "reduce", "scalar_nonzero_deep.onnx"),
                            {"n": 4}),
}
# backend name, provider model
BACKENDS = [("cpu", "shipped"), ("ort", "shipped"), ("ort-cpu", "shipped"), ("ort-cpu", "modified")]
# what check says, per model and backend
EXPECTED = {
    ("masked_select", "cpu", "shipped"): "ok", ("masked_select", "ort", "shipped"): "ok",
    ("masked_select", "ort-cpu", "shipped"): "ok", ("masked_select", "ort-cpu", "modified"): "ok",
    ("bfloat16_mul", "cpu", "shipped"): "ok", ("bfloat16_mul", "ort", "shipped"): "ok",
    ("bfloat16_mul", "ort-cpu", "shipped"): "error", ("bfloat16_mul", "ort-cpu", "modified"): "partial",
    ("scalar_nonzero_deep", "cpu", "shipped"): "ok", ("scalar_nonzero_deep", "ort", "shipped"): "ok",
    ("scalar_nonzero_deep", "ort-cpu", "shipped"): "mismatch", ("scalar_nonzero_deep", "ort-cpu", "modified"): "mismatch",
}


def _save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)


def _conformance_case(directory, path: str, feeds: dict, expected: dict, outputs: "list[str]") -> None:
    """One onnx_test_runner case folder: the model file, its feeds and the oracle's outputs."""
    case = directory / "case"
    data = case / "test_data_set_0"
    data.mkdir(parents=True)
    model = onnx.load(path)
    (case / "model.onnx").write_bytes(model.SerializeToString())
    inits = {i.name for i in model.graph.initializer}
    for k, vi in enumerate(i for i in model.graph.input if i.name not in inits):
        (data / f"input_{k}.pb").write_bytes(numpy_helper.from_array(np.asarray(feeds[vi.name]), vi.name).SerializeToString())
    for k, name in enumerate(outputs):
        (data / f"output_{k}.pb").write_bytes(numpy_helper.from_array(np.asarray(expected[name]), name).SerializeToString())


# conformance's outcomes in check's words (its fail is a MISMATCH when a data set differed)
def _conformance_status(outcome) -> str:
    if outcome.status == "fail":
        return "mismatch" if outcome.detail.startswith("test_data_set_") else "error"
    return {"pass": "ok", "partial": "partial", "unsupported": "error"}[outcome.status]


@pytest.mark.parametrize("model_name", MODELS)
@pytest.mark.parametrize("backend, provider_model", BACKENDS)
def test_check_run_reduce_and_conformance_give_one_status(model_name, backend, provider_model, tmp_path):
    build, dims = MODELS[model_name]
    path = build(tmp_path)
    compiled = compile_model(path)
    feeds = random_feeds(compiled.inputs, seed=5, dims=dims)
    options = BackendOptions(provider_model=provider_model)
    _, report = check(compiled, feeds, [backend], Tolerances(), options)
    status = report.backends[0].status
    assert status == EXPECTED[model_name, backend, provider_model], report.backends[0]
    # run compares nothing: its status is check's, a MISMATCH being a plain run there
    ran = RunBackends(compile_model(path), [backend], options).run(backend, feeds)
    assert ran.status == ("ok" if status == "mismatch" else status)
    whole, _ = reduce_model(compile_model(path), feeds, backend, "mismatch", None, options)
    assert whole.status == status
    _conformance_case(tmp_path / "suite", path, feeds, report.expected, compiled.output_names)
    results = conformance.run(str(tmp_path / "suite"), [backend], options)
    (outcome,) = [o for outcomes in results[backend].values() for _, o in outcomes]
    assert _conformance_status(outcome) == status, outcome


@pytest.mark.parametrize("fail", [False, True])
def test_a_zoo_says_partial_in_its_table_json_and_junit(fail, tmp_path, capsys):
    """A PARTIAL backend is a PARTIAL model in the zoo table (it was a plain "ok"), a skipped
    testcase in JUnit with the node named (a PARTIAL failure under --fail-on-partial)."""
    import json
    import xml.etree.ElementTree as ET

    from tests.cli_runner import cli
    models = tmp_path / "models"
    models.mkdir()
    bf16 = _save(_bfloat16_mul(), models / "bf16.onnx")
    onnx.save(onnx.load(MASKED), str(models / "masked.onnx"))
    argv = ["check", models, "--backends", "cpu,ort-cpu", "--provider-model", "modified",
            "--json", tmp_path / "zoo.json", "--junit", tmp_path / "zoo.xml"] + (["--fail-on-partial"] if fail else [])
    code, out, _ = cli(argv, capsys)
    assert code == (1 if fail else 0)
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:3]}
    assert rows == {bf16: "PARTIAL", str(models / "masked.onnx"): "ok"}
    assert f"{bf16}: [ort-cpu] PARTIAL: node mul not run on it" in out
    assert out.splitlines()[-3] == "zoo: 2 models: 1 ok, 1 PARTIAL"
    document = json.loads((tmp_path / "zoo.json").read_text())
    assert {m["model"]: m["status"] for m in document["models"]}[bf16] == "PARTIAL"
    case = next(c for c in ET.parse(tmp_path / "zoo.xml").getroot().iter("testcase")
                if c.get("classname") == bf16 and c.get("name") == "ort-cpu")
    assert case.find("properties/property").attrib == {"name": "status", "value": "partial"}
    marker = case.find("failure" if fail else "skipped")
    assert marker is not None and marker.get("message").startswith("PARTIAL: node mul not run on it")


def test_an_intermediate_output_is_not_one_of_the_shipped_file(tmp_path):
    """--outputs exposes an intermediate value in our copy only: on the file as shipped it is
    UNSUPPORTED (PARTIAL); the modified copy has it as an output and compares it."""
    graph = h.make_graph([h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Neg", ["r"], ["y"], name="neg")],
                         "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    path = _save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8), tmp_path / "m.onnx")
    compiled = compile_model(path, outputs=["r"])
    feeds = random_feeds(compiled.inputs, seed=1)
    _, shipped = check(compiled, feeds, ["ort-cpu"], Tolerances())
    statuses = {o.output: (o.status, o.detail) for o in shipped.backends[0].outputs}
    assert statuses["y"][0] == "match" and statuses["r"][0] == "unsupported"
    assert statuses["r"][1].startswith("not an output of the model as shipped")
    assert shipped.backends[0].status == "partial" and shipped.ok
    _, modified = check(compiled, feeds, ["ort-cpu"], Tolerances(), BackendOptions(provider_model="modified"))
    assert modified.backends[0].status == "ok"
    assert {o.output: o.status for o in modified.backends[0].outputs} == {"y": "match", "r": "match"}


def test_a_provider_runs_a_loaded_model_whose_weights_stay_in_its_file(tmp_path):
    """A ModelProto from load_model keeps its big weights in the file (lazy initializers); handed to
    compile_model and checked on ort-cpu, onnxruntime reads them from that file as the shipped
    model's initializers: it loads (it failed with 'model format error' when the proto's locations
    were serialised as they are) and gives bit for bit onnxruntime's own run of the file."""
    from onnx_dml_lowering.compiler.frontend import load_model
    from onnx_dml_lowering.runtime.weights import is_lazy
    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)   # 147 KB x 8: lazy
    weight = np.concatenate([weight] * 8)
    nodes = [h.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["y"], name="relu")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 64, 8, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 512, 8, 8])],
                         [numpy_helper.from_array(weight, "W")])
    path = tmp_path / "conv.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8), str(path))
    model = load_model(str(path))
    assert any(map(is_lazy, model.graph.initializer))
    feeds = {"x": rng.standard_normal((1, 64, 8, 8)).astype(np.float32)}
    run = CheckRun(compile_model(model), feeds, ["ort-cpu"], Tolerances(0.0, 0.0))
    seen = {name.text: outputs for done in run.sets() for name, outputs in done.actuals.items()}
    (backend,) = run.report().backends
    assert backend.error == "" and [o.status for o in backend.outputs] == ["match"]
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    (got,) = [outputs["y"] for outputs in seen.values()]
    assert got.tobytes() == expected.tobytes()


def test_the_python_api_refuses_what_it_would_misread():
    """A string of backends was iterated a character at a time ('unknown backend c'); a negative
    tolerance the CLI refuses was taken; a second pass over a CheckRun's sets was an AssertionError;
    ModelView given a path failed inside its own error line."""
    from onnx_dml_lowering.ir import DmlLowerError
    from onnx_dml_lowering.runtime.compiled_view import ModelView
    compiled = compile_model(MASKED)
    feeds = random_feeds(compiled.inputs, seed=1)
    _, report = check(compiled, feeds, "cpu,ort-cpu", Tolerances())
    assert [str(b.backend) for b in report.backends] == ["cpu", "ort-cpu"] and report.ok
    with pytest.raises(DmlLowerError, match="a tolerance is 0 or more"):
        check(compiled, feeds, ["cpu"], Tolerances(atol=-1.0))
    run = CheckRun(compiled, feeds, ["cpu"], Tolerances())
    assert len(list(run.sets())) == 1
    with pytest.raises(DmlLowerError, match="feed sets were already drawn"):
        list(run.sets())
    assert run.report().ok
    with pytest.raises(DmlLowerError, match="ModelView takes an onnx.ModelProto, not a str"):
        ModelView(str(MASKED))
    with pytest.raises(DmlLowerError, match="compile_model takes a path, bytes or an onnx.ModelProto, not a int"):
        compile_model(42)


def test_the_onnx_backend_interface_refuses_what_it_would_drop():
    from onnx_dml_lowering.compiler import backend
    from onnx_dml_lowering.ir import DmlLowerError
    model = onnx.load(MASKED)
    x = random_feeds(compile_model(model).inputs, seed=1)["x"]
    rep = backend.prepare(model)
    with pytest.raises(DmlLowerError, match="2 inputs given in order, but the model has 1"):
        rep.run([x, x])
    with pytest.raises(DmlLowerError, match="device 'CUDA'"):
        backend.prepare(model, device="CUDA")
    node = h.make_node("NonZero", ["a"], ["b"])
    big = np.eye(3, dtype=">i4")
    (out,) = backend.run_node(node, [big], outputs_info=[(np.dtype(np.int64), (2, 3))])
    np.testing.assert_array_equal(out, np.array(np.nonzero(np.eye(3))))


@pytest.mark.parametrize("node, inputs", [
    (h.make_node("NonZero", ["a"], ["b"]), [np.eye(3, dtype=np.int32)]),
    (h.make_node("EyeLike", ["a"], ["b"], k=1, dtype=onnx.TensorProto.FLOAT16), [np.zeros((3, 5), np.float32)]),
    (h.make_node("Trilu", ["a", "k"], ["b"], upper=0), [np.arange(12, dtype=np.int64).reshape(3, 4), np.array(-1)]),
    (h.make_node("Split", ["a"], ["b", "c"], axis=0, num_outputs=2), [np.arange(8, dtype=np.float32).reshape(4, 2)]),
])
def test_run_node_types_its_outputs_by_shape_inference_when_no_outputs_info(node, inputs):
    from onnx.reference import ReferenceEvaluator

    from onnx_dml_lowering.compiler import backend
    outputs = backend.run_node(node, inputs)
    names = [f"i{k}" for k in range(len(inputs))]
    renamed = h.make_node(node.op_type, names, list(node.output), **{a.name: h.get_attribute_value(a) for a in node.attribute})
    graph = h.make_graph([renamed], "g", [h.make_tensor_value_info(n, 0, None) for n in names],
                         [h.make_tensor_value_info(o, 0, None) for o in node.output])
    expected = ReferenceEvaluator(h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])).run(
        None, dict(zip(names, inputs)))
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_run_node_says_in_one_line_when_shape_inference_cannot_type_an_output():
    from onnx_dml_lowering.compiler import backend
    from onnx_dml_lowering.ir import DmlLowerError
    node = h.make_node("Custom", ["a"], ["b"], name="mine", domain="my.domain")
    with pytest.raises(DmlLowerError, match="run_node: node 'mine': .*give outputs_info"):
        backend.run_node(node, [np.ones(2, np.float32)])
