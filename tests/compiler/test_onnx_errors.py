"""onnx's checker and inference messages as one line (compiler/onnx_errors.py): element types by
ONNX's names, not its enum's numbers."""
from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.onnx_errors import onnx_message
from onnx_dml_lowering.ir import DmlLowerError


@pytest.mark.parametrize("declared", [T.INT64, T.DOUBLE, T.BFLOAT16])
def test_a_type_contradiction_names_both_types(declared):
    graph = h.make_graph([h.make_node("Neg", ["x"], ["y"], name="neg")], "g", [h.make_tensor_value_info("x", T.FLOAT, [2])],
                         [h.make_tensor_value_info("y", declared, [2])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10)
    with pytest.raises(DmlLowerError) as caught:
        compile_model(model)
    want = onnx.TensorProto.DataType.Name(declared).lower()
    assert f"float vs {want}" in str(caught.value) and "(1)" not in str(caught.value), str(caught.value)


def test_a_number_onnx_does_not_know_stays_a_number():
    said = onnx_message(RuntimeError("Inferred elem type differs from existing elem type: (1) vs (999)"))
    assert said == "Inferred elem type differs from existing elem type: float vs type 999"
