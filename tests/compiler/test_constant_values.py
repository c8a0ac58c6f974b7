"""Constant node values read by numpy (graph_view.constant_node_value) equal onnx.reference's."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

from onnx_dml_lowering.compiler.graph_view import constant_node_value

rng = np.random.default_rng(0)

CASES = [
    ("float32 tensor", dict(value=h.make_tensor("v", TP.FLOAT, [2, 3], rng.standard_normal(6).tolist()))),
    ("float16 tensor", dict(value=onnx.numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float16)))),
    ("bfloat16 tensor", dict(value=h.make_tensor("v", TP.BFLOAT16, [3], [1.5, -2.0, 0.1]))),
    ("int64 scalar", dict(value=h.make_tensor("v", TP.INT64, [], [-7]))),
    ("int8 raw", dict(value=onnx.numpy_helper.from_array(np.array([[1, -2], [3, 4]], np.int8)))),
    ("bool", dict(value=onnx.numpy_helper.from_array(np.array([True, False, True])))),
    ("empty int64", dict(value=h.make_tensor("v", TP.INT64, [0], []))),
    ("value_float", dict(value_float=0.1)),
    ("value_floats", dict(value_floats=[0.1, -0.0, 3.0])),
    ("value_int", dict(value_int=-3)),
    ("value_ints", dict(value_ints=[1, 2, 9223372036854775807])),
    ("value_string", dict(value_string="abc")),
    ("value_strings", dict(value_strings=["a", "bc"])),
    ("sparse_value", dict(sparse_value=h.make_sparse_tensor(h.make_tensor("v", TP.FLOAT, [2], [5.0, 6.0]),
                                                             h.make_tensor("i", TP.INT64, [2], [1, 4]), [6]))),
]


@pytest.mark.parametrize("label,attrs", CASES, ids=[c[0] for c in CASES])
def test_constant_value_matches_onnx_reference(label, attrs):
    node = h.make_node("Constant", [], ["c"], name="c", **attrs)
    model = h.make_model(h.make_graph([node], "g", [], [h.make_empty_tensor_value_info("c")]),
                         opset_imports=[h.make_opsetid("", 17)])
    try:
        expected = np.asarray(ReferenceEvaluator(model).run(None, {})[0])
    except Exception:           # onnx.reference cannot evaluate it (sparse_value): not a constant
        assert constant_node_value(node, model) is None
        return
    got = np.asarray(constant_node_value(node, model))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if expected.dtype.kind in "OU":
        assert got.tolist() == expected.tolist()
    else:
        assert got.tobytes() == expected.tobytes()
