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


@pytest.mark.parametrize("dtype, steps", [
    (np.float32, None), (np.float64, None), (np.float16, 1), (ml_dtypes.bfloat16, 1), (ml_dtypes.float8_e5m2, 1),
    (ml_dtypes.float8_e4m3fn, 1), (ml_dtypes.float8_e5m2fnuz, 1), (ml_dtypes.float4_e2m1fn, 1), (np.int64, None)])
def test_default_rtol_of_a_type_coarser_than_float32_also_passes_one_step(dtype, steps):
    """1e-5 everywhere; a type whose epsilon is larger passes one step of its grid besides (not its
    epsilon as an rtol); a given rtol is the plain rule."""
    atol, rtol = Tolerances().for_output("y", np.dtype(dtype))
    assert (atol, rtol) == (1e-5, 1e-5) and getattr(rtol, "steps", None) == steps
    for given in (Tolerances.parse(None, ["1e-6"]), Tolerances.parse(None, ["y=1e-6"])):
        atol, rtol = given.for_output("y", np.dtype(dtype))
        assert (atol, rtol) == (1e-5, 1e-6) and not hasattr(rtol, "steps")     # a given one is kept, plain
    atol, rtol = Tolerances.parse(["y=1e-3"], None).for_output("y", np.dtype(dtype))
    assert atol == 1e-3 and getattr(rtol, "steps", None) == steps                # an atol alone keeps the steps


def test_float8e8m0_is_exact_by_default():
    """Powers of two without zero: no default tolerance (1e-5 would pass every scale below it);
    a given one holds."""
    e8m0 = np.dtype(ml_dtypes.float8_e8m0fnu)
    assert Tolerances().for_output("s", e8m0) == (0.0, 0.0)
    assert Tolerances.parse(["1e-3"], None).for_output("s", e8m0) == (1e-3, 0.0)
    assert Tolerances.parse(None, ["s=0.5"]).for_output("s", e8m0) == (0.0, 0.5)
    assert Tolerances(atol=1e-3).for_output("s", e8m0) == (1e-3, 0.0)       # the Python API's own value


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


def _identity_model(path, elem: int) -> None:
    """x -> Identity -> y of one type, at the opset that has it (float8e8m0 / float4e2m1: 24)."""
    graph = h.make_graph([h.make_node("Identity", ["x"], ["y"], name="id")], "g",
                         [h.make_tensor_value_info("x", elem, [None])], [h.make_tensor_value_info("y", elem, [None])])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 24)], ir_version=11), path)


@pytest.mark.parametrize("elem, fed, golden, match", [
    (T.FLOAT8E8M0, [1.0, 2.0 ** -100, 1.0, 2.0 ** -127], [2.0 ** 100, 1.0, 2.0 ** 20, 2.0 ** 127], False),
    (T.FLOAT8E8M0, [2.0 ** -20], [2.0 ** -30], False),
    (T.FLOAT8E8M0, [2.0 ** -20, 8.0], [2.0 ** -20, 8.0], True),
    (T.FLOAT4E2M1, [3.0, 2.0, 1.0], [6.0, 4.0, 2.0], False),      # two steps each
    (T.FLOAT4E2M1, [4.0, 3.0, 1.5], [6.0, 4.0, 2.0], True),       # one step each
    (T.FLOAT8E4M3FN, [1.25], [1.0], False),
    (T.FLOAT8E4M3FN, [1.125], [1.0], True),
])
def test_coarse_float_outputs_against_a_golden_file(elem, fed, golden, match, tmp_path, capsys):
    """A golden file whose values are binades (float8e8m0) or two steps (float4e2m1, float8) away is
    a MISMATCH; one step of the type is not."""
    dtype = np.dtype(h.tensor_dtype_to_np_dtype(elem))
    _identity_model(tmp_path / "m.onnx", elem)
    np.savez(tmp_path / "in.npz", x=np.array(fed, np.float64).astype(dtype))
    np.savez(tmp_path / "gold.npz", y=np.array(golden, np.float64).astype(dtype))
    code, out, err = cli(["check", tmp_path / "m.onnx", "--inputs", tmp_path / "in.npz", "--oracle",
                          tmp_path / "gold.npz", "--backends", "cpu", "-q"], capsys)
    assert code == (0 if match else 1) and err == "", out + err
    assert ("y: MISMATCH" in out) is not match


def _string_model(path) -> None:
    """Cast(int64 -> string) s, its Identity t, their Concat u, and an Identity of a string constant c."""
    nodes = [h.make_node("Cast", ["x"], ["s"], to=T.STRING, name="tostr"),
             h.make_node("Identity", ["s"], ["t"], name="same"),
             h.make_node("Concat", ["s", "t"], ["u"], axis=0, name="join"),
             h.make_node("Constant", [], ["k"], name="const",
                         value=h.make_tensor("kv", T.STRING, [2], [b"a", "b\u00e9".encode()])),
             h.make_node("Identity", ["k"], ["c"], name="copy")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.INT64, [3])],
                         [h.make_tensor_value_info(n, T.STRING, [None]) for n in "stuc"])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10), path)


@pytest.mark.parametrize("oracle", ["reference", "hybrid", "ort-cpu"])
def test_string_outputs_match_whichever_engine_gives_them(oracle, tmp_path, capsys):
    """onnxruntime gives object arrays, onnx.reference fixed-width '<U': both ONNX's STRING."""
    _string_model(tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", x=np.array([1, -7, 123456789], np.int64))
    code, out, err = cli(["check", tmp_path / "m.onnx", "--inputs", tmp_path / "in.npz", "--oracle", oracle,
                          "--backends", "cpu,ort,ort-cpu", "--json", tmp_path / "r.json"], capsys)
    assert code == 0 and "MISMATCH" not in out, out + err
    outputs = [o for b in json.loads((tmp_path / "r.json").read_text())["backends"] for o in b["outputs"]]
    assert len(outputs) == 12 and {(o["status"], o["expected_dtype"], o["actual_dtype"]) for o in outputs} == {
        ("match", "string", "string")}


def test_integer_errors_past_2_53_in_the_line_and_the_json(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(graph_model([h.make_node("Identity", ["x"], ["y"], name="id")], [("x", T.INT64, [4])],
                          [("y", T.INT64, [4])]), path)
    fed = np.array([2**63 - 1, -2**63, 2**62 + 1, 0], np.int64)
    np.savez(tmp_path / "in.npz", x=fed)
    np.savez(tmp_path / "gold.npz", y=fed - np.array([1, 0, 1, 0], np.int64))
    code, out, _ = cli(["check", path, "--inputs", tmp_path / "in.npz", "--oracle", tmp_path / "gold.npz",
                        "--backends", "cpu", "-q", "--json", tmp_path / "r.json"], capsys)
    assert code == 1 and "y: MISMATCH (int64 [4]) max abs err 1 (mean 0.5)" in out, out
    (result,) = json.loads((tmp_path / "r.json").read_text())["backends"][0]["outputs"]
    assert (result["max_abs_error"], result["mean_abs_error"], result["mismatches"]) == (1, 0.5, 2)


@pytest.mark.parametrize("golden, code", [(math.nan, 0), (1.0, 1)])
def test_a_signalling_nan_output_prints_no_warning(golden, code, tmp_path, capsys, recwarn):
    path = tmp_path / "m.onnx"
    onnx.save(graph_model([h.make_node("Identity", ["x"], ["y"], name="id")], [("x", T.FLOAT, [1])],
                          [("y", T.FLOAT, [1])]), path)
    np.savez(tmp_path / "in.npz", x=np.array([0x7F800001], np.uint32).view(np.float32))
    np.savez(tmp_path / "gold.npz", y=np.array([golden], np.float32))
    result = cli(["check", path, "--inputs", tmp_path / "in.npz", "--oracle", tmp_path / "gold.npz",
                  "--backends", "cpu", "-q"], capsys)
    assert result[0] == code and result[2] == "" and not [w for w in recwarn.list if "compare" in w.filename]
