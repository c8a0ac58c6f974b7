"""conformance export writes its suite whole or not at all (compiler/conformance/staging.py): a
write that fails part way (a full disk) leaves nothing half-made (a new folder not made, an earlier
suite byte for byte as it was) and is one line saying so; the next export then works."""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.conformance import suite as suite_module
from onnx_dml_lowering.compiler.conformance.cases import all_cases
from onnx_dml_lowering.compiler.conformance.staging import STAGING_PREFIX
from onnx_dml_lowering.runtime import output_file

CASES = 3         # the first cases of the grid: a suite of several folders, exported fast


@pytest.fixture(autouse=True)
def few_cases(monkeypatch):
    monkeypatch.setattr(suite_module, "all_cases", lambda seeds: all_cases(seeds)[:CASES])


def _fail_after(monkeypatch, files: int) -> None:
    """The one writer fails with ENOSPC from the file after `files` files, as a full disk makes it."""
    real, count = output_file.write_output, [0]

    def write_output(path, what, write):
        count[0] += 1
        if count[0] > files:
            def write(temp):        # noqa: F811  (the file's bytes do not fit)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, what, write)
    monkeypatch.setattr(output_file, "write_output", write_output)


def _tree(folder: Path) -> "dict[str, bytes | None]":
    """Every entry under `folder` (a folder as None), by relative path."""
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes()) for p in folder.rglob("*")}


def _export(directory, capsys) -> "tuple[int, str, str]":
    capsys.readouterr()
    code = main(["conformance", "export", str(directory), "--seeds", "1"])
    out, err = capsys.readouterr()
    return code, out, err


def _refused_with_nothing_left(directory, capsys, said: str) -> str:
    code, out, err = _export(directory, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, out + err
    assert "No space left on device (ENOSPC)" in err and f"; nothing was left: {said}" in err, err
    return err


@pytest.mark.parametrize("files", [0, 1, 4, 9])
def test_a_failed_export_into_a_new_folder_makes_nothing(files, tmp_path, monkeypatch, capsys):
    _fail_after(monkeypatch, files)
    target = tmp_path / "suite"
    err = _refused_with_nothing_left(target, capsys, f"'{target}' was not made")
    # the file is named where the suite would hold it, never in the temporary folder
    assert f"to '{target}{os.sep}" in err and STAGING_PREFIX not in err, err
    assert os.listdir(tmp_path) == []           # no suite, no temporary folder
    monkeypatch.undo()
    monkeypatch.setattr(suite_module, "all_cases", lambda seeds: all_cases(seeds)[:CASES])
    code, _, err = _export(target, capsys)
    assert code == 0 and sorted(os.listdir(target)) == sorted([c.name for c in all_cases(1)[:CASES]]
                                                              + ["README.txt", "manifest.json"]), err


@pytest.mark.parametrize("files", [0, 3, 9])
def test_a_failed_export_over_an_earlier_suite_keeps_it(files, tmp_path, monkeypatch, capsys):
    target = tmp_path / "suite"
    assert _export(target, capsys)[0] == 0
    (target / all_cases(1)[0].name / "notes.md").write_text("mine")         # a file of the user's too
    (target / "manifest.json").write_text((target / "manifest.json").read_text().replace('"seeds": 1', '"seeds": 7'))
    before = _tree(target)
    _fail_after(monkeypatch, files)
    _refused_with_nothing_left(target, capsys, "the folder and the suite in it are as they were")
    assert _tree(target) == before
    monkeypatch.undo()
    monkeypatch.setattr(suite_module, "all_cases", lambda seeds: all_cases(seeds)[:CASES])
    assert _export(target, capsys)[0] == 0
    assert '"seeds": 1' in (target / "manifest.json").read_text()
    assert (target / all_cases(1)[0].name / "notes.md").read_text() == "mine"
    assert not [e for e in os.listdir(target) if e.startswith(STAGING_PREFIX)]


def test_a_failed_export_into_an_empty_folder_leaves_it_empty(tmp_path, monkeypatch, capsys):
    target = tmp_path / "suite"
    target.mkdir()
    _fail_after(monkeypatch, 2)
    _refused_with_nothing_left(target, capsys, "the folder and the suite in it are as they were")
    assert target.is_dir() and os.listdir(target) == []


def test_a_killed_exports_temporary_folder_does_not_refuse_the_next(tmp_path, capsys):
    target = tmp_path / "suite"
    (target / f"{STAGING_PREFIX}dead" / "test_x").mkdir(parents=True)
    code, _, err = _export(target, capsys)
    assert code == 0 and (target / "manifest.json").is_file(), err


def _mount_tiny(folder: Path) -> None:
    """A 16 KiB tmpfs at `folder` (root only); skips with the reason where it cannot be mounted."""
    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tiny tmpfs takes root on Linux")
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


def test_a_real_full_disk_leaves_nothing(tmp_path, capsys):
    tiny = tmp_path / "tiny"
    _mount_tiny(tiny)
    try:
        target = tiny / "c"
        _refused_with_nothing_left(target, capsys, f"'{target}' was not made")
        assert os.listdir(tiny) == []
        subprocess.run(["mount", "-o", "remount,size=64m", str(tiny)], check=True)
        assert _export(target, capsys)[0] == 0
        before = _tree(target)
        subprocess.run(["mount", "-o", f"remount,size={_used_kib(tiny) + 8}k", str(tiny)], check=True)
        _refused_with_nothing_left(target, capsys, "the folder and the suite in it are as they were")
        assert _tree(target) == before
    finally:
        subprocess.run(["umount", str(tiny)], check=False)


def _used_kib(folder: Path) -> int:
    stat = os.statvfs(folder)
    return (stat.f_blocks - stat.f_bfree) * stat.f_frsize // 1024


def _no_work(monkeypatch) -> None:
    """Building the suite fails the test: a refusal comes before any work."""
    def built(*args):
        raise AssertionError("the suite was built before the folder was refused")
    monkeypatch.setattr(suite_module, "_export_to", built)


@pytest.mark.parametrize("target, said", [
    ("no/sub/suite", "folder '{tmp}/no' does not exist"),
    ("no/suite/", "folder '{tmp}/no' does not exist"),
    ("file/suite", "'{tmp}/file' is a file, not a folder"),
    ("dangling", "it is a symbolic link that leads nowhere (dangling, or a loop): give the folder itself"),
    ("loop", "it is a symbolic link that leads nowhere (dangling, or a loop): give the folder itself")])
def test_a_folder_that_cannot_be_made_there_is_refused_before_any_work(target, said, tmp_path, monkeypatch, capsys):
    """A missing parent folder is refused as every writer refuses one (runtime/output_target.py),
    never made: a typo in it would make a tree of folders anywhere."""
    (tmp_path / "file").write_text("a file")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone" / "suite")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    before = sorted(os.listdir(tmp_path))
    _no_work(monkeypatch)
    code, out, err = _export(f"{tmp_path}/{target}", capsys)
    assert (code, out) == (2, "") and err == (f"dml-lower: error: conformance directory '{tmp_path}/{target}': cannot "
                                              f"write there: {said.format(tmp=tmp_path)}\n"), err
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes any folder")
def test_a_new_folder_in_a_read_only_folder_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    _no_work(monkeypatch)
    code, out, err = _export(locked / "suite", capsys)
    assert (code, out) == (2, "") and err.endswith(f"cannot write there: folder '{locked}' is not writable\n"), err


@pytest.mark.parametrize("target", ["suite", "suite/"])
def test_a_new_folder_in_an_existing_one_is_made(target, tmp_path, capsys):
    code, _, err = _export(f"{tmp_path}/{target}", capsys)
    assert code == 0 and (tmp_path / "suite" / "manifest.json").is_file(), err
    assert sorted(os.listdir(tmp_path)) == ["suite"]
