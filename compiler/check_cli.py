"""dml-lower check: every backend against the oracle, for one model or (zoo.py) many."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Callable

from onnx_dml_lowering.ir import DmlLowerError

from .cli_feeds import draws_random_feeds, feed_sets, parse_dims
from .cli_options import (check_outputs, model_options, provider_flags, save_npz_file, session_flags,
                          session_settings, tolerance_options, write_json, write_text)
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
                        "operators on onnxruntime), ort-cpu / ort-dml / ort:<ProviderName> (original model "
                        "on that onnxruntime provider)")
    p.add_argument("--oracle", default="hybrid", metavar="ORACLE",
                   help="hybrid (ONNX semantics for NonZero / EyeLike / Trilu / idiom nodes: numpy ONNX definitions, "
                        "onnx.reference where they stop; onnxruntime CPU for the rest), reference (whole model on onnx.reference), "
                        "ort-cpu, or FILE.npz of golden outputs")
    p.add_argument("--iterations", type=int, default=1, metavar="N",
                   help="check N seeded random feed sets (seeds SEED .. SEED+N-1)")
    p.add_argument("--outputs", nargs="+", metavar="NAME",
                   help="also compare these intermediate values by name ('all': every typed value)")
    p.add_argument("--save-outputs", metavar="F.npz",
                   help="write the oracle's outputs (OUTPUT) and each backend's (BACKEND:OUTPUT)")
    p.add_argument("--load-outputs", metavar="F.npz",
                   help="compare outputs saved by --save-outputs (or run --save-outputs) from the same feeds with "
                        "the oracle, as backends saved:BACKEND, saved:oracle, saved:run-BACKEND")
    provider_flags(p)
    session_flags(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print only the lines that are not MATCH (and UNAVAILABLE backends) and the verdict")
    tolerance_options(p)
    p.add_argument("--json", metavar="F.json", help="write the report as JSON here")
    p.add_argument("--markdown", metavar="F.md", help="write the report as a Markdown table here")
    p.add_argument("--save-inputs", metavar="F.npz", help="write the feeds used to this .npz (replay with --inputs)")
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
    under_way = [feeds]         # the set being checked, saved by --save-inputs if check fails on it

    def drawn():                # a generator: the feed sets are drawn as check consumes them
        for feed_set in sets:
            under_way[0] = feed_set
            yield feed_set
    more = drawn()
    loaded = LoadedOutputs.load(args.load_outputs) if args.load_outputs else None
    try:
        feeds, report = check(compiled, feeds, backends, tolerances, strict=args.strict or None,
                              model_name=str(args.model), memory_limit=args.memory_limit, oracle=args.oracle,
                              more_feeds=more, loaded=loaded, provider_options=args.provider_option,
                              ep_libraries=args.ep_library, no_fallback=args.no_fallback,
                              session_settings=settings, feed_label=_seed_label(args))
    except DmlLowerError as exc:
        if not args.save_inputs:
            raise
        # the feeds of a failed check (the set under way) are the ones needed to reproduce it
        save_npz_file(args.save_inputs, under_way[0], "the inputs")
        raise DmlLowerError(f"{exc} (the inputs are saved in {args.save_inputs})") from None
    if args.dim and draws_random_feeds(args):
        report.dims = parse_dims(compiled, args)
    if args.save_inputs:
        save_npz_file(args.save_inputs, feeds, "the inputs")
    if args.save_outputs:
        save_npz_file(args.save_outputs, _saved_outputs(report, feeds), "the outputs")
    print(format_quiet(report) if args.quiet else format_text(report))
    if not args.quiet:
        print(format_timing(report))
    if args.json:
        write_json(args.json, "the JSON report", report.to_dict())
    if args.markdown:
        write_text(args.markdown, "the Markdown report", format_markdown(report))
    if report.stopped:
        sets = "feed set #0" if report.iterations == 1 else f"feed sets #0-#{report.iterations - 1}"
        print(f"dml-lower: error: {report.stopped} (the report covers {sets})", file=sys.stderr)
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


def _saved_outputs(report, feeds) -> "dict[str, np.ndarray]":
    """The oracle's outputs as OUTPUT (a golden file for --oracle) and each backend's as
    BACKEND:OUTPUT (for --load-outputs), for the first feed set, with that set's fingerprint."""
    from onnx_dml_lowering.runtime.saved_outputs import PREFIX, metadata, saved_file
    groups = [(lambda key: f"the model's output {key!r}", report.expected),
              (lambda key: f"the file's own {key!r} entry", metadata(feeds, "check"))]
    for backend in report.backends:
        if not backend.backend.startswith(PREFIX):
            groups.append((lambda key: f"backend {key.partition(':')[0]}'s output {key.partition(':')[2]!r}",
                           {f"{backend.backend}:{name}": value for name, value in backend.values.items()}))
    return saved_file(*groups)


def check_model(compiled: CompiledModel, feeds, backends: "list[str]", atol: float, rtol: float,
                strict: "bool | None" = None):
    """Every backend against the oracle on the same feeds; returns (feeds, backend reports)."""
    from onnx_dml_lowering.runtime.check import Tolerances, check
    feeds, report = check(compiled, feeds, backends, Tolerances(atol, rtol), strict)
    return feeds, report.backends
