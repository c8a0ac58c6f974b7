"""docs/performance.md holds the real-size table and the Polygraphy side-by-side table, each between
the markers its script (benchmarks/realsize_bench.py, benchmarks/polygraphy_bench.py) writes
between with --write-docs; each script replaces its own table and nothing else, and the Polygraphy
script's rows read back through its own parser."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("realsize_bench", ROOT / "benchmarks" / "realsize_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_has_one_table_between_the_markers(bench):
    text = bench.DOCS_PAGE.read_text()
    assert bench.DOCS_PAGE == ROOT / "docs" / "performance.md"
    assert text.count(bench.BEGIN) == 1 and text.count(bench.END) == 1
    table = text.split(bench.BEGIN, 1)[1].split(bench.END, 1)[0]
    assert table.strip().startswith("Measured ") and " at commit " in table     # when, where, which commit
    assert "| model | weights |" in table


def test_write_table_replaces_only_the_table(bench, tmp_path):
    page = tmp_path / "performance.md"
    original = bench.DOCS_PAGE.read_text()
    page.write_text(original)
    bench.write_table(page, "Measured now at commit abc1234.\n\n| model | weights |")
    head, rest = original.split(bench.BEGIN, 1)
    _, tail = rest.split(bench.END, 1)
    assert page.read_text() == f"{head}{bench.BEGIN}\nMeasured now at commit abc1234.\n\n| model | weights |\n{bench.END}{tail}"


def test_write_table_refuses_a_page_without_the_markers(bench, tmp_path):
    page = tmp_path / "other.md"
    page.write_text("# no table here\n")
    with pytest.raises(SystemExit, match="realsize:begin"):
        bench.write_table(page, "x")
    assert page.read_text() == "# no table here\n"


def test_measure_reads_the_process_alone_not_the_benchmark_it_starts_from(bench):
    """A child's ru_maxrss starts at the high-water mark of the memory it was forked from: measured
    from this process holding 256 MiB, a bare interpreter must still read as a bare interpreter."""
    held = bytearray(256 * 2**20)
    held[::4096] = b"x" * len(held[::4096])              # touched, so resident
    seconds, rss, code = bench.measure([sys.executable, "-S", "-c", "pass"])
    assert code == 0 and seconds > 0
    assert rss < 64 * 2**20, f"{rss / 2**20:.0f} MiB: the benchmark's own memory leaked into the measure"
    del held


def test_measure_stops_on_a_failing_command_with_its_message(bench):
    with pytest.raises(SystemExit, match="exited 3: boom"):
        bench.measure([sys.executable, "-S", "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"])


def test_table_rows_carry_their_load_and_check3_its_own_targets(bench):
    """check-3 runs onnxruntime's work twice by design: its targets are 2.0x time and 1.6x peak RSS
    (issue #38), the others' 1.3x and 1.2x; each row says the load it was measured under."""
    results = {"m": {"ort create+run": (1.0, 2**30, 0, 2.0), "ort create": (0.8, 2**30, 0, 1.0),
                     "check": (1.5, 2**30, 0, 2.5), "check-3": (1.9, int(1.7 * 2**30), 0, 5.0)}}
    text = bench.table(results, {"m": 2**20}, {"m": (1.25, 3.5)}, ["check", "check-3"], 1)
    header, _, row = text.splitlines()[-3:]
    assert header.startswith("| model | weights | load 1 min (before / after) |")
    assert row == ("| m | 1 MiB | 1.2 / 3.5 | 1.00 s (CPU 2.00 s), 1.00 GiB | 0.80 s (CPU 1.00 s), 1.00 GiB "
                   "| 1.50x (miss) (CPU 1.25x), 1.00x | 1.90x (CPU 2.50x), 1.70x (miss) |")


def test_measure_reports_the_process_cpu_time(bench):
    seconds, rss, code, cpu = bench.measure_with_cpu(
        [sys.executable, "-S", "-c", "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass"])
    assert code == 0 and cpu >= 0.2 and seconds >= cpu * 0.5


@pytest.mark.parametrize("argv, target", [
    ([], None),
    (["--write-docs"], ROOT / "docs" / "performance.md"),
    (["--write-docs", "elsewhere.md"], Path("elsewhere.md")),
])
def test_write_docs_flag(bench, argv, target):
    assert bench.parse_args(argv).write_docs == target


# The Polygraphy side-by-side table (benchmarks/polygraphy_bench.py): its own markers on the same
# page, written by the same writer, its rows read back by the script's own parser.

@pytest.fixture(scope="module")
def polygraphy_bench():
    spec = importlib.util.spec_from_file_location("polygraphy_bench", ROOT / "benchmarks" / "polygraphy_bench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["polygraphy_bench"] = module          # its dataclass resolves its annotations there
    spec.loader.exec_module(module)
    return module


def polygraphy_rows(text: str) -> "list[str]":
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| model |")]


def test_the_page_has_one_polygraphy_table(polygraphy_bench):
    text = polygraphy_bench.DOCS_PAGE.read_text()
    assert text.count(polygraphy_bench.BEGIN) == 1 and text.count(polygraphy_bench.END) == 1
    table = text.split(polygraphy_bench.BEGIN, 1)[1].split(polygraphy_bench.END, 1)[0]
    assert table.strip().startswith("Measured ") and " at commit " in table and "Polygraphy 0.53." in table
    assert "| " + " | ".join(polygraphy_bench.HEADER) + " |" in table
    rows = polygraphy_rows(table)
    assert rows, "the Polygraphy table has no row"
    for line in rows:
        cells = polygraphy_bench.parse_row(line)
        for command in polygraphy_bench.PAIRS:                  # "0.79x, 1.00x" or "1.50x (miss), 1.22x (miss)"
            assert cells[command].count("x") >= 2 and ", " in cells[command], line


def test_polygraphy_write_table_replaces_only_its_table(polygraphy_bench, bench, tmp_path):
    page = tmp_path / "performance.md"
    original = polygraphy_bench.DOCS_PAGE.read_text()
    page.write_text(original)
    polygraphy_bench.write_table(page, "Measured now at commit abc1234.")
    head, rest = original.split(polygraphy_bench.BEGIN, 1)
    _, tail = rest.split(polygraphy_bench.END, 1)
    written = page.read_text()
    assert written == f"{head}{polygraphy_bench.BEGIN}\nMeasured now at commit abc1234.\n{polygraphy_bench.END}{tail}"
    assert written.split(bench.BEGIN, 1)[1].split(bench.END, 1)[0] == \
        original.split(bench.BEGIN, 1)[1].split(bench.END, 1)[0]   # the real-size table untouched


def test_polygraphy_write_table_refuses_a_page_without_its_markers(polygraphy_bench, bench, tmp_path):
    page = tmp_path / "other.md"
    page.write_text(f"{bench.BEGIN}\n{bench.END}\n")
    with pytest.raises(SystemExit, match="polygraphy:begin"):
        polygraphy_bench.write_table(page, "x")
    assert page.read_text() == f"{bench.BEGIN}\n{bench.END}\n"


def test_parse_row_refuses_a_row_of_another_width(polygraphy_bench):
    with pytest.raises(ValueError, match="cells"):
        polygraphy_bench.parse_row("| gpt2 | 1 MiB |")


POLYGRAPHY = Path(os.environ.get("DML_LOWER_POLYGRAPHY", ROOT / ".venv-polygraphy" / "bin" / "polygraphy"))


@pytest.mark.polygraphy
@pytest.mark.skipif(not POLYGRAPHY.exists(), reason=f"Polygraphy is not installed at {POLYGRAPHY} "
                    "(make bench-polygraphy makes it, or set DML_LOWER_POLYGRAPHY)")
def test_a_measured_row_reads_back(polygraphy_bench):
    """One tiny export measured once on both sides for real: its row, written and parsed back,
    holds the ratios of what was measured (no time is asserted)."""
    model = ROOT / "tests" / "models" / "real" / "t5_encoder.dynamo.onnx"
    npz = polygraphy_bench.tiny_feeds(model)
    feeds_json = polygraphy_bench.write_polygraphy_feeds(POLYGRAPHY, npz)
    argvs = polygraphy_bench.sides(model, npz, feeds_json, POLYGRAPHY)
    assert sorted(argvs) == sorted(f"{side} {c}" for side in ("ours", "polygraphy") for c in polygraphy_bench.PAIRS)
    row = polygraphy_bench.measure_model(model.stem, argvs, model.stat().st_size, repeat=1, warm=False)
    assert all(code == 0 for _, _, code in row.best.values())    # a tiny export's check passes
    cells = polygraphy_bench.parse_row(polygraphy_bench.row_line(row))
    assert cells["model"] == "t5_encoder.dynamo"
    for command in polygraphy_bench.PAIRS:
        time_ratio, rss_ratio = row.ratios(command)
        assert cells[command].startswith(polygraphy_bench.cell(time_ratio) + ", " + polygraphy_bench.cell(rss_ratio))
    text = polygraphy_bench.table([row], 1, polygraphy_bench.versions(POLYGRAPHY), "")
    assert polygraphy_rows(text) == [polygraphy_bench.row_line(row)]


# The dml backend's costs (benchmarks/directml_bench.py --compare --write-docs): its own markers.
def test_the_page_has_one_directml_block_written_by_its_script(bench):
    text = bench.DOCS_PAGE.read_text()
    begin, end = "<!-- directml:begin -->", "<!-- directml:end -->"
    assert text.count(begin) == 1 and text.count(end) == 1
    block = text.split(begin, 1)[1].split(end, 1)[0]
    assert block.strip().startswith("Measured ") and " at commit " in block
    assert "host start-up, cold Wine session: " in block and "host start-up, warm Wine session: " in block
    assert "cached median" in block                                          # the start-up and per-operator cost
    assert "| model | check cpu,ort | check cpu,dml | dml / ort |" in block    # then the warm session's, the load
    script = (ROOT / "benchmarks" / "directml_bench.py").read_text()
    assert f'BEGIN, END = "{begin}", "{end}"' in script
