"""optimize: file size, onnxruntime CPU session creation and first run, before and after, on a
model holding a stored 1024x1024 bool causal buffer, a float additive mask built from it
(Where(mask, 0, -1e9), stored too, as constant folding leaves it) and a 512x512 3*I.

    .venv/bin/python benchmarks/optimize_bench.py [--repeat N]

Each time is the best of N fresh processes' worth of work in this one (default 5); the ratios
are from this one run. Outputs are checked bit for bit before anything is timed.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.compiler.optimize import bit_identical, optimize_model
from onnx_dml_lowering.runtime.model_facts import graph_inputs


def bench_model(n: int = 1024, m: int = 512) -> onnx.ModelProto:
    causal = np.tril(np.ones((1, 1, n, n), np.bool_))
    additive = np.where(causal, np.float32(0), np.float32(-1e9)).astype(np.float32)
    scaled_eye = (3 * np.eye(m)).astype(np.float32)
    inits = [numpy_helper.from_array(causal, "bias"), numpy_helper.from_array(additive, "additive_mask"),
             numpy_helper.from_array(scaled_eye, "three_eye"),
             numpy_helper.from_array(np.array([0, 0, 0, 0], np.int64), "starts")]
    nodes = [  # the Hugging Face pattern: bias[:, :, :T, :T] and the additive mask sliced alike
        helper.make_node("Shape", ["scores"], ["shape4"], name="shape"),
        helper.make_node("Slice", ["bias", "starts", "shape4"], ["mask"], name="slice_bias"),
        helper.make_node("Slice", ["additive_mask", "starts", "shape4"], ["add_mask"], name="slice_add"),
        helper.make_node("Where", ["mask", "scores", "add_mask"], ["masked"], name="where"),
        helper.make_node("Add", ["masked", "add_mask"], ["attn"], name="add"),
        helper.make_node("MatMul", ["x", "three_eye"], ["scaled"], name="matmul"),
    ]
    graph = helper.make_graph(nodes, "masks", [
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, "t", "t"]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", m])], [
        helper.make_tensor_value_info("attn", TensorProto.FLOAT, [1, 1, "t", "t"]),
        helper.make_tensor_value_info("scaled", TensorProto.FLOAT, ["b", m])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def timed(path: str, feeds: dict, repeat: int) -> "tuple[float, float]":
    """Best session creation and best first run (a fresh session each time), in seconds."""
    create, first = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        mid = time.perf_counter()
        session.run(None, feeds)
        create.append(mid - start)
        first.append(time.perf_counter() - mid)
    return min(create), min(first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    model = bench_model()
    optimized, rewrites, _ = optimize_model(model)
    with tempfile.TemporaryDirectory() as tmp:
        before, after = str(Path(tmp) / "before.onnx"), str(Path(tmp) / "after.onnx")
        onnx.save(model, before)
        onnx.save(optimized, after)
        assert bit_identical(before, after, graph_inputs(model), sizes=(1, 7, 1024)) == []
        rng = np.random.default_rng(0)
        feeds = {"scores": rng.standard_normal((1, 1, 1024, 1024)).astype(np.float32),
                 "x": rng.standard_normal((8, 512)).astype(np.float32)}
        create_b, run_b = timed(before, feeds, args.repeat)
        create_a, run_a = timed(after, feeds, args.repeat)
        size_b, size_a = Path(before).stat().st_size, Path(after).stat().st_size
    for rewrite in rewrites:
        print(rewrite.line())
    print(f"onnxruntime {ort.__version__}, best of {args.repeat}\n")
    print("| | before | after | after / before |")
    print("|---|---|---|---|")
    print(f"| file size | {size_b:,} bytes | {size_a:,} bytes | {size_a / size_b:.4f} |")
    print(f"| nodes | {len(model.graph.node)} | {len(optimized.graph.node)} | |")
    print(f"| session creation | {create_b * 1e3:.1f} ms | {create_a * 1e3:.1f} ms | {create_a / create_b:.2f} |")
    print(f"| first run (T = 1024) | {run_b * 1e3:.1f} ms | {run_a * 1e3:.1f} ms | {run_a / run_b:.2f} |")


if __name__ == "__main__":
    main()
