"""Shape inference sees floating-point weights as typed graph inputs (compiler/frontend.py): the
inferred model must be, byte for byte, what onnx's own inference makes of the whole model, and the
model given to compile must be left as it was."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import shape_inference

from onnx_dml_lowering.compiler import frontend
from onnx_dml_lowering.compiler.frontend import check_and_infer
from tests.builders import graph_model


def _model() -> onnx.ModelProto:
    """A MatMul by a 64 KiB weight, reshaped by a stored shape (a value inference reads), scaled by
    a small float (kept inline), a Resize whose scales inference reads, and a NonZero."""
    rng = np.random.default_rng(0)
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             h.make_node("Reshape", ["m", "shape"], ["r"], name="reshape"),
             h.make_node("Mul", ["r", "s"], ["y"], name="mul"),
             h.make_node("Resize", ["y", "", "scales"], ["z"], name="resize"),
             h.make_node("NonZero", ["z"], ["nz"], name="nz")]
    inits = {"w": rng.standard_normal((128, 128)).astype(np.float32), "shape": np.array([1, 4, -1], np.int64),
             "s": np.array([2.0], np.float32), "scales": np.array([1.0, 1.0, 2.0], np.float32)}
    return graph_model(nodes, [("x", T.FLOAT, [4, 128])], [("z", T.FLOAT, 3), ("nz", T.INT64, 2)], inits)


def _bytes(model: onnx.ModelProto) -> bytes:
    return model.SerializeToString(deterministic=True)


def test_inference_gets_the_weight_as_an_input_and_gives_onnxs_own_result():
    model = _model()
    view, lifted = frontend._without_float_weights(model)
    assert lifted == ["w"]                                  # the scale, the scales and the shape stay inline
    assert [t.name for t in view.graph.initializer] == ["shape", "s", "scales"]
    before = _bytes(model)
    inferred = check_and_infer(model)
    expected = shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    assert _bytes(inferred) == _bytes(expected)
    assert _bytes(model) == before
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    assert shapes["r"] == [1, 4, 128] and shapes["z"] == [1, 4, 256]      # read from "shape" and "scales"


@pytest.mark.parametrize("threshold", [1 << 30, 4096])
def test_the_result_does_not_depend_on_what_was_lifted(monkeypatch, threshold):
    """Nothing lifted (a threshold past every weight) and the weight lifted give the same bytes."""
    monkeypatch.setattr(frontend, "VIEW_FLOAT_BYTES", threshold)
    assert bool(frontend._without_float_weights(_model())[1]) == (threshold == 4096)
    expected = shape_inference.infer_shapes(_model(), check_type=True, strict_mode=True, data_prop=True)
    assert _bytes(check_and_infer(_model())) == _bytes(expected)
