"""optimize's generated names are new to the whole model: a name its rewrite would generate, planted
first in graph.value_info (stale, of another type), inside an If branch, inside a Loop inside a
Loop, or inside a model-local function, is avoided, and the model written passes the ONNX checker's
full check and runs bit-identically on onnxruntime; a clash the rewrite did make is its own internal
error, never a model written."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.compiler.optimize import names as names_module
from onnx_dml_lowering.compiler.optimize import optimize_model
from onnx_dml_lowering.compiler.optimize.dml import optimize_for_dml
from onnx_dml_lowering.lowering.onnx_graphs import all_nodes

FLOAT = TensorProto.FLOAT


def vi(name: str, onnx_type: int = FLOAT, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, onnx_type, shape)


def _const(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.int64)))


def bands_base() -> onnx.ModelProto:
    """y = x @ W, W a stored identity (the constants rewrite)."""
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g",
                              [vi("x", FLOAT, ["b", 16])], [vi("y", FLOAT, ["b", 16])],
                              [numpy_helper.from_array(np.eye(16, dtype=np.float32), "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def mask_base() -> onnx.ModelProto:
    """A causal mask from Range over x's run-time size, applied with Where (the mask rewrite)."""
    nodes = [helper.make_node("Shape", ["x"], ["shp"]), _const("one", [1]), _const("zero", 0), _const("step", 1),
             _const("ax0", [0]), _const("ax1", [1]),
             helper.make_node("Gather", ["shp", "one"], ["n1"]), helper.make_node("Squeeze", ["n1", "ax0"], ["n"]),
             helper.make_node("Range", ["zero", "n", "step"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "ax1"], ["ri"]), helper.make_node("Unsqueeze", ["r", "ax0"], ["rj"]),
             helper.make_node("GreaterOrEqual", ["ri", "rj"], ["m"]),
             helper.make_node("Constant", [], ["zf"], value=numpy_helper.from_array(np.array(0, np.float32))),
             helper.make_node("Where", ["m", "x", "zf"], ["y"])]
    graph = helper.make_graph(nodes, "g", [vi("x", FLOAT, ["n", "n"])], [vi("y", FLOAT, ["n", "n"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def dml_base() -> onnx.ModelProto:
    """A Cast to bool (--for dml makes it Not(Equal(x, 0)))."""
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BOOL, name="castb")], "g",
                              [vi("x", FLOAT, ["a", "b"])], [vi("y", TensorProto.BOOL, ["a", "b"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _rewrite(kind: str, model: onnx.ModelProto) -> "tuple[onnx.ModelProto, int]":
    if kind == "dml":
        out, rewrites, _ = optimize_for_dml(model)
    else:
        out, rewrites, _ = optimize_model(model)
    return out, len(rewrites)


BASES = {"bands": bands_base, "mask": mask_base, "dml": dml_base}


def _names(model: onnx.ModelProto) -> "set[str]":
    """Node names, node outputs and initializer names of the main graph (what a rewrite adds)."""
    graph = model.graph
    return ({n.name for n in graph.node} | {o for n in graph.node for o in n.output}
            | {t.name for t in graph.initializer}) - {""}


def generated(kind: str) -> "list[str]":
    """The names the rewrite of the clean base model generates."""
    model = BASES[kind]()
    out, count = _rewrite(kind, model)
    assert count
    return sorted(_names(out) - _names(model))


def _chain(names: "list[str]", source: str, last: str) -> "list[onnx.NodeProto]":
    """Neg nodes defining each of `names` in turn from `source`, then Identity to `last`."""
    nodes, previous = [], source
    for name in names:
        nodes.append(helper.make_node("Neg", [previous], [name]))
        previous = name
    return nodes + [helper.make_node("Identity", [previous], [last])]


def _shape(model: onnx.ModelProto) -> "list[int | str]":
    """The shape of input x (what every planted chain computes from)."""
    return [d.dim_value or d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim]


def plant_value_info(model: onnx.ModelProto, names: "list[str]") -> None:
    model.graph.value_info.extend(vi(name, TensorProto.INT64, [3]) for name in names)   # stale: legal


def plant_if(model: onnx.ModelProto, names: "list[str]") -> None:
    then = helper.make_graph(_chain(names, "x", "t_out"), "then", [], [vi("t_out")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e_out"])], "else", [], [vi("e_out")])
    model.graph.input.append(vi("c", TensorProto.BOOL, []))
    model.graph.node.append(helper.make_node("If", ["c"], ["z"], then_branch=then, else_branch=other))
    model.graph.output.append(vi("z", FLOAT, _shape(model)))


def plant_loop_in_loop(model: onnx.ModelProto, names: "list[str]") -> None:
    inner = helper.make_graph(_chain(names, "x", "s_i") + [helper.make_node("Identity", ["c_i"], ["c_i_out"])],
                              "inner", [vi("i_i", TensorProto.INT64, []), vi("c_i", TensorProto.BOOL, [])],
                              [vi("c_i_out", TensorProto.BOOL, []), vi("s_i")])
    outer = helper.make_graph([helper.make_node("Loop", ["trips", ""], ["stack_i"], body=inner),
                               helper.make_node("Identity", ["stack_i"], ["s_o"]),
                               helper.make_node("Identity", ["c_o"], ["c_o_out"])],
                              "outer", [vi("i_o", TensorProto.INT64, []), vi("c_o", TensorProto.BOOL, [])],
                              [vi("c_o_out", TensorProto.BOOL, []), vi("s_o")])
    model.graph.initializer.append(numpy_helper.from_array(np.array(2, np.int64), "trips"))
    model.graph.node.append(helper.make_node("Loop", ["trips", ""], ["loops"], body=outer))
    model.graph.output.append(vi("loops", FLOAT, [2, 2, *_shape(model)]))


def plant_function(model: onnx.ModelProto, names: "list[str]") -> None:
    opset = next(o.version for o in model.opset_import if o.domain == "")
    model.functions.append(helper.make_function("local", "F", ["a"], ["b"], _chain(names, "a", "b"),
                                                [helper.make_opsetid("", opset)]))
    model.opset_import.append(helper.make_opsetid("local", 1))
    model.graph.node.append(helper.make_node("F", ["x"], ["w"], domain="local"))
    model.graph.output.append(vi("w", FLOAT, _shape(model)))


PLANTS = {"value_info": plant_value_info, "if_body": plant_if, "loop_in_loop": plant_loop_in_loop,
          "function": plant_function}


def _feeds(model: onnx.ModelProto, seed: int, size: int, flag: bool) -> "dict[str, np.ndarray]":
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value or size for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == TensorProto.BOOL:
            feeds[value.name] = np.full(shape, flag)
        else:
            a = rng.standard_normal(shape).astype(np.float32)
            a.flat[::3] = 0
            a.flat[1::5] = np.nan
            feeds[value.name] = a
    return feeds


def _run(model: onnx.ModelProto, feeds: "dict[str, np.ndarray]") -> "list[np.ndarray]":
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_bit_identical(original: onnx.ModelProto, rewritten: onnx.ModelProto) -> None:
    for seed, size, flag in ((0, 1, True), (1, 3, False), (2, 5, True)):
        feeds = _feeds(original, seed, size, flag)
        for a, b in zip(_run(original, feeds), _run(rewritten, feeds), strict=True):
            a, b = np.asarray(a), np.asarray(b)
            assert (a.dtype, a.shape, a.tobytes()) == (b.dtype, b.shape, b.tobytes())


@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("kind", sorted(BASES))
def test_generated_names_avoid_every_name_in_the_model(kind, plant) -> None:
    names = generated(kind)
    model = BASES[kind]()
    PLANTS[plant](model, names)
    onnx.checker.check_model(model, full_check=True)        # the input is valid
    out, count = _rewrite(kind, model)
    assert count                                            # rewritten all the same, under other names
    onnx.checker.check_model(out, full_check=True)
    assert not set(names) & (_names(out) - _names(model))
    assert_bit_identical(model, out)


def test_names_taken_cover_every_place_a_name_lives() -> None:
    names = ["p_value_info", "p_if", "p_loop", "p_function"]
    model = bands_base()
    plant_value_info(model, names[:1])
    plant_if(model, names[1:2])
    plant_loop_in_loop(model, names[2:3])
    plant_function(model, names[3:])
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0], np.float32), "p_sparse"),
        numpy_helper.from_array(np.array([0], np.int64), "p_sparse_at"), [4]))
    taken = names_module.taken_names(model)
    assert set(names) | {"p_sparse", "p_sparse_at", "F", "t_out", "c_i_out", "stack_i", "a", "b"} <= taken
    assert {n.name for _, n in all_nodes(model) if n.name} <= taken


@pytest.mark.parametrize("kind", ["bands", "dml"])
def test_a_clash_the_rewrite_made_is_its_internal_error(kind, monkeypatch) -> None:
    """With the names it must avoid hidden from it, the rewrite makes the clash, and its own check
    (the checker's full check: the stale value_info's type) refuses to hand the model out."""
    model = BASES[kind]()
    plant_value_info(model, generated(kind))
    monkeypatch.setattr(names_module, "taken_names", lambda model, also=(): set())
    with pytest.raises(RuntimeError, match="produced an invalid model"):
        _rewrite(kind, model)


def test_a_node_name_the_rewrite_repeated_is_its_internal_error(monkeypatch) -> None:
    model = bands_base()
    nodes = [n for n in generated("bands") if n.startswith("gen_W_") and n.endswith(("_fill", "_eye"))]
    model.graph.node[0].name = nodes[0]
    monkeypatch.setattr(names_module, "taken_names", lambda model, also=(): set())
    with pytest.raises(RuntimeError, match=f"node name '{nodes[0]}' repeated"):
        optimize_model(model)


def test_check_reads_bfloat16_outputs_under_names_new_to_the_model() -> None:
    """--check reads a bfloat16 output through a Cast into a name of its own: not one the model has
    (`y__narrow` was), and for an output no node makes too (an initializer); a difference is still
    reported under the output's own name."""
    from onnx_dml_lowering.compiler.optimize import bit_identical
    from onnx_dml_lowering.runtime.model_facts import graph_inputs
    import ml_dtypes

    def build(stored: float) -> onnx.ModelProto:
        weights = numpy_helper.from_array(np.full((2, 2), stored, ml_dtypes.bfloat16), "B")
        nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16),
                 helper.make_node("Identity", ["x"], ["y__narrow"]), helper.make_node("Identity", ["x"], ["y__float"])]
        graph = helper.make_graph(nodes, "g", [vi("x", FLOAT, [2])],
                                  [vi("y", TensorProto.BFLOAT16, [2]), vi("B", TensorProto.BFLOAT16, [2, 2]),
                                   vi("y__narrow", FLOAT, [2]), vi("y__float", FLOAT, [2])], [weights])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    model = build(1.5)
    assert bit_identical(model, model, graph_inputs(model)) == []
    problems = bit_identical(model, build(2.5), graph_inputs(model))
    assert problems and all(p.startswith("output B, ") for p in problems)
