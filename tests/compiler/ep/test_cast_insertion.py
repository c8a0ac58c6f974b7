"""inspect --ep dml models onnxruntime's cast insertion as it is (issue 35, Why 8): its
InsertCastTransformer runs after partitioning in every session, so a float16 node no provider
takes (EyeLike-22: the DML EP registers EyeLike at 9 only, the CPU EP has no float16 EyeLike)
runs on the CPU EP in float32 between inserted Casts; the session does not fail. Checked against
a real onnxruntime CPU session, which partitions the node exactly as a DML session leaves it
(nothing took it) and applies the same transformer."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler.ep.placement import CPU, DML, NONE, predict_placement
from onnx_dml_lowering.compiler.optimize.dml import optimize_for_dml
from onnx_dml_lowering.runtime.ort_messages import ProviderLoadError
from onnx_dml_lowering.runtime.ort.assignment import node_providers
from onnx_dml_lowering.runtime.ort.providers import resolve_provider
from onnx_dml_lowering.runtime.ort.sessions import make_provider_session


def _eyelike(elem: int, around: bool) -> onnx.ModelProto:
    """EyeLike-22 over `elem`, alone or between a Relu and an Add (both taken by the DML EP)."""
    nodes = [h.make_node("EyeLike", ["r" if around else "x"], ["e"], name="eye")]
    if around:
        nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"), *nodes, h.make_node("Add", ["e", "x"], ["y"], name="add")]
    out = "y" if around else "e"
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", elem, [3, 3])],
                         [h.make_tensor_value_info(out, elem, [3, 3])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 22)], ir_version=10)


def _real_cpu(model: onnx.ModelProto) -> "dict[str, str] | ProviderLoadError":
    """Who ran each node in a real CPU-only session, or the session's failure."""
    try:
        session = make_provider_session(model, resolve_provider("CPUExecutionProvider"))
    except ProviderLoadError as exc:
        return exc
    assignment = node_providers(session)
    if assignment is None:
        pytest.skip(f"onnxruntime {ort.__version__} cannot report which provider ran each node")
    return assignment


@pytest.mark.parametrize("around", [False, True], ids=["alone", "between_dml_nodes"])
def test_a_float16_node_no_provider_takes_runs_on_the_cpu_between_casts(around):
    model = _eyelike(T.FLOAT16, around)
    nodes = {n["node"]: n for n in predict_placement(model, None)["nodes"]}
    real = _real_cpu(model)
    assert isinstance(real, dict), real            # onnxruntime casts it, the session loads
    assert real["eye"] == CPU
    x = np.ones((3, 3), np.float16)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": x})
    assert out.dtype == np.float16           # float32 inside, cast back to the model's float16
    np.testing.assert_array_equal(out, np.eye(3, dtype=np.float16) + (x if around else 0))
    assert nodes["eye"]["provider"] == CPU and "cast insertion" in nodes["eye"]["reason"]
    if around:
        assert (nodes["relu"]["provider"], nodes["add"]["provider"]) == (DML, DML)


def test_bfloat16_is_not_cast_so_the_session_fails_as_predicted():
    model = _eyelike(T.BFLOAT16, False)
    nodes = {n["node"]: n for n in predict_placement(model, None)["nodes"]}
    real = _real_cpu(model)
    assert isinstance(real, ProviderLoadError) and real.node == "eye" and real.not_implemented
    assert nodes["eye"]["provider"] == NONE


def test_optimize_for_dml_reports_the_move_from_the_cpu():
    """optimize --for dml repeats the prediction: the EyeLike-22 it rewrites moves CPU -> DML (it said 'none ->')."""
    model = _eyelike(T.FLOAT16, True)
    optimized, rewrites, _ = optimize_for_dml(model, None)
    moved = [line for r in rewrites for line in r.lines() if line.strip().startswith("eye:")]
    assert moved and moved[0].strip().startswith(f"eye: {CPU} -> {DML}"), moved
    x = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float16)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = ort.InferenceSession(optimized.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])


def test_a_cast_node_needs_the_cpu_s_float32_kernel_at_its_exact_since_version():
    """Cast insertion hands a float16 GlobalLpPool-22 to the CPU EP, whose GlobalLpPool is registered
    at 2 without an end version: onnxruntime's VerifyVersion takes such a kernel only at its start,
    so the session fails ('Failed to find kernel ... Version mismatch') and the prediction is none."""
    graph = h.make_graph([h.make_node("GlobalLpPool", ["x"], ["y"], name="pool")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT16, [1, 2, 3, 3])],
                         [h.make_tensor_value_info("y", T.FLOAT16, [1, 2, 1, 1])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 22)], ir_version=10)
    real = _real_cpu(model)
    assert isinstance(real, ProviderLoadError) and real.node == "pool" and real.failure is not None
    assert "version mismatch" in real.failure.detail
    nodes = {n["node"]: n for n in predict_placement(model, None)["nodes"]}
    assert nodes["pool"]["provider"] == NONE
