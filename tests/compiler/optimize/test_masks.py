"""optimize's mask pass: Range-comparison masks become Trilu over ConstantOfShape where that is
fewer nodes, bit-identical on onnxruntime CPU at sizes the model was not built for; the rest is
kept with the reason."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.runtime.model_facts import graph_inputs
from onnx_dml_lowering.compiler.optimize import bit_identical, optimize_model
from onnx_dml_lowering.ir import parse_level
from tests import paths

REAL = paths.REAL
SIZES = (1, 4, 9)


def mask_model(op: str, offset: int = 0, *, static: "int | None" = None, runtime_offset: bool = False,
               window: "int | None" = None, negate: bool = False, cast: "int | None" = None,
               share_column: bool = False, opset: int = 17) -> onnx.ModelProto:
    """mask = op(column j, row i + offset) [And column > row - window] [Not] [Cast], of shape
    [1, 1, S, S] with S the second dimension of input x (or `static`)."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("zero", 0), ("one", 1))]
    inits += [numpy_helper.from_array(np.array(v, np.int64), n) for n, v, used in
              (("off", offset, offset and not runtime_offset), ("win", window, window is not None)) if used]
    inits += [numpy_helper.from_array(np.array(a, np.int64), n) for n, a in
              (("col_axes", [0, 1, 2]), ("row_axes", [0, 1, 3]))]
    nodes = []
    if static is None:
        nodes += [helper.make_node("Shape", ["x"], ["len"], name="shape", start=1, end=2),
                  helper.make_node("Squeeze", ["len"], ["n"], name="squeeze")]
    else:
        inits.append(numpy_helper.from_array(np.array(static, np.int64), "n"))
    nodes += [helper.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
              helper.make_node("Unsqueeze", ["r", "col_axes"], ["col"], name="col"),
              helper.make_node("Unsqueeze", ["r", "row_axes"], ["row"], name="row")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s"])]
    row = "row"
    if offset or runtime_offset:
        if runtime_offset:
            inputs.append(helper.make_tensor_value_info("off", TensorProto.INT64, []))
        nodes.append(helper.make_node("Add", ["row", "off"], ["row_off"], name="offset"))
        row = "row_off"
    nodes.append(helper.make_node(op, ["col", row], ["m"], name="cmp"))
    out, out_type = "m", TensorProto.BOOL
    if window is not None:
        nodes += [helper.make_node("Sub", ["row", "win"], ["low"], name="low"),
                  helper.make_node("Greater", ["col", "low"], ["w"], name="window"),
                  helper.make_node("And", [out, "w"], ["band"], name="and")]
        out = "band"
    if negate:
        nodes.append(helper.make_node("Not", [out], ["outside"], name="not"))
        out = "outside"
    if cast is not None:
        nodes.append(helper.make_node("Cast", [out], ["cast"], name="cast", to=cast))
        out, out_type = "cast", cast
    nodes.append(helper.make_node("Identity", [out], ["y"], name="out"))
    side = static if static is not None else "s"
    outputs = [helper.make_tensor_value_info("y", out_type, [1, 1, side, side])]
    if share_column:        # another reader of the column index (as the padding mask reads it)
        nodes.append(helper.make_node("Identity", ["col"], ["z"], name="share"))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.INT64, [1, 1, 1, side]))
    graph = helper.make_graph(nodes, "mask", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def optimized(model: onnx.ModelProto):
    out, rewrites, declined = optimize_model(model)
    assert bit_identical(model.SerializeToString(), out.SerializeToString(), graph_inputs(model),
                         sizes=SIZES) == []
    onnx.checker.check_model(out, full_check=True)
    return out, rewrites, declined


def ops(model: onnx.ModelProto) -> "list[str]":
    return [n.op_type for n in model.graph.node]


ONE_TRILU = ["Concat", "ConstantOfShape", "Trilu"]


@pytest.mark.parametrize("op, offset, generator", [
    ("LessOrEqual", 0, ONE_TRILU),                   # causal: x - y in (-inf, 1)
    ("Less", 0, ONE_TRILU),
    ("Greater", 2, ONE_TRILU),
    ("GreaterOrEqual", -3, ONE_TRILU),
    ("LessOrEqual", 5, ONE_TRILU),
    ("Equal", 1, ONE_TRILU + ["Trilu"]),               # one diagonal: both sides
])
def test_each_comparison_with_a_constant_offset_becomes_trilu(op, offset, generator) -> None:
    model = mask_model(op, offset)
    out, rewrites, _ = optimized(model)
    assert len(rewrites) == 1 and rewrites[0].nodes_delta < 0
    assert ops(out) == ["Shape", "Squeeze"] + generator
    assert len(out.graph.node) < len(model.graph.node)
    assert "off" not in {t.name for t in out.graph.initializer}     # read by removed nodes only


@pytest.mark.parametrize("op", ["Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"])
def test_static_sizes_need_no_concat(op) -> None:
    out, rewrites, _ = optimized(mask_model(op, 1, static=12))
    assert len(rewrites) == 1
    assert ops(out)[:2] == ["ConstantOfShape", "Trilu"] and "Concat" not in ops(out)


@pytest.mark.parametrize("negate, cast, generator", [
    (False, None, ONE_TRILU + ["Trilu"]),
    (False, TensorProto.FLOAT, ONE_TRILU + ["Trilu"]),               # 1.0 / +0.0, as Cast gives them
    (True, None, ONE_TRILU + ["Trilu", "Or"]),                       # outside the window
    (True, TensorProto.FLOAT16, ONE_TRILU + ["Trilu", "Add"]),
    (False, TensorProto.UINT8, ONE_TRILU + ["Trilu", "Cast"]),       # no uint8 Trilu: bool, then Cast
])
def test_sliding_window_not_and_cast(negate, cast, generator) -> None:
    model = mask_model("LessOrEqual", window=3, negate=negate, cast=cast)
    out, rewrites, _ = optimized(model)
    assert len(rewrites) == 1 and "[-2, 1)" in rewrites[0].replaced
    assert ops(out) == ["Shape", "Squeeze"] + generator + (["Identity"] if cast else [])   # after a Cast
    assert out.graph.output[0].type.tensor_type.elem_type == (cast or TensorProto.BOOL)


def test_shared_index_nodes_stay_and_a_tie_in_nodes_is_kept() -> None:
    model = mask_model("LessOrEqual", window=3, share_column=True)
    out, rewrites, _ = optimized(model)
    assert len(rewrites) == 1
    assert {"range", "col", "share"} <= {n.name for n in out.graph.node}
    # Causal alone: Unsqueeze, LessOrEqual, Identity go, Concat + ConstantOfShape + Trilu would come.
    model = mask_model("LessOrEqual", share_column=True)
    out, rewrites, declined = optimized(model)
    assert rewrites == [] and out.graph.node == model.graph.node
    assert "is not fewer nodes (3 for 3)" in declined[0]


@pytest.mark.parametrize("kw, reason", [
    ({"runtime_offset": True}, "wraps around"),
    ({"opset": 13, "static": 8}, "Trilu needs opset 14 (model: 13)"),
])
def test_forms_not_exact_or_not_runnable_are_kept_with_the_reason(kw, reason) -> None:
    model = mask_model("LessOrEqual", **kw)
    out, rewrites, declined = optimized(model)
    assert rewrites == [] and out.graph.node == model.graph.node
    assert len(declined) == 1 and reason in declined[0]


def test_feature_level_keeps_a_window_needing_diagonal_matrix1() -> None:
    model = mask_model("LessOrEqual", window=3)
    _, rewrites, declined = optimize_model(model, level=parse_level("2_0"))
    assert rewrites == [] and "DIAGONAL_MATRIX1" in declined[0]
    assert len(optimize_model(model, level=parse_level("5_1"))[1]) == 1


@pytest.mark.parametrize("kw", [{}, {"window": 3, "negate": True, "cast": TensorProto.FLOAT}, {"static": 8}])
def test_mask_rewrite_is_idempotent(kw) -> None:
    once, rewrites, _ = optimized(mask_model("Less", 1, **kw))
    twice, again, _ = optimize_model(once)
    assert len(rewrites) == 1 and again == [] and twice == once


@pytest.mark.parametrize("name, rewritten", [("mistral_sliding.dynamo", True), ("gpt2.dynamo", False),
                                             ("llama.dynamo", False)])
def test_real_exports(name, rewritten) -> None:
    path = REAL / f"{name}.onnx"
    if not path.is_file():
        pytest.skip(f"{path} is written by tests/models/export_real_models.py")
    model = onnx.load(str(path))
    out, rewrites, declined = optimized(model)     # batch = sequence = 1, 4, 9 (exported at 3 x 6)
    if rewritten:
        assert [r.generator for r in rewrites] == ["Concat + ConstantOfShape + Trilu + Trilu"]
        assert "[-3, 1)" in rewrites[0].replaced
        assert len(out.graph.node) == len(model.graph.node) - 3
        assert optimize_model(out)[1] == []
    else:   # the causal mask is three nodes (Unsqueeze, LessOrEqual, And with true): no fewer as Trilu
        assert rewrites == [] and "not fewer nodes (3 for 3)" in declined[0]


def offset_range_model(pieces: bool = False, half: bool = False) -> onnx.ModelProto:
    """The causal mask with a KV offset, as dynamo exports it: rows arange(kv - q, kv), columns
    arange(kv), `columns <= rows` (pieces: rows from 0, `Not(columns <= rows) | (columns == rows - 3)`,
    two pieces; half: a float Range shifted by 0.5 instead)."""
    inits = [numpy_helper.from_array(np.array(v, t), n)
             for n, v, t in (("zero", 0, np.int64), ("one", 1, np.int64), ("ax0", [0], np.int64),
                             ("ax1", [1], np.int64), ("three", 3, np.int64), ("half", 0.5, np.float32),
                             ("zf", 0, np.float32), ("of", 1, np.float32))]
    nodes = [helper.make_node("Shape", ["x"], ["q1"], name="shape_q", start=0, end=1),
             helper.make_node("Squeeze", ["q1"], ["q"], name="q"),
             helper.make_node("Shape", ["x"], ["kv1"], name="shape_kv", start=1, end=2),
             helper.make_node("Squeeze", ["kv1"], ["kv"], name="kv")]
    if half:
        nodes += [helper.make_node("Cast", ["kv"], ["kvf"], name="kvf", to=TensorProto.FLOAT),
                  helper.make_node("Range", ["zf", "kvf", "of"], ["r"], name="rows_range"),
                  helper.make_node("Add", ["r", "half"], ["rows"], name="shifted"),
                  helper.make_node("Range", ["zf", "kvf", "of"], ["cols"], name="cols_range")]
    else:
        nodes += [helper.make_node("Sub", ["kv", "q"], ["start"], name="start"),
                  helper.make_node("Range", ["zero" if pieces else "start", "kv", "one"], ["rows"], name="rows_range"),
                  helper.make_node("Range", ["zero", "kv", "one"], ["cols"], name="cols_range")]
    nodes += [helper.make_node("Unsqueeze", ["cols", "ax0"], ["col"], name="col"),
              helper.make_node("Unsqueeze", ["rows", "ax1"], ["row"], name="row"),
              helper.make_node("LessOrEqual", ["col", "row"], ["m"], name="cmp")]
    out = "m"
    if pieces:
        nodes += [helper.make_node("Range", ["zero", "kv", "one"], ["rows2"], name="rows_range2"),
                  helper.make_node("Unsqueeze", ["rows2", "ax1"], ["row2"], name="row2"),
                  helper.make_node("Sub", ["row2", "three"], ["low"], name="low"),
                  helper.make_node("Equal", ["col", "low"], ["e"], name="eq"),
                  helper.make_node("Not", ["m"], ["above"], name="above"),
                  helper.make_node("Or", ["above", "e"], ["y"], name="or")]
        out = "y"
    nodes.append(helper.make_node("Identity", [out], ["mask"], name="out"))
    graph = helper.make_graph(nodes, "offset", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["q", "kv"])],
                              [helper.make_tensor_value_info("mask", TensorProto.BOOL, ["q", "kv"])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("kw, reason", [
    ({}, "its Range rows_range starts at a run-time value (start): the band moves with it"),
    ({"half": True}, "a comparison's indices differ by -0.5, not an integer"),
    ({"pieces": True}, "its diagonals form no band"),    # the starts cancel: two pieces, truly no band
])
def test_a_kept_mask_names_the_condition_that_failed(kw, reason) -> None:
    """optimize's reason comes from the check that failed (a band moved by a Range's run-time start is a
    band: `inspect` lowers it; only the static rewrite cannot express it)."""
    model = offset_range_model(**kw)
    out, rewrites, declined = optimize_model(model)
    assert rewrites == [] and out.graph.node == model.graph.node
    (line,) = declined
    assert reason in line, line
    if "pieces" not in kw:
        assert "no band" not in line


def abs_band_model(op: str, w: int, negate: bool = False, elem: int = TensorProto.INT64) -> onnx.ModelProto:
    """`|i - j| OP w` over arange(S) (torch's band `(i[:, None] - i[None, :]).abs() <= w`), S read from x."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("zero", 0), ("one", 1), ("ax0", [0]), ("ax1", [1]))]
    inits.append(numpy_helper.from_array(np.array(w, helper.tensor_dtype_to_np_dtype(elem)), "w"))
    nodes = [helper.make_node("Shape", ["x"], ["len"], name="shape", start=1, end=2),
             helper.make_node("Squeeze", ["len"], ["n"], name="squeeze"),
             helper.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
             helper.make_node("Unsqueeze", ["r", "ax1"], ["i"], name="i"),
             helper.make_node("Unsqueeze", ["r", "ax0"], ["j"], name="j")]
    a, b = "i", "j"
    if elem != TensorProto.INT64:
        nodes += [helper.make_node("Cast", ["i"], ["ci"], name="ci", to=elem),
                  helper.make_node("Cast", ["j"], ["cj"], name="cj", to=elem)]
        a, b = "ci", "cj"
    nodes += [helper.make_node("Sub", [a, b], ["d"], name="sub"), helper.make_node("Abs", ["d"], ["ad"], name="abs"),
              helper.make_node(op, ["ad", "w"], ["m"], name="cmp")]
    out = "m"
    if negate:
        nodes.append(helper.make_node("Not", ["m"], ["outside"], name="not"))
        out = "outside"
    nodes.append(helper.make_node("Identity", [out], ["y"], name="out"))
    graph = helper.make_graph(nodes, "abs_band", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s"])],
                              [helper.make_tensor_value_info("y", TensorProto.BOOL, ["s", "s"])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("op, w, negate, band", [
    ("LessOrEqual", 2, True, "x - y outside [-2, 3)"), ("Less", 3, False, "x - y in [-2, 3)"),
    ("Greater", 0, False, "x - y outside [0, 1)"), ("GreaterOrEqual", 1, True, "x - y in [0, 1)"),
    ("LessOrEqual", -1, False, "no diagonal (all false)")])
def test_abs_band_is_rewritten_like_the_other_windows(op, w, negate, band) -> None:
    model = abs_band_model(op, w, negate)
    out, rewrites, _ = optimized(model)            # bit-identical at sizes 1, 4, 9
    assert len(rewrites) == 1 and band in rewrites[0].replaced and rewrites[0].nodes_delta < 0
    assert not {"Abs", "Sub", "Range"} & set(ops(out))


def test_abs_of_an_unsigned_difference_is_kept_with_the_reason() -> None:
    model = abs_band_model("LessOrEqual", 2, elem=TensorProto.UINT8)
    out, rewrites, declined = optimize_model(model)
    assert rewrites == [] and out.graph.node == model.graph.node
    assert len(declined) == 1 and "reads an unsigned difference (uint8)" in declined[0], declined


def test_the_check_runs_each_graph_as_written_not_as_onnxruntime_s_optimizer_rewrites_it() -> None:
    """Where(Not(band), 0, v) over v holding -0.0: onnxruntime's graph optimizer (its default level)
    changes the original's -0.0 into +0.0, which ONNX does not; the rewrite keeps -0.0. The check
    compared the two at that level and called an exact rewrite NOT bit-identical."""
    model = abs_band_model("LessOrEqual", 1, negate=True)
    graph = model.graph
    graph.node[-1].CopyFrom(helper.make_node("Where", ["outside", "zero_f", "v"], ["y"], name="out"))
    graph.initializer.append(numpy_helper.from_array(np.array(0.0, np.float32), "zero_f"))
    graph.input.append(helper.make_tensor_value_info("v", TensorProto.FLOAT, ["s", "s"]))
    graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, ["s", "s"]))
    onnx.checker.check_model(model)
    out, rewrites, _ = optimize_model(model)
    assert len(rewrites) == 1
    assert bit_identical(model, out, list(graph_inputs(model))) == []
