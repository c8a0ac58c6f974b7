"""run_session on onnxruntime's own CPU sessions: the wrapper's feed-name validation runs once per
set of feed names, later runs call the binding directly with the same results; wrappers that add
feeds of their own (WeightedSession) always go through their run."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

from onnx_dml_lowering.runtime.ort.model import WeightedSession
from onnx_dml_lowering.runtime.ort_values import run_session


def add_model(inputs: int = 3) -> bytes:
    names = [f"x{i}" for i in range(inputs)]
    nodes = [h.make_node("Sum", names, ["s"], name="sum"), h.make_node("NonZero", ["s"], ["nz"], name="nz")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, TP.FLOAT, [4]) for n in names],
                         [h.make_tensor_value_info("s", TP.FLOAT, [4]), h.make_tensor_value_info("nz", TP.INT64, [1, None])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8).SerializeToString()


def counting_session(data: bytes):
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    calls = []
    real = session._validate_input

    def validate(names):
        calls.append(list(names))
        return real(names)
    session._validate_input = validate
    return session, calls


def test_feed_names_are_validated_once_and_results_do_not_change():
    session, calls = counting_session(add_model())
    rng = np.random.default_rng(0)
    for _ in range(4):
        feeds = {f"x{i}": rng.integers(-1, 2, 4).astype(np.float32) for i in range(3)}
        got = run_session(session, ["s", "nz"], feeds)
        expected = ort.InferenceSession(add_model(), providers=["CPUExecutionProvider"]).run(["s", "nz"], feeds)
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, expected))
    assert calls == [["x0", "x1", "x2"]]                  # the first run only


def test_a_different_set_of_feed_names_is_validated_again_and_a_missing_input_still_raises():
    session, calls = counting_session(add_model())
    x = np.ones(4, np.float32)
    run_session(session, ["s"], {"x0": x, "x1": x, "x2": x})
    run_session(session, ["s"], {"x0": x, "x1": x, "x2": x})
    with pytest.raises(ValueError, match="x2"):
        run_session(session, ["s"], {"x0": x, "x1": x})
    assert calls == [["x0", "x1", "x2"], ["x0", "x1"]]


def test_a_weighted_session_always_adds_its_weights():
    inner = ort.InferenceSession(add_model(), providers=["CPUExecutionProvider"])
    weights = {"x2": np.full(4, 2.0, np.float32)}
    session = WeightedSession(inner, weights, {"x2"})
    x = np.array([1, -2, 0, 3], np.float32)
    for _ in range(3):
        (s,) = run_session(session, ["s"], {"x0": x, "x1": x})
        assert np.array_equal(s, 2 * x + 2)


def test_a_failing_feed_set_fails_through_the_wrapper_every_time():
    session, calls = counting_session(add_model())
    x = np.ones(4, np.float32)
    for _ in range(2):
        with pytest.raises(ValueError, match="x2"):
            run_session(session, ["s"], {"x0": x, "x1": x})
    assert calls == [["x0", "x1"], ["x0", "x1"]]          # never remembered as validated


@pytest.mark.parametrize("outputs", [None, []])
def test_no_output_names_means_every_output_on_every_run(outputs):
    session = ort.InferenceSession(add_model(), providers=["CPUExecutionProvider"])
    x = np.array([1, 0, 2, 0], np.float32)
    for _ in range(3):
        s, nz = run_session(session, outputs, {"x0": x, "x1": x, "x2": x})
        assert np.array_equal(s, 3 * x) and np.array_equal(nz, [[0, 2]])


def test_a_rebuilt_session_is_validated_again_and_a_failed_direct_run_goes_through_the_wrapper():
    from onnx_dml_lowering.runtime.ort_values import _facts
    session, calls = counting_session(add_model())
    x = np.array([1, 0, 2, 0], np.float32)
    feeds = {"x0": x, "x1": x, "x2": x}
    run_session(session, ["s"], feeds)
    session.set_providers(["CPUExecutionProvider"])           # a new binding session
    (s,) = run_session(session, ["s"], feeds)
    assert np.array_equal(s, 3 * x) and len(calls) == 2

    class FailsOnce:
        def __init__(self, real):
            self.real, self.calls = real, 0

        def __getattr__(self, name):
            return getattr(self.real, name)

        def run(self, *args):
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("provider failure")
            return self.real.run(*args)
    proxy = FailsOnce(session._sess)
    session._sess = proxy
    _facts(session).binding = proxy                            # validated feeds, a binding that fails once
    (s,) = run_session(session, ["s"], feeds)
    assert np.array_equal(s, 3 * x) and proxy.calls == 2 and len(calls) == 3
