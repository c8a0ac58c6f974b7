"""optimize under the fuzzer: random band constants in random types, stored as initializers or
Constants and read both directly and through an Add with an input, must optimise to models that
are bit-identical on onnxruntime CPU over seeded feeds, and a second run rewrites nothing."""
from __future__ import annotations

import numpy as np
from hypothesis import event, given
from onnx import helper

from onnx_dml_lowering.runtime.model_facts import graph_inputs
from onnx_dml_lowering.compiler.optimize import bit_identical, optimize_model
from tests.optimize_models import bands, stored_model

ADDABLE = {np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64)}


@given(case=bands())
def test_random_bands_optimise_bit_identically(case) -> None:
    array, as_constant = case
    model = stored_model(array, as_constant)
    if array.dtype in ADDABLE:      # the constant also feeds arithmetic on a fed input
        onnx_type = helper.np_dtype_to_tensor_dtype(array.dtype)
        model.graph.input.append(helper.make_tensor_value_info("x", onnx_type, ["b"] + list(array.shape[-1:])))
        model.graph.node.append(helper.make_node("Add", ["x", "c"], ["z"], name="use"))
        model.graph.output.append(helper.make_tensor_value_info("z", onnx_type, None))
        model.graph.output[-1].type.tensor_type.shape.CopyFrom(helper.make_tensor_type_proto(
            onnx_type, list(array.shape[:-2]) + [array.shape[-2], array.shape[-1]]).tensor_type.shape)
    out, rewrites, _ = optimize_model(model)
    event("rewritten" if rewrites else "kept")
    assert bit_identical(model.SerializeToString(), out.SerializeToString(), graph_inputs(model),
                         seeds=(0, 1), sizes=(1, array.shape[-2])) == []
    assert optimize_model(out)[1] == []
