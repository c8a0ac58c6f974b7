"""The DML EP's own deviations (DML_EP_PLACEMENT.md §5c) are emulated, named, and recognised in
a check of DML EP results (here: results saved on Windows and loaded with --load-outputs) only
when the answer is bit for bit the DML EP's; any other difference stays a MISMATCH."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

from onnx_dml_lowering.runtime.backend_names import parse_backend
from onnx_dml_lowering.runtime.dml_deviations import NAMES, dml_outputs, int32, recognise
from tests.cli_runner import cli


def single(node, inputs, outputs, opset=14, inits=()):
    return h.make_model(h.make_graph([node], "g", inputs, outputs, list(inits)),
                        opset_imports=[h.make_opsetid("", opset)], ir_version=8)


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def trilu(k, upper, shape=(3, 4)):
    return single(h.make_node("Trilu", ["x", "k"], ["y"], upper=upper), [vi("x", T.FLOAT, list(shape))],
                  [vi("y", T.FLOAT, list(shape))], inits=[onnx.numpy_helper.from_array(np.array(k, np.int64), "k")])


@pytest.mark.parametrize("k,upper,deviation", [
    (0, 1, None), (1, 0, None), (-2, 1, None), (2**31 - 2, 0, None),
    (2**31, 1, "trilu_k"),            # INT32_MIN: keeps everything, ONNX keeps nothing
    (2**40, 1, "trilu_k"),            # 0
    (-2**40, 0, "trilu_k"),           # 0
    (2**31 - 1, 0, "trilu_k_overflow"),
    (2**32 + 1, 1, "trilu_k"),        # 1: keeps the upper triangle, ONNX keeps nothing
])
def test_trilu_k_narrowing(k, upper, deviation):
    m = trilu(k, upper)
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    outputs, fired = dml_outputs(m, {"x": x})
    onnx_answer = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert [f[0] for f in fired] == ([deviation] if deviation else [])
    assert np.array_equal(outputs["y"], onnx_answer) == (deviation is None)
    if deviation == "trilu_k":        # the DML answer is ONNX's at the narrowed k
        narrowed = ReferenceEvaluator(trilu(int32(k), upper)).run(None, {"x": x})[0]
        assert np.array_equal(outputs["y"], narrowed)


@pytest.mark.parametrize("k", [0, 1, -3, 2**31, 2**40, -2**40, 2**32 + 1])
def test_eyelike_k_narrowing(k):
    m = single(h.make_node("EyeLike", ["x"], ["y"], k=k), [vi("x", T.FLOAT, [3, 5])], [vi("y", T.FLOAT, [3, 5])], 13)
    x = np.zeros((3, 5), np.float32)
    outputs, fired = dml_outputs(m, {"x": x})
    onnx_answer = ReferenceEvaluator(m).run(None, {"x": x})[0]
    narrowed = np.eye(3, 5, int32(k), dtype=np.float32)
    assert np.array_equal(outputs["y"], narrowed)
    assert bool(fired) == (not np.array_equal(narrowed, onnx_answer))


def test_cast_to_bool_clips():
    m = single(h.make_node("Cast", ["x"], ["y"], to=T.BOOL), [vi("x", T.FLOAT, [9])], [vi("y", T.BOOL, [9])], 13)
    x = np.array([0.0, -0.0, 0.5, -0.5, 1.0, 2.5, -3.0, np.nan, np.inf], np.float32)
    outputs, fired = dml_outputs(m, {"x": x})
    assert outputs["y"].tolist() == [False, False, False, False, True, True, False, False, True]
    assert fired == [("cast_bool_clip", "")]
    _, fired = dml_outputs(m, {"x": np.array([0, 1, 2, 0, 5, 1, 0, 3, 1], np.float32)})
    assert fired == []                 # whole non-negative values: DML agrees with ONNX


def test_cast_int64_to_bool_reads_the_low_word():
    m = single(h.make_node("Cast", ["x"], ["y"], to=T.BOOL), [vi("x", T.INT64, [5])], [vi("y", T.BOOL, [5])], 13)
    outputs, fired = dml_outputs(m, {"x": np.array([0, -1, 2**32, 2**32 + 1, -2**63], np.int64)})
    assert outputs["y"].tolist() == [False, True, False, True, False]
    assert fired == [("cast_bool_low_word", "")]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32])
def test_cast_to_bool_from_narrow_integers_is_onnx(dtype):
    x = np.array([0, 1, 7, np.iinfo(dtype).max, np.iinfo(dtype).min], dtype)
    m = single(h.make_node("Cast", ["x"], ["y"], to=T.BOOL), [vi("x", onnx.helper.np_dtype_to_tensor_dtype(x.dtype),
               [5])], [vi("y", T.BOOL, [5])], 13)
    outputs, fired = dml_outputs(m, {"x": x})
    assert outputs["y"].tolist() == (x != 0).tolist() and fired == []


def test_a_node_left_to_the_cpu_ep_keeps_onnx_semantics_but_a_scalar_nonzero():
    cast = single(h.make_node("Cast", ["x"], ["y"], to=T.BOOL, name="cast"), [vi("x", T.FLOAT, [2])],
                  [vi("y", T.BOOL, [2])], 13)
    outputs, fired = dml_outputs(cast, {"x": np.array([0.5, -1], np.float32)}, {"cast": "CPUExecutionProvider"})
    assert outputs["y"].tolist() == [True, True] and fired == []
    nz = single(h.make_node("NonZero", ["x"], ["y"], name="nz"), [vi("x", T.INT64, [])], [vi("y", T.INT64, [None, None])], 13)
    outputs, fired = dml_outputs(nz, {"x": np.array(3, np.int64)}, {"nz": "CPUExecutionProvider"})
    assert outputs["y"].shape == (1, 1) and fired == [("scalar_nonzero_cpu", "")]


def test_scalar_nonzero():
    m = single(h.make_node("NonZero", ["x"], ["y"]), [vi("x", T.FLOAT, [])], [vi("y", T.INT64, [None, None])], 13)
    outputs, fired = dml_outputs(m, {"x": np.array(3.0, np.float32)})
    assert outputs["y"].shape == (1, 1) and fired == [("scalar_nonzero", "")]


def test_recognise_only_the_exact_dml_answer():
    m = trilu(2**31 - 1, 0)
    x = np.ones((3, 4), np.float32)
    assert recognise(m, {"x": x}, "y", np.zeros((3, 4), np.float32)) == NAMES["trilu_k_overflow"]
    assert recognise(m, {"x": x}, "y", np.full((3, 4), 2.0, np.float32)) is None
    assert recognise(trilu(1, 1), {"x": x}, "y", np.zeros((3, 4), np.float32)) is None   # nothing deviates


@pytest.mark.parametrize("backend,expected", [
    ("ort-dml", True), ("ort:DmlExecutionProvider", True), ("saved:ort-dml", True), ("saved:run-ort-dml", True),
    ("saved:ort:DmlExecutionProvider", True), ("ort-cpu", False), ("ort:X", False), ("saved:ort-cpu", False),
    ("saved:run-cpu", False), ("saved:oracle", False), ("saved:outputs", False), ("cpu", False), ("dml", False)])
def test_from_dml_ep(backend, expected):
    assert parse_backend(backend).from_dml_ep is expected


def _saved_dml_check(tmp_path, capsys, saved_value):
    """check --load-outputs of results a check on Windows saved for ort-dml (made here from an
    ort-cpu save of the same feeds, its entry renamed and its value replaced)."""
    m = single(h.make_node("Cast", ["x"], ["y"], to=T.BOOL, name="cast"), [vi("x", T.FLOAT, [5])],
               [vi("y", T.BOOL, [5])], 13)
    onnx.save(m, str(tmp_path / "cast.onnx"))
    np.savez(tmp_path / "in.npz", x=np.array([0, 0.5, -1, np.nan, 2], np.float32))
    code, _, err = cli(["check", tmp_path / "cast.onnx", "--backends", "ort-cpu", "--inputs", tmp_path / "in.npz",
                        "--save-outputs", tmp_path / "s.npz"], capsys)
    assert code == 0, err
    saved = dict(np.load(tmp_path / "s.npz"))
    del saved["ort-cpu:y"]
    saved["ort-dml:y"] = saved_value
    np.savez(tmp_path / "dml.npz", **saved)
    code, out, err = cli(["check", tmp_path / "cast.onnx", "--backends", "cpu", "--inputs", tmp_path / "in.npz",
                          "--load-outputs", tmp_path / "dml.npz", "--json", tmp_path / "r.json"], capsys)
    report = json.loads((tmp_path / "r.json").read_text())
    result = next(o for b in report["backends"] if b["backend"] == "saved:ort-dml" for o in b["outputs"])
    return code, out, result


def test_check_names_a_saved_dml_answer_as_its_deviation(tmp_path, capsys):
    code, out, result = _saved_dml_check(tmp_path, capsys, np.array([False, False, False, False, True]))
    assert result["status"] == "deviation" and result["detail"] == NAMES["cast_bool_clip"]
    assert code == 0 and "DML EP deviation: Cast to bool" in out


def test_check_keeps_any_other_difference_a_mismatch(tmp_path, capsys):
    code, _, result = _saved_dml_check(tmp_path, capsys, np.array([True, False, False, False, True]))
    assert result["status"] == "mismatch" and code == 1


@pytest.mark.parametrize("dtype,elem", [(np.float32, T.FLOAT), (np.float16, T.FLOAT16)])
def test_relu_of_nan_gives_zero_on_the_dml_ep_only(dtype, elem):
    m = single(h.make_node("Relu", ["x"], ["y"], name="relu"), [vi("x", elem, [5])], [vi("y", elem, [5])], 13)
    x = np.array([np.nan, -np.nan, -1.0, 2.0, 6e-8], dtype)
    outputs, fired = dml_outputs(m, {"x": x})
    onnx_answer = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert np.isnan(onnx_answer[:2]).all()
    assert outputs["y"].tobytes() == np.where(np.isnan(x), 0, onnx_answer).astype(dtype).tobytes()
    assert fired == [("relu_nan", "2 NaN")]
    outputs, fired = dml_outputs(m, {"x": x}, {"relu": "CPUExecutionProvider"})
    assert outputs["y"].tobytes() == onnx_answer.tobytes() and fired == []
    outputs, fired = dml_outputs(m, {"x": x[2:]})        # no NaN: ONNX's answer, nothing fired
    assert fired == []


def test_relu_of_double_is_not_predicted_to_deviate():
    m = single(h.make_node("Relu", ["x"], ["y"]), [vi("x", T.DOUBLE, [1])], [vi("y", T.DOUBLE, [1])], 13)
    outputs, fired = dml_outputs(m, {"x": np.array([np.nan])})
    assert np.isnan(outputs["y"]).all() and fired == []


def _scalar_nonzero_then(op, elem=T.FLOAT, rank=0, **attrs):
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"), h.make_node(op, ["nz"], ["y"], name="reader", **attrs)]
    graph = h.make_graph(nodes, "g", [vi("x", elem, [3] * rank)], [h.make_tensor_value_info("y", T.INT64, None)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("op,attrs,elem,rank,failing", [
    ("Transpose", {"perm": [1, 0]}, T.FLOAT, 0, ["reader"]), ("Transpose", {}, T.BOOL, 0, ["reader"]),
    ("Cast", {"to": T.FLOAT}, T.INT64, 0, ["reader"]), ("Identity", {}, T.FLOAT, 0, []),
    ("Transpose", {"perm": [1, 0]}, T.FLOAT, 1, []), ("Transpose", {"perm": [1, 0]}, T.FLOAT, 2, [])])
def test_a_node_reading_a_scalar_nonzero_is_a_predicted_failure(op, attrs, elem, rank, failing):
    from onnx_dml_lowering.runtime.dml_deviations import failing_nodes
    found = failing_nodes(_scalar_nonzero_then(op, elem, rank, **attrs))
    assert [f.node for f in found] == failing
    assert all(f.key == "scalar_nonzero_read" for f in found)


def test_the_scalar_nonzero_failure_is_named_in_onnxruntimes_message():
    from onnx_dml_lowering.runtime.dml_deviations import FAILURES, name_failure
    model = _scalar_nonzero_then("Transpose", perm=[1, 0])
    run = "Non-zero status code returned while running {} node. Name:'{}' Status Message: 80070057 Invalid parameter."
    want = f"{FAILURES['scalar_nonzero_read']} (node reader)"
    assert name_failure(model, run.format("Transpose", "reader"), at_run=True) == want
    # the NonZero on the CPU EP (int64): the copy onnxruntime inserted before the reader fails
    assert name_failure(model, run.format("MemcpyFromHost", "Memcpy"), at_run=True) == want
    assert name_failure(model, run.format("Transpose", "other"), at_run=True) is None
    assert name_failure(model, run.format("Transpose", "reader").replace("80070057", "8007000E"), at_run=True) is None
    assert name_failure(model, "80070057 at session creation", at_run=False) is None


def test_recognise_a_deviation_in_a_model_whose_weights_stay_in_its_file(tmp_path):
    """A loaded file's weights of LAZY_MIN_BYTES or more stay in it (external data): the DML EP's
    answer is still worked out with them and its deviation named, not given up on."""
    from onnx_dml_lowering.compiler import compile_model
    from onnx_dml_lowering.runtime.weights import LAZY_MIN_BYTES, is_lazy
    side = 48                                                   # 48 x 48 float32: 9 KiB
    w = onnx.numpy_helper.from_array(np.arange(side * side, dtype=np.float32).reshape(side, side), "w")
    k = onnx.numpy_helper.from_array(np.array(2**31 - 1, np.int64), "k")
    model = h.make_model(h.make_graph(
        [h.make_node("Add", ["x", "w"], ["s"]), h.make_node("Trilu", ["s", "k"], ["y"], upper=0)], "g",
        [vi("x", T.FLOAT, [side, side])], [vi("y", T.FLOAT, [side, side])], [w, k]),
        opset_imports=[h.make_opsetid("", 14)], ir_version=8)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    loaded = compile_model(str(path)).model
    assert w.ByteSize() > LAZY_MIN_BYTES and any(is_lazy(t) for t in loaded.graph.initializer)
    x = np.ones((side, side), np.float32)
    assert recognise(loaded, {"x": x}, "y", np.zeros((side, side), np.float32)) == NAMES["trilu_k_overflow"]


# --- RoiAlign: RoiAlign-10 as half_pixel, output_half_pixel without the clamp -------------------

from onnx_dml_lowering.runtime.dml_deviations import dml_roi_align, roi_align_deviation  # noqa: E402
from onnx_dml_lowering.runtime.compare import compare  # noqa: E402
from tests import roi_align_models as roi  # noqa: E402


def test_roi_align_deviation_table():
    assert roi_align_deviation(10, None) == "roialign_10_half_pixel"
    assert roi_align_deviation(16, "output_half_pixel") == "roialign_unclamped"
    assert roi_align_deviation(16, "half_pixel") is None and roi_align_deviation(16, None) is None


@pytest.mark.parametrize("opset,transform,rois,key", [
    (10, None, "big", "roialign_10_half_pixel"), (10, None, "small", "roialign_10_half_pixel"),
    (16, "output_half_pixel", "small", "roialign_unclamped"), (16, "output_half_pixel", "mixed", "roialign_unclamped"),
    (16, "output_half_pixel", "big", None), (16, "half_pixel", "small", None), (16, "half_pixel", "big", None)])
def test_roi_align_fires_only_where_the_dml_answer_differs(opset, transform, rois, key):
    model, feeds = roi.roi_align(opset, transform, rois), roi.feeds()
    out, fired = dml_outputs(model, feeds)
    assert [k for k, _ in fired] == ([key] if key else [])
    onnx_mode = transform or "output_half_pixel"        # RoiAlign-10's ONNX semantics
    spec = ReferenceEvaluator(roi.roi_align(16, onnx_mode, rois)).run(None, feeds)[0]
    if key is None:
        np.testing.assert_array_equal(out["y"], spec)
    else:
        assert not np.allclose(out["y"], spec, atol=1e-3)


def test_the_emulation_is_half_pixel_and_unclamped_output_half_pixel_where_rois_are_big():
    """RoiAlign-10 on DML is onnx.reference's half_pixel answer; the unclamped emulation of large ROIs
    is output_half_pixel's (the clamp changes nothing there), both to float rounding."""
    feeds = roi.feeds(1)
    boxes, bi = np.array(roi.ROIS["big"], np.float32), np.zeros(1, np.int64)
    attrs = dict(output_height=7, output_width=7, sampling_ratio=2, spatial_scale=0.5, mode="avg")
    for key, transform in (("roialign_10_half_pixel", "half_pixel"), ("roialign_unclamped", "output_half_pixel")):
        want = ReferenceEvaluator(roi.roi_align(16, transform, "big")).run(None, feeds)[0]
        np.testing.assert_allclose(dml_roi_align(feeds["x"], boxes, bi, key, attrs), want, rtol=1e-5, atol=1e-6)


def test_a_roi_align_answer_is_recognised_within_the_tolerances_and_only_then():
    model, feeds = roi.roi_align(16, "output_half_pixel", "small"), roi.feeds()
    dml = dml_outputs(model, feeds)[0]["y"]
    spec = ReferenceEvaluator(model).run(None, feeds)[0]
    noisy = (dml + np.float32(3e-7)).astype(np.float32)                # the real EP's float rounding
    def within(want, got):
        return compare("y", "", want, got, 1e-5, 1e-5).status == "match"
    assert recognise(model, feeds, "y", noisy, within) == NAMES["roialign_unclamped"]
    assert recognise(model, feeds, "y", noisy) is None                  # no comparator given: bit for bit
    assert recognise(model, feeds, "y", spec, within) is None           # ONNX's answer is no deviation
    assert recognise(model, feeds, "y", (dml + 0.01).astype(np.float32), within) is None


@pytest.mark.parametrize("opset,transform,rois,warned", [
    (10, None, "big", "RoiAlign-10): the DML EP computes it in half_pixel mode"),
    (16, "output_half_pixel", "big", "(RoiAlign, output_half_pixel): the DML EP keeps an ROI under one pixel"),
    (16, "half_pixel", "small", None)])
def test_inspect_ep_dml_warns_of_roi_align(opset, transform, rois, warned, tmp_path, capsys):
    path = tmp_path / "r.onnx"
    onnx.save(roi.roi_align(opset, transform, rois), path)
    code, out, err = cli(["inspect", path, "--ep", "dml"], capsys)
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if "warning: roialign (RoiAlign" in ln]
    assert [warned in ln for ln in lines] == ([True] if warned else [])
