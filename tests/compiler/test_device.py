"""capabilities --device: the device facts asked of DirectML.dll (text and JSON), one line naming
`make directml` without the setup, and its usage errors."""
from __future__ import annotations

import json

import pytest

from onnx_dml_lowering.ir import DataType
from onnx_dml_lowering.runtime.directml.home import HOME_ENV, find_home
from tests.cli_runner import cli

KEYS = {"directml_version", "onnxruntime_version", "feature_level", "data_types", "d3d12", "self_test"}


@pytest.mark.directml
def test_device_text_and_json_say_what_the_host_measures(tmp_path, capsys, dml_host):
    out_file = tmp_path / "device.json"
    code, out, err = cli(["capabilities", "--device", "--json", out_file], capsys)
    assert code == 0 and err == ""
    facts = json.loads(out_file.read_text())
    assert KEYS <= set(facts) and set(facts) - KEYS <= {"vulkan"}
    caps = dml_host.caps()
    for key in ("directml_version", "feature_level", "data_types", "d3d12", "self_test"):
        assert facts[key] == caps[key]
    assert facts["self_test"] == "passed"
    assert facts["onnxruntime_version"] == find_home().info["onnxruntime_directml"]
    assert set(facts["data_types"]) == {t.name for t in DataType if t != DataType.UNKNOWN}
    assert f"  feature level    {facts['feature_level']}\n" in out
    assert f"  DirectML.dll     {facts['directml_version']}\n" in out
    assert "  self-test        passed\n" in out


def test_without_the_setup_device_is_one_line_naming_make_directml(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "absent"))
    code, out, err = cli(["capabilities", "--device"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "make directml" in err


@pytest.mark.parametrize("argv, said", [
    (["--device", "--markdown"], "takes no --markdown"),
    (["--device", "--feature-level", "5_1"], "takes no --feature-level"),
    (["--json", "x.json"], "give it with --device"),
])
def test_device_usage_errors_are_one_line(argv, said, capsys):
    code, out, err = cli(["capabilities", *argv], capsys)
    assert code == 2 and said in err and err.count("\n") == 1


@pytest.mark.directml
def test_readme_device_excerpt_is_this_output(capsys):
    """README shows `capabilities --device` as printed on the project's Debian 12 machines (a plain
    block, not a transcript: the adapter's and the Vulkan device's names are the machine's). Every
    line of it that does not name the machine is what the command prints here."""
    import re

    from tests.paths import REPO
    found = re.search(r"`capabilities --device` asks the device[^\n]*\n\n```\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert found, "README shows the output of capabilities --device"
    code, out, _ = cli(["capabilities", "--device"], capsys)
    assert code == 0
    machine = ("  D3D12 adapter ", "  Vulkan device ")
    shown = [line for line in found.group(1).splitlines() if not line.startswith(machine)]
    printed = [line for line in out.splitlines() if not line.startswith(machine)]
    assert shown == printed
