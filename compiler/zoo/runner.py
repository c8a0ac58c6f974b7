"""`dml-lower check MODEL_OR_DIR ...`: a whole zoo of models, one process per model.

Discovery (a directory means every *.onnx below it, recursively, sorted), the per-model options
(rendered by the CLI's option groups) handed to each `check` subprocess, the scheduling (at most --jobs at a time here, or Ray
tasks), a live progress bar on a terminal, and the summary table / JSON / JUnit at the end.
"""
from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display, name_list
from onnx_dml_lowering.runtime.input_files import named_stat
from onnx_dml_lowering.runtime.interrupt import Terminated, resume

if TYPE_CHECKING:        # the CLI imports this module for its options: the rest loads when a zoo runs
    from .model_check import ModelResult

@dataclass(frozen=True)
class Zoo:
    """How a zoo runs (the zoo's own options: cli/zoo_options.py reads them): at most `jobs` checks
    at a time, on `executor` (local processes or Ray at `ray_address`), a JUnit report to `junit`."""
    jobs: "int | None" = None
    junit: "str | None" = None
    executor: "str | None" = None
    ray_address: "str | None" = None

    def chosen(self, paths: "list[str]") -> bool:
        """Several models, a directory, or a zoo option: the zoo. One model file alone: check as ever."""
        return self.why(paths) is not None

    def why(self, paths: "list[str]") -> "str | None":
        """What makes the check of `paths` a zoo, as an error line names it ("2 models", "a
        directory", or the zoo option given); None for one model file and no zoo option."""
        if len(paths) > 1:
            return f"{len(paths)} models"
        if _probe(Path(paths[0]), stat.S_ISDIR)[0]:
            return "a directory"
        options = (("--jobs", self.jobs), ("--junit", self.junit), ("--executor", self.executor),
                   ("--ray-address", self.ray_address))
        return next((option for option, value in options if value is not None), None)


@dataclass(frozen=True)
class ZooRun:
    """One zoo command: its paths, the per-model check options as words for each subprocess, the
    backends (the JUnit report's rows), --json, and the per-input names to report as unused (the
    (option, name) pairs of --dim / --val-range / --zero-fraction; `random_feeds`: feeds are drawn).
    `found`: (the model files, the folders left out) when the caller ran discover on `paths`
    already (the command line does, for the files no report may replace); else run_zoo does."""
    paths: "list[str]"
    options: "list[str]"
    backends: "list[str]"
    json: "str | None" = None
    named: "tuple[tuple[str, str], ...]" = ()
    random_feeds: bool = True
    found: "tuple[list[str], list[str]] | None" = None


def discover(paths: "list[str]", skipped: "list[str] | None" = None) -> "list[str]":
    """Model files in argument order; a directory gives every *.onnx below it, sorted, except
    under hidden folders (.git, .venv) and Python environments (a folder holding pyvenv.cfg: the
    models of the packages installed there are not the user's), whose paths go into `skipped`. A
    file named twice (a path given twice, a link or hard link to one given) is checked once, the
    other names going into `skipped` as Duplicate."""
    models: "list[str]" = []
    given = [Path(text).resolve() for text in paths]
    for text in paths:
        path = Path(text)
        if stat.S_ISDIR(named_stat(path, f"model {text!r}").st_mode):
            left: "list[str]" = []
            found = sorted(_models_below(path, left))
            # a folder left out here that is given too (or holds a path given) is searched there
            # (one that cannot be read is left out wherever it is given)
            left = [f for f, real in ((f, Path(f).resolve()) for f in left)
                    if isinstance(f, LeftOut) or not any(g == real or real in g.parents for g in given)]
            if skipped is not None:
                skipped += left
            if not found and not any(path.resolve() in g.parents for g in given):     # none, nor a folder given below
                raise DmlLowerError(f"directory {text!r} holds no .onnx model (searched recursively" + (
                    f"; left out: {name_list([_described(f) for f in left], 4, 'paths')}, hidden folders, Python "
                    "environments and .onnx names that are no regular file: give one by its path to check it)"
                    if left else ")"))
            models += found
        else:                           # a FIFO or device given by name: its check refuses it in one line
            models.append(text)
    seen: "dict[object, str]" = {}
    unique = []
    for model in models:
        key = _identity(model)
        if key not in seen:
            seen[key] = model
            unique.append(model)
        elif skipped is not None and model != seen[key]:        # the same spelling twice needs no line
            skipped.append(Duplicate(model, seen[key]))
    return unique


def _identity(path: str) -> object:
    """What makes two paths one model file: its device and inode (a hard link, a symlink, another
    spelling), else its resolved path (a name that cannot be stat'ed: its check says why)."""
    try:
        info = os.stat(path)
        return (info.st_dev, info.st_ino)
    except OSError:
        return Path(path).resolve()


class Duplicate(str):
    """A path discover checks once because it names a model file given or found before (`of`)."""
    of: str

    def __new__(cls, path: str, of: str) -> "Duplicate":
        made = super().__new__(cls, path)
        made.of = of
        return made


def found_models(paths: "list[str]") -> "tuple[list[str], list[str]]":
    """discover's model files for `paths`, and the folders it left out."""
    skipped: "list[str]" = []
    return discover(paths, skipped), skipped


class LeftOut(str):
    """A path the zoo walk left out because it could not be read (a folder it may not list, an entry
    it may not stat: EACCES, EIO ...), with why: said among the left-out entries, never a crash."""
    reason: str

    def __new__(cls, path: str, reason: str) -> "LeftOut":
        made = super().__new__(cls, path)
        made.reason = reason
        return made


def _probe(path: Path, test: "Callable[[int], bool]" = stat.S_ISREG) -> "tuple[bool, OSError | None]":
    """(whether `path`, links followed, passes `test` of its mode, the error when it cannot be
    stat'ed for another reason than its absence): Path.is_file() raises on EACCES."""
    try:
        return test(os.stat(path).st_mode), None
    except OSError as exc:
        import errno
        absent = exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG)
        return False, None if absent else exc


def _unreadable(path: "str | os.PathLike", exc: OSError) -> LeftOut:
    from onnx_dml_lowering.runtime.output_target import reason
    return LeftOut(str(path), f"cannot be read: {reason(exc)}")


def _models_below(folder: Path, skipped: "list[str]") -> "list[str]":
    """The *.onnx regular files below `folder`, through linked folders too (each real folder once: a
    link loop ends there); what is left out goes to `skipped`: hidden folders, Python environments,
    *.onnx names that are no regular file (a FIFO, a device, a dangling link: said, not dropped),
    and whatever cannot be read (a folder it may not list or probe, a name it may not stat)."""
    found: "list[str]" = []
    seen = {os.path.realpath(folder)}
    walk = os.walk(folder, followlinks=True, onerror=lambda exc: skipped.append(_unreadable(exc.filename, exc)))
    for root, folders, files in walk:
        folders.sort()                  # the folders left out are named in a stable order
        for name in list(folders):
            below = Path(root, name)
            real = os.path.realpath(below)
            environment, error = _probe(below / "pyvenv.cfg")
            if name.startswith(".") or environment or error is not None:
                folders.remove(name)
                skipped.append(str(below) if error is None else _unreadable(below, error))
            elif real in seen:          # reached already, by another link or a loop
                folders.remove(name)
            else:
                seen.add(real)
        for name in sorted(files):
            if name.endswith(".onnx"):
                path = Path(root, name)
                regular, error = _probe(path)
                (found if regular else skipped).append(str(path) if error is None else _unreadable(path, error))
    return found


def _left_out(path: str) -> str:
    """What a path discover left out is, for the line that names it."""
    if isinstance(path, LeftOut):
        return path.reason
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "a dangling symbolic link" if os.path.islink(path) else "unreadable"
    if stat.S_ISDIR(mode):
        return "folder"
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(mode)), "not a regular file")


def _described(path: str) -> str:
    kind = _left_out(path)
    return display(path) if kind == "folder" else f"{display(path)} ({kind})"


def left_out_lines(skipped: "list[str]") -> "list[str]":
    """The zoo's lines for what discover left out: folders not searched, *.onnx names not checked,
    names of a file checked under another name."""
    kinds = {path: _left_out(path) for path in skipped if not isinstance(path, Duplicate)}
    twice = [f"{display(p)} (the same file as {display(p.of)})" for p in skipped if isinstance(p, Duplicate)]
    folders = [display(p) for p, kind in kinds.items() if kind == "folder"]
    unreadable = [_described(p) for p in kinds if isinstance(p, LeftOut)]
    files = [_described(p) for p, kind in kinds.items() if kind != "folder" and not isinstance(p, LeftOut)]
    lines = []
    if folders:
        lines.append(f"zoo: not searched: {name_list(folders, 4, 'folders')} (hidden folders and Python "
                     "environments; give a model there by its path to check it)")
    if unreadable:
        lines.append(f"zoo: not searched: {name_list(unreadable, 4, 'paths')}: this user cannot read them")
    if files:
        lines.append(f"zoo: not checked: {name_list(files, 4, 'names')}: named .onnx but not regular files")
    if twice:
        lines.append(f"zoo: checked once: {name_list(twice, 4, 'paths')}")
    return lines


def check_zoo(zoo: Zoo) -> str:
    """The zoo's own options checked (one line each, before any model runs); the executor."""
    if zoo.jobs is not None and zoo.jobs < 1:
        raise DmlLowerError(f"--jobs {zoo.jobs}: must be at least 1")
    executor = zoo.executor or "local"
    if zoo.ray_address and executor != "ray":
        raise DmlLowerError("--ray-address applies to --executor ray")
    if executor == "ray":
        from .ray_executor import import_ray
        import_ray()   # a missing extra is a usage error before any model runs
    return executor


def run_zoo(zoo: Zoo, run: ZooRun) -> int:
    """The zoo's checks, their summary and reports, and the exit code."""
    import time

    from ..output_files import write_file, write_json
    executor = check_zoo(zoo)
    models, skipped = run.found if run.found is not None else found_models(run.paths)
    options = list(run.options)
    if run.named:
        options.append("--names-where-present")  # a text model's --dim is no error for a detector
    start = time.perf_counter()
    results, stopped = _schedule(models, options, executor, zoo)
    seconds = time.perf_counter() - start
    print(format_summary(results))
    for line in left_out_lines(skipped):
        print(line)
    unused = unused_names(list(run.named), results) if run.random_feeds else []
    for option, name in unused:
        what = "an input dimension" if option == "--dim" else "an input"
        print(f"zoo: {option} {display(name)}: no model checked has {what} of that name", file=sys.stderr)
    if run.json:
        document = {"models": [r.to_dict() for r in results],
                    **({"interrupted": True, "models_requested": len(models)} if stopped else {})}
        write_json(run.json, "the JSON report", document)
    if zoo.junit:
        from .junit import write_junit
        junit = zoo.junit
        write_file(junit, "the JUnit report", lambda p: write_junit(p, results, run.backends, seconds))
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


def _schedule(models: "list[str]", options: "list[str]", executor: str, zoo: Zoo
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
                run_on_ray(models, options, zoo.ray_address, zoo.jobs, done)
            except KeyboardInterrupt as exc:      # its tasks cancelled and ended: report those finished
                # Ray's wait turns our Terminated into a plain KeyboardInterrupt: the signal says which
                from onnx_dml_lowering.runtime.interrupt import terminated
                stopped = Terminated() if terminated() else exc
                resume()
        else:
            pool = ThreadPoolExecutor(max_workers=zoo.jobs or 1)
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
                resume()        # the report of the models finished goes on: a signal stops it again
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    return [ModelResult.from_dict(records[i]) for i in sorted(records)], stopped


def _progress(total: int) -> Any:
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

