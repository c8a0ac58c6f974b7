"""A zoo check on the `dml` backend starts one DirectML host per worker, not one per model: each
worker starts its host on its first model and hands it to every model's check process in turn
(compiler/zoo/model_check.py). Counted by the host start log (a test hook every process appends
to, the checks' processes too), with more models than workers, and every model's dml bit for bit
the emulator's. The same on a local Ray instance (--executor ray: one actor per worker), where
ray is installed (`make ray`)."""
from __future__ import annotations

import json
import shutil

import pytest

from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.runtime.directml.wine import START_LOG_ENV
from tests.cli_runner import cli

pytestmark = pytest.mark.directml


def _zoo(tmp_path):
    models = []
    for copy in range(3):             # 12 models: 4 examples, 3 times
        for path in example_paths():
            target = tmp_path / "zoo" / f"{copy}_{path.name}"
            target.parent.mkdir(exist_ok=True)
            shutil.copyfile(path, target)
            models.append(target)
    return models


@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=pytest.mark.ray)])
@pytest.mark.parametrize("jobs", [1, 2])
def test_the_zoo_starts_one_dml_host_per_worker(tmp_path, monkeypatch, capsys, jobs, executor):
    if executor == "ray":
        pytest.importorskip("ray", reason="the ray extra is not installed here: `make ray` runs the Ray zoo")
    models = _zoo(tmp_path)
    log = tmp_path / "starts.log"
    monkeypatch.setenv(START_LOG_ENV, str(log))     # a local Ray instance's workers inherit it
    code, out, err = cli(["check", tmp_path / "zoo", "--backends", "cpu,dml", "--jobs", jobs, "--executor", executor,
                          "--json", tmp_path / "zoo.json"], capsys)
    assert code == 0, out + err
    report = json.loads((tmp_path / "zoo.json").read_text())
    assert len(report["models"]) == len(models)
    for entry in report["models"]:
        dml = next(b for b in entry["report"]["backends"] if b["backend"] == "dml")
        assert dml["status"] == "ok", (entry["model"], dml)
    lines = log.read_text().splitlines()           # "dml_host.exe host=PID by=PID/THREAD"
    starts = [line.split()[0] for line in lines]
    assert starts == ["dml_host.exe"] * jobs, lines    # a worker that got a model started one host, once
