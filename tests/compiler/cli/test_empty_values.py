"""No option or positional takes an empty value: a path '' is Path('.'), the working folder (`check ""`
checked every model below it; `--inputs "$UNSET"` fed random values; `--json ''` wrote nothing, in
silence). Every value-taking option of every command, walked from the parser, refuses '' in one line
naming it, exit 2, before any work."""
from __future__ import annotations

import argparse

import pytest

from tests.cli_runner import cli_exits
from tests.compiler.cli.test_groups import PARSERS

MODEL = "compiler/examples/masked_select.onnx"


def value_options() -> "list[tuple[list[str], str]]":
    """(command path, option) for every option that takes a value; a positional as its metavar."""
    found = []
    for path, parser in PARSERS:
        for action in parser._actions:
            if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)) or action.nargs == 0:
                continue
            found.append((path[1:], action.option_strings[0] if action.option_strings else ""))
    return found


def argv_for(command: "list[str]", option: str) -> "list[str]":
    """The command with '' as the option's value (or as its model / folder when a positional)."""
    first = {"conformance": []}.get(command[0], [MODEL]) if command[0] not in ("demo", "capabilities") else []
    if command[:2] == ["conformance", "run"] or command[:2] == ["conformance", "export"]:
        first = ["SUITE_UNUSED"]
    if not option:
        return [*command, ""]
    return [*command, *first, f"{option}="]


CASES = value_options()


@pytest.mark.parametrize("command, option", CASES, ids=[f"{' '.join(c)}:{o or 'positional'}" for c, o in CASES])
def test_an_empty_value_is_one_line_naming_the_option(command, option, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)         # what a path '' would have named: nothing may be made or read here
    code, out, err = cli_exits(argv_for([*command], option), capsys)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and "an empty value names nothing" in err, err
    assert (option or "argument") in err
    assert list(tmp_path.iterdir()) == []


def test_the_walk_finds_the_path_options_and_positionals():
    options = {o for _, o in CASES}
    assert {"--json", "--inputs", "--load-outputs", "-o", "--save-outputs", ""} <= options
    assert len(CASES) > 60
