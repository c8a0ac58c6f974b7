"""A crash inside onnxruntime is one line (issue 35): real `dml-lower` processes, supervised by the
console script (compiler/cli/supervisor.py), die of onnxruntime's own SIGFPE or of a real signal
raised inside a session run, and say where in one line with exit 4 (docs/errors.md)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from tests.builders import graph_model
from tests.models.crash.make_crash_models import STFT, stft_model

pytestmark = pytest.mark.skipif(not (os.name == "posix" and hasattr(signal, "sigwaitinfo")),
                                reason="the supervisor needs fork and sigwaitinfo (Linux)")

CRASHED = 4


def _dml_lower(args, cwd: Path, script: "str | None" = None, **env) -> subprocess.CompletedProcess:
    """`dml-lower ARGS` as the console script runs it (or `script`, which ends by calling the entry)."""
    command = [sys.executable, "-c", script] if script else [sys.executable, "-m", "onnx_dml_lowering.compiler"]
    return subprocess.run([*command, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


@pytest.fixture(scope="module")
def onnxruntime_dies() -> None:
    """The crash the tests rely on is real: a bare onnxruntime session dies of SIGFPE on it."""
    import onnxruntime
    model = stft_model(0).SerializeToString()
    code = ("import sys, numpy as np, onnxruntime as ort\n"
            "s = ort.InferenceSession(sys.stdin.buffer.read(), providers=['CPUExecutionProvider'])\n"
            "s.run(None, {'x': np.ones((1, 16, 1), np.float32)})\n")
    proc = subprocess.run([sys.executable, "-c", code], input=model, capture_output=True, timeout=120)
    if proc.returncode != -signal.SIGFPE:
        pytest.skip(f"onnxruntime {onnxruntime.__version__} no longer dies on STFT with frame_length 0 "
                    f"(exit {proc.returncode}): find another crash for these tests")


def test_the_committed_crash_model_is_the_script_s():
    assert STFT.read_bytes() == stft_model(0).SerializeToString()


def _one_crash_line(proc: subprocess.CompletedProcess, signame: str = "SIGFPE", phase: str = "running") -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == CRASHED, (proc.returncode, proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"dml-lower: error: onnxruntime crashed ({signame}) while {phase} "), lines[0]
    assert "--oracle reference" in lines[0]
    return lines[0]


@pytest.mark.parametrize("command, where", [
    (["check", "m.onnx"], "ONNX region oracle_region / node stft (STFT) on CPUExecutionProvider"),
    (["check", "m.onnx", "--oracle", "golden.npz", "--backends", "cpu"],
     "ONNX region onnx_region_0 / node stft (STFT) on CPUExecutionProvider"),
    (["check", "m.onnx", "--oracle", "golden.npz", "--backends", "ort-cpu"],
     "the model as shipped (m.onnx) on CPUExecutionProvider"),
    (["run", "m.onnx"], "ONNX region onnx_region_0 / node stft (STFT) on CPUExecutionProvider"),
    (["run", "m.onnx", "--backends", "ort-cpu"], "the model as shipped (m.onnx) on CPUExecutionProvider"),
    (["reduce", "m.onnx", "-o", "min.onnx", "--backends", "ort-cpu"], "node stft (STFT)"),
])
def test_onnxruntime_s_own_sigfpe_is_one_line(command, where, onnxruntime_dies, tmp_path):
    onnx.save(stft_model(0), tmp_path / "m.onnx")
    np.savez(tmp_path / "golden.npz", y=np.zeros((1, 16, 1, 2), np.float32))
    line = _one_crash_line(_dml_lower(command, tmp_path))
    assert f" {where}" in line, line
    assert not (tmp_path / "min.onnx").exists()


def test_the_crash_of_a_later_feed_set_names_it_after_what_was_printed(onnxruntime_dies, tmp_path):
    """The feeds line `run` printed before onnxruntime died stays on stdout: output flows through."""
    onnx.save(stft_model(None), tmp_path / "m.onnx")
    np.savez(tmp_path / "zero.npz", x=np.ones((1, 16, 1), np.float32), length=np.array(0, np.int64))
    proc = _dml_lower(["run", "m.onnx", "--inputs", "zero.npz"], tmp_path)
    _one_crash_line(proc)
    assert proc.stdout.startswith("feeds: from zero.npz: x float32 [1x16x1]"), proc.stdout


def test_conformance_run_of_a_crashing_case_is_one_line(onnxruntime_dies, tmp_path):
    case = tmp_path / "suite" / "test_stft_zero"
    (case / "test_data_set_0").mkdir(parents=True)
    onnx.save(stft_model(0), case / "model.onnx")
    (case / "test_data_set_0" / "input_0.pb").write_bytes(
        numpy_helper.from_array(np.ones((1, 16, 1), np.float32), "x").SerializeToString())
    (case / "test_data_set_0" / "output_0.pb").write_bytes(
        numpy_helper.from_array(np.zeros((1, 16, 1, 2), np.float32), "y").SerializeToString())
    line = _one_crash_line(_dml_lower(["conformance", "run", "suite", "--backends", "ort-cpu"], tmp_path))
    assert "node stft (STFT) on CPUExecutionProvider" in line or "the model as shipped" in line, line


def test_a_zoo_counts_the_crash_as_that_model_s_error_and_goes_on(onnxruntime_dies, tmp_path):
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    onnx.save(stft_model(0), zoo / "a_stft.onnx")
    onnx.save(graph_model([h.make_node("EyeLike", ["x"], ["y"], name="eye")], [("x", T.FLOAT, [3, 3])],
                          [("y", T.FLOAT, [3, 3])]), zoo / "b_eye.onnx")
    proc = _dml_lower(["check", "zoo", "--jobs", "2", "--json", "z.json", "--junit", "z.xml"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    models = {Path(m["model"]).name: m for m in json.loads((tmp_path / "z.json").read_text())["models"]}
    assert models["b_eye.onnx"]["status"] == "ok"
    crashed = models["a_stft.onnx"]
    assert crashed["status"] == "ERROR" and crashed["exit_code"] == CRASHED and crashed["report"] is None
    assert crashed["error"].startswith("onnxruntime crashed (SIGFPE) while running ONNX region oracle_region "
                                       "/ node stft (STFT)"), crashed["error"]
    assert f"a_stft.onnx: ERROR: {crashed['error']}" in proc.stdout
    assert "onnxruntime crashed (SIGFPE)" in (tmp_path / "z.xml").read_text()


# A real signal raised inside onnxruntime's session run (or its creation): the signals no small
# model makes the installed onnxruntime raise by itself.
HOOKED = textwrap.dedent("""
    import os, signal, sys
    import onnxruntime
    from onnx_dml_lowering.runtime import ort_values
    where, signum = os.environ["HOOK_AT"], getattr(signal, os.environ["HOOK_SIGNAL"])
    if where == "run":
        ort_values._run_session = lambda *args: os.kill(os.getpid(), signum)
    elif where == "load":
        onnxruntime.InferenceSession.__init__ = lambda *args, **kwargs: os.kill(os.getpid(), signum)
    else:                                   # outside onnxruntime: in the command itself
        from onnx_dml_lowering.compiler import cli
        cli.program._run = lambda args: os.kill(os.getpid(), signum)
    sys.argv[0] = "dml-lower"
    from onnx_dml_lowering.compiler.cli import entry
    entry()
""")


def _eye(tmp_path: Path) -> None:
    onnx.save(graph_model([h.make_node("EyeLike", ["x"], ["e"], name="eye"), h.make_node("Relu", ["e"], ["y"], name="relu")],
                          [("x", T.FLOAT, [3, 3])], [("y", T.FLOAT, [3, 3])]), tmp_path / "m.onnx")


@pytest.mark.parametrize("signame", ["SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL"])
@pytest.mark.parametrize("phase, at, oracle, where", [
    # on a small model the oracle's regions are loaded and run first, the shipped file after them
    ("running", "run", [], "ONNX region oracle_region / node relu (Relu)"),
    ("loading", "load", [], "ONNX region oracle_region / node relu (Relu)"),
    ("loading", "load", ["--oracle", "golden.npz"], "the model as shipped (m.onnx)")])
def test_a_fatal_signal_inside_onnxruntime_is_one_line(signame, phase, at, oracle, where, tmp_path):
    _eye(tmp_path)
    np.savez(tmp_path / "golden.npz", y=np.zeros((3, 3), np.float32))
    proc = _dml_lower(["check", "m.onnx", "--backends", "ort-cpu", *oracle], tmp_path, HOOKED,
                      HOOK_AT=at, HOOK_SIGNAL=signame)
    line = _one_crash_line(proc, signame, phase)
    assert f" {where} on CPUExecutionProvider; " in line, line


def test_a_fatal_signal_outside_onnxruntime_is_an_internal_error(tmp_path):
    _eye(tmp_path)
    proc = _dml_lower(["check", "m.onnx"], tmp_path, HOOKED, HOOK_AT="command", HOOK_SIGNAL="SIGSEGV")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("dml-lower: internal error: the process died of SIGSEGV outside onnxruntime")
    assert len(proc.stderr.splitlines()) == 1


def test_other_ends_pass_through_unchanged(tmp_path):
    """SIGKILL is the child's death as it was (the shell says Killed), after one line naming the
    out-of-memory killer (it was silent); exit codes and output flow through, and
    DML_LOWER_UNSUPERVISED=1 runs the command in one process."""
    _eye(tmp_path)
    proc = _dml_lower(["check", "m.onnx"], tmp_path, HOOKED, HOOK_AT="run", HOOK_SIGNAL="SIGKILL")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stderr.startswith("dml-lower: error: the command's process was killed (SIGKILL): most likely the "
                                  "kernel's out-of-memory killer") and len(proc.stderr.splitlines()) == 1
    supervised = _dml_lower(["check", "m.onnx", "-q"], tmp_path)
    alone = _dml_lower(["check", "m.onnx", "-q"], tmp_path, DML_LOWER_UNSUPERVISED="1")
    assert supervised.returncode == alone.returncode == 0
    assert supervised.stdout == alone.stdout and "match ONNX semantics" in supervised.stdout
    usage = _dml_lower(["check", "missing.onnx"], tmp_path)
    assert usage.returncode == 2 and usage.stderr.startswith("dml-lower: error: ")
    unsupervised = _dml_lower(["check", "m.onnx"], tmp_path, HOOKED, HOOK_AT="run", HOOK_SIGNAL="SIGSEGV",
                              DML_LOWER_UNSUPERVISED="1")
    assert unsupervised.returncode == -signal.SIGSEGV


@pytest.mark.parametrize("status", [0, 5])
def test_a_process_ended_by_code_it_ran_is_one_line_never_a_success(status, tmp_path):
    """os._exit in a data loader script (or a library) ends the process before the command finished:
    one line, and a status of 0 is no success (it passed through silently as exit 0)."""
    _eye(tmp_path)
    (tmp_path / "dl.py").write_text(f"import os\ndef load_data():\n    os._exit({status})\n")
    proc = _dml_lower(["check", "m.onnx", "--data-loader-script", "dl.py", "-q"], tmp_path)
    assert proc.returncode == (status or 2) and proc.stdout == ""
    assert proc.stderr == (f"dml-lower: error: the process ended (exit status {status}) before the command finished: "
                           "code it ran (a data loader script, a library) ended it; no result is given\n")


def test_standard_output_closed_is_one_line(tmp_path):
    """`dml-lower ... >&-`: the answer could not be read; no file the command opens takes descriptor 1."""
    _eye(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", "check", "m.onnx", "-q"], cwd=tmp_path,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300,
                          preexec_fn=lambda: os.close(1))
    assert proc.returncode == 2 and proc.stderr.startswith("dml-lower: error: standard output is closed")
    assert len(proc.stderr.splitlines()) == 1
