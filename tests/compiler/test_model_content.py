"""The loader (frontend.load_model, load_stored) refuses what a model declares that its readers
would read differently or fail on: a domain imported twice, a tensor whose data is not what its
type and shape take (wherever the tensor lives), a declared element type ONNX does not define (a
negative declared size is read as unknown instead). One line naming the file, the tensor or value
and the field, exit 2 from every command; never an internal error, nor a verdict that depends on which oracle ran."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.frontend import load_model, load_stored
from onnx_dml_lowering.ir import DmlLowerError
from tests.builders import graph_model
from tests.cli_runner import cli


def _model(nodes, inputs=(("x", T.FLOAT, [3, 4]),), outputs=(("y", T.FLOAT, [3, 4]),), initializers=(),
           opsets=(("", 13),), functions=()) -> onnx.ModelProto:
    model = graph_model(nodes, inputs, outputs, initializers)
    del model.opset_import[:]
    model.opset_import.extend(h.make_opsetid(d, v) for d, v in opsets)
    model.functions.extend(functions)
    return model


def _softmax(opsets) -> onnx.ModelProto:
    """Softmax(axis=1) over [2, 3, 4]: 13 normalises axis 1 alone, 11 axes 1 and 2 flattened."""
    return _model([h.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)], [("x", T.FLOAT, [2, 3, 4])],
                  [("y", T.FLOAT, [2, 3, 4])], opsets=opsets)


def _refused(model: onnx.ModelProto, tmp_path, pattern: str, stored: bool = True) -> None:
    """The same line from a file (led by its name), from bytes and from a ModelProto; `stored`:
    from the file as stored too (declarations; tensors are checked where they are resolved)."""
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    with pytest.raises(DmlLowerError, match=rf"^model file '{path}': {pattern}"):
        load_model(str(path))
    if stored:
        with pytest.raises(DmlLowerError, match=rf"^model file '{path}': {pattern}"):
            load_stored(str(path))
    with pytest.raises(DmlLowerError, match=rf"^model bytes: {pattern}"):
        load_model(model.SerializeToString())
    with pytest.raises(DmlLowerError, match=rf"^model: {pattern}"):
        load_model(model)


# -- a domain imported twice --------------------------------------------------------------------------

@pytest.mark.parametrize("opsets, domain, versions", [
    ((("", 13), ("", 11)), "ai.onnx", "13 and 11"),
    ((("", 11), ("ai.onnx", 13)), "ai.onnx", "11 and 13"),
    ((("ai.onnx", 13), ("", 13)), "ai.onnx", "13 and 13"),
    ((("", 13), ("com.example", 1), ("com.example", 2)), "com.example", "1 and 2"),
])
def test_a_domain_imported_twice_is_refused(opsets, domain, versions):
    with pytest.raises(DmlLowerError, match=rf"^model imports domain '{domain}' twice, at opsets {versions}"):
        load_model(_softmax(opsets))


def test_a_function_importing_a_domain_twice_is_refused():
    body = [h.make_node("Relu", ["a"], ["b"])]
    function = h.make_function("local", "F", ["a"], ["b"], body, [h.make_opsetid("", 13), h.make_opsetid("ai.onnx", 14)])
    model = _model([h.make_node("F", ["x"], ["y"], domain="local")], opsets=(("", 13), ("local", 1)),
                   functions=[function])
    with pytest.raises(DmlLowerError, match=r"^model-local function 'F' of domain 'local' imports domain 'ai.onnx' "
                                            r"twice, at opsets 13 and 14 \('' and 'ai.onnx' name one domain\)"):
        load_model(model)


@pytest.mark.parametrize("oracle", ["hybrid", "reference"])
def test_check_refuses_the_twice_imported_model_whichever_oracle_runs(oracle, tmp_path, capsys):
    """onnxruntime read opset 11 and onnx.reference 13: the verdict depended on the oracle."""
    path = tmp_path / "m.onnx"
    onnx.save(_softmax((("", 13), ("", 11))), path)
    code, out, err = cli(["check", path, "--backends", "cpu,ort-cpu", "--oracle", oracle, "-q"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, (out, err)
    assert "imports domain 'ai.onnx' twice, at opsets 13 and 11" in err


def test_distinct_domains_are_accepted():
    model = _softmax((("", 13), ("com.microsoft", 1), ("ai.onnx.ml", 3)))
    assert len(load_model(model).opset_import) == 3


# -- tensors, wherever they live ----------------------------------------------------------------------

def _long_floats(name: str = "w") -> T:
    """50 floats for [3, 4]: to_array's reshape raised ValueError (an internal error)."""
    return T(name=name, data_type=T.FLOAT, dims=[3, 4], float_data=[1.0] * 50)


_LONG = r"holds 50 values in float_data \(and no raw_data\), but its type and shape FLOAT \[3, 4\] take 12"


def _if_model(branch_initializer: T) -> onnx.ModelProto:
    then = h.make_graph([h.make_node("Add", ["x", "w"], ["t"])], "then_body", [], [h.make_tensor_value_info("t", T.FLOAT, [3, 4])],
                        [branch_initializer])
    other = h.make_graph([h.make_node("Identity", ["x"], ["e"])], "else_body", [], [h.make_tensor_value_info("e", T.FLOAT, [3, 4])])
    node = h.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)
    return _model([node], [("c", T.BOOL, []), ("x", T.FLOAT, [3, 4])])


def _function_model(tensor: T) -> onnx.ModelProto:
    body = [h.make_node("Constant", [], ["k"], name="konst", value=tensor), h.make_node("Add", ["a", "k"], ["b"])]
    function = h.make_function("local", "F", ["a"], ["b"], body, [h.make_opsetid("", 13)])
    return _model([h.make_node("F", ["x"], ["y"], domain="local")], opsets=(("", 13), ("local", 1)),
                  functions=[function])


def _sparse_model(values: T) -> onnx.ModelProto:
    indices = numpy_helper.from_array(np.array([0, 5], np.int64), "s_idx")
    model = _model([h.make_node("Add", ["x", "s"], ["y"])])
    model.graph.sparse_initializer.append(h.make_sparse_tensor(values, indices, [3, 4]))
    return model


PLACES = {
    "initializer": (lambda: _model([h.make_node("Add", ["x", "w"], ["y"])], initializers=[_long_floats()]),
                    rf"tensor 'w' {_LONG}"),
    "Constant": (lambda: _model([h.make_node("Constant", [], ["y"], name="c", value=_long_floats("v"))], inputs=()),
                 rf"tensor 'v' \(attribute 'value' of Constant node 'c'\) {_LONG}"),
    "If branch": (lambda: _if_model(_long_floats()), rf"tensor 'w' \(initializer in graph 'then_body'\) {_LONG}"),
    "function": (lambda: _function_model(_long_floats("v")),
                 rf"tensor 'v' \(attribute 'value' of Constant node 'konst' in model-local function 'F'\) {_LONG}"),
    "sparse values": (lambda: _sparse_model(T(name="s", data_type=T.FLOAT, dims=[2], float_data=[1.0] * 3)),
                      r"tensor 's' \(the values of sparse initializer 's'\) holds 3 values in float_data"),
}


@pytest.mark.parametrize("place", PLACES)
def test_a_tensor_s_data_is_checked_wherever_it_lives(place, tmp_path):
    build, pattern = PLACES[place]
    _refused(build(), tmp_path, pattern, stored=False)


def _f16_out_of_range() -> onnx.ModelProto:
    """A float16 weight stored as int32_data 70000: numpy_helper wrapped it, onnxruntime refused it."""
    w = T(name="w", data_type=T.FLOAT16, dims=[3, 4], int32_data=[70000] * 12)
    return _model([h.make_node("Add", ["x", "w"], ["y"])], [("x", T.FLOAT16, [3, 4])], [("y", T.FLOAT16, [3, 4])],
                  initializers=[w])


def _dtype_999() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    w.data_type = 999
    return _model([h.make_node("Add", ["x", "w"], ["y"])], initializers=[w])


COMMANDS = {
    "inspect": lambda p, tmp: ["inspect", p],
    "compile": lambda p, tmp: ["compile", p],
    "run": lambda p, tmp: ["run", p],
    "check": lambda p, tmp: ["check", p, "--backends", "cpu,ort-cpu", "-q"],
    "optimize": lambda p, tmp: ["optimize", p, "-o", tmp / "out.onnx"],
}
MODELS = {
    "long float_data": (lambda: PLACES["Constant"][0](), "holds 50 values in float_data"),
    "float16 past 16 bits": (_f16_out_of_range, "holds 70000 at int32_data[0], outside the 0..65535 its type FLOAT16"),
    "data type 999": (_dtype_999, "tensor 'w' has data type 999, which ONNX"),
    "input type 999": (lambda: _model([h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", 999, [3, 4])]),
                       "input 'x' has element type 999"),
}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_in_one_line(model, command, tmp_path, capsys):
    """What was an internal error (exit 3), an ort-cpu ERROR or a MATCH on a size of -5."""
    build, phrase = MODELS[model]
    path = tmp_path / "m.onnx"
    onnx.save(build(), path)
    code, out, err = cli(COMMANDS[command](path, tmp_path), capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("dml-lower: error: "), (code, out, err)
    assert f"model file '{path}': " in err and phrase in err, err
    assert not (tmp_path / "out.onnx").exists()


# -- declared value types ------------------------------------------------------------------------------

def _sequence_output(elem_type: int) -> onnx.ModelProto:
    output = h.make_tensor_sequence_value_info("y", elem_type, [3, 4])
    return _model([h.make_node("SequenceConstruct", ["x"], ["y"])], outputs=[output])


def _function_value(dims, elem: int = T.FLOAT) -> onnx.ModelProto:
    model = _function_model(numpy_helper.from_array(np.ones((3, 4), np.float32), "v"))
    model.functions[0].value_info.append(h.make_tensor_value_info("k", elem, dims))
    return model


def _optional_type(elem_type: int) -> onnx.ModelProto:
    kind = h.make_tensor_type_proto(elem_type, [3, 4])
    node = h.make_node("Optional", [], ["y"], name="opt", type=kind)
    return _model([node], inputs=(), outputs=[h.make_value_info("y", h.make_optional_type_proto(
        h.make_tensor_type_proto(T.FLOAT, [3, 4])))], opsets=(("", 15),))


TYPE_ROWS = {
    "output": (lambda: _model([h.make_node("Relu", ["x"], ["y"])], outputs=[h.make_tensor_value_info("y", 77, [3, 4])]),
               "output 'y' has element type 77"),
    "value_info": (lambda: _value_info_model([2], 999), "value 't' has element type 999"),
    "sequence element": (lambda: _sequence_output(999), "output 'y' has element type 999"),
    "function value": (lambda: _function_value([3, 4], 999),
                       r"value 'k' of model-local function 'F' has element type 999"),
    "Optional type attribute": (lambda: _optional_type(999),
                                "attribute 'type' of Optional node 'opt' has element type 999"),
}


def _value_info_model(dims, elem: int = T.FLOAT) -> onnx.ModelProto:
    model = _model([h.make_node("Relu", ["x"], ["t"]), h.make_node("Relu", ["t"], ["y"])])
    model.graph.value_info.append(h.make_tensor_value_info("t", elem, dims))
    return model


@pytest.mark.parametrize("row", TYPE_ROWS)
def test_a_declared_type_is_checked_wherever_it_is_declared(row, tmp_path):
    build, pattern = TYPE_ROWS[row]
    _refused(build(), tmp_path, pattern)


def test_a_negative_size_is_unknown_wherever_it_is_declared(tmp_path):
    """A body's output, a graph input, a sequence's element: each negative size becomes unknown in
    the loader's copy (as onnxruntime reads it; onnx's shape inference can abort on one), never in the
    caller's model."""
    from onnx_dml_lowering.compiler.frontend import load_model
    model = _if_model(numpy_helper.from_array(np.ones((3, 4), np.float32), "w"))
    body = next(a for a in model.graph.node[0].attribute if a.name == "then_branch").g
    body.output[0].type.tensor_type.shape.dim[0].dim_value = -3
    loaded = load_model(model)
    dim = next(a for a in loaded.graph.node[0].attribute if a.name == "then_branch").g.output[0].type.tensor_type.shape.dim[0]
    assert not dim.HasField("dim_value") and not dim.dim_param
    assert body.output[0].type.tensor_type.shape.dim[0].dim_value == -3          # the caller's model as it was
    seq = h.make_tensor_sequence_value_info("s", T.FLOAT, [-1, 2])
    relu = _model([h.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [-5, 4])])
    relu.graph.value_info.append(seq)
    loaded = load_model(relu)
    assert [d.HasField("dim_value") for d in loaded.graph.input[0].type.tensor_type.shape.dim] == [False, True]
    assert not loaded.graph.value_info[0].type.sequence_type.elem_type.tensor_type.shape.dim[0].HasField("dim_value")


def test_sizes_of_zero_and_named_sizes_are_accepted():
    """A dimension of 0 is a size; a dim_param names one known at run time."""
    model = _model([h.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [0, "n"])], [("y", T.FLOAT, [0, "n"])])
    assert compile_model(model).run({"x": np.zeros((0, 5), np.float32)})["y"].shape == (0, 5)


def test_the_place_named_is_the_bad_tensor_s_among_many():
    """Good tensors of every kind before the bad one (a Constant's sparse value, walked last):
    the place is looked up by the bad tensor's position in the same walk."""
    model = _if_model(numpy_helper.from_array(np.ones((3, 4), np.float32), "w"))
    model.graph.initializer.append(numpy_helper.from_array(np.ones(2, np.float32), "extra"))
    good = numpy_helper.from_array(np.ones(2, np.float32), "g")
    model.graph.node.append(h.make_node("Constant", [], ["k"], name="good", value=good))
    indices = numpy_helper.from_array(np.array([0, 1], np.int64), "i")
    bad = h.make_sparse_tensor(T(name="sv", data_type=T.FLOAT, dims=[2], float_data=[1.0]), indices, [4])
    model.graph.node.append(h.make_node("Constant", [], ["sp"], name="sparse", sparse_value=bad))
    with pytest.raises(DmlLowerError, match=r"^model: tensor 'sv' \(the values of sparse tensor of attribute "
                                            r"'sparse_value' of Constant node 'sparse'\) holds 1 values in float_data"):
        load_model(model)
