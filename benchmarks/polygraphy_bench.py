"""`dml-lower` side by side with Polygraphy, time and peak memory, measured in one run.

    .venv/bin/python benchmarks/polygraphy_bench.py [--polygraphy PATH] [--realsize DIR]
                                                    [--only NAME ...] [--repeat N] [--write-docs [FILE]]

Polygraphy 0.53.x lives in a venv of its own (`make bench-polygraphy` makes `.venv-polygraphy`
with the same onnxruntime version as the project's venv, then runs this script). Three pairs of
commands, each a fresh process measured the same way on both sides (wall time and peak resident
set size from os.wait4's rusage, as realsize_bench.py measures):

  inspect   dml-lower inspect MODEL                   polygraphy inspect model MODEL
  run       dml-lower run MODEL --inputs F.npz -q     polygraphy run MODEL --onnxrt --load-inputs F.json -q
            --backends ort-cpu
  check     dml-lower check MODEL --inputs F.npz -q   polygraphy run MODEL --onnxrt --onnxrt
            --backends ort-cpu                        --load-inputs F.json -q

Both sides read the same feeds: one seeded set per model, saved as the .npz our --inputs reads and
as the JSON Polygraphy's --load-inputs reads (written by Polygraphy's own save_json). The models:
the tiny real exports of tests/models/real always, and the real-size set of
benchmarks/realsize_models.py when --realsize holds it. Each model's six sides run once to warm the
page cache and the bytecode, then N rounds, every side in each round (interleaved); best of N.
The load average (1 minute) is read before and after each model and printed beside its row.

Target (issue #38): every ratio (ours / Polygraphy's) <= 1.0. `--write-docs` writes the table, with
the commit, the machine and the onnxruntime version, between the `<!-- polygraphy:begin -->` and
`<!-- polygraphy:end -->` lines of docs/performance.md (or of FILE). Ratios only mean something
within one run on one machine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_bench  # noqa: E402  (a sibling script: the tiny exports' symbolic sizes and feeds)
import realsize_bench  # noqa: E402  (the one process measure, the machine and commit lines, the page writer)

ROOT = realsize_bench.ROOT
TINY = ROOT / "tests" / "models" / "real"
DEFAULT_POLYGRAPHY = ROOT / ".venv-polygraphy" / "bin" / "polygraphy"
BEGIN, END = "<!-- polygraphy:begin -->", "<!-- polygraphy:end -->"
DOCS_PAGE = realsize_bench.DOCS_PAGE
TARGET = 1.0

# command -> (dml-lower's argv, Polygraphy's argv); {model}, {npz}, {json} filled per model
PAIRS = {
    "inspect": (["inspect", "{model}"], ["inspect", "model", "{model}"]),
    "run": (["run", "{model}", "--inputs", "{npz}", "-q", "--backends", "ort-cpu"],
            ["run", "{model}", "--onnxrt", "--load-inputs", "{json}", "-q"]),
    "check": (["check", "{model}", "--inputs", "{npz}", "-q", "--backends", "ort-cpu"],
              ["run", "{model}", "--onnxrt", "--onnxrt", "--load-inputs", "{json}", "-q"]),
}

# Polygraphy's own writer of its --load-inputs file, run by its venv's Python.
TO_POLYGRAPHY_JSON = """
import sys, numpy as np
from polygraphy.json import save_json
save_json([dict(np.load(sys.argv[1]))], sys.argv[2])
"""

ORT_VERSION = "import onnxruntime; print(onnxruntime.__version__)"

Measure = "tuple[float, int, int]"   # wall seconds, peak RSS bytes, exit code


@dataclass
class Row:
    """One model's best-of-N measures, every side keyed 'ours <command>' / 'polygraphy <command>'."""
    model: str
    size: int
    best: "dict[str, tuple[float, int, int]]"
    load: "tuple[float, float]"          # the 1-minute load average before and after the model

    def ratios(self, command: str) -> "tuple[float, float]":
        """(time, peak RSS) of ours over Polygraphy's."""
        ours, theirs = self.best[f"ours {command}"], self.best[f"polygraphy {command}"]
        return ours[0] / theirs[0], ours[1] / theirs[1]


def sides(model: Path, npz: Path, feeds_json: Path, polygraphy: Path) -> "dict[str, list[str]]":
    cli = [str(Path(sys.executable).with_name("dml-lower"))]
    fill = {"model": str(model), "npz": str(npz), "json": str(feeds_json)}
    out = {}
    for command, (ours, theirs) in PAIRS.items():
        out[f"ours {command}"] = cli + [a.format(**fill) for a in ours]
        out[f"polygraphy {command}"] = [str(polygraphy)] + [a.format(**fill) for a in theirs]
    return out


def polygraphy_python(polygraphy: Path) -> str:
    return str(polygraphy.with_name("python"))


def write_polygraphy_feeds(polygraphy: Path, npz: Path) -> Path:
    out = npz.with_suffix(".json")
    done = subprocess.run([polygraphy_python(polygraphy), "-c", TO_POLYGRAPHY_JSON, str(npz), str(out)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{polygraphy_python(polygraphy)} could not write {out}: {done.stderr.strip()[-400:]}")
    return out


def measure_model(name: str, argvs: "dict[str, list[str]]", size: int, repeat: int, warm: bool = True) -> Row:
    before = os.getloadavg()[0]
    if warm:
        for argv in argvs.values():
            realsize_bench.measure(argv)
    best: "dict[str, tuple[float, int, int]]" = {}
    for _ in range(repeat):
        for side, argv in argvs.items():
            seconds, rss, code = realsize_bench.measure(argv)
            old = best.get(side)
            best[side] = (min(seconds, old[0]), min(rss, old[1]), code) if old else (seconds, rss, code)
    return Row(name, size, best, (before, os.getloadavg()[0]))


def tiny_models(only: "list[str] | None") -> "list[Path]":
    models = sorted(TINY.glob("*.onnx"))
    return [m for m in models if not only or m.stem in only]


def tiny_feeds(model: Path) -> Path:
    return check_bench.feeds_file(model)


def realsize_models(folder: "Path | None", only: "list[str] | None") -> "list[tuple[Path, Path]]":
    """(model, feeds .npz) of every real-size export present in `folder`, in realsize_bench's order."""
    if folder is None or not folder.is_dir():
        return []
    out = []
    for name in realsize_bench.ORDER:
        model, spec = folder / f"{name}.onnx", folder / f"{name}.json"
        if model.exists() and spec.exists() and (not only or name in only):
            realsize_bench.FEEDS_DIR.mkdir(parents=True, exist_ok=True)
            feeds = realsize_bench.FEEDS_DIR / f"{name}.feeds.npz"     # never into the models' folder
            realsize_bench.make_feeds(json.loads(spec.read_text()), feeds)
            out.append((model, feeds))
    return out


def cell(ratio: float) -> str:
    """The ratio as shown, judged as shown: a 1.004x prints 1.00x and is no miss (a shared
    machine's noise is larger than the third digit)."""
    shown = f"{ratio:.2f}"
    return f"{shown}x" + ("" if float(shown) <= TARGET else " (miss)")


def row_line(row: Row) -> str:
    cells = [row.model, f"{row.size / 2**20:,.2f} MiB", f"{row.load[0]:.1f} / {row.load[1]:.1f}"]
    for command in PAIRS:
        seconds, rss, _ = row.best[f"polygraphy {command}"]
        cells.append(f"{seconds:.2f} s, {rss / 2**20:,.0f} MiB")
    for command in PAIRS:
        time_ratio, rss_ratio = row.ratios(command)
        cells.append(f"{cell(time_ratio)}, {cell(rss_ratio)}" + (" *" if row.best[f"ours {command}"][2] else ""))
    return "| " + " | ".join(cells) + " |"


HEADER = ["model", "file", "load 1 min (before / after)", "polygraphy inspect", "polygraphy run",
          "polygraphy run x2", "inspect", "run", "check"]


def summary(rows: "list[Row]") -> str:
    parts = []
    for command in PAIRS:
        times = [r.ratios(command)[0] for r in rows]
        rss = [r.ratios(command)[1] for r in rows]
        parts.append(f"{command} time median {statistics.median(times):.2f}x, worst {max(times):.2f}x; "
                     f"peak RSS median {statistics.median(rss):.2f}x, worst {max(rss):.2f}x")
    return "Over these rows: " + "; ".join(parts) + "."


def load_range(rows: "list[Row]") -> str:
    loads = [load for row in rows for load in row.load]
    return f"{min(loads):.1f}-{max(loads):.1f}" if loads else "not measured"


def table(rows: "list[Row]", repeat: int, versions: "tuple[str, str, str]", note: str) -> str:
    ort, polygraphy_ort, polygraphy = versions
    lines = [f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC at commit {realsize_bench.commit()} on "
             f"{realsize_bench.machine()}, Polygraphy {polygraphy} (onnxruntime {polygraphy_ort}) against "
             f"dml-lower (onnxruntime {ort}), best of {repeat}, the sides interleaved; 1-minute load "
             f"{load_range(rows)} over the run (each row's beside it). {note}".rstrip(),
             "",
             "Polygraphy's columns: its wall time and peak RSS. Ours: time ratio, peak RSS ratio against "
             "Polygraphy's command of that pair; (miss) where a ratio is over 1.0; * where check reported a "
             "MISMATCH (exit 1). The pairs: `dml-lower inspect` against `polygraphy inspect model`; "
             "`dml-lower run --backends ort-cpu` (the file on onnxruntime's CPU provider, untouched) against "
             "`polygraphy run --onnxrt`; `dml-lower check --backends ort-cpu` (the ONNX-semantics oracle and "
             "onnxruntime's run of the file, compared) against `polygraphy run --onnxrt --onnxrt` (two "
             "onnxruntime runners, compared). Same feeds on both sides: ours from an .npz (`--inputs`), "
             "Polygraphy's from the same arrays in its JSON (`--load-inputs`).",
             ""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    lines += [row_line(row) for row in rows]
    if rows:
        lines += ["", summary(rows)]
    return "\n".join(lines)


def parse_row(line: str) -> "dict[str, str]":
    """A table line back into its cells keyed by HEADER (what the page test reads)."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != len(HEADER):
        raise ValueError(f"{len(cells)} cells where the table has {len(HEADER)}: {line!r}")
    return dict(zip(HEADER, cells))


def write_table(path: Path, text: str) -> None:
    """Replace what stands between the polygraphy lines of `path` with `text`."""
    realsize_bench.write_table(path, text, BEGIN, END)


def versions(polygraphy: Path) -> "tuple[str, str, str]":
    import onnxruntime
    theirs = subprocess.run([polygraphy_python(polygraphy), "-c", ORT_VERSION + "; import polygraphy; "
                             "print(polygraphy.__version__)"], capture_output=True, text=True, check=True)
    polygraphy_ort, polygraphy_version = theirs.stdout.split()
    return onnxruntime.__version__, polygraphy_ort, polygraphy_version


def parse_args(argv: "list[str] | None" = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polygraphy", type=Path, default=DEFAULT_POLYGRAPHY,
                        help="the polygraphy command of its venv (default: .venv-polygraphy/bin/polygraphy)")
    parser.add_argument("--realsize", type=Path, default=None,
                        help="the folder of the real-size exports (make bench-realsize); absent: tiny models only")
    parser.add_argument("--only", nargs="+", help="these model names only (file stems, e.g. gpt2.dynamo ssdlite)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--note", default="", help="a sentence for the table's first line (e.g. the machine's load)")
    parser.add_argument("--write-docs", type=Path, nargs="?", const=DOCS_PAGE, metavar="FILE",
                        help="write the table between the polygraphy lines of docs/performance.md (or FILE)")
    return parser.parse_args(argv)


def collect(args: argparse.Namespace, real: "list[tuple[Path, Path]]") -> "list[Row]":
    models = [(m, tiny_feeds(m)) for m in tiny_models(args.only)] + real
    if not models:
        raise SystemExit(f"no model to measure: {args.only} names none of {TINY} or {args.realsize}")
    rows = []
    for model, npz in models:
        argvs = sides(model, npz, write_polygraphy_feeds(args.polygraphy, npz), args.polygraphy)
        row = measure_model(model.stem, argvs, realsize_bench.weights_bytes(model), args.repeat)
        print(row_line(row), flush=True)
        rows.append(row)
    return rows


def main(argv: "list[str] | None" = None) -> None:
    args = parse_args(argv)
    if not args.polygraphy.exists():
        raise SystemExit(f"{args.polygraphy} is missing: make it with `make bench-polygraphy`")
    found = versions(args.polygraphy)
    if found[0] != found[1]:
        print(f"warning: onnxruntime {found[0]} here, {found[1]} beside Polygraphy", file=sys.stderr)
    real = realsize_models(args.realsize, args.only)
    realsize = "" if real or args.only else (
        " The real-size set was not exported on this machine (`make bench-realsize`): tiny exports only.")
    rows = collect(args, real)
    text = table(rows, args.repeat, found, (args.note + realsize).strip())
    print()
    print(text)
    if args.write_docs is not None:
        write_table(args.write_docs, text)


if __name__ == "__main__":
    main()
