"""The ONNX region engine's own contract (runtime/region_engine.py): one session cache for the
oracle and the lowered run, the fallback chain and the reasons it records, results by output
name whatever order a side lists them in, and one size estimate whoever opens a session first."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.lowering.node import TensorInfo
from onnx_dml_lowering.runtime.check import Tolerances, check, make_oracle
from onnx_dml_lowering.runtime.oracle import ReferenceSession
from onnx_dml_lowering.runtime.ort.sessions import TINY_ELEMENTS
from onnx_dml_lowering.runtime.region_engine import (ORT, REFERENCE, REFERENCE_ORACLE, RegionEngine,
                                                      SessionCache)
from tests.independence import independent
from tests.oracle import reference


def model_of(nodes, inputs, outputs, opset=17, initializers=()):
    graph = h.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)


def relu_nonzero(side: int):
    return model_of([h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("NonZero", ["r"], ["y"], name="nz")],
                    [h.make_tensor_value_info("x", T.FLOAT, [side, side])],
                    [h.make_tensor_value_info("y", T.INT64, [2, None])])


def engine_of(model, **kwargs) -> "tuple[RegionEngine, object]":
    compiled = compile_model(model)
    return RegionEngine(compiled.model, compiled.types, reference_oracle=ReferenceSession, **kwargs), compiled


def test_the_oracle_and_the_lowered_run_get_the_same_session_object():
    compiled = compile_model(relu_nonzero(6))
    x = np.random.default_rng(0).standard_normal((6, 6)).astype(np.float32)
    oracle = make_oracle(compiled)
    expected = oracle.run({"x": x})
    got = compiled.run({"x": x}, strict=True)
    np.testing.assert_array_equal(got["y"], expected["y"])
    (oracle_session,) = [s for s in oracle.engine.sessions() if isinstance(s, ort.InferenceSession)]
    (lowered_session,) = compiled.session().regions.engine.sessions()
    assert lowered_session is oracle_session and compiled.shared_sessions.sessions() == [oracle_session]
    assert compiled.shared_sessions.hits == 1


@pytest.mark.parametrize("side", [8, 512, 513])
def test_the_size_estimate_is_the_same_on_both_sides(side):
    """Before, the oracle counted the initializers only and the lowered run its feeds too: in a check
    the oracle opened the region first and a 513 x 513 region ran on one thread."""
    compiled = compile_model(relu_nonzero(side))
    x = np.random.default_rng(side).standard_normal((side, side)).astype(np.float32)
    _, report = check(compiled, {"x": x}, ["cpu"], Tolerances())
    assert report.ok
    oracle = make_oracle(compiled)
    regions = compiled.session().regions
    (step,) = [s for s in compiled.graph.steps if s.kind == "ONNX_REGION"]
    lowered_region = regions.region(step)
    oracle_region = oracle.engine.region(regions.regions[step.name], step.inputs, step.outputs)
    assert oracle.engine.key(oracle_region) == regions.engine.key(lowered_region)
    tiny = side * side <= TINY_ELEMENTS
    assert oracle.engine.tiny(oracle_region) is regions.engine.tiny(lowered_region) is tiny
    (session,) = compiled.shared_sessions.sessions()
    assert session.get_session_options().intra_op_num_threads == (1 if tiny else 0)


@pytest.mark.parametrize("dims, fed_elements", [
    ((4, 5), 20), (("n", 5), 5), ((), 1), (None, 1),       # a symbolic dim, a scalar, an unknown rank
])
@pytest.mark.parametrize("spare", [0, 1])
def test_a_fed_value_counts_its_declared_shape(dims, fed_elements, spare):
    """Tiny: the embedded weight and the fed value hold at most TINY_ELEMENTS, whatever is fed."""
    size = TINY_ELEMENTS - fed_elements + spare
    model = model_of([h.make_node("Add", ["x", "w"], ["y"], name="add")],
                     [h.make_tensor_value_info("x", T.FLOAT, None)], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     initializers=[h.make_tensor("w", T.FLOAT, [size], np.zeros(size, np.float32))])
    engine = RegionEngine(model, {"x": TensorInfo("x", T.FLOAT, dims)})
    region = engine.region(list(model.graph.node), ["x", "w"], ["y"])
    assert region.fed == ("x",) and region.embedded == ("w",)
    assert engine.tiny(region) is (spare == 0)


def split_model():
    x = h.make_tensor_value_info("x", T.FLOAT, [6])
    outs = [h.make_tensor_value_info(n, T.FLOAT, [None]) for n in "abc"]
    split = h.make_tensor("s", T.INT64, [3], [1, 2, 3])
    return model_of([h.make_node("Split", ["x", "s"], ["a", "b", "c"], name="split")], [x], outs,
                    initializers=[split])


@settings(max_examples=12, deadline=None)
@given(st.permutations("abc"), st.permutations("abc"))
def test_results_are_by_name_whatever_order_each_side_lists_them(first, second):
    cache = SessionCache()
    model = split_model()
    compiled = compile_model(model)
    oracle_side = RegionEngine(compiled.model, compiled.types, cache=cache)
    lowered_side = RegionEngine(compiled.model, compiled.types, cache=cache)
    nodes = list(compiled.model.graph.node)
    x = np.arange(6, dtype=np.float32)
    cache.results.schedule(["oracle", "lowered"])
    with cache.results.passing("oracle"):
        kept = oracle_side.run(oracle_side.region(nodes, ["x", "s"], first), {"x": x}, (ORT,), reuse=True)
    with cache.results.passing("lowered"):
        taken = lowered_side.run(lowered_side.region(nodes, ["x", "s"], second), {"x": x}, (ORT,), reuse=True)
    expected = reference(model, {"x": x})
    assert cache.hits == 1 and cache.reused == 1 and len(cache) == 1
    for name in "abc":
        np.testing.assert_array_equal(kept[name], expected[name])
        np.testing.assert_array_equal(taken[name], expected[name])
        assert independent(kept[name], taken[name])


def int16_relu_then_neg():
    x = h.make_tensor_value_info("x", T.INT16, [2, 3])
    return model_of([h.make_node("Neg", ["x"], ["n"], name="neg"), h.make_node("Relu", ["n"], ["y"], name="relu16")],
                    [x], [h.make_tensor_value_info("y", T.INT16, [2, 3])])


def scalar_nonzero():
    x = h.make_tensor_value_info("x", T.FLOAT, [])
    return model_of([h.make_node("NonZero", ["x"], ["y"], name="nz")], [x],
                    [h.make_tensor_value_info("y", T.INT64, [None, None])])


@pytest.mark.parametrize("make, feeds, reason", [
    (int16_relu_then_neg, {"x": np.array([[1, -2, 3], [-4, 5, 0]], np.int16)}, "onnxruntime cannot run it: "),
    (scalar_nonzero, {"x": np.array(2.0, np.float32)}, "node nz: onnxruntime gives (1, nnz) for a scalar NonZero"),
])
def test_the_chain_falls_back_and_records_why(make, feeds, reason):
    model = make()
    engine, compiled = engine_of(model)
    nodes = list(compiled.model.graph.node)
    region = engine.region(nodes, list(feeds), [o.name for o in model.graph.output])
    chain = (ORT, REFERENCE_ORACLE)
    results = engine.run(region, feeds, chain)
    chosen, why = engine.chosen(region, chain)
    assert chosen == REFERENCE_ORACLE and why.startswith(reason)
    expected = reference(model, feeds)
    for name, value in expected.items():
        assert results[name].dtype == value.dtype
        np.testing.assert_array_equal(results[name], value)
    # another chain is another choice: onnx.reference alone, nothing passed over
    engine.run(region, feeds, (REFERENCE,))
    assert engine.chosen(region, (REFERENCE,)) == (REFERENCE, None)


def test_the_chain_takes_the_first_engine_that_loads():
    engine, compiled = engine_of(relu_nonzero(3))
    relu = compiled.model.graph.node[0]
    region = engine.region([relu], ["x"], ["r"])
    x = np.random.default_rng(1).standard_normal((3, 3)).astype(np.float32)
    np.testing.assert_array_equal(engine.run(region, {"x": x}, (ORT, REFERENCE_ORACLE))["r"], np.maximum(x, 0))
    assert engine.chosen(region, (ORT, REFERENCE_ORACLE)) == (ORT, None)


def test_the_last_engine_of_a_chain_fails_as_itself():
    engine, compiled = engine_of(int16_relu_then_neg())
    region = engine.region(list(compiled.model.graph.node), ["x"], ["y"])
    with pytest.raises(Exception, match="NOT_IMPLEMENTED|Could not find an implementation"):
        engine.open(region, (ORT,))
    assert engine.cache.sessions() == []                # a build that raised keeps nothing


def test_probe_names_the_nodes_onnxruntime_cannot_load():
    engine, compiled = engine_of(int16_relu_then_neg())
    region = engine.region(list(compiled.model.graph.node), ["x"], ["y"])
    assert engine.probe(region, RuntimeError("no node named here")) == ["relu16"]
    # each wording onnxruntime names a node in (runtime/ort_messages.py reads them all)
    for message in ("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for Neg(13) "
                    "node with name 'neg'",
                    "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Failed to find kernel for Neg(13) (node:'neg' "
                    "ep:'CPUExecutionProvider'). Kernel not found"):
        assert engine.probe(region, RuntimeError(message)) == ["neg"]


def test_an_unknown_type_is_one_line_for_onnxruntime_and_untyped_for_onnx_reference():
    """An input of unknown type: onnxruntime cannot take it (one line; onnx.reference runs the region);
    an output of unknown type (a custom-domain node's) is left untyped: onnxruntime types it itself."""
    engine, compiled = engine_of(relu_nonzero(3))
    relu = compiled.model.graph.node[0]
    x = np.random.default_rng(2).standard_normal((3, 3)).astype(np.float32)
    types = dict(compiled.types)
    del types["x"]
    engine = RegionEngine(compiled.model, types, reference_oracle=ReferenceSession)
    region = engine.region([relu], ["x"], ["r"], "the_region")
    with pytest.raises(DmlLowerError, match=r"^ONNX region the_region: the type of 'x' is unknown$"):
        engine.submodel(region)
    (fed,) = engine.submodel(region, typed=False).graph.input
    assert fed.name == "x" and not fed.type.HasField("tensor_type")
    results = engine.run(region, {"x": x}, (ORT, REFERENCE_ORACLE))
    np.testing.assert_array_equal(results["r"], np.maximum(x, 0))
    assert engine.chosen(region, (ORT, REFERENCE_ORACLE))[1].startswith("onnxruntime cannot run it: ONNX region")
    types = dict(compiled.types)
    del types["r"]
    engine = RegionEngine(compiled.model, types, reference_oracle=ReferenceSession)
    region = engine.region([relu], ["x"], ["r"], "the_region")
    (output,) = engine.submodel(region).graph.output
    assert output.name == "r" and not output.type.HasField("tensor_type")
    results = engine.run(region, {"x": x}, (ORT, REFERENCE_ORACLE))
    np.testing.assert_array_equal(results["r"], np.maximum(x, 0))
    assert engine.chosen(region, (ORT, REFERENCE_ORACLE))[0] == ORT


def test_an_engine_it_was_not_given_is_refused():
    engine = RegionEngine(split_model(), {})
    region = engine.region(list(engine.model.graph.node), ["x"], ["a"])
    with pytest.raises(ValueError, match="no 'host control flow' engine"):
        engine.session(region, "host control flow")


def test_onnx_reference_is_passed_over_where_it_gets_a_loop_wrong():
    """A Loop with no condition input: onnx.reference runs it zero times (ONNX: M times), the
    engine's deviation for onnx.reference names it and a chain goes on to the next engine."""
    body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"], name="keep"),
                         h.make_node("Add", ["v_in", "one"], ["v_out"], name="inc")], "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
                         h.make_tensor_value_info("v_in", T.FLOAT, [2])],
                        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("v_out", T.FLOAT, [2])],
                        [h.make_tensor("one", T.FLOAT, [], [1.0])])
    model = model_of([h.make_node("Loop", ["m", "", "v"], ["y"], name="loop", body=body)],
                     [h.make_tensor_value_info("m", T.INT64, []), h.make_tensor_value_info("v", T.FLOAT, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2])])
    engine, compiled = engine_of(model)
    region = engine.region(list(compiled.model.graph.node), ["m", "v"], ["y"])
    assert engine.deviation(REFERENCE, region).startswith("node 'loop': onnx.reference runs a Loop with an empty")
    assert engine.deviation(REFERENCE_ORACLE, region) is None       # it runs that Loop on the host
    feeds = {"m": np.array(3, np.int64), "v": np.zeros(2, np.float32)}
    results = engine.run(region, feeds, (REFERENCE, REFERENCE_ORACLE))
    np.testing.assert_array_equal(results["y"], feeds["v"] + feeds["m"])     # ONNX: M trips of +1
    assert engine.chosen(region, (REFERENCE, REFERENCE_ORACLE))[0] == REFERENCE_ORACLE
