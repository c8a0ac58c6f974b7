"""--save-inputs / --save-outputs keep every feed set: set #0 at F.npz in the single-set layout, set
#i at F.i.npz beside it, each readable by --inputs / --load-outputs / --oracle; check and run say
what they wrote. Contents are checked against the seeded feeds and onnx.reference."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.feeds import random_feeds
from onnx_dml_lowering.runtime.saved_outputs import set_path, wrote_line
from tests.cli_runner import cli
from tests.oracle import assert_outputs_same, reference

MODEL = "tests/models/masked_select.dynamo.onnx"


@pytest.mark.parametrize("path, index, expected", [
    ("in.npz", 0, "in.npz"), ("in.npz", 1, "in.1.npz"), ("d/run.v2.npz", 12, "d/run.v2.12.npz"),
    ("feeds", 2, "feeds.2"), ("a.b/feeds", 1, "a.b/feeds.1"),
])
def test_set_path(path, index, expected) -> None:
    assert set_path(path, index) == expected


def _load(path) -> dict:
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


@pytest.mark.parametrize("iterations", [1, 3])
def test_check_saves_every_set(iterations, tmp_path, capsys) -> None:
    inputs, outputs = str(tmp_path / "in.npz"), str(tmp_path / "out.npz")
    code, out, err = cli(["check", MODEL, "--iterations", iterations, "--seed", 4, "--backends", "cpu,ort",
                          "--save-inputs", inputs, "--save-outputs", outputs], capsys)
    assert code == 0, err
    assert out.splitlines()[-2:] == [wrote_line(inputs, iterations), wrote_line(outputs, iterations)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        Path(set_path(f, i)).name for f in (inputs, outputs) for i in range(iterations))
    compiled = compile_model(MODEL)
    for index in range(iterations):
        feeds = _load(set_path(inputs, index))
        drawn = random_feeds(compiled.inputs, seed=4 + index)
        assert_outputs_same(feeds, drawn)
        saved = _load(set_path(outputs, index))
        expected = reference(MODEL, drawn)
        assert_outputs_same({name: saved[name] for name in expected}, expected)
        for backend in ("cpu", "ort"):
            assert_outputs_same({name: saved[f"{backend}:{name}"] for name in expected}, expected)
        # each file is one set, read back as one
        for replay in (["--oracle", set_path(outputs, index)], ["--load-outputs", set_path(outputs, index)]):
            code, out, err = cli(["check", MODEL, "--inputs", set_path(inputs, index), *replay, "-q"], capsys)
            assert code == 0 and "verdict: all outputs match" in out, out + err
    # a set file with the wrong set's feeds is refused, as ever
    if iterations > 1:
        code, _, err = cli(["check", MODEL, "--inputs", inputs, "--oracle", set_path(outputs, 1)], capsys)
        assert code == 2 and "saved from other feeds" in err


def test_run_saves_every_data_loader_set(tmp_path, capsys) -> None:
    script = tmp_path / "dl.py"
    script.write_text("import numpy as np\n"
                      "def load_data():\n"
                      "    x = np.zeros((3, 4), np.float32)\n"
                      "    for i in range(3):\n"
                      "        x[i, i] = i + 1\n"           # one array, changed in place between sets
                      "        yield {'x': x}\n")
    inputs, outputs = str(tmp_path / "in.npz"), str(tmp_path / "out.npz")
    code, out, err = cli(["run", MODEL, "--data-loader-script", script, "--save-inputs", inputs,
                          "--save-outputs", outputs], capsys)
    assert code == 0, err
    assert out.splitlines()[-2:] == [wrote_line(inputs, 3), wrote_line(outputs, 3)]
    for index in range(3):
        feeds = _load(set_path(inputs, index))
        assert np.count_nonzero(feeds["x"]) == index + 1            # the set as it was given
        saved = _load(set_path(outputs, index))
        expected = reference(MODEL, feeds)
        assert_outputs_same({name: saved[name] for name in expected}, expected)
        code, out, err = cli(["check", MODEL, "--inputs", set_path(inputs, index), "--load-outputs",
                              set_path(outputs, index), "-q"], capsys)
        assert code == 0, out + err


def test_an_output_naming_a_saved_sets_file_is_refused(tmp_path, capsys) -> None:
    """--json F.1.npz beside --save-inputs F.npz of 2 sets would replace feed set #1's file after
    its `wrote` line: refused before the run when the count is known (--iterations), and by the
    writer when it is not (a data loader), set #1 kept either way."""
    inputs, clash = str(tmp_path / "k.npz"), str(tmp_path / "k.1.npz")
    code, out, err = cli(["check", MODEL, "--iterations", 2, "--save-inputs", inputs, "--json", clash, "-q"], capsys)
    assert code == 2 and out == "" and not (tmp_path / "k.npz").exists()
    assert err.strip() == (f"dml-lower: error: --json and --save-inputs (feed set #1) both write {clash!r}: give each "
                           "its own file")
    script = tmp_path / "dl.py"
    script.write_text("import numpy as np\n"
                      "def load_data():\n"
                      "    for i in range(2):\n"
                      "        yield {'x': np.full((3, 4), i, np.float32)}\n")
    code, out, err = cli(["check", MODEL, "--data-loader-script", script, "--save-inputs", inputs,
                          "--save-outputs", clash, "-q"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"cannot write the saved outputs to {clash!r}: this command has already written" in err \
        or f"cannot write the inputs to {clash!r}: this command has already written" in err, err
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".npz") == ["k.1.npz", "k.npz"]


def test_a_failing_output_write_is_the_error_not_the_saved_set(tmp_path, capsys) -> None:
    """--save-outputs /dev/full after --save-inputs wrote set #0: the disk-full line is the error (the
    set under way was written again, refused as written, and that refusal hid it)."""
    inputs = str(tmp_path / "in.npz")
    code, out, err = cli(["check", MODEL, "--backends", "cpu", "-q", "--save-inputs", inputs,
                          "--save-outputs", "/dev/full"], capsys)
    assert code == 2 and err.count("\n") == 1 and "/dev/full" in err and "already written" not in err, err


def _twelve_sets(tmp_path) -> Path:
    script = tmp_path / "dl.py"
    script.write_text("import numpy as np\n"
                      "def load_data():\n"
                      "    for i in range(12):\n"
                      "        yield {'x': np.full((3, 4), i - 5, np.float32)}\n")
    return script


@pytest.mark.parametrize("failing", ["--save-inputs", "--save-outputs"])
def test_check_says_the_sets_it_saved_when_a_later_sets_file_cannot_be_written(failing, tmp_path, capsys) -> None:
    """A data loader's count is not known up front, so set #10's name (F.10.npz: one byte over the
    255 a name may have) is refused only when it is written: the sets before it are said as
    written, the report covers the sets checked, and the line names the set and the file."""
    folder = tmp_path / "sets"
    folder.mkdir()
    short, long = str(folder / ("s" * 248 + ".npz")), str(folder / ("l" * 249 + ".npz"))
    paths = {"--save-inputs": long, "--save-outputs": short} if failing == "--save-inputs" else \
        {"--save-inputs": short, "--save-outputs": long}
    code, out, err = cli(["check", MODEL, "-q", "--backends", "cpu", "--data-loader-script", _twelve_sets(tmp_path),
                          *[w for pair in paths.items() for w in pair]], capsys)
    assert code == 2, out + err
    inputs_saved, outputs_saved = (10, 10) if failing == "--save-inputs" else (11, 10)     # inputs first
    assert out.splitlines()[-2:] == [wrote_line(paths["--save-inputs"], inputs_saved),
                                     wrote_line(paths["--save-outputs"], outputs_saved)]
    assert "11 feed sets checked, then stopped at feed set #10" in out
    what = "the inputs" if failing == "--save-inputs" else "the outputs"
    assert err.splitlines() == [f"dml-lower: error: feed set #10: cannot write {what} to {set_path(long, 10)!r}: "
                                "the path or one of its names is too long (File name too long (ENAMETOOLONG)) "
                                "(the report covers feed sets #0-#10)"]
    written = {str(p) for p in folder.iterdir()}
    assert written == {set_path(paths["--save-inputs"], i) for i in range(inputs_saved)} | \
        {set_path(paths["--save-outputs"], i) for i in range(outputs_saved)}
    saved = _load(set_path(paths["--save-outputs"], 9))
    expected = reference(MODEL, _load(set_path(paths["--save-inputs"], 9)))
    assert_outputs_same({name: saved[name] for name in expected}, expected)


def test_run_says_the_sets_it_saved_before_the_error(tmp_path, capsys) -> None:
    folder = tmp_path / "sets"
    folder.mkdir()
    long = str(folder / ("l" * 249 + ".npz"))
    code, out, err = cli(["run", MODEL, "-q", "--data-loader-script", _twelve_sets(tmp_path), "--save-inputs", long],
                         capsys)
    assert code == 2, out + err
    assert out.splitlines()[-1] == wrote_line(long, 10)
    assert err.splitlines() == [f"dml-lower: error: cannot write the inputs to {set_path(long, 10)!r}: the path or "
                                "one of its names is too long (File name too long (ENAMETOOLONG))"]
    assert sorted(str(p) for p in folder.iterdir()) == sorted(set_path(long, i) for i in range(10))
