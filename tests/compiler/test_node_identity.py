"""Node names are not identities: repeated, empty, non-UTF-8 and look-alike names, in the main graph
and in If branches / Loop bodies, give exactly onnx.reference's values on every backend and in check,
and reports show one distinct identity per node (compiler/node_ids.py)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.node_ids import all_nodes, identify_nodes
from onnx_dml_lowering.compiler.optimize import bit_identical, optimize_model
from onnx_dml_lowering.runtime.check import BackendOptions, Tolerances, check
from tests.builders import graph_model
from tests.oracle import assert_outputs_same, reference

FLOAT2 = [None, None]


def _topology() -> onnx.ModelProto:
    """14 nodes: two NonZero chains in the main graph, an If whose branches hold EyeLike, a Loop
    whose body holds EyeLike reading x from the outer scope. Every node is named uniquely by a
    placeholder (Q + letters) that the tests replace."""
    def node(*args, **kwargs):
        return h.make_node(*args, **kwargs)
    then = h.make_graph([node("EyeLike", ["x"], ["t"])], "then", [], [h.make_tensor_value_info("t", T.FLOAT, FLOAT2)])
    other = h.make_graph([node("Relu", ["x"], ["e1"]), node("EyeLike", ["e1"], ["e"], k=1)], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT, FLOAT2)])
    body = h.make_graph([node("Identity", ["c_in"], ["c_out"]), node("EyeLike", ["x"], ["ey"], k=-1),
                         node("Add", ["v_in", "ey"], ["v_out"])], "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
                         h.make_tensor_value_info("v_in", T.FLOAT, FLOAT2)],
                        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("v_out", T.FLOAT, FLOAT2)])
    nodes = [node("Relu", ["x"], ["a"]), node("NonZero", ["a"], ["nz"]), node("Transpose", ["nz"], ["nzt"], perm=[1, 0]),
             node("Neg", ["x"], ["b"]), node("NonZero", ["b"], ["nb"]), node("Cast", ["nb"], ["nbf"], to=T.FLOAT),
             node("If", ["c"], ["iy"], then_branch=then, else_branch=other),
             node("Loop", ["trips", "go", "v0"], ["lv"], body=body)]
    model = graph_model(nodes, [("x", T.FLOAT, ["r", "k"]), ("c", T.BOOL, [])],
                        [("nz", T.INT64, [2, None]), ("nzt", T.INT64, [None, 2]), ("nbf", T.FLOAT, [2, None]),
                         ("iy", T.FLOAT, FLOAT2), ("lv", T.FLOAT, FLOAT2)],
                        {"trips": np.array(2, np.int64), "go": np.array(True), "v0": np.zeros((3, 4), np.float32)})
    for index, (_, n) in enumerate(all_nodes(model)):
        n.name = _placeholder(index, 3)
    return model


NODES = 14


def _placeholder(index: int, length: int) -> str:
    letters = "".join("QWERTYUIOPASDFGHJKLZXCVBNM"[(index // 26 ** p) % 26] for p in range(2))
    return ("Q" + letters + "QQQQQQQQQQ")[:length] if length >= 3 else letters[:length]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def named(names: "list[str | bytes]") -> "tuple[onnx.ModelProto, bytes]":
    """(the topology with unique names, its serialisation with node i named names[i]). Names are
    swapped on the wire, where protobuf cannot refuse bytes that are not UTF-8: every placeholder
    has the length of the name it stands for, so no enclosing length changes."""
    model = _topology()
    raw = [n.encode() if isinstance(n, str) else n for n in names]
    assert len(raw) == NODES
    for index, (_, node) in enumerate(all_nodes(model)):
        node.name = _placeholder(index, max(len(raw[index]), 1)) if raw[index] else ""
    # one-byte and two-byte names need short placeholders that stay unique: fall back to 3 bytes
    data = model.SerializeToString()
    for index, (_, node) in enumerate(all_nodes(model)):
        if not raw[index]:
            continue
        field = b"\x1a" + _varint(len(raw[index])) + node.name.encode()
        assert data.count(field) == 1, (index, node.name, raw[index])
        data = data.replace(field, b"\x1a" + _varint(len(raw[index])) + raw[index])
    return model, data


POOL = ["n", "n", "", "n.1", "n_1", "n-1", "n#1", "NonZero_1", "Relu_0", "Ab", b"\xff", b"n\xfe\xfe", "If", "x"]


def feeds_for(seed: int, cond: bool) -> dict:
    rng = np.random.default_rng(seed)
    x = (rng.integers(-3, 4, (3, 4)) * (rng.random((3, 4)) < 0.6)).astype(np.float32)
    return {"x": x, "c": np.array(cond)}


def assert_exact(names: "list[str | bytes]", seed: int = 0, cond: bool = True) -> None:
    unique_model, data = named(names)
    feeds = feeds_for(seed, cond)
    expected = reference(unique_model, feeds)
    compiled = compile_model(data)
    assert_outputs_same(compiled.run(feeds), expected)
    assert_outputs_same(compiled.run(feeds, backend="ort", providers=["cpu"]), expected)
    # ort-cpu on our copy, whose nodes have their identities (onnxruntime refuses a file with two
    # nodes of one name: the file as shipped is checked below)
    _, report = check(compiled, feeds, ["cpu", "ort", "ort-cpu"], Tolerances(),
                      BackendOptions(provider_model="modified"))
    assert report.ok, [(o.backend, o.output, o.status, o.detail) for b in report.backends for o in b.outputs]
    assert {o.status for b in report.backends for o in b.outputs} == {"match"}
    _, shipped = check(compiled, feeds, ["ort-cpu"], Tolerances())
    try:
        ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception as exc:          # the file as shipped: onnxruntime's own refusal, as the backend's ERROR
        # (its message quotes a name that is not UTF-8 as bytes Python cannot decode: shown escaped)
        message = exc.object.decode("utf-8", "backslashreplace") if isinstance(exc, UnicodeDecodeError) else str(exc)
        assert message.splitlines()[0] in shipped.backends[0].error
    else:
        assert shipped.backends[0].status == "ok"
    # one distinct identity per node, every NonZero / EyeLike placed exactly once
    ids = [n.name for _, n in all_nodes(compiled.model)]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids)
    placed = [p.onnx_nodes for p in compiled.placement]
    assert len(placed) == 5, placed
    assert len({tuple(p) for p in placed}) == 5


CASES = {
    "every node named n": ["n"] * NODES,
    "every node unnamed": [""] * NODES,
    "every node the same non-UTF-8 bytes": [b"\xff\xfe"] * NODES,
    "names that sanitise alike": ["n.1", "n_1", "n-1", "n 1", "n/1", "n:1", "n.1", "n_1", "n-1", "n 1", "n/1",
                                  "n:1", "n.1", "n_1"],
    "names equal to generated ids": ["NonZero_1", "", "Relu_0", "", "n#1", "n", "n", "n#2", "EyeLike_0", "",
                                     "Relu_0", "", "EyeLike_1", ""],
    "bodies reuse the outer names": ["a", "b", "c", "d", "e", "f", "g", "h", "a", "b", "c", "d", "e", "f"],
    "outer nodes share, bodies unique": ["n", "n", "n", "n", "n", "n", "n", "n", "t1", "t2", "t3", "t4", "t5", "t6"],
}


@pytest.mark.parametrize("cond", [True, False])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_names_never_change_a_value(case: str, cond: bool) -> None:
    assert_exact(CASES[case], seed=len(case), cond=cond)


@given(names=st.lists(st.sampled_from(POOL), min_size=NODES, max_size=NODES), seed=st.integers(0, 2**16),
       cond=st.booleans())
def test_random_names_through_if_and_loop_bodies(names, seed, cond) -> None:
    assert_exact(names, seed, cond)


def test_identities_are_kept_unique_and_readable() -> None:
    model, data = named(["n", "n", "", b"\xff", b"\xff", "n#1", "u", "v", "w", "n", "", "", "", ""])
    proto = onnx.load_from_string(data)
    renamed = identify_nodes(proto)
    ids = [n.name for _, n in all_nodes(proto)]
    assert ids[:8] == ["n#2", "n#3", "Transpose_2", "\\xff#1", "\\xff#2", "n#1", "u", "v"]
    assert len(set(ids)) == NODES
    assert renamed["n#2"] == "n" and renamed["\\xff#1"] == b"\xff" and "u" not in renamed
    # a second pass changes nothing: identities are stable
    assert identify_nodes(proto) == {} and [n.name for _, n in all_nodes(proto)] == ids


def test_cli_check_and_compile_json_on_repeated_non_utf8_names(tmp_path) -> None:
    _, data = named([b"\xff"] * 7 + ["n"] * 7)
    path = tmp_path / "names.onnx"
    path.write_bytes(data)
    cli = [sys.executable, "-m", "onnx_dml_lowering.compiler"]
    done = subprocess.run(cli + ["check", str(path), "--backends", "cpu,ort,ort-cpu", "--dim", "r=3", "--dim", "k=4",
                                 "--provider-model", "modified"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "MATCH" in done.stdout
    # the file as shipped: onnxruntime refuses two nodes of one name, an ERROR naming it (exit 1)
    done = subprocess.run(cli + ["check", str(path), "--backends", "cpu,ort-cpu", "--dim", "r=3", "--dim", "k=4", "-q"],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "[ort-cpu] ERROR onnxruntime (CPUExecutionProvider) cannot load the model: " in done.stdout
    assert "two nodes with same node name" in done.stdout
    out = tmp_path / "c.json"
    done = subprocess.run(cli + ["compile", str(path), "--json", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import json
    nodes = [n for p in json.loads(out.read_text())["placement"] for n in p["onnx_nodes"]]
    assert len(nodes) == len(set(nodes)) == 5


def test_optimize_keeps_original_names_and_rewrites_the_right_nodes() -> None:
    """The torch.eye Range idiom among nodes that share its nodes' names: the generator replaces
    exactly the idiom, every other node keeps its (repeated) name, values bit-identical."""
    rows, cols = h.make_node, h.make_node
    nodes = [
        rows("Range", ["zero", "n3", "one"], ["r"], name="n"), cols("Range", ["zero", "n4", "one"], ["c"], name="n"),
        h.make_node("Unsqueeze", ["r", "ax"], ["ru"], name="n"), h.make_node("Equal", ["ru", "c"], ["eq"], name="n"),
        h.make_node("Cast", ["eq"], ["eye"], name="n", to=T.FLOAT), h.make_node("Mul", ["eye", "x"], ["y"], name="n"),
        h.make_node("Relu", ["x"], ["z"], name="n")]
    inits = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64), "n3": np.array(3, np.int64),
             "n4": np.array(4, np.int64), "ax": np.array([1], np.int64)}
    model = graph_model(nodes, [("x", T.FLOAT, [3, 4])], [("y", T.FLOAT, [3, 4]), ("z", T.FLOAT, [3, 4])], inits,
                        opset=17)
    out, rewrites, _ = optimize_model(model)
    assert rewrites, "the idiom was not rewritten"
    assert [n.op_type for n in out.graph.node if n.name == "n"] == ["Mul", "Relu"]
    assert not bit_identical(model.SerializeToString(), out.SerializeToString(), list(model.graph.input))


def test_placement_paths_name_body_nodes_by_identity() -> None:
    _, data = named(["n"] * NODES)
    compiled = compile_model(data)
    paths = [p.onnx_nodes[0] for p in compiled.placement if "/" in p.onnx_nodes[0]]
    assert len(paths) == 3 and all(p.split("/")[-1].startswith("n#") for p in paths)
    initial = numpy_helper.to_array(next(i for i in compiled.model.graph.initializer if i.name == "v0"))
    assert initial.shape == (3, 4)


def test_optimize_writes_non_utf8_names_as_identities_and_says_so() -> None:
    _, data = named([b"\xff"] * 3 + [""] * 11)
    out, _, notes = optimize_model(onnx.load_from_string(data))
    names = [n.name for _, n in all_nodes(out)]
    assert names[:3] == ["\\xff#1", "\\xff#2", "\\xff#3"]
    assert not any(n.HasField("name") for _, n in all_nodes(out)[3:])
    assert any("not UTF-8" in note and "\\xff#1" in note for note in notes)
