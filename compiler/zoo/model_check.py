"""One model of a zoo check: the subprocess that checks it and what came back.

Each model is checked in its own `python -m onnx_dml_lowering.compiler check MODEL --json TMP`
process, so a crash or a memory blow-up in one model cannot take the others down. The same
function runs on this machine (the local executor's threads) and on a Ray worker.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable

# A check's own exit codes (docs/commands/check.md): ONNXRUNTIME_CRASHED, onnxruntime died and said
# where (compiler/cli/supervisor.py), is that model's ERROR; anything else is a crash.
PASSED, FAILED, USAGE, ONNXRUNTIME_CRASHED = 0, 1, 2, 4


def run_one(model: str, options: "list[str]", cwd: "str | None" = None,
            cancelled: "Callable[[], bool] | None" = None) -> dict:
    """Check one model in a fresh process; returns {model, exit_code, report, error, seconds}.

    `cwd` is the driver's working directory, so relative paths (the model, --inputs, --oracle
    FILE) mean the same on a Ray worker as where the command was typed. `cancelled`: polled while
    the check runs; when it says so the check is ended as on Ctrl-C (a Ray actor's task is
    cancelled by a flag, not an interrupt).
    """
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dml-lower-zoo-") as tmp:
        out = os.path.join(tmp, "report.json")
        # '--' before the model: a forwarded `--outputs a b` would otherwise swallow it.
        command = [sys.executable, "-m", "onnx_dml_lowering.compiler", "check", *options,
                   "--json", out, "--", model]
        handed = _dml_host_handover(options)
        env, fds = handed or ({}, ())
        proc = _run_child(command, cwd, env, fds, cancelled)
        if handed is not None and proc.returncode not in (PASSED, FAILED, USAGE):
            from onnx_dml_lowering.runtime.directml.dml_host import drop_shared_host
            drop_shared_host()      # the check died, perhaps mid-request: its pipe's framing is not trusted
        report = None
        if proc.returncode in (PASSED, FAILED) and os.path.isfile(out):
            try:
                with open(out, encoding="utf-8") as file:
                    report = json.load(file)
            except (OSError, ValueError):
                report = None
    return {"model": model, "exit_code": proc.returncode, "report": report,
            "error": _error_line(proc.returncode, report, proc.stderr),
            "seconds": round(time.perf_counter() - start, 3)}


_CHILDREN: "set[subprocess.Popen]" = set()     # the per-model checks under way (local executor)
_CHILDREN_LOCK = threading.Lock()
STOPPING = threading.Event()


def _dml_host_handover(options: "list[str]") -> "tuple[dict[str, str], tuple[int, int]] | None":
    """When the checks run the `dml` backend: this worker's DirectML host (started once, on its
    first model) to hand to the check, so a zoo starts one host per worker, not one per model."""
    backends = next((o.split("=", 1)[1] for o in options if o.startswith("--backends=")), "")
    from onnx_dml_lowering.runtime.backend_names import Lowering, parse_backend
    if not any(parse_backend(b.strip()).lowering is Lowering.DIRECTML for b in backends.split(",") if b.strip()):
        return None
    from onnx_dml_lowering.runtime.directml.dml_host import handover
    return handover()


def _run_child(command: "list[str]", cwd: "str | None", env: "dict[str, str] | None" = None,
               fds: "tuple[int, ...]" = (), cancelled: "Callable[[], bool] | None" = None
               ) -> subprocess.CompletedProcess:
    """subprocess.run, the process registered so that stop_children can end it; `env` entries are
    added to this process's environment and `fds` stay open in the child."""
    with subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, errors="replace", pass_fds=fds,
                          env={**os.environ, **env} if env else None) as proc:
        with _CHILDREN_LOCK:
            _CHILDREN.add(proc)
            if STOPPING.is_set():       # started as the zoo was being stopped
                proc.terminate()
        try:
            stderr = _communicate(proc, cancelled)
        except BaseException:
            # a Ray check cancelled (a KeyboardInterrupt raised in it, or its flag read): end the check as the local
            # executor's stop_children does, and wait, so its temporary folder can go
            _end(proc)
            raise
        finally:
            with _CHILDREN_LOCK:
                _CHILDREN.discard(proc)
    return subprocess.CompletedProcess(command, proc.returncode, None, stderr)


def _communicate(proc: subprocess.Popen, cancelled: "Callable[[], bool] | None" = None) -> str:
    """proc.communicate(), woken every half second: Ray cancels a task by interrupting its main
    thread (as a Ctrl-C that no signal delivers), which a read blocked on the child's stderr would
    only notice once the check ended by itself, and an actor's task by a flag (`cancelled`) read
    here (retrying after TimeoutExpired loses no output)."""
    while True:
        try:
            return proc.communicate(timeout=0.5)[1]
        except subprocess.TimeoutExpired:
            if cancelled is not None and cancelled():
                raise KeyboardInterrupt from None
            continue


def _end(proc: subprocess.Popen, seconds: float = 30) -> None:
    """SIGTERM to a check (it ends as on Ctrl-C), SIGKILL if it has not ended within `seconds`."""
    proc.terminate()
    try:
        proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def stop_children(signum: int = signal.SIGTERM) -> None:
    """Send `signum` to every per-model check still running: the zoo was interrupted or terminated
    (a SIGTERM reaches only the zoo's own process, not its children as Ctrl-C on a terminal does).
    Each ends as a check does on that signal, its temporary folder removed by its thread."""
    with _CHILDREN_LOCK:
        STOPPING.set()
        running = list(_CHILDREN)
    for proc in running:
        if proc.poll() is None:
            try:
                proc.send_signal(signum)
            except OSError:
                pass


def _error_line(code: int, report: "dict | None", stderr: str) -> "str | None":
    """The one line that says why a model did not end with a report (None when it did)."""
    if code in (PASSED, FAILED) and report is not None:
        return None
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("dml-lower")]
    last = (ours or lines or [""])[-1]
    if code in (USAGE, ONNXRUNTIME_CRASHED):
        # 'dml-lower: error: X' / 'dml-lower check: error: X' -> 'X'
        head, sep, rest = last.partition(": error: ")
        return rest if sep and head.startswith("dml-lower") else (last or f"exit {code} without a message")
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}" + (f": {last}" if last else "")
    if code in (PASSED, FAILED):
        return f"exit {code} without a JSON report" + (f": {last}" if last else "")
    return f"exit {code}" + (f": {last}" if last else "")


@dataclass
class ModelResult:
    model: str
    exit_code: int
    report: "dict | None"
    error: "str | None"
    seconds: float

    @classmethod
    def from_dict(cls, data: dict) -> "ModelResult":
        return cls(data["model"], data["exit_code"], data["report"], data["error"], data["seconds"])

    @property
    def status(self) -> str:
        """ok | PARTIAL (a backend ran only part of the model) | MISMATCH | ERROR | exit-2 | crashed."""
        statuses = {b.get("status") for b in (self.report or {}).get("backends", [])}
        if self.report is not None and self.exit_code == PASSED:
            return "PARTIAL" if "partial" in statuses else "ok"
        if self.report is not None and self.exit_code == FAILED:
            if "mismatch" in statuses:
                return "MISMATCH"
            if "error" in statuses or not self.report.get("fail_partial") or "partial" not in statuses:
                return "ERROR"
            return "PARTIAL"                    # check --fail-on-partial failed it
        if self.exit_code == USAGE:
            return "exit-2"
        if self.exit_code == ONNXRUNTIME_CRASHED:
            return "ERROR"                      # the error says where onnxruntime died
        return "crashed"

    @property
    def failed(self) -> bool:
        return self.status in ("MISMATCH", "ERROR", "crashed") or (self.status == "PARTIAL" and self.exit_code == FAILED)

    def placement_counts(self) -> "tuple[int, int] | None":
        """(NonZero / EyeLike / idiom placements lowered, left to ONNX); None without a report."""
        if self.report is None:
            return None
        statuses = [p.get("status") for p in self.report.get("placement", [])]
        return statuses.count("lowered"), statuses.count("onnx")

    def to_dict(self) -> dict:
        return {"model": self.model, "status": self.status, "exit_code": self.exit_code,
                "report": self.report, "error": self.error, "seconds": self.seconds}


def backend_lines(report: dict, backend: dict) -> "list[str]":
    """The text report's result lines for one backend of a check --json document (the very
    lines `dml-lower check` printed for it), rebuilt through the report's own formatter."""
    from onnx_dml_lowering.runtime.backend_names import parse_backend
    from onnx_dml_lowering.runtime.check_report import CheckReport
    from onnx_dml_lowering.runtime.compare import BackendReport, OutputResult
    from onnx_dml_lowering.runtime.report import format_results
    from onnx_dml_lowering.ir.display import json_float
    floats = ("max_abs_error", "max_rel_error", "mean_abs_error", "mean_rel_error")    # strings in strict JSON
    outputs = [OutputResult(**{k: json_float(v) if k in floats else v for k, v in o.items()})
               for o in backend.get("outputs", [])]
    one = CheckReport(report.get("model", ""), report.get("feature_level", ""), [], {},
                      [BackendReport(parse_backend(backend["backend"]), outputs, error=backend.get("error") or "",
                                     partial=dict(backend.get("partial") or {}))],
                      iterations=report.get("iterations", 1), fail_partial=bool(report.get("fail_partial")))
    text = format_results(one)
    return [line.strip() for line in text.splitlines() if line.strip()]
