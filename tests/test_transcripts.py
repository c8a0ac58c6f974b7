"""Every transcript of README.md and docs/ is real: each command runs from the repository root,
in this process (compiler.cli.main; one shown crashing inside onnxruntime, exit 4, in a process of
its own), and prints exactly what the page shows, with the exit code
it shows (tests/transcripts.py says what a transcript is and what is normalised: wall times only)."""
from __future__ import annotations

import fcntl
import os
import re

import pytest

from onnx_dml_lowering.compiler.cli.supervisor import CRASHED
from tests.transcripts import ROOT, Transcript, normalise, run_in_process, run_process, transcripts

ALL = transcripts()
RUNNABLE = [t for t in ALL if not t.illustrative]
ILLUSTRATIVE = [t for t in ALL if t.illustrative]
# Blocks that cannot run here (DirectML needs Windows) stay this few; a new one is a decision.
MAX_ILLUSTRATIVE = 0
PYTHON_PAGE = ROOT / "docs" / "python-api.md"
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```$", PYTHON_PAGE.read_text(), re.S | re.M)


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


# The pages write to fixed /tmp paths (what a reader types): two test runs on one machine (two
# checkouts, CI beside a developer) would write into each other's folders. One lock per machine
# makes them take turns, one transcript at a time.
LOCK = "/tmp/dml-lower-transcripts.lock"


@pytest.fixture(autouse=True)
def _one_at_a_time():
    try:                    # read-only: a lock file another user made is still lockable
        fd = os.open(LOCK, os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError:
        fd = os.open(LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)        # closing releases the lock


@pytest.mark.parametrize("transcript", [pytest.param(t, marks=[pytest.mark.directml] if t.needs_directml else [])
                                        for t in RUNNABLE], ids=[t.name for t in RUNNABLE])
def test_transcript_prints_what_the_page_shows(transcript: Transcript, capfd):
    before = set(ROOT.iterdir())
    try:
        for command in transcript.commands:
            # a command shown dying inside onnxruntime (exit 4) would take this process with it:
            # it runs as the user runs it, supervised in a process of its own
            code, printed = run_process(command) if command.exit_code == CRASHED else run_in_process(command, capfd)
            assert normalise(printed) == normalise(command.output), f"{transcript.name}: {command.line}"
            assert code == command.exit_code, f"{transcript.name}: {command.line} exited {code}"
    finally:
        # an example writes its files to a temporary path (/tmp/...), never into the repository;
        # a file one wrote there anyway is removed (a folder only named), and the test fails
        written = sorted(set(ROOT.iterdir()) - before)
        for path in written:
            if path.is_file():
                path.unlink()
        written = [path.name for path in written]
    assert not written, f"{transcript.name} wrote {written} into the repository root: write to /tmp instead"


@pytest.mark.parametrize("transcript", ILLUSTRATIVE, ids=[t.name for t in ILLUSTRATIVE])
def test_illustrative_transcript_cannot_run_here(transcript: Transcript, capfd):
    """A block marked illustrative must really be one this machine cannot reproduce: one that
    runs as shown loses its mark and becomes a tested transcript."""
    reproduced = []
    for command in transcript.commands:
        code, printed = run_in_process(command, capfd)
        reproduced.append(code == command.exit_code and normalise(printed) == normalise(command.output))
    assert not all(reproduced), f"{transcript.name} runs here as shown: remove its illustrative mark"


def test_the_pages_hold_transcripts_and_few_illustrative_ones():
    pages = {t.path.relative_to(ROOT).as_posix() for t in RUNNABLE}
    for command in ("compile", "run", "check", "inspect", "reduce", "optimize", "conformance",
                    "capabilities", "demo"):
        assert f"docs/commands/{command}.md" in pages, f"docs/commands/{command}.md shows no transcript"
    assert len(ILLUSTRATIVE) <= MAX_ILLUSTRATIVE, [t.name for t in ILLUSTRATIVE]


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_python_api_page_runs(index):
    """docs/python-api.md's Python blocks run as written, from the repository root."""
    exec(compile(PYTHON_BLOCKS[index], f"{PYTHON_PAGE.name} block {index}", "exec"), {})


PAGE = """Text.

```
$ dml-lower compile m.onnx
graph
```

*Illustrative only (needs DirectML on Windows): not run by the tests.*

```
$ dml-lower check m.onnx --backends ort-dml
verdict: all outputs match ONNX semantics
time: ort-dml 0.012 s
$ dml-lower check missing.onnx
dml-lower: error: model file 'missing.onnx' does not exist
[exit 2]
```

  ```
  $ dml-lower demo
  ```

```
make test
```
"""


def test_transcripts_are_parsed_with_their_exit_codes_and_marks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    found = transcripts([page])
    assert [(t.lineno, t.illustrative) for t in found] == [(3, None), (10, "needs DirectML on Windows"), (19, None)]
    first, second, third = found
    assert [(c.argv, c.output, c.exit_code) for c in first.commands] == [(["compile", "m.onnx"], "graph\n", 0)]
    assert [(c.argv, c.exit_code) for c in second.commands] == [(["check", "m.onnx", "--backends", "ort-dml"], 0),
                                                                (["check", "missing.onnx"], 2)]
    assert second.commands[1].output == "dml-lower: error: model file 'missing.onnx' does not exist\n"
    assert [(c.argv, c.output) for c in third.commands] == [(["demo"], "")]


@pytest.mark.parametrize("shown, printed, same", [
    ("time: cpu 0.050 s, ort 0.009 s\n", "time: cpu 1.250 s, ort 0.010 s\n", True),
    ("models/a.onnx   ok   1   0      1.4\n", "models/a.onnx   ok   1   0     12.9\n", True),
    # nothing but wall times: a count, a status, an error value or a size still differs
    ("models/a.onnx   ok   1   0      1.4\n", "models/a.onnx   ok   2   0      1.4\n", False),
    ("max abs err 3.58e-07\n", "max abs err 3.59e-07\n", False),
    ("[cpu] y: MATCH (float32 [3x3])\n", "[cpu] y: MISMATCH (float32 [3x3])\n", False),
    ("wrote 7497 -> 3339 bytes\n", "wrote 7497 -> 3340 bytes\n", False),
    ("seconds 0.5 s\n", "seconds 0.5 s\nextra\n", False),
])
def test_only_wall_times_are_normalised(shown, printed, same):
    assert (normalise(shown) == normalise(printed)) is same


def test_a_transcript_needing_directml_is_marked_so(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("*Needs `make directml`: run by the tests marked directml.*\n\n```\n$ dml-lower capabilities --device\n"
                    "self-test passed\n```\n\n```\n$ dml-lower demo\n```\n")
    marked, plain = transcripts([page])
    assert marked.needs_directml and marked.illustrative is None and not plain.needs_directml
    shown = [t for t in RUNNABLE if t.needs_directml]
    assert {t.path.name for t in shown} >= {"capabilities.md", "directml-on-linux.md"}
