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
