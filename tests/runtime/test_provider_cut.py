"""check on an onnxruntime provider that has no kernel for some nodes (onnxruntime CPU lacks
Trilu on int8, NonZero on int8, Abs on bfloat16). The model as shipped: the backend's ERROR with
onnxruntime's own message, as a plain InferenceSession on the file. With provider_model
"modified": the node is cut out, the outputs it produces are UNSUPPORTED and every other output
is still compared, fed the oracle's values, and the backend is PARTIAL, naming the node."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.runtime.check import BackendOptions, Tolerances, check
from onnx_dml_lowering.runtime.feeds import random_feeds
from tests.builders import graph_model
from tests.oracle import assert_same, reference

I8 = ("x", T.INT8, [3, 4])


def _trilu_graph_output():
    return graph_model([h.make_node("Trilu", ["x"], ["y"], name="tri")], [I8], [("y", T.INT8, [3, 4])], opset=14)


def _nonzero_graph_output():
    return graph_model([h.make_node("NonZero", ["x"], ["y"], name="nz")], [I8], [("y", T.INT64, [2, None])], opset=14)


def _trilu_output_and_read():
    return graph_model([h.make_node("Trilu", ["x"], ["t"], name="tri"), h.make_node("Neg", ["t"], ["z"], name="neg")],
                       [I8], [("t", T.INT8, [3, 4]), ("z", T.INT8, [3, 4])], opset=14)


def _chained(t_is_output: bool):
    outputs = ([("t", T.INT8, [3, 4])] if t_is_output else []) + [("c", T.FLOAT, [2, None])]
    return graph_model([h.make_node("Trilu", ["x"], ["t"], name="tri"), h.make_node("NonZero", ["t"], ["nz"], name="nz"),
                        h.make_node("Cast", ["nz"], ["c"], to=T.FLOAT, name="cast")], [I8], outputs, opset=14)


def _chained_both_outputs():
    """Two cut nodes, each producing a graph output that the next node reads."""
    return graph_model([h.make_node("Trilu", ["x"], ["t"], name="tri"), h.make_node("NonZero", ["t"], ["nz"], name="nz"),
                        h.make_node("Cast", ["nz"], ["c"], to=T.FLOAT, name="cast")],
                       [I8], [("t", T.INT8, [3, 4]), ("nz", T.INT64, [2, None]), ("c", T.FLOAT, [2, None])], opset=14)


def _abs_bfloat16():
    """A node the hybrid oracle's onnxruntime cannot load either: it moves to onnx.reference there."""
    return graph_model([h.make_node("Abs", ["x"], ["a"], name="abs"), h.make_node("Sign", ["a"], ["s"], name="sign")],
                       [("x", T.BFLOAT16, [3, 4])], [("a", T.BFLOAT16, [3, 4]), ("s", T.BFLOAT16, [3, 4])], opset=14)


def _eyelike_22_bfloat16():
    """Every node without a kernel is cut, whichever wording onnxruntime names it in (issue 35:
    EyeLike-22): EyeLike at opset 22 and the Add reading it, both bfloat16."""
    BF = ("x", T.BFLOAT16, [3, 3])
    return graph_model([h.make_node("EyeLike", ["x"], ["e"], name="eye"), h.make_node("Add", ["e", "x"], ["y"], name="add"),
                        h.make_node("Cast", ["y"], ["f"], to=T.FLOAT, name="cast")],
                       [BF], [("e", T.BFLOAT16, [3, 3]), ("f", T.FLOAT, [3, 3])], opset=22)


# (model, status per output, cut nodes, values fed from the oracle)
CASES = {
    "trilu_graph_output": (_trilu_graph_output, {"y": "unsupported"}, ["tri"], []),
    "nonzero_graph_output": (_nonzero_graph_output, {"y": "unsupported"}, ["nz"], []),
    "output_read_by_another_node": (_trilu_output_and_read, {"t": "unsupported", "z": "match"}, ["tri"], ["t"]),
    "two_chained_inner": (lambda: _chained(False), {"c": "match"}, ["tri", "nz"], ["nz"]),
    "two_chained_first_is_output": (lambda: _chained(True), {"t": "unsupported", "c": "match"}, ["tri", "nz"], ["nz"]),
    "two_chained_both_outputs": (_chained_both_outputs, {"t": "unsupported", "nz": "unsupported", "c": "match"},
                                 ["tri", "nz"], ["nz"]),
    "in_hybrid_oracle_too": (_abs_bfloat16, {"a": "unsupported", "s": "match"}, ["abs"], ["a"]),
    "eyelike_22": (_eyelike_22_bfloat16, {"e": "unsupported", "f": "match"}, ["eye", "add"], ["y"]),
}


@pytest.mark.parametrize("case", CASES)
def test_no_kernel_node_is_cut_out(case):
    build, statuses, cut, fed = CASES[case]
    model = build()
    compiled = compile_model(model)
    feeds = random_feeds(compiled.inputs, seed=7)
    _, report = check(compiled, feeds, ["ort-cpu"], Tolerances(), BackendOptions(provider_model="modified"))
    (backend,) = report.backends
    assert not backend.error and report.ok
    assert {o.output: o.status for o in backend.outputs} == statuses
    assert sorted(backend.unsupported_nodes) == sorted(cut)
    assert backend.status == "partial" and sorted(backend.partial) == sorted(cut)
    assert backend.ran.startswith("a modified copy of the model")
    _, failing = check(compiled, feeds, ["ort-cpu"], Tolerances(), BackendOptions(provider_model="modified"),
                       fail_partial=True)
    assert not failing.ok
    assert backend.fed_from_oracle == fed
    want = reference(model, feeds)
    for name, status in statuses.items():
        assert_same(report.expected[name], want[name], name)
        if status == "match":       # the compared values are onnxruntime's, checked here against onnx.reference
            assert_same(backend.values[name], want[name], name)
        else:
            assert name not in backend.values


@pytest.mark.parametrize("case", CASES)
def test_the_shipped_model_is_an_error_with_onnxruntime_s_message(case, tmp_path):
    """Default: the provider gets the file; a node without a kernel fails session creation there,
    as a plain InferenceSession on the same file fails (before: a cut copy passed)."""
    import onnx
    import onnxruntime as ort
    path = tmp_path / "m.onnx"
    onnx.save(CASES[case][0](), path)
    with pytest.raises(Exception) as plain:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    compiled = compile_model(str(path))
    _, report = check(compiled, random_feeds(compiled.inputs, seed=7), ["ort-cpu"], Tolerances())
    (backend,) = report.backends
    assert backend.status == "error" and not report.ok
    assert str(plain.value).splitlines()[0] in backend.error


@pytest.mark.parametrize("case", ["trilu_graph_output", "output_read_by_another_node", "two_chained_both_outputs"])
def test_cli_partial_in_every_view(case, tmp_path, capfd):
    import json

    import onnx
    path = tmp_path / "m.onnx"
    onnx.save(CASES[case][0](), path)
    cut = ", ".join(CASES[case][2])
    modified = ["check", str(path), "--backends", "ort-cpu", "--provider-model", "modified"]
    assert main([*modified, "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")]) == 0
    out = capfd.readouterr().out
    verdict = out.splitlines()[-4]                  # then the time, and the two files written
    assert "UNSUPPORTED" in out and "ERROR" not in out and "no mismatch" in out
    assert verdict.startswith("verdict: ") and f"PARTIAL: ort-cpu (node{'s' if ',' in cut else ''} {cut} not run on it" in verdict
    assert "ran a modified copy of the model" in out
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["ok"] and data["backends"][0]["status"] == "partial"
    assert sorted(data["backends"][0]["partial"]) == sorted(CASES[case][2])
    assert "| ort-cpu | - | PARTIAL |" in (tmp_path / "r.md").read_text()
    assert main([*modified, "-q"]) == 0
    quiet = capfd.readouterr().out.splitlines()
    assert quiet[-1] == verdict and any(line.startswith("  [ort-cpu] PARTIAL: ") for line in quiet)
    assert main([*modified, "-q", "--fail-on-partial"]) == 1
    assert "FAILED: 1 PARTIAL backend: ort-cpu" in capfd.readouterr().out
    assert main(["check", str(path), "--backends", "ort-cpu", "-q"]) == 1
    assert "[ort-cpu] ERROR onnxruntime (CPUExecutionProvider) cannot load the model" in capfd.readouterr().out


def test_a_node_onnxruntime_words_as_failed_to_find_kernel_is_cut_too(tmp_path, capfd):
    """The installed onnxruntime says 'Failed to find kernel for GlobalLpPool(22) (node:'pool' ...)
    Version mismatch' for a float16 GlobalLpPool-22 (its cast insertion hands the node to the CPU EP,
    whose GlobalLpPool is registered at 2 only): the node is cut out as the 'node with name' wording's
    are. The oracle cannot evaluate GlobalLpPool either, so the expected outputs come from a file."""
    import onnx
    import onnxruntime as ort

    from onnx_dml_lowering.runtime.ort_messages import FailureKind, parse_provider_failure
    from onnx_dml_lowering.runtime.saved_outputs import metadata
    X = ("x", T.FLOAT16, [1, 2, 3, 3])
    model = graph_model([h.make_node("GlobalLpPool", ["x"], ["p"], name="pool"), h.make_node("Relu", ["x"], ["r"], name="relu")],
                        [X], [("p", T.FLOAT16, [1, 2, 1, 1]), ("r", T.FLOAT16, [1, 2, 3, 3])], opset=22)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    with pytest.raises(Exception) as plain:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    failure = parse_provider_failure(plain.value)
    assert failure is not None and (failure.kind, failure.node) == (FailureKind.NO_KERNEL, "pool")
    assert str(plain.value).count("Failed to find kernel for GlobalLpPool(22) (node:'pool'") == 1
    x = np.random.default_rng(3).standard_normal((1, 2, 3, 3)).astype(np.float16)
    pooled = np.sqrt((x.astype(np.float32) ** 2).sum(axis=(2, 3), keepdims=True)).astype(np.float16)
    np.savez(tmp_path / "in.npz", x=x)
    np.savez(tmp_path / "golden.npz", p=pooled, r=np.maximum(x, 0), **metadata({"x": x}, "check"))
    common = ["check", str(path), "--backends", "ort-cpu", "--inputs", str(tmp_path / "in.npz"),
              "--oracle", str(tmp_path / "golden.npz"), "--json", str(tmp_path / "r.json")]
    assert main([*common, "--provider-model", "modified"]) == 0
    capfd.readouterr()
    import json
    backend = json.loads((tmp_path / "r.json").read_text())["backends"][0]
    assert backend["status"] == "partial" and sorted(backend["partial"]) == ["pool"]
    assert {o["output"]: o["status"] for o in backend["outputs"]} == {"p": "unsupported", "r": "match"}
    assert main(common) == 1                         # as shipped: onnxruntime's message, the backend's ERROR
    assert "Failed to find kernel for GlobalLpPool(22)" in capfd.readouterr().out


def test_an_empty_optional_output_is_compared_not_taken_for_an_empty_value():
    """onnxruntime gives an empty optional as None, as it gives a tensor output a run left empty (the
    DML EP's, tests/runtime/directml/test_dml_empty_and_ranked_real.py): only a tensor output is
    said to be left empty; the optional one is compared, and matches, on every backend."""
    from onnx_dml_lowering.runtime.ort_values import left_empty
    x = h.make_tensor_value_info("x", T.FLOAT, [2])
    opt = h.make_value_info("o", h.make_optional_type_proto(h.make_tensor_type_proto(T.FLOAT, [2])))
    nodes = [h.make_node("Optional", [], ["o"], name="opt", type=h.make_tensor_type_proto(T.FLOAT, [2])),
             h.make_node("Relu", ["x"], ["y"], name="relu")]
    model = h.make_model(h.make_graph(nodes, "g", [x], [h.make_tensor_value_info("y", T.FLOAT, [2]), opt]),
                         opset_imports=[h.make_opsetid("", 18)])
    model.ir_version = 8
    _, report = check(compile_model(model), {"x": np.array([-1, 2], np.float32)}, ["cpu", "ort", "ort-cpu"],
                      Tolerances())
    assert report.ok and not any(b.error for b in report.backends)
    assert {(b.backend.text, o.output): o.status for b in report.backends for o in b.outputs} == \
        {(b, o): "match" for b in ("cpu", "ort", "ort-cpu") for o in ("y", "o")}
    assert left_empty(np.asarray(None)) and not left_empty(np.asarray([None])) and not left_empty(np.zeros(0))
