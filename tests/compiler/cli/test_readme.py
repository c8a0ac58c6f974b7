"""The README's example output is real: re-run the command it shows and compare."""
import re
import shlex
from pathlib import Path

from onnx_dml_lowering.compiler.cli import main

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_check_output_is_current(capfd, monkeypatch):
    monkeypatch.chdir(README.parent)
    text = README.read_text()
    block = re.search(r"```\n\$ dml-lower (check [^\n]+)\n(.*?)```", text, re.S)
    assert block, "README shows a check run"
    code = main(shlex.split(block.group(1)))
    assert code == 0
    # Wall times differ from run to run; everything else is exactly what README shows.
    def timeless(text: str) -> str:
        return re.sub(r"\d+\.\d+ s\b", "N s", text)
    assert timeless(capfd.readouterr().out) == timeless(block.group(2))


def test_readme_quick_start_is_exactly_two_commands():
    text = README.read_text()
    quick = text.split("## Quick start", 1)[1].split("\n\n", 2)[1]
    assert [line.strip() for line in quick.strip().splitlines()] == ["make demo", "make test"]
