"""--session-config / --graph-optimization-level / --threads reach every onnxruntime session a check
creates (the oracle's regions, the lowered graph's ONNX regions, the ort backend's operators, the
ort-cpu original), read back from each real session; the results still match; bad values are one line."""
from __future__ import annotations

import inspect
import os

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.cli.groups import parse_session_settings
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.check import BackendOptions, Tolerances, check
from onnx_dml_lowering.runtime.ort.sessions import validate_settings
from onnx_dml_lowering.runtime.ort.settings import SessionSettingRejected, SessionSettings
from tests.cli_runner import cli

# The runtime modules that create sessions, named by who asked for one.
CREATORS = {"oracle.py": "oracle", "onnx_regions.py": "regions", "ort_operators.py": "ort operators",
            "backends.py": "original on ort-cpu"}


def relu_nonzero_eyelike():
    x = h.make_tensor_value_info("x", TP.FLOAT, [4, 5])
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("NonZero", ["r"], ["y"], name="nz"),
             h.make_node("EyeLike", ["r"], ["e"], name="eye", k=1), h.make_node("Neg", ["e"], ["z"], name="neg")]
    graph = h.make_graph(nodes, "g", [x], [h.make_tensor_value_info("y", TP.INT64, [2, None]),
                                           h.make_tensor_value_info("z", TP.FLOAT, [4, 5])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


@pytest.fixture
def spy(monkeypatch):
    """Every InferenceSession created, as (creator, its SessionOptions read back from the session)."""
    created = []
    real = ort.InferenceSession

    class Recording(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            creator = next((CREATORS[os.path.basename(f.filename)] for f in inspect.stack()
                            if os.path.basename(f.filename) in CREATORS), "other")
            created.append((creator, self.get_session_options()))

    monkeypatch.setattr(ort, "InferenceSession", Recording)
    return created


def settings_of(options) -> tuple:
    try:
        spinning = options.get_session_config_entry("session.intra_op.allow_spinning")
    except Exception:         # onnxruntime raises for an entry never set
        spinning = None
    return options.graph_optimization_level, options.intra_op_num_threads, spinning


SET = SessionSettings((("session.intra_op.allow_spinning", "1"),), "basic", 2)


@pytest.mark.parametrize("settings,want", [
    (SET, (ort.GraphOptimizationLevel.ORT_ENABLE_BASIC, 2, "1")),
    (SessionSettings((), "disable", None), (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, None, None)),
])
def test_settings_reach_every_session_of_a_check(spy, settings, want):
    model = relu_nonzero_eyelike()
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
    compiled = compile_model(model)
    _, report = check(compiled, {"x": x}, ["cpu", "ort", "ort-cpu"], Tolerances(),
                      BackendOptions(strict=True, settings=settings))
    assert report.ok and all(o.status == "match" for b in report.backends for o in b.outputs)
    # the lowered run's regions share the oracle's sessions (runtime/region_engine): built once,
    # by whichever side comes first, with the same settings (part of the sharing key)
    creators = {creator for creator, _ in spy}
    assert {"oracle", "ort operators", "original on ort-cpu"} <= creators <= {
        "oracle", "regions", "ort operators", "original on ort-cpu"}
    for creator, options in spy:
        level, threads, spinning = settings_of(options)
        assert level == want[0], creator
        if want[1] is not None:
            assert (threads, spinning) == want[1:], creator      # explicit --threads wins over tiny's 1
    # without --threads, the tiny regions keep their one thread and no spinning
    if want[1] is None:
        regions = [settings_of(o) for c, o in spy if c in ("regions", "oracle")]
        assert regions and all(r[1:] == (1, "0") for r in regions)


def test_no_settings_keep_onnxruntime_defaults(spy):
    compiled = compile_model(relu_nonzero_eyelike())
    x = np.random.default_rng(4).standard_normal((4, 5)).astype(np.float32)
    _, report = check(compiled, {"x": x}, ["cpu", "ort-cpu"], Tolerances(), BackendOptions(strict=True))
    assert report.ok
    original = [o for c, o in spy if c == "original on ort-cpu"]
    assert original and all(settings_of(o)[:2] == (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, 0) for o in original)


def test_cli_check_and_run_take_the_options(spy, tmp_path, capsys):
    import onnx
    path = tmp_path / "m.onnx"
    onnx.save(relu_nonzero_eyelike(), path)
    flags = ["--threads", "3", "--graph-optimization-level", "extended",
             "--session-config", "session.intra_op.allow_spinning=1"]
    assert main(["check", str(path), "--backends", "cpu,ort,ort-cpu", *flags]) == 0
    assert main(["run", str(path), "--backend", "ort", *flags]) == 0
    assert "MATCH" in capsys.readouterr().out
    made = [(c, settings_of(o)) for c, o in spy if c != "other"]        # "other": the options' probe
    assert {c for c, _ in made} == {"oracle", "regions", "ort operators", "original on ort-cpu"}
    assert {s for _, s in made} == {(ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, 3, "1")}


@pytest.mark.parametrize("args,line", [
    (["--threads", "two"], "--threads 'two' is not a non-negative integer"),
    (["--threads", "-1"], "--threads '-1' is not a non-negative integer"),
    (["--graph-optimization-level", "max"], "--graph-optimization-level 'max' is unknown; choose from disable, "
                                            "basic, extended, all"),
    (["--session-config", "session.intra_op.allow_spinning"], "--session-config 'session.intra_op.allow_spinning' "
                                                              "is not KEY=VALUE"),
    (["--session-config", "session.intra_op_thread_affinities=zz"],
     "onnxruntime rejects --session-config session.intra_op_thread_affinities=zz: Processor id must consist of "
     "only digits: zz"),
])
def test_bad_values_are_one_line(tmp_path, capsys, args, line):
    import onnx
    path = tmp_path / "m.onnx"
    onnx.save(relu_nonzero_eyelike(), path)
    want = [f"dml-lower: error: {line}" + (" (0: onnxruntime's default)" if line.startswith("--threads") else "")]
    assert main(["check", str(path), *args]) == 2
    assert capsys.readouterr().err.splitlines() == want
    assert main(["check", str(path), str(path), *args]) == 2        # a zoo: once, before any model runs
    assert capsys.readouterr().err.splitlines() == want


def test_disabling_the_cpu_fallback_for_every_session_points_to_no_fallback(tmp_path, capsys):
    """onnxruntime refuses session.disable_cpu_ep_fallback on a CPU session, and every command has
    some (the oracle's regions): the one line says which option sets it where it means something."""
    import onnx
    path = tmp_path / "m.onnx"
    onnx.save(relu_nonzero_eyelike(), path)
    assert main(["check", str(path), "--backends", "ort-cpu", "--session-config", "session.disable_cpu_ep_fallback=1"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("dml-lower: error: onnxruntime rejects --session-config session.disable_cpu_ep_fallback=1: ")
    assert line.endswith(" (for the provider under test, --no-fallback sets it on its sessions alone)")


def test_parse_gives_a_validated_hashable_setting():
    settings = parse_session_settings(["session.disable_prepacking = 1", "session.intra_op.allow_spinning=0"], "ALL", "0")
    assert settings == SessionSettings((("session.disable_prepacking", "1"), ("session.intra_op.allow_spinning", "0")),
                                       "all", 0)
    assert hash(settings) == hash(SessionSettings(settings.config, "all", 0))
    assert parse_session_settings().empty
    with pytest.raises(DmlLowerError, match="not KEY=VALUE"):
        parse_session_settings(["=1"])


def test_runtime_says_which_entry_onnxruntime_rejects_without_option_words():
    """The runtime layer names the entry (typed: key, value, reason); the option it came from is
    the CLI's to say (parse_session_settings above)."""
    with pytest.raises(SessionSettingRejected) as caught:
        validate_settings(SessionSettings((("session.intra_op_thread_affinities", "zz"),)))
    assert (caught.value.key, caught.value.value) == ("session.intra_op_thread_affinities", "zz")
    assert str(caught.value) == ("onnxruntime rejects session config entry session.intra_op_thread_affinities=zz: "
                                 f"{caught.value.reason}")
    assert "--" not in str(caught.value) and caught.value.reason


@pytest.mark.parametrize("key", ["session.disable_prepack", "session.intra_op.allow_spining", "optimisation.x",
                                 "ep.context_enabl", "sesion.use_env_allocators", "session.bogus\x1b[2J"])
def test_a_key_onnxruntime_never_reads_is_one_line(key):
    """onnxruntime takes any key and ignores one it does not read: a misspelt entry changed nothing, silently."""
    with pytest.raises(DmlLowerError) as caught:
        parse_session_settings([f"{key}=1"])
    message = str(caught.value)
    assert message.startswith(f"--session-config {display(key)}=1: onnxruntime {ort.__version__} reads no config key")
    assert "\x1b" not in message.replace("\\x1b", "")           # displayed, never raw


@pytest.mark.parametrize("key", ["session.disable_prepacking", "session.intra_op.allow_spinning", "ep.context_enable",
                                 "session.use_env_allocators", "optimization.enable_gelu_approximation",
                                 "ep.someplugin.own_option"])                 # a plugin EP's: passed on unchecked
def test_a_key_onnxruntime_reads_is_taken(key):
    from onnx_dml_lowering.runtime.ort.config_keys import reads_key
    assert parse_session_settings([f"{key}=0"]).config == ((key, "0"),)
    assert reads_key(key) is True or key.startswith("ep.someplugin.")


@pytest.mark.parametrize("key", ["session.collect_node_memory_stats_to_file", "ep.context_file_path",
                                 "session.optimized_model_external_initializers_file_name",
                                 "ep.context_model_external_initializers_file_name", "session.moe_expert_counter_state_file",
                                 "session.moe.offload.derived_cache_dir", "session.optimized_model_filepath"])
def test_a_key_naming_a_file_onnxruntime_writes_is_refused_before_any_session(key, tmp_path, capsys):
    """session.collect_node_memory_stats_to_file=VICTIM replaced VICTIM (measured): the probe session
    and every session after it write it, past the one writer's checks. Refused on the CLI and in the
    Python API (SessionSettings itself), and the file stays."""
    import onnx
    victim = tmp_path / "m.onnx"
    onnx.save(relu_nonzero_eyelike(), victim)
    before = victim.read_bytes()
    code, out, err = cli(["check", victim, "--session-config", f"{key}={victim}"], capsys)
    assert code == 2 and out == "" and "onnxruntime writes the file that key names itself" in err, err
    with pytest.raises(DmlLowerError, match="onnxruntime writes the file that key names itself"):
        SessionSettings(((key, str(victim)),))
    assert victim.read_bytes() == before


def test_keys_onnxruntime_only_reads_a_file_from_are_taken():
    from onnx_dml_lowering.runtime.ort.config_keys import writes_files
    assert not any(writes_files(k) for k in ("session.node_partition_config_file", "ep.context_source_model_path",
                                             "session.disable_prepacking", "session.intra_op.allow_spinning"))
