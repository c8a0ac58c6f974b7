"""Names that differ stay distinct after sanitising: nodes `nz.1`, `nz_1`, `nz-1` in one model."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import parse_level
from onnx_dml_lowering.lowering import idioms_for
from onnx_dml_lowering.lowering.node import NodeInfo, TensorInfo, sanitise, unique_names
from onnx_dml_lowering.runtime.check import Tolerances, check

SPELLINGS = ("nz.1", "nz_1", "nz-1")


def test_unique_names_keeps_clean_names_and_suffixes_collisions():
    got = unique_names([(n, n) for n in SPELLINGS])
    assert got == {"nz.1": "nz_1_2", "nz_1": "nz_1", "nz-1": "nz_1_3"}
    # A clean name that a suffix would produce is reserved before any suffix is chosen.
    got = unique_names([("a", "x.y"), ("b", "x_y"), ("c", "x_y_2")])
    assert got == {"a": "x_y_3", "b": "x_y", "c": "x_y_2"}
    # Two keys wanting the same clean name: the first keeps it.
    assert unique_names([(1, "w"), (2, "w"), (3, "")]) == {1: "w", 2: "w_2", 3: "node"}
    assert sanitise("a.b-c d") == "a_b_c_d"


def test_a_fragment_names_its_buffers_with_the_assigned_prefix():
    """The registry gives a rule's Fragment the node's assigned prefix, else its sanitised name."""
    (rule,) = [i for i in idioms_for("NonZero") if i.name == "nonzero"]
    level = parse_level("5_1")
    x, y = TensorInfo("x", T.FLOAT, (2, 3)), TensorInfo("y", T.INT64, None)
    for prefix, want in (("nz_1_2", "nz_1_2."), ("", "nz_1.")):
        node = NodeInfo("nz.1", "NonZero", 13, (x,), (y,), {}, prefix)
        graph = rule.match(node, None, level).build({"x": (2, 3)}, {}, level)
        assert graph.buffers and all(name.startswith(want) for name in graph.buffers), list(graph.buffers)


def colliding_model():
    nodes, outputs = [], []
    for i, name in enumerate(SPELLINGS):
        nodes.append(h.make_node("NonZero", ["x"], [f"nz_out{i}"], name=name))
        outputs.append(h.make_tensor_value_info(f"nz_out{i}", T.INT64, [2, None]))
        eye = name.replace("nz", "eye")
        nodes.append(h.make_node("EyeLike", ["m"], [f"eye_out{i}"], name=eye, k=i - 1))
        outputs.append(h.make_tensor_value_info(f"eye_out{i}", T.FLOAT, [3, 4]))
    # Two identity initializers whose names sanitise alike: both generated, not stored.
    inits = []
    for i, name in enumerate(("w.1", "w_1")):
        inits.append(h.make_tensor(name, T.FLOAT, [4, 4], (np.eye(4, dtype=np.float32) * (i + 2)).reshape(-1)))
        nodes.append(h.make_node("MatMul", ["m", name], [f"mm_out{i}"], name=f"mm{i}"))
        outputs.append(h.make_tensor_value_info(f"mm_out{i}", T.FLOAT, [3, 4]))
    graph = h.make_graph(nodes, "colliding_names",
                         [h.make_tensor_value_info("x", T.FLOAT, [3, 5]),
                          h.make_tensor_value_info("m", T.FLOAT, [3, 4])], outputs, inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


def test_nodes_whose_names_sanitise_alike_compile_and_match(rng):
    compiled = compile_model(colliding_model())
    lowered = {n for p in compiled.placement if p.status == "lowered" for n in p.onnx_nodes}
    assert lowered >= set(SPELLINGS) | {s.replace("nz", "eye") for s in SPELLINGS}
    assert compiled.partition.generated == {"w.1", "w_1"}
    buffers = set(compiled.graph.buffers)
    assert {"nz_1.in", "nz_1_2.in", "nz_1_3.in"} <= buffers
    feeds = {"x": (rng.random((3, 5)) < 0.5).astype(np.float32), "m": rng.random((3, 4)).astype(np.float32)}
    _, report = check(compiled, feeds, ["cpu"], Tolerances(atol=0.0, rtol=0.0))
    assert report.ok, [(o.name, o.status, o.detail) for b in report.backends for o in b.outputs]
    assert len([o for b in report.backends for o in b.outputs if o.status == "match"]) == 8


_NAME_PARTS = st.sampled_from(["nz", "nz.1", "nz_1", "nz-1", "nz_1_2", "init_w", "a b", "x", "x_2", "é"])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(_NAME_PARTS, min_size=1, max_size=6, unique=True))
def test_graph_view_prefixes_equal_the_whole_table(names):
    """OnnxGraphView.info gives a clean node name itself without building the table; every
    prefix it gives equals the table over all nodes and constants."""
    from onnx_dml_lowering.compiler.graph_view import OnnxGraphView
    nodes, prev = [], "x_in"
    for i, name in enumerate(names):
        nodes.append(h.make_node("NonZero" if i % 2 == 0 else "Cast", [prev], [f"v{i}"], name=name,
                                 **({} if i % 2 == 0 else {"to": T.FLOAT})))
        prev = f"v{i}"
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x_in", T.FLOAT, [2, 2])], [],
                         [h.make_tensor("w", T.FLOAT, [1], [1.0])])
    graph.output.append(h.make_tensor_value_info(prev, T.FLOAT if len(names) % 2 == 0 else T.INT64, None))
    view = OnnxGraphView(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), {})
    table = unique_names([(("node", n), n) for n in names] + [(("value", "w"), "init_w")])
    assert {n: view.info(n).prefix for n in names} == {n: table[("node", n)] for n in names}
