"""optimize's mask pass on the sliding window torch writes as two Trilus of one shared fill
(lowering.trilu_band): rewritten as the other windows are, sized by the fill's own shape tensor,
bit-identical on onnxruntime CPU; the forms that are no mask or need a run-time k are kept with the
reason."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnx_dml_lowering.compiler.optimize import bit_identical, optimize_model
from onnx_dml_lowering.runtime.model_facts import graph_inputs

NUMPY = {T.BOOL: np.bool_, T.FLOAT: np.float32, T.INT64: np.int64}


def window_model(spelling: str, k1: int, k2: "int | None", elem: int = T.BOOL, value=None,
                 fill: str = "ConstantOfShape", static: "int | None" = None) -> onnx.ModelProto:
    """Trilu(fill, k1, lower) `near` and Trilu(fill, k2, lower) `far` of a [s, s] fill (s: x's second
    dimension, or a Constant `static`), joined by `spelling`; k2 None: fed as input `k2`."""
    value = (True if elem == T.BOOL else 1) if value is None else value
    inits = [numpy_helper.from_array(np.array(k1, np.int64), "k1")]
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, ["b", "s"])]
    if k2 is None:
        inputs.append(helper.make_tensor_value_info("k2", T.INT64, []))
    else:
        inits.append(numpy_helper.from_array(np.array(k2, np.int64), "k2"))
    if static is None:
        nodes = [helper.make_node("Shape", ["x"], ["len"], name="shape", start=1, end=2),
                 helper.make_node("Concat", ["len", "len"], ["dims"], name="dims", axis=0)]
    else:
        nodes = [helper.make_node("Constant", [], ["dims"], name="dims",
                                  value=numpy_helper.from_array(np.array([static, static], np.int64)))]
    if fill == "ConstantOfShape":
        nodes.append(helper.make_node("ConstantOfShape", ["dims"], ["ones"], name="fill",
                                      value=helper.make_tensor("v", elem, [1], [value])))
    else:
        inits.append(numpy_helper.from_array(np.array(value, NUMPY[elem]), "one"))
        nodes.append(helper.make_node("Expand", ["one", "dims"], ["ones"], name="fill"))
    nodes += [helper.make_node("Trilu", ["ones", "k1"], ["near"], name="tril", upper=0),
              helper.make_node("Trilu", ["ones", "k2"], ["far"], name="tril_w", upper=0)]
    nodes += {
        "and": [helper.make_node("Not", ["far"], ["nf"], name="not"),
                helper.make_node("And", ["near", "nf"], ["y"], name="and")],
        "notand": [helper.make_node("Not", ["far"], ["nf"], name="not"),
                   helper.make_node("And", ["near", "nf"], ["a"], name="and"),
                   helper.make_node("Not", ["a"], ["na"], name="not_1"),
                   helper.make_node("Cast", ["na"], ["y"], name="cast", to=T.BOOL)],
        "sub": [helper.make_node("Sub", ["near", "far"], ["y"], name="sub")],
    }[spelling]
    side = static if static is not None else "s"
    outputs = [helper.make_tensor_value_info("y", elem, [side, side])]
    graph = helper.make_graph(nodes, "window", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def optimized(model: onnx.ModelProto):
    out, rewrites, declined = optimize_model(model)
    assert bit_identical(model.SerializeToString(), out.SerializeToString(), graph_inputs(model),
                         sizes=(1, 2, 5)) == []
    onnx.checker.check_model(out, full_check=True)
    return out, rewrites, declined


def ops(model: onnx.ModelProto) -> "list[str]":
    return [n.op_type for n in model.graph.node]


@pytest.mark.parametrize("spelling, elem, value, fill, band, generator", [
    ("and", T.BOOL, None, "ConstantOfShape", "x - y in [-2, 1)", ["ConstantOfShape", "Trilu", "Trilu"]),
    ("and", T.BOOL, None, "Expand", "x - y in [-2, 1)", ["ConstantOfShape", "Trilu", "Trilu"]),
    ("notand", T.BOOL, None, "ConstantOfShape", "x - y outside [-2, 1)", ["ConstantOfShape", "Trilu", "Trilu", "Or"]),
    ("sub", T.FLOAT, None, "ConstantOfShape", "x - y in [-2, 1)", ["ConstantOfShape", "Trilu", "Trilu"]),
    ("sub", T.INT64, None, "Expand", "x - y in [-2, 1)", ["ConstantOfShape", "Trilu", "Trilu"]),
    ("sub", T.FLOAT, 5.0, "Expand", "x - y in [-2, 1)", ["ConstantOfShape", "Trilu", "Trilu"]),
])
def test_a_shared_fill_window_becomes_the_generator(spelling, elem, value, fill, band, generator) -> None:
    model = window_model(spelling, 0, -3, elem, value, fill)
    out, rewrites, _ = optimized(model)
    assert len(rewrites) == 1 and band in rewrites[0].replaced and rewrites[0].nodes_delta < 0
    assert ops(out) == ["Shape", "Concat"] + generator          # sized by the fill's own shape tensor
    (made,) = [n for n in out.graph.node if n.op_type == "ConstantOfShape"]
    assert made.input == ["dims"]
    made_value = numpy_helper.to_array(made.attribute[0].t)
    assert made_value.dtype == NUMPY[elem] and made_value.item() == (value if value is not None else 1)


def test_a_constant_shape_the_generator_reads_is_not_removed() -> None:
    model = window_model("and", 0, -3, static=6)
    out, rewrites, _ = optimized(model)
    assert len(rewrites) == 1 and "dims" in {o for n in out.graph.node for o in n.output}


@pytest.mark.parametrize("kw, reason", [
    ({"spelling": "sub", "k1": -1, "k2": 0, "elem": T.FLOAT},
     "Sub sub subtracts x - y in (-inf, 1) from x - y in (-inf, 0), which does not contain it"),
    ({"spelling": "and", "k1": 0, "k2": None}, "its Trilu k k2 is fed at run time"),
    ({"spelling": "sub", "k1": 0, "k2": -2, "elem": T.FLOAT, "value": float("inf")}, "inf - inf is NaN"),
])
def test_forms_that_are_no_mask_or_need_a_fed_k_are_kept(kw, reason) -> None:
    model = window_model(**kw)
    out, rewrites, declined = optimized(model)
    assert rewrites == [] and ops(out) == ops(model)
    assert len(declined) == 1 and reason in declined[0], declined
