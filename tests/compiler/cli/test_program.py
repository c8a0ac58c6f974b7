"""The command line's last resort (cli/program.py): a standard stream that cannot be written, a
MemoryError and a bug of ours each end in one line and their own exit code, never a traceback
where none was asked for, and -v / DML_LOWER_DEBUG keep the internal error's exit code (3)."""
from __future__ import annotations

import errno
import io
import os
import subprocess
import sys

import pytest

from onnx_dml_lowering.compiler.cli import program
from tests.paths import REPO

MASKED = REPO / "compiler" / "examples" / "masked_select.onnx"


def _entry(*argv: str, **streams) -> subprocess.CompletedProcess:
    env = dict(os.environ, DML_LOWER_STRICT="1")
    env.pop("DML_LOWER_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", *argv], cwd=REPO, env=env,
                          timeout=300, **streams)


class _Failing(io.StringIO):
    """A stream whose writes fail with `errno` (a full disk, an I/O error) once `after` characters
    are in."""

    def __init__(self, code: int, after: int = 0) -> None:
        super().__init__()
        self.code, self.after = code, after

    def write(self, text: str) -> int:
        if self.tell() + len(text) > self.after:
            raise OSError(self.code, os.strerror(self.code))
        return super().write(text)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("argv", [["check", str(MASKED)], ["check", str(MASKED), "-v"], ["compile", str(MASKED)],
                                  ["inspect", str(MASKED)]])
def test_a_full_standard_output_is_one_line(argv):
    """`dml-lower check m.onnx > /dev/full` was 'internal error: OSError: [Errno 28]' (exit 3)."""
    with open("/dev/full", "w") as full:
        proc = _entry(*argv, stdout=full, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 2, proc.stderr
    line, = proc.stderr.strip().splitlines()
    assert line == ("dml-lower: error: cannot write standard output: No space left on device (ENOSPC): what the "
                    "command printed there is lost (give it a file on a disk with room, a pipe, or /dev/null)")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_a_full_standard_error_keeps_the_exit_code():
    """The error line cannot be written where stderr is full: the exit code still says it (2), no
    traceback is tried there, and a command that succeeds, printing nothing there, exits 0."""
    with open("/dev/full", "w") as full:
        bad = _entry("check", "nope.onnx", stdout=subprocess.PIPE, stderr=full, text=True)
        good = _entry("check", str(MASKED), "-q", stdout=subprocess.PIPE, stderr=full, text=True)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert good.returncode == 0 and "verdict" in good.stdout


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EBADF])
def test_any_errno_of_standard_output_is_one_line(code, monkeypatch, capsys):
    """Whatever the errno (a closed stdout's EBADF has its own words), one line and exit 2."""
    failing = _Failing(code)
    monkeypatch.setattr(sys, "stdout", failing)
    assert program.main(["capabilities"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err and "Traceback" not in err, err
    assert "standard output" in err, err
    if code != errno.EBADF:
        assert f"({errno.errorcode[code]})" in err, err


def test_a_failing_standard_error_is_exit_2_in_silence(monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Failing(errno.EIO))
    assert program.main(["inspect", "nope.onnx"]) == 2


def _raise(exc: BaseException):
    def command(args):
        raise exc
    return command


def test_a_memory_error_is_one_line_naming_the_limit(monkeypatch, capsys):
    """A MemoryError past the limit's checks (onnx.reference, onnxruntime, a library) was 'internal
    error: MemoryError'; it names the limit and what to do, under -v too."""
    monkeypatch.setattr(program, "parsed_command", _raise(MemoryError("Unable to allocate 4.47 GiB")))
    for argv in (["run", str(MASKED)], ["run", str(MASKED), "-v"]):
        assert program.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("dml-lower: error: out of memory (Unable to allocate 4.47 GiB)")
        assert "default memory limit of" in err and "--memory-limit" in err, err
    assert program.main(["run", str(MASKED), "--memory-limit", "2GiB"]) == 2
    assert "within --memory-limit 2GiB" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["-v", "DML_LOWER_DEBUG"])
def test_a_bug_under_v_prints_the_traceback_and_keeps_exit_3(how, monkeypatch, capsys):
    """-v or DML_LOWER_DEBUG=1 printed the traceback and exited 1 (the code of a MISMATCH) with no
    internal error line; docs/errors.md says an internal error is exit 3 and to re-run with -v."""
    monkeypatch.setattr(program, "parsed_command", _raise(RuntimeError("boom")))
    if how == "DML_LOWER_DEBUG":
        monkeypatch.setenv("DML_LOWER_DEBUG", "1")
    assert program.main(["run", str(MASKED), *(["-v"] if how == "-v" else [])]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "RuntimeError: boom" in err, err
    assert err.splitlines()[-1].startswith("dml-lower: internal error: RuntimeError: boom"), err


def test_a_bug_under_v_in_a_real_process_exits_3(tmp_path):
    """The console script, supervised, passes the 3 on (a raise in the child ended as exit 1)."""
    hook = tmp_path / "sitecustomize.py"
    hook.write_text("from onnx_dml_lowering.compiler.cli import program\n"
                    "def _boom(args):\n    raise RuntimeError('boom')\n"
                    "program.parsed_command = _boom\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.pop("DML_LOWER_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", "run", str(MASKED), "-v"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" in proc.stderr and proc.stderr.splitlines()[-1].startswith("dml-lower: internal error:")
