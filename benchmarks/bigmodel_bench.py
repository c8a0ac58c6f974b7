"""Peak memory of `dml-lower check` on a model past 2 GB, against the weights' size and against
onnxruntime in the same run.

    .venv/bin/python benchmarks/bigmodel_bench.py [--elements N] [--backends cpu,ort,ort-cpu]

Builds tests/big_models.py's model in a temporary folder: one float32 weight of N elements
(default 600M: 2.4 GB) in a sparse external data file, read whole by a ReduceMax and in a few places
by a Gather feeding NonZero / EyeLike; then the same with the weight stored as a 2-D matrix (which
the band idioms examine) and with that matrix also a graph input (a default a feed overrides). Then, each as a fresh process, measured by its own peak
resident set size (os.wait4's ru_maxrss, file-backed pages of memory maps included):

1. `dml-lower check MODEL --backends ...` (compile, the lowered run on each backend, the hybrid
   oracle, the comparison). Target: at most 1.3x the weights. Also `compile` and `run` alone.
2. onnxruntime alone: a process that creates an InferenceSession on the model file (default
   options) and runs it once; and the same with graph optimizations disabled.

The data file is read once before (page cache warm for every process) and removed at the end.
Ratios only mean something within one run on this machine.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.big_models import WEIGHT_ELEMENTS, write_big_model   # noqa: E402

ORT_PROCESS = """
import sys
import numpy as np
import onnxruntime as ort
options = ort.SessionOptions()
if sys.argv[2] == "disabled":
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
session.run(None, {"x": np.arange(6, dtype=np.float32)})
"""


def measure(argv: "list[str]") -> "tuple[int, float, int]":
    """(peak RSS in bytes, wall seconds, exit code) of one process."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.stderr is not None          # stderr=PIPE
    error = process.stderr.read().decode(errors="replace").strip()
    process.stderr.close()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... exited {process.returncode}: {error[-400:]}")
    return usage.ru_maxrss * 1024, seconds, process.returncode


def warm(data: Path) -> None:
    """Read the data file once through a small buffer, so that no measured process pays for first
    filling the page cache (this process's RSS does not grow: the pages are not mapped here)."""
    buffer = bytearray(1 << 24)
    with open(data, "rb", buffering=0) as f:
        while f.readinto(buffer):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=WEIGHT_ELEMENTS, help="float32 weight elements")
    parser.add_argument("--backends", default="cpu,ort,ort-cpu")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bigmodel_bench_") as folder:
        path = write_big_model(Path(folder), elements=args.elements)
        weights = args.elements * 4
        print(f"model: one float32 weight of {args.elements} elements = {weights / 1e9:.1f} GB "
              f"({weights / 2**30:.2f} GiB) in a sparse external data file "
              f"({'past' if weights > 2**31 else 'under'} 2 GB)")
        cli = [sys.executable, "-m", "onnx_dml_lowering.compiler"]
        matrix = write_big_model(Path(folder) / "matrix", elements=args.elements, matrix=True)
        as_input = write_big_model(Path(folder) / "input", elements=args.elements, matrix=True, as_input=True)
        rows = [
            (f"dml-lower check --backends {args.backends}",
             [*cli, "check", str(path), "--backends", args.backends]),
            ("  the same, the weight a 2-D matrix", [*cli, "check", str(matrix), "--backends", args.backends]),
            ("  the same, the matrix also a graph input", [*cli, "check", str(as_input), "--backends", args.backends]),
            ("dml-lower compile", [*cli, "compile", str(path)]),
            ("dml-lower run (the emulator)", [*cli, "run", str(path)]),
            ("onnxruntime: session + one run (default options)",
             [sys.executable, "-c", ORT_PROCESS, str(path), "default"]),
            ("onnxruntime: session + one run (optimizations disabled)",
             [sys.executable, "-c", ORT_PROCESS, str(path), "disabled"]),
        ]
        for model in (path, matrix, as_input):
            warm(model.parent / "big.onnx.data")
        results = [(name, *measure(argv)) for name, argv in rows]
    check_rss = max(rss for _, rss, _, _ in results[:3])
    print(f"{'process':58} {'peak RSS':>10} {'x weights':>10} {'check/this':>11} {'wall':>8}")
    for name, rss, seconds, _ in results:
        print(f"{name:58} {rss / 2**30:>6.2f} GiB {rss / weights:>9.2f}x {check_rss / rss:>10.2f}x "
              f"{seconds:>7.1f}s")
    verdict = "met" if check_rss <= 1.3 * weights else "NOT met"
    print(f"target: check peak RSS <= 1.3x the weights, every variant: {verdict} (worst {check_rss / weights:.2f}x)")


if __name__ == "__main__":
    main()
