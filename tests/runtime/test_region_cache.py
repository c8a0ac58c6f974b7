"""Region-output reuse within one check (runtime/region_cache.py): a pass takes an earlier pass's
run of a region only on bit-identical feeds, every value is bit for bit what running it again
gives, and nothing is held past the passes that could read it."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime import check as check_module
from onnx_dml_lowering.runtime import kernels
from onnx_dml_lowering.runtime.check import Tolerances, check
from onnx_dml_lowering.runtime.ort_operators import OrtOperators
from onnx_dml_lowering.runtime.region_cache import RegionResults, same_bytes
from onnx_dml_lowering.runtime.region_engine import region_key
from tests.independence import independent, writable


def relu_nonzero_sqrt():
    """Two onnxruntime regions around a lowered NonZero: [relu] before it, [cast, sqrt] after it,
    so only the second one's feeds depend on how a backend computed the NonZero."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "n"])
    r = helper.make_tensor_value_info("r", TensorProto.FLOAT, [3, 4])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("NonZero", ["r"], ["nz"], name="nonzero"),
             helper.make_node("Cast", ["nz"], ["f"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Sqrt", ["f"], ["y"], name="sqrt")]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y, r]), opset_imports=[helper.make_opsetid("", 17)])


def shift_first_coordinate(original):
    """A NONZERO_COORDINATES kernel that is wrong on purpose: the first element's row, off by one."""
    def wrong(self_or_x, *args):
        original(self_or_x, *args)
        coords = args[-2]
        coords[0] += 1
    return wrong


FEEDS = {"x": np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)}


def run_check(monkeypatch, wrong_on: "tuple[str, ...]", reuse: bool):
    with monkeypatch.context() as patched:
        if "cpu" in wrong_on:        # the emulator's kernel
            patched.setattr(kernels, "nonzero_coordinates", shift_first_coordinate(kernels.nonzero_coordinates))
        if "ort" in wrong_on:        # the onnxruntime stand-in's
            patched.setattr(OrtOperators, "nonzero_coordinates",
                            shift_first_coordinate(OrtOperators.nonzero_coordinates))
        if not reuse:                # no pass scheduled: every region runs on every side
            patched.setattr(check_module, "schedule_reuse", lambda *args: None)
        compiled = compile_model(relu_nonzero_sqrt())
        assert len(compiled.partition.regions) == 2
        _, report = check(compiled, FEEDS, ["cpu", "ort"], Tolerances())
    return compiled.shared_sessions.results, report


def untimed(report) -> list:
    return [{k: v for k, v in backend.items() if k != "seconds"} for backend in report.to_dict()["backends"]]


@pytest.mark.parametrize("wrong_on, reused, stored", [
    ((), 4, 2),                  # every pass feeds both regions the oracle's bytes
    (("cpu",), 3, 3),            # cpu runs [cast, sqrt] again (kept for ort); ort takes the oracle's
    (("ort",), 3, 2),            # cpu takes the oracle's; ort, the last pass, runs it and keeps nothing
    (("cpu", "ort"), 3, 3),      # both wrong alike: ort takes cpu's run, not the oracle's
])
def test_reused_values_are_the_recomputed_ones_bit_for_bit(monkeypatch, wrong_on, reused, stored):
    results, report = run_check(monkeypatch, wrong_on, reuse=True)
    alone, again = run_check(monkeypatch, wrong_on, reuse=False)
    assert (results.reused, results.stored) == (reused, stored)
    assert (alone.reused, alone.stored) == (0, 0)
    assert len(results) == 0 and results.held == 0 and results.peak > 0      # dropped at the end
    assert untimed(report) == untimed(again)                                  # check's outputs unchanged
    for name, value in report.expected.items():
        assert same_bytes(value, again.expected[name])
    for mine, theirs in zip(report.backends, again.backends):
        assert mine.values.keys() == theirs.values.keys()
        for name, value in mine.values.items():
            assert same_bytes(np.asarray(value), np.asarray(theirs.values[name])), (mine.backend, name)
    statuses = {b.backend: [o.status for o in b.outputs] for b in report.backends}
    assert statuses == {b: (["mismatch", "match"] if b in wrong_on else ["match", "match"]) for b in ("cpu", "ort")}


def test_the_last_pass_drops_everything_and_unscheduled_passes_keep_nothing():
    key = region_key([helper.make_node("Relu", ["x"], ["y"], name="r")], ["x"], [], ["y"], ["CPUExecutionProvider"])
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    store = RegionResults()
    with store.passing("oracle"):            # nothing scheduled (a run outside check)
        store.keep(key, {"x": x}, {"y": y})
    assert len(store) == 0
    store.schedule(["oracle", "cpu", "ort"])
    with store.passing("oracle"):
        store.keep(key, {"x": x}, {"y": y})
    with store.passing("ort-cpu"):           # not a reader: neither keeps nor drops
        store.keep(key, {"x": x + 1}, {"y": y})
    with store.passing("cpu"):
        assert store.take(key, {"x": x.copy()}) is not None
        store.keep(key, {"x": x + 2}, {"y": y})
    assert len(store) == 2 and store.held == 4 * x.nbytes
    with store.passing("ort"):               # the last reader keeps nothing, and drops all as it ends
        store.keep(key, {"x": x + 3}, {"y": y})
        assert len(store) == 2 and store.take(key, {"x": x + 2}) is not None
    assert len(store) == 0 and store.held == 0 and store.peak == 4 * x.nbytes
    with store.passing("oracle"):            # the next feed set starts afresh
        assert store.take(key, {"x": x}) is None


def test_other_providers_or_settings_are_other_keys_so_they_run():
    """Runs are addressed by the region's session key: another provider list or other session
    settings is another computation, never taken."""
    from onnx_dml_lowering.runtime.ort.settings import SessionSettings
    relu = helper.make_node("Relu", ["x"], ["y"], name="r")
    cpu = region_key([relu], ["x"], [], ["y"], ["CPUExecutionProvider"])
    x = np.arange(4, dtype=np.float32)
    store = RegionResults()
    store.schedule(["a", "b"])
    with store.passing("a"):
        store.keep(cpu, {"x": x}, {"y": x})
    with store.passing("b"):
        for other in (region_key([relu], ["x"], [], ["y"], ["DmlExecutionProvider"]),
                      region_key([relu], ["x"], [], ["y"], ["CPUExecutionProvider"], SessionSettings(threads=2))):
            assert store.take(other, {"x": x}) is None
        assert store.take(cpu, {"x": x}) is not None


def test_run_with_two_lowered_backends_takes_the_first_ones_region_runs():
    """`run --backends cpu,ort`: no oracle runs, so `ort` takes `cpu`'s runs, and its outputs are
    bit for bit those of a run with nothing to take."""
    from onnx_dml_lowering.compiler.run_backends import RunBackends
    compiled = compile_model(relu_nonzero_sqrt())
    backends = RunBackends(compiled, ["cpu", "ort"])
    cpu, ort = backends.run("cpu", FEEDS), backends.run("ort", FEEDS)
    results = compiled.shared_sessions.results
    assert (results.reused, results.stored, len(results)) == (2, 2, 0)
    alone = compile_model(relu_nonzero_sqrt()).run(FEEDS, backend="ort")
    for name, value in alone.items():
        assert same_bytes(ort.outputs[name], value) and same_bytes(cpu.outputs[name], value)


def test_a_taken_run_shares_the_producers_memory_and_neither_side_can_write_it():
    """No copy is made, and the contract the copies kept holds: a write on either side raises (a
    lowered kernel writing into a value it took would be an error, never a changed expected value),
    and the caller's feeds stay writable."""
    key = region_key([helper.make_node("Relu", ["x"], ["y"], name="r")], ["x"], [], ["y"], ["CPUExecutionProvider"])
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    store = RegionResults()
    store.schedule(["oracle", "cpu"])
    with store.passing("oracle"):
        store.keep(key, {"x": x}, {"y": y})
    with store.passing("cpu"):
        taken = store.take(key, {"x": x.copy()})["y"]
    assert np.shares_memory(taken, y) and independent(taken, y)
    for side in (taken, y):
        with pytest.raises(ValueError, match="read-only"):
            side[0] = 7.0
    np.testing.assert_array_equal(y, np.ones(4, np.float32))
    assert writable(x)


def test_a_check_hands_back_shared_values_no_side_can_write(monkeypatch):
    """Through a whole check: the cpu and ort backends take the oracle's runs, and each output they
    report is independent of the expected one (the same memory read-only, or their own)."""
    results, report = run_check(monkeypatch, (), reuse=True)
    assert results.reused == 4
    for backend in report.backends:
        for name, value in backend.values.items():
            assert independent(np.asarray(value), report.expected[name]), (backend.backend, name)
    assert any(np.shares_memory(backend.values["r"], report.expected["r"]) for backend in report.backends)
