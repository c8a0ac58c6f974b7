"""Stopping a run: Ctrl-C (SIGINT) and SIGTERM end every command promptly, even inside onnxruntime.

Python runs a signal handler only between bytecodes of the main thread, and onnxruntime's
session.run is one long C++ call (a Loop may iterate for minutes): Ctrl-C waited for it to end.
Every onnxruntime run of this project takes its RunOptions from `stoppable_run`; `watch_signals`
(the CLI installs it) has the interpreter write each signal's number to a pipe that a thread of
ours reads, and that thread sets `terminate` on every run under way, so onnxruntime returns at
once and the run raises KeyboardInterrupt (Terminated for SIGTERM) as Ctrl-C does elsewhere.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Callable, Iterator

_LOCK = threading.Lock()
_ACTIVE: "set" = set()            # the RunOptions of the onnxruntime runs under way
_SIGNALLED: "list[int]" = []      # the signal that stopped them (the last one)


class Terminated(KeyboardInterrupt):
    """SIGTERM: raised where Ctrl-C raises KeyboardInterrupt, so the same clean-up runs."""


def _stop_runs(signum: int) -> None:
    with _LOCK:
        if not _STOPPING:           # a later signal while one stop unwinds does not rename it
            _SIGNALLED[:] = [signum]
        for options in _ACTIVE:
            options.terminate = True


@contextlib.contextmanager
def stoppable_run() -> Iterator[object]:
    """`with stoppable_run() as options: session.run(names, feeds, options)`: a signal ends that
    run (onnxruntime's RunOptions.terminate) and it raises KeyboardInterrupt / Terminated."""
    import onnxruntime as ort
    options = ort.RunOptions()
    with _LOCK:
        _ACTIVE.add(options)
    try:
        yield options
    except Exception:
        if options.terminate:       # onnxruntime's "Exiting due to terminate flag": our signal
            _STOPPING[:] = [True]   # the same signal's Python handler, run next, raises nothing more
            raise (Terminated if _SIGNALLED == [signal.SIGTERM] else KeyboardInterrupt)() from None
        raise
    finally:
        with _LOCK:
            _ACTIVE.discard(options)


def terminated() -> bool:
    """Whether the last stopping signal seen was SIGTERM (Ctrl-C otherwise)."""
    with _LOCK:
        return _SIGNALLED == [signal.SIGTERM]


_STOPPING: "list[bool]" = []      # a stop was raised and is unwinding (until resume())


def _raise_stop(signum: int, frame: object) -> None:
    """SIGINT raises KeyboardInterrupt and SIGTERM Terminated, unless a stop raised before is still
    unwinding: a second signal then (`timeout` signals the process and its group; Ctrl-C pressed
    twice) would raise again inside its clean-up or its one line, and escape as a traceback. Code
    that catches a stop and goes on (check reporting the sets it finished, a zoo its models) calls
    resume(): from then on a signal stops that work too."""
    # recorded here too (no lock: this runs in the main thread, which may hold it): the watcher
    # thread may not have read the signal yet when the caller asks terminated()
    if not _STOPPING:
        _SIGNALLED[:] = [signum]
        _STOPPING[:] = [True]
        raise (Terminated if signum == signal.SIGTERM else KeyboardInterrupt)()


def resume() -> None:
    """The stop raised has been caught and handled; the work goes on, and a signal stops it again."""
    _STOPPING.clear()


def watch_signals() -> "Callable[..., None]":
    """From the main thread: SIGINT / SIGTERM stop the onnxruntime runs under way, and SIGTERM
    raises Terminated (its default kills the process, leaving children and temporary files
    behind). Returns the function that undoes it. Elsewhere (a worker thread) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda ending=False: None
    _STOPPING.clear()               # this command's first signal raises
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        previous_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        previous_term = signal.signal(signal.SIGTERM, _raise_stop)
        previous_int = signal.signal(signal.SIGINT, _raise_stop)
        if previous_int == signal.SIG_IGN:          # a background job's: Ctrl-C is not for it
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):
        os.close(read)
        os.close(write)
        return lambda ending=False: None

    def watch() -> None:
        with open(read, "rb", buffering=0) as pipe:
            while data := pipe.read(64):        # ends when the write end is closed
                for signum in data:
                    if signum in (signal.SIGINT, signal.SIGTERM):
                        _stop_runs(signum)

    thread = threading.Thread(target=watch, name="dml-lower-signals", daemon=True)
    thread.start()

    def undo(ending: bool = False) -> None:
        """`ending`: the command was stopped and the process is about to end: SIGINT and SIGTERM
        stay ignored (restoring their defaults, a late duplicate would kill the process before it exits)."""
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGTERM, signal.SIG_IGN if ending else previous_term)
        signal.signal(signal.SIGINT, signal.SIG_IGN if ending else previous_int)
        os.close(write)
        thread.join(timeout=5)
    return undo
