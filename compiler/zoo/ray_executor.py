"""--executor ray: the zoo's per-model checks on Ray workers, on a cluster or a local Ray instance.

The zoo starts one Ray actor per worker (--jobs of them, else one per CPU of the cluster, never
more than there are models), and hands each model to an idle one. An actor runs the same
subprocess as the local executor (model_check.run_one) and returns the same record, so summary,
JUnit and JSON do not depend on where the work ran; and, as a thread of the local executor's pool
does, it keeps its state between models: the DirectML host it starts on its first `dml` model is
handed to every later model's check, one host per worker rather than one per model. The
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
from onnx_dml_lowering.ir.digits import ascii_digits
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
    if not sep or not host or not ascii_digits(port):
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise DmlLowerError(f"--ray-address {address}: no Ray cluster answers there "
                            f"({exc.strerror or type(exc).__name__})") from None


def run_on_ray(models: "list[str]", options: "list[str]", address: "str | None", jobs: "int | None",
               done: "Callable[[int, dict], None]") -> None:
    """Check every model on a worker actor (`jobs` of them when given; otherwise one per CPU of
    the cluster); `done(index, record)` is called as each finishes. Ctrl-C or SIGTERM
    (KeyboardInterrupt) cancels the checks under way before it propagates (see _cancel)."""
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
    pending: "dict[object, tuple[int, Any]]" = {}
    try:
        _schedule(ray, models, options, _workers(ray, jobs, len(models)), pending, done)
    except KeyboardInterrupt:
        _cancel(ray, list(pending))
        raise
    finally:
        ray.shutdown()


def _workers(ray: Any, jobs: "int | None", count: int) -> list:
    """The actors the models are checked on: `jobs` of them, else one per CPU of the cluster;
    never more than the models. A worker that dies is reported as it is, not restarted or
    retried behind the user's back."""
    wanted = jobs if jobs is not None else max(1, int(ray.cluster_resources().get("CPU", 1)))
    actor = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(ZooWorker)
    return [actor.remote() for _ in range(max(1, min(wanted, count)))]


def _schedule(ray: Any, models: "list[str]", options: "list[str]", idle: list,
              pending: "dict[object, tuple[int, Any]]", done: "Callable[[int, dict], None]") -> None:
    """Each model to an idle worker, in order; `pending` holds what is under way (the caller
    cancels it on Ctrl-C)."""
    cwd = os.getcwd()
    queue = list(enumerate(models))
    while queue or pending:
        while queue and idle:
            index, model = queue.pop(0)
            worker = idle.pop(0)
            pending[worker.check.remote(model, options, cwd)] = (index, worker)
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            index, worker = pending.pop(ref)
            try:
                record = ray.get(ref)
                idle.append(worker)
            except Exception as exc:  # the worker itself died (process lost, node gone): not reused
                record = _failed(models[index], f"Ray task failed: {first_line(exc)}")
                if not idle and not pending:      # no worker left: the models not started fail too
                    for left, model in queue:
                        done(left, _failed(model, f"not checked: every Ray worker died ({first_line(exc)})"))
                    queue.clear()
            done(index, record)


def _failed(model: str, error: str) -> dict:
    return {"model": model, "exit_code": -1, "report": None, "error": error, "seconds": 0.0}


class ZooWorker:
    """A Ray actor: one zoo worker, checking one model at a time in its own thread, so what it
    starts for a model (the DirectML host) serves its later models too."""

    def check(self, model: str, options: "list[str]", cwd: str) -> dict:
        import ray
        context = ray.get_runtime_context()
        return run_one(model, options, cwd, cancelled=context.is_canceled)


def _take_back(signum: int, handler: object) -> None:
    """Reinstall our handler of `signum`: ray.init installs its C++ failure handler for SIGTERM in
    the driver, which prints a stack and kills the process at once, so the tasks were never
    cancelled and their checks' folders stayed (runtime/interrupt.py's handler ends the zoo)."""
    if callable(handler) and threading.current_thread() is threading.main_thread():
        signal.signal(signum, handler)


def _cancel(ray: Any, refs: list) -> None:
    """End the tasks of `refs`: ray.shutdown alone leaves a cluster's tasks running after the driver
    is gone, and a local instance's workers die without ending the check each started. A cancelled
    actor task has its cancellation flag set, which run_one reads every half second and then ends
    its check (SIGTERM) and removes its folder;
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
