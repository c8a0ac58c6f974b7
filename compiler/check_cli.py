"""dml-lower check: every backend against the oracle, for one model or (zoo.py) many."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable

from onnx_dml_lowering.ir import DmlLowerError

from .cli_feeds import describe_feeds, draws_random_feeds, feed_sets, parse_dims
from .cli_options import (backend_options, check_outputs, model_options, oracle_option, partial_flag,
                          provider_flags, save_npz_file, session_flags, session_settings, tolerance_options,
                          write_json, write_text)
from .zoo import add_zoo_options

if TYPE_CHECKING:
    import numpy as np

    from .compiled import CompiledModel

def add_check_parser(sub) -> None:
    """The check subcommand (one model, or a zoo)."""
    p = sub.add_parser("check", help="compare every backend with ONNX semantics (the oracle)")
    model_options(p, models=True)
    p.add_argument("--backends", default="cpu", metavar="B[,B...]",
                   help="comma-separated: cpu (lowered graph, emulator), ort (lowered graph, "
                        "operators on onnxruntime), ort-cpu / ort-dml / ort:<ProviderName> (the model as shipped "
                        "on that onnxruntime provider)")
    oracle_option(p)
    p.add_argument("--iterations", type=int, default=1, metavar="N",
                   help="check N seeded random feed sets (seeds SEED .. SEED+N-1)")
    p.add_argument("--outputs", nargs="+", metavar="NAME",
                   help="also compare these intermediate values by name ('all': every typed value)")
    p.add_argument("--save-outputs", metavar="F.npz",
                   help="write the oracle's outputs (OUTPUT) and each backend's (BACKEND:OUTPUT); several feed "
                        "sets: set #i to F.i.npz beside F.npz (set #0)")
    p.add_argument("--load-outputs", metavar="F.npz",
                   help="compare outputs saved by --save-outputs (or run --save-outputs) from the same feeds with "
                        "the oracle, as backends saved:BACKEND, saved:oracle, saved:run-BACKEND")
    provider_flags(p)
    partial_flag(p)
    session_flags(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print only the lines that are not MATCH (and UNAVAILABLE backends) and the verdict")
    tolerance_options(p)
    p.add_argument("--json", metavar="F.json", help="write the report as JSON here")
    p.add_argument("--markdown", metavar="F.md", help="write the report as a Markdown table here")
    p.add_argument("--save-inputs", metavar="F.npz",
                   help="write the feeds used to this .npz (replay with --inputs); several feed sets: set #i to "
                        "F.i.npz beside F.npz (set #0)")
    add_zoo_options(p)
    p.set_defaults(func=lambda args, parser=p: check_models(args, parser))


def check_models(args, parser) -> int:
    """One model file: cmd_check as ever. Several, a directory or a zoo option: the zoo (zoo.py)."""
    from .zoo import is_zoo, run_zoo
    if is_zoo(args):
        session_settings(args)          # bad session options: one line here, not once per model
        check_outputs(("--json", args.json), ("--junit", args.junit))
        return run_zoo(args, parser)
    args.model = args.model[0]
    return cmd_check(args)


def cmd_check(args) -> int:
    from .compiled import compile_model

    from onnx_dml_lowering.runtime.check import LoadedOutputs, Tolerances, check
    from onnx_dml_lowering.runtime.report import format_markdown, format_quiet, format_text, format_timing
    from onnx_dml_lowering.runtime.saved_outputs import set_path, wrote_line
    if args.iterations < 1:
        raise DmlLowerError(f"--iterations {args.iterations}: must be at least 1")
    check_outputs(*((option, getattr(args, option[2:].replace("-", "_")))
                    for option in ("--json", "--markdown", "--save-outputs", "--save-inputs")))
    settings = session_settings(args)
    compiled = compile_model(args.model, feature_level=args.feature_level, outputs=_outputs_arg(args))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    tolerances = Tolerances.parse(args.atol, args.rtol)
    sets = feed_sets(compiled, args)
    feeds = next(sets)
    described = describe_feeds(args, feeds)     # now: a data loader may reuse (and change) its arrays
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
        feeds, report = check(compiled, feeds, backends, tolerances,
                              backend_options(args, backends, settings, loaded=loaded), oracle=args.oracle,
                              more_feeds=more, model_name=str(args.model), feed_label=_seed_label(args),
                              fail_partial=args.fail_on_partial, on_set=save_set)
    except DmlLowerError as exc:
        if not args.save_inputs:
            raise
        # the feeds of a failed check (the set under way) are the ones needed to reproduce it
        path = set_path(args.save_inputs, under_way[0])
        save_npz_file(path, under_way[1], "the inputs")
        raise DmlLowerError(f"{exc} (the inputs are saved in {path})") from None
    if args.dim and draws_random_feeds(args):
        report.dims = parse_dims(compiled, args)
    report.feeds = {**described, "iterations": report.iterations} if "iterations" in described else described
    if report.stopped and args.save_inputs and under_way[0] >= saved["inputs"]:
        save_npz_file(set_path(args.save_inputs, under_way[0]), under_way[1], "the inputs")   # the set it stopped at
        saved["inputs"] = under_way[0] + 1
    print(format_quiet(report) if args.quiet else format_text(report))
    if not args.quiet:
        print(format_timing(report))
    for option, what in (("save_inputs", "inputs"), ("save_outputs", "outputs")):
        if getattr(args, option) and saved[what]:
            print(wrote_line(getattr(args, option), saved[what]))
    if args.json:
        write_json(args.json, "the JSON report", report.to_dict())
    if args.markdown:
        write_text(args.markdown, "the Markdown report", format_markdown(report))
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


def _seed_label(args) -> "Callable[[int], str] | None":
    """Names random feed set #i by its seed (--iterations N draws seeds SEED .. SEED+N-1)."""
    return (lambda index: f"seed {args.seed + index}") if draws_random_feeds(args) else None


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
