"""The `dml` backend: the lowered graph with every DirectML operator run by DirectML.dll. On the
bundled examples and the committed real exports, its outputs equal the emulator's byte for byte
and match ONNX semantics; without the setup it is one UNAVAILABLE line naming `make directml`
while the other backends run."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.runtime.check import BackendOptions, Tolerances, check
from onnx_dml_lowering.runtime.directml import dml_host as dml_host_module
from onnx_dml_lowering.runtime.directml.home import HOME_ENV, find_home
from onnx_dml_lowering.runtime.feeds import random_feeds
from tests.cli_runner import cli

MODELS = Path(__file__).resolve().parents[2] / "models"
REAL_EXPORTS = sorted(MODELS.glob("*.onnx"))


def _check(path, backends):
    compiled = compile_model(str(path))
    feeds = random_feeds(compiled.inputs, seed=7)
    return check(compiled, feeds, backends, Tolerances(), BackendOptions())[1]


@pytest.mark.directml
@pytest.mark.parametrize("path", [*example_paths(), *REAL_EXPORTS], ids=lambda p: Path(p).name)
def test_dml_equals_the_emulator_byte_for_byte_and_matches_onnx(path):
    report = _check(path, ["cpu", "dml"])
    cpu, dml = (next(b for b in report.backends if str(b.backend) == name) for name in ("cpu", "dml"))
    assert dml.error == "" and dml.status == "ok", (dml.error, [o.detail for o in dml.outputs])
    assert cpu.values.keys() == dml.values.keys()
    for name, value in cpu.values.items():
        got = dml.values[name]
        assert got.dtype == value.dtype and got.shape == value.shape and got.tobytes() == value.tobytes(), name


def test_without_the_setup_dml_is_one_unavailable_line_and_cpu_runs(tmp_path, monkeypatch):
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "absent"))
    report = _check(next(iter(example_paths())), ["cpu", "dml"])
    assert [b.backend for b in report.backends] == ["cpu"] and report.backends[0].status == "ok"
    assert list(report.unavailable) == ["dml"]
    assert "make directml" in report.unavailable["dml"] and "\n" not in report.unavailable["dml"]


@pytest.mark.directml
def test_a_host_that_cannot_start_is_the_backends_error_in_one_line(tmp_path, monkeypatch):
    """A HOME whose d3d12.dll is not a DLL: the host dies at load; dml is ERROR, cpu still runs."""
    real = find_home()
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    for item in real.bin.iterdir():
        if item.name != "d3d12.dll":
            (home / "bin" / item.name).symlink_to(item)
    (home / "bin" / "d3d12.dll").write_bytes(b"not a DLL")
    (home / "prefix").symlink_to(real.prefix)
    (home / "setup.json").write_text(json.dumps(real.info))
    monkeypatch.setenv(HOME_ENV, str(home))
    monkeypatch.setattr(dml_host_module, "_local", threading.local())   # this thread's host is the new HOME's
    report = _check(next(iter(example_paths())), ["cpu", "dml"])
    cpu, dml = report.backends
    assert cpu.status == "ok" and dml.status == "error"
    assert dml.error.startswith("DirectML host dml_host.exe stopped answering (exit code ")
    assert "DML_LOWER_WINEDEBUG" in dml.error and "\n" not in dml.error


@pytest.mark.directml
def test_conformance_run_on_dml_passes_what_the_emulator_passes(tmp_path, capsys):
    suite = tmp_path / "suite"
    assert cli(["conformance", "export", suite], capsys)[0] == 0
    code, out, err = cli(["conformance", "run", suite, "--filter", "test_nonzero*", "--backends", "cpu,dml"], capsys)
    cpu, dml = (line for line in out.splitlines() if line.startswith(("[cpu] ", "[dml] ")))
    assert code == 0 and err == ""
    assert dml.replace("[dml]", "[cpu]") == cpu and " 0 fail" in dml and not dml.startswith("[dml] 0 pass")


@pytest.mark.directml
def test_the_dml_backend_starts_its_host_when_prepared_and_waits_for_it_at_the_first_operator(monkeypatch):
    """The host's start-up (seconds) runs beside the other backends and the oracle: prepare starts
    the process without reading its hello; the first operator reads it."""
    from onnx_dml_lowering.runtime.backends import make_backends
    monkeypatch.setattr(dml_host_module, "_local", threading.local())
    compiled = compile_model(str(next(iter(example_paths()))))
    runners, _ = make_backends(compiled, ["dml"], BackendOptions())
    runners[0].prepare()
    host = dml_host_module.shared_host()
    try:
        assert host.process.pid is not None and host.process.hello == "" and host.process.requests == 0
        report = _check(next(iter(example_paths())), ["dml"])
        assert report.backends[0].status == "ok" and host.process.hello.startswith("ok DirectML ")
    finally:
        host.close()


@pytest.mark.directml
def test_start_early_spawns_without_waiting():
    """check starts the host before it loads the model (dml_host.start_early): the process runs,
    its hello is read by the first operator."""
    from onnx_dml_lowering.runtime.directml import dml_host
    dml_host.drop_shared_host()
    try:
        dml_host.start_early()
        host = dml_host.shared_host()
        assert host.process.pid is not None and host.process.hello == "" and host.process.requests == 0
        assert host.hello.startswith("ok DirectML ")
    finally:
        dml_host.drop_shared_host()


def test_the_check_command_without_the_setup_says_dml_unavailable_in_one_line(tmp_path, monkeypatch, capsys):
    """check starts the host early (start_early); without the setup that start says nothing and
    the backend's one UNAVAILABLE line is as before."""
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "absent"))
    code, out, err = cli(["check", next(iter(example_paths())), "--backends", "cpu,dml"], capsys)
    assert code == 0, (out, err)
    lines = [line for line in out.splitlines() if "dml" in line and "make directml" in line]
    assert len(lines) == 1 and "UNAVAILABLE" in lines[0], out
