"""make directml's setup: where each piece comes from, one line for each missing one, and (with
the system half installed) a whole HOME made from scratch whose host passes its self-test."""
from __future__ import annotations

import json
import shutil

import pytest

from onnx_dml_lowering.runtime.directml import setup
from onnx_dml_lowering.runtime.directml.dml_host import DmlHost
from onnx_dml_lowering.runtime.directml.home import DirectMLHome, find_home


def test_every_host_source_names_its_flags_on_its_first_line():
    sources = setup.host_sources()
    assert "dml_host" in {s.stem for s in sources}
    for source in sources:
        first = source.read_text().splitlines()[0]
        assert setup.FLAGS_LINE.search(first), f"{source.name}: first line {first!r}"


def test_a_named_d3d12_dll_is_taken_and_a_missing_one_is_one_line(tmp_path, monkeypatch):
    dll = tmp_path / "d3d12.dll"
    dll.write_bytes(b"MZ")
    monkeypatch.setenv("DML_LOWER_D3D12_DLL", str(dll))
    assert setup.find_d3d12(tmp_path) == dll
    monkeypatch.setenv("DML_LOWER_D3D12_DLL", str(tmp_path / "nope.dll"))
    with pytest.raises(setup.SetupError, match=r"^DML_LOWER_D3D12_DLL names .*nope\.dll, which is not a file$"):
        setup.find_d3d12(tmp_path)


def test_without_any_d3d12_the_line_says_how_to_name_one(tmp_path, monkeypatch):
    monkeypatch.delenv("DML_LOWER_D3D12_DLL", raising=False)
    monkeypatch.delenv("DML_LOWER_VKD3D_SOURCE", raising=False)
    monkeypatch.setattr(setup, "SHARED", tmp_path / "no-shared")
    with pytest.raises(setup.SetupError, match="set DML_LOWER_D3D12_DLL .* or DML_LOWER_VKD3D_SOURCE"):
        setup.find_d3d12(tmp_path)


def test_headers_come_from_the_named_folder_and_a_missing_one_names_the_release_package(tmp_path, monkeypatch):
    (tmp_path / "onnxruntime_c_api.h").write_text("/* */")
    monkeypatch.setenv("DML_LOWER_ORT_INCLUDE", str(tmp_path))
    assert setup.find_include() == tmp_path
    monkeypatch.setenv("DML_LOWER_ORT_INCLUDE", str(tmp_path / "none"))
    with pytest.raises(setup.SetupError, match="include folder of an onnxruntime release package"):
        setup.find_include()


def test_missing_pieces_are_one_line_before_a_working_home_changes(tmp_path, monkeypatch):
    """A clone without ../shared (make directml run from elsewhere) names both pieces to set in one
    line, before any download, and leaves the HOME a previous setup completed as it was."""
    try:
        setup.check_platform()
    except setup.SetupError as exc:
        pytest.skip(f"the system half of make directml is not installed here: {exc}")
    for name in ("DML_LOWER_D3D12_DLL", "DML_LOWER_VKD3D_SOURCE", "DML_LOWER_ORT_INCLUDE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(setup, "SHARED", tmp_path / "no-shared")
    home = tmp_path / "home"
    home.mkdir()
    (home / "setup.json").write_text('{"complete": true}\n')
    with pytest.raises(setup.SetupError) as raised:
        setup.setup(home)
    line = str(raised.value)
    assert "\n" not in line and "set DML_LOWER_D3D12_DLL" in line and "set DML_LOWER_ORT_INCLUDE" in line
    assert sorted(p.name for p in home.iterdir()) == ["setup.json"]
    assert (home / "setup.json").read_text() == '{"complete": true}\n'
    (tmp_path / "onnxruntime_c_api.h").write_text("/* */")
    monkeypatch.setenv("DML_LOWER_ORT_INCLUDE", str(tmp_path))
    with pytest.raises(setup.SetupError, match="^no d3d12.dll that runs DirectML: set DML_LOWER_D3D12_DLL"):
        setup.setup(home)
    assert sorted(p.name for p in home.iterdir()) == ["setup.json"]


def test_a_worktree_finds_shared_beside_its_main_repository(tmp_path):
    main = tmp_path / "main"
    (main / ".git" / "worktrees" / "w").mkdir(parents=True)
    tree = tmp_path / "wt" / "w"
    tree.mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'w'}\n")
    assert setup.main_repository(tree) == main
    assert setup.main_repository(main) == main


@pytest.mark.directml
def test_a_home_made_from_scratch_runs_its_host(tmp_path, capsys):
    """The whole setup into an empty folder (the wheel copied from the real HOME: no download),
    then once more: idempotent, the prefix kept."""
    real = find_home()
    (tmp_path / "download").mkdir()
    for wheel in (real.root / "download").glob("*.whl"):
        shutil.copy(wheel, tmp_path / "download")
    info = setup.setup(tmp_path)
    assert info["hosts"]["dml_host"].startswith("ok DirectML ")
    assert json.loads((tmp_path / "setup.json").read_text())["sha256"] == real.info["sha256"]
    first = capsys.readouterr().out
    assert "creating the Wine prefix" in first and "pip download" not in first
    setup.setup(tmp_path)
    again = capsys.readouterr().out
    assert "creating the Wine prefix" not in again and "self-test of dml_host.exe" in again
    with DmlHost(DirectMLHome(tmp_path, info)) as host:
        assert host.caps()["self_test"] == "passed"


@pytest.mark.directml
def test_a_clone_without_shared_keeps_the_home_made_before(tmp_path, monkeypatch, capsys):
    """`make directml` in a clone without ../shared, where a setup was completed before: the HOME's
    hosts pass their self-tests now, so it is kept as it is and the command succeeds (it failed,
    and its line never said the HOME made before still served)."""
    real = find_home()
    for name in ("DML_LOWER_D3D12_DLL", "DML_LOWER_VKD3D_SOURCE", "DML_LOWER_ORT_INCLUDE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(setup, "SHARED", tmp_path / "no-shared")
    before = {p: p.stat().st_mtime_ns for p in (real.root / "setup.json", *(real.root / "bin").iterdir())}
    info = setup.setup(real.root)
    assert all(hello.startswith("ok ") for hello in info["hosts"].values()) and set(info["hosts"]) == {"dml_host", "ort_host"}
    assert {p: p.stat().st_mtime_ns for p in before} == before
    said = capsys.readouterr().out
    assert "kept the setup made before" in said and "no d3d12.dll that runs DirectML" in said


def test_a_home_made_for_other_hosts_is_not_kept(tmp_path, monkeypatch):
    """A HOME made before by a checkout with other host programs cannot serve this one: the line
    names what is missing and why the old HOME does not do, and the HOME stays as it was."""
    for name in ("DML_LOWER_D3D12_DLL", "DML_LOWER_VKD3D_SOURCE", "DML_LOWER_ORT_INCLUDE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(setup, "SHARED", tmp_path / "no-shared")
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (home / "prefix").mkdir()
    for dll in setup.DLLS:
        (home / "bin" / dll).write_bytes(b"MZ")
    (home / "setup.json").write_text('{"hosts": {"old_host": "ok"}}\n')
    try:
        setup.check_platform()
    except setup.SetupError as exc:
        pytest.skip(f"the system half of make directml is not installed here: {exc}")
    with pytest.raises(setup.SetupError) as raised:
        setup.setup(home)
    line = str(raised.value)
    assert line.startswith("no d3d12.dll that runs DirectML") and "\n" not in line
    assert line.endswith(f"(the setup at {home} was made for other host programs)")
    assert (home / "setup.json").read_text() == '{"hosts": {"old_host": "ok"}}\n'
