"""Every run / check report says what was fed in one 'feeds:' line (text) and under "feeds" (JSON):
the source and seed, and per input its dtype, shape, range and zeros, as numpy computes them from
the very feeds --save-inputs wrote. (The draws themselves, runtime.feeds, are tested in
tests/runtime/test_feeds.py.)"""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli_runner import cli

NONZERO = "tests/models/nonzero.dynamo.onnx"          # one input x float32 [rows, cols]
DEFAULT_DIMS = {"dims": {"rows": 3, "cols": 3}, "default_dims": ["rows", "cols"]}


def _expected_summary(path) -> dict:
    """The feeds --save-inputs wrote, summarised by plain numpy."""
    with np.load(path) as data:
        return {name: {"dtype": str(data[name].dtype), "shape": list(data[name].shape),
                       "min": data[name].min().item(), "max": data[name].max().item(),
                       "zeros": int(np.count_nonzero(data[name] == 0)), "nonfinite": 0} for name in data}


@pytest.mark.parametrize("options, source", [
    ([], {"source": "random", "seed": 0, "iterations": 1, **DEFAULT_DIMS}),
    (["--seed", "4", "--val-range", "x:5,6"], {"source": "random", "seed": 4, "iterations": 1, **DEFAULT_DIMS}),
    (["--zero-fraction", "0.8", "--val-range", "[-2,3]"], {"source": "random", "seed": 0, "iterations": 1,
                                                           **DEFAULT_DIMS}),
])
@pytest.mark.parametrize("command", ["run", "check"])
def test_feeds_line_and_json_say_what_was_fed(command, options, source, tmp_path, capsys) -> None:
    saved, report = tmp_path / "in.npz", tmp_path / "r.json"
    code, out, err = cli([command, NONZERO, *options, "--save-inputs", saved, "--json", report], capsys)
    assert code == 0, err
    expected = _expected_summary(saved)
    assert json.loads(report.read_text())["feeds"] == {**source, "inputs": expected}
    lines = [line for line in out.splitlines() if line.startswith("feeds: ")]
    x = expected["x"]
    zeros = f", {x['zeros']} of 9 zero" if x["zeros"] else ""
    assert lines == [f"feeds: random, seed {source['seed']}, dims rows=3 (default), cols=3 (default): x float32 [3x3] "
                     f"in [{x['min']:.4g}, {x['max']:.4g}]{zeros}"]
    if "x:5,6" in options:
        assert x["min"] >= 5 and x["zeros"] == 0


def test_feeds_line_of_an_inputs_file_and_of_several_sets(tmp_path, capsys) -> None:
    feeds = tmp_path / "f.npz"
    np.savez(feeds, x=np.array([[1, 0, 2], [0, 0, 3], [4, 5, 6]], np.float32))
    code, out, _ = cli(["check", NONZERO, "--inputs", feeds], capsys)
    assert code == 0 and f"feeds: from {feeds}: x float32 [3x3] in [0, 6], 3 of 9 zero\n" in out
    code, out, _ = cli(["check", NONZERO, "--iterations", "3", "--seed", "5", "--val-range", "1,2"], capsys)
    assert code == 0 and "feeds: random, seeds 5-7 (the first shown), dims rows=3 (default), cols=3 (default): " \
        "x float32 [3x3] in [1" in out


@pytest.mark.parametrize("command", ["run", "check"])
def test_the_sizes_drawn_say_which_were_defaulted(command, tmp_path, capsys) -> None:
    """A symbolic dimension no --dim sets is drawn at the default size: the line and the JSON say
    so beside the one --dim set (a new user's report said dims {} and never that seq was 3)."""
    code, out, err = cli([command, NONZERO, "--dim", "rows=5", "--json", tmp_path / "r.json"], capsys)
    assert code == 0, err
    assert "feeds: random, seed 0, dims rows=5, cols=3 (default): x float32 [5x3]" in out
    feeds = json.loads((tmp_path / "r.json").read_text())["feeds"]
    assert (feeds["dims"], feeds["default_dims"]) == ({"rows": 5, "cols": 3}, ["cols"])


def test_markdown_report_says_what_was_fed(tmp_path, capsys) -> None:
    saved, markdown = tmp_path / "in.npz", tmp_path / "r.md"
    code, out, _ = cli(["check", NONZERO, "--seed", 7, "--save-inputs", saved, "--markdown", markdown], capsys)
    assert code == 0
    from onnx_dml_lowering.ir.display import markdown_cell
    line = next(line for line in out.splitlines() if line.startswith("feeds: "))
    assert f"\n{markdown_cell('Feeds' + line[len('feeds'):])}.\n" in markdown.read_text()    # [ ] escaped


@pytest.mark.parametrize("onnx_type", ["BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                                       "INT4", "UINT4"])
@pytest.mark.parametrize("command", ["run", "check"])
def test_an_ml_dtypes_feed_read_back_is_described_like_any_other(command, onnx_type, tmp_path, capsys):
    """A bfloat16 / float8 / 4-bit feed saved to an .npz (raw records there) and given with
    --inputs: the feeds line and JSON say its type, range and zeros, as numpy computes them from
    the values it was saved from, not '|V2' (issue 35)."""
    import ml_dtypes
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    elem = getattr(T, onnx_type)
    model = h.make_model(h.make_graph([h.make_node("Cast", ["x"], ["y"], to=T.FLOAT, name="cast")], "g",
                                      [h.make_tensor_value_info("x", elem, [3, 4])],
                                      [h.make_tensor_value_info("y", T.FLOAT, [3, 4])]),
                         opset_imports=[h.make_opsetid("", 21)], ir_version=10)
    onnx.save(model, tmp_path / "m.onnx")
    dtype = np.dtype(getattr(ml_dtypes, onnx_type.lower().replace("float8e", "float8_e")))
    values = np.random.default_rng(0).integers(-3, 4, (3, 4)).astype(np.float32)
    values[0] = 0
    feeds = values.astype(dtype)
    from onnx_dml_lowering.runtime.npz import save_npz
    save_npz(str(tmp_path / "in.npz"), {"x": feeds}, "test feeds")
    code, out, err = cli([command, tmp_path / "m.onnx", "--backends", "ort-cpu", "--inputs", tmp_path / "in.npz",
                          "--json", tmp_path / "r.json"], capsys)
    assert code == 0, out + err
    shown = feeds.astype(np.float32)
    zeros = int(np.count_nonzero(shown == 0))
    line = f"feeds: from {tmp_path / 'in.npz'}: x {dtype} [3x4] in [{shown.min():.4g}, {shown.max():.4g}], {zeros} of 12 zero"
    assert line in out.splitlines(), out
    described = json.loads((tmp_path / "r.json").read_text())["feeds"]["inputs"]["x"]
    assert (described["dtype"], described["zeros"]) == (str(dtype), zeros)
