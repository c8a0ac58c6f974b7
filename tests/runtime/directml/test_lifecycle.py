"""A DirectML host dies with its parent: after the parent is SIGTERMed, Ctrl-C'd (SIGINT) or
SIGKILLed, no process of that host's run remains — not the Wine process, not the wineserver or the
Windows services Wine started for it, not the Xvfb. Every one of them carries the run's tag in its
environment (wine.RUN_ENV), which the /proc scan looks for. Wine's session (wine.keep_session) is
kept for DML_LOWER_WINESERVER_PERSIST seconds once idle: 2 here, so services this run's host started
(when it was the session's first client) are gone within the wait too."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from onnx_dml_lowering.runtime.directml.wine import PERSIST_ENV, RUN_ENV

pytestmark = pytest.mark.directml

CHILD = """
import time
from onnx_dml_lowering.runtime.directml.dml_host import DmlHost
host = DmlHost()
print(host.process.run_id, host.hello, flush=True)
time.sleep(300)
"""


def processes_of(run_id: str) -> "list[tuple[int, str]]":
    tag = f"{RUN_ENV}={run_id}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as env, open(f"/proc/{pid}/cmdline", "rb") as cmd:
                if tag in env.read().split(b"\0"):
                    found.append((int(pid), cmd.read().replace(b"\0", b" ").decode(errors="replace")))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Wine and /proc: Linux only")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_no_process_of_the_run_outlives_its_parent(sig):
    # SIGINT's default action in the child even where this run ignores it (a shell's `cmd &` without
    # job control starts the whole run with SIGINT ignored, and a child inherits that)
    parent = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, env={**os.environ, PERSIST_ENV: "2"},
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        run_id, hello = parent.stdout.readline().split(" ", 1)
        assert hello.startswith("ok")
        alive = processes_of(run_id)
        assert any("dml_host.exe" in cmd for _, cmd in alive), alive       # the scan sees the run
        parent.send_signal(sig)
        parent.wait(30)
        deadline = time.monotonic() + 20
        while processes_of(run_id) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_of(run_id) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
