"""Where onnxruntime was when the process died: the breadcrumb a supervised command leaves.

onnxruntime is C++: a bug of its own on some model or feed (SIGFPE from an integer division by
zero, SIGSEGV, SIGBUS, abort) kills the whole process, and Python gets no chance to say a word.
The command line therefore runs every command in a child process (compiler/cli/supervisor.py)
and hands it one shared memory page, `arm`ed here. Before every onnxruntime session creation and
every run, the child writes into that page what it is about to do (the region or model, the node
when the session holds one, the providers) and clears it afterwards; when the child dies of a
signal, the parent reads the page and prints the one line. The writes are two slice assignments
of bytes made once per session, so a run costs no more than a dictionary look-up.

Sessions are created only in runtime/ort/sessions.py (`create_session`, and compiler/ep/level1's level-1 pass)
and run only through ort_values.run_session and ort_operators: these are the only callers.
Unarmed (the Python API, the test suite's in-process runs, Windows), everything here is a no-op.
"""
from __future__ import annotations

import contextlib
import os
import weakref
from typing import Any, Iterable, Iterator

from onnx_dml_lowering.ir.display import display

SIZE = 4096                         # the shared page
IDLE, LOADING, RUNNING = 0, 1, 2    # byte 0 of the page; bytes 1-2 the text's length; then the text
ENDED = SIZE - 1                    # the last byte: 1 once the command's work returned (or raised)
PHASES = {LOADING: "loading", RUNNING: "running"}

_slot: "Any" = None                 # the shared page (an anonymous MAP_SHARED mmap) once armed
# id(session) -> (a weak reference to it, its running record): a WeakKeyDictionary's look-up makes
# a weak reference each time, which costs more than the rest of the write
_texts: "dict[int, tuple[weakref.ref, bytes]]" = {}


def arm(slot: Any) -> None:
    """Breadcrumbs of this process go to `slot` (a writable buffer of SIZE bytes) from now on."""
    global _slot
    _slot = slot


def armed() -> bool:
    return _slot is not None


def _record(phase: int, text: str) -> bytes:
    data = text.encode("utf-8", "backslashreplace")[:SIZE - 4]      # the last byte is ENDED's
    return bytes([phase]) + len(data).to_bytes(2, "little") + data


def _write(record: bytes) -> None:
    # one copy: the process calls onnxruntime from one thread at a time, and no onnxruntime call is
    # under way while the page is written (it is written before the call, marked idle after it)
    _slot[:len(record)] = record


def where(model: Any, providers: "Iterable[Any]", label: "str | None" = None) -> str:
    """What a session over `model` (a ModelProto, or a path) on `providers` (names or (name,
    options) pairs) is, as the crash line says it: the region (or `label`), its node when it holds
    exactly one, else how many (onnxruntime does not say which node it was in)."""
    graph = getattr(model, "graph", None)
    if graph is None:                   # a file onnxruntime reads itself
        path = display(os.path.basename(os.fsdecode(model))) if isinstance(model, (str, bytes)) else "?"
        text = f"{label} ({path})" if label else f"the model {path}"
    else:
        text = label or f"ONNX region {display(graph.name)}"
        nodes = graph.node
        if len(nodes) == 1:
            text += f" / node {display(nodes[0].name)} ({display(nodes[0].op_type)})"
        else:
            text += f" ({len(nodes)} nodes; onnxruntime does not say in which one)"
    names = [p[0] if isinstance(p, tuple) else str(p) for p in providers]
    return f"{text} on {', '.join(names) or 'its default providers'}"


@contextlib.contextmanager
def loading(text: "str | None") -> Iterator[None]:
    """`with loading(text): session = ort.InferenceSession(...)`: a crash in between is a crash
    while loading `text` (a `where` string)."""
    if _slot is None or not text:
        yield
        return
    _write(_record(LOADING, text))
    try:
        yield
    finally:
        _slot[0] = IDLE


def remember(session: Any, text: "str | None") -> None:
    """Runs of `session` are recorded as runs of `text` (a `where` string)."""
    if _slot is not None and text:
        key = id(session)

        def forget(_: object) -> None:
            _texts.pop(key, None)
        try:
            ref = weakref.ref(session, forget)
        except TypeError:               # not weak-referenceable: its runs say nothing
            return
        _texts[key] = (ref, _record(RUNNING, text))


def running(session: Any) -> bool:
    """Before session.run: record the run (then call `idle()` after it, in a finally). Returns
    whether anything was recorded."""
    if _slot is None:
        return False
    entry = _texts.get(id(session))
    if entry is not None and entry[0]() is session:
        _write(entry[1])
    else:
        _write(_record(RUNNING, "an onnxruntime session"))
    return True


def idle() -> None:
    if _slot is not None:
        _slot[0] = IDLE


def ended() -> None:
    """The command's work has returned or raised: the process ends as it says (a process that ends
    without this, through os._exit in a data loader script or a library, is not a silent success)."""
    if _slot is not None:
        _slot[ENDED] = 1


def has_ended(slot: Any) -> bool:
    return bool(slot[ENDED])


def read(slot: Any) -> "tuple[str, str] | None":
    """(phase, text) the page holds, or None when no onnxruntime call was under way."""
    phase = slot[0]
    if phase not in PHASES:
        return None
    length = int.from_bytes(slot[1:3], "little")
    return PHASES[phase], bytes(slot[3:3 + length]).decode("utf-8", "replace")
