"""`dml-lower` on real-size models against onnxruntime, time and peak memory, measured in one run.

    .venv/bin/python benchmarks/realsize_bench.py [--models DIR] [--only NAME ...] [--repeat N]
                                                  [--commands check ...] [--write-docs [FILE]]

The models come from benchmarks/realsize_models.py (`make bench-realsize` exports them once into
~/.cache/onnx-dml-lowering/realsize, or $DML_LOWER_REALSIZE, then runs this script). Each command
runs as a fresh process on the same feeds (an .npz made from the model's `<name>.json`: token ids
over the vocabulary, an all-ones attention mask, images in [0, 1]) and is measured by its wall
time and its peak resident set size (os.wait4's ru_maxrss, file-backed pages of memory maps
included). Best of N, every side of a model interleaved in each round. The feeds are written under
build/realsize_feeds, never into the models' folder (a shared export is read-only to its readers).
Each row records the 1-minute load average before and after its model was measured: on a shared
machine the wall times of both sides inflate under load, and the ratios get noisier.

  ort create+run   a Python process that imports onnxruntime, creates a CPU session on the file
                   (default options) and runs it once: the reference for check and run
  ort create       the same without the run: the reference for compile and inspect
  check            dml-lower check MODEL --inputs FEEDS -q (default backends: cpu, ort)
  check-3          dml-lower check MODEL --inputs FEEDS -q --backends cpu,ort,ort-cpu
  run              dml-lower run MODEL --inputs FEEDS -q
  compile          dml-lower compile MODEL (its printout to /dev/null)
  inspect          dml-lower inspect MODEL

Targets: check and run within 1.3x the create+run process in time and 1.2x in peak RSS, compile and
inspect within 1.0x session creation (issue #28); check-3, which runs onnxruntime's work twice by
design (the oracle's regions and the file as shipped), within 2.0x and 1.6x (issue #38). The
1-minute load average before and after each model's rounds is in its row: on a shared machine wall
times are inflated by it, peak RSS is not. `--write-docs` writes the table,
with the commit and machine it ran on, between the `<!-- realsize:begin -->` and
`<!-- realsize:end -->` lines of docs/performance.md (or of FILE). Ratios only mean something
within one run on one machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = Path(os.environ.get("DML_LOWER_REALSIZE", Path.home() / ".cache" / "onnx-dml-lowering" / "realsize"))
FEEDS_DIR = ROOT / "build" / "realsize_feeds"
ORDER = ["gpt2", "gpt2_external", "bert", "llama", "llama_external", "whisper_small", "mask_rcnn", "ssdlite"]
BEGIN, END = "<!-- realsize:begin -->", "<!-- realsize:end -->"
DOCS_PAGE = ROOT / "docs" / "performance.md"

ORT_PROCESS = """
import sys, numpy as np, onnxruntime as ort
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
if sys.argv[2] != "-":
    session.run(None, dict(np.load(sys.argv[2])))
"""

# command -> (argv after `dml-lower`, the reference side, time target, memory target)
COMMANDS = {
    "check": (["check", "{model}", "--inputs", "{feeds}", "-q"], "ort create+run", 1.3, 1.2),
    "check-3": (["check", "{model}", "--inputs", "{feeds}", "-q", "--backends", "cpu,ort,ort-cpu"],
                "ort create+run", 2.0, 1.6),
    "run": (["run", "{model}", "--inputs", "{feeds}", "-q"], "ort create+run", 1.3, 1.2),
    "compile": (["compile", "{model}"], "ort create", 1.0, None),
    "inspect": (["inspect", "{model}"], "ort create", 1.0, None),
}


# Every side runs as installed code runs: with its bytecode cached. PYTHONDONTWRITEBYTECODE (set in
# some sandboxes and CI images) made each dml-lower process compile our ~60 modules again, ~0.1-0.3 s
# of CPU that onnxruntime's process (its modules precompiled by pip) never paid.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


# The measured process is started by this small launcher, never by the benchmark itself: Linux
# carries the RSS high-water mark of the memory a child is forked (or vforked) from into the
# child's ru_maxrss at exec, so a child of the benchmark's own process (numpy, onnx and our
# compiler imported, ~80 MiB) never reported less than that: every side of a tiny model read ~79
# MiB. The launcher (`python -S`, ~10 MiB) spawns the command, waits for it with os.wait4 and
# prints its wall time, peak RSS, exit status and CPU time (user + system, its threads and children
# included: a shared machine's load inflates wall time far more than it); the command's stdout goes
# to /dev/null and its stderr to ours.
LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ,
                     file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status),
      usage.ru_utime + usage.ru_stime)
"""


def measure(argv: "list[str]") -> "tuple[float, int, int]":
    """(wall seconds, peak RSS in bytes, exit code) of one process. check's exit 1 is a verdict (a
    MISMATCH), measured like a pass and marked in the table; any other failure stops the benchmark."""
    seconds, rss, code, _ = measure_with_cpu(argv)
    return seconds, rss, code


def measure_with_cpu(argv: "list[str]") -> "tuple[float, int, int, float]":
    """measure(), and the process's CPU seconds (user + system)."""
    done = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, *argv], capture_output=True, env=CHILD_ENV)
    error = done.stderr.decode(errors="replace").strip()
    if done.returncode != 0:
        raise SystemExit(f"the launcher of {' '.join(argv)} failed: {error[-600:]}")
    seconds, rss, code, cpu = done.stdout.decode().split()
    if int(code) != 0 and not (int(code) == 1 and "check" in argv):
        raise SystemExit(f"{' '.join(argv)} exited {code}: {error[-600:]}")
    return float(seconds), int(rss), int(code), float(cpu)


def make_feeds(spec: dict, path: Path) -> None:
    rng = np.random.default_rng(0)
    feeds = {}
    for name, info in spec["inputs"].items():
        low, high = info["range"]
        if info["dtype"].startswith("int"):
            feeds[name] = rng.integers(low, high + 1, size=info["shape"], dtype=np.dtype(info["dtype"]))
        else:
            feeds[name] = rng.uniform(low, high, size=info["shape"]).astype(info["dtype"])
    np.savez(path, **feeds)


def sides(model: Path, feeds: Path, commands: "list[str]") -> "dict[str, list[str]]":
    cli = [str(Path(sys.executable).with_name("dml-lower"))]
    out = {"ort create+run": [sys.executable, "-c", ORT_PROCESS, str(model), str(feeds)],
           "ort create": [sys.executable, "-c", ORT_PROCESS, str(model), "-"]}
    for command in commands:
        argv = COMMANDS[command][0]
        out[command] = cli + [a.format(model=model, feeds=feeds) for a in argv]
    return out


def weights_bytes(model: Path) -> int:
    data = model.with_name(model.name + ".data")
    return model.stat().st_size + (data.stat().st_size if data.exists() else 0)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB, {platform.system()} {platform.release()}"


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + (" (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else "")


Measured = tuple[float, int, int, float]        # wall seconds, peak RSS bytes, exit code, CPU seconds


def ratio(value: float, reference: float, target: "float | None") -> str:
    text = f"{value / reference:.2f}x"
    return text if target is None else text + ("" if value / reference <= target else " (miss)")


def table(results: "dict[str, dict[str, Measured]]", sizes: "dict[str, int]",
          loads: "dict[str, tuple[float, float]]", commands: "list[str]", repeat: int) -> str:
    import onnxruntime
    lines = [f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC at commit {commit()} on {machine()}, "
             f"onnxruntime {onnxruntime.__version__}, best of {repeat}. Each cell: time ratio (CPU time ratio), "
             "peak RSS ratio against the reference process; (miss) where a target is missed (on wall time "
             "and peak RSS); * where check reported a MISMATCH (exit 1).", ""]
    header = ["model", "weights", "load 1 min (before / after)", "ort create+run", "ort create"] + commands
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for name, result in results.items():
        row = [name, f"{sizes[name] / 2**20:,.0f} MiB", "{:.1f} / {:.1f}".format(*loads[name])]
        for side in ("ort create+run", "ort create"):
            seconds, rss, _, cpu = result[side]
            row.append(f"{seconds:.2f} s (CPU {cpu:.2f} s), {rss / 2**30:.2f} GiB")
        for command in commands:
            _, reference, time_target, memory_target = COMMANDS[command]
            seconds, rss, code, cpu = result[command]
            ref_seconds, ref_rss, _, ref_cpu = result[reference]
            row.append(f"{ratio(seconds, ref_seconds, time_target)} (CPU {cpu / ref_cpu:.2f}x), "
                       f"{ratio(rss, ref_rss, memory_target)}" + (" *" if code else ""))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def write_table(path: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace what stands between the `begin` and `end` lines of `path` (the realsize ones by
    default; polygraphy_bench.py writes its own) with `text`."""
    content = path.read_text()
    if begin not in content or end not in content:
        raise SystemExit(f"{path} has no {begin} ... {end} lines to write the table between")
    head, rest = content.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{text}\n{end}{tail}")


def parse_args(argv: "list[str] | None" = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    parser.add_argument("--only", nargs="+", choices=ORDER, default=ORDER)
    parser.add_argument("--commands", nargs="+", choices=list(COMMANDS), default=list(COMMANDS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-docs", type=Path, nargs="?", const=DOCS_PAGE, metavar="FILE",
                        help="write the table between the realsize lines of docs/performance.md (or FILE)")
    return parser.parse_args(argv)


def main(argv: "list[str] | None" = None) -> None:
    args = parse_args(argv)
    results: "dict[str, dict[str, Measured]]" = {}
    sizes: "dict[str, int]" = {}
    loads: "dict[str, tuple[float, float]]" = {}
    for name in args.only:
        model, spec_file = args.models / f"{name}.onnx", args.models / f"{name}.json"
        if not model.exists() or not spec_file.exists():
            raise SystemExit(f"{model} is missing: export it with `make bench-realsize` "
                             "(or benchmarks/realsize_models.py)")
        FEEDS_DIR.mkdir(parents=True, exist_ok=True)
        feeds = FEEDS_DIR / f"{name}.feeds.npz"
        make_feeds(json.loads(spec_file.read_text()), feeds)
        sizes[name] = weights_bytes(model)
        argvs = sides(model, feeds, args.commands)
        measure(argvs["ort create"])                     # the page cache warm for every side
        measure(argvs[args.commands[0]])                 # and our bytecode cached
        best: "dict[str, Measured]" = {}
        before = os.getloadavg()[0]
        for _ in range(args.repeat):
            for side, argv in argvs.items():
                seconds, rss, code, cpu = measure_with_cpu(argv)
                old = best.get(side)
                best[side] = ((min(seconds, old[0]), min(rss, old[1]), code, min(cpu, old[3])) if old
                              else (seconds, rss, code, cpu))
        results[name] = best
        loads[name] = (before, os.getloadavg()[0])
        print(f"{name}: " + ", ".join(f"{s} {t:.2f} s (CPU {c:.2f} s) {r / 2**30:.2f} GiB"
                                      for s, (t, r, _, c) in best.items()),
              flush=True)
    text = table(results, sizes, loads, args.commands, args.repeat)
    print()
    print(text)
    if args.write_docs is not None:
        write_table(args.write_docs, text)


if __name__ == "__main__":
    main()
