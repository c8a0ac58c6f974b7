"""dml-lower: compile, run, check and demo (see DESIGN.md for the contract)."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Iterator

from typing import TYPE_CHECKING

from onnx_dml_lowering.ir import DmlLowerError

from .optimize_cli import add_optimize_parser
from .zoo import add_zoo_options
from .reduce_cli import add_reduce_parser

if TYPE_CHECKING:                 # numpy, onnx and the compiler load when a command needs them
    import numpy as np

    from .compiled import CompiledModel


def _write(path: str, what: str, write) -> None:
    try:
        write(path)
    except OSError as exc:
        raise DmlLowerError(f"cannot write {what} to {path!r}: {exc.strerror or exc}") from None


def _save_npz(path: str, arrays, what: str) -> None:
    from onnx_dml_lowering.runtime.npz import save_npz
    save_npz(path, arrays, what)


def _load_npz_file(path: str) -> dict:
    from onnx_dml_lowering.runtime.npz import load_npz
    return load_npz(path, "inputs file")


def _memory_limit(args) -> int:
    from onnx_dml_lowering.runtime.memory import default_limit, parse_size
    limit = getattr(args, "memory_limit", None)
    return default_limit() if limit is None else parse_size(limit)


def check_writable(option: str, path: "str | None") -> None:
    """An output file the run would fail to write is found before the run, in one line."""
    if not path:
        return
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        why = "it is a directory"
    elif folder.exists() and not folder.is_dir():
        why = f"{str(folder)!r} is a file, not a folder"
    elif not folder.is_dir():
        why = f"folder {str(folder)!r} does not exist"
    elif target.exists() and not os.access(target, os.W_OK):
        why = "the file is not writable"
    elif not target.exists() and not os.access(folder, os.W_OK | os.X_OK):
        why = f"folder {str(folder)!r} is not writable"
    else:
        return
    raise DmlLowerError(f"{option} {path!r}: cannot write there: {why}")


def _feeds(compiled: CompiledModel, args) -> "dict[str, np.ndarray]":
    """The first feed set (see _feed_sets)."""
    return next(_feed_sets(compiled, args))


def _feed_sets(compiled: CompiledModel, args) -> "Iterator[dict[str, np.ndarray]]":
    """The feed sets of run / check, one at a time: a data loader script's, the --inputs file, or
    seeded random ones (seeds SEED .. SEED+N-1 for --iterations N)."""
    from onnx_dml_lowering.runtime.feeds import random_feeds
    from onnx_dml_lowering.runtime.npz import load_npz
    iterations = getattr(args, "iterations", 1)
    script = getattr(args, "data_loader_script", None)
    if script:
        if args.inputs:
            raise DmlLowerError("--data-loader-script gives the feeds: it does not combine with --inputs")
        if iterations > 1:
            raise DmlLowerError("--data-loader-script gives the feed sets (one iteration each): "
                                "it does not combine with --iterations")
        for option, value in (("--dim", args.dim), ("--val-range", args.val_range),
                               ("--zero-fraction", args.zero_fraction)):
            if value:
                raise DmlLowerError(f"{option} shapes random feeds: it does not apply to --data-loader-script")
        from .data_loader import feed_sets
        yield from feed_sets(script, compiled.inputs, compiled.optional_inputs)
        return
    if args.inputs:
        if iterations > 1:
            raise DmlLowerError("--iterations draws seeded random feeds: it does not combine with --inputs")
        yield load_npz(args.inputs, "inputs file", _memory_limit(args))
        return
    if args.seed < 0:
        raise DmlLowerError(f"--seed {args.seed}: the seed must be a non-negative integer")
    dims = _dims(compiled, args)
    control = _check_value_control(compiled, _value_control(args), args)
    limit = _memory_limit(args)
    for index in range(iterations):
        # drawn one at a time as check consumes them: memory stays flat in N
        yield random_feeds(_random_inputs(compiled, args), seed=args.seed + index, dims=dims, **control,
                           memory_limit=limit)


def _random_inputs(compiled: CompiledModel, args) -> list:
    """The inputs random feeds are drawn for: initializers that are also inputs keep their stored
    default unless --feed-initializers asks for random values in their place."""
    return compiled.inputs + (compiled.optional_inputs if getattr(args, "feed_initializers", False) else [])


def _defaults_line(compiled: CompiledModel, feeds) -> "str | None":
    unfed = [vi.name for vi in compiled.optional_inputs if vi.name not in feeds]
    if not unfed:
        return None
    inits = compiled.initializers
    return "inputs not fed, their initializer used as the default: " + ", ".join(
        f"{n} ({inits[n].dtype} [{'x'.join(map(str, inits[n].shape)) or 'scalar'}])" for n in unfed)


def _dims(compiled: CompiledModel, args) -> "dict[str, int]":
    dims = {}
    for text in args.dim or []:
        name, _, value = text.partition("=")
        if not name or not value.isdigit():
            raise DmlLowerError(f"--dim {text!r}: expected NAME=SIZE with a non-negative integer size")
        dims[name] = int(value)
    known = {d.dim_param for vi in compiled.inputs + compiled.optional_inputs
             for d in vi.type.tensor_type.shape.dim if d.dim_param}
    unknown = sorted(set(dims) - known)
    if unknown:
        raise DmlLowerError(f"--dim {unknown[0]}: no input dimension has that name "
                            f"(symbolic input dimensions: {', '.join(sorted(known)) or 'none'})")
    return dims


def _value_control(args) -> dict:
    """--zero-fraction / --val-range, for random feeds: global `F` / `LO,HI` and per input
    `NAME:F` / `NAME:LO,HI` (the per-input form wins; of repeated ones the last)."""
    control: dict = {"zero_fraction": None, "value_range": None, "input_zero_fraction": {},
                     "input_value_range": {}}
    for text in _listed(getattr(args, "val_range", None)):
        name, bounds = _split_input(text, "--val-range")
        lo, sep, hi = bounds.partition(",")
        try:
            value_range = (float(lo), float(hi))
        except ValueError:
            raise DmlLowerError(f"--val-range {text!r}: expected [NAME:]LO,HI (two numbers)") from None
        if value_range[0] > value_range[1]:
            raise DmlLowerError(f"--val-range {text!r}: LO is above HI")
        if name is None:
            control["value_range"] = value_range
        else:
            control["input_value_range"][name] = value_range
    for text in _listed(getattr(args, "zero_fraction", None)):
        name, value = _split_input(text, "--zero-fraction")
        try:
            fraction = float(value)
        except ValueError:
            raise DmlLowerError(f"--zero-fraction {text!r}: expected [NAME:]F (a number from 0 to 1)") from None
        if not 0.0 <= fraction <= 1.0:
            raise DmlLowerError(f"--zero-fraction {text!r}: F must be between 0 and 1")
        if name is None:
            control["zero_fraction"] = fraction
        else:
            control["input_zero_fraction"][name] = fraction
    return control


def _listed(value) -> "list[str]":
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def _split_input(text: str, option: str) -> "tuple[str | None, str]":
    """NAME:VALUE -> (NAME, VALUE); VALUE alone -> (None, VALUE). The last colon splits, so input
    names holding a colon (TensorFlow's 'x:0') still work."""
    name, sep, value = text.rpartition(":")
    if not sep:
        return None, text
    if not name:
        raise DmlLowerError(f"{option} {text!r}: the input name before ':' is empty")
    return name, value


def _check_value_control(compiled: CompiledModel, control: dict, args=None) -> dict:
    """An input named by --val-range / --zero-fraction must be one the random feeds fill."""
    names = [vi.name for vi in (_random_inputs(compiled, args) if args is not None else compiled.inputs)]
    for option, key in (("--val-range", "input_value_range"), ("--zero-fraction", "input_zero_fraction")):
        for name in control[key]:
            if name not in names:
                raise DmlLowerError(f"{option} {name}: the model has no input of that name "
                                    f"(inputs: {', '.join(names) or 'none'})")
    return control


# Options whose value may start with '-' ('--val-range -1,1'): argparse would read it as an option.
_SIGNED_VALUES = ("--val-range", "--zero-fraction")
_NUMBER_START = re.compile(r"-(\d|\.\d|inf\b|nan\b)", re.IGNORECASE)


def _attach_signed_values(argv: "list[str]") -> "list[str]":
    """'--val-range -1,1' -> '--val-range=-1,1', so that argparse takes -1,1 as the value."""
    out: "list[str]" = []
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            out += argv[index:]
            break
        if token in _SIGNED_VALUES and index + 1 < len(argv) and _NUMBER_START.match(argv[index + 1]):
            out.append(f"{token}={argv[index + 1]}")
            index += 2
            continue
        out.append(token)
        index += 1
    return out


def format_placement(compiled: CompiledModel) -> str:
    from onnx_dml_lowering.runtime.report import format_placement as fmt
    return fmt(compiled.placement, compiled.feature_level)


def cmd_inspect(args) -> int:
    from .inspect_cmd import cmd_inspect as run
    return run(args)


def cmd_compile(args) -> int:
    check_writable("--json", args.json)
    from onnx_dml_lowering.ir import format_graph

    from .compiled import compile_model
    compiled = compile_model(args.model, feature_level=args.feature_level)
    print(format_graph(compiled.graph))
    print()
    print(format_placement(compiled))
    data = compiled.to_dict()
    if args.dim:
        data["specialised"] = _specialised(compiled, args)
    if args.json:
        _write(args.json, "the compile JSON", lambda p: Path(p).write_text(json.dumps(data, indent=1)))
        print(f"\nwrote {args.json}")
    return 0


def _specialised(compiled: CompiledModel, args) -> dict:
    """compile --dim: the run-time steps specialised at those sizes, printed and returned for --json."""
    from .specialise import format_specialised, specialise
    spec = specialise(compiled, _dims(compiled, args))
    print()
    print(format_specialised(spec))
    return spec


def _summary(name: str, value: np.ndarray) -> str:
    import numpy as np
    flat = value.reshape(-1)
    preview = np.array2string(flat[:8], separator=", ", threshold=8)
    more = " ..." if flat.size > 8 else ""
    return f"  {name}: {value.dtype} {list(value.shape)} {preview}{more}"


def cmd_run(args) -> int:
    check_writable("--save-outputs", args.save_outputs)
    import numpy as np

    from .compiled import compile_model
    settings = session_settings(args)
    compiled = compile_model(args.model, feature_level=args.feature_level)
    providers = [p.strip() for p in args.providers.split(",")] if args.providers else None
    if providers and args.backend != "ort":
        raise DmlLowerError("--providers applies to --backend ort only")
    first = None
    for index, feeds in enumerate(_feed_sets(compiled, args)):
        outputs = compiled.run(feeds, backend=args.backend, providers=providers, strict=args.strict or None,
                               memory_limit=args.memory_limit, session_settings=settings)
        if first is None:
            first, first_feeds = outputs, feeds
        which = f" (iteration #{index} of {args.data_loader_script})" if args.data_loader_script else ""
        print(f"ran {args.model} on backend {args.backend} (feature level {compiled.feature_level}){which}")
        defaults = _defaults_line(compiled, feeds)
        if defaults:
            print(defaults)
        unvalidated = compiled.session(args.backend, providers, settings).unvalidated_outputs
        for name, value in outputs.items():
            print(_summary(name, value) + (f"  [not run on the provider: {unvalidated[name]}]"
                                           if name in unvalidated else ""))
    if args.save_outputs:
        from onnx_dml_lowering.runtime.feeds import check_feeds
        from onnx_dml_lowering.runtime.saved_outputs import metadata
        meta = metadata(check_feeds(compiled.inputs, first_feeds, compiled.optional_inputs), f"run:{args.backend}")
        _save_npz(args.save_outputs, {**first, **meta}, "the outputs")
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
    import numpy as np

    from .compiled import compile_model

    from onnx_dml_lowering.runtime.check import LoadedOutputs, Tolerances, check
    from onnx_dml_lowering.runtime.report import format_markdown, format_quiet, format_text, format_timing
    if args.iterations < 1:
        raise DmlLowerError(f"--iterations {args.iterations}: must be at least 1")
    for option in ("--json", "--markdown", "--save-outputs", "--save-inputs"):
        check_writable(option, getattr(args, option[2:].replace("-", "_")))
    settings = session_settings(args)
    compiled = compile_model(args.model, feature_level=args.feature_level, outputs=_outputs_arg(args))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    tolerances = Tolerances.parse(args.atol, args.rtol)
    sets = _feed_sets(compiled, args)
    feeds = next(sets)
    more = sets                 # a generator: the feed sets are drawn as check consumes them
    loaded = LoadedOutputs.load(args.load_outputs) if args.load_outputs else None
    feeds, report = check(compiled, feeds, backends, tolerances, strict=args.strict or None,
                          model_name=str(args.model), memory_limit=args.memory_limit, oracle=args.oracle,
                          more_feeds=more, loaded=loaded, provider_options=args.provider_option,
                          ep_libraries=args.ep_library, no_fallback=args.no_fallback,
                          session_settings=settings)
    if args.save_inputs:
        _save_npz(args.save_inputs, feeds, "the inputs")
    if args.save_outputs:
        _save_npz(args.save_outputs, _saved_outputs(report, feeds), "the outputs")
    print(format_quiet(report) if args.quiet else format_text(report))
    if not args.quiet:
        print(format_timing(report))
    if args.json:
        _write(args.json, "the JSON report", lambda p: Path(p).write_text(json.dumps(report.to_dict(), indent=1)))
    if args.markdown:
        _write(args.markdown, "the Markdown report", lambda p: Path(p).write_text(format_markdown(report)))
    if report.interrupted:
        print(f"dml-lower: interrupted: the report covers the {report.iterations} of {args.iterations} feed sets "
              "checked before Ctrl-C", file=sys.stderr)
        return 130
    return 0 if report.ok else 1


def check_models(args, parser) -> int:
    """One model file: cmd_check as ever. Several, a directory or a zoo option: the zoo (zoo.py)."""
    from .zoo import is_zoo, run_zoo
    if is_zoo(args):
        session_settings(args)          # bad session options: one line here, not once per model
        check_writable("--json", args.json)
        check_writable("--junit", args.junit)
        return run_zoo(args, parser)
    args.model = args.model[0]
    return cmd_check(args)


def _saved_outputs(report, feeds) -> "dict[str, np.ndarray]":
    """The oracle's outputs as OUTPUT (a golden file for --oracle) and each backend's as
    BACKEND:OUTPUT (for --load-outputs), for the first feed set, with that set's fingerprint."""
    from onnx_dml_lowering.runtime.saved_outputs import PREFIX, metadata
    saved = dict(report.expected, **metadata(feeds, "check"))
    for backend in report.backends:
        if not backend.backend.startswith(PREFIX):
            saved.update({f"{backend.backend}:{name}": value for name, value in backend.values.items()})
    return saved


def cmd_demo(args) -> int:
    from onnx_dml_lowering.runtime.check import Tolerances, check
    from onnx_dml_lowering.runtime.feeds import random_feeds
    from onnx_dml_lowering.runtime.report import format_text

    from onnx_dml_lowering.ir import format_graph

    from .compiled import compile_model
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
    results = conformance.run(args.dir, backends, args.provider_option, args.ep_library, args.no_fallback,
                              session_settings=session_settings(args), pattern=args.filter)
    for line in conformance.format_results(results):
        print(line)
    return 1 if any(by_status["fail"] for by_status in results.values()) else 0


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line too (exit 2), pointing at --help instead of printing usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def session_flags(p) -> None:
    """Settings of every onnxruntime session the command creates (as onnx_test_runner -C)."""
    p.add_argument("--session-config", action="append", metavar="KEY=VALUE",
                   help="an onnxruntime session config entry for every session (repeatable), "
                        "e.g. session.intra_op.allow_spinning=0")
    p.add_argument("--graph-optimization-level", metavar="LEVEL",
                   help="onnxruntime graph optimizations of every session: disable, basic, extended or all")
    p.add_argument("--threads", metavar="N",
                   help="intra-op threads of every onnxruntime session (0: onnxruntime's default; "
                        "wins over the one thread small region sessions get)")


def session_settings(args):
    """The SessionSettings of --session-config / --graph-optimization-level / --threads, or None."""
    from onnx_dml_lowering.runtime.ort_providers import parse_session_settings
    settings = parse_session_settings(getattr(args, "session_config", None),
                                      getattr(args, "graph_optimization_level", None),
                                      getattr(args, "threads", None))
    return None if settings.empty else settings


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
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show program's version number and exit")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="on an unexpected error, print the traceback (as DML_LOWER_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p, inputs=True, models=False):
        if models:
            p.add_argument("model", nargs="+", metavar="MODEL_OR_DIR",
                           help="an .onnx model; several, or a directory (every *.onnx below it), check a zoo")
        else:
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
            p.add_argument("--zero-fraction", action="append", metavar="[NAME:]F",
                           help="share of random feed elements that are zero (0: full, 1: empty; default 0.5); "
                                "NAME:F for one input (repeatable; wins over the global F)")
            p.add_argument("--val-range", action="append", metavar="[NAME:]LO,HI",
                           help="random feed values in [LO, HI] (floats uniform, integers inclusive); "
                                "NAME:LO,HI for one input (repeatable; wins over the global LO,HI)")
            p.add_argument("--data-loader-script", metavar="FILE.py[:FUNC]",
                           help="feed sets from FUNC (default load_data) of a Python script, which returns "
                                "or yields dicts of input name to array; each dict is one iteration")
            p.add_argument("--feed-initializers", action="store_true",
                           help="draw random feeds for initializers that are also graph inputs too "
                                "(default: their stored value is used and the output says so)")
            p.add_argument("--memory-limit", metavar="SIZE",
                           help="refuse a run whose buffers would exceed SIZE (e.g. 512MiB, 2GB); "
                                "default: three quarters of physical memory")

    p = sub.add_parser("compile", help="lower and print the graph and the placement report")
    common(p, inputs=False)
    p.add_argument("--json", help="write placement and graph as JSON here")
    p.add_argument("--dim", action="append", metavar="NAME=SIZE",
                   help="specialise the run-time-sized steps at these input dimension sizes and print their "
                        "descriptors (repeatable; unnamed symbolic dimensions: 3)")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run the lowered model and print its outputs")
    common(p)
    p.add_argument("--backend", default="cpu",
                   help="cpu: DirectML operators on the numpy emulator (default); "
                        "ort: each DirectML operator on onnxruntime (--providers)")
    p.add_argument("--providers", help="onnxruntime execution providers for --backend ort: cpu, dml "
                                       "(or full names), comma-separated; default cpu")
    p.add_argument("--save-outputs", help="write the outputs to this .npz (of the first feed set)")
    session_flags(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("check", help="compare every backend with ONNX semantics (the oracle)")
    common(p, models=True)
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
                   help="compare outputs saved by --save-outputs (or run --save-outputs) from the same feeds with "
                        "the oracle, as backends saved:BACKEND, saved:oracle, saved:run-BACKEND")
    provider_flags(p)
    session_flags(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print only the lines that are not MATCH (and UNAVAILABLE backends) and the verdict")
    p.add_argument("--atol", action="append", metavar="[OUTPUT=]A",
                   help="absolute tolerance for floats, global or per output (repeatable; default 1e-6)")
    p.add_argument("--rtol", action="append", metavar="[OUTPUT=]R",
                   help="relative tolerance for floats, global or per output (repeatable; default 1e-5)")
    p.add_argument("--json", help="write the report as JSON here")
    p.add_argument("--markdown", help="write the report as a Markdown table here")
    p.add_argument("--save-inputs", help="write the feeds used to this .npz (replay with --inputs)")
    add_zoo_options(p)
    p.set_defaults(func=lambda args, parser=p: check_models(args, parser))

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
    q.add_argument("--filter", metavar="GLOB",
                   help="only the cases whose folder name matches GLOB (fnmatch), e.g. 'test_nonzero_int64*'")
    provider_flags(q)
    session_flags(q)
    p.set_defaults(func=cmd_conformance)

    add_optimize_parser(sub, _dims)      # optimize --check sizes feeds as run / check do
    p = sub.add_parser("inspect", help="summarise a model and say which anchors would lower at a level")
    p.add_argument("model", help="path to an .onnx model")
    p.add_argument("--feature-level", default="5_1", help="DirectML feature level, 1_0 .. 6_4 (default 5_1)")
    p.add_argument("--json", metavar="OUT.json", help="write the report as JSON here")
    p.set_defaults(func=cmd_inspect)
    add_reduce_parser(sub, provider_flags, _feeds, lambda path: _load_npz_file(path))

    p = sub.add_parser("demo", help="compile, run and check the bundled example models")
    p.add_argument("--feature-level", default="5_1")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)
    return parser


class _VersionAction(argparse.Action):
    """--version, looked up only when asked (importlib.metadata costs ~0.1 s on every command)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {_version()}")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("onnx-dml-lowering")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: "list[str] | None" = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_attach_signed_values(list(sys.argv[1:] if argv is None else argv)))
    try:
        return args.func(args)
    except DmlLowerError as exc:
        print(f"dml-lower: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dml-lower: interrupted", file=sys.stderr)
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
