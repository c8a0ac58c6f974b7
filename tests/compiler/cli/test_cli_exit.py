"""The console entry (cli.entry: main(), exit handlers, flushed output, then the process ends
without finalising the interpreter): every file and line is written and the exit codes are main()'s."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
MASKED = REPO / "compiler" / "examples" / "masked_select.onnx"


def entry(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = dict(os.environ, DML_LOWER_STRICT="1")
    return subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_files_and_output_are_complete_and_codes_are_mains(tmp_path):
    report, outputs = tmp_path / "r.json", tmp_path / "o.npz"
    proc = entry("check", str(MASKED), "--json", str(report), "--save-outputs", str(outputs))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("check ") and "verdict: all outputs match" in proc.stdout
    assert json.loads(report.read_text())["ok"] is True
    assert {"coords", "cpu:coords"} <= set(np.load(outputs).files)
    bad = entry("check", str(tmp_path / "missing.onnx"))
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
    usage = entry("check")
    assert usage.returncode == 2 and "error" in usage.stderr


def test_exit_handlers_still_run(tmp_path):
    """An atexit handler (what logging, Ray, tempfile and multiprocessing use) runs before the end."""
    marker = tmp_path / "ran"
    script = ("import atexit, pathlib, sys; "
              f"atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text('yes')); "
              "sys.argv = ['dml-lower', 'capabilities']; "
              "from onnx_dml_lowering.compiler.cli import entry; entry()")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() and marker.read_text() == "yes"
