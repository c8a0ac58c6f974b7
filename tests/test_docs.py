"""The docs stay honest about what they describe: every option a command's parser declares is in the
Options section of docs/commands/CMD.md, README.md stays a README (at most 300 lines), and every
relative link of README.md and docs/ points at a file that exists (mkdocs --strict checks docs/
too, but only `make docs` runs it; README is outside the site)."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from onnx_dml_lowering.compiler.cli import build_parser
from tests.transcripts import ROOT

COMMANDS = ROOT / "docs" / "commands"
README = ROOT / "README.md"
README_MAX_LINES = 300


def subparsers(parser: argparse.ArgumentParser, path: "list[str]"):
    """(command path, parser) of every subcommand at any depth (conformance export / run too)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield path + [name], child
                yield from subparsers(child, path + [name])


def declared_options(parser: argparse.ArgumentParser) -> "list[str]":
    """The option strings a user can see in --help (argparse's own -h / --help and hidden ones aside)."""
    return [option for action in parser._actions if action.help != argparse.SUPPRESS
            and not isinstance(action, argparse._HelpAction) for option in action.option_strings]


def options_section(page: str) -> str:
    """The `## Options` section of a command page, up to the next `## ` heading."""
    if "\n## Options\n" not in page:
        return ""
    return page.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]


def undocumented(options: "list[str]", page: str) -> "list[str]":
    """The options the page's Options section does not name (each as a whole word: `--dim` is
    not found inside `--dims`, `-o` not inside `--output`)."""
    section = options_section(page)
    return [option for option in options
            if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", section)]


PER_COMMAND: "dict[str, list[str]]" = {}
for _path, _parser in subparsers(build_parser(), []):
    PER_COMMAND.setdefault(_path[0], [])
    PER_COMMAND[_path[0]] += [o for o in declared_options(_parser) if o not in PER_COMMAND[_path[0]]]


@pytest.mark.parametrize("command", sorted(PER_COMMAND))
def test_every_option_of_a_command_is_on_its_page(command):
    page = COMMANDS / f"{command}.md"
    assert page.exists(), f"{command} has no page {page.relative_to(ROOT)}"
    assert undocumented(PER_COMMAND[command], page.read_text()) == [], \
        f"options of `dml-lower {command}` missing from the Options section of {page.relative_to(ROOT)}"


def test_the_commands_found_are_every_command():
    assert sorted(PER_COMMAND) == sorted(p.stem for p in COMMANDS.glob("*.md"))
    assert "--sweep" in PER_COMMAND["optimize"] and "--seeds" in PER_COMMAND["conformance"]


def test_an_undocumented_option_is_found():
    """The check above can fail: a parser with an option its page does not name, or names only
    outside its Options section, or only as part of a longer option."""
    parser = argparse.ArgumentParser()
    parser.add_argument("-q", "--quiet", action="store_true")
    parser.add_argument("--dim", action="append")
    parser.add_argument("--hidden", help=argparse.SUPPRESS)
    page = "# cmd\n\n`--dim` here is not it.\n\n## Options\n\n| `-q` | quiet |\n| `--dims` | no |\n\n## Output\n\n--quiet\n"
    assert declared_options(parser) == ["-q", "--quiet", "--dim"]
    assert undocumented(declared_options(parser), page) == ["--quiet", "--dim"]
    assert undocumented(["-q"], "no options section, -q\n") == ["-q"]


def test_readme_is_at_most_300_lines():
    assert len(README.read_text().splitlines()) <= README_MAX_LINES


# [text](target) and [text]: target; a target with a scheme or only an anchor is not a file
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\[[^\]]+\]:\s*(\S+)", re.M)
FENCED = re.compile(r"^ *```.*?^ *```", re.S | re.M)


def broken_links(page: Path) -> "list[str]":
    """The relative links of a Markdown page (outside code blocks) whose file does not exist."""
    text = FENCED.sub("", page.read_text())
    broken = []
    for match in LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue
        file = target.split("#", 1)[0]
        if not (page.parent / file).exists():
            broken.append(target)
    return broken


PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_points_at_a_file(page):
    assert broken_links(page) == []


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "there.md").write_text("x")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a) [gone](docs/gone.md) [web](https://x.org/y) [anchor](#z)\n"
                    "```\n[in code](not/a/link.md)\n```\n[ref]: missing.md\n")
    assert broken_links(page) == ["docs/gone.md", "missing.md"]


# A repository path the prose names in a code span: `lowering/onnx_graphs.py`, `compiler/zoo/`.
# (Module paths with a function after them, `compiler/frontend.load_model`, are not files.)
PATH_SPAN = re.compile(r"`((?:ir|lowering|runtime|compiler|tests|benchmarks|docs)/[\w./-]*?(?:\.(?:py|md|json|txt|toml|onnx)|/))`")


def missing_paths(text: str) -> "list[str]":
    """The repository paths named in `text`'s code spans that do not exist (from the root)."""
    return [path for path in PATH_SPAN.findall(text) if not (ROOT / path).exists()]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_file_the_prose_names_exists(page):
    """A module moved (compiler/optimize_dml.py -> compiler/optimize/dml.py) leaves no page behind."""
    assert missing_paths(page.read_text()) == []


def test_a_moved_file_is_found():
    assert missing_paths("`compiler/optimize_dml.py` and `compiler/optimize/dml.py`, `compiler/zoo/`, "
                         "`compiler/frontend.load_model`, `tests/gone/`") == ["compiler/optimize_dml.py", "tests/gone/"]
