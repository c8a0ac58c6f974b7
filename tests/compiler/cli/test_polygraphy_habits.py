"""Polygraphy habits answered in one line each: --val-range [LO,HI], --input-shapes (here --dim),
--backends ort-<provider> (here ort:<ProviderName>, derived from onnxruntime's own provider list)."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tests.cli_runner import cli

NONZERO = "tests/models/nonzero.dynamo.onnx"
EYE = "tests/models/eye.dynamo.onnx"
# every provider onnxruntime knows, spelt as Polygraphy spells its own (ort-cpu / ort-dml are ours)
POLYGRAPHY_SPELLINGS = [(f"ort-{name.removesuffix('ExecutionProvider').lower()}", name)
                        for name in ort.get_all_providers()
                        if name not in ("CPUExecutionProvider", "DmlExecutionProvider")]


@pytest.mark.parametrize("spelling", ["[0,1]", "x:[0,1]", "[-1,1]", "0,1"])
def test_val_range_in_brackets_is_the_range(spelling, tmp_path, capsys) -> None:
    bare = spelling.strip("[]").replace("x:[", "")
    code, _, err = cli(["run", NONZERO, "--val-range", spelling, "--save-inputs", tmp_path / "a.npz"], capsys)
    assert code == 0, err
    code, _, err = cli(["run", NONZERO, "--val-range", bare.replace("x:", ""), "--save-inputs", tmp_path / "b.npz"],
                       capsys)
    assert code == 0, err
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        assert a["x"].tobytes() == b["x"].tobytes()
        lo, hi = (float(v) for v in bare.replace("x:", "").split(","))
        assert lo <= a["x"].min() and a["x"].max() <= hi


@pytest.mark.parametrize("argv", [["--input-shapes", "x:[1,3]"], ["--input-shapes=x:[1,3]"], ["--input-shapes"]])
@pytest.mark.parametrize("command", ["run", "check", "reduce"])
def test_input_shapes_points_to_dim(command, argv, capsys) -> None:
    extra = ["-o", "out.onnx", "--backends", "cpu"] if command == "reduce" else []
    with pytest.raises(SystemExit) as stopped:
        cli([command, EYE, *extra, *argv], capsys)
    out, err = capsys.readouterr()
    assert stopped.value.code == 2 and out == ""
    assert err.count("\n") == 1 and "--input-shapes" in err and "--dim NAME=SIZE" in err and "usage" not in err


@pytest.mark.parametrize("backend, provider", POLYGRAPHY_SPELLINGS)
def test_ort_dash_provider_suggests_its_ort_name(backend, provider, capsys) -> None:
    code, out, err = cli(["check", EYE, "--backends", backend], capsys)
    assert code == 2 and err.count("\n") == 1
    assert f"is ort:{provider})" in err


@pytest.mark.parametrize("backend, provider", [("ort-trt", "TensorrtExecutionProvider"),
                                               ("ort-open-vino", "OpenVINOExecutionProvider")])
def test_other_spellings_of_a_provider(backend, provider, capsys) -> None:
    if provider not in ort.get_all_providers():
        pytest.skip(f"this onnxruntime does not know {provider}")
    code, _, err = cli(["run", EYE, "--backends", backend], capsys)
    assert code == 2 and f"is ort:{provider})" in err


@pytest.mark.parametrize("backend", ["ort-nosuch", "ort-", "cuda"])
def test_no_suggestion_for_what_names_no_provider(backend, capsys) -> None:
    code, _, err = cli(["check", EYE, "--backends", backend], capsys)
    assert code == 2 and "unknown backend" in err and " is ort:" not in err
