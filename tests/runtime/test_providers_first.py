"""check with one feed set runs each provider backend on it first and releases its session
(runtime/check.py, _run_providers_first), so onnxruntime's session of the shipped file and the
region sessions never hold their weights at once; the report is the old order's, bit for bit.

The old order is what CheckRun does with a number of feed sets it cannot know before the run
(`more_feeds` an iterator): every expectation here is that run's report, computed, not written."""
import gc
import json
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.runtime import backends as backends_module
from onnx_dml_lowering.runtime import check as check_module
from onnx_dml_lowering.runtime import interrupt
from onnx_dml_lowering.runtime.backends import Provider
from onnx_dml_lowering.runtime.check import CheckRun, Tolerances
from onnx_dml_lowering.runtime.region_engine import SessionCache
from onnx_dml_lowering.runtime.weights import stored_bytes
from onnx_dml_lowering.runtime.report import format_text
from tests.compiler.cli.test_stopping import long_loop
from tests.runtime.test_shared_region_sessions import feeds_for

REAL = Path(__file__).parent.parent / "models" / "real"
CHECK_3 = ["cpu", "ort", "ort-cpu"]
TOLERANCES = Tolerances(atol=1e-5, rtol=1e-4)

pytestmark = [
    pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning"),
]


class _Events(list):
    shipped: "list[weakref.ref]"
    regions: "list[weakref.ref]"            # each region session built
    regions_alive: "list[int]"              # how many of them were alive as each shipped session was made


@pytest.fixture
def sessions(monkeypatch):
    """(Every model reordered, whatever its weights.) What happens to onnxruntime sessions, in order, observed around the real calls: a provider
    backend's shipped session made ("shipped", made or not) and released ("released"), each
    region session built ("region", whether a shipped session is alive at that moment)."""
    monkeypatch.setattr(check_module, "PROVIDERS_FIRST_FROM", 0)    # these small models' weights too
    events = _Events()
    shipped: "list[weakref.ref]" = []
    regions: "list[weakref.ref]" = []
    events.regions_alive = []
    prepare, release, get = Provider.prepare, Provider.release, SessionCache.get

    def observed_prepare(self):
        gc.collect()
        events.regions_alive.append(sum(ref() is not None for ref in regions))
        try:
            return prepare(self)
        finally:
            events.append(("shipped", self._session is not None))
            if self._session is not None:
                shipped.append(weakref.ref(self._session))

    def observed_release(self, *args, **kwargs):
        release(self, *args, **kwargs)
        events.append(("released", True))

    def built(build):
        events.append(("region", any(ref() is not None for ref in shipped)))
        session = build()
        regions.append(weakref.ref(session))
        return session

    monkeypatch.setattr(Provider, "prepare", observed_prepare)
    monkeypatch.setattr(Provider, "release", observed_release)
    monkeypatch.setattr(SessionCache, "get", lambda self, key, build: get(self, key, lambda: built(build)))
    events.shipped, events.regions = shipped, regions
    return events


def untimed(report) -> dict:
    document = report.to_dict()
    for backend in document["backends"]:
        backend.pop("seconds", None)
    return document


def checked(model, feeds, backends, more=None):
    """(the report, the compiled model) of a CheckRun; `more` an iterator: the old order."""
    compiled = compile_model(model)
    run = CheckRun(compiled, feeds, backends, TOLERANCES, more_feeds=more)
    return run.report(), compiled


def assert_same_reports(new, old):
    assert untimed(new) == untimed(old)
    assert format_text(new) == format_text(old)         # the text report has no timings
    for ours, theirs in zip(new.backends, old.backends):
        assert ours.values.keys() == theirs.values.keys()
        for name, value in ours.values.items():
            np.testing.assert_array_equal(value, theirs.values[name], strict=True)


@pytest.mark.parametrize("name", ["gpt2.dynamo.onnx", "llama.torchscript.onnx"])
def test_check_3_on_a_real_model_releases_the_shipped_session_first_and_reports_as_before(name, sessions):
    compiled = compile_model(str(REAL / name))
    feeds = feeds_for(compiled)
    new, _ = checked(str(REAL / name), feeds, CHECK_3)
    new_events = list(sessions)
    del sessions[:]
    old, _ = checked(str(REAL / name), feeds, CHECK_3, more=iter(()))
    assert new.ok and [b.backend for b in new.backends] == CHECK_3
    assert_same_reports(new, old)
    # the shipped session was made (before anything ran), run, and gone before any region session
    assert new_events[:2] == [("shipped", True), ("released", True)] and len(new_events) > 2
    assert set(new_events[2:]) == {("region", False)}
    # ... and its outputs kept are copies: onnxruntime's own are views that keep its session alive
    assert all(value.base is None for value in new.backends[2].values.values())
    assert all(value.base is not None for value in old.backends[2].values.values())
    # the old order: every region session made beside it, never released
    assert sessions[0] == ("shipped", True) and set(sessions[1:]) == {("region", True)}


def test_more_feed_sets_run_in_the_old_order_each_set_as_checked_alone(sessions):
    """Feed sets > 1: each backend on each set in turn (the shipped session lives throughout); set
    #i's results are those of a one-set check of its feeds (where the provider runs first)."""
    path = str(REAL / "gpt2.dynamo.onnx")
    compiled = compile_model(path)
    sets = [feeds_for(compiled, seed) for seed in (0, 1, 2)]
    report, _ = checked(path, sets[0], CHECK_3, more=sets[1:])
    assert report.iterations == 3 and report.ok
    assert "released" not in {e for e, _ in sessions}
    document = untimed(report)
    for index, feeds in enumerate(sets):
        alone, _ = checked(path, feeds, CHECK_3)
        for backend, single in zip(document["backends"], untimed(alone)["backends"]):
            of_set = [{**o, "iteration": 0} for o in backend["outputs"] if o["iteration"] == index]
            assert of_set == single["outputs"]


def test_a_provider_that_cannot_load_is_reported_as_before_and_never_runs(sessions):
    """The NonZero over double onnxruntime's CPU provider has no kernel for: its shipped session
    fails as the backends are prepared, before anything runs; nothing runs first or is released."""
    path = str(example_paths()[2])
    compiled = compile_model(path)
    feeds = feeds_for(compiled)
    new, _ = checked(path, feeds, CHECK_3)
    assert ("released", True) not in sessions and ("shipped", True) not in sessions
    old, _ = checked(path, feeds, CHECK_3, more=iter(()))
    assert_same_reports(new, old)
    error = new.backends[2].error
    assert new.backends[2].status == "error" and error.startswith("onnxruntime (") and "cannot load the model" in error
    assert "\n" not in error


def test_ctrl_c_in_the_providers_first_run_stops_the_check_before_the_oracle(sessions):
    """A Ctrl-C inside onnxruntime's run of the shipped file (a Loop of 10**12 trips), delivered
    as the CLI's signal watcher delivers it: no set was checked, so it propagates as before; the
    session is released and no region session was ever made."""
    compiled = compile_model(long_loop(10**12))
    run = CheckRun(compiled, {"x": np.ones(4096, np.float32)}, ["cpu", "ort-cpu"], TOLERANCES)
    stopper = threading.Thread(target=_stop_the_first_run, daemon=True)
    stopper.start()
    with pytest.raises(KeyboardInterrupt):
        run.report()
    stopper.join(timeout=60)
    gc.collect()                        # the exception's frames held the session while it propagated
    assert sessions == [("shipped", True), ("released", True)] and sessions.shipped[0]() is None
    assert len(compiled.shared_sessions) == 0 and run.under_way is not None and run.under_way.index == 0


def _stop_the_first_run() -> None:
    import signal
    import time
    end = time.monotonic() + 60
    while not interrupt._ACTIVE and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.2)                     # inside session.run
    interrupt._stop_runs(signal.SIGINT)


def test_the_command_line_says_when_there_is_one_set(tmp_path, capfd, sessions):
    """`check` with one feed set (--iterations 1, an --inputs file) runs the providers first; with
    --iterations 2 the old order: set #0's results the same either way."""
    from onnx_dml_lowering.compiler.cli import main
    path = str(example_paths()[0])
    documents = []
    for iterations in (1, 2):
        del sessions[:]
        out = tmp_path / f"r{iterations}.json"
        assert main(["check", path, "--backends", ",".join(CHECK_3), "--iterations", str(iterations),
                     "--json", str(out)]) == 0
        assert (("released", True) in sessions) == (iterations == 1)
        documents.append(json.loads(out.read_text()))
    capfd.readouterr()
    one, two = ([[o for o in b["outputs"] if o["iteration"] == 0]
                 for b in document["backends"]] for document in documents)
    assert one == two and all(one)


@pytest.mark.parametrize("backends", [CHECK_3, ["ort-cpu"], ["ort-cpu", "cpu"]])
def test_a_model_with_small_weights_runs_the_shipped_file_last_alone(monkeypatch, sessions, backends):
    """Below PROVIDERS_FIRST_FROM the oracle's regions (and the lowered backends') run first, so a
    crash inside onnxruntime names a region and its node, and are released before the shipped
    file's session is made, which is released after its run: the two never live at once. The
    report is the old order's (each backend on the set in turn, every session alive), bit for bit,
    whatever the backends' order."""
    path = str(REAL / "gpt2.dynamo.onnx")
    compiled = compile_model(path)
    feeds = feeds_for(compiled)
    monkeypatch.setattr(check_module, "PROVIDERS_FIRST_FROM",
                        sum(map(stored_bytes, compiled.model.graph.initializer)) + 1)
    new, _ = checked(path, feeds, backends)
    events, alive = list(sessions), list(sessions.regions_alive)
    shipped_at = events.index(("shipped", True))
    assert new.ok and events[shipped_at:] == [("shipped", True), ("released", True)]
    assert shipped_at > 0 and set(events[:shipped_at]) == {("region", False)}
    assert alive == [0] and len(sessions.regions) == shipped_at
    assert all(value.base is None for value in new.backends[backends.index("ort-cpu")].values.values())
    del sessions[:], sessions.regions_alive[:]
    old, _ = checked(path, feeds, backends, more=iter(()))
    assert_same_reports(new, old)
    assert sessions[0] == ("shipped", True) and set(sessions[1:]) == {("region", True)}


def test_a_small_model_s_provider_that_cannot_load_is_reported_as_before(monkeypatch, sessions):
    """The shipped file's session fails as it is prepared after the oracle ran: its ERROR is the
    old order's, and the others' results too."""
    path = str(example_paths()[2])
    monkeypatch.setattr(check_module, "PROVIDERS_FIRST_FROM", 2**40)
    compiled = compile_model(path)
    feeds = feeds_for(compiled)
    new, _ = checked(path, feeds, CHECK_3)
    old, _ = checked(path, feeds, CHECK_3, more=iter(()))
    assert_same_reports(new, old)
    assert new.backends[2].status == "error" and "cannot load the model" in new.backends[2].error


# float32 elements of each intermediate of _wide_model: 16 MiB, the least the shipped session's
# arena holds while its outputs are kept as views of it
WIDE = 1 << 22


def _wide_model():
    """y = ReduceSum(Relu(x * x) + x): a 4-byte output computed through 16 MiB intermediates."""
    from onnx import TensorProto
    from onnx import helper
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Relu", ["sq"], ["r"]),
             helper.make_node("Add", ["r", "x"], ["s"]), helper.make_node("ReduceSum", ["s"], ["y"], keepdims=0)]
    graph = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [WIDE])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _malloc_in_use() -> int:
    """Bytes the C heap has handed out and not taken back (glibc's mallinfo2: the main heap's
    chunks in use and the mmapped ones), where onnxruntime's CPU allocator takes its memory."""
    import ctypes
    import ctypes.util

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")]
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("needs glibc >= 2.33 (mallinfo2) to count the C heap's bytes in use")
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


def _held_after_providers_first(monkeypatch, copy: bool, settings=None) -> "tuple[int, int, Provider]":
    """(C heap bytes still in use once the shipped session ran its one feed set and was released,
    the bytes of the outputs kept, the backend); `copy` False: the outputs kept as onnxruntime
    handed them back. Measured from a shared arena with no empty extension."""
    from onnx_dml_lowering.runtime.backends import BackendOptions
    from onnx_dml_lowering.runtime.ort.sessions import shrink_shared_arena
    if not copy:
        monkeypatch.setattr(backends_module, "owned", lambda value: value)
    x = np.random.default_rng(0).standard_normal(WIDE).astype(np.float32)
    run = CheckRun(compile_model(_wide_model()), {"x": x}, ["ort-cpu"], TOLERANCES, BackendOptions(settings=settings))
    run.prepare()
    shrink_shared_arena()
    gc.collect()
    before = _malloc_in_use()
    run._run_providers_first(run.first)
    gc.collect()
    held = _malloc_in_use() - before
    backend = run._runners[0]
    ran = run._ran_first[backend.name]
    assert isinstance(backend, Provider) and not isinstance(ran, Exception) and ran.outputs
    return held, sum(v.nbytes for v in ran.outputs.values()), backend


def test_outputs_kept_from_the_released_shipped_session_do_not_pin_its_memory(monkeypatch, sessions):
    """onnxruntime hands a CPU session's outputs back as views of its allocator's memory; one kept
    after the session is released keeps that memory (Mask R-CNN: 0.68 GB). What check keeps holds
    only its own bytes: after the release the C heap holds the outputs kept, not the session's
    16 MiB intermediates; on the session's own arena (a user's --session-config
    session.use_env_allocators=0) and on the shared arena (Provider.release). The control: the
    same run on its own arena with the outputs kept as handed back holds that arena."""
    from onnx_dml_lowering.runtime.ort.sessions import SHARED_ARENA_OPTION
    from onnx_dml_lowering.runtime.ort.settings import SessionSettings
    own = SessionSettings(((SHARED_ARENA_OPTION, "0"),))
    pinned, _, backend = _held_after_providers_first(monkeypatch, copy=False, settings=own)
    assert pinned >= 4 * WIDE and not backend._shared_arena     # an arena with one 16 MiB intermediate at least
    monkeypatch.undo()
    monkeypatch.setattr(check_module, "PROVIDERS_FIRST_FROM", 0)
    for settings, shared in ((own, False), (None, True)):
        held, kept, backend = _held_after_providers_first(monkeypatch, copy=True, settings=settings)
        assert backend._shared_arena is shared
        assert held < kept + WIDE                       # the outputs, and less than a quarter of one intermediate
