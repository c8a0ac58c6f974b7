"""The oracle: hybrid (ONNX definitions where semantics matter, onnxruntime elsewhere), its
fallbacks in both directions, the whole-model kinds and golden files; and the engine scheduler."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.lowering.schedule import engine_runs
from onnx_dml_lowering.runtime.check import make_oracle
from onnx_dml_lowering.runtime.compiled_view import ModelView
from onnx_dml_lowering.runtime import oracle as oracle_module
from onnx_dml_lowering.runtime.onnx_definitions import DefinitionsRegion
from onnx_dml_lowering.runtime.oracle import DEFINITIONS, HOST, ORT_CPU, REFERENCE, HybridOracle
from tests.builders import graph_model, interleaved_chains
from tests.oracle import assert_outputs_same, reference


def test_engine_runs_group_interleaved_chains_into_three_regions():
    model = interleaved_chains(6)
    runs = engine_runs(list(model.graph.node), lambda n: "ref" if n.op_type == "NonZero" else "ort")
    assert [engine for engine, _ in runs] == ["ort", "ref", "ort"]
    assert sorted(n.name for _, nodes in runs for n in nodes) == sorted(n.name for n in model.graph.node)
    # A valid topological order: every node after the producers of what it reads.
    seen = {"x", "two"} | {f"c{i}" for i in range(6)}
    for _, nodes in runs:
        for node in nodes:
            assert all(name in seen for name in node.input), node.name
            seen.update(node.output)


def test_engine_runs_keep_the_model_order_when_one_engine_does_everything():
    model = interleaved_chains(3)
    runs = engine_runs(list(model.graph.node), lambda n: "ort")
    assert [[n.name for n in nodes] for _, nodes in runs] == [[n.name for n in model.graph.node]]


def test_hybrid_oracle_matches_the_whole_model_reference_and_uses_few_regions(rng):
    model = interleaved_chains(8)
    oracle = make_oracle(ModelView(model))
    x = (rng.standard_normal((4, 5)) * 3).astype(np.float32)
    assert_outputs_same(oracle.run({"x": x}), reference(model, {"x": x}))
    data = oracle.to_dict()
    assert data["kind"] == "hybrid" and len(data["regions"]) == 3
    engines = data["node_engines"]
    assert {engines[f"nz{i}"] for i in range(8)} == {DEFINITIONS}
    assert {engines[f"add{i}"] for i in range(8)} | {engines[f"mul{i}"] for i in range(8)} == {ORT_CPU}


def test_a_node_onnxruntime_cannot_load_moves_to_onnx_reference(rng):
    # onnxruntime's CPU provider has no Relu for int16 (ONNX has it from opset 14).
    model = graph_model([h.make_node("Relu", ["x"], ["r"], name="relu8"),
                         h.make_node("Neg", ["r"], ["y"], name="neg")],
                        [("x", T.INT16, [6])], [("y", T.INT16, [6])], opset=14)
    view = ModelView(model)
    oracle = HybridOracle(view.model, view.types)
    x = rng.integers(-100, 100, 6).astype(np.int16)
    assert_outputs_same(oracle.run({"x": x}), reference(model, {"x": x}))
    engines = oracle.node_engines()
    assert engines["relu8"] == REFERENCE and engines["neg"] == ORT_CPU


def loop_with_empty_condition() -> onnx.ModelProto:
    body = h.make_graph(
        [h.make_node("NonZero", ["x"], ["nz"], name="NonZero_0"), h.make_node("Shape", ["nz"], ["s"], name="Shape_1"),
         h.make_node("Identity", ["c_in"], ["c_out"], name="Identity_2"),
         h.make_node("Add", ["acc_in", "s"], ["acc_out"], name="Add_3")],
        "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
                 h.make_tensor_value_info("acc_in", T.INT64, [2])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("acc_out", T.INT64, [2])])
    return graph_model([h.make_node("Loop", ["m", "", "acc0"], ["acc"], name="loop", body=body)],
                       [("x", T.FLOAT, [2, 3]), ("m", T.INT64, []), ("acc0", T.INT64, [2])],
                       [("acc", T.INT64, [2])], opset=17)


def test_control_flow_holding_a_semantic_node_runs_on_the_host_with_its_body_split_by_engine():
    # Was routed whole to onnxruntime (onnx.reference runs an empty-condition Loop zero times), so its
    # NonZero ran on onnxruntime's kernel; now the host runs the Loop and the body's own oracle
    # gives the NonZero to the ONNX definitions and the rest to onnxruntime.
    view = ModelView(loop_with_empty_condition())
    feeds = {"x": np.array([[1, 0, 2], [0, 0, 3]], np.float32), "m": np.array(3, np.int64),
             "acc0": np.array([0, 0], np.int64)}
    oracle = make_oracle(view)
    np.testing.assert_array_equal(oracle.run(feeds)["acc"], [6, 9])      # 3 iterations of shape [2, 3]
    engines = oracle.to_dict()["node_engines"]
    body = {name.rsplit("/", 1)[1]: engine for name, engine in engines.items() if name.startswith("loop/body/")}
    assert engines["loop"] == HOST and body["NonZero_0"] == DEFINITIONS and body["Add_3"] == ORT_CPU
    assert oracle.to_dict()["fallbacks"] == []          # nothing deviated: nothing to name


def test_a_node_the_definitions_fail_on_falls_back_to_onnx_reference_by_name(monkeypatch, rng):
    model = interleaved_chains(2)
    oracle = make_oracle(ModelView(model))
    real = DefinitionsRegion.run

    def failing(self, outputs, feeds):
        if any(n.name == "nz1" for n in self.nodes):
            raise ValueError("broken definition")
        return real(self, outputs, feeds)

    monkeypatch.setattr(DefinitionsRegion, "run", failing)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    outputs = oracle.run({"x": x})
    monkeypatch.undo()
    assert_outputs_same(outputs, reference(model, {"x": x}))
    (fallback,) = oracle.fallbacks
    assert fallback.node == "nz1" and fallback.engine == REFERENCE and "broken definition" in fallback.reason
    assert oracle.node_engines()["nz0"] == DEFINITIONS


def test_a_node_onnx_reference_fails_on_falls_back_to_onnxruntime_by_name(monkeypatch, rng):
    model = interleaved_chains(2)
    view = ModelView(model)
    monkeypatch.setattr(oracle_module, "defines", lambda *args: False)     # every semantic node on onnx.reference
    oracle = make_oracle(view)
    from onnx.reference import ReferenceEvaluator
    real_run = ReferenceEvaluator.run

    def failing(self, outputs, feeds, *args, **kwargs):
        if any(n.name == "nz1" for n in self.proto_.graph.node):
            raise ValueError("need at least one array to concatenate")
        return real_run(self, outputs, feeds, *args, **kwargs)

    monkeypatch.setattr(ReferenceEvaluator, "run", failing)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    outputs = oracle.run({"x": x})
    engines = oracle.node_engines()
    monkeypatch.undo()
    assert_outputs_same(outputs, reference(model, {"x": x}))
    (fallback,) = oracle.fallbacks
    assert fallback.node == "nz1" and fallback.engine == ORT_CPU and "concatenate" in fallback.reason
    assert engines["nz0"] == REFERENCE


@pytest.mark.parametrize("kind", ["reference", "ort-cpu"])
def test_whole_model_oracles(kind, rng):
    model = interleaved_chains(3)
    view = ModelView(model)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    oracle = make_oracle(view, kind)
    assert_outputs_same(oracle.run({"x": x}), reference(model, {"x": x}))
    assert oracle.to_dict()["kind"] == kind


def test_golden_file_oracle(tmp_path, rng):
    model = interleaved_chains(2)
    view = ModelView(model)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    expected = reference(model, {"x": x})
    golden = tmp_path / "golden.npz"
    np.savez(golden, **expected)
    assert_outputs_same(make_oracle(view, str(golden)).run({"x": x}), expected)
    np.savez(golden, y0=expected["y0"])
    with pytest.raises(DmlLowerError, match="has no output 'y1'"):
        make_oracle(view, str(golden)).run({"x": x})
    with pytest.raises(DmlLowerError, match="does not exist"):
        make_oracle(view, str(tmp_path / "missing.npz"))
    with pytest.raises(DmlLowerError, match="unknown oracle 'magic'"):
        make_oracle(view, "magic")


def test_loop_scan_outputs_are_stacked_as_onnx_says():
    # onnx.reference concatenates [2, 3] per-iteration outputs into [4, 3]; ONNX stacks: [2, 2, 3].
    body = h.make_graph(
        [h.make_node("Identity", ["c_in"], ["c_out"], name="c"), h.make_node("NonZero", ["x"], ["nz"], name="nz"),
         h.make_node("Shape", ["nz"], ["n"], name="n"), h.make_node("EyeLike", ["x"], ["s"], name="eye")],
        "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, [])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("s", T.FLOAT, [2, 3])])
    model = graph_model([h.make_node("Loop", ["m", "c"], ["ss"], name="loop", body=body)],
                        [("x", T.FLOAT, [2, 3]), ("m", T.INT64, []), ("c", T.BOOL, [])],
                        [("ss", T.FLOAT, 3)], opset=17)
    feeds = {"x": np.ones((2, 3), np.float32), "m": np.array(2, np.int64), "c": np.array(True)}
    for kind in ("hybrid", "reference"):
        oracle = make_oracle(ModelView(model), kind)
        out = oracle.run(feeds)["ss"]
        assert out.shape == (2, 2, 3) and np.array_equal(out[1], np.eye(2, 3, dtype=np.float32)), kind
    (named,) = oracle.to_dict()["fallbacks"]      # the reference oracle says it ran this Loop itself
    assert named["node"] == "loop" and named["engine"] == HOST and "stacks" in named["reason"]


def initializer_output_model(w: np.ndarray) -> onnx.ModelProto:
    return graph_model([h.make_node("EyeLike", ["x"], ["ey"], name="eye")], [("x", T.FLOAT, [3, 3])],
                       [("ey", T.FLOAT, [3, 3]), ("w", T.FLOAT, [2])], initializers={"w": w})


@pytest.mark.parametrize("kind", ["hybrid", "reference", "ort-cpu"])
def test_a_graph_output_that_is_an_initializer(kind):
    """An initializer no node reads, listed as a graph output, is an output like any other (the
    hybrid oracle said 'produced no value for output' and check exited 2; found by a new-user trial)."""
    w = np.array([1.5, -2.0], np.float32)
    model = initializer_output_model(w)
    feeds = {"x": np.zeros((3, 3), np.float32)}
    got = make_oracle(ModelView(model), kind).run(feeds)
    assert np.array_equal(got["w"], w) and np.array_equal(got["ey"], np.eye(3, dtype=np.float32))
    # the lowered run gives it too: tests/compiler/test_compiled_view.py
