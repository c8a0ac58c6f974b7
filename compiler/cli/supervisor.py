"""The command line's supervisor: a crash inside onnxruntime ends as one line, not a silent death.

The console script forks before it does anything else. The child runs the command as ever (its
stdout and stderr are the terminal's or the caller's, unchanged); the parent only waits. Before
every onnxruntime session creation and run the child writes what it is about to do into a page
both share (runtime/ort_crash.py). If the child dies of SIGSEGV, SIGFPE, SIGBUS, SIGILL or
SIGABRT while that page says onnxruntime was loading or running something, the parent prints

    dml-lower: error: onnxruntime crashed (SIGFPE) while running ONNX region R / node N (Op) on P; ...

and exits CRASHED (4); a fatal signal anywhere else is an internal error (exit 3). Every other end
is passed on as it is: the child's exit code, or death by the same signal (SIGKILL, SIGINT ...).

Signals: the parent blocks the ones it watches and takes them with sigwaitinfo. A Ctrl-C, Ctrl-\\
or hang-up from the terminal reaches the whole process group, the child included, so one the
kernel sent is not passed on again; one another process sent to the parent (`kill`, a zoo
stopping its checks, a timeout) is forwarded to the child, which handles it as it always did
(runtime/interrupt.py: exit 130 / 143). Ctrl-Z stops both processes and `fg` continues both.

Where it cannot work (no fork or no sigwaitinfo: Windows, macOS) or when DML_LOWER_UNSUPERVISED=1
is set (a debugger wants the one process), the command runs in the one process as before.
"""
from __future__ import annotations

import mmap
import os
import signal
import threading
from typing import Callable, NoReturn

from onnx_dml_lowering.runtime.env_flags import env_flag

CRASHED = 4                 # the exit code of a crash inside onnxruntime (docs/errors.md)
INTERNAL = 3
ENDED_EARLY = 2             # a process ended with status 0 before its command finished: never a success

FATAL = ("SIGSEGV", "SIGFPE", "SIGBUS", "SIGILL", "SIGABRT")
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
_FROM_A_PROCESS = 0         # si_code <= 0: kill(), sigqueue(), tkill(); > 0: the kernel (a terminal)
_PR_SET_PDEATHSIG = 1       # linux/prctl.h

KILLED = ("dml-lower: error: the command's process was killed (SIGKILL): most likely the kernel's out-of-memory "
          "killer (`dmesg` says), else another process; smaller --dim sizes or a lower --memory-limit keep a run "
          "within memory")
ADVICE = ("onnxruntime itself died, on this model and these feeds (a bug of onnxruntime's); "
          "`check --oracle reference` evaluates the model on onnx.reference and names a node that "
          "fails, and a backend that crashes can be left out of --backends")


def _signals(names: "tuple[str, ...]") -> "set[signal.Signals]":
    return {getattr(signal, name) for name in names if hasattr(signal, name)}


def available() -> bool:
    """Whether this process can run its command supervised."""
    return (os.name == "posix" and hasattr(os, "fork") and hasattr(signal, "sigwaitinfo")
            and not env_flag("DML_LOWER_UNSUPERVISED")
            and threading.active_count() == 1)      # fork with threads running may deadlock


def supervised(work: Callable[[], int]) -> int:
    """work() in a supervised child process: returns its exit code there; the parent never
    returns (it ends as the child did, or with the crash line). Unsupervised where unavailable."""
    if not available():
        return work()
    import mmap

    from onnx_dml_lowering.runtime import ort_crash
    page = mmap.mmap(-1, ort_crash.SIZE)             # anonymous and shared with the child
    watched = _signals(FORWARDED) | {signal.SIGCHLD}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:                                 # no process to spare: run here, unsupervised
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        return work()
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        _die_with(parent)
        ort_crash.arm(page)
        try:
            return work()
        finally:
            ort_crash.ended()
    _supervise(pid, page, watched)


def _die_with(parent: int) -> None:
    """The child is killed when the supervisor dies (Linux: PR_SET_PDEATHSIG): a `kill -9` of the pid
    the user started (a CI runner's timeout, a job runner) must not leave the command running on,
    starting DirectML hosts and writing its files; its DirectML hosts die with it in turn."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:          # the supervisor died before prctl took effect
        os._exit(INTERNAL)


def _supervise(pid: int, page: mmap.mmap, watched: "set[signal.Signals]") -> NoReturn:
    """Wait for the child, forwarding the signals another process sent; then end as it ended."""
    while True:
        info = signal.sigwaitinfo(watched)
        if info.si_signo == signal.SIGCHLD:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                break
        elif info.si_code <= _FROM_A_PROCESS:
            try:
                os.kill(pid, info.si_signo)
            except ProcessLookupError:
                pass
    if os.WIFEXITED(status):
        from onnx_dml_lowering.runtime import ort_crash
        code = os.WEXITSTATUS(status)
        if not ort_crash.has_ended(page):          # os._exit in a data loader script or a library
            line = (f"dml-lower: error: the process ended (exit status {code}) before the command finished: code it "
                    "ran (a data loader script, a library) ended it; no result is given")
            os.write(2, (line + "\n").encode())
            os._exit(code or ENDED_EARLY)
        os._exit(code)
    signum = os.WTERMSIG(status)
    if signum in _signals(FATAL):
        line, code = crash_line(signum, page)
        os.write(2, (line + "\n").encode("utf-8", "backslashreplace"))
        os._exit(code)
    if signum == signal.SIGKILL:        # never silent: the kernel's out-of-memory killer sends it
        os.write(2, (KILLED + "\n").encode())
    _die_of(signum)


def crash_line(signum: int, page: "mmap.mmap | bytes") -> "tuple[str, int]":
    """The one line and exit code of a child dead of the fatal signal `signum`, from its page."""
    from onnx_dml_lowering.runtime import ort_crash
    name = signal.Signals(signum).name
    crumb = ort_crash.read(page)
    if crumb is None:
        return (f"dml-lower: internal error: the process died of {name} outside onnxruntime (in onnx, "
                "numpy or this tool): please report it with the command (DML_LOWER_UNSUPERVISED=1 "
                "runs it in one process, for a debugger)", INTERNAL)
    phase, where = crumb
    return f"dml-lower: error: onnxruntime crashed ({name}) while {phase} {where}; {ADVICE}", CRASHED


def _die_of(signum: int) -> NoReturn:
    """End as the child did: killed by `signum` (the shell, a zoo or a test sees the same status)."""
    try:
        signal.signal(signum, signal.SIG_DFL)
    except (OSError, ValueError):       # SIGKILL / SIGSTOP: no handler to reset
        pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)          # a signal that does not kill (SIGCHLD, SIGCONT ...)
