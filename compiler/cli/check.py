"""dml-lower check: every backend against the oracle, for one model or (zoo.py) many."""
from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Callable, Sequence

from onnx_dml_lowering.ir import DmlLowerError

from ..output_files import check_outputs, save_npz_file, write_json, write_text
from ..zoo import add_zoo_options
from .feeds import describe_feeds, drawn_sizes_hint, feed_sets, known_dims, named_options
from .groups import BackendArgs, FeedArgs, ModelArgs, OracleArgs, SessionArgs, ToleranceArgs

if TYPE_CHECKING:
    import numpy as np

    from onnx_dml_lowering.runtime.backend_names import BackendLike, BackendName

    from ..compiled import CompiledModel
    from .groups import Feeds

MODEL, FEEDS, BACKENDS = ModelArgs(many=True), FeedArgs(), BackendArgs("check")
ORACLE, SESSION, TOLERANCES = OracleArgs(), SessionArgs(), ToleranceArgs()


def add_check_parser(sub) -> None:
    """The check subcommand (one model, or a zoo)."""
    p = sub.add_parser("check", help="compare every backend with ONNX semantics (the oracle)")
    MODEL.add(p)
    FEEDS.add(p)
    BACKENDS.add(p)
    ORACLE.add(p)
    FEEDS.add_iterations(p)
    p.add_argument("--outputs", nargs="+", metavar="NAME",
                   help="also compare these intermediate values by name ('all': every typed value)")
    p.add_argument("--save-outputs", metavar="F.npz",
                   help="write the oracle's outputs (OUTPUT) and each backend's (BACKEND:OUTPUT); several feed "
                        "sets: set #i to F.i.npz beside F.npz (set #0)")
    p.add_argument("--load-outputs", metavar="F.npz",
                   help="compare outputs saved by --save-outputs (or run --save-outputs) from the same feeds with "
                        "the oracle, as backends saved:BACKEND, saved:oracle, saved:run-BACKEND")
    BACKENDS.add_provider_options(p)
    BACKENDS.add_fail_on_partial(p)
    SESSION.add(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print only the lines that are not MATCH (and UNAVAILABLE backends) and the verdict")
    TOLERANCES.add(p)
    p.add_argument("--json", metavar="F.json", help="write the report as JSON here")
    p.add_argument("--markdown", metavar="F.md", help="write the report as a Markdown table here")
    p.add_argument("--localize", action="store_true",
                   help="for a MISMATCH: check again with every value an output and name the node(s) where the "
                        "difference starts (outputs differ, inputs agree)")
    p.add_argument("--model-explorer", metavar="F.json",
                   help="also write Model Explorer node data: the lowering here, each backend's largest error "
                        "per node beside it as F.error-BACKEND.json (open with dml-lower view; extra [view])")
    p.add_argument("--save-inputs", metavar="F.npz",
                   help="write the feeds used to this .npz (replay with --inputs); several feed sets: set #i to "
                        "F.i.npz beside F.npz (set #0)")
    add_zoo_options(p)
    p.set_defaults(func=lambda args, parser=p: check_models(args, parser))


def check_models(args, parser) -> int:
    """One model file: cmd_check as ever. Several, a directory or a zoo option: the zoo (zoo.py)."""
    from ..zoo import is_zoo, run_zoo
    if is_zoo(args):
        if args.model_explorer or args.localize:
            option = "--model-explorer" if args.model_explorer else "--localize"
            raise DmlLowerError(f"{option} works on one model's graph: check one model file with it")
        SESSION.parse(args)             # bad session options: one line here, not once per model
        check_outputs(("--json", args.json), ("--junit", args.junit))
        # a malformed --val-range / --zero-fraction: one line before any model runs
        return run_zoo(args, parser, named_options(args), random_feeds=not (args.inputs or args.data_loader_script))
    args.model = args.model[0]
    return cmd_check(args)


def cmd_check(args) -> int:
    from ..compiled import compile_model

    from onnx_dml_lowering.runtime.check import CheckAbout, CheckRun, LoadedOutputs
    from onnx_dml_lowering.runtime.report import format_markdown, format_quiet, format_text, format_timing
    from onnx_dml_lowering.runtime.saved_outputs import wrote_line
    feed_options = FEEDS.parse(args)
    if args.model_explorer:
        from ..explorer import require_view
        require_view("--model-explorer")
    if args.localize:
        from ..localize import refuse_golden
        refuse_golden(ORACLE.parse(args))
    check_outputs(*((option, getattr(args, option[2:].replace("-", "_")))
                    for option in ("--json", "--markdown", "--save-outputs", "--save-inputs", "--model-explorer")))
    settings = SESSION.parse(args)
    model = MODEL.parse(args)
    compiled = compile_model(model.path, feature_level=model.feature_level, outputs=_outputs_arg(args))
    backends = BACKENDS.parse(args)
    tolerances = TOLERANCES.parse(args)
    sets = feed_sets(compiled, feed_options)     # a generator: the feed sets are drawn as the run takes them
    feeds = next(sets)
    described = describe_feeds(feed_options, feeds)     # now: a data loader may reuse (and change) its arrays
    about = CheckAbout(str(args.model), _seed_label(feed_options), backends.fail_on_partial,
                       known_dims(compiled, feed_options.dims, feed_options.names_where_present)
                       if feed_options.dims else {}, described)
    loaded = LoadedOutputs.load(args.load_outputs) if args.load_outputs else None
    run = CheckRun(compiled, feeds, backends.names, tolerances, backends.options(settings, loaded=loaded),
                   oracle=ORACLE.parse(args), more_feeds=sets, about=about)
    saved = {"inputs": 0, "outputs": 0}
    _check_sets(args, run, compiled, feed_options, saved)
    report = run.report()
    feeds = run.first
    print(format_quiet(report) if args.quiet else format_text(report))
    if not args.quiet:
        print(format_timing(report))
    localized = _localize(args, model, feeds, report, backends.options(settings, loaded=loaded), tolerances) \
        if args.localize else None
    for option, what in (("save_inputs", "inputs"), ("save_outputs", "outputs")):
        if getattr(args, option) and saved[what]:
            print(wrote_line(getattr(args, option), saved[what]))
    if args.json:
        data = report.to_dict()
        if localized is not None:
            data["localized"] = [f.to_dict() for f in localized[0]]
        write_json(args.json, "the JSON report", data)
    if args.markdown:
        write_text(args.markdown, "the Markdown report", format_markdown(report))
    if args.model_explorer:
        # after --localize, every value's error (the run with every value an output)
        _write_explorer(args, model.path, compiled, report, localized[1] if localized else None)
    return _exit_code(report, args.iterations)


def _exit_code(report, asked: int) -> int:
    """0 / 1 by the verdict; a run a later feed set stopped (2, or 1 with a failure before it) or
    a signal cut short (130 / 143) says so on stderr first."""
    if report.stopped:
        covered = "feed set #0" if report.iterations == 1 else f"feed sets #0-#{report.iterations - 1}"
        print(f"dml-lower: error: {report.stopped} (the report covers {covered})", file=sys.stderr)
        # a MISMATCH or ERROR in the sets checked is still the failure it is (exit 1)
        return 1 if not all(b.ok for b in report.backends) else 2
    if report.interrupted:
        from onnx_dml_lowering.runtime.interrupt import terminated
        how = ("terminated", "SIGTERM", 143) if terminated() else ("interrupted", "Ctrl-C", 130)
        print(f"dml-lower: {how[0]}: the report covers the {report.iterations} of {asked} feed sets "
              f"checked before {how[1]}", file=sys.stderr)
        return how[2]
    return 0 if report.ok else 1


def _check_sets(args, run, compiled: CompiledModel, feed_options: Feeds, saved: "dict[str, int]") -> None:
    """The run's feed sets, each saved as it is checked (--save-inputs / --save-outputs: one file a
    set, so memory stays flat); the set under way when the run fails or stops is saved too, as
    the one needed to reproduce it."""
    from onnx_dml_lowering.runtime.check import FeedsFailed
    from onnx_dml_lowering.runtime.saved_outputs import set_path
    checking = run.sets()
    try:
        for done in checking:
            try:
                _save_set(args, done, saved)
            except KeyboardInterrupt as exc:    # the run ends as a Ctrl-C inside the set ends it
                with contextlib.suppress(StopIteration):
                    checking.throw(exc)
    except DmlLowerError as exc:
        hint = drawn_sizes_hint(compiled, feed_options) if isinstance(exc, FeedsFailed) else ""
        if not args.save_inputs or run.under_way is None:
            if hint:
                raise DmlLowerError(f"{exc}{hint}") from None
            raise
        path = set_path(args.save_inputs, run.under_way.index)
        save_npz_file(path, run.under_way.feeds, "the inputs")
        raise DmlLowerError(f"{exc}{hint} (the inputs are saved in {path})") from None
    if run.report().stopped and args.save_inputs and run.under_way is not None:
        save_npz_file(set_path(args.save_inputs, run.under_way.index), run.under_way.feeds, "the inputs")
        saved["inputs"] = run.under_way.index + 1        # the set it stopped at


def _save_set(args, done, saved: "dict[str, int]") -> None:
    from onnx_dml_lowering.runtime.saved_outputs import set_path
    if args.save_inputs:
        save_npz_file(set_path(args.save_inputs, done.index), done.feeds, "the inputs")
        saved["inputs"] = done.index + 1
    if args.save_outputs:
        save_npz_file(set_path(args.save_outputs, done.index), _saved_outputs(done.expected, done.actuals, done.feeds),
                      "the outputs")
        saved["outputs"] = done.index + 1


def _seed_label(feeds: Feeds) -> "Callable[[int], str] | None":
    """Names random feed set #i by its seed (--iterations N draws seeds SEED .. SEED+N-1)."""
    return (lambda index: f"seed {feeds.seed + index}") if feeds.random else None


def _outputs_arg(args) -> "list[str] | str | None":
    if not getattr(args, "outputs", None):
        return None
    return "all" if args.outputs == ["all"] else list(args.outputs)


def _saved_outputs(expected: dict, actuals: "dict[BackendName, dict]", feeds) -> "dict[str, np.ndarray]":
    """The oracle's outputs as OUTPUT (a golden file for --oracle) and each backend's as
    BACKEND:OUTPUT (for --load-outputs), of one feed set, with that set's fingerprint."""
    import numpy as np

    from onnx_dml_lowering.runtime.saved_outputs import metadata, saved_file
    groups = [(lambda key: f"the model's output {key!r}", expected),
              (lambda key: f"the file's own {key!r} entry", metadata(feeds, "check"))]
    for backend, values in actuals.items():
        if not backend.is_saved:
            groups.append((lambda key: f"backend {key.partition(':')[0]}'s output {key.partition(':')[2]!r}",
                           {f"{backend}:{name}": np.asarray(value) for name, value in values.items()}))
    return saved_file(*groups)


def check_model(compiled: CompiledModel, feeds, backends: "Sequence[BackendLike]", atol: float, rtol: float,
                strict: "bool | None" = None):
    """Every backend against the oracle on the same feeds; returns (feeds, backend reports)."""
    from onnx_dml_lowering.runtime.check import BackendOptions, Tolerances, check
    feeds, report = check(compiled, feeds, backends, Tolerances(atol, rtol), BackendOptions(strict=strict))
    return feeds, report.backends


def _localize(args, model, feeds, report, options, tolerances) -> "tuple[list, tuple | None]":
    """check --localize: the backends with a MISMATCH checked again on feed set #0 with every value
    an output; the lines printed, (the findings, (that model, that report) or None)."""
    from onnx_dml_lowering.ir.display import display
    from onnx_dml_lowering.runtime.check import check

    from ..compiled import compile_model
    from ..localize import format_localized, localize
    failing = [b.backend for b in report.backends if not b.error and not b.ok]
    if not failing:
        print("localize: no MISMATCH to localize")
        return [], None
    compiled_all = compile_model(model.path, feature_level=model.feature_level, outputs="all")
    _, again = check(compiled_all, feeds, failing, tolerances, options, oracle=ORACLE.parse(args),
                     model_name=str(args.model))
    found = localize(again, compiled_all, failing)
    for line in format_localized(found):
        print(display(line))
    return found, (compiled_all, again)


def _write_explorer(args, path: str, compiled: CompiledModel, report, every_value: "tuple | None") -> None:
    """check --model-explorer: the lowering, and per backend its largest error on each node (from
    --localize's run with every value an output when it ran)."""
    from onnx_dml_lowering.ir.display import display

    from ..explorer import write_overlays
    from ..overlays import compiled_lowering, error_overlays
    errors = error_overlays(every_value[1], every_value[0], True) if every_value else \
        error_overlays(report, compiled, bool(_outputs_arg(args)))
    overlays = [compiled_lowering(compiled), *errors]
    for line in write_overlays(path, args.model_explorer, overlays):
        print(display(line))
