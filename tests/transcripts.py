"""The transcripts of README.md and docs/: found, run, normalised, and (for doc writers) rewritten.

A transcript is a fenced code block whose first line is `$ dml-lower ...`. Each `$ ` line is one
command, run from the repository root exactly as written; the lines under it, up to the next `$ `
line, are what it prints: its stdout, then its stderr (a fixed order, since the two streams are
captured apart). A command that exits with a code other than 0 shows it as its last line,
`[exit N]`; no such line means exit 0. A command may only read files the repository ships
(compiler/examples, tests/models, docs/examples) or files an earlier command of the same block
wrote (under /tmp).

A transcript that cannot run here (DirectML needs Windows) is marked by the line right above its
fence, which the rendered page shows too: `*Illustrative only (WHY): not run by the tests.*`. One
that runs DirectML for real (the dml backend, capabilities --device) is marked
`*Needs `make directml`: run by the tests marked directml.*`: it runs where the setup is, and is
skipped with one line elsewhere (a failure under make directml-check).

To rewrite the shown output of every transcript of a page from real runs (after a deliberate
change of output):

    .venv/bin/python -m tests.transcripts docs/commands/check.md
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ILLUSTRATIVE = re.compile(r"^\*Illustrative only \((?P<why>[^)]+)\): not run by the tests\.\*$")
NEEDS_DIRECTML = re.compile(r"^\*Needs `make directml`: run by the tests marked directml\.\*$")
EXIT = re.compile(r"^\[exit (-?\d+)\]$")
FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[\w-]*)\s*$")


@dataclass
class Command:
    argv: "list[str]"           # after `dml-lower`
    line: str                   # the `$ ` line as written
    output: str                 # the lines shown under it, `[exit N]` excluded, each ending "\n"
    exit_code: int


@dataclass
class Transcript:
    path: Path
    lineno: int                 # 1-based line of the opening fence
    commands: "list[Command]"
    illustrative: "str | None"  # why it cannot run here, for a marked block
    needs_directml: bool = False  # runs DirectML.dll (make directml)

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.lineno}"


def pages() -> "list[Path]":
    """README.md and every Markdown page of docs/, in a fixed order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(text: str) -> "list[tuple[int, list[str], str]]":
    """(line of the opening fence, the block's lines without its indentation, the line above it)
    for every fenced block."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent = opening.group("indent")
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:end]]
        above = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
        found.append((i + 1, body, above))
        i = end + 1
    return found


def parse(lines: "list[str]") -> "list[Command]":
    commands: "list[Command]" = []
    for line in lines:
        if line.startswith("$ "):
            words = shlex.split(line[2:])
            assert words[0] == "dml-lower", f"a transcript runs dml-lower, not {words[0]!r}: {line}"
            commands.append(Command(words[1:], line, "", 0))
        else:
            commands[-1].output += line + "\n"
    for command in commands:
        shown = command.output.splitlines()
        if shown and EXIT.match(shown[-1]):
            command.exit_code = int(EXIT.match(shown[-1]).group(1))
            command.output = "".join(line + "\n" for line in shown[:-1])
    return commands


def transcripts(paths: "list[Path] | None" = None) -> "list[Transcript]":
    found = []
    for path in paths or pages():
        for lineno, lines, above in blocks(path.read_text()):
            if not lines or not lines[0].startswith("$ dml-lower"):
                continue
            marked = ILLUSTRATIVE.match(above)
            found.append(Transcript(path, lineno, parse(lines), marked.group("why") if marked else None,
                                    bool(NEEDS_DIRECTML.match(above))))
    return found


# What truly varies from run to run, and nothing else: wall times. `check` ends with
# `time: cpu 0.050 s, ...`; a zoo's summary ends each model's row with its seconds (`  1.4`), and
# its JUnit file's `time="..."` attributes are not printed. Both sides go through this.
TIMES = [
    (re.compile(r"\b\d+\.\d+ s\b"), "N s"),                          # check / run: `0.050 s`
    (re.compile(r"(?m)^(\S+\.onnx\s.*?) +\d+\.\d+$"), r"\1 N"),       # zoo summary rows
]


def normalise(text: str) -> str:
    for pattern, replacement in TIMES:
        text = pattern.sub(replacement, text)
    return text


def run_in_process(command: Command, capfd) -> "tuple[int, str]":
    """(exit code, stdout then stderr) of the command run by compiler.cli.main in this process."""
    from onnx_dml_lowering.compiler.cli import main
    capfd.readouterr()
    try:
        code = main(list(command.argv))
    except SystemExit as exc:           # argparse's usage errors end this way
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capfd.readouterr()
    return code, out + err


def run_process(command: Command, needs_directml: bool = False) -> "tuple[int, str]":
    """The same as a real process, as a user runs it: for rewriting the shown output. A transcript
    not marked as needing DirectML is rewritten as the tests run it: without a DirectML setup
    (tests/conftest.py), whether or not this machine has one."""
    env = dict(os.environ, DML_LOWER_STRICT="1")
    if not needs_directml:
        env["DML_LOWER_DIRECTML_HOME"] = "/nonexistent/dml-lower-transcripts-without-directml"
    done = subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", *command.argv],
                          cwd=ROOT, capture_output=True, text=True, env=env)
    return done.returncode, done.stdout + done.stderr


def rewrite(path: Path) -> int:
    """Replace the shown output of every runnable transcript of `path` with what it prints now."""
    lines = path.read_text().splitlines(keepends=True)
    changed = 0
    for transcript in reversed(transcripts([path])):
        if transcript.illustrative:
            continue
        start = transcript.lineno              # index of the first line inside the fence
        end = start
        while lines[end].strip() != "```":
            end += 1
        indent = lines[transcript.lineno - 1][:len(lines[transcript.lineno - 1]) - len(lines[transcript.lineno - 1].lstrip())]
        body = []
        for command in transcript.commands:
            code, printed = run_process(command, transcript.needs_directml)
            body.append(command.line + "\n")
            body.extend(printed.splitlines(keepends=True))
            if code:
                body.append(f"[exit {code}]\n")
        body = [indent + line if line.strip() else line for line in body]
        if lines[start:end] != body:
            lines[start:end] = body
            changed += 1
    path.write_text("".join(lines))
    return changed


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {rewrite(Path(name).resolve())} transcript(s) rewritten")
