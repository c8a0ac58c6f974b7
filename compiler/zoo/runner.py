"""`dml-lower check MODEL_OR_DIR ...`: a whole zoo of models, one process per model.

Discovery (a directory means every *.onnx below it, recursively, sorted), the per-model options
forwarded to each `check` subprocess, the scheduling (at most --jobs at a time here, or Ray
tasks), a live progress bar on a terminal, and the summary table / JSON / JUnit at the end.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.runtime.interrupt import Terminated

if TYPE_CHECKING:        # the CLI imports this module for its options: the rest loads when a zoo runs
    from .model_check import ModelResult

# Options of the zoo itself, not forwarded to the per-model checks (--json is the zoo's own).
_ZOO_DESTS = {"model", "jobs", "junit", "executor", "ray_address", "json", "quiet"}
# Options that write one model's file: several models would overwrite each other's.
_ONE_MODEL_ONLY = {"markdown": "--markdown", "save_inputs": "--save-inputs", "save_outputs": "--save-outputs"}


def add_zoo_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=int, metavar="N",
                   help="several models: check at most N at a time, each in its own process (default: 1)")
    p.add_argument("--junit", metavar="OUT.xml",
                   help="write a JUnit XML report: one testcase per model x backend")
    p.add_argument("--executor", choices=("local", "ray"),
                   help="where the per-model checks run: local processes or Ray tasks (default: local)")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="with --executor ray: the cluster to join (default: a local Ray instance, 2 CPUs)")


def is_zoo(args: argparse.Namespace) -> bool:
    """Several models, a directory, or a zoo option: the zoo. One model file alone: check as ever."""
    return (len(args.model) > 1 or Path(args.model[0]).is_dir() or args.jobs is not None
            or args.junit is not None or args.executor is not None or args.ray_address is not None)


def discover(paths: "list[str]") -> "list[str]":
    """Model files in argument order; a directory gives every *.onnx below it, sorted. A path
    given twice is checked once."""
    models: "list[str]" = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            found = sorted(str(p) for p in path.rglob("*.onnx") if p.is_file())
            if not found:
                raise DmlLowerError(f"directory {text!r} holds no .onnx model (searched recursively)")
            models += found
        elif path.exists():             # a FIFO or device given by name: its check refuses it in one line
            models.append(text)
        else:
            raise DmlLowerError(f"model {text!r} does not exist")
    seen: "set[Path]" = set()
    unique = []
    for model in models:
        key = Path(model).resolve()
        if key not in seen:
            seen.add(key)
            unique.append(model)
    return unique


def forwarded_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> "list[str]":
    """The per-model check options the user gave, as command-line tokens for each subprocess.

    Built from the check parser's own option table, so an option added to `check` later is
    forwarded without touching this list.
    """
    for dest, option in _ONE_MODEL_ONLY.items():
        if getattr(args, dest, None):
            raise DmlLowerError(f"{option} writes one model's file: with several models use --json / --junit, "
                                "or check that model alone")
    tokens: "list[str]" = []
    for action in parser._actions:
        if not action.option_strings or action.dest in _ZOO_DESTS \
                or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        value = getattr(args, action.dest, action.default)   # -v's default is SUPPRESS: absent
        if value is None or value is False or value == action.default:
            continue
        option = max(action.option_strings, key=len)
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreConstAction)):
            tokens.append(option)
        elif isinstance(action, argparse._CountAction):
            tokens += [option] * value
        elif isinstance(action, argparse._AppendAction):
            tokens += [f"{option}={item}" for item in value]
        elif isinstance(action, argparse._StoreAction) and isinstance(value, list):
            tokens += [option, *map(str, value)]
        elif isinstance(action, argparse._StoreAction):
            tokens.append(f"{option}={value}")   # '=' keeps a value such as -1 from reading as an option
        else:
            raise TypeError(f"check option {option}: {type(action).__name__} is not forwarded to the zoo's checks")
    return tokens


def run_zoo(args: argparse.Namespace, parser: argparse.ArgumentParser, named: "list[tuple[str, str]]",
            random_feeds: bool) -> int:
    """The zoo's checks; `named` are the (option, name) pairs of the per-input feed options (the CLI
    reads them, cli.feeds.named_options) and `random_feeds` says the checks draw random feeds."""
    import time

    from ..output_files import write_file, write_json
    if args.jobs is not None and args.jobs < 1:
        raise DmlLowerError(f"--jobs {args.jobs}: must be at least 1")
    executor = args.executor or "local"
    if args.ray_address and executor != "ray":
        raise DmlLowerError("--ray-address applies to --executor ray")
    if executor == "ray":
        from .ray_executor import import_ray
        import_ray()   # a missing extra is a usage error before any model runs
    models = discover(args.model)
    options = forwarded_options(parser, args)
    if named:
        options.append("--names-where-present")  # a text model's --dim is no error for a detector
    start = time.perf_counter()
    results, stopped = _schedule(models, options, executor, args)
    seconds = time.perf_counter() - start
    print(format_summary(results))
    unused = unused_names(named, results) if random_feeds else []
    for option, name in unused:
        what = "an input dimension" if option == "--dim" else "an input"
        print(f"zoo: {option} {display(name)}: no model checked has {what} of that name", file=sys.stderr)
    if args.json:
        document = {"models": [r.to_dict() for r in results],
                    **({"interrupted": True, "models_requested": len(models)} if stopped else {})}
        write_json(args.json, "the JSON report", document)
    if args.junit:
        from .junit import write_junit
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        write_file(args.junit, "the JUnit report", lambda p: write_junit(p, results, backends, seconds))
    if stopped is not None:
        print(f"dml-lower: {'terminated' if isinstance(stopped, Terminated) else 'interrupted'}: the reports "
              f"cover the {len(results)} of {len(models)} models checked before it", file=sys.stderr)
        return 143 if isinstance(stopped, Terminated) else 130
    code = exit_code(results)
    return 2 if unused and code == 0 else code


def unused_names(named: "list[tuple[str, str]]", results: "list[ModelResult]") -> "list[tuple[str, str]]":
    """The named options no model that ended with a report applied (a misspelt name): a --dim
    name none drew its feeds at, an input name none fed (each report's dims and feeds)."""
    reports = [r.report for r in results if r.report is not None]
    if not reports:
        return []
    dims = {name for report in reports for name in report.get("dims", {})}
    inputs = {name for report in reports for name in report.get("feeds", {}).get("inputs", {})}
    return [(option, name) for option, name in named if name not in (dims if option == "--dim" else inputs)]


def exit_code(results: "list[ModelResult]") -> int:
    """1 when any model is MISMATCH / ERROR / crashed (or PARTIAL under --fail-on-partial); else 2 when any ended in a usage or input
    error (exit 2, as checking it alone would); else 0."""
    if any(r.failed for r in results):
        return 1
    return 2 if any(r.status == "exit-2" for r in results) else 0


def _schedule(models: "list[str]", options: "list[str]", executor: str, args
              ) -> "tuple[list[ModelResult], KeyboardInterrupt | None]":
    """Results in the models' order, whatever order they finish in, and the Ctrl-C / SIGTERM that
    stopped the zoo (None when every model was checked; the results are then those finished)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from .model_check import STOPPING, ModelResult, run_one
    records: "dict[int, dict]" = {}
    stopped = None
    STOPPING.clear()
    with _progress(len(models)) as bar:
        def done(index: int, record: dict) -> None:
            records[index] = record
            bar.update(1)

        if executor == "ray":
            from .ray_executor import run_on_ray
            try:
                run_on_ray(models, options, args.ray_address, args.jobs, done)
            except KeyboardInterrupt as exc:      # its tasks cancelled and ended: report those finished
                # Ray's wait turns our Terminated into a plain KeyboardInterrupt: the signal says which
                from onnx_dml_lowering.runtime.interrupt import terminated
                stopped = Terminated() if terminated() else exc
        else:
            pool = ThreadPoolExecutor(max_workers=args.jobs or 1)
            try:
                futures = {pool.submit(run_one, model, options): index for index, model in enumerate(models)}
                for future in as_completed(futures):
                    done(futures[future], future.result())
            except BaseException as exc:
                # Ctrl-C or SIGTERM: the queued checks never start; the running ones are ended (a
                # SIGTERM reaches only this process) and waited for, so their temporary folders go.
                from .model_check import stop_children
                pool.shutdown(wait=False, cancel_futures=True)
                stop_children()
                if not isinstance(exc, KeyboardInterrupt):
                    raise
                stopped = exc
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    return [ModelResult.from_dict(records[i]) for i in sorted(records)], stopped


def _progress(total: int):
    """A live progress bar on a terminal; nothing at all when output goes to a file or a pipe."""
    from tqdm import tqdm
    quiet = not (sys.stdout.isatty() and sys.stderr.isatty())
    return tqdm(total=total, unit="model", desc="check", disable=quiet, leave=False, file=sys.stderr)


def format_summary(results: "list[ModelResult]") -> str:
    """The table (model, status, lowered / left to ONNX placements, seconds), then one line per
    failing backend or model, then the counts."""
    from .model_check import backend_lines
    rows = [("model", "status", "lowered", "onnx", "seconds")]
    for r in results:
        counts = r.placement_counts()
        lowered, onnx = ("-", "-") if counts is None else map(str, counts)
        rows.append((display(r.model), r.status, lowered, onnx, f"{r.seconds:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]:>{widths[3]}}  "
             f"{row[4]:>{widths[4]}}" for row in rows]
    for r in results:
        if r.report is None:
            lines.append(f"{display(r.model)}: {r.status}: {display(r.error)}")
            continue
        for backend in r.report.get("backends", []):
            if backend.get("status") in ("mismatch", "error", "partial"):
                lines += [f"{display(r.model)}: {line}" for line in backend_lines(r.report, backend)
                          if ": MISMATCH (" in line or "] ERROR " in line or "] PARTIAL: " in line]
    tally: "dict[str, int]" = {}
    for r in results:
        tally[r.status] = tally.get(r.status, 0) + 1
    order = ["ok", "PARTIAL", "MISMATCH", "ERROR", "exit-2", "crashed"]
    lines.append(f"zoo: {len(results)} model{'s' if len(results) != 1 else ''}: "
                 + ", ".join(f"{tally[s]} {s}" for s in order if tally.get(s)))
    return "\n".join(lines)

