"""--executor ray: the zoo's per-model checks as Ray tasks, on a cluster or a local Ray instance.

Each task runs the same subprocess as the local executor (model_check.run_one) on its worker and
returns the same record, so summary, JUnit and JSON do not depend on where the work ran. The
workers need onnx-dml-lowering installed and must see the model files (and any --inputs /
--oracle files) at the same paths as the driver: the same machine or a shared filesystem.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import Any, Callable

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import first_line

from .model_check import run_one

RAY_MISSING = "--executor ray needs the ray extra: pip install 'onnx-dml-lowering[ray]'"
LOCAL_CPUS = 2
CONNECT_TIMEOUT = 10.0   # seconds for the address's TCP port to answer
CANCEL_WAIT = 60.0       # seconds the cancelled tasks get to end their checks and remove their folders


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise DmlLowerError(RAY_MISSING) from None
    return ray


def _reachable(address: str) -> None:
    """A HOST:PORT (or ray://HOST:PORT) where nothing listens is one line now: ray.init itself
    retries such an address for minutes. 'auto' and other forms are left to Ray."""
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise DmlLowerError(f"--ray-address {address}: no Ray cluster answers there "
                            f"({exc.strerror or type(exc).__name__})") from None


def run_on_ray(models: "list[str]", options: "list[str]", address: "str | None", jobs: "int | None",
               done: "Callable[[int, dict], None]") -> None:
    """Check every model as a Ray task (at most `jobs` in flight when given; otherwise as many as
    the cluster's CPUs take); `done(index, record)` is called as each finishes. Ctrl-C or SIGTERM
    (KeyboardInterrupt) cancels the tasks under way before it propagates (see _cancel)."""
    ray = import_ray()
    if address:
        _reachable(address)
        kwargs: "dict[str, object]" = {"address": address}
    else:
        kwargs = {"num_cpus": LOCAL_CPUS, "include_dashboard": False}
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        # The workers' output is captured by run_one; what Ray logs about itself stays out of
        # the summary unless it is a warning.
        ray.init(log_to_driver=False, logging_level=logging.WARNING, **kwargs)
        _take_back(signal.SIGTERM, sigterm)
    except Exception as exc:  # ConnectionError, RuntimeError, ValueError: all one line
        where = f"--ray-address {address}" if address else "a local Ray instance"
        raise DmlLowerError(f"{where}: Ray did not start: {first_line(exc)}") from None
    try:
        # A worker process that dies is reported as it is, not retried behind the user's back.
        task = ray.remote(num_cpus=1, max_retries=0)(run_one)
        cwd = os.getcwd()
        pending: "dict[object, int]" = {}
        queue = list(enumerate(models))
        while queue or pending:
            while queue and (jobs is None or len(pending) < jobs):
                index, model = queue.pop(0)
                pending[task.remote(model, options, cwd)] = index
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                index = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as exc:  # the task itself died (worker lost, node gone)
                    record = {"model": models[index], "exit_code": -1, "report": None,
                              "error": f"Ray task failed: {first_line(exc)}",
                              "seconds": 0.0}
                done(index, record)
    except KeyboardInterrupt:
        _cancel(ray, list(pending))
        raise
    finally:
        ray.shutdown()


def _take_back(signum: int, handler: object) -> None:
    """Reinstall our handler of `signum`: ray.init installs its C++ failure handler for SIGTERM in
    the driver, which prints a stack and kills the process at once, so the tasks were never
    cancelled and their checks' folders stayed (runtime/interrupt.py's handler ends the zoo)."""
    if callable(handler) and threading.current_thread() is threading.main_thread():
        signal.signal(signum, handler)


def _cancel(ray: Any, refs: list) -> None:
    """End the tasks of `refs`: ray.shutdown alone leaves a cluster's tasks running after the driver
    is gone, and a local instance's workers die without ending the check each started. A cancelled
    task gets a KeyboardInterrupt, on which run_one ends its check (SIGTERM) and removes its folder;
    they are waited for (at most CANCEL_WAIT seconds), so that is done when the zoo ends."""
    for ref in refs:
        try:
            ray.cancel(ref, force=False)
        except Exception:  # noqa: BLE001 - finished meanwhile, or the cluster is gone: nothing to end
            pass
    if refs:
        try:
            ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT)
        except Exception:  # noqa: BLE001 - the cluster went away: nothing left to wait for
            pass
