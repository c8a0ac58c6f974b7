"""dml-lower check: every backend against the oracle, for one model or (zoo.py) many."""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Mapping, Sequence, cast

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.runtime.backend_names import Lowering

from ..output_files import check_outputs, save_npz_file, write_json, write_text
from ..zoo import ZooRun
from .command import ArgGroup, Command, Parsed, Word, flag, option_value
from .feeds import describe_feeds, drawn_sizes_hint, feed_sets, known_dims, named_options
from .groups import BackendArgs, FeedArgs, ModelArgs, OracleArgs, SessionArgs, ToleranceArgs
from .output_groups import ExplorerArgs, JsonArgs, QuietArgs, SaveArgs
from .reads import files_read
from .zoo_options import ZooArgs, forwarded_options, one_model_only, refuse_one_model_files

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator

    import numpy as np

    from onnx_dml_lowering.runtime.backend_names import BackendLike, BackendName
    from onnx_dml_lowering.runtime.backends import BackendOptions
    from onnx_dml_lowering.runtime.check import CheckedSet, CheckReport, CheckRun
    from onnx_dml_lowering.runtime.compare import BackendReport

    from ..compiled import CompiledModel
    from .groups import Feeds, Model


@dataclass(frozen=True)
class Compared:
    """--outputs (intermediate values compared too; ("all",): every tensor value) and --load-outputs."""
    outputs: "tuple[str, ...] | None" = None
    load: "str | None" = None

    @property
    def requested(self) -> "list[str] | str | None":
        """compile_model's `outputs`: None, "all" or the names."""
        if not self.outputs:
            return None
        return "all" if self.outputs == ("all",) else list(self.outputs)


class CompareArgs(ArgGroup[Compared]):
    """check's --outputs and --load-outputs, each where check's --help lists it."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        self.add_outputs(parser)
        self.add_load(parser)

    def add_outputs(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--outputs", nargs="+", metavar="NAME",
                  help="also compare these intermediate values by name ('all': every tensor value)")

    def add_load(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--load-outputs", metavar="F.npz",
                  help="compare outputs saved by --save-outputs (or run --save-outputs) from the same feeds with "
                       "the oracle, as backends saved:BACKEND, saved:oracle, saved:run-BACKEND")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Compared:
        return Compared(outputs=tuple(args.outputs) if args.outputs else None, load=args.load_outputs)

    def tokens(self, compared: Compared) -> "list[Word]":
        return ([Word("--outputs", compared.outputs)] if compared.outputs else []) + \
            option_value("--load-outputs", compared.load)


@dataclass(frozen=True)
class Findings:
    """--markdown (the report as a Markdown table) and --localize (where a MISMATCH starts)."""
    markdown: "str | None" = None
    localize: bool = False


class FindingsArgs(ArgGroup[Findings]):
    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--markdown", metavar="F.md", help="write the report as a Markdown table here")
        self._add(parser, "--localize", action="store_true",
                  help="for a MISMATCH: check again with every value an output and name the node(s) where the "
                       "difference starts (outputs differ, inputs agree)")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Findings:
        return Findings(markdown=args.markdown, localize=args.localize)

    def tokens(self, findings: Findings) -> "list[Word]":
        return option_value("--markdown", findings.markdown) + flag("--localize", findings.localize)


# The groups of check a zoo hands each model's check (the rest are the zoo's own, or write one
# model's file and are refused with several models).
FORWARDED: "tuple[type[ArgGroup], ...]" = (ModelArgs, FeedArgs, BackendArgs, OracleArgs, CompareArgs, SessionArgs,
                                           ToleranceArgs)


class Check(Command):
    name, help = "check", "compare every backend with ONNX semantics (the oracle)"

    def __init__(self) -> None:
        self.feeds, self.backends, self.compare, self.save = FeedArgs(), BackendArgs("check"), CompareArgs(), \
            SaveArgs("check")
        super().__init__(ModelArgs(many=True), self.feeds, self.backends, OracleArgs(), self.compare, self.save,
                         SessionArgs(), QuietArgs("check"), ToleranceArgs(), JsonArgs("check"), FindingsArgs(),
                         ExplorerArgs("check"), ZooArgs())

    def layout(self) -> "list[Callable[[argparse.ArgumentParser], None]]":
        model, _, _, oracle, _, _, session, quiet, tolerances, json, findings, explorer, zoo = self.groups
        return [model.add, self.feeds.add, self.backends.add, oracle.add, self.feeds.add_iterations,
                self.compare.add_outputs, self.save.add_outputs, self.compare.add_load,
                self.backends.add_provider_options, self.backends.add_fail_on_partial, session.add, quiet.add,
                tolerances.add, json.add, findings.add, explorer.add, self.save.add_inputs, zoo.add]

    def run(self, parsed: Parsed) -> int:
        """One model file: cmd_check as ever. Several, a directory or a zoo option: the zoo."""
        if parsed[ZooArgs].chosen(list(parsed[ModelArgs].paths)):
            return check_zoo(parsed)
        return cmd_check(parsed)


def check_zoo(parsed: Parsed) -> int:
    from ..zoo import run_zoo
    from ..zoo.runner import check_zoo as check_zoo_options
    findings, explorer = parsed[FindingsArgs], parsed[ExplorerArgs]
    zoo, json_out = parsed[ZooArgs], parsed[JsonArgs]
    why = zoo.why(list(parsed[ModelArgs].paths)) or "a zoo option"
    if explorer or findings.localize:
        raise one_model_only("--model-explorer" if explorer else "--localize", "works on one model's graph", why)
    parsed[SessionArgs]             # bad session options: one line here, not once per model
    from ..zoo.runner import found_models
    # the models a folder holds are read too: a report over one would destroy it (found once, here)
    found = found_models(list(parsed[ModelArgs].paths))
    check_outputs(("--json", json_out), ("--junit", zoo.junit),
                  reads=files_read(parsed, *[("model file", model) for model in found[0]]))
    # a malformed --val-range / --zero-fraction: one line before any model runs
    named = tuple(named_options(parsed.args))
    check_zoo_options(zoo)
    saved = parsed[SaveArgs]
    refuse_one_model_files([("--markdown", findings.markdown), ("--save-inputs", saved.inputs),
                            ("--save-outputs", saved.outputs)], why)
    run = ZooRun(paths=list(parsed[ModelArgs].paths), options=forwarded_options(parsed, FORWARDED),
                 backends=[n.text for n in parsed[BackendArgs].names], json=json_out, named=named,
                 random_feeds=parsed[FeedArgs].random, found=found)
    return run_zoo(zoo, run)


class _SetSaver:
    """check --save-inputs / --save-outputs: every feed set as it is checked, one file each
    (saved_outputs.set_path), so memory stays flat; the set under way when the run fails or stops
    is saved too, as the one needed to reproduce it."""

    def __init__(self, parsed: Parsed) -> None:
        self.paths = parsed[SaveArgs]
        self.saved = {"inputs": 0, "outputs": 0}

    def save_set(self, done: CheckedSet) -> None:
        from onnx_dml_lowering.runtime.saved_outputs import set_path
        if self.paths.inputs:
            save_npz_file(set_path(self.paths.inputs, done.index), done.feeds, "the inputs")
            self.saved["inputs"] = done.index + 1
        if self.paths.outputs:
            save_npz_file(set_path(self.paths.outputs, done.index),
                          _saved_outputs(done.expected, done.actuals, done.feeds, done.not_compared), "the outputs")
            self.saved["outputs"] = done.index + 1

    def announce(self) -> None:
        """The `wrote` lines of the sets saved so far: said at the end of the report, and before the
        error line of a check that ends in one (the files are there either way)."""
        from onnx_dml_lowering.runtime.saved_outputs import wrote_line
        for path, count in ((self.paths.inputs, self.saved["inputs"]), (self.paths.outputs, self.saved["outputs"])):
            if path and count:
                print(wrote_line(path, count))

    def save_under_way(self, run: CheckRun) -> str:
        """The set under way saved (--save-inputs); its path."""
        from onnx_dml_lowering.runtime.saved_outputs import set_path
        assert self.paths.inputs is not None and run.under_way is not None
        path = set_path(self.paths.inputs, run.under_way.index)
        if self.saved["inputs"] > run.under_way.index:      # saved with its set, before what failed
            return path
        save_npz_file(path, cast("Mapping[str, np.ndarray]", run.under_way.feeds), "the inputs")
        return path


@dataclass
class _Checked:
    """One model's check: what --localize, the files and the exit code read after the report."""
    model: Model
    compiled: CompiledModel
    feeds: "dict[str, np.ndarray]"            # feed set #0
    report: CheckReport
    options: BackendOptions
    saved: "dict[str, int]"                   # how many sets --save-inputs / --save-outputs wrote


def cmd_check(parsed: Parsed) -> int:
    _refuse_early(parsed)
    _start_host(parsed)
    from onnx_dml_lowering.runtime.report import format_quiet, format_text, format_timing
    done = _run_check(parsed, parsed[FeedArgs])
    quiet = parsed[QuietArgs]
    print(format_quiet(done.report) if quiet else format_text(done.report))
    if not quiet:
        print(format_timing(done.report))
    return _finish(parsed, done)


def _refuse_early(parsed: Parsed) -> None:
    """What check refuses before any work: --model-explorer without its extra, --localize with a
    golden oracle, an output file it cannot write."""
    explorer, findings, saved = parsed[ExplorerArgs], parsed[FindingsArgs], parsed[SaveArgs]
    if explorer:
        from ..explorer import require_view
        require_view("--model-explorer")
    if findings.localize:
        from ..localize import refuse_golden
        refuse_golden(parsed[OracleArgs])
    feeds = parsed[FeedArgs]
    check_outputs(("--json", parsed[JsonArgs]), ("--markdown", findings.markdown),
                  *saved.options(None if feeds.script else 1 if feeds.inputs else feeds.iterations),
                  ("--model-explorer", explorer),
                  reads=files_read(parsed, ("saved outputs file", parsed[CompareArgs].load)))


def _start_host(parsed: Parsed) -> None:
    """With the `dml` backend, the DirectML host's process starts now, before check imports its
    runtime (numpy, onnx, the report: 0.1-0.2 s) and loads and compiles the model, so its start-up
    (0.65-1 s of Wine and devices) runs beside all of that; its hello is read at the first operator."""
    if any(name.lowering is Lowering.DIRECTML for name in parsed[BackendArgs].names):
        from onnx_dml_lowering.runtime.directml.dml_host import start_early
        start_early()


def _run_check(parsed: Parsed, feed_options: Feeds) -> _Checked:
    """The check over every feed set (a CheckRun), each saved as it is checked."""
    from onnx_dml_lowering.runtime.check import CheckAbout, CheckRun, LoadedOutputs

    from ..compiled import compile_model
    model, backends = parsed[ModelArgs], parsed[BackendArgs]
    compiled = compile_model(model.path, feature_level=model.feature_level, outputs=parsed[CompareArgs].requested)
    sets = feed_sets(compiled, feed_options)     # a generator: the feed sets are drawn as the run takes them
    feeds = next(sets)
    # now: a data loader may reuse (and change) its arrays
    described = describe_feeds(feed_options, feeds, declared=compiled.inputs + compiled.optional_inputs)
    about = CheckAbout(str(model.path), _seed_label(feed_options), backends.fail_on_partial,
                       known_dims(compiled, feed_options.dims, feed_options.names_where_present)
                       if feed_options.dims else {}, described)
    load = parsed[CompareArgs].load
    options = backends.options(parsed[SessionArgs], loaded=LoadedOutputs.load(load) if load else None)
    # one set said as such: the provider backends may run it before the region sessions exist
    run = CheckRun(compiled, feeds, backends.names, parsed[ToleranceArgs], options, oracle=parsed[OracleArgs],
                   more_feeds=() if feed_options.one_set else sets, about=about)
    saver = _SetSaver(parsed)
    unsaved = _check_sets(run, saver, (compiled, feed_options), sets)
    # a set whose file could not be written ends the run as a set that cannot be drawn does
    report = replace(run.report(), stopped=unsaved) if unsaved else run.report()
    return _Checked(model, compiled, run.first, report, options, saver.saved)


def _check_sets(run: CheckRun, saver: _SetSaver, about: "tuple[CompiledModel, Feeds]",
                sets: "Iterator[dict[str, np.ndarray]]") -> str:
    """The run's feed sets, each saved as it is checked; the set under way when the run fails or
    stops is saved too, as the one needed to reproduce it. A set whose --save-inputs /
    --save-outputs file cannot be written ends the sets (`sets` closed: a data loader's count is
    not known up front, so its names are not all checked before the run): returns that set's
    line for the report's `stopped` ('' when every set was saved)."""
    from onnx_dml_lowering.runtime.check import FeedsFailed
    checking, unsaved = run.sets(), ""
    try:
        for done in checking:
            try:
                saver.save_set(done)
            except KeyboardInterrupt as exc:    # the run ends as a Ctrl-C inside the set ends it
                with contextlib.suppress(StopIteration):
                    checking.throw(exc)
            except DmlLowerError as exc:        # the report covers the sets checked, this one included
                if about[1].one_set:            # one set: its one line, as any refusal of the command
                    raise
                unsaved = unsaved or f"feed set #{done.index}: {exc}"
                getattr(sets, "close", lambda: None)()
    except DmlLowerError as exc:
        saver.announce()                        # the files of the sets before it are written
        compiled, feed_options = about
        hint = drawn_sizes_hint(compiled, feed_options) if isinstance(exc, FeedsFailed) else ""
        if not saver.paths.inputs or run.under_way is None:
            if hint:
                raise DmlLowerError(f"{exc}{hint}") from None
            raise
        raise DmlLowerError(f"{exc}{hint} (the inputs are saved in {display(saver.save_under_way(run))})") from None
    if run.report().stopped and saver.paths.inputs and run.under_way is not None:
        saver.save_under_way(run)                           # the set it stopped at
        saver.saved["inputs"] = run.under_way.index + 1
    return unsaved


def _finish(parsed: Parsed, done: _Checked) -> int:
    """After the report is printed: --localize, the files written, the exit code."""
    from onnx_dml_lowering.runtime.report import format_markdown
    from onnx_dml_lowering.runtime.saved_outputs import wrote_line
    report = done.report
    findings, saved, json_out, explorer = parsed[FindingsArgs], parsed[SaveArgs], parsed[JsonArgs], parsed[ExplorerArgs]
    localized = _localize(parsed, done) if findings.localize else None
    for path, count in ((saved.inputs, done.saved["inputs"]), (saved.outputs, done.saved["outputs"])):
        if path and count:
            print(wrote_line(path, count))
    if json_out:
        data = report.to_dict()
        if localized is not None:
            data["localized"] = [f.to_dict() for f in localized[0]]
        write_json(json_out, "the JSON report", data)
    if findings.markdown:
        write_text(findings.markdown, "the Markdown report", format_markdown(report))
    if explorer:
        # after --localize, every value's error (the run with every value an output)
        _write_explorer(parsed, done, localized[1] if localized else None)
    feeds = parsed[FeedArgs]        # the sets asked for: unknown from a data loader, one from --inputs
    return _exit_code(report, None if feeds.script else 1 if feeds.inputs else feeds.iterations)


def _exit_code(report: CheckReport, requested: "int | None") -> int:
    if report.stopped:
        covered = "feed set #0" if report.iterations == 1 else f"feed sets #0-#{report.iterations - 1}"
        print(f"dml-lower: error: {report.stopped} (the report covers {covered})", file=sys.stderr)
        # a MISMATCH or ERROR in the sets checked is still the failure it is (exit 1)
        return 1 if not all(b.ok for b in report.backends) else 2
    if report.interrupted:
        from onnx_dml_lowering.runtime.interrupt import terminated
        how = ("terminated", "SIGTERM", 143) if terminated() else ("interrupted", "Ctrl-C", 130)
        asked = f" of {requested}" if requested is not None else ""     # a data loader's count is unknown
        sets = "feed set" if report.iterations == 1 and requested is None else "feed sets"
        print(f"dml-lower: {how[0]}: the report covers the {report.iterations}{asked} {sets} checked before "
              f"{how[1]}", file=sys.stderr)
        return how[2]
    return 0 if report.ok else 1


def _seed_label(feeds: Feeds) -> "Callable[[int], str] | None":
    """Names random feed set #i by its seed (--iterations N draws seeds SEED .. SEED+N-1)."""
    return (lambda index: f"seed {feeds.seed + index}") if feeds.random else None


def _saved_outputs(expected: dict, actuals: "dict[BackendName, dict]", feeds: "Mapping[str, np.ndarray]",
                   not_compared: "Mapping[BackendName, Mapping[str, str]]") -> "dict[str, np.ndarray]":
    """The oracle's outputs as OUTPUT (a golden file for --oracle) and each backend's as
    BACKEND:OUTPUT (for --load-outputs), of one feed set, with that set's fingerprint and the
    record of what each backend did not compute itself and why."""
    import numpy as np

    from onnx_dml_lowering.runtime.saved_outputs import metadata, saved_file
    left_out = {b.text: why for b, why in not_compared.items() if b in actuals and not b.is_saved}
    groups = [(lambda key: f"the model's output {key!r}", expected),
              (lambda key: f"the file's own {key!r} entry", metadata(feeds, "check", expected, left_out))]
    for backend, values in actuals.items():
        if not backend.is_saved:
            groups.append((lambda key: f"backend {key.partition(':')[0]}'s output {key.partition(':')[2]!r}",
                           {f"{backend}:{name}": np.asarray(value) for name, value in values.items()}))
    return saved_file(*groups)


def check_model(compiled: CompiledModel, feeds: "Mapping[str, np.ndarray]", backends: "Sequence[BackendLike]",
                atol: float, rtol: float, strict: "bool | None" = None
                ) -> "tuple[dict[str, np.ndarray], list[BackendReport]]":
    """Every backend against the oracle on the same feeds; returns (feeds, backend reports)."""
    from onnx_dml_lowering.runtime.check import BackendOptions, Tolerances, check
    feeds, report = check(compiled, feeds, backends, Tolerances(atol, rtol), BackendOptions(strict=strict))
    return feeds, report.backends


def _localize(parsed: Parsed, done: _Checked) -> "tuple[list, tuple | None]":
    """check --localize: the backends with a MISMATCH checked again on feed set #0 with every value
    an output; the lines printed, (the findings, (that model, that report) or None)."""
    from ..localize import Localized, every_value_check, format_localized, localize
    model = done.model
    failing = [b.backend for b in done.report.backends if not b.error and not b.ok]
    if not failing:
        print("localize: no MISMATCH to localize")
        return [], None
    try:
        compiled_all, again = every_value_check(str(model.path), model.feature_level, done.feeds, failing,
                                                parsed[ToleranceArgs], done.options, parsed[OracleArgs],
                                                done.compiled.output_names)
    except DmlLowerError as exc:
        # the report stands and keeps its exit code (1: the MISMATCH); the localisation says why it stopped
        print(display(f"localize: the check with every value an output could not be made, so nothing is "
                      f"localized: {exc}"))
        return [Localized(b.text, False, error=str(exc)) for b in failing], None
    found = localize(again, compiled_all, failing)
    for line in format_localized(found):
        print(display(line))
    return found, (compiled_all, again)


def _write_explorer(parsed: Parsed, done: _Checked, every_value: "tuple | None") -> None:
    """check --model-explorer: the lowering, and per backend its largest error on each node (from
    --localize's run with every value an output when it ran)."""
    from ..explorer import write_overlays
    from ..overlays import compiled_lowering, error_overlays
    errors = error_overlays(every_value[1], every_value[0], True) if every_value else \
        error_overlays(done.report, done.compiled, bool(parsed[CompareArgs].requested))
    overlays = [compiled_lowering(done.compiled), *errors]
    out = parsed[ExplorerArgs]
    assert out is not None                  # called for --model-explorer
    for line in write_overlays(done.model.path, out, overlays):
        print(display(line))
