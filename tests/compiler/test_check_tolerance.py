"""The comparison rule and the tolerance policy end to end: `dml-lower check --load-outputs` with a
saved file whose values were edited (infinities, NaN, signed zeros), lowered outputs compared
exactly, the smallest passing tolerances in the MISMATCH line and in --json."""
from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.check import Tolerances, lowered_outputs
from onnx_dml_lowering.runtime.compare import ceil_text, compare
from tests.builders import graph_model
from tests.cli_runner import cli
from tests.lowering.test_mask_idioms import Mask, mask_model

F32 = np.finfo(np.float32)


def model() -> onnx.ModelProto:
    """y: computed by onnxruntime (Identity of x); eye: a lowered EyeLike; w: x * x on onnxruntime."""
    nodes = [h.make_node("Identity", ["x"], ["y"], name="copy"),
             h.make_node("EyeLike", ["m"], ["eye"], name="eyelike"),
             h.make_node("Mul", ["m", "m"], ["w"], name="mul")]
    return graph_model(nodes, [("x", T.FLOAT, [2]), ("m", T.FLOAT, [3, 3])],
                       [("y", T.FLOAT, [2]), ("eye", T.FLOAT, [3, 3]), ("w", T.FLOAT, [3, 3])])


@pytest.fixture
def saved(tmp_path, capsys):
    """write(expected y, {output: edit}) -> (model path, inputs, file of cpu's outputs edited)."""
    path = tmp_path / "m.onnx"
    onnx.save(model(), path)

    def write(y_value: float, edits: "dict[str, object]"):
        inputs, good, bad = tmp_path / "in.npz", tmp_path / "good.npz", tmp_path / "bad.npz"
        np.savez(inputs, x=np.array([1.0, y_value], np.float32),
                 m=np.arange(1, 10, dtype=np.float32).reshape(3, 3) / 7)
        code, _, err = cli(["check", path, "--inputs", inputs, "--save-outputs", good], capsys)
        assert code == 0, err
        with np.load(good) as data:
            values = dict(data)
        for name, edit in edits.items():
            values[f"cpu:{name}"] = edit(values[f"cpu:{name}"].copy())
        np.savez(bad, **values)
        return path, inputs, bad
    return write


def set_last(value):
    def edit(array):
        array.reshape(-1)[-1] = value
        return array
    return edit


# expected y[1] (what the model computes), what the saved file holds instead, MATCH?
CASES = {
    "-inf read back as 0": (-math.inf, 0.0, False),
    "-inf read back as float32 min": (-math.inf, F32.min, False),
    "+inf read back as 7": (math.inf, 7.0, False),
    "+inf read back as float32 max": (math.inf, F32.max, False),
    "+inf read back as -inf": (math.inf, -math.inf, False),
    "+inf kept": (math.inf, math.inf, True),
    "-inf kept": (-math.inf, -math.inf, True),
    "NaN read back as 0": (math.nan, 0.0, False),
    "0 read back as NaN": (0.0, math.nan, False),
    "NaN with another payload": (math.nan, np.array(0x7FC00001, np.uint32).view(np.float32), True),
    "+0.0 read back as -0.0": (0.0, -0.0, True),
    "-0.0 read back as +0.0": (-0.0, 0.0, True),
    "subnormal read back as 0": (float(F32.smallest_subnormal), 0.0, True),
    "within the default tolerance": (3.0, 3.00002, True),
    "past the default tolerance": (3.0, 3.0001, False),
}


@pytest.mark.parametrize("case", CASES)
def test_special_values_through_load_outputs(case, saved, capsys):
    expected, stored, match = CASES[case]
    path, inputs, bad = saved(expected, {"y": set_last(stored)})
    code, out, err = cli(["check", path, "--inputs", inputs, "--load-outputs", bad, "-q"], capsys)
    line = next((text for text in out.splitlines() if "[saved:cpu] y:" in text), "")
    if match:
        assert code == 0 and line == "", out + err
    else:
        assert code == 1 and "y: MISMATCH" in line and "1 of 2 elements differ; first at [1]" in line, out + err
        if math.isinf(expected) or math.isnan(expected) or math.isnan(stored) or math.isinf(stored):
            assert "no finite tolerance would pass (an infinity or NaN differs)" in line


def test_lowered_output_is_exact_where_others_take_the_tolerance(saved, capsys, tmp_path):
    """One step off in float32 (2.4e-8 relative): MATCH for w (onnxruntime's Mul), MISMATCH for the
    lowered EyeLike's output, which a tolerance named for it relaxes."""
    step = lambda a: np.nextafter(a, np.float32(2), dtype=np.float32)  # noqa: E731
    path, inputs, bad = saved(1.0, {"eye": step, "w": step})
    report = tmp_path / "r.json"
    code, out, _ = cli(["check", path, "--inputs", inputs, "--load-outputs", bad, "-q", "--json", report], capsys)
    assert code == 1 and "[saved:cpu] w:" not in out
    (line,) = [text for text in out.splitlines() if "[saved:cpu] eye:" in text]
    assert "MISMATCH" in line and "9 of 9 elements differ" in line
    assert "compared exactly: the output of lowered node eyelike" in line
    outputs = {o["output"]: o for b in json.loads(report.read_text())["backends"] if b["backend"] == "saved:cpu"
               for o in b["outputs"]}
    eye = outputs["eye"]
    assert eye["exact"] is True and eye["atol"] == 0 and eye["rtol"] == 0
    ones = np.float64(step(np.float32(1)))                   # the largest difference: 1 + 2^-23 against 1
    assert eye["smallest_atol"] == ones - 1 and eye["smallest_rtol"] is None     # 0 stepped to a subnormal
    assert (f"would pass with atol {ceil_text(ones - 1)} (at rtol 0); no rtol would (it differs where 0 is "
            "expected)") in line
    assert outputs["w"]["exact"] is False and outputs["w"]["atol"] == 1e-5 and outputs["w"]["smallest_atol"] is None
    code, out, _ = cli(["check", path, "--inputs", inputs, "--load-outputs", bad, "-q", "--atol", "eye=1e-6"], capsys)
    assert code == 0 and "MISMATCH" not in out
    code, out, _ = cli(["check", path, "--inputs", inputs, "--load-outputs", bad, "-q", "--atol", "1e-3"], capsys)
    assert code == 1 and "[saved:cpu] eye: MISMATCH" in out        # the global value does not loosen it


def test_lowered_outputs_follow_value_moves():
    """A lowered mask reaches the graph output through an exporter's Identity: still exact; a Cast
    or arithmetic after a lowered node is not its value."""
    compiled = compile_model(mask_model(Mask(cast=T.FLOAT)))
    assert lowered_outputs(compiled) == {"y": "cast"}
    tolerances = Tolerances.parse(["1e-3"], None).for_model(compiled)
    assert tolerances.for_output("y") == (0.0, 0.0) and tolerances.is_exact("y")
    compiled = compile_model(model())
    assert lowered_outputs(compiled) == {"eye": "eyelike"}
    tolerances = Tolerances.parse(["eye=1e-6"], None).for_model(compiled)
    assert tolerances.for_output("eye") == (1e-6, 0.0) and not tolerances.is_exact("eye")
    assert tolerances.for_output("w") == (1e-5, 1e-5)


def test_lowered_mask_and_eye_match_exactly_on_every_backend(tmp_path, capsys):
    """The lowered outputs are bit-exact on the emulator, the lowered graph on onnxruntime and the
    original model on onnxruntime: MATCH at atol = rtol = 0."""
    path = tmp_path / "mask.onnx"
    onnx.save(mask_model(Mask(op="Less", offset="run-time", window=4, cast=T.FLOAT)), path)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, n=np.array(6, np.int64), past=np.array(3, np.int64))
    report = tmp_path / "r.json"
    code, out, _ = cli(["check", path, "--inputs", inputs, "--backends", "cpu,ort,ort-cpu", "--json", report], capsys)
    assert code == 0, out
    results = [o for b in json.loads(report.read_text())["backends"] for o in b["outputs"]]
    assert len(results) == 3 and all(o["exact"] and o["status"] == "match" and o["max_abs_error"] == 0
                                     for o in results)


@pytest.mark.parametrize("dtype, rtol", [
    (np.float32, 1e-5), (np.float64, 1e-5), (np.float16, float(np.finfo(np.float16).eps)),
    (ml_dtypes.bfloat16, 2.0 ** -7), (ml_dtypes.float8_e5m2, 0.25), (ml_dtypes.float8_e4m3fn, 0.125),
    (np.int64, 1e-5)])
def test_default_rtol_is_at_least_the_types_epsilon(dtype, rtol):
    assert Tolerances().for_output("y", np.dtype(dtype)) == (1e-5, rtol)
    assert Tolerances.parse(None, ["1e-6"]).for_output("y", np.dtype(dtype)) == (1e-5, 1e-6)   # a given one is kept
    assert Tolerances.parse(None, ["y=2e-6"]).for_output("y", np.dtype(dtype)) == (1e-5, 2e-6)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_one_rounding_apart_in_half_precision_matches_by_default(dtype):
    """One unit in the last place at 100: a MATCH at the default rtol, a MISMATCH at rtol 1e-5."""
    want = np.array([100.0, -3.0], np.float64).astype(dtype)
    got = want.copy()
    got.view(np.uint16)[0] += 1           # the next value of the type above 100
    atol, rtol = Tolerances().for_output("y", want.dtype)
    assert compare("y", "b", want, got, atol, rtol).status == "match"
    assert compare("y", "b", want, got, 1e-5, 1e-5).status == "mismatch"


def test_a_generated_initializer_output_is_exact_and_not_a_semantic_node():
    """An eye initializer the lowering generates instead of storing, passed through an Identity to
    the output: its value is the generator's, exact; the placement entry carries the initializer
    by name (its label 'initializer:w' is what the reports show, never decoded)."""
    from onnx_dml_lowering.runtime.oracle import make_oracle
    eye = h.make_tensor("w", T.FLOAT, [3, 3], np.eye(3, dtype=np.float32).reshape(-1).tolist())
    compiled = compile_model(graph_model([h.make_node("Identity", ["w"], ["y"], name="copy"),
                                          h.make_node("Relu", ["x"], ["z"], name="relu")],
                                         [h.make_tensor_value_info("x", T.FLOAT, [3])],
                                         [h.make_tensor_value_info("y", T.FLOAT, [3, 3]),
                                          h.make_tensor_value_info("z", T.FLOAT, [3])], [eye]))
    (generated,) = [p for p in compiled.placement if p.initializer]
    assert generated.initializer == "w" and generated.onnx_nodes == ["initializer:w"]
    assert generated.to_dict()["onnx_nodes"] == ["initializer:w"]
    assert lowered_outputs(compiled) == {"y": "initializer:w"}
    assert "initializer:w" not in make_oracle(compiled).semantic


@pytest.mark.parametrize("options, says", [
    (["--atol", "y=1e-3", "--atol", "y=1e-2"], "--atol 'y=1e-2': y given two values, 0.001 and 0.01: give one"),
    (["--rtol", "1e-3", "--rtol", "1e-2"], "--rtol '1e-2': given two values, 0.001 and 0.01: give one"),
    (["--atol", "=1"], "--atol '=1': the output name before '=' is empty"),
    (["--rtol", "=1e-3"], "--rtol '=1e-3': the output name before '=' is empty"),
])
def test_a_tolerance_given_twice_or_for_no_name_is_refused(options, says, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(model(), path)
    code, out, err = cli(["check", path, *options], capsys)
    assert code == 2 and err.strip() == f"dml-lower: error: {says}" and out == ""


def test_the_same_tolerance_given_twice_alike_is_one(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(model(), path)
    code, out, err = cli(["check", path, "--atol", "y=1e-3", "--atol", "y=1e-3", "--rtol", "1", "--rtol", "1"], capsys)
    assert code == 0, out + err


@pytest.mark.parametrize("dtype", [T.INT64, T.INT8, T.UINT8, T.BOOL, T.INT32])
def test_a_tolerance_for_an_output_compared_exactly_is_refused(dtype, tmp_path, capsys):
    graph = h.make_graph([h.make_node("Identity", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", dtype, [3])],
                         [h.make_tensor_value_info("y", dtype, [3])])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    code, out, err = cli(["check", path, "--atol", "y=0.5"], capsys)
    name = T.DataType.Name(dtype).lower()
    assert code == 2 and err.strip() == (f"dml-lower: error: tolerance for 'y': that output is {name}, compared "
                                         "exactly (a tolerance applies to float outputs only)")
    for float_type in (T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16):     # the same tolerance on a float output holds
        graph.input[0].type.tensor_type.elem_type = graph.output[0].type.tensor_type.elem_type = float_type
        onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
        assert cli(["check", path, "--atol", "y=0.5"], capsys)[0] == 0
