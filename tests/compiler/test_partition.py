"""Partition passes, each on its own small model; re-entrancy; the precomputed ONNX fallback."""
from __future__ import annotations

import threading

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.frontend import check_and_infer
from onnx_dml_lowering.runtime.model_facts import value_types
from onnx_dml_lowering.compiler.node_ids import identify_nodes
from onnx_dml_lowering.compiler.partition import (PASSES, build_regions, defer_run_time_sized,
                                                  generate_constants, lower_static, match_idioms,
                                                  partition, schedule, start)
from onnx_dml_lowering.ir import DiagonalMatrix, Download, Graph, LowerAtRunTime, OnnxRegion, graph_to_dict, parse_level
from onnx_dml_lowering.lowering import Declined
from tests.builders import interleaved_chains
from tests.oracle import assert_outputs_same, differential, reference

LEVEL = parse_level("5_1")


def make(nodes, inputs, outputs, inits=(), opset=13) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "partition_test", inputs, outputs, list(inits))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)
    identify_nodes(model)
    return check_and_infer(model)


def state_of(model, level=LEVEL):
    return start(model, level, value_types(model))


def relu_nonzero_transpose(shape=(3, 4)):
    """x -> relu -> nonzero (+ transpose idiom) -> neg: ONNX, lowered idiom, ONNX."""
    return make([h.make_node("Relu", ["x"], ["r"], name="relu"),
                 h.make_node("NonZero", ["r"], ["nz"], name="nz"),
                 h.make_node("Transpose", ["nz"], ["t"], name="tr", perm=[1, 0]),
                 h.make_node("Neg", ["t"], ["y"], name="neg")],
                [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                [h.make_tensor_value_info("y", T.INT64, [None, None])])


def reshape_nonzero_transpose():
    """NonZero (+ Transpose) of Reshape(x, s): the rank is known only at run time."""
    return make([h.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
                 h.make_node("NonZero", ["r"], ["nz"], name="nz"),
                 h.make_node("Transpose", ["nz"], ["y"], name="tr", perm=[1, 0])],
                [h.make_tensor_value_info("x", T.FLOAT, ["n"]), h.make_tensor_value_info("s", T.INT64, ["k"])],
                [h.make_tensor_value_info("y", T.INT64, [None, None])])


# -- each pass on its own --------------------------------------------------------------------------

def test_start_sets_the_interface():
    state = state_of(relu_nonzero_transpose())
    assert state.graph.inputs == ["x"] and state.graph.outputs == ["y"]
    assert [n.name for n in state.nodes] == ["relu", "nz", "tr", "neg"]
    assert state.position == {"relu": 0, "nz": 1, "tr": 2, "neg": 3}


def test_generate_constants_replaces_an_identity_initializer():
    eye = h.make_tensor("w", T.FLOAT, [3, 3], np.eye(3, dtype=np.float32).reshape(-1).tolist())
    ramp = h.make_tensor("v", T.FLOAT, [2, 3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    model = make([h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                  h.make_node("Add", ["m", "v"], ["y"], name="add")],
                 [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
                 [eye, ramp])
    state = state_of(model)
    assert state.graph.inputs == ["x", "v", "w"]
    generate_constants(state)
    assert state.generated == {"w"}
    assert state.graph.inputs == ["x", "v"]                   # v is no band: still an input
    assert [type(s) for s in state.graph.steps] == [DiagonalMatrix, Download]
    assert [(p.onnx_nodes, p.status) for p in state.generated_placement] == [(["initializer:w"], "lowered")]
    assert [p.initializer for p in state.generated_placement] == ["w"]        # typed: nothing decodes the label
    assert not state.matches and not state.placement          # no other pass ran


def test_match_idioms_prefers_the_idiom_and_records_declines():
    state = state_of(relu_nonzero_transpose())
    match_idioms(state)
    assert [(m.rule, m.nodes) for m in state.matches] == [("nonzero_transpose", ("nz", "tr"))]
    assert set(state.covered) == {"nz", "tr"} and not state.declines

    low = state_of(relu_nonzero_transpose(), parse_level("2_1"))   # before NONZERO_COORDINATES
    match_idioms(low)
    assert not low.matches and set(low.declines) == {"nz"}
    assert "3_0" in low.declines["nz"][1]


def test_schedule_keeps_the_model_order_around_a_match():
    state = state_of(relu_nonzero_transpose())
    match_idioms(state)
    schedule(state)
    assert [x.name if isinstance(x, onnx.NodeProto) else x.nodes for x in state.order] == \
        ["relu", ("nz", "tr"), "neg"]


def test_lower_static_builds_only_known_sizes():
    state = state_of(relu_nonzero_transpose())
    for run in (match_idioms, lower_static, schedule):
        run(state)
    assert set(state.built) == {"nz"} and isinstance(state.built["nz"], Graph)

    dynamic = state_of(reshape_nonzero_transpose())
    for run in (match_idioms, lower_static, schedule):
        run(dynamic)
    assert dynamic.matches and not dynamic.built


def test_defer_run_time_sized_precomputes_the_fallback_region():
    state = state_of(reshape_nonzero_transpose())
    for run in (match_idioms, lower_static, schedule, defer_run_time_sized):
        run(state)
    assert list(state.deferred) == ["nz"] and state.deferred["nz"].nodes == ("nz", "tr")
    fallback = state.fallbacks["nz"]
    assert fallback.region == OnnxRegion("fallback_nz", ("nz", "tr"), ("r",), ("y",))
    assert [n.name for n in fallback.nodes] == ["nz", "tr"]


def test_build_regions_gathers_consecutive_onnx_nodes():
    state = state_of(relu_nonzero_transpose())
    for run in (match_idioms, lower_static, schedule, defer_run_time_sized, build_regions):
        run(state)
    regions = [s for s in state.graph.steps if isinstance(s, OnnxRegion)]
    assert [(r.name, r.onnx_nodes, r.inputs, r.outputs) for r in regions] == [
        ("onnx_region_0", ("relu",), ("x",), ("r",)), ("onnx_region_1", ("neg",), ("t",), ("y",))]
    assert {k: [n.name for n in v] for k, v in state.regions.items()} == {
        "onnx_region_0": ["relu"], "onnx_region_1": ["neg"]}
    assert [(p.onnx_nodes, p.status, p.rule) for p in state.placement] == [
        (["nz", "tr"], "lowered", "nonzero_transpose")]


def test_build_regions_puts_a_declined_build_back_into_the_region():
    state = state_of(relu_nonzero_transpose())
    for run in (match_idioms, lower_static, schedule):
        run(state)
    state.built["nz"] = Declined("declined for this test")
    for run in (defer_run_time_sized, build_regions):
        run(state)
    regions = [s for s in state.graph.steps if isinstance(s, OnnxRegion)]
    assert [r.onnx_nodes for r in regions] == [("relu", "nz", "tr", "neg")]
    assert [(p.status, p.reason) for p in state.placement] == [("onnx", "declined for this test")]


def test_build_regions_emits_a_run_time_step_for_a_deferred_match():
    state = state_of(reshape_nonzero_transpose())
    for run in PASSES:
        run(state)
    assert [type(s) for s in state.graph.steps] == [OnnxRegion, LowerAtRunTime]
    assert state.graph.steps[1] == LowerAtRunTime("nz", "nonzero_transpose", ("r",), ("y",))


# -- re-entrancy -----------------------------------------------------------------------------------

def summary(part) -> tuple:
    return ([p.to_dict() for p in part.placement], graph_to_dict(part.graph),
            {k: [n.name for n in v] for k, v in part.regions.items()}, sorted(part.deferred),
            {k: f.region for k, f in part.fallbacks.items()}, sorted(part.generated))


def test_two_partitions_interleaved_pass_by_pass_match_sequential_ones():
    one, two = relu_nonzero_transpose(), reshape_nonzero_transpose()
    expected = (summary(partition(one, LEVEL)), summary(partition(two, LEVEL)))
    a, b = state_of(one), state_of(two)
    for run in PASSES:
        run(a)
        run(b)
    assert (summary(a.result()), summary(b.result())) == expected


def test_the_same_model_compiled_in_threads_gives_identical_placements():
    model = relu_nonzero_transpose((4, 5, 6))
    expected = summary(compile_model(model).partition)
    results: list = [None] * 4
    barrier = threading.Barrier(len(results))

    def work(i: int) -> None:
        barrier.wait()
        results[i] = [summary(compile_model(model).partition) for _ in range(3)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == [expected] * 3 for r in results)


# -- the precomputed fallback at run time ----------------------------------------------------------

def test_a_declined_run_time_specialisation_runs_the_precomputed_fallback(rng):
    model = reshape_nonzero_transpose()
    shape = [2] * 9                       # rank 9: over NONZERO_COORDINATES's 8 dimensions
    x = (rng.random(2 ** 9) < 0.5).astype(np.float32)
    feeds = {"x": x, "s": np.array(shape, np.int64)}
    compiled = differential(model, feeds).compiled
    session = compiled.session("cpu")
    assert any("left to ONNX" in line and "rank 9" in line for line in session.log), session.log
    fallback = compiled.partition.fallbacks["nz"]
    assert session.regions.regions["fallback_nz"] == list(fallback.nodes)
    assert session.regions.engines["fallback_nz"]      # it ran
    # A rank the operator takes is still lowered at run time, next to the fallback.
    small = {"x": x[:24], "s": np.array([2, 3, 4], np.int64)}
    assert_outputs_same(compiled.run(small, strict=True), reference(model, small))


def test_interleaved_chains_make_two_regions_not_one_per_chain(rng):
    # Exporters interleave one chain per detection class: Add -> NonZero -> Cast -> Mul, n times.
    model = interleaved_chains(12)
    compiled = compile_model(model)
    assert len(compiled.partition.regions) == 2
    assert sum(p.status == "lowered" for p in compiled.placement) == 12
    x = (rng.standard_normal((4, 5)) * 3).astype(np.float32)
    assert_outputs_same(compiled.run({"x": x}, strict=True), reference(model, {"x": x}))


def test_dead_onnx_nodes_make_no_region() -> None:
    """A node whose output nothing reads (tf2onnx leaves a Shape behind its EyeLike form) made a region
    with no output, which onnxruntime refused to run ('At least one output should be requested')."""
    nodes = [h.make_node("Shape", ["x"], ["unused"], name="dead_shape"),
             h.make_node("NonZero", ["x"], ["y"], name="nonzero"), h.make_node("Neg", ["x"], ["dead"], name="dead_neg")]
    graph = h.make_graph(nodes, "dead", [h.make_tensor_value_info("x", T.FLOAT, [5])],
                         [h.make_tensor_value_info("y", T.INT64, [1, None])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    result = differential(model, {"x": np.array([1, 0, -2, 0, 3], np.float32)})
    regions = [s for s in result.compiled.graph.steps if isinstance(s, OnnxRegion)]
    assert all(s.outputs for s in regions)
    assert result.compiled.run({"x": np.zeros(5, np.float32)}, backend="ort")["y"].shape == (1, 0)


def test_generate_constants_reads_a_stored_weight_by_its_first_row(tmp_path, monkeypatch):
    """A weight left in the model file (from 4 KiB) is told from its first row: a dense one is
    never read whole by the partition, a band is still generated (and read to be checked)."""
    import onnx_dml_lowering.compiler.graph_view as graph_view
    rng = np.random.default_rng(7)
    dense = rng.standard_normal((64, 64)).astype(np.float32)
    eye = (np.eye(64) * 2).astype(np.float32)
    # a first row of one value (the band test's first look passes) that is no band further down
    late = np.zeros((64, 64), np.float32)
    late[0, 0], late[40, 3] = 1, 1
    inits = [onnx.numpy_helper.from_array(a, n) for a, n in ((dense, "dense"), (eye, "eye"), (late, "late"))]
    model = h.make_model(h.make_graph(
        [h.make_node("Add", ["x", "dense"], ["a"], name="a"), h.make_node("Add", ["a", "eye"], ["b"], name="b"),
         h.make_node("Add", ["b", "late"], ["y"], name="y")], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [64, 64])], [h.make_tensor_value_info("y", T.FLOAT, [64, 64])], inits),
        opset_imports=[h.make_opsetid("", 13)], ir_version=8)
    path = tmp_path / "weights.onnx"
    onnx.save(model, str(path))
    read: "list[str]" = []
    real = graph_view.tensor_array
    monkeypatch.setattr(graph_view, "tensor_array", lambda t, *a, **k: read.append(t.name) or real(t, *a, **k))
    compiled = compile_model(str(path))
    assert compiled.partition.generated == {"eye"}
    assert sorted(read) == ["eye", "late"]            # dense: its first row alone, then left unread
    x = rng.standard_normal((64, 64)).astype(np.float32)
    assert_outputs_same(compiled.run({"x": x}), reference(model, {"x": x}))
