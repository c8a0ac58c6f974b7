"""Each DML EP deviation runtime/dml_deviations.py predicts, proven on the real onnxruntime.dll
1.24.4 DirectML EP (ort_host): the answer is the emulation's bit for bit and differs from ONNX's,
and the source types predicted to give ONNX's answer give it. One host for the module (each DML EP
session holds its device heaps; every session here is released before the next)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

from onnx_dml_lowering.runtime.directml.ort_host import OrtHost
from onnx_dml_lowering.runtime.directml.placement_log import node_providers
from onnx_dml_lowering.runtime.dml_deviations import CAST_BOOL_BY_TYPE, dml_outputs

pytestmark = pytest.mark.directml
DML, CPU = "DmlExecutionProvider", "CPUExecutionProvider"


@pytest.fixture(scope="module")
def ort_host():
    with OrtHost() as host:
        yield host


def _model(nodes, inputs, outputs, opset=19, inits=()):
    model = h.make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits)),
                         opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _real(host: OrtHost, model: onnx.ModelProto, feeds):
    """(outputs, {node: provider}) of one run on the real DML EP."""
    session = host.create_session(model.SerializeToString())
    try:
        values = session.run(None, feeds)
        return values, node_providers(session.log, [n.name for n in model.graph.node])
    finally:
        session.release()


def _cast(elem, n):
    return _model([h.make_node("Cast", ["x"], ["y"], to=T.BOOL, name="cast")], [h.make_tensor_value_info("x", elem, [n])],
                  [h.make_tensor_value_info("y", T.BOOL, [n])])


FLOATS = [0.0, -0.0, 0.5, -0.5, 1.0, 2.5, -3.0, np.nan, np.inf, -np.inf, 256.0, 255.5, -1e10, 0.999]


def _integers(dtype):
    info = np.iinfo(dtype)
    wanted = [0, 1, 7, 255, 256, 65536, -1, -256, 2**31 - 1, -2**31, 2**32, 2**32 + 1, 2**40, -2**32,
              info.max, info.min]
    return np.array([v for v in wanted if info.min <= v <= info.max], dtype)


@pytest.mark.parametrize("elem,dtype", [(T.FLOAT, np.float32), (T.FLOAT16, np.float16), (T.DOUBLE, np.float64),
                                        (T.INT8, np.int8), (T.INT16, np.int16), (T.INT32, np.int32),
                                        (T.INT64, np.int64), (T.UINT8, np.uint8), (T.UINT16, np.uint16),
                                        (T.UINT32, np.uint32), (T.UINT64, np.uint64)],
                         ids=lambda v: T.DataType.Name(v).lower() if isinstance(v, int) else None)
def test_cast_to_bool_is_the_emulation_on_the_real_ep(ort_host, elem, dtype):
    with np.errstate(over="ignore"):          # -1e10 is -inf in float16
        x = np.array(FLOATS, dtype) if np.dtype(dtype).kind == "f" else _integers(dtype)
    model = _cast(elem, len(x))
    (got,), placed = _real(ort_host, model, {"x": x})
    assert placed == {"cast": DML}
    want, fired = dml_outputs(model, {"x": x})
    assert got.dtype == np.bool_ and got.tolist() == want["y"].tolist()
    name = onnx.helper.tensor_dtype_to_string(elem).removeprefix("TensorProto.").lower()
    deviation = CAST_BOOL_BY_TYPE.get(name)
    # a deviating type shows it on these values; the others give ONNX's answer (int32 included)
    assert [key for key, _ in fired] == ([deviation] if deviation else [])
    assert (got.tolist() == (x != 0).tolist()) == (deviation is None)


def test_int32_cast_to_bool_gives_onnx_answer(ort_host):
    x = np.array([0, 1, -1, 2, 255, 256, -256, 2**31 - 1, -2**31, 7, 0, 3], np.int32)
    (got,), _ = _real(ort_host, _cast(T.INT32, len(x)), {"x": x})
    assert got.tolist() == (x != 0).tolist()


@pytest.mark.parametrize("elem,dtype,provider", [(T.FLOAT, np.float32, DML), (T.INT32, np.int32, DML),
                                                 (T.UINT8, np.uint8, DML), (T.INT64, np.int64, CPU)])
def test_scalar_nonzero_gives_one_row_on_the_dml_ep_and_its_cpu_fallback(ort_host, elem, dtype, provider):
    model = _model([h.make_node("NonZero", ["x"], ["y"], name="nz")], [h.make_tensor_value_info("x", elem, [])],
                   [h.make_tensor_value_info("y", T.INT64, None)], opset=13)
    for value in (0, 3):
        x = np.array(value, dtype)
        (got,), placed = _real(ort_host, model, {"x": x})
        want, fired = dml_outputs(model, {"x": x}, placed)
        assert placed == {"nz": provider}
        assert got.shape == want["y"].shape == (1, int(bool(value))) and got.tobytes() == want["y"].tobytes()
        assert fired == [("scalar_nonzero" if provider == DML else "scalar_nonzero_cpu", "")]


@pytest.mark.parametrize("k", [2**31, 2**40, -2**40, 2**32 + 1])
def test_eyelike_k_is_narrowed_to_int32(ort_host, k):
    model = _model([h.make_node("EyeLike", ["x"], ["y"], k=k, name="eye")], [h.make_tensor_value_info("x", T.FLOAT, [4, 5])],
                   [h.make_tensor_value_info("y", T.FLOAT, [4, 5])], opset=13)
    x = np.zeros((4, 5), np.float32)
    (got,), placed = _real(ort_host, model, {"x": x})
    want, fired = dml_outputs(model, {"x": x})
    assert placed == {"eye": DML} and got.tobytes() == want["y"].tobytes()
    onnx_answer = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert bool(fired) == (got.tobytes() != onnx_answer.tobytes())


@pytest.mark.parametrize("k,upper,key", [(2**31, 1, "trilu_k"), (2**40, 1, "trilu_k"), (-2**40, 0, "trilu_k"),
                                         (2**31 - 1, 0, "trilu_k_overflow")])
def test_trilu_k_is_narrowed_to_int32(ort_host, k, upper, key):
    model = _model([h.make_node("Trilu", ["x", "k"], ["y"], upper=upper, name="trilu")],
                   [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])], [h.make_tensor_value_info("y", T.FLOAT, [2, 3, 4])],
                   opset=14, inits=[onnx.numpy_helper.from_array(np.array(k, np.int64), "k")])
    x = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)
    (got,), placed = _real(ort_host, model, {"x": x})
    want, fired = dml_outputs(model, {"x": x})
    assert placed.get("trilu") == DML and got.tobytes() == want["y"].tobytes()
    assert [f[0] for f in fired] == [key]


@pytest.mark.parametrize("elem,dtype", [(T.FLOAT, np.float32), (T.FLOAT16, np.float16)],
                         ids=["float", "float16"])
def test_relu_of_nan_gives_zero(ort_host, elem, dtype):
    """NaN of either sign gives 0; subnormals and infinities as ONNX says; -0 gives +0 (equal to ONNX's -0)."""
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0], dtype)
    tiny = np.array([1, 0x8001], np.uint32 if dtype == np.float32 else np.uint16)   # smallest ±subnormal
    x = np.concatenate([x, tiny.astype(np.uint32 if dtype == np.float32 else np.uint16).view(dtype)])
    model = _model([h.make_node("Relu", ["x"], ["y"], name="relu")], [h.make_tensor_value_info("x", elem, [len(x)])],
                   [h.make_tensor_value_info("y", elem, [len(x)])], opset=14)
    (got,), placed = _real(ort_host, model, {"x": x})
    want, fired = dml_outputs(model, {"x": x})
    assert placed == {"relu": DML} and got.tobytes() == want["y"].tobytes()
    assert fired == [("relu_nan", "2 NaN")]
    onnx_answer = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert got[2:].tolist() == onnx_answer[2:].tolist() and np.signbit(got).tolist() == [False] * len(x)


def test_the_if_nonzero_case_is_relu_of_nan_not_control_flow(ort_host):
    """dml/test_control_if_nonzero's second data set: the else branch's Relu turns x's NaN into 0, so
    its NonZero has 5 coordinates where ONNX has 6; the same NonZero on x itself (then) gives ONNX's."""
    from tests.paths import REPO
    case = REPO / "dml" / "test_control_if_nonzero"
    model = onnx.load(case / "model.onnx")
    feeds = {}
    for i, name in enumerate(["c", "x"]):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((case / "test_data_set_1" / f"input_{i}.pb").read_bytes())
        feeds[name] = onnx.numpy_helper.to_array(tensor)
    for branch in (False, True):
        feeds["c"] = np.array(branch)
        (got,), placed = _real(ort_host, model, feeds)
        want, fired = dml_outputs(model, feeds)
        assert placed.get("if") == DML and got.tobytes() == want["y"].tobytes() and got.shape == want["y"].shape
        onnx_answer = ReferenceEvaluator(model).run(None, feeds)[0]
        assert (got.shape == onnx_answer.shape) == branch
        assert [key for key, _ in fired] == ([] if branch else ["relu_nan"])


def test_identity_reads_a_scalar_nonzero_on_the_dml_ep(ort_host):
    """The scalar NonZero failure (FAILURES) spares an Identity reader: it passes [1, N] on."""
    from onnx_dml_lowering.runtime.dml_deviations import failing_nodes
    model = _model([h.make_node("NonZero", ["x"], ["nz"], name="nz"), h.make_node("Identity", ["nz"], ["y"], name="id")],
                   [h.make_tensor_value_info("x", T.FLOAT, [])], [h.make_tensor_value_info("y", T.INT64, None)], opset=13)
    (got,), placed = _real(ort_host, model, {"x": np.array(2.0, np.float32)})
    assert placed == {"nz": DML, "id": DML} and got.tolist() == [[0]]
    assert failing_nodes(model) == []


# --- RoiAlign (float: within the tolerances, not bit for bit) ---------------------------------------

from tests import roi_align_models as roi  # noqa: E402


@pytest.mark.parametrize("mode,sampling_ratio", [("avg", 2), ("avg", 0)])
@pytest.mark.parametrize("opset,transform,rois", [
    (10, None, "big"), (10, None, "small"), (16, "output_half_pixel", "small"), (16, "output_half_pixel", "mixed"),
    (16, "output_half_pixel", "big"), (16, "half_pixel", "small")])
def test_roi_align_on_the_real_ep_is_the_emulation(ort_host, opset, transform, rois, mode, sampling_ratio):
    """The DML EP's RoiAlign equals dml_outputs' emulation to float rounding (measured: <= ~1.3e-6),
    and differs from ONNX's exactly where a deviation fires."""
    model, feeds = roi.roi_align(opset, transform, rois, mode, sampling_ratio), roi.feeds(2)
    (got,), providers = _real(ort_host, model, feeds)
    assert providers == {"roialign": DML}
    emulated, fired = dml_outputs(model, feeds)
    np.testing.assert_allclose(got, emulated["y"], rtol=1e-5, atol=1e-5)
    spec = ReferenceEvaluator(roi.roi_align(16, transform or "output_half_pixel", rois, mode, sampling_ratio)
                              ).run(None, feeds)[0]
    assert np.allclose(got, spec, rtol=1e-5, atol=1e-5) == (not fired), fired


def test_check_names_the_roi_align_deviation_and_matches_where_there_is_none(tmp_path, capsys):
    from tests.cli_runner import cli
    for transform, rois, status in (("output_half_pixel", "small", "DEVIATION"), ("output_half_pixel", "big", "MATCH")):
        path = tmp_path / f"{rois}.onnx"
        onnx.save(roi.roi_align(16, transform, rois), path)
        code, out, err = cli(["check", path, "--backends", "ort-dml"], capsys)
        line = next(ln for ln in out.splitlines() if "[ort-dml] y:" in ln)
        assert f"y: {status}" in line, line
        if status == "DEVIATION":
            assert "RoiAlign in output_half_pixel mode keeps an ROI under one pixel" in line
        assert code == 0, out + err
