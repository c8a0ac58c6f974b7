"""find_home: a complete HOME or one line naming `make directml` and what is missing."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.directml import home as home_module
from onnx_dml_lowering.runtime.directml.home import DLLS, DirectMLUnavailable, find_home
from tests.cli_runner import cli

EXAMPLES = Path(example_paths()[0]).parent


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


def test_a_setup_json_that_is_a_directory_is_said_so(home_env):
    """setup.json (or a dll) that exists but is no file: said what it is, not 'missing'."""
    complete_home(home_env)
    (home_env / "setup.json").unlink()
    (home_env / "setup.json").mkdir()
    with pytest.raises(DirectMLUnavailable, match=r"setup\.json is a directory, not a file; run `make directml`"):
        find_home()
    (home_env / "setup.json").rmdir()
    (home_env / "setup.json").write_text(json.dumps(INFO))
    (home_env / "bin" / "d3d12.dll").unlink()
    (home_env / "bin" / "d3d12.dll").mkdir()
    with pytest.raises(DirectMLUnavailable, match=r"d3d12\.dll is a directory, not a file; run `make directml`"):
        find_home()


# Each way a HOME that is complete on its face cannot serve a host: refused before anything runs
UNUSABLE = {
    "stale": (lambda root, monkeypatch: (root / "setup.json").write_text(
        json.dumps(dict(INFO, host_sources={"dml_host": "0" * 64, "ort_host": "0" * 64}))),
        r"DirectML host {host}\.exe in .* was built from another hosts/{host}\.c than this checkout's; run `make directml` again"),
    "absent": (lambda root, monkeypatch: [(root / "bin" / f"{h}.exe").unlink() for h in ("dml_host", "ort_host")],
               r"DirectML host {host}\.exe is not in .*; run `make directml` again"),
    "a folder": (lambda root, monkeypatch: [((root / "bin" / f"{h}.exe").unlink(), (root / "bin" / f"{h}.exe").mkdir())
                                            for h in ("dml_host", "ort_host")],
                 r"DirectML host {host}\.exe in .* is a directory, not a file; run `make directml` again"),
    "no wine": (lambda root, monkeypatch: monkeypatch.setenv("PATH", str(root / "empty")),
                r"Wine is not installed; run `make directml`"),
}


def usable_looking_home(root):
    """complete_home with both hosts recorded as built from this checkout (never started: each test
    below makes it unusable first)."""
    complete_home(root)
    (root / "bin" / "ort_host.exe").write_bytes(b"MZ")
    (root / "setup.json").write_text(json.dumps(dict(INFO, host_sources={
        h: home_module.source_digest(h) for h in ("dml_host", "ort_host")})))


@pytest.mark.skipif(home_module.on_windows(), reason="Wine's part of the setup is Linux's")
@pytest.mark.parametrize("how", list(UNUSABLE))
@pytest.mark.parametrize("backend, host", [("dml", "dml_host"), ("ort-dml", "ort_host")])
def test_a_setup_that_cannot_serve_a_host_is_unavailable_the_same_way_for_both(home_env, monkeypatch, capsys, how,
                                                                               backend, host):
    """A stale, absent or misplaced host program, or no Wine: the dml backend says it as ort-dml
    does (it was dml's ERROR, exit 1, when its host started): UNAVAILABLE while cpu runs (exit 0),
    one line alone (exit 2), never a host started."""
    usable_looking_home(home_env)
    make, line = UNUSABLE[how]
    make(home_env, monkeypatch)
    expected = line.format(host=host)
    model = EXAMPLES / "banded_mix.onnx"
    code, out, err = cli(["check", model, "--backends", f"cpu,{backend}", "-q"], capsys)
    assert code == 0 and err == "", err
    (unavailable,) = [text for text in out.splitlines() if f"[{backend}]" in text]
    assert "UNAVAILABLE" in unavailable and re.search(expected, unavailable), unavailable
    code, out, err = cli(["check", model, "--backends", backend, "-q"], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("dml-lower: error: "), err
    assert re.search(expected, err), err


@pytest.mark.skipif(home_module.on_windows(), reason="off Windows only")
@pytest.mark.parametrize("state", ["absent", "set up", "stale"])
def test_dml_asked_of_the_ort_backend_names_the_backends_that_reach_directml_here(home_env, capsys, state):
    """run --backends ort --providers dml: onnxruntime's Linux wheel has no DML EP; the line also
    says that dml and ort-dml run DirectML here under Wine, and whether the setup serves them."""
    if state != "absent":
        usable_looking_home(home_env)
    if state == "stale":
        UNUSABLE["stale"][0](home_env, None)
    code, _, err = cli(["run", EXAMPLES / "masked_select.onnx", "--backends", "ort", "--providers", "dml"],
                       capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("dml-lower: error: DmlExecutionProvider is not available: it needs Windows")
    assert ("; off Windows, DirectML runs through `--backends dml` (the lowered graph's DirectML operators on "
            "DirectML.dll) and `--backends ort-dml` (onnxruntime.dll's DirectML EP) under Wine: ") in err
    tail = {"absent": "run `make directml`\n", "set up": "both set up here\n",
            "stale": "than this checkout's; run `make directml` again (it compiles every host)\n"}[state]
    assert err.endswith(tail), err
