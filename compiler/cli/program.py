"""dml-lower: the command line (docs/commands/ and docs/architecture.md). One module per command in
this package (compile, run, check, inspect, reduce, optimize, conformance, capabilities, view, demo), the
option groups they share declared and parsed once (groups; the parser class in options, the feeds
in feeds); this module builds the parser from them and turns every error into one line and an
exit code."""
from __future__ import annotations

from typing import Any, TextIO

import argparse
import atexit
import errno
import os
import sys
import threading

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.env_flags import env_flag

from .capabilities import Capabilities
from .check import Check
from .command import Command, add_command, parsed_command
from .compile import Compile
from .conformance import Conformance
from .demo import Demo
from .feeds import attach_signed_values
from .groups import VerboseArgs
from .inspect import Inspect
from .optimize import Optimize
from .options import Parser
from .reduce import Reduce
from .run import Run
from .view import View

# Every command, in the order --help lists them.
COMMANDS: "tuple[Command, ...]" = (Compile(), Run(), Check(), Capabilities(), Conformance(), Optimize(), Inspect(),
                                   Reduce(), View(), Demo())


def build_parser() -> Parser:
    parser = Parser(prog="dml-lower", description=(
        "Lower ONNX NonZero / EyeLike onto DirectML NONZERO_COORDINATES / DIAGONAL_MATRIX, "
        "run the lowered graph and check it against ONNX semantics."))
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show program's version number and exit")
    VerboseArgs(program=True).add(parser)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    for command in COMMANDS:
        add_command(sub, command, Parser)
    return parser


class _VersionAction(argparse.Action):
    """--version, looked up only when asked (importlib.metadata costs ~0.1 s on every command)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: "str | None" = None) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("onnx-dml-lowering")
    except PackageNotFoundError:
        return "unknown (not installed)"


STOPPED_BY_CTRL_C, STOPPED_BY_SIGTERM = 130, 143
_ENDING_AFTER = [False]         # main() runs in the console script's process, which ends after it


def main(argv: "list[str] | None" = None) -> int:
    parser = build_parser()
    args = parser.parse_command(attach_signed_values(list(sys.argv[1:] if argv is None else argv)))
    from onnx_dml_lowering.runtime.interrupt import watch_signals
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = DisplayedStream(stdout), DisplayedStream(stderr, "standard error", lines=False)
    unwatch = watch_signals()       # Ctrl-C / SIGTERM stop onnxruntime's runs too
    code = None
    try:
        code = _run(args)
        return code
    finally:
        # the console script's process, stopped, is ending: both signals stay ignored (a late duplicate
        # must not kill it); else (and always in-process: the API, the tests) their handlers as they were
        unwatch(_ENDING_AFTER[0] and code in (STOPPED_BY_CTRL_C, STOPPED_BY_SIGTERM))
        sys.stdout, sys.stderr = stdout, stderr


class StreamWriteError(OSError):
    """Writing standard output or error failed (`> /dev/full`: ENOSPC, EIO, EBADF ...): not a bug of
    ours, and what was printed is lost; one line, exit 2 (a reader gone away, EPIPE, stays quiet)."""

    def __init__(self, stream: str, fd: "int | None", cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.stream, self.fd = stream, fd


class GuardedStream:
    """A standard stream whose write failures are StreamWriteError, told apart from the OSErrors of
    the files a command reads and writes."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self._stream, self._name = stream, name

    def _guarded(self, act: Any, *args: Any) -> Any:
        try:
            return act(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StreamWriteError(self._name, _fileno(self._stream), exc) from exc

    def write(self, text: str) -> int:
        return self._guarded(self._stream.write, text)

    def flush(self) -> None:
        self._guarded(self._stream.flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class DisplayedStream(GuardedStream):
    """stdout as every command prints to it: whatever a model's names hold, no control character
    but line feed and tab reaches the terminal raw (ir.display). The report formatters display
    each name themselves (so a line feed in a name does not split a line); this is the guard for
    every print of every command. A person reads its lines, and stderr's: a name of any length is
    shortened in the middle (ir.display.bounded_line; the files --json and the like write, and the
    Python API's exceptions, keep it whole)."""

    def __init__(self, stream: TextIO, name: str = "standard output", lines: bool = True) -> None:
        super().__init__(stream, name)
        self._lines = lines

    def write(self, text: str) -> int:
        from onnx_dml_lowering.ir.display import bounded_line, display_lines
        self._guarded(self._stream.write, bounded_line(display_lines(text) if self._lines else text))
        return len(text)


def _run(args: argparse.Namespace) -> int:
    from onnx_dml_lowering.runtime.input_files import forget_all
    forget_all()            # the inputs of this command, not of one before it in this process
    try:
        parsed = parsed_command(args)
        code = parsed.command.run(parsed)
        sys.stdout.flush()          # a stdout that cannot take what was printed is said here, not at exit
        return code
    except DmlLowerError as exc:
        _say(f"dml-lower: error: {exc}")
        return 2
    except KeyboardInterrupt as exc:
        from onnx_dml_lowering.runtime.interrupt import Terminated
        if isinstance(exc, Terminated):
            _say("dml-lower: terminated (SIGTERM)")
            return STOPPED_BY_SIGTERM
        _say("dml-lower: interrupted")
        return STOPPED_BY_CTRL_C
    except BrokenPipeError:
        # The reader went away (`dml-lower compile M | head -1`): stop quietly, as cat does.
        _discard_output(_fileno(sys.stdout))
        return 141
    except MemoryError as exc:
        return _out_of_memory(exc, args)
    except Exception as exc:  # a bug of ours: one line, the traceback only on request
        return _unexpected(exc, args)


def _unexpected(exc: Exception, args: argparse.Namespace) -> int:
    """A standard stream that cannot be written: one line (exit 2). Anything else is a bug of ours:
    the internal error line, exit 3, after the traceback under -v or DML_LOWER_DEBUG."""
    from onnx_dml_lowering.ir.display import display
    if isinstance(exc, OSError) and exc.errno == errno.EBADF and not _is_open(1):
        _say("dml-lower: error: standard output was closed while the command ran, by code it ran (a data "
             "loader script?): what it prints could not be written")
        return 2
    if isinstance(exc, StreamWriteError):
        from onnx_dml_lowering.runtime.output_target import reason
        _discard_output(exc.fd)         # the unwritten rest: the flush at exit must not fail again
        _say(f"dml-lower: error: cannot write {exc.stream}: {reason(exc)}: what the command printed there "
             "is lost (give it a file on a disk with room, a pipe, or /dev/null)")
        return 2
    debug = env_flag("DML_LOWER_DEBUG") or getattr(args, "verbose", False)
    if debug:
        import traceback
        _say("".join(traceback.format_exception(exc)).rstrip("\n"))
    _say(f"dml-lower: internal error: {type(exc).__name__}: {display(' '.join(str(exc).split())[:300])} "
         + ("(the traceback is above: please report it)" if debug else "(set DML_LOWER_DEBUG=1 for the traceback)"))
    return 3


def _out_of_memory(exc: MemoryError, args: argparse.Namespace) -> int:
    """An allocation the memory limit let through failed (the limit counts the feeds and buffers, not
    what numpy, onnx.reference or onnxruntime allocate besides): one line naming the limit, exit 2."""
    from onnx_dml_lowering.ir.display import display
    from onnx_dml_lowering.runtime.memory import default_limit, format_size
    given = getattr(args, "memory_limit", None)
    limit = f"--memory-limit {given}" if given else f"the default memory limit of {format_size(default_limit())}"
    what = display(" ".join(str(exc).split())[:200]) or "an allocation failed"
    _say(f"dml-lower: error: out of memory ({what}) within {limit}, which bounds the feeds and buffers "
         "but not everything a run allocates: use smaller --dim values or inputs, or a lower --memory-limit")
    return 2


def _say(line: str) -> None:
    """A line on stderr, where it can still be written (stderr itself may be the stream that failed)."""
    try:
        print(line, file=sys.stderr)
    except OSError:
        pass


def _fileno(stream: TextIO) -> "int | None":
    try:
        return stream.fileno()
    except (OSError, ValueError):
        return None             # not a file (a test's capture)


def _discard_output(fd: "int | None") -> None:
    """What is still buffered for `fd` goes to /dev/null: its stream failed, and the flush at exit
    must not fail again."""
    if fd is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError):
        pass


def entry() -> None:
    """The console script (and `python -m`): main(), then the process ends without finalising the
    interpreter. Finalising frees every module, onnxruntime session and array one at a time, about
    40 ms after a check; nothing observable depends on it once the exit handlers have run (logging,
    Ray, tempfile and multiprocessing register theirs there) and stdout / stderr are flushed.
    While a non-daemon thread other than the main one is alive, the ordinary exit joins it as it
    would (a daemon thread, such as a DirectML host's stderr reader, the ordinary exit would not wait for).
    The command runs in a supervised child process: a crash inside onnxruntime is one line
    (supervisor.py)."""
    from onnx_dml_lowering.runtime.ort import settings

    from .supervisor import supervised
    _ENDING_AFTER[0] = True
    settings.QUIET_DEFAULT_LOGGER[0] = True     # the process is the command's: onnxruntime says nothing of its own
    closed = _open_standard_streams()
    code = 2 if closed else supervised(main)
    if any(not thread.daemon for thread in threading.enumerate() if thread is not threading.main_thread()):
        sys.exit(code)          # the ordinary exit joins a non-daemon thread; a daemon one it would not
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        code = code or 141
    except OSError as exc:          # what an error line left in stdout's buffer: said, never a traceback
        from onnx_dml_lowering.runtime.output_target import reason
        _say(f"dml-lower: error: cannot write standard output or error: {reason(exc)}")
        code = code or 2
    atexit._run_exitfuncs()
    os._exit(code)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _open_standard_streams() -> bool:
    """Descriptors 0-2 that the caller closed (`dml-lower ... >&-`) are opened on /dev/null first, so a
    file the command opens never takes one of them (onnxruntime's log, writing to 2, would land in
    it). Returns True, after one line on stderr where it can be read, when stdout was closed: what
    the command prints is its answer, which would be lost."""
    closed = []
    for fd in (0, 1, 2):
        if not _is_open(fd):
            closed.append(fd)
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if 2 in closed or sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    if 1 in closed or sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        print("dml-lower: error: standard output is closed: what the command prints could not be read "
              "(give it a file or /dev/null: > out.txt)", file=sys.stderr)
        return True
    return False


if __name__ == "__main__":
    entry()
