"""dml-lower: compile, run, check and demo (see DESIGN.md for the contract)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import zipfile
from pathlib import Path

import numpy as np

from ir import DmlLowerError

from .compiled import CompiledModel, compile_model


def _load_npz(path: str) -> "dict[str, np.ndarray]":
    if not Path(path).is_file():
        raise DmlLowerError(f"inputs file {path!r} does not exist")
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise DmlLowerError(f"inputs file {path!r} is a single .npy array, not an .npz archive keyed by input name")
            return {name: data[name] for name in data.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise DmlLowerError(f"inputs file {path!r} is not a readable .npz archive ({' '.join(str(exc).split())[:120]})") from None


def _feeds(compiled: CompiledModel, args) -> "dict[str, np.ndarray]":
    from runtime.feeds import random_feeds
    if args.inputs:
        return _load_npz(args.inputs)
    return random_feeds(compiled.inputs, seed=args.seed)


def format_placement(compiled: CompiledModel) -> str:
    lines = [f"placement (feature level {compiled.feature_level}):"]
    if not compiled.placement:
        lines.append("  no NonZero or EyeLike node in this model")
    for p in compiled.placement:
        target = " + ".join(p.dml_operators) if p.dml_operators else "no DirectML operator"
        text = f"  {', '.join(p.onnx_nodes)}: {p.status} by rule {p.rule}"
        text += f" -> {target}" if p.status == "lowered" else f" ({p.reason})"
        if p.note:
            text += f"  [{p.note}]"
        lines.append(text)
    return "\n".join(lines)


def cmd_compile(args) -> int:
    compiled = compile_model(args.model, feature_level=args.feature_level)
    print(compiled.graph)
    print()
    print(format_placement(compiled))
    if args.json:
        Path(args.json).write_text(compiled.to_json())
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
    outputs = compiled.run(feeds, backend=args.backend, providers=providers, strict=args.strict or None)
    print(f"ran {args.model} on backend {args.backend} (feature level {compiled.feature_level})")
    for name, value in outputs.items():
        print(_summary(name, value))
    if args.save_outputs:
        np.savez(args.save_outputs, **outputs)
        print(f"wrote {args.save_outputs}")
    return 0


def check_model(compiled: CompiledModel, feeds, backends: "list[str]", atol: float, rtol: float,
                strict: "bool | None" = None):
    """Every backend against onnx.reference on the same feeds; returns the backend reports."""
    from runtime.compare import BackendReport, compare_all
    from runtime.feeds import check_feeds
    from runtime.oracle import reference_outputs
    feeds = check_feeds(compiled.inputs, feeds)
    expected = reference_outputs(compiled.model, feeds)
    reports = []
    for backend in backends:
        if backend != "cpu":
            raise DmlLowerError(f"unknown check backend {backend!r}: this build checks 'cpu' (the emulator)")
        try:
            actual = compiled.run(feeds, backend="cpu", strict=strict)
        except DmlLowerError as exc:
            reports.append(BackendReport(backend, error=str(exc)))
            continue
        reports.append(compare_all(backend, expected, actual, atol, rtol))
    return feeds, reports


def format_engines(compiled: CompiledModel) -> str:
    """What ran each ONNX region (onnxruntime, or onnx.reference and why) and run-time events."""
    session = compiled.session("cpu")
    lines = []
    for name, nodes in session.regions.regions.items():
        engine = session.regions.engines.get(name, "not run")
        lines.append(f"  {name} [{', '.join(n.name for n in nodes)}]: {engine}")
    lines += [f"  {event}" for event in session.log]
    return "\n".join(["onnx regions:"] + lines) if lines else "onnx regions: none"


def format_reports(reports) -> str:
    lines = []
    for report in reports:
        if report.error:
            lines.append(f"  [{report.backend}] ERROR {report.error}")
        for o in report.outputs:
            shape = "x".join(str(d) for d in o.expected_shape) or "scalar"
            text = f"  [{o.backend}] {o.output}: {o.status.upper()} ({o.expected_dtype} [{shape}])"
            if o.max_abs_error is not None and o.status == "match":
                text += f" max abs err {o.max_abs_error:.3g}"
            if o.detail:
                text += f" - {o.detail}"
            lines.append(text)
    return "\n".join(lines)


def cmd_check(args) -> int:
    compiled = compile_model(args.model, feature_level=args.feature_level)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    feeds, reports = check_model(compiled, _feeds(compiled, args), backends, args.atol, args.rtol,
                                 strict=args.strict or None)
    if args.save_inputs:
        np.savez(args.save_inputs, **feeds)
    ok = all(r.ok for r in reports)
    print(f"check {args.model} (feature level {compiled.feature_level}, oracle onnx.reference)")
    print(format_placement(compiled))
    print(format_engines(compiled))
    print("results:")
    print(format_reports(reports))
    print("verdict: " + ("all outputs match ONNX semantics" if ok else "MISMATCH"))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "model": str(args.model), "feature_level": compiled.feature_level.name,
            "ok": ok, "placement": [p.to_dict() for p in compiled.placement],
            "onnx_regions": dict(compiled.session("cpu").regions.engines),
            "backends": [{"backend": r.backend, "ok": r.ok, "error": r.error,
                          "outputs": [o.to_dict() for o in r.outputs]} for r in reports]}, indent=1))
    return 0 if ok else 1


def cmd_demo(args) -> int:
    from .examples import example_paths
    failures = 0
    for path in example_paths():
        print("=" * 78)
        compiled = compile_model(path, feature_level=args.feature_level)
        print(f"{path.name}: {len(compiled.model.graph.node)} ONNX nodes, "
              f"{len(compiled.graph.dml_operators)} DirectML operators at feature level {compiled.feature_level}")
        print(compiled.graph)
        print(format_placement(compiled))
        from runtime.feeds import random_feeds
        _, reports = check_model(compiled, random_feeds(compiled.inputs, seed=args.seed), ["cpu"], 1e-6, 1e-5)
        print(format_engines(compiled))
        print("check against onnx.reference:")
        print(format_reports(reports))
        failures += not all(r.ok for r in reports)
    print("=" * 78)
    print("demo: every example matches ONNX semantics" if not failures
          else f"demo: {failures} example(s) MISMATCH")
    return 0 if not failures else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dml-lower", description=(
        "Lower ONNX NonZero / EyeLike onto DirectML NONZERO_COORDINATES / DIAGONAL_MATRIX, "
        "run the lowered graph and check it against ONNX semantics."))
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, inputs=True):
        p.add_argument("model", help="path to an .onnx model")
        p.add_argument("--feature-level", default="5_1", help="DirectML feature level, 1_0 .. 6_4 (default 5_1)")
        if inputs:
            p.add_argument("--inputs", help=".npz of feeds keyed by graph input name (default: random)")
            p.add_argument("--seed", type=int, default=0, help="seed for random feeds (default 0)")
            p.add_argument("--strict", action="store_true",
                           help="poison undefined memory in the emulator, so anything that reads it shows")

    p = sub.add_parser("compile", help="lower and print the graph and the placement report")
    common(p, inputs=False)
    p.add_argument("--json", help="write placement and graph as JSON here")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run the lowered model and print its outputs")
    common(p)
    p.add_argument("--backend", default="cpu", help="cpu: the DirectML emulator (default)")
    p.add_argument("--providers", help="onnxruntime execution providers, for --backend ort")
    p.add_argument("--save-outputs", help="write the outputs to this .npz")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("check", help="compare every backend with ONNX semantics (onnx.reference)")
    common(p)
    p.add_argument("--backends", default="cpu", help="comma-separated; cpu = the emulator (default)")
    p.add_argument("--atol", type=float, default=1e-6)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--json", help="write the report as JSON here")
    p.add_argument("--save-inputs", help="write the feeds used to this .npz (replay with --inputs)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("demo", help="compile, run and check the bundled example models")
    p.add_argument("--feature-level", default="5_1")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)
    return parser


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
    except Exception as exc:  # a bug of ours: one line, the traceback only on request
        if os.environ.get("DML_LOWER_DEBUG"):
            raise
        print(f"dml-lower: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
              "(set DML_LOWER_DEBUG=1 for the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
