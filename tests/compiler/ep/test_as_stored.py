"""inspect --ep dml on a model onnxruntime refuses here (a node no provider has a kernel for), so
placement is predicted on the model as stored, before level 1: the Constant nodes are still what
onnxruntime's graph load makes them (initializers, never placed, never copied), and the node no
provider takes neither produces nor reads a copy."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler.ep.level1 import constants_as_initializers
from onnx_dml_lowering.compiler.ep.placement import NONE, REMOVED, indefinite, predict_placement
from onnx_dml_lowering.lowering.onnx_graphs import node_paths
from onnx_dml_lowering.runtime.ort_messages import parse_provider_failure


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def refused_model() -> onnx.ModelProto:
    """NonZero over double (no DML nor CPU kernel: the local onnxruntime refuses the model) read
    by a Transpose; Constants in the main graph (one read by a DML Add) and in both If branches."""
    branch = [("then", [1, 2]), ("else", [3, 4])]
    bodies = {f"{b}_branch": h.make_graph([h.make_node("Constant", [], [f"{b}_c"], name=f"{b}_const", value_ints=v)],
                                          b, [], [vi(f"{b}_c", T.INT64, [2])]) for b, v in branch}
    nodes = [h.make_node("Constant", [], ["k"], name="const_k", value_floats=[1.0, 2.0, 3.0, 4.0]),
             h.make_node("Add", ["f", "k"], ["added"], name="add"),
             h.make_node("Constant", [], ["two"], name="const_two",
                         value=numpy_helper.from_array(np.array(2.0, np.float64))),
             h.make_node("Mul", ["x", "two"], ["doubled"], name="mul"),
             h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             h.make_node("Transpose", ["nz"], ["coords"], name="transpose"),
             h.make_node("If", ["cond"], ["picked"], name="pick", **bodies)]
    graph = h.make_graph(nodes, "g", [vi("x", T.DOUBLE, [4, 4]), vi("f", T.FLOAT, [4]), vi("cond", T.BOOL, [])],
                         [vi("added", T.FLOAT, [4]), vi("doubled", T.DOUBLE, [4, 4]), vi("coords", T.INT64, None),
                          vi("picked", T.INT64, [2])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def refusal(model: onnx.ModelProto) -> str:
    """The node onnxruntime's own refusal of the model names (the oracle of what no provider takes)."""
    with pytest.raises(Exception) as refused:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    found = parse_provider_failure(refused.value)
    assert found is not None and found.node
    return found.node


def test_constants_stay_initializers_and_only_the_refused_node_has_no_provider():
    model = refused_model()
    report = predict_placement(model, None)
    assert any("predicted on the model as stored" in w for w in report["warnings"])     # the path under test
    constants = [path for path, node in node_paths(model.graph) if node.op_type == "Constant"]
    providers = {n["node"]: n["provider"] for n in report["nodes"]}
    assert {p: providers[p] for p in constants} == {p: REMOVED for p in constants}
    assert [n for n, p in providers.items() if p == NONE] == [refusal(model)]
    assert not [w for w in report["warnings"] if w.split(" (")[0] in constants]


def test_neither_a_constant_nor_a_node_no_provider_takes_is_copied():
    model = refused_model()
    report = predict_placement(model, None)
    unplaced = {n["node"] for n in report["nodes"] if n["provider"] == NONE}
    constant_values = {node.output[0] for _, node in node_paths(model.graph) if node.op_type == "Constant"}
    assert unplaced
    for copy in report["copies"]:
        assert copy["from"] not in unplaced and not unplaced & set(copy["to"]), copy
        assert copy["value"] not in constant_values, copy


SPARSE_LINEAR = h.make_sparse_tensor(numpy_helper.from_array(np.array([5.0, 7.0], np.float32)),
                                     numpy_helper.from_array(np.array([1, 4], np.int64)), [2, 3])
SPARSE_COORDS = h.make_sparse_tensor(numpy_helper.from_array(np.array([5, 7], np.int32)),
                                     numpy_helper.from_array(np.array([[0, 2], [1, 1]], np.int64)), [2, 3])
CONSTANTS = [("value", numpy_helper.from_array(np.arange(6, dtype=np.float16).reshape(2, 3))),
             ("value_float", 1.5), ("value_floats", [1.0, -2.5]), ("value_int", 7), ("value_ints", [3, 1, 4]),
             ("value_string", "word"), ("value_strings", ["a", "bc"]),
             ("sparse_value", SPARSE_LINEAR), ("sparse_value", SPARSE_COORDS)]


def onnxruntime_value(node: onnx.NodeProto) -> np.ndarray:
    """The oracle: what onnxruntime's graph load makes of the Constant, read through an Identity
    (a sparse Constant is a dense tensor to the nodes reading it)."""
    graph = h.make_graph([node, h.make_node("Identity", [node.output[0]], ["read"])], "g", [],
                         [h.make_value_info("read", onnx.TypeProto())])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, {})[0]


@pytest.mark.parametrize("attr_name,value", CONSTANTS, ids=[f"{a}{i}" for i, (a, _) in enumerate(CONSTANTS)])
def test_every_constant_form_becomes_the_initializer_onnxruntime_makes(attr_name, value):
    node = h.make_node("Constant", [], ["out"], name="c", **{attr_name: value})
    model = h.make_model(h.make_graph([node], "g", [], [h.make_value_info("out", onnx.TypeProto())]),
                         opset_imports=[h.make_opsetid("", 17)])
    loaded = constants_as_initializers(model)
    assert len(loaded.graph.node) == 0 and len(model.graph.node) == 1        # a copy, the model untouched
    (init,) = loaded.graph.initializer
    expected, got = onnxruntime_value(node), numpy_helper.to_array(init)
    assert init.name == "out" and got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got, expected)


# the ONNX type names inspect puts after an article, with the one they are read with
ARTICLES = {"double": "a", "float": "a", "float16": "a", "bfloat16": "a", "bool": "a", "string": "a", "seq": "a",
            "map": "a", "sparse_tensor": "a", "uint8": "a", "uint64": "a", "int8": "an", "int64": "an",
            "optional": "an", "undefined": "an", "8-bit": "an"}


@pytest.mark.parametrize("word", sorted(ARTICLES))
def test_the_article_is_the_one_the_word_is_read_with(word):
    assert indefinite(word) == f"{ARTICLES[word]} {word}"


@pytest.mark.parametrize("elem", [T.DOUBLE, T.INT64, T.UINT64])
def test_the_eyelike_feature_level_warning_takes_the_article_of_its_type(elem):
    name = onnx.helper.tensor_dtype_to_np_dtype(elem).name.replace("float64", "double")
    graph = h.make_graph([h.make_node("EyeLike", ["x"], ["y"], name="eye")], "g", [vi("x", elem, [3, 3])],
                         [vi("y", elem, [3, 3])])
    report = predict_placement(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8), None)
    (warned,) = [w for w in report["warnings"] if w.startswith("eye (EyeLike):")]
    assert f"): {indefinite(name)} output needs" in warned


def test_a_sparse_constant_of_absurd_size_is_its_type_and_shape_only():
    """A sparse Constant declaring [2^20, 2^20] (one value): made dense it was 4 TiB, a MemoryError
    (an internal error of inspect --ep dml); past DENSE_SPARSE_MAX the initializer is its type and
    shape, all the prediction reads."""
    from onnx_dml_lowering.compiler.ep.level1 import DENSE_SPARSE_MAX
    sparse = h.make_sparse_tensor(numpy_helper.from_array(np.array([1.0], np.float32)),
                                  numpy_helper.from_array(np.array([5], np.int64)), [2**20, 2**20])
    node = h.make_node("Constant", [], ["out"], name="c", sparse_value=sparse)
    model = h.make_model(h.make_graph([node], "g", [], [h.make_value_info("out", onnx.TypeProto())]),
                         opset_imports=[h.make_opsetid("", 17)])
    (init,) = constants_as_initializers(model).graph.initializer
    assert (init.name, init.data_type, list(init.dims)) == ("out", T.FLOAT, [2**20, 2**20]) and 2**40 > DENSE_SPARSE_MAX
    assert not init.raw_data and not init.float_data


def eyelike_bool_model() -> onnx.ModelProto:
    """EyeLike to bool beside a Relu: the CPU EP has no EyeLike(bool) kernel (the CPU-only level-1
    session fails), while the DML EP takes it (banded_mix's eye_bool, on onnxruntime.dll 1.24.4)."""
    nodes = [h.make_node("EyeLike", ["x"], ["eye"], name="eye_bool", dtype=T.BOOL),
             h.make_node("Relu", ["x"], ["r"], name="relu")]
    graph = h.make_graph(nodes, "g", [vi("x", T.FLOAT, [3, 4])], [vi("eye", T.BOOL, [3, 4]), vi("r", T.FLOAT, [3, 4])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("build", [refused_model, eyelike_bool_model])
def test_a_level1_pass_refused_says_which_session_refused_and_no_line_claims_level1(build):
    """Where the CPU-only session that runs level 1 refuses the model, the warning says it was that
    session (a refusal of the CPU EP's, not the DML EP's), the first line and the JSON say no level 1
    was applied, and --verify's line says the comparison was on the model as stored (it said 'level 1
    by the same onnxruntime' beside the warning that level 1 was not applied)."""
    from onnx_dml_lowering.compiler.ep.placement import format_placement
    from onnx_dml_lowering.compiler.ep.verify import format_verified
    model = build()
    refused = refusal(model)
    report = predict_placement(model, None)
    (warned,) = [w for w in report["warnings"] if w.startswith("level-1 optimisations not applied")]
    assert warned.startswith(f"level-1 optimisations not applied: the CPU-only session of onnxruntime "
                             f"{ort.__version__} that runs them refuses the model here (")
    assert refused in warned and "a refusal of the CPU EP's, not the DML EP's" in warned
    assert refused in report["assumptions"]["level1_refused"]
    assert report["assumptions"]["level1_optimisations"].startswith("none: ")
    assert "; no level-1 optimisations (refused, below)):" in format_placement(report)[0]
    report["verified"] = {"onnxruntime": "1.24.4", "agree": 2, "differ": [], "failure": None}
    assert format_verified(report)[0] == ("verified on the real DML EP (onnxruntime.dll 1.24.4, on the model as "
                                          "stored, level 1 refused (above)): 2 of 2 nodes agree on placement")


def test_a_level1_pass_that_ran_is_said_as_before():
    from onnx_dml_lowering.compiler.ep.placement import format_placement
    from onnx_dml_lowering.compiler.ep.verify import format_verified
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu")]
    model = h.make_model(h.make_graph(nodes, "g", [vi("x", T.FLOAT, [3])], [vi("r", T.FLOAT, [3])]),
                         opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    report = predict_placement(model, None)
    assert report["assumptions"]["level1_refused"] == ""
    assert not [w for w in report["warnings"] if "level-1 optimisations not applied" in w]
    assert f"; level-1 optimisations by onnxruntime {ort.__version__} here):" in format_placement(report)[0]
    report["verified"] = {"onnxruntime": "1.24.4", "agree": 1, "differ": [], "failure": None}
    assert "(onnxruntime.dll 1.24.4, level 1 by the same onnxruntime): 1 of 1" in format_verified(report)[0]
