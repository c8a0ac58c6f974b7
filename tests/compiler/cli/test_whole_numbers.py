"""Every whole-number option reads ASCII digits (and a '-', so each option says itself why it must
not be negative): argparse's int() also took ' 3', '1_0' and '٣', which --dim, --sweep and
--memory-limit refused (compiler/cli/numbers.py)."""
from __future__ import annotations

import pytest

from tests.cli_runner import cli, cli_exits

MODEL = "compiler/examples/masked_select.onnx"
OPTIONS = [(["run", MODEL], "--seed"), (["check", MODEL], "--iterations"), (["check", "compiler/examples"], "--jobs"),
           (["optimize", MODEL, "-o", "/dev/null"], "--min-bytes"), (["conformance", "export", "SUITE"], "--seeds"),
           (["check", MODEL], "--threads")]


@pytest.mark.parametrize("command, option", OPTIONS)
@pytest.mark.parametrize("value", ["٣", " 3", "3 ", "1_0", "+3", "3.0", "0x3", "", "²"])
def test_a_whole_number_option_takes_ascii_digits_only(command, option, value, tmp_path, capsys):
    command = [str(tmp_path / "s") if word == "SUITE" else word for word in command]
    code, out, err = cli_exits([*command, f"{option}={value}"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert option in err and ("is not a whole number" in err or "non-negative integer" in err
                              or (value == "" and "an empty value names nothing" in err)), err


@pytest.mark.parametrize("command, option", OPTIONS)
def test_a_whole_number_option_takes_a_count(command, option, tmp_path, capsys):
    command = [str(tmp_path / "s") if word == "SUITE" else word for word in command]
    code, out, err = cli([*command, option, "1"], capsys)
    assert code == 0, out + err
