"""Random feeds keep an explicit --val-range (no forced zeros, no -0.0 unless --zero-fraction asks),
and every run / check report says what was fed in one 'feeds:' line (text) and under "feeds" (JSON):
the source and seed, and per input its dtype, shape, range and zeros, as numpy computes them from
the very feeds --save-inputs wrote."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T

from onnx_dml_lowering.runtime.feeds import random_feeds
from tests.builders import tensor
from tests.cli_runner import cli

NONZERO = "tests/models/nonzero.dynamo.onnx"          # one input x float32 [3, 3]
TYPES = [T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16, T.INT8, T.INT32, T.INT64, T.UINT8, T.UINT16]


@pytest.mark.parametrize("elem", TYPES)
@pytest.mark.parametrize("bounds", [(5, 6), (-3, -1), (1, 1), (0.5, 2.5)])
def test_explicit_range_holds_without_a_zero_fraction(elem, bounds) -> None:
    if elem in (T.UINT8, T.UINT16) and bounds[1] < 0:
        return                              # no unsigned value there: refused, as tested elsewhere
    feeds = random_feeds([tensor("x", elem, [40, 50])], seed=1, value_range=bounds)
    values = feeds["x"].astype(np.float64)
    assert values.min() >= np.floor(bounds[0]) and values.max() <= bounds[1] + 1e-2 * abs(bounds[1])
    assert not np.any(values == 0) and not np.any(np.signbit(values) & (values == 0))


@pytest.mark.parametrize("fraction", [0.25, 0.5, 1.0])
def test_a_zero_fraction_given_with_the_range_still_zeroes(fraction) -> None:
    for per_input in (False, True):
        kwargs = ({"input_zero_fraction": {"x": fraction}} if per_input else {"zero_fraction": fraction})
        x = random_feeds([tensor("x", T.FLOAT, [100, 100])], seed=2, value_range=(5, 6), **kwargs)["x"]
        assert abs(np.mean(x == 0) - fraction) < 0.02
        assert np.all((x == 0) | ((x >= 5) & (x <= 6)))


def test_per_input_range_leaves_other_inputs_their_default_zeros() -> None:
    feeds = random_feeds([tensor("x", T.INT64, [100, 100]), tensor("y", T.INT64, [100, 100]),
                          tensor("b", T.BOOL, [100, 100])], seed=3, input_value_range={"x": (5, 6)})
    assert not np.any(feeds["x"] == 0)
    assert abs(np.mean(feeds["y"] == 0) - 0.5) < 0.03          # the default: half zero
    assert abs(np.mean(feeds["b"]) - 0.5) < 0.03                # booleans: half true, range or not


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([T.FLOAT, T.DOUBLE, T.INT32, T.INT64]), st.integers(-10**6, 10**6),
       st.integers(0, 10**6), st.integers(0, 2**31))
def test_range_property(elem, lo, width, seed) -> None:
    x = random_feeds([tensor("x", elem, [7, 5])], seed=seed, value_range=(lo, lo + width))["x"]
    hi, values = lo + width, x.astype(np.float64)
    assert lo - abs(lo) * 1e-6 <= values.min() and values.max() <= hi + abs(hi) * 1e-6   # float32 rounding


def _expected_summary(path) -> dict:
    """The feeds --save-inputs wrote, summarised by plain numpy."""
    with np.load(path) as data:
        return {name: {"dtype": str(data[name].dtype), "shape": list(data[name].shape),
                       "min": data[name].min().item(), "max": data[name].max().item(),
                       "zeros": int(np.count_nonzero(data[name] == 0)), "nonfinite": 0} for name in data}


@pytest.mark.parametrize("options, source", [
    ([], {"source": "random", "seed": 0, "iterations": 1}),
    (["--seed", "4", "--val-range", "x:5,6"], {"source": "random", "seed": 4, "iterations": 1}),
    (["--zero-fraction", "0.8", "--val-range", "[-2,3]"], {"source": "random", "seed": 0, "iterations": 1}),
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
    assert lines == [f"feeds: random, seed {source['seed']}: x float32 [3x3] in [{x['min']:.4g}, {x['max']:.4g}]{zeros}"]
    if "x:5,6" in options:
        assert x["min"] >= 5 and x["zeros"] == 0


def test_feeds_line_of_an_inputs_file_and_of_several_sets(tmp_path, capsys) -> None:
    feeds = tmp_path / "f.npz"
    np.savez(feeds, x=np.array([[1, 0, 2], [0, 0, 3], [4, 5, 6]], np.float32))
    code, out, _ = cli(["check", NONZERO, "--inputs", feeds], capsys)
    assert code == 0 and f"feeds: from {feeds}: x float32 [3x3] in [0, 6], 3 of 9 zero\n" in out
    code, out, _ = cli(["check", NONZERO, "--iterations", "3", "--seed", "5", "--val-range", "1,2"], capsys)
    assert code == 0 and "feeds: random, seeds 5-7 (the first shown): x float32 [3x3] in [1" in out


def test_markdown_report_says_what_was_fed(tmp_path, capsys) -> None:
    saved, markdown = tmp_path / "in.npz", tmp_path / "r.md"
    code, out, _ = cli(["check", NONZERO, "--seed", 7, "--save-inputs", saved, "--markdown", markdown], capsys)
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("feeds: "))
    assert f"\nFeeds{line[len('feeds'):]}.\n" in markdown.read_text()
