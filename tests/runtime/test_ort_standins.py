"""`check --backends ort` (each DirectML operator run by onnxruntime CPU) on the element types
onnxruntime's NonZero / EyeLike lack: NONZERO_COORDINATES over the uint32 word plane of a 64-bit
input (and int8 / int16 / uint16 inputs) runs as Cast to int64 + NonZero, DIAGONAL_MATRIX on
uint8 / int8 / uint16 / float16 as EyeLike in a type onnxruntime has + Cast. Each is MATCH
(validated on onnxruntime, not computed by the numpy kernel) and equals onnx.reference."""
import numpy as np
import pytest
from onnx import TensorProto as T

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.check import Tolerances, check
from tests.builders import single_node_model
from tests.oracle import assert_same, reference

rng = np.random.default_rng(11)

NONZERO = {
    # -0.0 is zero, NaN and a denormal are not, 2**40 is non-zero only in the high word
    "double": (T.DOUBLE, np.array([[0.0, -0.0, np.nan], [5e-324, 2.0 ** 40, -0.0]])),
    "int64_high_word_only": (T.INT64, np.array([[0, 1 << 33, -1], [0, 0, 1 << 32]], np.int64)),
    "int64_min": (T.INT64, np.array([[np.iinfo(np.int64).min, 0, 0, 7]], np.int64)),
    "uint64_high_word_only": (T.UINT64, np.array([[0, 1 << 63, 0], [1 << 32, 0, 5]], np.uint64)),
    "uint64_random": (T.UINT64, (rng.integers(0, 2, (4, 5)) << rng.integers(0, 64, (4, 5))).astype(np.uint64)),
    "double_random": (T.DOUBLE, np.where(rng.random((3, 6)) < 0.5, 0.0, rng.standard_normal((3, 6)))),
    "int8": (T.INT8, np.array([[0, -128, 3], [0, 0, 1]], np.int8)),
    "uint16": (T.UINT16, np.array([[0, 65535, 0, 256]], np.uint16)),
    "int16": (T.INT16, np.array([[0, -1], [0, 0]], np.int16)),
}

EYELIKE = {
    "uint8_k0": (T.UINT8, [3, 4], 0), "uint8_k1": (T.UINT8, [3, 4], 1), "uint8_k-2": (T.UINT8, [4, 3], -2),
    "int8_k0": (T.INT8, [3, 3], 0), "uint16_k2": (T.UINT16, [2, 5], 2), "float16_k-1": (T.FLOAT16, [4, 4], -1),
}


def _check_on_ort(model, feeds):
    compiled = compile_model(model)
    _, report = check(compiled, feeds, ["ort"], Tolerances())
    (backend,) = report.backends
    assert not backend.error
    assert [(o.status, o.detail) for o in backend.outputs] == [("match", "")]
    assert compiled.session("ort", ["cpu"]).unvalidated_outputs == {}
    want = reference(model, feeds)
    assert_same(backend.values["y"], want["y"], "y")


@pytest.mark.parametrize("case", NONZERO)
def test_nonzero_runs_on_onnxruntime(case):
    elem, x = NONZERO[case]
    _check_on_ort(single_node_model("NonZero", elem, list(x.shape), T.INT64, [2, None]), {"x": x})


@pytest.mark.parametrize("case", EYELIKE)
def test_eyelike_runs_on_onnxruntime(case):
    elem, shape, k = EYELIKE[case]
    x = np.zeros(shape, np.float32)
    _check_on_ort(single_node_model("EyeLike", T.FLOAT, shape, elem, shape, k=k, dtype=elem), {"x": x})
