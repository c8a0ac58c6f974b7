"""DirectML for real: what the DirectML host costs (make directml first; docs/directml-on-linux.md).

    .venv/bin/python benchmarks/directml_bench.py [--starts 3] [--repeats 200]

Measures, each figure with the 1-minute load average beside it (the machine may be shared):
  - host start-up: a fresh dml_host process until its hello (Wine, the D3D12 device, DirectML at
    its highest level, the shader-visible descriptor heap, the known-answer self-test), in a cold
    Wine session (the first command after 30 s idle: run the benchmark 30 s after any DirectML
    command on this HOME, or the "cold" starts find the session kept) and in a warm one (the
    commands that follow);
  - one operator in a warm host: the first run of a descriptor (create, compile, initialise,
    dispatch, read back) and the median of later runs (the compiled operator cached);
  - where the start-up goes: the Xvfb, Wine's own start, the D3D12 device, the DirectML device and
    the self-test (the host prints its part on stderr under DML_LOWER_HOST_TIMING=1);
  - check: the `dml` backend against `cpu` on the bundled examples and the committed exports
    (tests/models/*.onnx), each backend's own time in check, the host already warm, as a ratio;
  - host requests: the `dml` backend run in this process on each model of --compare (the host
    started), how many host requests it made and the seconds spent waiting on them (each request
    is one DirectML operator: its bytes up, DirectML's dispatches run by the device, its outputs
    back), against the backend's own time in check;
  - --compare: whole commands as the user runs them, each a fresh process, `check --backends
    cpu,dml` against `check --backends cpu,ort` (same feeds; interleaved, best of --repeat) on the
    bundled examples and the real-size set (benchmarks/realsize_models.py, `make bench-realsize`),
    as time ratios, the `dml` side twice: in a cold Wine session (what one command pays by
    default: the benchmark waits until no wineserver serves the prefix, which other DirectML users
    of this HOME may keep up: such a run is marked) and in a warm one (the commands that follow
    one, DML_LOWER_WINESERVER_PERSIST set); --write-docs puts that table and the figures above
    into docs/performance.md.
No figure is asserted: this prints what it measured.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from onnx_dml_lowering.compiler import compile_model                          # noqa: E402
from onnx_dml_lowering.compiler.examples import example_paths                 # noqa: E402
from onnx_dml_lowering.ir import DataType, TensorDesc                         # noqa: E402
from onnx_dml_lowering.runtime.check import BackendOptions, Tolerances, check  # noqa: E402
from onnx_dml_lowering.runtime.directml.dml_host import DmlHost, drop_shared_host, shared_host  # noqa: E402
from onnx_dml_lowering.runtime.directml.home import find_home                 # noqa: E402
from onnx_dml_lowering.runtime.directml import wine                           # noqa: E402
from onnx_dml_lowering.runtime.feeds import random_feeds                      # noqa: E402
from onnx_dml_lowering.runtime.npz import load_npz                            # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import realsize_bench  # noqa: E402  (the one-process measure, the feeds, the machine and commit lines, the page writer)

BEGIN, END = "<!-- directml:begin -->", "<!-- directml:end -->"
LINES: "list[str]" = []          # what --write-docs writes: every figure printed, in order


def say(line: str) -> None:
    print(line, flush=True)
    LINES.append(line)


def load() -> str:
    return f"(load {os.getloadavg()[0]:.1f})"


def host_start(starts: int, session: str) -> None:
    """`session` "cold": Wine's session gone before each start (its wineserver not kept: the
    default); "warm": kept up between starts (wine.keep_session, 30 s), as for commands
    run in a row with DML_LOWER_WINESERVER_PERSIST set."""
    home = find_home()
    os.environ["DML_LOWER_HOST_TIMING"] = "1"
    os.environ[wine.PERSIST_ENV] = "0" if session == "cold" else "30"
    xvfb_seconds: "list[float]" = []
    make_xvfb = wine.Xvfb.__init__

    def timed_xvfb(self: wine.Xvfb, *args: Any, **kwargs: Any) -> None:
        began = time.perf_counter()
        make_xvfb(self, *args, **kwargs)
        xvfb_seconds.append(time.perf_counter() - began)
    wine.Xvfb.__init__ = timed_xvfb             # type: ignore[method-assign]
    try:
        for _ in range(starts):
            # cold: until no wineserver serves the prefix (ours leaves once its last client has;
            # another DirectML user's may not: that start is marked *)
            as_asked = wait_cold(home.prefix) if session == "cold" else True
            began = time.perf_counter()
            with DmlHost(home) as host:
                host.start()
                total = time.perf_counter() - began
                time.sleep(0.2)                 # the stderr reader has the host's timing line
                said = host.process.stderr_line().removeprefix("dml_host start-up: ")
            xvfb = xvfb_seconds[-1] if xvfb_seconds else 0.0
            say(f"host start-up, {session} Wine session: {total:.2f} s (Xvfb {xvfb:.2f} s; in the host: {said}; the rest is Wine starting "
                f"the process) {load()}{'' if as_asked else ' *'}")
    finally:
        wine.Xvfb.__init__ = make_xvfb          # type: ignore[method-assign]
        os.environ.pop("DML_LOWER_HOST_TIMING", None)
        os.environ.pop(wine.PERSIST_ENV, None)


def operators(repeats: int) -> None:
    host = shared_host()
    cases: "dict[str, tuple[str, list[TensorDesc | None], bytes]]" = {
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
        say(f"{label}: first {first * 1e3:.1f} ms, cached median {statistics.median(times) * 1e3:.2f} ms "
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
        say(f"check {path.name}: cpu {cpu * 1e3:.1f} ms, dml {dml * 1e3:.1f} ms, dml/cpu {dml / cpu:.1f}x {load()}")


def requests(models: "list[tuple[str, Path, Path | None]]") -> None:
    """The `dml` backend's host requests on each model: count and seconds inside them."""
    host = shared_host()
    host.start()
    process = host.process
    plain = process.request
    inside = [0.0]

    def timed(payload: bytes) -> bytes:
        began = time.perf_counter()
        try:
            return plain(payload)
        finally:
            inside[0] += time.perf_counter() - began
    process.request = timed               # type: ignore[method-assign]
    try:
        for name, model, feeds_path in models:
            compiled = compile_model(str(model))
            feeds = load_npz(str(feeds_path)) if feeds_path else random_feeds(compiled.inputs, seed=0)
            before, inside[0] = process.requests, 0.0
            result = check(compiled, feeds, ["dml"], Tolerances(), BackendOptions())[1].backends[0]
            count = process.requests - before
            each = f" ({inside[0] / count * 1e3:.2f} ms each)" if count else ""
            say(f"host requests of the dml backend on {name}: {count}, {inside[0]:.3f} s inside them{each}, "
                f"of the backend's {result.seconds:.3f} s {load()}")
    finally:
        process.request = plain           # type: ignore[method-assign]


def compare_models(realsize: Path, only: "list[str]") -> "list[tuple[str, Path, Path | None]]":
    """(name, model, feeds or None for random ones) of the bundled examples and the real-size set."""
    models: "list[tuple[str, Path, Path | None]]" = [(p.stem, Path(p), None) for p in example_paths()]
    for name in only:
        model, spec = realsize / f"{name}.onnx", realsize / f"{name}.json"
        if not model.exists() or not spec.exists():
            raise SystemExit(f"{model} is missing: export it with `make bench-realsize` (or pass --only)")
        realsize_bench.FEEDS_DIR.mkdir(parents=True, exist_ok=True)
        feeds = realsize_bench.FEEDS_DIR / f"{name}.feeds.npz"     # never into the (shared, read-only) set
        realsize_bench.make_feeds(json.loads(spec.read_text()), feeds)
        models.append((name, model, feeds))
    return models


def session_up(prefix: Path) -> bool:
    """A wineserver serves the prefix: Wine's session is up (warm). Wine's server works in a
    folder named server-DEV-INODE of the prefix (under a temporary folder that depends on the
    system); its process is found by that working folder's name."""
    info = os.stat(prefix)
    folder = f"server-{info.st_dev:x}-{info.st_ino:x}"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/cwd")) == folder:
                return True
        except OSError:
            continue
    return False


def wait_cold(prefix: Path, limit: float = 30.0) -> bool:
    """Wait (up to `limit` s) until Wine's session on the prefix has ended; False: still up."""
    deadline = time.monotonic() + limit
    while session_up(prefix):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)
    return True


WARM_PERSIST = "5"      # seconds a warm run's session outlives it: the next cold run waits that long


def timed_dml(argv: "list[str]", prefix: Path, session: str) -> "tuple[float, bool]":
    """One `cpu,dml` check in a `session` ("cold", "warm") Wine session: (seconds, whether the
    session was as asked). A warm run follows an unmeasured one that started the session, both
    with DML_LOWER_WINESERVER_PERSIST set (the environment of realsize_bench's measured process)."""
    env = realsize_bench.CHILD_ENV
    if session == "cold":
        env.pop(wine.PERSIST_ENV, None)
        cold = wait_cold(prefix)
        return realsize_bench.measure(argv)[0], cold
    env[wine.PERSIST_ENV] = WARM_PERSIST
    try:
        realsize_bench.measure(argv)
        warm = session_up(prefix)
        return realsize_bench.measure(argv)[0], warm
    finally:
        env.pop(wine.PERSIST_ENV, None)


def compare(realsize: Path, only: "list[str]", repeat: int) -> None:
    """check --backends cpu,dml against check --backends cpu,ort, whole processes, interleaved:
    the `dml` side in a cold Wine session (the default a single command pays), then in a warm one;
    a `dml` figure whose session was not as asked (another DirectML user of the prefix kept it up,
    or it had ended) is marked with *."""
    cli = str(Path(sys.executable).with_name("dml-lower"))
    prefix = find_home().prefix
    say("")
    say("| model | check cpu,ort | check cpu,dml | dml / ort | cpu,dml, warm Wine session | dml / ort | load |")
    say("|---|---|---|---|---|---|---|")
    for name, model, feeds in compare_models(realsize, only):
        argv = [cli, "check", str(model), "-q"] + (["--inputs", str(feeds)] if feeds else [])
        ort, best = float("inf"), {"cold": (float("inf"), True), "warm": (float("inf"), True)}
        for _ in range(repeat):
            ort = min(ort, realsize_bench.measure(argv + ["--backends", "cpu,ort"])[0])
            for session in best:
                best[session] = min(best[session], timed_dml(argv + ["--backends", "cpu,dml"], prefix, session))
        cells = [f"{best[s][0]:.2f} s{'' if best[s][1] else ' *'} | {best[s][0] / ort:.2f}x" for s in best]
        say(f"| {name} | {ort:.2f} s | {' | '.join(cells)} | {os.getloadavg()[0]:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3, help="host start-ups to time")
    parser.add_argument("--repeats", type=int, default=200, help="runs of each cached operator")
    parser.add_argument("--compare", action="store_true", help="also time check cpu,dml against check cpu,ort")
    parser.add_argument("--models", type=Path, default=realsize_bench.DEFAULT_MODELS, help="the real-size set")
    parser.add_argument("--only", nargs="*", choices=realsize_bench.ORDER, default=realsize_bench.ORDER)
    parser.add_argument("--repeat", type=int, default=2, help="--compare: best of this many runs of each")
    parser.add_argument("--write-docs", type=Path, nargs="?", const=realsize_bench.DOCS_PAGE, metavar="FILE",
                        help="write what was measured between the directml lines of docs/performance.md (or FILE)")
    args = parser.parse_args()
    say(f"Measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC at commit {realsize_bench.commit()} on "
        f"{realsize_bench.machine()}; the 1-minute load average beside each figure.")
    say("")
    host_start(args.starts, "cold")
    host_start(args.starts, "warm")
    operators(args.repeats)
    checks()
    if args.compare:
        # this process's own host (the operators and checks above) would keep Wine's session up,
        # and no `cold` run would find it gone
        drop_shared_host()
        compare(args.models, args.only, args.repeat)
        requests(compare_models(args.models, args.only))
    if args.write_docs:
        text = "\n".join(f"- {line}" if line and not line.startswith(("|", "Measured")) else line for line in LINES)
        realsize_bench.write_table(args.write_docs, text, BEGIN, END)


if __name__ == "__main__":
    main()
