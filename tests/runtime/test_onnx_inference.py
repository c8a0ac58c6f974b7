"""runtime/onnx_inference.infer_shapes: onnx's inference, given the defaults its function bodies
forget (MeanVarianceNormalization without `axes` was refused by strict inference, so `check`,
`compile` and `inspect` refused a valid model onnxruntime runs)."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from onnx_dml_lowering.runtime.onnx_inference import forgotten_defaults, infer_shapes
from tests.cli_runner import cli

ROOT = Path(__file__).resolve().parents[2]
SHAPE = [2, 3, 4, 5]


def _one_node(op_type: str, opset: int, out_shape=None, **attributes) -> onnx.ModelProto:
    node = helper.make_node(op_type, ["x"], ["y"], name="n0", **attributes)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _forgotten_unary() -> "list[tuple[str, int]]":
    """Every (single-input float operator, opset) whose schema at that opset has a forgotten
    default, from onnx's own schemas: the grid is what onnx holds, not a list written here."""
    cases = []
    for schema in onnx.defs.get_all_schemas():
        if schema.domain or len(schema.inputs) != 1 or len(schema.outputs) != 1:
            continue
        if "tensor(float)" not in schema.inputs[0].types:
            continue
        for opset in sorted({schema.since_version, 13, 18, 21, onnx.defs.onnx_opset_version()}):
            if opset >= schema.since_version and forgotten_defaults(schema.name, opset):
                cases.append((schema.name, opset))
    return cases


def test_mean_variance_normalization_is_one_case():
    assert set(forgotten_defaults("MeanVarianceNormalization", 13)) == {"axes"}
    assert ("MeanVarianceNormalization", 13) in _forgotten_unary()
    assert forgotten_defaults("Relu", 14) == {}            # no function body
    assert forgotten_defaults("NoSuchOp", 13) == {}


@pytest.mark.parametrize("op_type, opset", _forgotten_unary())
def test_inference_as_if_the_defaults_were_written(op_type, opset):
    """Left to its defaults, each such node infers as it does with them written by hand, and
    neither the model nor the result keeps what was written."""
    bare = _one_node(op_type, opset)
    given = bare.SerializeToString()
    explicit = _one_node(op_type, opset, **{name: helper.get_attribute_value(default)
                                             for name, default in forgotten_defaults(op_type, opset).items()})
    expected = onnx.shape_inference.infer_shapes(explicit, strict_mode=True, check_type=True)
    inferred = infer_shapes(bare, strict_mode=True, check_type=True)
    assert bare.SerializeToString() == given
    assert list(inferred.graph.node) == list(bare.graph.node)
    assert list(inferred.graph.output) == list(expected.graph.output)
    assert list(inferred.graph.value_info) == list(expected.graph.value_info)


def test_onnx_still_refuses_the_bare_node():
    """The premise: if onnx fixes its bodies, this fails and the module can go."""
    with pytest.raises(onnx.shape_inference.InferenceError, match="Constant"):
        onnx.shape_inference.infer_shapes(_one_node("MeanVarianceNormalization", 13), strict_mode=True)


def _mvn_in_bodies() -> onnx.ModelProto:
    """MeanVarianceNormalization without axes in both branches of an If and in a local function."""
    def branch(name: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node("MeanVarianceNormalization", ["x"], [f"{name}_y"], name=f"{name}_mvn")],
                                 name, [], [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)])
    function = helper.make_function("local", "Normalise", ["a"], ["b"],
                                    [helper.make_node("MeanVarianceNormalization", ["a"], ["b"])],
                                    [helper.make_opsetid("", 13)])
    nodes = [helper.make_node("If", ["c"], ["z"], name="if", then_branch=branch("then"), else_branch=branch("else")),
             helper.make_node("Normalise", ["z"], ["y"], name="call", domain="local")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE),
                                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)],
                             functions=[function])


def test_bodies_and_local_functions():
    model = _mvn_in_bodies()
    given = model.SerializeToString()
    inferred = infer_shapes(model, strict_mode=True, check_type=True, data_prop=True)
    assert model.SerializeToString() == given
    assert [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim] == SHAPE
    written = [n for n in [*inferred.graph.node[0].attribute[0].g.node, *inferred.functions[0].node] if n.attribute]
    assert written == []


@pytest.mark.parametrize("opset", [9, 13, 18])
def test_check_runs_it_against_onnx(tmp_path, capsys, opset):
    """End to end: check compares onnxruntime's MeanVarianceNormalization with onnx.reference's."""
    path = tmp_path / "mvn.onnx"
    onnx.save(_one_node("MeanVarianceNormalization", opset, SHAPE), path)
    code, out, err = cli(["check", path, "--oracle", "reference", "--backends", "cpu,ort-cpu"], capsys)
    assert (code, err) == (0, "")
    assert "verdict: all outputs match ONNX semantics" in out
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    y = ReferenceEvaluator(onnx.load(path)).run(None, {"x": x})[0]
    mean, var = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-9), rtol=1e-5, atol=1e-5)


def test_package_calls_onnx_inference_only_here():
    """The one mechanism: no other module of the package calls onnx's infer_shapes itself."""
    callers = []
    for folder in ("compiler", "ir", "lowering", "runtime"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.relative_to(ROOT).as_posix() == "runtime/onnx_inference.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr == "infer_shapes":
                    callers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert callers == []


def test_an_error_on_a_node_given_its_default_says_so(tmp_path, capsys):
    """A rank-3 MeanVarianceNormalization fails on the default axes [0, 2, 3] (onnxruntime's CPU
    kernel runs it; onnx's body reduces an axis the input lacks): the one line names the default
    the user never wrote, and the model is left as given whatever inference raised."""
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    given = model.SerializeToString()
    with pytest.raises(onnx.shape_inference.InferenceError) as raised:
        infer_shapes(model, strict_mode=True)
    assert model.SerializeToString() == given
    assert raised.value.__notes__ == ["node 'mvn' (MeanVarianceNormalization) leaves axes = [0, 2, 3] to its "
                                      "default, written for onnx's inference of its function body"]
    onnx.save(model, tmp_path / "mvn3.onnx")
    code, out, err = cli(["check", tmp_path / "mvn3.onnx"], capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(f"dml-lower: error: model file '{tmp_path / 'mvn3.onnx'}': ONNX shape inference failed: "
                          "node 'mvn' (MeanVarianceNormalization): ")
    assert err.endswith("; node 'mvn' (MeanVarianceNormalization) leaves axes = [0, 2, 3] to its default, written "
                        "for onnx's inference of its function body\n")


def test_a_failing_data_propagation_pass_leaves_no_default_behind():
    """compile's inference tries data propagation, then the plain pass on the same model: where the
    first raises (onnx 1.23 on the difference of two Unsqueezed Ranges), the second still writes
    and takes off the default, and the compiled model holds the node as given."""
    from onnx_dml_lowering.compiler import compile_model
    from tests.compiler.test_data_propagation import range_difference
    model = range_difference(3, 2, [3, 2])
    model.graph.node.extend([helper.make_node("Unsqueeze", ["y", "ax0"], ["y3"], name="u3"),
                             helper.make_node("Unsqueeze", ["y3", "ax0"], ["y4"], name="u4"),
                             helper.make_node("MeanVarianceNormalization", ["y4"], ["n"], name="mvn")])
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("n", TensorProto.FLOAT, [1, 1, 3, 2]))
    written = onnx.ModelProto.FromString(model.SerializeToString())
    written.graph.node[-1].attribute.append(helper.make_attribute("axes", [0, 2, 3]))
    with pytest.raises(onnx.shape_inference.InferenceError, match="Sub"):     # the premise: the retry is taken
        onnx.shape_inference.infer_shapes(written, strict_mode=True, data_prop=True)
    compiled = compile_model(model)
    (mvn,) = [n for n in compiled.model.graph.node if n.op_type == "MeanVarianceNormalization"]
    assert list(mvn.attribute) == []
    x = np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32)
    y = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(compiled.run({"x": x})["n"], y, rtol=1e-5, atol=1e-5)
