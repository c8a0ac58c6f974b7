"""dml-lower check: every backend against the oracle, for one model or (zoo.py) many."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable

from onnx_dml_lowering.ir import DmlLowerError

from ..output_files import check_outputs, save_npz_file, write_json, write_text
from ..zoo import add_zoo_options
from .feeds import describe_feeds, drawn_sizes_hint, feed_sets, known_dims, named_options
from .groups import BackendArgs, FeedArgs, ModelArgs, OracleArgs, SessionArgs, ToleranceArgs

if TYPE_CHECKING:
    import numpy as np

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

    from onnx_dml_lowering.runtime.check import FeedsFailed, LoadedOutputs, check
    from onnx_dml_lowering.runtime.report import format_markdown, format_quiet, format_text, format_timing
    from onnx_dml_lowering.runtime.saved_outputs import set_path, wrote_line
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
    sets = feed_sets(compiled, feed_options)
    feeds = next(sets)
    described = describe_feeds(feed_options, feeds)     # now: a data loader may reuse (and change) its arrays
    under_way: "list[Any]" = [0, feeds]      # the set being checked and its index, saved by --save-inputs if check fails on it

    def drawn():                # a generator: the feed sets are drawn as check consumes them
        for feed_set in sets:
            under_way[:] = [under_way[0] + 1, feed_set]
            yield feed_set
    more = drawn()
    saved = {"inputs": 0, "outputs": 0}

    def save_set(index: int, feed_set, expected: dict, actuals: dict) -> None:
        """Every set as it is checked, one file each (saved_outputs.set_path): memory stays flat."""
        if args.save_inputs:
            save_npz_file(set_path(args.save_inputs, index), feed_set, "the inputs")
            saved["inputs"] = index + 1
        if args.save_outputs:
            save_npz_file(set_path(args.save_outputs, index), _saved_outputs(expected, actuals, feed_set),
                          "the outputs")
            saved["outputs"] = index + 1
    loaded = LoadedOutputs.load(args.load_outputs) if args.load_outputs else None
    try:
        feeds, report = check(compiled, feeds, backends.names, tolerances,
                              backends.options(settings, loaded=loaded), oracle=ORACLE.parse(args),
                              more_feeds=more, model_name=str(args.model), feed_label=_seed_label(feed_options),
                              fail_partial=backends.fail_on_partial, on_set=save_set)
    except DmlLowerError as exc:
        hint = drawn_sizes_hint(compiled, feed_options) if isinstance(exc, FeedsFailed) else ""
        if not args.save_inputs:
            if hint:
                raise DmlLowerError(f"{exc}{hint}") from None
            raise
        # the feeds of a failed check (the set under way) are the ones needed to reproduce it
        path = set_path(args.save_inputs, under_way[0])
        save_npz_file(path, under_way[1], "the inputs")
        raise DmlLowerError(f"{exc}{hint} (the inputs are saved in {path})") from None
    if feed_options.dims:
        report.dims = known_dims(compiled, feed_options.dims, feed_options.names_where_present)
    report.feeds = {**described, "iterations": report.iterations} if "iterations" in described else described
    if report.stopped and args.save_inputs and under_way[0] >= saved["inputs"]:
        save_npz_file(set_path(args.save_inputs, under_way[0]), under_way[1], "the inputs")   # the set it stopped at
        saved["inputs"] = under_way[0] + 1
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
    if report.stopped:
        covered = "feed set #0" if report.iterations == 1 else f"feed sets #0-#{report.iterations - 1}"
        print(f"dml-lower: error: {report.stopped} (the report covers {covered})", file=sys.stderr)
        # a MISMATCH or ERROR in the sets checked is still the failure it is (exit 1)
        return 1 if not all(b.ok for b in report.backends) else 2
    if report.interrupted:
        from onnx_dml_lowering.runtime.interrupt import terminated
        how = ("terminated", "SIGTERM", 143) if terminated() else ("interrupted", "Ctrl-C", 130)
        print(f"dml-lower: {how[0]}: the report covers the {report.iterations} of {args.iterations} feed sets "
              f"checked before {how[1]}", file=sys.stderr)
        return how[2]
    return 0 if report.ok else 1


def _seed_label(feeds: Feeds) -> "Callable[[int], str] | None":
    """Names random feed set #i by its seed (--iterations N draws seeds SEED .. SEED+N-1)."""
    return (lambda index: f"seed {feeds.seed + index}") if feeds.random else None


def _outputs_arg(args) -> "list[str] | str | None":
    if not getattr(args, "outputs", None):
        return None
    return "all" if args.outputs == ["all"] else list(args.outputs)


def _saved_outputs(expected: dict, actuals: dict, feeds) -> "dict[str, np.ndarray]":
    """The oracle's outputs as OUTPUT (a golden file for --oracle) and each backend's as
    BACKEND:OUTPUT (for --load-outputs), of one feed set, with that set's fingerprint."""
    import numpy as np

    from onnx_dml_lowering.runtime.saved_outputs import PREFIX, metadata, saved_file
    groups = [(lambda key: f"the model's output {key!r}", expected),
              (lambda key: f"the file's own {key!r} entry", metadata(feeds, "check"))]
    for backend, values in actuals.items():
        if not backend.startswith(PREFIX):
            groups.append((lambda key: f"backend {key.partition(':')[0]}'s output {key.partition(':')[2]!r}",
                           {f"{backend}:{name}": np.asarray(value) for name, value in values.items()}))
    return saved_file(*groups)


def check_model(compiled: CompiledModel, feeds, backends: "list[str]", atol: float, rtol: float,
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
