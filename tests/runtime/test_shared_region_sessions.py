"""One onnxruntime session per ONNX region, shared by the lowered run and the hybrid oracle
(runtime/region_engine.py): shared exactly where the sub-models coincide, and every value the
same, bit for bit, as with the two sides building their own sessions."""
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.check import Tolerances, check, make_oracle
from onnx_dml_lowering.runtime.feeds import random_feeds
from onnx_dml_lowering.runtime.oracle import HybridOracle
from onnx_dml_lowering.runtime.ort.settings import SessionSettings
from onnx_dml_lowering.runtime.region_cache import RegionResults
from onnx_dml_lowering.runtime.region_engine import SessionCache as SharedSessions, region_key
from tests.independence import independent

REAL = Path(__file__).parent.parent / "models" / "real"
FEED_DIMS = {"batch": 3, "sequence": 6, "height": 320, "width": 320}

pytestmark = [
    pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning"),
]


def feeds_for(compiled, seed=0):
    known = {d.dim_param for vi in compiled.inputs for d in vi.type.tensor_type.shape.dim if d.dim_param}
    return random_feeds(compiled.inputs, seed=seed, dims={k: v for k, v in FEED_DIMS.items() if k in known})


@pytest.mark.parametrize("name, regions", [
    ("bert.dynamo.onnx", 1),            # no idiom: one region, the whole model
    ("gpt2.dynamo.onnx", 2),            # a causal-mask idiom splits it in two
    ("llama.torchscript.onnx", 2),
])
def test_check_builds_each_region_session_once(name, regions):
    compiled = compile_model(str(REAL / name))
    feeds = feeds_for(compiled)
    _, report = check(compiled, feeds, ["cpu"], Tolerances(atol=1e-5, rtol=1e-4))
    assert report.ok
    # The oracle built each onnxruntime region; the lowered run found every one in the cache.
    assert len(compiled.shared_sessions) == regions
    assert compiled.shared_sessions.hits == regions
    # ... and, its feeds being the oracle's bit for bit, took the oracle's results of each.
    assert compiled.shared_sessions.reused == regions
    assert all(independent(report.backends[0].values[o], report.expected[o]) for o in compiled.output_names)

    # Bit for bit what the two sides give with their own sessions.
    alone = compile_model(str(REAL / name))
    alone._shared_sessions = _Unshared()
    lowered = alone.run(feeds)
    own_oracle = HybridOracle(alone.model, alone.types, make_oracle(alone).semantic, shared=None)
    expected = own_oracle.run(feeds)
    again = compiled.run(feeds)          # a warm run outside check: nothing left to take
    assert compiled.shared_sessions.reused == regions
    for out in compiled.output_names:
        np.testing.assert_array_equal(again[out], lowered[out])
        np.testing.assert_array_equal(report.expected[out], expected[out])
    assert len(alone.shared_sessions) == 0


class _Unshared(SharedSessions):
    """Builds every time and keeps nothing: each side has its own session, as before sharing."""

    def get(self, key, build):
        return build()


def test_different_sub_models_do_not_share():
    relu = helper.make_node("Relu", ["x"], ["y"], name="relu")
    cpu = ["CPUExecutionProvider"]
    base = region_key([relu], ["x"], [], ["y"], cpu)
    built = []
    cache = SharedSessions()
    cache.get(base, lambda: built.append(1) or "session")
    for key in (region_key([relu], ["x", "w"], [], ["y"], cpu),         # other inputs
                region_key([relu], ["x"], ["w"], ["y"], cpu),           # other initializers
                region_key([relu], ["x"], [], ["y", "z"], cpu),         # other outputs
                region_key([relu], ["x"], [], ["y"], ["DmlExecutionProvider"]),
                region_key([relu], ["x"], [], ["y"], cpu, SessionSettings(threads=2))):   # the user's settings
        assert key != base
    assert cache.get(region_key([relu], ["x"], [], ["y"], cpu), lambda: "other") == "session"
    assert built == [1] and cache.hits == 1


def kept_for_a_later_pass(key, feeds, results):
    """A store (region_cache.RegionResults) holding one run made in the first of two passes."""
    store = RegionResults()
    store.schedule(["first", "second"])
    with store.passing("first"):
        store.keep(key, feeds, results)
    return store


@pytest.mark.parametrize("kept, given, same", [
    (np.array([0.0, 1.0], np.float32), np.array([0.0, 1.0], np.float32), True),
    (np.array([0.0, 1.0], np.float32), np.array([-0.0, 1.0], np.float32), False),    # equal, other bits
    (np.array([np.nan], np.float32), np.array([np.nan], np.float32), True),          # same NaN bits
    (np.array([np.nan], np.float32), -np.array([np.nan], np.float32), False),        # other NaN sign
    (np.array([1, 2], np.int64), np.array([1, 2], np.int32), False),                 # other dtype
    (np.array([1, 2], np.int64), np.array([[1, 2]], np.int64), False),               # other shape
    (np.arange(6).reshape(2, 3)[:, ::2], np.array([[0, 2], [3, 5]]), True),         # strided view
    (np.array(["a"], object), np.array(["a"], object), False),                       # not by bytes
])
def test_results_are_taken_only_on_bit_identical_feeds(kept, given, same):
    key = region_key([helper.make_node("Relu", ["x"], ["y"], name="r")], ["x"], [], ["y"],
                     ["CPUExecutionProvider"])
    results = {"y": np.ones(2, np.float32)}
    store = kept_for_a_later_pass(key, {"x": kept}, results)
    with store.passing("second"):
        taken = store.take(key, {"x": given})
    assert (taken is not None) == same and store.reused == int(same)
    if same:        # the producer's memory, which neither side can write
        np.testing.assert_array_equal(taken["y"], results["y"])
        assert independent(taken["y"], results["y"])
    assert len(store) == 0 and store.held == 0              # the last pass passed: dropped


def test_random_regions_share_sessions_but_not_results():
    from onnx import TensorProto
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    nodes = [helper.make_node("RandomUniformLike", ["x"], ["r"], name="rand", seed=1.0),
             helper.make_node("Add", ["x", "r"], ["y"], name="add")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    compiled = compile_model(model)
    check(compiled, {"x": np.zeros(4, np.float32)}, ["cpu"], Tolerances())
    assert compiled.shared_sessions.hits == 1 and compiled.shared_sessions.reused == 0


def test_a_wrong_lowered_value_is_still_caught(monkeypatch):
    """A lowered NonZero that is wrong feeds the region after it other bits: that region is run
    again on the lowered side, and check reports the mismatch the oracle computed independently."""
    from onnx import TensorProto

    from onnx_dml_lowering.runtime import kernels
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "n"])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("NonZero", ["r"], ["nz"], name="nonzero"),
             helper.make_node("Cast", ["nz"], ["f"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Sqrt", ["f"], ["y"], name="sqrt")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)}
    good = compile_model(model)
    _, report = check(good, feeds, ["cpu"], Tolerances())
    assert report.ok and good.shared_sessions.reused == 2 == len(good.partition.regions)

    original = kernels.nonzero_coordinates

    def wrong(x, count, coords, strict):
        original(x, count, coords, strict)
        coords[0] += 1                              # the first element's coordinates, off by one
    monkeypatch.setattr(kernels, "nonzero_coordinates", wrong)
    bad = compile_model(model)
    _, report = check(bad, feeds, ["cpu"], Tolerances())
    assert [o.status for o in report.backends[0].outputs] == ["mismatch"]
    assert bad.shared_sessions.reused == 1              # only the region before the NonZero


@pytest.mark.parametrize("name", ["bert.torchscript", "t5_encoder.torchscript"])
def test_shared_results_are_taken_by_name(name):
    """The oracle and the lowered run may list a shared region's outputs in different orders (the
    key holds them as a set): its results are handed over by name. With every intermediate value an
    output (check --outputs all) the orders differ, and positional results put values under their
    neighbours' names: false MISMATCHes on the first lowered backend (found by a new-user trial)."""
    compiled = compile_model(str(REAL / f"{name}.onnx"), outputs="all")
    _, report = check(compiled, feeds_for(compiled, seed=5), ["cpu", "ort"], Tolerances(atol=1e-5, rtol=1e-4))
    assert compiled.shared_sessions.reused >= 1
    wrong = [(o.backend, o.output, o.detail) for b in report.backends for o in b.outputs if o.status == "mismatch"]
    assert wrong == [] and report.ok


def test_taken_results_are_by_output_name():
    key = region_key([helper.make_node("Split", ["x"], ["a", "b"], name="s")], ["x"], [], ["b", "a"],
                     ["CPUExecutionProvider"])
    a, b = np.zeros(1, np.float32), np.ones(1, np.float32)
    store = kept_for_a_later_pass(key, {"x": np.arange(2.0)}, {"a": a, "b": b})
    taken = store.take(key, {"x": np.arange(2.0)})
    np.testing.assert_array_equal(taken["a"], a)
    np.testing.assert_array_equal(taken["b"], b)


def test_feeds_over_one_memory_are_the_same_bits_unread():
    """Two array objects over one memory (the lowered run's np.asarray of the oracle's mapped
    weight) are the same bits, decided without reading them: a weight's pages are not touched."""
    key = region_key([helper.make_node("Relu", ["x"], ["y"], name="r")], ["x"], [], ["y"], ["CPUExecutionProvider"])
    weight = np.arange(12, dtype=np.float32).reshape(3, 4)
    store = kept_for_a_later_pass(key, {"x": weight}, {"y": weight})
    view = np.asarray(weight).view()
    assert view is not weight and store.take(key, {"x": view}) is not None
    assert store.take(key, {"x": weight.T.copy().T}) is not None           # other memory, equal bits: read
    assert store.take(key, {"x": weight[:, ::-1]}) is None                   # one memory, other strides


def test_a_generated_initializer_is_fed_by_both_sides_so_the_region_is_shared():
    """A stored identity the lowering generates (DIAGONAL_MATRIX) is fed to the lowered run's
    region; the oracle feeds the stored value to the same region: one session, the oracle's results
    taken (the generated value is bit for bit the stored one). Whisper-small's stored mask made the
    two sides build and run the whole decoder twice."""
    from onnx import TensorProto, numpy_helper
    eye = numpy_helper.from_array(np.eye(16, dtype=np.float32), "stored_eye")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "stored_eye"], ["p"], name="mm"),
         helper.make_node("Relu", ["p"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], initializer=[eye])
    compiled = compile_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert compiled.partition.generated == {"stored_eye"}
    x = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32)
    _, report = check(compiled, {"x": x}, ["cpu"], Tolerances())
    assert report.ok
    assert len(compiled.shared_sessions) == 1 and compiled.shared_sessions.hits == 1
    assert compiled.shared_sessions.reused == 1
    np.testing.assert_array_equal(report.expected["y"], np.maximum(x @ np.eye(16, dtype=np.float32), 0))
