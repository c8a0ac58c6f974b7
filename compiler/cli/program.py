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
    stdout = sys.stdout
    sys.stdout = DisplayedStream(stdout)
    unwatch = watch_signals()       # Ctrl-C / SIGTERM stop onnxruntime's runs too
    code = None
    try:
        code = _run(args)
        return code
    finally:
        # the console script's process, stopped, is ending: both signals stay ignored (a late duplicate
        # must not kill it); else (and always in-process: the API, the tests) their handlers as they were
        unwatch(_ENDING_AFTER[0] and code in (STOPPED_BY_CTRL_C, STOPPED_BY_SIGTERM))
        sys.stdout = stdout


class DisplayedStream:
    """stdout as every command prints to it: whatever a model's names hold, no control character
    but line feed and tab reaches the terminal raw (ir.display). The report formatters display
    each name themselves (so a line feed in a name does not split a line); this is the guard for
    every print of every command."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        from onnx_dml_lowering.ir.display import display_lines
        self._stream.write(display_lines(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _run(args: argparse.Namespace) -> int:
    from onnx_dml_lowering.ir.display import display
    from onnx_dml_lowering.runtime.input_files import forget_all
    forget_all()            # the inputs of this command, not of one before it in this process
    try:
        parsed = parsed_command(args)
        return parsed.command.run(parsed)
    except DmlLowerError as exc:
        print(f"dml-lower: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        from onnx_dml_lowering.runtime.interrupt import Terminated
        if isinstance(exc, Terminated):
            print("dml-lower: terminated (SIGTERM)", file=sys.stderr)
            return STOPPED_BY_SIGTERM
        print("dml-lower: interrupted", file=sys.stderr)
        return STOPPED_BY_CTRL_C
    except BrokenPipeError:
        # The reader went away (`dml-lower compile M | head -1`): stop quietly, as cat does.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except Exception as exc:  # a bug of ours: one line, the traceback only on request
        if isinstance(exc, OSError) and exc.errno == errno.EBADF and not _is_open(1):
            print("dml-lower: error: standard output was closed while the command ran, by code it ran (a data "
                  "loader script?): what it prints could not be written", file=sys.stderr)
            return 2
        if env_flag("DML_LOWER_DEBUG") or getattr(args, "verbose", False):
            raise
        print(f"dml-lower: internal error: {type(exc).__name__}: {display(' '.join(str(exc).split())[:300])} "
              "(set DML_LOWER_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3


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
