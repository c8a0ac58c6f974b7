"""find_home: a complete HOME or one line naming `make directml` and what is missing."""
from __future__ import annotations

import json

import pytest

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.directml import home as home_module
from onnx_dml_lowering.runtime.directml.home import DLLS, DirectMLUnavailable, find_home


def complete_home(root):
    (root / "bin").mkdir(parents=True)
    (root / "prefix").mkdir()
    for dll in DLLS:
        (root / "bin" / dll).write_bytes(b"MZ")
    (root / "bin" / "dml_host.exe").write_bytes(b"MZ")
    (root / "setup.json").write_text(json.dumps(INFO))
    return root


INFO = {"onnxruntime_directml": "1.24.4", "host_sources": {"dml_host": home_module.source_digest("dml_host")}}


@pytest.fixture
def home_env(tmp_path, monkeypatch):
    root = tmp_path / "home"
    monkeypatch.setenv(home_module.HOME_ENV, str(root))
    return root


def test_a_complete_home_is_found_with_its_folders_and_info(home_env):
    complete_home(home_env)
    found = find_home()
    assert found.root == home_env and found.bin == home_env / "bin" and found.prefix == home_env / "prefix"
    assert found.info == INFO
    assert found.exe("dml_host") == found.exe("dml_host.exe") == home_env / "bin" / "dml_host.exe"


def test_an_absent_home_is_one_line_naming_make_directml(home_env):
    with pytest.raises(DirectMLUnavailable, match=r"^DirectML is not set up: no DirectML setup at .*make directml"):
        find_home()


@pytest.mark.parametrize("remove, named", [
    (lambda root: (root / "setup.json").unlink(), "setup.json is missing"),
    (lambda root: (root / "bin" / "DirectML.dll").unlink(), "DirectML.dll is missing"),
    (lambda root: (root / "bin" / "d3d12.dll").unlink(), "d3d12.dll is missing"),
    (lambda root: (root / "prefix").rmdir(), "Wine prefix"),
    (lambda root: (root / "setup.json").write_text("[1]"), "not a JSON object"),
    (lambda root: (root / "setup.json").write_text("{"), "cannot read"),
])
def test_what_is_missing_is_one_line_naming_make_directml(home_env, remove, named):
    complete_home(home_env)
    remove(home_env)
    with pytest.raises(DirectMLUnavailable) as caught:
        find_home()
    message = str(caught.value)
    assert isinstance(caught.value, DmlLowerError)
    assert named in message and "make directml" in message and "\n" not in message


def test_a_missing_host_program_names_it_and_make_directml(home_env):
    found = find_home() if complete_home(home_env) else None
    with pytest.raises(DirectMLUnavailable, match=r"ort_host\.exe is not in .*make directml"):
        found.exe("ort_host")


@pytest.mark.parametrize("built", [{"dml_host": "0" * 64}, {}, None])
def test_a_host_built_from_other_sources_names_make_directml(home_env, built):
    """A host compiled from another hosts/*.c (an older checkout, or a setup.json that predates the
    record) is refused in one line, not run: it may speak another protocol or lack a guard."""
    complete_home(home_env)
    info = dict(INFO, host_sources=built) if built is not None else {"onnxruntime_directml": "1.24.4"}
    (home_env / "setup.json").write_text(json.dumps(info))
    with pytest.raises(DirectMLUnavailable, match=r"^DirectML host dml_host\.exe in .* was built from another "
                                                  r"hosts/dml_host\.c than this checkout's; run `make directml` again"):
        find_home().exe("dml_host")
