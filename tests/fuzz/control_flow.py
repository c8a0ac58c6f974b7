"""Control-flow fuzz cases: a drawn NonZero or EyeLike case (every type, shape, k, feed source of
strategies.py) moved inside an If (both branches) or a Loop body (the result loop-carried, zero to
three trips), reading x from the outer scope."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.ir.dtypes import onnx_to_numpy
from tests.fuzz.strategies import Case, eyelike_cases, nonzero_cases


def _op(node, output: str, name: str):
    copy = h.make_node(node.op_type, list(node.input), [output], name=name)
    copy.attribute.extend(node.attribute)
    return copy


def _x_value(case: Case) -> np.ndarray:
    if "x" in case.feeds:
        return case.feeds["x"]
    return next(numpy_helper.to_array(i) for i in case.model.graph.initializer if i.name == "x")


@st.composite
def control_flow_cases(draw, level) -> Case:
    inner = draw(st.one_of(nonzero_cases(level), eyelike_cases(level)))
    model = inner.model
    (node,) = model.graph.node
    out_type = model.graph.output[0].type.tensor_type.elem_type
    y = h.make_tensor_value_info
    feeds = dict(inner.feeds)
    form = draw(st.sampled_from(["if", "loop"]))
    if form == "if":
        cond = draw(st.booleans())
        then = h.make_graph([_op(node, "y_then", "op_then")], "then", [], [y("y_then", out_type, [None, None])])
        other = h.make_graph([_op(node, "y_else", "op_else")], "else", [], [y("y_else", out_type, [None, None])])
        wrapper = h.make_node("If", ["c"], ["y"], name="if_node", then_branch=then, else_branch=other)
        model.graph.input.append(y("c", T.BOOL, []))
        feeds["c"] = np.array(cond)
        what = f"If(c={cond}) around {inner.what}"
    else:
        trips = draw(st.integers(0, 3))
        x = _x_value(inner)
        start = (np.zeros((x.ndim, 0), np.int64) if node.op_type == "NonZero"
                 else np.zeros(x.shape, onnx_to_numpy(out_type)))
        body = h.make_graph([_op(node, "v_out", "op"), h.make_node("Identity", ["c_in"], ["c_out"], name="go")], "body",
                            [y("i", T.INT64, []), y("c_in", T.BOOL, []), y("v_in", out_type, [None, None])],
                            [y("c_out", T.BOOL, []), y("v_out", out_type, [None, None])])
        # a condition input that is given (onnx.reference runs no iteration without one)
        wrapper = h.make_node("Loop", ["trips", "go_on", "v0"], ["y"], name="loop", body=body)
        model.graph.initializer.extend([numpy_helper.from_array(np.array(trips, np.int64), "trips"),
                                        numpy_helper.from_array(np.array(True), "go_on"),
                                        numpy_helper.from_array(start, "v0")])
        what = f"Loop({trips} trips, carried v = op(x)) around {inner.what}"
    del model.graph.node[:]
    model.graph.node.append(wrapper)
    return Case(what, model, feeds, inner.level, inner.layouts)
