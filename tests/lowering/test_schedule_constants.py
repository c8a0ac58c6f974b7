"""grouped_order's lazy items: a Constant node goes right before its first user when all its users
run on its engine, so exporters' Constants up front do not all sit in the first region and cross
every region boundary; the order stays topological, and an item is never lost or repeated."""
from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import OnnxRegion
from onnx_dml_lowering.lowering.schedule import engine_runs, grouped_order

REAL = Path(__file__).resolve().parents[1] / "models" / "real"


@st.composite
def graphs(draw):
    """Items 0..n-1 with deps on earlier items; any may be marked lazy."""
    n = draw(st.integers(1, 14))
    labels = [draw(st.sampled_from("ab")) for _ in range(n)]
    deps = [sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=3)))) if i else [] for i in range(n)]
    lazy = [draw(st.booleans()) for _ in range(n)]       # an item with dependencies is never held
    return labels, deps, lazy


@settings(max_examples=300, deadline=None, derandomize=True)
@given(graphs())
def test_the_order_is_topological_and_a_held_item_runs_with_its_first_user(graph):
    labels, deps, lazy = graph
    n = len(labels)
    order = grouped_order(labels, deps, list(range(n)), lazy)
    assert sorted(order) == list(range(n))
    where = {item: pos for pos, item in enumerate(order)}
    assert all(where[d] < where[i] for i in range(n) for d in deps[i])
    users = {i: [u for u in range(n) if i in deps[u]] for i in range(n)}
    for item in range(n):
        if lazy[item] and not deps[item] and users[item] and all(labels[u] == labels[item] for u in users[item]):
            first = min(users[item], key=where.get)
            between = order[where[item]:where[first]]
            # Only other held items (the first user's lazy dependencies) stand between them.
            assert all(lazy[i] and not deps[i] and labels[i] == labels[item] for i in between)


def test_lazy_items_move_to_their_first_user_and_nothing_else_moves():
    # 0 and 2 are dependency-free "a" items; 1 is "b" and reads 0; 3 ("a") reads 1 and 2.
    labels, deps = ["a", "b", "a", "a", "a"], [[], [0], [], [1, 2], [3]]
    eager = [0, 2, 1, 3, 4]
    assert grouped_order(labels, deps, list(range(5))) == eager
    assert grouped_order(labels, deps, list(range(5)), [False] * 5) == eager
    # 2 held: it goes right before 3, so the first "a" run is 0 alone. 0 is not held: its user is a "b".
    assert grouped_order(labels, deps, list(range(5)), [True, False, True, False, False]) == [0, 1, 2, 3, 4]
    assert grouped_order(["a", "a"], [[1], [0]], [0, 1], [True, True]) is None     # a cycle


def constants_model():
    """Constants up front (TorchScript's habit), an ONNX chain, a reference-only node, more chain."""
    nodes = [h.make_node("Constant", [], [f"c{i}"], name=f"c{i}", value=h.make_tensor(f"v{i}", T.FLOAT, [], [i + 1.0]))
             for i in range(4)]
    nodes += [h.make_node("Add", ["x", "c0"], ["a0"], name="a0"),
              h.make_node("Mul", ["a0", "c1"], ["a1"], name="a1"),
              h.make_node("NonZero", ["a1"], ["nz"], name="nz"),
              h.make_node("Cast", ["nz"], ["f"], name="cast", to=T.FLOAT),
              h.make_node("Add", ["f", "c2"], ["a2"], name="a2"),
              h.make_node("Mul", ["a2", "c3"], ["y"], name="a3")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [3])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, None])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


def test_engine_runs_put_each_constant_in_its_users_run():
    model = constants_model()
    runs = engine_runs(list(model.graph.node), lambda n: "ref" if n.op_type == "NonZero" else "ort")
    assert [(engine, [n.name for n in nodes]) for engine, nodes in runs] == [
        ("ort", ["c0", "a0", "c1", "a1"]), ("ref", ["nz"]), ("ort", ["cast", "c2", "a2", "c3", "a3"])]


def test_a_lowered_model_feeds_no_constant_across_a_region_boundary():
    compiled = compile_model(constants_model())
    regions = [s for s in compiled.partition.graph.steps if isinstance(s, OnnxRegion)]
    assert len(regions) == 2
    assert not any(name.startswith("c") for r in regions for name in list(r.inputs) + list(r.outputs))


def test_the_torchscript_mixtral_hands_over_only_constants_several_places_read():
    """A Constant crosses a region boundary only when a lowered step or more than one region reads it."""
    compiled = compile_model(str(REAL / "mixtral.torchscript.onnx"))
    constants = {n.output[0] for n in compiled.model.graph.node if n.op_type == "Constant"}
    regions = [s for s in compiled.partition.graph.steps if isinstance(s, OnnxRegion)]
    region_of = {node: r.name for r in regions for node in r.onnx_nodes}
    places: "dict[str, set[str]]" = {}
    for node in compiled.model.graph.node:
        for name in node.input:
            places.setdefault(name, set()).add(region_of.get(node.name, "lowered"))
    crossing = [name for r in regions for name in r.outputs if name in constants]
    assert all(len(places[name]) >= 2 or "lowered" in places[name] for name in crossing)
    assert len(crossing) <= 40          # the first region handed 277 Constant values on before
