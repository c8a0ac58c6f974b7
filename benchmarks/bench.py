"""Benchmarks: the CPU emulator against onnxruntime's CPU provider and numpy, measured in one run.

    .venv/bin/python benchmarks/bench.py            # the full set (a few minutes)
    .venv/bin/python benchmarks/bench.py --quick    # a smoke run at small sizes (under a minute)
    make bench

Every timing is the best of N after a warm-up, with the sides interleaved round by round (the
machine may be shared and noisy). "ours" is compile_model(model).run(feeds) on the emulator in
its default (non-strict) mode, timing the run only; "ort" is an onnxruntime InferenceSession on
CPUExecutionProvider with intra_op_num_threads=1 (otherwise default options) running the same
ONNX model; "numpy" is the closest numpy expression where one exists. The memory-traffic bound
is the bytes the operation must read and write (input once, output once) over the copy
bandwidth measured at the start of the same run; "bound/ours" is the fraction of it reached.
Every row first checks that both sides give the same output, bit for bit. Peak resident
memory is ru_maxrss of a fresh process per side, started through a small launcher process
(Linux carries a process's peak RSS across exec, so a child of this big process would inherit it).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np                                   # noqa: E402
import onnx                                          # noqa: E402
from onnx import TensorProto as TP                   # noqa: E402
from onnx import helper as h                         # noqa: E402
from onnx_dml_lowering.ir import verify_graph      # noqa: E402

if TYPE_CHECKING:
    import onnxruntime

    Runner = Callable[[], "dict[str, np.ndarray]"]   # ours: compiled.run(feeds) on this row's feeds

MB = 1 << 20


# -- models and inputs -----------------------------------------------------------------------------

def single(op: str, in_type: int, shape: "Sequence[int | None]", out_type: int, out_shape: "Sequence[int | None]",
           **attrs: Any) -> onnx.ModelProto:     # attrs: make_node's **kwargs, Any in onnx
    x = h.make_tensor_value_info("x", in_type, list(shape))
    y = h.make_tensor_value_info("y", out_type, list(out_shape))
    graph = h.make_graph([h.make_node(op, ["x"], ["y"], name=op.lower(), **attrs)], op.lower(), [x], [y])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


def nonzero_transpose(in_type: int, shape: "Sequence[int]") -> onnx.ModelProto:
    """torch.nonzero as exported: NonZero -> Transpose(perm=[1, 0])."""
    x = h.make_tensor_value_info("x", in_type, list(shape))
    y = h.make_tensor_value_info("y", TP.INT64, [None, len(shape)])
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             h.make_node("Transpose", ["nz"], ["y"], name="transpose", perm=[1, 0])]
    graph = h.make_graph(nodes, "torch_nonzero", [x], [y])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


def eye_expand(batch: int, n: int) -> onnx.ModelProto:
    """onnxruntime's way to a batch of identities: EyeLike then Expand."""
    x = h.make_tensor_value_info("x", TP.FLOAT, [n, n])
    y = h.make_tensor_value_info("y", TP.FLOAT, [batch, n, n])
    shape = h.make_tensor("shape", TP.INT64, [3], [batch, n, n])
    nodes = [h.make_node("EyeLike", ["x"], ["eye"], name="eyelike"),
             h.make_node("Expand", ["eye", "shape"], ["y"], name="expand")]
    graph = h.make_graph(nodes, "batched_eye", [x], [y], [shape])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


def synthetic_model(nodes: int, idioms: "int | None" = None) -> onnx.ModelProto:
    """`nodes` nodes over an 8x8 float input: a chain of Add / Relu / Neg / Abs with `idioms`
    NonZero / EyeLike idioms (default one per 10 nodes) spread evenly along it, alternately
    torch.nonzero (NonZero -> Transpose, a graph output) and EyeLike added back into the chain.
    With idioms=0 the model has no anchor at all (nothing for the compiler to lower)."""
    idioms = nodes // 10 if idioms is None else idioms
    x = h.make_tensor_value_info("x", TP.FLOAT, [8, 8])
    one = h.make_tensor("one", TP.FLOAT, [], [1.0])
    body, outputs, cur = [], [], "x"
    fillers = nodes - 2 * idioms
    # idiom i goes after filler number at[i]: evenly spaced along the chain
    at: "dict[int, list[int]]" = {}
    for i in range(idioms):
        at.setdefault(((i + 1) * fillers) // (idioms + 1), []).append(i)
    for j in range(fillers + 1):
        for i in at.get(j, ()):
            if i % 2 == 0:
                body.append(h.make_node("NonZero", [cur], [f"nz{i}"], name=f"nz{i}"))
                body.append(h.make_node("Transpose", [f"nz{i}"], [f"t{i}"], name=f"t{i}", perm=[1, 0]))
                outputs.append(h.make_tensor_value_info(f"t{i}", TP.INT64, [None, 2]))
            else:
                body.append(h.make_node("EyeLike", [cur], [f"e{i}"], name=f"e{i}", k=i % 3 - 1))
                body.append(h.make_node("Add", [cur, f"e{i}"], [f"a{i}"], name=f"a{i}"))
                cur = f"a{i}"
        if j == fillers:
            break
        op = ("Relu", "Neg", "Abs")[j % 3] if j % 2 else "Add"
        name = f"f{j}"
        body.append(h.make_node(op, [cur, "one"] if op == "Add" else [cur], [name], name=name))
        cur = name
    outputs.append(h.make_tensor_value_info(cur, TP.FLOAT, [8, 8]))
    graph = h.make_graph(body, "synthetic", [x], outputs, [one])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


def sparse_input(shape: "tuple[int, ...]", density: float, dtype: "type[np.generic]" = np.float32,
                 seed: int = 0) -> np.ndarray:
    """Non-zeros at `density`, built row block by row block (no full-size temporaries)."""
    rng = np.random.default_rng(seed)
    x = np.zeros(shape, dtype)
    flat = x.reshape(shape[0], -1)
    step = max(1, (1 << 22) // max(1, flat.shape[1]))
    for start in range(0, flat.shape[0], step):
        block = flat[start:start + step]
        keep = rng.random(block.shape, np.float32) < density
        if dtype == np.bool_:
            block[...] = keep
        else:
            block[keep] = np.asarray(rng.integers(1, 100, int(keep.sum())), dtype) if np.dtype(dtype).kind in "iu" \
                else rng.standard_normal(int(keep.sum()), np.float32).astype(dtype)
    return x


# -- runners ---------------------------------------------------------------------------------------

def ort_session(model: onnx.ModelProto) -> onnxruntime.InferenceSession:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def ours_runner(model: onnx.ModelProto, feeds: "dict[str, np.ndarray]") -> "tuple[Runner, str]":
    from onnx_dml_lowering.compiler import compile_model
    compiled = compile_model(model)
    placement = "; ".join(
        f"{'+'.join(p.onnx_nodes)}: {p.rule} -> {' + '.join(p.dml_operators) or 'no operator'}"
        if p.status == "lowered" else f"{'+'.join(p.onnx_nodes)}: left to ONNX ({p.reason})"
        for p in compiled.placement)
    onnx_nodes = {n for region in compiled.partition.regions.values() for n in (x.name for x in region)}
    if onnx_nodes:
        placement += f"; ONNX region on onnxruntime: {', '.join(sorted(onnx_nodes))}"
    return (lambda: compiled.run(feeds, strict=False)), placement


def same_result(ours: Runner, ort: "Callable[[], Sequence[np.ndarray]]") -> None:
    """The two sides must agree bit for bit before either is timed."""
    mine, theirs = ours()["y"], ort()[0]
    if mine.dtype != theirs.dtype or mine.shape != theirs.shape or not np.array_equal(mine, theirs):
        raise SystemExit(f"benchmark aborted: ours {mine.dtype}{list(mine.shape)} differs from "
                         f"onnxruntime's {theirs.dtype}{list(theirs.shape)}")


def best_of(sides: "dict[str, Callable[[], object]]", repeat: int, warmup: int = 1) -> "dict[str, float]":
    """Seconds per side: the minimum over `repeat` rounds; every round runs each side once."""
    for fn in sides.values():
        for _ in range(warmup):
            fn()
    best = {name: float("inf") for name in sides}
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for name, fn in sides.items():
                start = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - start)
    finally:
        if enabled:
            gc.enable()
    return best


def copy_bandwidth(repeat: int) -> float:
    """Bytes moved per second (read + write) by a copy of 64 MB into an existing array."""
    src = np.ones(64 * MB, np.uint8)
    dst = np.empty_like(src)
    dst.fill(0)
    seconds = best_of({"copy": lambda: np.copyto(dst, src)}, max(repeat, 5))["copy"]
    return 2 * src.nbytes / seconds


# -- the table -------------------------------------------------------------------------------------

class Table:
    HEADER = (f"{'benchmark':44} {'ours ms':>9} {'ort ms':>9} {'numpy ms':>9} {'ours/ort':>8} "
              f"{'ours/np':>8} {'traffic MB':>10} {'bound ms':>8} {'bound/ours':>10}  target")

    def __init__(self, bandwidth: float) -> None:
        self.bandwidth = bandwidth
        self.notes: "list[str]" = []
        self.verdicts: "list[tuple[str, bool | None, str]]" = []
        print(self.HEADER)
        print("-" * len(self.HEADER))

    def row(self, name: str, times: "dict[str, float]", traffic: "int | None" = None,
            target: "float | None" = None, bound_target: "float | None" = None, note: str = "") -> None:
        ours, ort, npy = times.get("ours"), times.get("ort"), times.get("numpy")

        def ms(t: "float | None") -> str:
            return f"{t * 1e3:9.2f}" if t is not None else f"{'-':>9}"

        def ratio(a: "float | None", b: "float | None") -> str:
            return f"{a / b:8.2f}" if a is not None and b else f"{'-':>8}"

        bound = traffic / self.bandwidth if traffic else None
        reached = bound / ours if bound and ours else None
        goal, ok = [], None
        if target is not None and ours and ort:
            met = ours / ort <= target
            goal.append(f"ours/ort <= {target:g} {'met' if met else 'NOT met'}")
            ok = met
        if bound_target is not None and reached is not None:
            met = reached >= bound_target
            goal.append(f"bound/ours >= {bound_target:g} {'met' if met else 'NOT met'}")
            ok = met if ok is None else ok and met
        print(f"{name:44} {ms(ours)} {ms(ort)} {ms(npy)} {ratio(ours, ort)} {ratio(ours, npy)} "
              f"{traffic / MB if traffic else 0:10.1f} {bound * 1e3 if bound else 0:8.2f} "
              f"{reached if reached is not None else 0:10.2f}  {'; '.join(goal)}", flush=True)
        if note:
            print(f"    {note}", flush=True)
        if ok is not None:
            self.verdicts.append((name, ok, "; ".join(goal)))

    def line(self, text: str) -> None:
        print(text, flush=True)


def nonzero_rows(table: Table, args: argparse.Namespace) -> None:
    n = args.nz_side
    cases = [("NonZero float32 {n}x{n} 1%", np.float32, TP.FLOAT, 0.01),
             ("NonZero float32 {n}x{n} 50%", np.float32, TP.FLOAT, 0.5),
             ("NonZero int64 {n}x{n} 50%", np.int64, TP.INT64, 0.5),
             ("NonZero bool {n}x{n} 50%", np.bool_, TP.BOOL, 0.5)]
    for label, dtype, onnx_type, density in cases:
        x = sparse_input((n, n), density, dtype)
        model = single("NonZero", onnx_type, (n, n), TP.INT64, (2, None))
        ours, placement = ours_runner(model, {"x": x})
        session = ort_session(model)
        same_result(ours, lambda: session.run(None, {"x": x}))
        times = best_of({"ours": ours, "ort": lambda: session.run(None, {"x": x}),
                         "numpy": lambda: np.stack(np.nonzero(x))}, args.repeat)
        nnz = int(np.count_nonzero(x))
        target = 0.5 if dtype == np.float32 else None
        table.row(label.format(n=n), times, x.nbytes + 2 * 8 * nnz, target,
                  note=f"ours: {placement}; numpy: np.stack(np.nonzero(x))")
        if dtype == np.float32:
            from onnx_dml_lowering.compiler import compile_model
            compiled = compile_model(model)
            strict = best_of({"ours": lambda: compiled.run({"x": x}, strict=True),
                              "ort": lambda: session.run(None, {"x": x})}, max(2, args.repeat // 2))
            table.row(label.format(n=n) + " strict", strict, x.nbytes + 2 * 8 * nnz,
                      note="ours in strict mode: fresh buffers and undefined coordinate rows poisoned "
                           "(allowed to cost more; outputs bit-identical to the default mode)")
        x = session = ours = None  # type: ignore[assignment]  # this row's arrays go before the next row


def transpose_rows(table: Table, args: argparse.Namespace) -> None:
    n = args.nz_side
    for density in (0.01, 0.5):
        x = sparse_input((n, n), density)
        model = nonzero_transpose(TP.FLOAT, (n, n))
        ours, placement = ours_runner(model, {"x": x})
        session = ort_session(model)
        same_result(ours, lambda: session.run(None, {"x": x}))
        times = best_of({"ours": ours, "ort": lambda: session.run(None, {"x": x}),
                         "numpy": lambda: np.argwhere(x)}, args.repeat)
        nnz = int(np.count_nonzero(x))
        fused = "nonzero_transpose" in placement
        table.row(f"Transpose(NonZero) float32 {n}x{n} {density:.0%}", times, x.nbytes + 2 * 8 * nnz,
                  0.35 if fused else None,
                  note=(f"ours: {placement}; "
                        + ("fused: one NONZERO_COORDINATES, the result is the buffer's prefix"
                           if fused else "NOT fused today: NonZero lowered, Transpose on onnxruntime")
                        + "; ort: NonZero + Transpose; numpy: np.argwhere(x)"))
        x = session = ours = None  # type: ignore[assignment]  # dropped: this row's arrays go


def eyelike_rows(table: Table, args: argparse.Namespace) -> None:
    n = args.eye_side
    x = np.zeros((n, n), np.float32)
    for k in (0, 1):
        model = single("EyeLike", TP.FLOAT, (n, n), TP.FLOAT, (n, n), k=k)
        ours, placement = ours_runner(model, {"x": x})
        session = ort_session(model)
        same_result(ours, lambda: session.run(None, {"x": x}))
        times = best_of({"ours": ours, "ort": lambda: session.run(None, {"x": x}),
                         "numpy": lambda: np.eye(n, n, k, dtype=np.float32)}, args.repeat)
        table.row(f"EyeLike float32 {n}x{n} k={k}", times, 4 * n * n, 0.5, 0.5,
                  note=f"ours: {placement}; numpy: np.eye")
        session = ours = None  # type: ignore[assignment]  # dropped: this row's arrays go

    from onnx_dml_lowering.ir import DataType, DiagonalMatrix, Download, Graph, TensorDesc, parse_level
    from onnx_dml_lowering.runtime.interpreter import execute
    batch, side = args.batch
    shape = (batch, side, side)
    graph = Graph(parse_level("5_1"))
    graph.add_buffer("out", 4 * batch * side * side)
    graph.add_view("out.view", "out", TensorDesc(DataType.FLOAT32, shape))
    graph.add(DiagonalMatrix("out.view", 0, 1.0))
    graph.add(Download("out.view", "y", TP.FLOAT, shape))
    graph.outputs.append("y")
    verify_graph(graph)
    session = ort_session(eye_expand(batch, side))
    xs = np.zeros((side, side), np.float32)

    def numpy_batched() -> np.ndarray:
        out = np.zeros(shape, np.float32)
        out.reshape(batch, -1)[:, ::side + 1] = 1
        return out

    same_result(lambda: execute(graph, {}, strict=False), lambda: session.run(None, {"x": xs}))
    times = best_of({"ours": lambda: execute(graph, {}, strict=False),
                     "ort": lambda: session.run(None, {"x": xs}), "numpy": numpy_batched}, args.repeat)
    table.row(f"DIAGONAL_MATRIX float32 {list(shape)}", times, 4 * batch * side * side, 0.5, 0.5,
              note="ours: the IR operator (one batched DIAGONAL_MATRIX) on the emulator; "
                   "ort: EyeLike + Expand; numpy: zeros + strided diagonal")


def scaling_rows(table: Table, args: argparse.Namespace) -> None:
    per_element: "list[float]" = []
    for side in args.scaling:
        x = sparse_input((side, side), 0.1)
        model = single("NonZero", TP.FLOAT, (side, side), TP.INT64, (2, None))
        ours, _ = ours_runner(model, {"x": x})
        session = ort_session(model)
        same_result(ours, lambda: session.run(None, {"x": x}))
        times = best_of({"ours": ours, "ort": lambda: session.run(None, {"x": x})}, args.repeat)
        m = side * side
        per_element.append(times["ours"] / m)
        nnz = int(np.count_nonzero(x))
        table.row(f"NonZero float32 10% {side}x{side} ({m // 2 ** 20 or m / 2 ** 20:g}M)", times, x.nbytes + 16 * nnz,
                  note=f"ns/element: ours {times['ours'] / m * 1e9:.2f}, ort {times['ort'] / m * 1e9:.2f}")
        x = session = ours = None  # type: ignore[assignment]  # dropped: this row's arrays go
    growth = max(b / a for a, b in zip(per_element, per_element[1:]))
    table.line(f"    scaling: ours' ns/element {', '.join(f'{t * 1e9:.2f}' for t in per_element)} from "
               f"{args.scaling[0] ** 2 / 2 ** 20:g}M to {args.scaling[-1] ** 2 / 2 ** 20:g}M elements; "
               f"largest step-to-step growth {growth:.2f}x (flat or falling: <= 1.2)")
    table.verdicts.append(("NonZero time per element flat", growth <= 1.2,
                           f"ns/element never grows by more than 1.2x from one size to the next ({growth:.2f})"))


def compile_rows(table: Table, args: argparse.Namespace) -> None:
    """Compile time against onnxruntime session creation (both from the serialized model), and
    against the floor every compile pays: onnx.load + the checker (+ strict shape inference)."""
    from onnx_dml_lowering.compiler import compile_model

    def times(nodes: int, idioms: "int | None") -> "tuple[int, int, dict[str, float]]":
        model = synthetic_model(nodes, idioms)
        data = model.SerializeToString()
        reps = 3 if nodes <= 2500 else 2

        def floor(infer: bool) -> None:
            loaded = onnx.load_from_string(data)
            onnx.checker.check_model(loaded)
            if infer:
                onnx.shape_inference.infer_shapes(loaded, check_type=True, strict_mode=True, data_prop=True)

        best: "dict[str, list[float]]" = {"ours": [], "ort": [], "load+checker": [], "+inference": []}
        for _ in range(reps):         # interleaved rounds, best of each
            best["ours"].append(_timed(lambda: compile_model(data)))
            best["ort"].append(_timed(lambda: ort_session_bytes(data)))
            best["load+checker"].append(_timed(lambda: floor(False)))
            best["+inference"].append(_timed(lambda: floor(True)))
        count = len(model.graph.node)
        anchors = sum(1 for n in model.graph.node if n.op_type in ("NonZero", "EyeLike"))
        return count, anchors, {k: min(v) for k, v in best.items()}

    header = (f"{'ours s':>8} {'ort s':>8} {'ours/ort':>8} {'load+chk s':>10} {'+infer s':>9} "
              f"{'ours/load+chk':>13} {'ours us/node':>12}")

    def line(label: str, count: int, t: "dict[str, float]") -> None:
        table.line(f"{label:44} {t['ours']:8.3f} {t['ort']:8.3f} {t['ours'] / t['ort']:8.3f} "
                   f"{t['load+checker']:10.3f} {t['+inference']:9.3f} {t['ours'] / t['load+checker']:13.2f} "
                   f"{t['ours'] / count * 1e6:12.1f}")

    table.line(f"{'compile: nodes vs time (1 idiom / 10 nodes)':44} {header}")
    rows = []
    for nodes in args.compile_nodes:
        count, anchors, t = times(nodes, None)
        rows.append((count, t))
        line(f"{count} nodes, {anchors} NonZero/EyeLike idioms", count, t)
    count, t = rows[-1]
    ratio = t["ours"] / t["ort"]
    table.line(f"    target: compile <= 0.25 x onnxruntime session creation at {count} nodes, {count // 10} idioms: "
               f"{ratio:.3f} {'met' if ratio <= 0.25 else 'NOT met'}")
    table.verdicts.append((f"compile {count} nodes, {count // 10} idioms", ratio <= 0.25, f"ours/ort {ratio:.3f} <= 0.25"))
    per_node = [r[1]["ours"] / r[0] for r in rows]
    spread = max(per_node) / min(per_node)
    table.line(f"    linearity: ours' time per node varies by {spread:.2f}x over {rows[0][0]}..{count} nodes")
    table.verdicts.append(("compile linear in nodes", spread <= 1.5, f"max/min time per node {spread:.2f} <= 1.5"))

    nodes = args.compile_nodes[-1]
    table.line(f"{f'compile: anchors vs time ({nodes} nodes)':44} {header}")
    anchor_rows = []
    for idioms in args.compile_anchors:
        count, anchors, t = times(nodes, idioms)
        anchor_rows.append((anchors, t))
        line(f"{count} nodes, {anchors} NonZero/EyeLike idioms", count, t)
    base = anchor_rows[0][1]
    over = base["ours"] / base["load+checker"]
    table.line(f"    no anchor: compile {base['ours']:.3f} s = {over:.2f} x onnx.load + checker "
               f"({base['load+checker']:.3f} s; with strict shape inference {base['+inference']:.3f} s)")
    table.verdicts.append((f"compile {nodes} nodes, no anchor", over <= 2.0,
                           f"ours / (onnx.load + checker) {over:.2f} <= 2 (shape inference, which "
                           f"compile needs for the types, costs {base['+inference'] / base['load+checker']:.2f} x alone)"))
    (a0, t0), (a1, t1) = anchor_rows[0], anchor_rows[-1]
    table.line(f"    per anchor: {(t1['ours'] - t0['ours']) / max(1, a1 - a0) * 1e3:.3f} ms of compile per idiom "
               f"beyond the no-anchor model")


def ort_session_bytes(data: bytes) -> onnxruntime.InferenceSession:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def _timed(fn: "Callable[[], object]") -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def peak_rows(table: Table, args: argparse.Namespace) -> None:
    n = args.peak_side
    table.line(f"{'peak resident memory (fresh process each)':44} {'ours MB':>9} {'ort MB':>9} {'ours/ort':>9} "
               f"{'ours +MB':>9} {'ort +MB':>9}")
    for density in (0.01, 0.5):
        result = {side: _peak_child(side, n, density) for side in ("ours", "ort")}
        ours, ort = result["ours"], result["ort"]
        assert ours["nnz"] == ort["nnz"], (ours, ort)
        met = ours["peak_mb"] <= ort["peak_mb"]
        for side, r in result.items():
            if abs(r["peak_mb"] - r["vm_hwm_mb"]) > 0.05 * r["vm_hwm_mb"]:
                table.line(f"    warning: {side}: ru_maxrss {r['peak_mb']:.0f} MB but VmHWM {r['vm_hwm_mb']:.0f} MB")
        table.line(f"{f'NonZero float32 {n}x{n} {density:.0%}':44} {ours['peak_mb']:9.0f} {ort['peak_mb']:9.0f} "
                   f"{ours['peak_mb'] / ort['peak_mb']:9.2f} {ours['peak_mb'] - ours['before_mb']:9.0f} "
                   f"{ort['peak_mb'] - ort['before_mb']:9.0f}  ours <= ort {'met' if met else 'NOT met'}")
        table.verdicts.append((f"peak memory NonZero {n}x{n} {density:.0%}", met,
                               f"ours {ours['peak_mb']:.0f} MB <= ort {ort['peak_mb']:.0f} MB"))
    table.line("    peak = ru_maxrss of the whole process (Python, numpy, onnx, onnxruntime, the input and "
               "the run); +MB = peak minus the resident size just before the run")


# Linux keeps a process's peak RSS across exec, and a child started from this (large) process
# would report this process's peak as its own: a small launcher process starts the measured one.
_LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def _peak_child(side: str, n: int, density: float) -> dict:
    out = subprocess.run([sys.executable, "-c", _LAUNCHER, sys.executable, str(Path(__file__).resolve()),
                          "--peak-child", side, "--peak-side", str(n), "--peak-density", str(density)],
                         capture_output=True, text=True, check=True, cwd=str(ROOT))
    return json.loads(out.stdout.strip().splitlines()[-1])


def peak_child(side: str, n: int, density: float) -> None:
    """In a fresh process: build the input, one run of one side, report ru_maxrss."""
    import onnxruntime  # noqa: F401  (both sides pay for the same imports)
    from onnx_dml_lowering.compiler import compile_model
    x = sparse_input((n, n), density)
    model = single("NonZero", TP.FLOAT, (n, n), TP.INT64, (2, None))
    if side == "ort":
        session = ort_session(model)
        run = lambda: session.run(None, {"x": x})[0]          # noqa: E731
    else:
        compiled = compile_model(model)
        run = lambda: compiled.run({"x": x}, strict=False)["y"]  # noqa: E731
    gc.collect()
    with open("/proc/self/statm") as f:
        before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB
    start = time.perf_counter()
    y = run()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024      # KiB on Linux
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    print(json.dumps({"side": side, "peak_mb": peak, "vm_hwm_mb": hwm, "before_mb": before,
                      "seconds": seconds, "nnz": int(y.shape[1])}))


# -- main ------------------------------------------------------------------------------------------

SECTIONS = {"nonzero": nonzero_rows, "transpose": transpose_rows, "eyelike": eyelike_rows,
            "scaling": scaling_rows, "compile": compile_rows, "peak": peak_rows}


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats: a smoke run")
    parser.add_argument("--only", nargs="+", choices=list(SECTIONS), help="run only these sections")
    parser.add_argument("--repeat", type=int, help="timed rounds per row (default 7, quick 2)")
    parser.add_argument("--peak-child", choices=["ours", "ort"], help=argparse.SUPPRESS)
    parser.add_argument("--peak-side", type=int, default=8192, help=argparse.SUPPRESS)
    parser.add_argument("--peak-density", type=float, default=0.5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.peak_child:
        peak_child(args.peak_child, args.peak_side, args.peak_density)
        return 0
    if args.quick:
        args.repeat = args.repeat or 2
        args.nz_side, args.eye_side, args.batch = 1024, 2048, (4, 512)
        args.scaling, args.compile_nodes, args.peak_side = (512, 1024, 2048), (500, 1000), 2048
        args.compile_anchors = (0, 10, 100)
    else:
        args.repeat = args.repeat or 7
        args.nz_side, args.eye_side, args.batch = 4096, 8192, (16, 1024)
        args.scaling, args.compile_nodes, args.peak_side = (1024, 2048, 4096, 8192), (1000, 2500, 5000, 10000), 8192
        args.compile_anchors = (0, 10, 100, 1000)

    import onnxruntime as ort
    bandwidth = copy_bandwidth(args.repeat)
    print(f"numpy {np.__version__}, onnx {onnx.__version__}, onnxruntime {ort.__version__}, "
          f"{os.cpu_count()} CPUs; ort: CPUExecutionProvider, intra_op_num_threads=1; "
          f"best of {args.repeat} after warm-up, sides interleaved")
    print(f"copy bandwidth (64 MB copy, read + write): {bandwidth / 1e9:.1f} GB/s")
    table = Table(bandwidth)
    for name, section in SECTIONS.items():
        if args.only and name not in args.only:
            continue
        section(table, args)
        gc.collect()
    print()
    print("targets" + (" (quick sizes: indicative only, the targets are set for the full sizes):" if args.quick else ":"))
    for name, ok, text in table.verdicts:
        print(f"  {'met    ' if ok else 'NOT met'}  {name}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
