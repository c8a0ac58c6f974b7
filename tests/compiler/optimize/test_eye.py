"""optimize's run-time torch.eye: Range(0, n) / Range(0, m) / Unsqueeze / Equal [/ Cast] with n, m
read from an input's Shape becomes EyeLike over ConstantOfShape of the run-time [n, m], bit-identical
on onnxruntime CPU at sizes the model was not exported for; what cannot be is kept with the reason."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.runtime.model_facts import graph_inputs
from onnx_dml_lowering.compiler.optimize import bit_identical, optimize_model
from tests import paths

MODELS = paths.MODELS
SIZES = [(0, 3), (1, 1), (2, 5), (5, 2), (17, 17)]        # (n, m) fed at run time
IDIOM = {"Range", "Unsqueeze", "Equal"}


def eye_model(to: "int | None", *, square: bool = False, limit: str = "squeeze", static_cols: "int | None" = None,
              opset: int = 18) -> onnx.ModelProto:
    """y = torch.eye(x.shape[0], x.shape[1]) as the dynamo exporter writes it: the limits are
    Squeeze(Shape(x, start, end)) ("squeeze"), Gather(Shape(x), i) ("gather"), or an int64 input
    read as a value ("value"); `static_cols` makes the column Range's limit a constant."""
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m"])]
    nodes = []

    def size(axis: int) -> str:
        if limit == "squeeze":
            nodes.extend([helper.make_node("Shape", ["x"], [f"s{axis}"], name=f"shape{axis}", start=axis, end=axis + 1),
                          helper.make_node("Squeeze", [f"s{axis}"], [f"len{axis}"], name=f"squeeze{axis}")])
        elif limit == "gather":
            inits.append(numpy_helper.from_array(np.array(axis, np.int64), f"i{axis}"))
            nodes.extend([helper.make_node("Shape", ["x"], [f"s{axis}"], name=f"shape{axis}"),
                          helper.make_node("Gather", [f"s{axis}", f"i{axis}"], [f"len{axis}"], name=f"gather{axis}")])
        else:
            inputs.append(helper.make_tensor_value_info(f"len{axis}", TensorProto.INT64, []))
        return f"len{axis}"

    rows = size(0)
    nodes.append(helper.make_node("Range", ["zero", rows, "one"], ["r"], name="range_rows"))
    cols = "r"
    if not square:
        if static_cols is not None:
            inits.append(numpy_helper.from_array(np.array(static_cols, np.int64), "m_static"))
            limit_cols = "m_static"
        else:
            limit_cols = size(1)
        nodes.append(helper.make_node("Range", ["zero", limit_cols, "one"], ["c"], name="range_cols"))
        cols = "c"
    nodes += [helper.make_node("Unsqueeze", ["r", "minus_one"], ["col"], name="unsqueeze"),
              helper.make_node("Equal", ["col", cols], ["eq"], name="eq")]
    out, out_type = "eq", TensorProto.BOOL
    if to is not None:
        nodes.append(helper.make_node("Cast", ["eq"], ["y"], name="cast", to=to))
        out, out_type = "y", to
    graph = helper.make_graph(nodes, "eye", inputs, [helper.make_tensor_value_info(out, out_type, ["rows", "cols"])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def feeds_at(model: onnx.ModelProto, n: int, m: int) -> "dict[str, np.ndarray]":
    rng = np.random.default_rng(n * 31 + m)
    feeds = {"x": rng.standard_normal((n, m)).astype(np.float32)}
    for vi in graph_inputs(model)[1:]:
        feeds[vi.name] = np.array(n if vi.name == "len0" else m, np.int64)
    return feeds


def assert_bit_identical_at_every_size(model: onnx.ModelProto, out: onnx.ModelProto, sizes=SIZES) -> None:
    for n, m in sizes:
        assert bit_identical(model.SerializeToString(), out.SerializeToString(), graph_inputs(model),
                             feeds=feeds_at(model, n, m)) == [], (n, m)


@pytest.mark.parametrize("to, square, static_cols, generator", [
    (TensorProto.FLOAT, False, None, ["Concat", "ConstantOfShape", "EyeLike"]),
    (TensorProto.DOUBLE, False, None, ["Concat", "ConstantOfShape", "EyeLike"]),
    (TensorProto.INT64, True, None, ["Concat", "ConstantOfShape", "EyeLike"]),
    (TensorProto.INT32, False, 7, ["Concat", "ConstantOfShape", "EyeLike"]),
    (None, False, None, ["Concat", "ConstantOfShape", "EyeLike", "Cast"]),
    (TensorProto.UINT8, False, None, ["Concat", "ConstantOfShape", "EyeLike", "Cast"]),
    (TensorProto.INT8, True, None, ["Concat", "ConstantOfShape", "EyeLike", "Cast"]),
    (TensorProto.UINT64, False, None, ["Concat", "ConstantOfShape", "EyeLike", "Cast"]),
    (TensorProto.FLOAT16, False, None, ["Concat", "ConstantOfShape", "EyeLike", "Cast"]),
    (TensorProto.BFLOAT16, True, None, ["Concat", "ConstantOfShape", "EyeLike", "Cast"]),
], ids=lambda v: str(v))
def test_run_time_eye_becomes_eyelike_bit_identically_at_every_size(to, square, static_cols, generator) -> None:
    model = eye_model(to, square=square, static_cols=static_cols)
    out, rewrites, declined = optimize_model(model)
    assert declined == [] and len(rewrites) == 1 and rewrites[0].nodes_delta < 0
    assert rewrites[0].generator == " + ".join(generator)
    kinds = [n.op_type for n in out.graph.node]
    assert not IDIOM & set(kinds) and "Squeeze" not in kinds         # the squeezed sizes went with it
    assert kinds == ["Shape"] * (1 if square or static_cols else 2) + generator
    assert len(out.graph.node) < len(model.graph.node)
    onnx.checker.check_model(out, full_check=True)
    sizes = [(n, static_cols) for n, _ in SIZES] if static_cols else [(n, n) for n, _ in SIZES] if square else SIZES
    assert_bit_identical_at_every_size(model, out, sizes)
    again, rewrites, _ = optimize_model(out)
    assert rewrites == [] and again == out


@pytest.mark.parametrize("to, square, limit, opset, reason", [
    (TensorProto.FLOAT, False, "gather", 18, "is not fewer nodes (5 for 5)"),   # each scalar size needs an Unsqueeze
    (None, True, "squeeze", 18, "is not fewer nodes (4 for 4)"),               # bool: EyeLike in int32 + Cast
    (TensorProto.FLOAT, False, "value", 18, "its Range limit len0 is not a size read from a Shape"),
    (TensorProto.FLOAT8E4M3FN, False, "squeeze", 19, "no exact EyeLike for float8e4m3fn"),
], ids=lambda v: str(v))
def test_run_time_eye_that_cannot_be_fewer_or_exact_nodes_is_kept(to, square, limit, opset, reason) -> None:
    model = eye_model(to, square=square, limit=limit, opset=opset)
    out, rewrites, declined = optimize_model(model)
    assert rewrites == [] and [n.op_type for n in out.graph.node] == [n.op_type for n in model.graph.node]
    assert len(declined) == 1 and reason in declined[0], declined


@pytest.mark.parametrize("name, inputs", [
    ("eye.dynamo.onnx", lambda n: {"x": np.random.default_rng(n).standard_normal((n, n + 2)).astype(np.float32)}),
    ("eye_square.dynamo.onnx", lambda n: {"x": np.random.default_rng(n).standard_normal((n, 2)).astype(np.float32)}),
])
def test_real_torch_eye_exports_become_eyelike(name, inputs) -> None:
    model = onnx.load(str(MODELS / name))
    assert IDIOM <= {n.op_type for n in model.graph.node}
    out, rewrites, _ = optimize_model(model)
    assert len(rewrites) == 1 and rewrites[0].generator == "Concat + ConstantOfShape + EyeLike"
    assert not IDIOM & {n.op_type for n in out.graph.node}
    assert len(out.graph.node) < len(model.graph.node) and out.ByteSize() < model.ByteSize()
    for n in (0, 1, 2, 7, 33):
        assert bit_identical(model.SerializeToString(), out.SerializeToString(), graph_inputs(model),
                             feeds=inputs(n)) == [], n
