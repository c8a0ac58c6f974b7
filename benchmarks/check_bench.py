"""`dml-lower check` and the warm lowered run against onnxruntime, measured side by side in one run.

    .venv/bin/python benchmarks/check_bench.py [--repeat N] [--only check warm] [--models M.onnx ...]

1. check, every model of tests/models/real and benchmarks/models: `dml-lower check MODEL` as a
   fresh process (imports, compile, the lowered run on the emulator, the oracle, the comparison)
   against a fresh Python process that imports onnxruntime, creates the session and runs the
   model once on the same feeds (an .npz both read). Best of N each, the two sides interleaved.
   Target: check <= 2.0x onnxruntime on every model; the median and the worst are printed. The
   CPU time (user + system) of both sides is printed beside the wall time, with the 1-minute load:
   on a shared machine the load inflates wall times far more than CPU times.
2. warm, the 91-class SSDlite320 MobileNetV3 (benchmarks/models, 180 NonZero) and the Mixtral
   MoE routers (tests/models/real, both exporters: the per-expert NonZero of the router lowered)
   at the export's 3 x 11 tokens and at a prefill of 4 x 512 tokens: the warm lowered run (`compiled.run(feeds)`, compiled once) against onnxruntime's warm
   `session.run` of the original model (default session options), with the part of ours spent
   outside onnxruntime (the emulated DirectML operators and the host steps) measured apart.
   Target: <= 1.0x.

Ratios only mean something within one run on this machine (it may be shared and noisy).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np
import onnx

if TYPE_CHECKING:
    from onnx_dml_lowering.ir import OnnxRegion
    from onnx_dml_lowering.runtime.onnx_regions import RegionRunner

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "models" / "real"
# (model, input sizes: None for the export's): the Mixtral routers at the export's 3 x 11 tokens,
# where onnxruntime's whole run is under a millisecond, and at a prefill of 4 x 512 tokens.
PREFILL = {"batch": 4, "sequence": 512}
WARM_MODELS = [(ROOT / "benchmarks" / "models" / "ssdlite320_mobilenet_v3_91classes.onnx", None),
               (REAL / "mixtral.dynamo.onnx", None), (REAL / "mixtral.torchscript.onnx", None),
               (REAL / "mixtral.dynamo.onnx", PREFILL), (REAL / "mixtral.torchscript.onnx", PREFILL)]
CHECK_TARGET, WARM_TARGET = 2.0, 1.0

# Symbolic input sizes per model family (the export shapes, tests/models/real/MODELS.md).
DIMS = {"ssdlite": {"height": 320, "width": 320}, "mask_rcnn": {"height": 256, "width": 256},
        "mixtral": {"batch": 3, "sequence": 11}}
TEXT_DIMS = {"batch": 3, "sequence": 6}

ORT_PROCESS = """
import sys, numpy as np, onnxruntime as ort
feeds = dict(np.load(sys.argv[2]))
session = ort.InferenceSession(sys.argv[1])
session.run(None, feeds)
"""


def models() -> "list[Path]":
    return sorted((ROOT / "tests" / "models" / "real").glob("*.onnx")) + sorted((ROOT / "benchmarks" / "models").glob("*.onnx"))


def dims_for(path: Path) -> "dict[str, int]":
    return next((d for key, d in DIMS.items() if path.name.startswith(key)), TEXT_DIMS)


def timed_process(argv: "list[str]") -> "tuple[float, float]":
    """(wall seconds, CPU seconds: user + system) of one process."""
    env = dict(os.environ)
    env.pop("DML_LOWER_STRICT", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:5])} ... failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return elapsed, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def feeds_file(path: Path, sizes: "dict[str, int] | None" = None) -> Path:
    """Seeded random feeds at the model's export sizes (or `sizes`), saved where both processes read them."""
    from onnx_dml_lowering.compiler.frontend import load_model
    from onnx_dml_lowering.runtime.model_facts import graph_inputs
    from onnx_dml_lowering.runtime.feeds import random_feeds
    model = load_model(str(path))
    known = {d.dim_param for vi in graph_inputs(model) for d in vi.type.tensor_type.shape.dim if d.dim_param}
    dims = {k: v for k, v in (sizes or dims_for(path)).items() if k in known}
    feeds = random_feeds(graph_inputs(model), seed=0, dims=dims)
    tag = "".join(f"_{k}{v}" for k, v in sizes.items()) if sizes else ""
    out = ROOT / "build" / "check_bench" / f"{path.stem}{tag}.npz"
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **feeds)  # type: ignore[arg-type]  # numpy's stub: **feeds might fill savez's allow_pickle: bool
    return out


def check_rows(args: argparse.Namespace) -> "list[tuple[str, bool, str]]":
    print(f"{'check (fresh process each)':44} {'check s':>8} {'ort s':>7} {'ratio':>6}  target <= {CHECK_TARGET:g}"
          "     CPU: check s, ort s, ratio; load")
    ratios, cpu_ratios = [], []
    verdicts = []
    for path in [Path(m) for m in args.models] if args.models else models():
        feeds = feeds_file(path)
        check_argv = [sys.executable, "-m", "onnx_dml_lowering.compiler", "check", str(path),
                      "--inputs", str(feeds), "-q"]
        ort_argv = [sys.executable, "-c", ORT_PROCESS, str(path), str(feeds)]
        ours: "list[float]" = []
        theirs: "list[float]" = []
        ours_cpu: "list[float]" = []
        theirs_cpu: "list[float]" = []
        for _ in range(args.repeat):
            for times, cpus, argv in ((ours, ours_cpu, check_argv), (theirs, theirs_cpu, ort_argv)):
                wall, cpu = timed_process(argv)
                times.append(wall)
                cpus.append(cpu)
        ratio = min(ours) / min(theirs)
        ratios.append(ratio)
        cpu_ratios.append(min(ours_cpu) / min(theirs_cpu))
        met = ratio <= CHECK_TARGET
        print(f"{path.name:44} {min(ours):8.2f} {min(theirs):7.2f} {ratio:6.2f}  {'met' if met else 'NOT met':7}"
              f"    {min(ours_cpu):.2f} {min(theirs_cpu):.2f} {cpu_ratios[-1]:.2f}; {os.getloadavg()[0]:.1f}",
              flush=True)
        verdicts.append((f"check {path.name}", met, f"{ratio:.2f} <= {CHECK_TARGET:g}"))
    median, worst = statistics.median(ratios), max(ratios)
    print(f"    check / onnxruntime create+run over {len(ratios)} models: median {median:.2f}, worst {worst:.2f}; "
          f"CPU time median {statistics.median(cpu_ratios):.2f}, worst {max(cpu_ratios):.2f}")
    verdicts.append(("check on every model", worst <= CHECK_TARGET,
                     f"worst {worst:.2f} (median {median:.2f}) <= {CHECK_TARGET:g}"))
    return verdicts


def warm_rows(args: argparse.Namespace) -> "list[tuple[str, bool, str]]":
    import onnxruntime as ort

    from onnx_dml_lowering.compiler import compile_model
    from onnx_dml_lowering.runtime import onnx_regions
    from onnx_dml_lowering.runtime.check import make_oracle

    # Time spent in onnxruntime by the lowered run's ONNX regions, to split ours in two.
    in_regions = [0.0]
    region_call = onnx_regions.RegionRunner.__call__

    def timed_region(self: RegionRunner, step: OnnxRegion, tensors: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        start = time.perf_counter()
        try:
            return region_call(self, step, tensors)
        finally:
            in_regions[0] += time.perf_counter() - start
    onnx_regions.RegionRunner.__call__ = timed_region  # type: ignore[method-assign]  # timed for the run, restored below
    verdicts = []
    for path, sizes in WARM_MODELS:
        feeds = dict(np.load(feeds_file(path, sizes)))
        model = onnx.load(str(path))
        compiled = compile_model(str(path))
        session = ort.InferenceSession(str(path))
        # Ours bit for bit the ONNX-semantics oracle's (what check compares); onnxruntime's whole-model
        # run may fuse across what our ONNX regions cut, so its floats are held to 1e-5 only.
        mine, theirs = compiled.run(feeds), session.run(None, feeds)
        expected = make_oracle(compile_model(str(path))).run(feeds)   # its own sessions: nothing shared
        for name, value in zip([o.name for o in model.graph.output], theirs):
            if not np.array_equal(mine[name], expected[name]) or not np.allclose(mine[name], value, rtol=1e-5, atol=1e-5):
                raise SystemExit(f"benchmark aborted: {path.name} output {name} differs from the oracle's "
                                 "or from onnxruntime's")
        ours, outside, ort_times = [], [], []
        for _ in range(args.repeat * 4):
            in_regions[0] = 0.0
            start = time.perf_counter()
            compiled.run(feeds)
            ours.append(time.perf_counter() - start)
            outside.append(ours[-1] - in_regions[0])
            start = time.perf_counter()
            session.run(None, feeds)
            ort_times.append(time.perf_counter() - start)
        ratio = min(ours) / min(ort_times)
        met = ratio <= WARM_TARGET
        nonzero = sum(n.op_type == "NonZero" for n in model.graph.node)
        lowered = sum(p.status == "lowered" for p in compiled.placement)
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in feeds.items())
        print(f"warm run {path.name} ({shapes}): {len(model.graph.node)} nodes, {nonzero} NonZero, {lowered} lowered, "
              f"{len(compiled.partition.regions)} ONNX regions")
        print(f"    lowered warm run {min(ours) * 1e3:.2f} ms ({min(outside) * 1e3:.2f} ms outside onnxruntime: "
              f"{min(outside) / max(1, lowered) * 1e6:.0f} us per lowered placement), onnxruntime warm run "
              f"{min(ort_times) * 1e3:.2f} ms, ratio {ratio:.2f} (target <= {WARM_TARGET:g}: "
              f"{'met' if met else 'NOT met'})", flush=True)
        verdicts.append((f"warm run {path.name}{' at ' + str(sizes) if sizes else ''}", met, f"{ratio:.2f} <= {WARM_TARGET:g}"))
    onnx_regions.RegionRunner.__call__ = region_call  # type: ignore[method-assign]  # the wrapper undone
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="processes per side and model (best of)")
    parser.add_argument("--only", nargs="+", choices=["check", "warm"])
    parser.add_argument("--models", nargs="+", help="check these models instead of the default set")
    args = parser.parse_args()
    # Byte-compile the package as a wheel install does (PYTHONDONTWRITEBYTECODE would otherwise
    # make every check process compile our sources again).
    import compileall

    from onnx_dml_lowering import compiler, ir, lowering, runtime
    for package in (compiler, ir, lowering, runtime):
        assert package.__file__ is not None          # regular packages (an __init__.py each)
        compileall.compile_dir(str(Path(package.__file__).parent), quiet=1)
    import onnxruntime as ort
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, onnx {onnx.__version__}, onnxruntime "
          f"{ort.__version__}, {os.cpu_count()} CPUs; best of {args.repeat}, sides interleaved")
    verdicts = []
    if not args.only or "check" in args.only:
        verdicts += check_rows(args)
    if not args.only or "warm" in args.only:
        verdicts += warm_rows(args)
    print("\ntargets:")
    for name, ok, text in verdicts:
        print(f"  {'met    ' if ok else 'NOT met'}  {name}: {text}")


if __name__ == "__main__":
    main()
