"""inspect --ep dml: the predicted DirectML EP placement follows each rule of onnxruntime 1.27's
registration table (shared/spec/DML_EP_PLACEMENT.md §3) on a table of small models, and is
complete and explained on the real exports.

Where an expectation is a registration fact (since-versions, types), the test reads it from the
table itself (the JSON the package ships), not from a second hand-written copy."""
import json
from importlib import resources

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler.ep.placement import CPU, DML, NONE, REMOVED, predict_placement
from onnx_dml_lowering.compiler.node_ids import identify_nodes
from tests import paths
from tests.cli_runner import cli

REAL = paths.REAL
DATA = json.loads(resources.files("onnx_dml_lowering.compiler.ep")
                  .joinpath("dml_ep_registrations_ort1.27.json").read_text())
TABLE = DATA["rows"]
# "If(7,11,13,16,19)": CPU implementations registered under the DML provider
EXTRA = {e.split("(")[0]: [int(v) for v in e.rstrip(")").split("(")[1].split(",")]
         for e in DATA["meta"]["extra_cpu_implemented_dml_kernels"]}


def registered(op: str, since: int) -> "dict | None":
    return next((r for r in TABLE if r["domain"] == "ai.onnx" and r["op"] == op and r["since_version"] == since), None)


def model(nodes, inputs, outputs, opset=21, inits=(), functions=(), extra_opsets=()):
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset), *extra_opsets],
                        functions=list(functions), ir_version=10)


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def place(m, lacks=()):
    report = predict_placement(m, None, lacks)
    return report, {n["node"]: n for n in report["nodes"]}


# --- A. since-version: exact match only --------------------------------------------------------

SINCE_CASES = [  # (op, opset, build) ; the expected provider is read from the table
    ("EyeLike", 21), ("EyeLike", 22), ("Cast", 21), ("Cast", 23), ("Reshape", 21), ("Reshape", 23),
    ("Transpose", 21), ("Transpose", 24), ("Trilu", 14), ("Trilu", 24), ("Relu", 14), ("Round", 22),
]


def _single(op, opset):
    x = vi("x", T.FLOAT, [3, 4])
    if op == "Cast":
        node = h.make_node("Cast", ["x"], ["y"], name="n", to=T.INT32)
        return model([node], [x], [vi("y", T.INT32, [3, 4])], opset)
    if op == "Reshape":
        node = h.make_node("Reshape", ["x", "s"], ["y"], name="n")
        return model([node], [x, vi("s", T.INT64, [2])], [vi("y", T.FLOAT, None)], opset)
    if op == "Trilu":
        return model([h.make_node("Trilu", ["x"], ["y"], name="n")], [x], [vi("y", T.FLOAT, [3, 4])], opset)
    return model([h.make_node(op, ["x"], ["y"], name="n")], [x], [vi("y", T.FLOAT, None)], opset)


@pytest.mark.parametrize("op,opset", SINCE_CASES)
def test_since_version_must_match_a_registered_row(op, opset):
    report, nodes = place(_single(op, opset))
    since = onnx.defs.get_schema(op, opset).since_version
    expected = DML if registered(op, since) else CPU
    assert nodes["n"]["since_version"] == since
    assert nodes["n"]["provider"] == expected, nodes["n"]
    if expected == CPU:
        assert f"since-version {since}" in nodes["n"]["reason"]


# --- A. types: the first present argument of each constraint ----------------------------------

TYPE_CASES = [  # (op, input type, extra inputs) -> expected from the table's type list
    ("NonZero", T.FLOAT), ("NonZero", T.INT64), ("NonZero", T.UINT8), ("NonZero", T.BOOL),
    ("Equal", T.BOOL), ("Equal", T.INT64), ("Equal", T.DOUBLE), ("Less", T.DOUBLE), ("Less", T.INT32),
    ("Not", T.BOOL), ("Neg", T.INT64), ("Abs", T.UINT8),
]
_NAMES = {T.FLOAT: "float", T.INT64: "int64", T.UINT8: "uint8", T.BOOL: "bool", T.DOUBLE: "double",
          T.INT32: "int32"}


@pytest.mark.parametrize("op,elem", TYPE_CASES)
def test_types_are_checked_against_the_registered_list(op, elem):
    binary = op in ("Equal", "Less")
    inputs = [vi("a", elem, [5])] + ([vi("b", elem, [5])] if binary else [])
    out_type = T.INT64 if op == "NonZero" else T.BOOL if binary or op == "Not" else elem
    node = h.make_node(op, [i.name for i in inputs], ["y"], name="n")
    report, nodes = place(model([node], inputs, [vi("y", out_type, None)], 21))
    row = registered(op, onnx.defs.get_schema(op, 21).since_version)
    first = next(iter(row["type_constraints"].values()))
    assert (nodes["n"]["provider"] == DML) == (_NAMES[elem] in first), nodes["n"]
    if nodes["n"]["provider"] != DML:
        assert f"lacks {_NAMES[elem]}" in nodes["n"]["reason"] and "'a'" in nodes["n"]["reason"]


def test_a_node_no_provider_has_a_kernel_for_is_said():
    # NonZero over double: DML registers no double, the CPU EP's NonZero has no double either.
    node = h.make_node("NonZero", ["x"], ["y"], name="n")
    report, nodes = place(model([node], [vi("x", T.DOUBLE, [4])], [vi("y", T.INT64, None)]))
    assert nodes["n"]["provider"] == NONE
    assert "CPU EP" in nodes["n"]["reason"] and "cannot create the session" in nodes["n"]["reason"]
    assert "n (NonZero): no provider has a kernel for it; onnxruntime cannot create the session (a DML session says " \
           "the node's provider type is not set)" in report["warnings"]


def test_an_op_the_dml_ep_never_registered_goes_to_the_cpu():
    node = h.make_node("NonMaxSuppression", ["b", "s"], ["y"], name="nms")
    report, nodes = place(model([node], [vi("b", T.FLOAT, [1, 4, 4]), vi("s", T.FLOAT, [1, 1, 4])],
                                [vi("y", T.INT64, None)]))
    assert nodes["nms"]["provider"] == CPU and "registers no NonMaxSuppression" in nodes["nms"]["reason"]


# --- B. the CPU preference through shape sub-graphs -------------------------------------------

def _shape_chain():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape(z, shape); Gather -> Cast(float) ->
    Add(Relu(x), that); dynamic dims so level 1 cannot fold the Shape (and z is not x, so
    level 1's Reshape fusion cannot replace the shape by a constant)."""
    x = vi("x", T.FLOAT, ["a", "b"])
    z = vi("z", T.FLOAT, ["c"])
    i0 = h.make_tensor("i0", T.INT64, [], [0])
    ax = h.make_tensor("ax", T.INT64, [1], [0])
    minus1 = h.make_tensor("m1", T.INT64, [1], [-1])
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("Gather", ["s", "i0"], ["g"], name="gather", axis=0),
             h.make_node("Unsqueeze", ["g", "ax"], ["u"], name="unsqueeze"),
             h.make_node("Concat", ["u", "m1"], ["c"], name="concat", axis=0),
             h.make_node("Reshape", ["z", "c"], ["r"], name="reshape"),
             h.make_node("Cast", ["g"], ["gf"], name="cast", to=T.FLOAT),
             h.make_node("Relu", ["x"], ["rx"], name="relu"),
             h.make_node("Add", ["rx", "gf"], ["y"], name="add")]
    return model(nodes, [x, z], [vi("r", T.FLOAT, ["p", "q"]), vi("y", T.FLOAT, ["a", "b"])], 21, [i0, ax, minus1])


def test_shape_arithmetic_goes_to_the_cpu_and_the_cpu_input_consumer_stays():
    report, nodes = place(_shape_chain())
    providers = {name: n["provider"] for name, n in nodes.items()}
    assert providers == {"shape": DML, "gather": CPU, "unsqueeze": CPU, "concat": CPU, "reshape": DML,
                         "cast": CPU, "relu": DML, "add": DML}
    assert "CPU preference" in nodes["gather"]["reason"] and "'s' from shape" in nodes["gather"]["reason"]
    # Reshape reads the shape as its declared CPU input: no copy; Add reads the cast on the GPU.
    assert report["copies"] == [{"copy": "MemcpyFromHost", "value": "gf", "from": "cast", "to": ["add"]}]


def test_half_precision_inputs_keep_a_node_off_the_cpu_preference():
    x = vi("x", T.FLOAT, ["a"])
    half = h.make_tensor("h", T.FLOAT16, [1], [2.0])
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("Cast", ["s"], ["sh"], name="cast", to=T.FLOAT16),
             h.make_node("Mul", ["sh", "h"], ["y"], name="mul")]
    report, nodes_ = place(model(nodes, [x], [vi("y", T.FLOAT16, None)], 21, [half]))
    assert nodes_["cast"]["provider"] == CPU and nodes_["mul"]["provider"] == DML
    assert [c["value"] for c in report["copies"]] == ["sh"]


def test_a_large_initializer_keeps_the_consumer_on_dml():
    x = vi("x", T.FLOAT, ["a"])
    big = h.make_tensor("big", T.INT64, [101], list(range(101)))
    small = h.make_tensor("small", T.INT64, [100], list(range(100)))
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("Add", ["s", "big"], ["y1"], name="add_big"),
             h.make_node("Add", ["s", "small"], ["y2"], name="add_small")]
    _, nodes_ = place(model(nodes, [x], [vi("y1", T.INT64, None), vi("y2", T.INT64, None)], 21, [big, small]))
    assert nodes_["add_big"]["provider"] == DML and nodes_["add_small"]["provider"] == CPU


# --- C. support queries and the device's data types -------------------------------------------

@pytest.mark.parametrize("reduction,expected", [("none", DML), ("add", CPU)])
def test_support_query_scatter(reduction, expected):
    node = h.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="n", reduction=reduction)
    m = model([node], [vi("x", T.FLOAT, [4]), vi("i", T.INT64, [2]), vi("u", T.FLOAT, [2])],
              [vi("y", T.FLOAT, [4])], 16)
    _, nodes = place(m)
    assert nodes["n"]["provider"] == expected
    if expected == CPU:
        assert "QueryScatter" in nodes["n"]["reason"] and "'add'" in nodes["n"]["reason"]


@pytest.mark.parametrize("lacks,expected", [((), DML), (("int64",), CPU)])
def test_device_types_are_an_assumption_the_user_sets(lacks, expected):
    node = h.make_node("Add", ["a", "b"], ["y"], name="n")
    m = model([node], [vi("a", T.INT64, [3]), vi("b", T.INT64, [3])], [vi("y", T.INT64, [3])])
    report, nodes = place(m, lacks)
    assert nodes["n"]["provider"] == expected
    assert report["assumptions"]["device_types"]["int64"] is (not lacks)
    if lacks:
        assert "the device lacks int64" in nodes["n"]["reason"]


def test_trilu_rank_five_is_placed_on_dml_and_warned():
    node = h.make_node("Trilu", ["x"], ["y"], name="n")
    report, nodes = place(model([node], [vi("x", T.FLOAT, [1, 1, 1, 2, 2])], [vi("y", T.FLOAT, [1, 1, 1, 2, 2])]))
    assert nodes["n"]["provider"] == DML
    assert any("rank 5" in w and "kernel creation" in w for w in report["warnings"])


# --- level 1, functions, bodies, copies ------------------------------------------------------

def test_level1_removes_identity_and_constants_and_folds_constant_subgraphs():
    nodes = [h.make_node("Constant", [], ["c"], name="const", value=h.make_tensor("v", T.FLOAT, [2, 2], [1] * 4)),
             h.make_node("EyeLike", ["c"], ["e"], name="eye"),
             h.make_node("Identity", ["x"], ["xi"], name="ident"),
             h.make_node("Add", ["xi", "e"], ["y"], name="add")]
    _, placed = place(model(nodes, [vi("x", T.FLOAT, [2, 2])], [vi("y", T.FLOAT, [2, 2])]))
    assert placed["const"]["provider"] == REMOVED and "initializer at load" in placed["const"]["reason"]
    assert placed["ident"]["provider"] == REMOVED and "Identity" in placed["ident"]["reason"]
    assert placed["eye"]["provider"] == REMOVED and "constant-folded" in placed["eye"]["reason"]
    assert placed["add"]["provider"] == DML


def test_function_calls_are_inlined_and_their_nodes_placed():
    f = h.make_function("local", "F", ["a"], ["b"], [h.make_node("NonZero", ["a"], ["b"], name="inner")],
                        [h.make_opsetid("", 21)])
    call = h.make_node("F", ["x"], ["y"], domain="local", name="call")
    m = model([call], [vi("x", T.INT64, [4])], [vi("y", T.INT64, None)], 21, functions=[f],
              extra_opsets=[h.make_opsetid("local", 1)])
    _, placed = place(m)
    assert placed["call"]["provider"] == REMOVED and "inlines" in placed["call"]["reason"]
    inlined = [n for name, n in placed.items() if "inner" in name and name != "call"]
    assert len(inlined) == 1 and inlined[0]["provider"] == CPU and "lacks int64" in inlined[0]["reason"]


@pytest.mark.parametrize("opset", [19, 21])
def test_body_nodes_are_placed_with_their_path(opset):
    then = h.make_graph([h.make_node("NonZero", ["x"], ["t"], name="nz")], "then", [], [vi("t", T.INT64, None)])
    other = h.make_graph([h.make_node("NonZero", ["xb"], ["e"], name="nzb")], "else", [], [vi("e", T.INT64, None)])
    node = h.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)
    m = model([h.make_node("Not", ["c0"], ["xb"], name="not"), h.make_node("Cast", ["c0"], ["c"], name="cast", to=T.BOOL),
               node], [vi("x", T.INT64, [4]), vi("c0", T.BOOL, [])], [vi("y", T.INT64, None)], opset)
    m.graph.input[1].type.tensor_type.shape.Clear()
    _, placed = place(m)
    assert placed["if/then_branch/nz"]["provider"] == CPU     # int64 input
    assert placed["if/else_branch/nzb"]["provider"] == DML    # bool input
    # DML registers If (a CPU implementation under the DML provider) up to since-version 19 only
    since = onnx.defs.get_schema("If", opset).since_version
    assert placed["if"]["provider"] == (DML if since in EXTRA["If"] else CPU)


def test_a_cpu_nonzero_between_dml_nodes_costs_two_copies():
    nodes = [h.make_node("Neg", ["x"], ["r"], name="neg"),
             h.make_node("NonZero", ["r"], ["nz"], name="nonzero"),
             h.make_node("Transpose", ["nz"], ["y"], name="transpose")]
    report, placed = place(model(nodes, [vi("x", T.INT64, [3, 4])], [vi("y", T.INT64, None)]))
    assert [placed[n]["provider"] for n in ("neg", "nonzero", "transpose")] == [DML, CPU, DML]
    assert report["copies"] == [
        {"copy": "MemcpyToHost", "value": "r", "from": "neg", "to": ["nonzero"]},
        {"copy": "MemcpyFromHost", "value": "nz", "from": "nonzero", "to": ["transpose"]}]


# --- the command and the real exports -------------------------------------------------------

def test_inspect_ep_dml_json_contract_and_text(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_shape_chain(), str(path))
    code, out, err = cli(["inspect", path, "--ep", "dml", "--json", tmp_path / "r.json"], capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())["ep_placement"]
    assert set(report) >= {"ep", "onnxruntime", "assumptions", "nodes", "copies"}
    assert report["ep"] == DML and report["onnxruntime"] == "1.27.0"
    for n in report["nodes"]:
        assert set(n) == {"node", "op_type", "domain", "since_version", "provider", "reason"}
    assert "gather (Gather-13): shape sub-graph" in out and "MemcpyFromHost of 'gf': cast -> add" in out


def test_inspect_without_ep_has_no_placement(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_shape_chain(), str(path))
    code, out, _ = cli(["inspect", path, "--json", tmp_path / "r.json"], capsys)
    assert code == 0 and "ep_placement" not in json.loads((tmp_path / "r.json").read_text())
    assert "DML EP placement" not in out


def test_device_lacks_needs_ep_dml(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_shape_chain(), str(path))
    code, _, err = cli(["inspect", path, "--device-lacks", "int64"], capsys)
    assert code == 2 and err == "dml-lower: error: --device-lacks is an assumption of the DML EP placement: add --ep dml\n"


def test_bad_device_type_is_one_line(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_shape_chain(), str(path))
    with pytest.raises(SystemExit) as exc:
        cli(["inspect", path, "--ep", "dml", "--device-lacks", "int8"], capsys)
    assert exc.value.code == 2


@pytest.mark.parametrize("name", sorted(p.name for p in REAL.glob("*.onnx")))
def test_real_exports_every_node_placed_once_and_explained(name):
    raw = onnx.load(str(REAL / name), load_external_data=False)
    report = predict_placement(raw, str(REAL), ())
    ids = onnx.ModelProto()
    ids.CopyFrom(raw)
    identify_nodes(ids)

    def paths(graph, prefix=""):
        for node in graph.node:
            yield prefix + node.name
            for attr in node.attribute:
                for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs):
                    yield from paths(sub, f"{prefix}{node.name}/{attr.name}/")
    original = list(paths(ids.graph))
    listed = [n["node"] for n in report["nodes"]]
    assert listed[:len(original)] == original            # every node of the file, in order, once
    assert len(set(listed)) == len(listed)
    for n in report["nodes"]:
        assert n["provider"] in (DML, CPU, REMOVED)       # these exports all run on onnxruntime
        own = n["reason"].split("; ", 1)[-1] if n["reason"].startswith(("created", "inlined")) else n["reason"]
        if n["node"] not in original and ";" not in n["reason"]:
            own = ""                                     # a new node on DML: only where it came from
        assert (n["provider"] == DML) == (own == ""), n
    # NonZero / EyeLike / Trilu are each placed with a reason when not on DML
    for n in report["nodes"]:
        if n["op_type"] == "NonZero" and n["provider"] == CPU:
            assert "lacks" in n["reason"] or "shape sub-graph" in n["reason"]


def test_readme_example_is_real_output(capsys, monkeypatch):
    readme = paths.README
    monkeypatch.chdir(readme.parent)
    block = readme.read_text().split("$ dml-lower inspect tests/models/eye_square.torchscript.onnx --ep dml\n", 1)[1]
    shown = block.split("```", 1)[0]
    code, out, _ = cli(["inspect", "tests/models/eye_square.torchscript.onnx", "--ep", "dml"], capsys)
    assert code == 0
    assert out == shown


def test_a_loaded_model_with_weights_left_in_its_file_is_predicted_as_the_file(tmp_path):
    """load_model leaves a weight of 1 MiB or more in the file (a lazy initializer); the prediction
    on that proto (optimize --for dml's) is the one on the file as stored (inspect's). It ran on no
    graph at all when the proto reached onnxruntime's level-1 session serialised as it was (every
    node 'no provider', GPT-2's copies 949 where inspect said 1)."""
    import numpy as np
    from onnx import numpy_helper

    from onnx_dml_lowering.compiler.frontend import load_model
    from onnx_dml_lowering.runtime.weights import is_lazy
    weight = numpy_helper.from_array(np.ones((512, 512), np.float32), "w")       # 1 MiB: left in the file
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             h.make_node("Cast", ["m"], ["b"], name="to_bool", to=T.BOOL),
             h.make_node("NonZero", ["b"], ["y"], name="nonzero")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4, 512])],
                         [h.make_tensor_value_info("y", T.INT64, [2, None])], [weight])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8), str(path))
    loaded = load_model(str(path))
    assert any(map(is_lazy, loaded.graph.initializer))
    stored = predict_placement(onnx.load(str(path), load_external_data=False), str(tmp_path))
    predicted = predict_placement(loaded, str(tmp_path))
    assert [(n["node"], n["provider"]) for n in predicted["nodes"]] == [(n["node"], n["provider"]) for n in stored["nodes"]]
    assert predicted["copies"] == stored["copies"] and predicted["warnings"] == stored["warnings"]
    assert {n["provider"] for n in predicted["nodes"]} != {NONE}


def test_relu_on_dml_is_warned_for_nan_once_naming_its_nodes():
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu_a"), h.make_node("Relu", ["a"], ["y"], name="relu_b")]
    report, placed = place(model(nodes, [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])], opset=14))
    assert placed["relu_a"]["provider"] == placed["relu_b"]["provider"] == DML
    warned = [w for w in report["warnings"] if "(Relu)" in w]
    assert len(warned) == 1 and warned[0].startswith("relu_a, relu_b (Relu)") and "0 for NaN" in warned[0]
    report, _ = place(model([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", T.INT32, [2])],
                            [vi("y", T.INT32, [2])], opset=14))
    assert not [w for w in report["warnings"] if "(Relu)" in w]       # no NaN in an integer


@pytest.mark.parametrize("elem", [T.FLOAT, T.INT64])
def test_a_node_reading_a_scalar_nonzero_is_warned_as_failing(elem):
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             h.make_node("Transpose", ["nz"], ["y"], name="transpose", perm=[1, 0])]
    report, placed = place(model(nodes, [vi("x", elem, [])], [vi("y", T.INT64, [None, None])], opset=13))
    assert placed["transpose"]["provider"] == DML
    warned = [w for w in report["warnings"] if w.startswith("transpose (Transpose)")]
    assert len(warned) == 1 and "reading a scalar NonZero's result fails at the run" in warned[0]
    report, _ = place(model(nodes, [vi("x", elem, [3])], [vi("y", T.INT64, [None, None])], opset=13))
    assert not [w for w in report["warnings"] if "NonZero's result" in w]
