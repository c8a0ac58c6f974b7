"""Execution providers as backends: names, one-line errors, plugin devices, and who ran each node."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.ort import assignment, libraries, providers, sessions, settings


def watched_model():
    """NonZero on an input, EyeLike on a constant (folded away), EyeLike on an input, a Relu."""
    x = h.make_tensor_value_info("x", T.FLOAT, [3, 4])
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             h.make_node("EyeLike", ["c"], ["eye_const"], name="eye_of_constant"),
             h.make_node("EyeLike", ["x"], ["eye_x"], name="eye_of_input", k=1),
             h.make_node("Relu", ["x"], ["r"], name="relu")]
    outs = [h.make_tensor_value_info(n, t, None) for n, t in
            (("nz", T.INT64), ("eye_const", T.FLOAT), ("eye_x", T.FLOAT), ("r", T.FLOAT))]
    graph = h.make_graph(nodes, "watched", [x], outs, [h.make_tensor("c", T.FLOAT, [3, 3], [0] * 9)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("text, name", [
    ("CPUExecutionProvider", "CPUExecutionProvider"), ("openvino", "OpenVINOExecutionProvider"),
    ("OpenVINOExecutionProvider", "OpenVINOExecutionProvider"), ("cpu", "CPUExecutionProvider"),
    ("dml", "DmlExecutionProvider"), (" WebGpuExecutionProvider", "WebGpuExecutionProvider")])
def test_provider_names(text, name):
    assert providers.provider_name(text) == name


@pytest.mark.parametrize("text, kind, provider", [
    ("cpu", "lowered", ""), ("ort", "lowered", ""),
    ("ort-cpu", "provider", "CPUExecutionProvider"), ("ort-dml", "provider", "DmlExecutionProvider"),
    ("ort:CPUExecutionProvider", "provider", "CPUExecutionProvider"),
    ("ort: WebGpuExecutionProvider", "provider", "WebGpuExecutionProvider"),
    ("saved:cpu", "saved", "")])
def test_backend_names_are_decoded_in_one_table(text, kind, provider):
    from onnx_dml_lowering.runtime.backends import parse_backend
    parsed = parse_backend(text)
    assert (parsed.kind.value, parsed.provider) == (kind, provider)


@pytest.mark.parametrize("text, message", [("ort:", "names no execution provider"),
                                           ("gpu", "unknown backend 'gpu'; choose from cpu, ort, dml, ort-cpu")])
def test_bad_backend_names_are_one_line(text, message):
    from onnx_dml_lowering.runtime.backends import parse_backend
    with pytest.raises(DmlLowerError, match=message):
        parse_backend(text)


def test_cpu_backend_with_options():
    spec = providers.resolve_provider("CPUExecutionProvider", ["foo = bar", "a=b=c"])
    assert spec.name == "CPUExecutionProvider" and spec.device is None
    assert spec.options == {"foo": "bar", "a": "b=c"}
    assert spec.description == "CPUExecutionProvider with foo=bar, a=b=c"


@pytest.mark.parametrize("bad", ["novalue", "=x"])
def test_provider_option_must_be_name_value(bad):
    with pytest.raises(DmlLowerError, match="is not NAME=VALUE"):
        providers.parse_provider_options([bad])


def one_line(exc_info) -> str:
    text = str(exc_info.value)
    assert "\n" not in text
    return text


def test_unknown_provider_lists_what_is_offered():
    with pytest.raises(DmlLowerError) as exc:
        providers.resolve_provider("NoSuchExecutionProvider")
    text = one_line(exc)
    assert "'NoSuchExecutionProvider' is unknown" in text
    for name in ort.get_available_providers():
        assert name in text


@pytest.mark.skipif("DmlExecutionProvider" in ort.get_available_providers(), reason="DirectML is here")
def test_dml_says_it_needs_windows_and_the_extra():
    with pytest.raises(DmlLowerError) as exc:
        providers.resolve_provider("DmlExecutionProvider")
    text = one_line(exc)
    assert "needs Windows" in text and "'directml' extra" in text and "CPUExecutionProvider" in text


def test_known_but_absent_provider_says_so():
    absent = next(n for n in ("CoreMLExecutionProvider", "QNNExecutionProvider")
                  if n not in ort.get_available_providers())
    with pytest.raises(DmlLowerError) as exc:
        providers.resolve_provider(absent)
    assert f"{absent} is not available in this onnxruntime build" in one_line(exc)


def test_op_by_op_resolve_takes_provider_names():
    assert providers.resolve(["CPUExecutionProvider", "cpu"]) == ["CPUExecutionProvider"] * 2
    with pytest.raises(DmlLowerError, match="is unknown"):
        providers.resolve(["Nope"])


@pytest.mark.parametrize("spec, message", [
    ("noequals", "is not NAME=PATH"), ("name=", "is not NAME=PATH"),
    ("lib=/no/such/libep.so", "does not exist")])
def test_ep_library_spec_errors(spec, message):
    with pytest.raises(DmlLowerError, match=message):
        libraries.register_ep_libraries([spec])


def test_ep_library_that_is_not_a_library(tmp_path):
    junk = tmp_path / "libjunk_ep.so"
    junk.write_bytes(b"not a shared object")
    with pytest.raises(DmlLowerError) as exc:
        libraries.register_ep_libraries([f"junk={junk}"])
    assert one_line(exc).startswith("--ep-library junk: onnxruntime cannot load")


def test_ep_library_that_offers_no_device(tmp_path, monkeypatch):
    """A library that loads but lists no device for the provider: one line naming both."""
    library = tmp_path / "libempty_ep.so"
    library.write_bytes(b"")
    monkeypatch.setattr(ort, "register_execution_provider_library", lambda name, path: None)
    monkeypatch.setattr(libraries, "_REGISTERED_LIBRARIES", {})
    with pytest.raises(DmlLowerError) as exc:
        providers.resolve_provider("EmptyExecutionProvider", ep_libraries=[f"empty={library}"])
    text = one_line(exc)
    assert "library empty offers no device for EmptyExecutionProvider on this machine" in text
    assert "CPUExecutionProvider (CPU)" in text


def test_a_provider_on_an_ep_device_runs_through_add_provider_for_devices():
    """The plugin path (a device from get_ep_devices) on the one device every build lists."""
    (device,) = [d for d in ort.get_ep_devices() if d.ep_name == "CPUExecutionProvider"]
    spec = providers.ProviderSpec("CPUExecutionProvider", {}, device, "builtin")
    assert "on CPU device" in spec.description
    session = sessions.make_provider_session(watched_model().SerializeToString(), spec)
    assert session.get_providers()[0] == "CPUExecutionProvider"
    x = np.eye(3, 4, dtype=np.float32)
    assert session.run(["nz"], {"x": x})[0].tolist() == [[0, 1, 2], [0, 1, 2]]
    assert assignment.node_providers(session)["nonzero"] == "CPUExecutionProvider"


def test_node_providers_and_findings_on_cpu():
    model = watched_model()
    session = sessions.make_provider_session(model.SerializeToString(), providers.resolve_provider("cpu"))
    ran = assignment.node_providers(session)
    assert ran == {"nonzero": "CPUExecutionProvider", "eye_of_input": "CPUExecutionProvider",
                   "relu": "CPUExecutionProvider"}
    (finding,) = assignment.placement_findings(model, ran, "CPUExecutionProvider")
    assert (finding.node, finding.op_type, finding.provider) == ("eye_of_constant", "EyeLike", None)
    assert "removed by onnxruntime's constant folding" in finding.describe("CPUExecutionProvider")


def test_findings_name_a_fallback():
    ran = {"nonzero": "CPUExecutionProvider", "eye_of_input": "OpenVINOExecutionProvider",
           "relu": "CPUExecutionProvider"}
    findings = assignment.placement_findings(watched_model(), ran, "OpenVINOExecutionProvider")
    assert [f.describe("OpenVINOExecutionProvider") for f in findings] == [
        "NonZero node nonzero: fell back to CPUExecutionProvider (requested OpenVINOExecutionProvider)",
        "EyeLike node eye_of_constant: removed by onnxruntime's constant folding (no provider ran it)"]


def test_no_assignment_without_recording():
    session = sessions.make_session(watched_model().SerializeToString(), ["CPUExecutionProvider"])
    assert assignment.node_providers(session) is None


def test_no_fallback_sets_the_session_option():
    options = settings.session_options(no_fallback=True)
    assert options.get_session_config_entry(settings.FALLBACK_OPTION) == "1"
    assert options.get_session_config_entry(settings.RECORD_ASSIGNMENT_OPTION) == "1"


def test_no_fallback_on_cpu_itself_is_not_a_conflict():
    session = sessions.make_provider_session(watched_model().SerializeToString(), providers.resolve_provider("cpu"),
                                             no_fallback=True)
    assert session.get_providers() == ["CPUExecutionProvider"]


def test_no_fallback_makes_an_unplaceable_node_an_error():
    """Without the CPU provider to fall back to, a provider lacking a kernel fails to load."""
    others = [p for p in ort.get_available_providers() if p not in ("CPUExecutionProvider",)]
    if not others:
        pytest.skip("no provider besides CPUExecutionProvider here")
    spec = providers.ProviderSpec(others[0])
    with pytest.raises(DmlLowerError) as exc:
        sessions.make_provider_session(watched_model().SerializeToString(), spec, no_fallback=True)
    assert "with CPU fallback disabled" in one_line(exc)


def test_a_vanished_node_that_reads_an_input_is_not_blamed_on_constant_folding():
    model = watched_model()
    findings = assignment.placement_findings(model, {}, "CPUExecutionProvider")
    described = {f.node: f.describe("CPUExecutionProvider") for f in findings}
    assert "constant folding" in described["eye_of_constant"]
    assert "constant folding" not in described["nonzero"] and "optimized graph" in described["nonzero"]


def test_region_sessions_share_one_cpu_arena_and_provider_sessions_keep_their_own():
    """Every CPU region session allocates from one arena registered with onnxruntime's environment
    (each session's own arena kept the peak of its activations: a model cut into regions held the
    sum of their peaks); a provider backend's session is left as onnxruntime makes it, and a user's
    --session-config entry still wins."""
    import numpy as np
    from onnx import TensorProto, helper

    from onnx_dml_lowering.runtime.ort.providers import resolve_provider
    from onnx_dml_lowering.runtime.ort.sessions import (SHARED_ARENA_OPTION, make_provider_session, make_session,
                                                        shared_cpu_arena)
    from onnx_dml_lowering.runtime.ort.settings import SessionSettings
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert shared_cpu_arena()
    session = make_session(model, ["CPUExecutionProvider"])
    assert session.get_session_options().get_session_config_entry(SHARED_ARENA_OPTION) == "1"
    x = np.array([-1, 2, -3, 4], np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.maximum(x, 0))
    mine = make_session(model, ["CPUExecutionProvider"], settings=SessionSettings(((SHARED_ARENA_OPTION, "0"),)))
    assert mine.get_session_options().get_session_config_entry(SHARED_ARENA_OPTION) == "0"
    provider = make_provider_session(model, resolve_provider("CPUExecutionProvider"))
    with pytest.raises(RuntimeError, match="does not have configuration"):
        provider.get_session_options().get_session_config_entry(SHARED_ARENA_OPTION)


def test_only_the_cpu_provider_in_this_process_may_share_the_arena():
    """A provider session run once (check's one feed set) may allocate from the shared CPU arena
    only on onnxruntime's CPU provider here: the DML EP (in process or through ort_host) and a
    plugin's device hand outputs back through allocators of their own; a user's own entry wins.
    Where it may, the session carries the entry; where not, it is made as onnxruntime makes it."""
    from dataclasses import replace

    from onnx import TensorProto, helper

    from onnx_dml_lowering.runtime.ort.providers import ProviderSpec, resolve_provider
    from onnx_dml_lowering.runtime.ort.sessions import SHARED_ARENA_OPTION, make_provider_session, may_share_arena
    from onnx_dml_lowering.runtime.ort.settings import SessionSettings
    cpu = resolve_provider("CPUExecutionProvider")
    assert may_share_arena(cpu)
    assert not may_share_arena(ProviderSpec("DmlExecutionProvider"))
    assert not may_share_arena(replace(cpu, host=object()))
    assert not may_share_arena(replace(cpu, device=object()))
    mine = SessionSettings(((SHARED_ARENA_OPTION, "0"),))
    assert not may_share_arena(cpu, mine)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    shared = make_provider_session(model, cpu, shared_arena=True)
    assert shared.get_session_options().get_session_config_entry(SHARED_ARENA_OPTION) == "1"
    user = make_provider_session(model, cpu, settings=mine, shared_arena=True)
    assert user.get_session_options().get_session_config_entry(SHARED_ARENA_OPTION) == "0"


def test_a_provider_backends_placement_notes_are_worked_out_when_first_read():
    """check's report reads them; run never does, and pays no walk of the graph for them."""
    from onnx_dml_lowering.runtime.backends import BackendOptions, make_backends
    from onnx_dml_lowering.runtime.compiled_view import ModelView
    view = ModelView(watched_model())
    (backend,), _ = make_backends(view, ["ort-cpu"], BackendOptions())
    prepared = backend.prepare()
    assert "placement_notes" not in vars(prepared)
    expected = assignment.describe_findings(
        assignment.placement_findings(view.model, prepared.node_providers, "CPUExecutionProvider"), "CPUExecutionProvider")
    assert any("eye_of_constant" in note for note in expected)
    assert prepared.placement_notes == expected and prepared.placement_notes is prepared.placement_notes
