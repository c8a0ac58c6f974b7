"""dml-lower: compile, run, check and demo (see DESIGN.md for the contract)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import zipfile
from pathlib import Path

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError

from .compiled import CompiledModel, compile_model
from .optimize_cli import add_optimize_parser
from .reduce_cli import add_reduce_parser
from onnx_dml_lowering.ir import format_graph


def _load_npz(path: str) -> "dict[str, np.ndarray]":
    file = Path(path)
    if file.is_dir():
        raise DmlLowerError(f"inputs file {path!r} is a directory, not an .npz archive")
    if not file.is_file():
        raise DmlLowerError(f"inputs file {path!r} does not exist")
    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError):
        raise DmlLowerError(f"inputs file {path!r} is not an .npz archive of arrays keyed by input name") from None
    if not hasattr(data, "files"):
        raise DmlLowerError(f"inputs file {path!r} is a single .npy array, not an .npz archive keyed by input name")
    try:
        with data:
            return {name: data[name] for name in data.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError):
        raise DmlLowerError(f"inputs file {path!r} holds an entry that is not a plain array") from None


def _write(path: str, what: str, write) -> None:
    try:
        write(path)
    except OSError as exc:
        raise DmlLowerError(f"cannot write {what} to {path!r}: {exc.strerror or exc}") from None


def _feeds(compiled: CompiledModel, args) -> "dict[str, np.ndarray]":
    from onnx_dml_lowering.runtime.feeds import random_feeds
    if args.inputs:
        return _load_npz(args.inputs)
    if args.seed < 0:
        raise DmlLowerError(f"--seed {args.seed}: the seed must be a non-negative integer")
    return random_feeds(compiled.inputs, seed=args.seed, dims=_dims(compiled, args), **_value_control(args))


def _dims(compiled: CompiledModel, args) -> "dict[str, int]":
    dims = {}
    for text in args.dim or []:
        name, _, value = text.partition("=")
        if not name or not value.isdigit():
            raise DmlLowerError(f"--dim {text!r}: expected NAME=SIZE with a non-negative integer size")
        dims[name] = int(value)
    known = {d.dim_param for vi in compiled.inputs for d in vi.type.tensor_type.shape.dim if d.dim_param}
    unknown = sorted(set(dims) - known)
    if unknown:
        raise DmlLowerError(f"--dim {unknown[0]}: no input dimension has that name "
                            f"(symbolic input dimensions: {', '.join(sorted(known)) or 'none'})")
    return dims


def _value_control(args) -> dict:
    """--zero-fraction / --val-range, for random feeds."""
    value_range = None
    if getattr(args, "val_range", None):
        lo, sep, hi = args.val_range.partition(",")
        try:
            value_range = (float(lo), float(hi))
        except ValueError:
            raise DmlLowerError(f"--val-range {args.val_range!r}: expected LO,HI (two numbers)") from None
    return {"zero_fraction": getattr(args, "zero_fraction", None), "value_range": value_range}


def format_placement(compiled: CompiledModel) -> str:
    from onnx_dml_lowering.runtime.report import format_placement as fmt
    return fmt(compiled.placement, compiled.feature_level)


def cmd_compile(args) -> int:
    compiled = compile_model(args.model, feature_level=args.feature_level)
    print(format_graph(compiled.graph))
    print()
    print(format_placement(compiled))
    if args.json:
        _write(args.json, "the compile JSON", lambda p: Path(p).write_text(compiled.to_json()))
        print(f"\nwrote {args.json}")
    return 0


def _summary(name: str, value: np.ndarray) -> str:
    flat = value.reshape(-1)
    preview = np.array2string(flat[:8], separator=", ", threshold=8)
    more = " ..." if flat.size > 8 else ""
    return f"  {name}: {value.dtype} {list(value.shape)} {preview}{more}"


def cmd_run(args) -> int:
    compiled = compile_model(args.model, feature_level=args.feature_level)
    feeds = _feeds(compiled, args)
    providers = [p.strip() for p in args.providers.split(",")] if args.providers else None
    if providers and args.backend != "ort":
        raise DmlLowerError("--providers applies to --backend ort only")
    outputs = compiled.run(feeds, backend=args.backend, providers=providers, strict=args.strict or None,
                           memory_limit=args.memory_limit)
    print(f"ran {args.model} on backend {args.backend} (feature level {compiled.feature_level})")
    unvalidated = compiled.session(args.backend, providers).unvalidated_outputs
    for name, value in outputs.items():
        print(_summary(name, value) + (f"  [not run on the provider: {unvalidated[name]}]"
                                       if name in unvalidated else ""))
    if args.save_outputs:
        _write(args.save_outputs, "the outputs", lambda p: np.savez(p, **outputs))
        print(f"wrote {args.save_outputs}")
    return 0


def check_model(compiled: CompiledModel, feeds, backends: "list[str]", atol: float, rtol: float,
                strict: "bool | None" = None):
    """Every backend against the oracle on the same feeds; returns (feeds, backend reports)."""
    from onnx_dml_lowering.runtime.check import Tolerances, check
    feeds, report = check(compiled, feeds, backends, Tolerances(atol, rtol), strict)
    return feeds, report.backends


def _outputs_arg(args) -> "list[str] | str | None":
    if not getattr(args, "outputs", None):
        return None
    return "all" if args.outputs == ["all"] else list(args.outputs)


def cmd_check(args) -> int:
    from onnx_dml_lowering.runtime.check import LoadedOutputs, Tolerances, check
    from onnx_dml_lowering.runtime.feeds import random_feeds
    from onnx_dml_lowering.runtime.report import format_markdown, format_text, format_timing
    if args.iterations < 1:
        raise DmlLowerError(f"--iterations {args.iterations}: must be at least 1")
    compiled = compile_model(args.model, feature_level=args.feature_level, outputs=_outputs_arg(args))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    tolerances = Tolerances.parse(args.atol, args.rtol)
    feeds = _feeds(compiled, args)
    more = []
    if args.iterations > 1:
        if args.inputs:
            raise DmlLowerError("--iterations draws seeded random feeds: it does not combine with --inputs")
        more = [random_feeds(compiled.inputs, seed=args.seed + i, dims=_dims(compiled, args), **_value_control(args))
                for i in range(1, args.iterations)]
    loaded = LoadedOutputs.load(args.load_outputs) if args.load_outputs else None
    feeds, report = check(compiled, feeds, backends, tolerances, strict=args.strict or None,
                          model_name=str(args.model), memory_limit=args.memory_limit, oracle=args.oracle,
                          more_feeds=more, loaded=loaded, provider_options=args.provider_option,
                          ep_libraries=args.ep_library, no_fallback=args.no_fallback)
    if args.save_inputs:
        _write(args.save_inputs, "the inputs", lambda p: np.savez(p, **feeds))
    if args.save_outputs:
        saved = _saved_outputs(report)
        _write(args.save_outputs, "the outputs", lambda p: np.savez(p, **saved))
    text = format_text(report)
    if args.quiet:
        text = text.splitlines()[-1]
    print(text)
    if not args.quiet:
        print(format_timing(report))
    if args.json:
        _write(args.json, "the JSON report", lambda p: Path(p).write_text(json.dumps(report.to_dict(), indent=1)))
    if args.markdown:
        _write(args.markdown, "the Markdown report", lambda p: Path(p).write_text(format_markdown(report)))
    return 0 if report.ok else 1


def _saved_outputs(report) -> "dict[str, np.ndarray]":
    """The oracle's outputs as OUTPUT (a golden file for --oracle) and each backend's as
    BACKEND:OUTPUT (for --load-outputs), for the first feed set."""
    saved = dict(report.expected)
    for backend in report.backends:
        if not backend.backend.startswith("loaded:"):
            saved.update({f"{backend.backend}:{name}": value for name, value in backend.values.items()})
    return saved


def cmd_demo(args) -> int:
    from onnx_dml_lowering.runtime.check import Tolerances, check
    from onnx_dml_lowering.runtime.feeds import random_feeds
    from onnx_dml_lowering.runtime.report import format_text

    from .examples import example_paths
    failures = 0
    for path in example_paths():
        print("=" * 78)
        compiled = compile_model(path, feature_level=args.feature_level)
        print(f"{path.name}: {len(compiled.model.graph.node)} ONNX nodes, "
              f"{len(compiled.graph.dml_operators)} DirectML operators at feature level {compiled.feature_level}")
        print(format_graph(compiled.graph))
        _, report = check(compiled, random_feeds(compiled.inputs, seed=args.seed), ["cpu"], Tolerances(),
                          model_name=path.name)
        print(format_text(report))
        failures += not report.ok
    print("=" * 78)
    print("demo: every example matches ONNX semantics" if not failures
          else f"demo: {failures} example(s) MISMATCH")
    return 0 if not failures else 1


def cmd_capabilities(args) -> int:
    from onnx_dml_lowering.ir import parse_level

    from .capabilities import capabilities_text
    level = parse_level(args.feature_level) if args.feature_level else None
    sys.stdout.write(capabilities_text(level, markdown=args.markdown))
    return 0


def cmd_conformance(args) -> int:
    from . import conformance
    if args.action == "export":
        manifest = conformance.export(args.dir, args.feature_level, args.seeds)
        print(f"wrote {len(manifest['cases'])} cases to {args.dir} (feature level {manifest['feature_level']}, "
              f"{manifest['seeds']} data sets each); see {os.path.join(args.dir, 'README.txt')}")
        for provider, entry in manifest["providers"].items():
            statuses = [c["status"] for c in entry["cases"].values()]
            print(f"  {provider}: {statuses.count('deviation')} deviations, "
                  f"{statuses.count('unsupported')} unsupported listed in {conformance.MANIFEST}")
        return 0
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    results = conformance.run(args.dir, backends, args.provider_option, args.ep_library, args.no_fallback)
    for line in conformance.format_results(results):
        print(line)
    return 1 if any(by_status["fail"] for by_status in results.values()) else 0


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line too (exit 2), pointing at --help instead of printing usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def provider_flags(p) -> None:
    """The options of backends that run the original model on an onnxruntime provider."""
    p.add_argument("--provider-option", action="append", metavar="NAME=VALUE",
                   help="an option for the ort-*/ort:<Name> backends' provider (repeatable), e.g. device_type=CPU")
    p.add_argument("--ep-library", action="append", metavar="NAME=PATH",
                   help="register a plugin execution provider library (onnxruntime >= 1.22; repeatable)")
    p.add_argument("--no-fallback", action="store_true",
                   help="set session.disable_cpu_ep_fallback: a node the provider cannot take is an error")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dml-lower", description=(
        "Lower ONNX NonZero / EyeLike onto DirectML NONZERO_COORDINATES / DIAGONAL_MATRIX, "
        "run the lowered graph and check it against ONNX semantics."))
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="on an unexpected error, print the traceback (as DML_LOWER_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p, inputs=True):
        p.add_argument("model", help="path to an .onnx model")
        p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                       help="on an unexpected error, print the traceback")
        p.add_argument("--feature-level", default="5_1", help="DirectML feature level, 1_0 .. 6_4 (default 5_1)")
        if inputs:
            p.add_argument("--inputs", help=".npz of feeds keyed by graph input name (default: random)")
            p.add_argument("--seed", type=int, default=0, help="seed for random feeds (default 0)")
            p.add_argument("--dim", action="append", metavar="NAME=SIZE",
                           help="size of a symbolic input dimension for random feeds (repeatable; default 3)")
            p.add_argument("--strict", action="store_true",
                           help="poison undefined memory in the emulator, so anything that reads it shows")
            p.add_argument("--zero-fraction", type=float, metavar="F",
                           help="share of random feed elements that are zero (0: full, 1: empty; default 0.5)")
            p.add_argument("--val-range", metavar="LO,HI",
                           help="random feed values in [LO, HI] (floats uniform, integers inclusive)")
            p.add_argument("--memory-limit", metavar="SIZE",
                           help="refuse a run whose buffers would exceed SIZE (e.g. 512MiB, 2GB); "
                                "default: three quarters of physical memory")

    p = sub.add_parser("compile", help="lower and print the graph and the placement report")
    common(p, inputs=False)
    p.add_argument("--json", help="write placement and graph as JSON here")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run the lowered model and print its outputs")
    common(p)
    p.add_argument("--backend", default="cpu",
                   help="cpu: DirectML operators on the numpy emulator (default); "
                        "ort: each DirectML operator on onnxruntime (--providers)")
    p.add_argument("--providers", help="onnxruntime execution providers for --backend ort: cpu, dml "
                                       "(or full names), comma-separated; default cpu")
    p.add_argument("--save-outputs", help="write the outputs to this .npz")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("check", help="compare every backend with ONNX semantics (the oracle)")
    common(p)
    p.add_argument("--backends", default="cpu",
                   help="comma-separated: cpu (lowered graph, emulator; default), ort (lowered graph, "
                        "operators on onnxruntime), ort-cpu / ort-dml / ort:<ProviderName> (original model "
                        "on that onnxruntime provider)")
    p.add_argument("--oracle", default="hybrid",
                   help="hybrid (default: onnx.reference for NonZero / EyeLike / Trilu / idiom nodes, "
                        "onnxruntime CPU for the rest), reference (whole model on onnx.reference), "
                        "ort-cpu, or FILE.npz of golden outputs")
    p.add_argument("--iterations", type=int, default=1, metavar="N",
                   help="check N seeded random feed sets (seeds SEED .. SEED+N-1)")
    p.add_argument("--outputs", nargs="+", metavar="NAME",
                   help="also compare these intermediate values by name ('all': every typed value)")
    p.add_argument("--save-outputs", metavar="F.npz",
                   help="write the oracle's outputs (OUTPUT) and each backend's (BACKEND:OUTPUT)")
    p.add_argument("--load-outputs", metavar="F.npz",
                   help="compare outputs saved by --save-outputs (or run --save-outputs) with the oracle")
    provider_flags(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")
    p.add_argument("--atol", action="append", metavar="[OUTPUT=]A",
                   help="absolute tolerance for floats, global or per output (repeatable; default 1e-6)")
    p.add_argument("--rtol", action="append", metavar="[OUTPUT=]R",
                   help="relative tolerance for floats, global or per output (repeatable; default 1e-5)")
    p.add_argument("--json", help="write the report as JSON here")
    p.add_argument("--markdown", help="write the report as a Markdown table here")
    p.add_argument("--save-inputs", help="write the feeds used to this .npz (replay with --inputs)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("capabilities", help="print the DirectML support matrix the validation uses")
    p.add_argument("--feature-level", help="only the tables in force at this level (default: every level)")
    p.add_argument("--markdown", action="store_true", help="Markdown tables (docs/capabilities.md is this)")
    p.set_defaults(func=cmd_capabilities)

    p = sub.add_parser("conformance", help="export the NonZero / EyeLike grids as an onnx_test_runner "
                                          "suite, or run such a suite here")
    conformance = p.add_subparsers(dest="action", required=True, parser_class=_Parser)
    q = conformance.add_parser("export", help="write the suite (cases, README.txt, manifest.json) to DIR")
    q.add_argument("dir")
    q.add_argument("--feature-level", default="5_1", help="the level the manifest's placement is for")
    q.add_argument("--seeds", type=int, default=2, help="test data sets per case (default 2)")
    q = conformance.add_parser("run", help="run every case of DIR on each backend")
    q.add_argument("dir")
    q.add_argument("--backends", default="cpu",
                   help="comma-separated: cpu, ort (lowered graph), ort-cpu, ort-dml, ort:<ProviderName>")
    provider_flags(q)
    p.set_defaults(func=cmd_conformance)

    add_optimize_parser(sub)
    add_reduce_parser(sub, provider_flags, _feeds, _load_npz)

    p = sub.add_parser("demo", help="compile, run and check the bundled example models")
    p.add_argument("--feature-level", default="5_1")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("onnx-dml-lowering")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: "list[str] | None" = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except DmlLowerError as exc:
        print(f"dml-lower: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`dml-lower compile M | head -1`): stop quietly, as cat does.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except Exception as exc:  # a bug of ours: one line, the traceback only on request
        if os.environ.get("DML_LOWER_DEBUG") or getattr(args, "verbose", False):
            raise
        print(f"dml-lower: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
              "(set DML_LOWER_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
