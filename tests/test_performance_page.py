"""docs/performance.md holds the real-size table between the markers that
benchmarks/realsize_bench.py --write-docs writes between, and the script replaces that table and
nothing else."""
from __future__ import annotations

import importlib.util
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


@pytest.mark.parametrize("argv, target", [
    ([], None),
    (["--write-docs"], ROOT / "docs" / "performance.md"),
    (["--write-docs", "elsewhere.md"], Path("elsewhere.md")),
])
def test_write_docs_flag(bench, argv, target):
    assert bench.parse_args(argv).write_docs == target
