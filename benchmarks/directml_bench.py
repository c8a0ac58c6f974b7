"""DirectML for real: what the DirectML host costs (make directml first; docs/directml-on-linux.md).

    .venv/bin/python benchmarks/directml_bench.py [--starts 3] [--repeats 200]

Measures, each figure with the 1-minute load average beside it (the machine may be shared):
  - host start-up: a fresh dml_host process until its hello (Wine, the D3D12 device, DirectML at
    its highest level, the shader-visible descriptor heap, the known-answer self-test);
  - one operator in a warm host: the first run of a descriptor (create, compile, initialise,
    dispatch, read back) and the median of later runs (the compiled operator cached);
  - check: the `dml` backend against `cpu` on the bundled examples and the committed exports
    (tests/models/*.onnx), each backend's own time in check, the host already warm, as a ratio.
No figure is asserted: this prints what it measured.
"""
from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from onnx_dml_lowering.compiler import compile_model                          # noqa: E402
from onnx_dml_lowering.compiler.examples import example_paths                 # noqa: E402
from onnx_dml_lowering.ir import DataType, TensorDesc                         # noqa: E402
from onnx_dml_lowering.runtime.check import BackendOptions, Tolerances, check  # noqa: E402
from onnx_dml_lowering.runtime.directml.dml_host import DmlHost, shared_host  # noqa: E402
from onnx_dml_lowering.runtime.directml.home import find_home                 # noqa: E402
from onnx_dml_lowering.runtime.feeds import random_feeds                      # noqa: E402


def load() -> str:
    return f"(load {os.getloadavg()[0]:.1f})"


def host_start(starts: int) -> None:
    home = find_home()
    for _ in range(starts):
        began = time.perf_counter()
        with DmlHost(home) as host:
            host.start()
            print(f"host start-up (Wine, device, heap, self-test): {time.perf_counter() - began:.2f} s {load()}")


def operators(repeats: int) -> None:
    host = shared_host()
    cases = {
        "DIAGONAL_MATRIX FLOAT32 {64,64}": ("DIAGONAL_MATRIX", [TensorDesc(DataType.FLOAT32, (64, 64))],
                                           struct.pack("<if", 0, 1.0)),
        "NONZERO_COORDINATES FLOAT32 {32,32}": ("NONZERO_COORDINATES", [
            TensorDesc(DataType.FLOAT32, (32, 32)), TensorDesc(DataType.UINT32, (1,)),
            TensorDesc(DataType.UINT32, (1024, 2))], b""),
        "DIAGONAL_MATRIX1 UINT8 {1,256,256} causal": ("DIAGONAL_MATRIX1", [None, TensorDesc(DataType.UINT8, (1, 256, 256))],
                                                      struct.pack("<I8sii", 5, b"\1", -(2**31), 1)),
    }
    host.start()
    for label, (operator, tensors, fields) in cases.items():
        buffers = [bytes(t.total_bytes) if t is not None else None for t in tensors]
        began = time.perf_counter()
        host.execute(operator, tensors, fields, buffers)
        first = time.perf_counter() - began
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            host.execute(operator, tensors, fields, buffers)
            times.append(time.perf_counter() - began)
        print(f"{label}: first {first * 1e3:.1f} ms, cached median {statistics.median(times) * 1e3:.2f} ms "
              f"(of {repeats}) {load()}")


def backend_seconds(path: Path, backend: str) -> float:
    compiled = compile_model(str(path))
    feeds = random_feeds(compiled.inputs, seed=0)
    report = check(compiled, feeds, [backend], Tolerances(), BackendOptions())[1]
    result = report.backends[0]
    if result.status != "ok":
        raise SystemExit(f"{path.name}: {backend} is {result.status}: {result.error}")
    return result.seconds


def checks() -> None:
    shared_host().start()                    # the start-up is measured above, not here
    paths = [*example_paths(), *sorted((ROOT / "tests" / "models").glob("*.onnx"))]
    for path in paths:
        cpu = min(backend_seconds(path, "cpu") for _ in range(3))
        dml = min(backend_seconds(path, "dml") for _ in range(3))
        print(f"check {path.name}: cpu {cpu * 1e3:.1f} ms, dml {dml * 1e3:.1f} ms, dml/cpu {dml / cpu:.1f}x {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3, help="host start-ups to time")
    parser.add_argument("--repeats", type=int, default=200, help="runs of each cached operator")
    args = parser.parse_args()
    host_start(args.starts)
    operators(args.repeats)
    checks()


if __name__ == "__main__":
    main()
