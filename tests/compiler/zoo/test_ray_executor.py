"""`check --executor ray`: the zoo's per-model checks as tasks on a real Ray instance.

Run by `make ray` (.venv-ray, with the ray extra); skipped where ray is not installed. The zoo of
zoo_models.py on a local instance (ray.init(num_cpus=2) inside the command) gives the same
summary, JSON and exit code as the local executor, and a JUnit report whose counts follow the
per-model reports; then a cluster started by this test is joined with --ray-address by a
separate dml-lower process, as CI would join a shared cluster.
"""
from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest

from onnx_dml_lowering.compiler.cli import main
from tests.compiler.cli.test_stopping import long_loop
from tests.compiler.zoo.zoo_models import (BACKENDS, check_junit, crash_env, expected_statuses, load_json,
                                       summary_without_times, without_times, write_zoo)

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="the ray extra is not installed here: `make ray` runs these tests")


def run_main(argv) -> "tuple[int, str, str]":
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    try:
        code = main([str(a) for a in argv])
        return code, sys.stdout.getvalue(), sys.stderr.getvalue()
    finally:
        sys.stdout, sys.stderr = saved


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    return write_zoo(tmp_path_factory.mktemp("zoo"))


def zoo_argv(zoo, where, *extra):
    return ["check", zoo["dir"], "--inputs", zoo["feeds"], "--oracle", zoo["golden"],
            "--backends", ",".join(BACKENDS), "--json", where / "zoo.json", "--junit", where / "zoo.xml", *extra]


def test_ray_local_instance_matches_the_local_executor(zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", crash_env(zoo["hook"]))
    (tmp_path / "local").mkdir()
    (tmp_path / "ray").mkdir()
    local = run_main(zoo_argv(zoo, tmp_path / "local", "--jobs", 2))
    assert not ray.is_initialized()
    on_ray = run_main(zoo_argv(zoo, tmp_path / "ray", "--executor", "ray"))
    assert not ray.is_initialized()           # the command shut its instance down
    assert on_ray[0] == local[0] == 1
    assert summary_without_times(on_ray[1]) == summary_without_times(local[1])
    document = load_json(tmp_path / "ray" / "zoo.json")
    assert without_times(document) == without_times(load_json(tmp_path / "local" / "zoo.json"))
    assert {m["model"]: m["status"] for m in document["models"]} == expected_statuses(zoo)
    check_junit(tmp_path / "ray" / "zoo.xml", document, BACKENDS)


def test_ray_address_joins_an_existing_cluster(zoo, tmp_path):
    """A cluster this test starts (2 CPUs); a separate dml-lower process joins it by address and
    runs its tasks there, at most one at a time with --jobs 1."""
    models = [zoo["paths"]["a_nonzero.onnx"], zoo["paths"]["d_nonzero_relu.onnx"]]
    context = ray.init(num_cpus=2, include_dashboard=False)
    try:
        address = context.address_info["gcs_address"]
        proc = subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", "check", *map(str, models),
                               "--inputs", str(zoo["feeds"]), "--oracle", str(zoo["golden"]),
                               "--executor", "ray", "--ray-address", address, "--jobs", "1",
                               "--json", str(tmp_path / "z.json")],
                              capture_output=True, text=True, timeout=600)
    finally:
        ray.shutdown()
    assert proc.returncode == 1, proc.stderr
    document = json.loads((tmp_path / "z.json").read_text())
    want = expected_statuses(zoo)
    assert [(m["model"], m["status"]) for m in document["models"]] == [(str(m), want[str(m)]) for m in models]
    assert proc.stdout.splitlines()[-2:] == ["zoo: 2 models: 1 ok, 1 MISMATCH", f"wrote {tmp_path / 'z.json'}"]


def test_ray_address_nobody_listens(zoo):
    """A loopback port nobody listens on (one just freed): one line, exit 2, at once, before any
    model runs (ray.init alone would retry it for minutes)."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    address = f"127.0.0.1:{port}"
    code, out, err = run_main(["check", zoo["paths"]["a_nonzero.onnx"], "--executor", "ray",
                               "--ray-address", address])
    assert code == 2 and out == ""
    assert err == f"dml-lower: error: --ray-address {address}: no Ray cluster answers there (Connection refused)\n"
    assert not ray.is_initialized()


def _zoo_checks(zoo_dir: Path) -> "dict[int, Path]":
    """The per-model check processes of models under `zoo_dir` running on this machine (a check's
    supervised child has the same command line), each with the temporary folder its --json is in."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "onnx_dml_lowering.compiler" in argv and "--json" in argv and any(a.startswith(str(zoo_dir)) for a in argv):
            folder = Path(argv[argv.index("--json") + 1]).parent
            if folder.name.startswith("dml-lower-zoo-"):        # not the zoo's own process
                found[int(proc.name)] = folder
    return found


def _wait_for(condition, seconds: float = 180) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "the zoo's checks never got under way"
        time.sleep(0.2)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the checks' processes in /proc (Linux)")
@pytest.mark.parametrize("where", ["local instance", "joined cluster"])
def test_sigterm_cancels_the_ray_tasks_under_way(where, tmp_path):
    """SIGTERM to a zoo on Ray (issue 35 item 8): the tasks under way are cancelled, each ends its
    check and removes its folder before the zoo exits 143. ray.shutdown alone left a joined
    cluster's tasks running after the driver was gone, and a local instance's checks orphaned."""
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    for name in ("a", "b"):
        onnx.save(long_loop(10**12), zoo / f"{name}.onnx")
    argv = [sys.executable, "-m", "onnx_dml_lowering.compiler", "check", str(zoo), "--executor", "ray",
            "--backends", "ort-cpu", "--json", str(tmp_path / "z.json")]
    context = ray.init(num_cpus=2, include_dashboard=False) if where == "joined cluster" else None
    proc = None
    try:
        if context is not None:
            argv += ["--ray-address", context.address_info["gcs_address"]]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        def under_way() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"the zoo ended before its checks got under way: {proc.communicate()}")
            return len(set(_zoo_checks(zoo).values())) == 2
        _wait_for(under_way)
        checks = _zoo_checks(zoo)
        time.sleep(2.0)                         # both inside onnxruntime's endless Loop by now
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 143, (out, err)
        assert _zoo_checks(zoo) == {}
        for folder in set(checks.values()):
            assert not folder.exists(), folder
        document = json.loads((tmp_path / "z.json").read_text())
        assert document["interrupted"] is True and document["models_requested"] == 2
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        for pid in _zoo_checks(zoo):            # never leave an endless Loop behind on failure
            os.kill(pid, signal.SIGKILL)
        if context is not None:
            ray.shutdown()
