"""lowering/onnx_graphs.py, the one walker of an ONNX model's bodies: both attribute kinds, the
path format and order the placement and inspect rely on, hostile attributes (the loader's walk
trusts no schema, the others trust the checked schema), the nesting limit protobuf sets, and that
no other module reads a body out of an attribute itself."""
import ast
from pathlib import Path

import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.lowering.onnx_graphs import (MAX_BODY_DEPTH, all_graphs, all_nodes, any_node, body_nodes,
                                                    graph_attributes, graph_captures, is_standard, iter_graphs,
                                                    iter_nodes, iter_scoped, node_bodies, node_paths, node_reads,
                                                    prefixed_graphs, standard_opset, subgraph_reads)
from onnx_dml_lowering.runtime.weights import all_tensors

ROOT = Path(__file__).resolve().parents[2]
WALKER = ROOT / "lowering" / "onnx_graphs.py"


def body(name, nodes, inputs=(), outputs=("out",)):
    return h.make_graph(nodes, name, [h.make_tensor_value_info(i, T.FLOAT, [1]) for i in inputs],
                        [h.make_tensor_value_info(o, T.FLOAT, [1]) for o in outputs])


def graph_attribute(name, graph, declared=onnx.AttributeProto.GRAPH):
    """An attribute holding `graph` in its g field, whatever type it declares."""
    attr = onnx.AttributeProto(name=name, type=declared)
    attr.g.CopyFrom(graph)
    return attr


def names(graphs):
    return [g.name for g in graphs]


def test_both_attribute_kinds_in_attribute_order_and_only_graph_ones_have_paths():
    one, two, three = (body(n, [h.make_node("Relu", ["v"], ["out"], name=f"{n}_relu")]) for n in ("g1", "g2", "g3"))
    custom = h.make_node("Fused", ["x"], ["y"], name="f", domain="com.example", k=2)
    custom.attribute.append(h.make_attribute("branches", [one, two]))     # GRAPHS
    custom.attribute.append(graph_attribute("then", three))               # GRAPH
    assert custom.attribute[1].type == onnx.AttributeProto.GRAPHS
    assert names(node_bodies(custom)) == ["g1", "g2", "g3"]
    assert [(a, g.name) for a, g in graph_attributes(custom)] == [("then", "g3")]
    main = h.make_graph([custom], "main", [], [])
    assert [p for p, _ in node_paths(main)] == ["f", "f/then/g3_relu"]
    model = h.make_model(main)
    assert [n.name for _, n in all_nodes(model)] == ["f", "g1_relu", "g2_relu", "g3_relu"]
    assert names(all_graphs(model)) == ["main", "g1", "g2", "g3"]


def nested_model():
    """Loop `loop` whose body holds If `if` (then: Relu `t`, else: Neg `e`) and Abs `a`; then Sigmoid
    `s` in the main graph; a model-local function with one node."""
    branch_then = body("then", [h.make_node("Relu", ["outer"], ["out"], name="t")])
    branch_else = body("else", [h.make_node("Neg", ["deep"], ["out"], name="e")])
    loop_body = body("loop_body", [h.make_node("If", ["cond"], ["r"], name="if", then_branch=branch_then,
                                               else_branch=branch_else),
                                   h.make_node("Abs", ["r"], ["a_out"], name="a")],
                     inputs=("i", "cond"), outputs=("cond", "a_out"))
    main = h.make_graph([h.make_node("Loop", ["m", "c"], ["y"], name="loop", body=loop_body),
                         h.make_node("Sigmoid", ["y"], ["z"], name="s")], "main", [], [])
    function = h.make_function("local", "F", ["p"], ["q"], [h.make_node("Exp", ["p"], ["q"], name="fexp")],
                               [h.make_opsetid("", 17)])
    return h.make_model(main, functions=[function])


def test_paths_and_order_at_any_depth():
    """A node, then its bodies' nodes in attribute order (onnx.helper sorts keyword attributes:
    else_branch before then_branch), then the next node; functions last."""
    model = nested_model()
    assert [p for p, _ in node_paths(model.graph)] == [
        "loop", "loop/body/if", "loop/body/if/else_branch/e", "loop/body/if/then_branch/t", "loop/body/a", "s"]
    assert [(p, g.name) for p, g in prefixed_graphs(model.graph)] == [
        ("", "main"), ("loop/body/", "loop_body"), ("loop/body/if/else_branch/", "else"),
        ("loop/body/if/then_branch/", "then")]
    assert [(i, n.name) for i, n in all_nodes(model)] == [
        (0, "loop"), (0, "if"), (0, "e"), (0, "t"), (1, "a"), (1, "s"), (0, "fexp")]


def scan_model():
    """Scan `scan` whose body holds Loop `inner` (body: Identity `id`), then Relu `r`."""
    loop_body = body("inner_body", [h.make_node("Identity", ["v"], ["out"], name="id")], inputs=("i", "c"))
    scan_body = body("scan_body", [h.make_node("Loop", ["m", ""], ["out"], name="inner", body=loop_body)],
                     inputs=("x",))
    scan = h.make_node("Scan", ["x"], ["y"], name="scan", body=scan_body, num_scan_inputs=1)
    return h.make_model(h.make_graph([scan, h.make_node("Relu", ["y"], ["z"], name="r")], "main", [], []))


def node_names(nodes):
    return [n.name for n in nodes]


def test_iter_nodes_walks_if_loop_and_scan_bodies_in_order():
    model = nested_model()
    assert node_names(iter_nodes(model.graph)) == ["loop", "if", "e", "t", "a", "s"]
    assert node_names(iter_nodes(model.graph, recursive=False)) == ["loop", "s"]
    assert node_names(iter_nodes(model.graph, bodies_first=True)) == ["e", "t", "if", "a", "loop", "s"]
    assert node_names(iter_nodes(list(model.graph.node)[1:])) == ["s"]            # a node list
    assert node_names(iter_nodes(model.functions[0])) == ["fexp"]                  # a function
    assert node_names(body_nodes(model.graph.node[0])) == ["if", "e", "t", "a"]
    assert node_names(body_nodes(model.graph.node[1])) == []
    # the same nodes, in the same order, as the identity walk of the main graph
    assert node_names(iter_nodes(model.graph)) == [n.name for _, n in all_nodes(model)][:-1]
    scan = scan_model()
    assert node_names(iter_nodes(scan.graph)) == ["scan", "inner", "id", "r"]
    assert node_names(iter_nodes(scan.graph, bodies_first=True)) == ["id", "inner", "scan", "r"]


def test_any_node_looks_into_bodies_unless_told_not_to():
    model = scan_model()
    assert any_node(model.graph, lambda n: n.op_type == "Identity")
    assert not any_node(model.graph, lambda n: n.op_type == "Identity", recursive=False)
    assert not any_node(model.graph, lambda n: n.op_type == "Trilu")


def test_iter_graphs_and_iter_scoped_name_the_enclosing_graphs():
    model = nested_model()
    assert [(g.name, outer.name if outer is not None else None) for g, outer in iter_graphs(model.graph)] == [
        ("main", None), ("loop_body", "main"), ("else", "loop_body"), ("then", "loop_body")]
    assert [(n.name, names(scopes)) for n, scopes in iter_scoped(model.graph)] == [
        ("loop", []), ("if", ["loop_body"]), ("e", ["loop_body", "else"]), ("t", ["loop_body", "then"]),
        ("a", ["loop_body"]), ("s", [])]
    # a GRAPHS body is a scope too
    custom = h.make_node("Fused", ["x"], ["y"], name="f", domain="com.example")
    custom.attribute.append(h.make_attribute("branches", [body("b", [h.make_node("Relu", ["w"], ["out"], name="w")])]))
    assert [(n.name, names(scopes)) for n, scopes in iter_scoped([custom])] == [("f", []), ("w", ["b"])]


def test_is_standard_and_standard_opset():
    assert is_standard(h.make_node("Relu", ["x"], ["y"])) and is_standard(h.make_node("Relu", ["x"], ["y"], domain="ai.onnx"))
    assert not is_standard(h.make_node("Relu", ["x"], ["y"], domain="com.microsoft"))
    assert is_standard("") and is_standard(h.make_opsetid("ai.onnx", 17)) and not is_standard("ai.onnx.ml")
    model = h.make_model(h.make_graph([], "main", [], []), opset_imports=[h.make_opsetid("com.x", 1),
                                                                          h.make_opsetid("ai.onnx", 13)])
    assert standard_opset(model) == 13
    del model.opset_import[1]
    assert standard_opset(model) == 0 and standard_opset(model, 1) == 1


def test_reads_from_outer_scopes_through_nested_bodies():
    model = nested_model()
    loop, sigmoid = model.graph.node
    # `cond` and `i` are the body's own inputs, `r` its own value: only the outer names remain
    assert graph_captures(node_bodies(loop)[0]) == ["deep", "outer"]
    assert subgraph_reads(loop) == ["deep", "outer"]
    assert node_reads(loop) == ["m", "c", "deep", "outer"]
    assert node_reads(sigmoid) == ["y"] and subgraph_reads(sigmoid) == []
    # a GRAPHS body's reads count too
    custom = h.make_node("Fused", ["x"], ["y"], domain="com.example")
    custom.attribute.append(h.make_attribute("branches", [body("b", [h.make_node("Relu", ["w"], ["out"])])]))
    assert node_reads(custom) == ["x", "w"]


# Hostile attributes: the schema-aware walk ignores what the checker would refuse (a graph on a
# standard operator whose schema has none, a graph behind a declared INT); trust_schema=False,
# the loader's, walks every graph a file holds.
HOSTILE = [
    ("graph on Relu", "", "Relu", onnx.AttributeProto.GRAPH),
    ("INT-typed graph on If", "", "If", onnx.AttributeProto.INT),
    ("INT-typed graph on a custom op", "com.example", "Fused", onnx.AttributeProto.INT),
    ("STRING-typed graph on Loop", "", "Loop", onnx.AttributeProto.STRING),
]


@pytest.mark.parametrize("case, domain, op, declared", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_graph_attributes(case, domain, op, declared):
    node = h.make_node(op, ["x"], ["y"], name="n", domain=domain)
    inner = body("inner", [h.make_node("Relu", ["x"], ["out"], name="r")])
    node.attribute.append(graph_attribute("hidden", inner, declared))
    model = h.make_model(h.make_graph([node], "main", [], []))
    assert node_bodies(node) == [] and graph_attributes(node) == [] and subgraph_reads(node) == []
    assert [n.name for _, n in all_nodes(model)] == ["n"]
    assert names(node_bodies(node, trust_schema=False)) == ["inner"]
    assert [n.name for _, n in all_nodes(model, trust_schema=False)] == ["n", "r"]
    assert names(all_graphs(model, trust_schema=False)) == ["main", "inner"]


def test_graph_attribute_without_a_graph_is_no_body():
    node = h.make_node("If", ["c"], ["y"], name="if")
    node.attribute.append(onnx.AttributeProto(name="then_branch", type=onnx.AttributeProto.GRAPH))
    assert node_bodies(node) == [] and graph_attributes(node) == [] and node_bodies(node, trust_schema=False) == []


def test_loader_sees_an_external_tensor_behind_an_int_typed_attribute():
    """onnx's own tensor scan follows declared types only: a weight behind an INT-typed attribute
    escaped the loader's external-data check."""
    weight = h.make_tensor("w", T.FLOAT, [1], b"\0\0\0\0", raw=True)
    onnx.external_data_helper.set_external_data(weight, "../../secret.bin", offset=0, length=4)
    weight.data_location = T.EXTERNAL
    weight.ClearField("raw_data")
    inner = body("inner", [h.make_node("Identity", ["w"], ["out"])])
    inner.initializer.append(weight)
    node = h.make_node("Relu", ["x"], ["y"], name="n")
    node.attribute.append(graph_attribute("hidden", inner, declared=onnx.AttributeProto.INT))
    model = h.make_model(h.make_graph([node], "main", [h.make_tensor_value_info("x", T.FLOAT, [1])],
                                      [h.make_tensor_value_info("y", T.FLOAT, [1])]))
    assert [t.name for t in all_tensors(model)] == ["w"]
    from onnx_dml_lowering.compiler.frontend import load_model
    with pytest.raises(DmlLowerError, match="tensor 'w' keeps its data in external file '../../secret.bin'"):
        load_model(model.SerializeToString())


def nested_ifs(depth):
    """A model whose innermost Identity sits `depth` If bodies deep (built in place: helper's
    make_attribute copies through protobuf's parser, which stops at the limit itself)."""
    model = onnx.ModelProto(ir_version=8)
    model.opset_import.add().version = 17
    graph = model.graph
    graph.name = "main"
    for level in range(depth):
        node = graph.node.add(op_type="If", name=f"if{level}", input=["c"], output=["y"])
        attr = node.attribute.add(name="then_branch", type=onnx.AttributeProto.GRAPH)
        graph = attr.g
        graph.name = f"b{level}"
    graph.node.add(op_type="Identity", name="leaf", input=["x"], output=["y"])
    return model


def test_max_body_depth_is_what_protobuf_parses():
    onnx.ModelProto().ParseFromString(nested_ifs(MAX_BODY_DEPTH).SerializeToString())
    from google.protobuf.message import DecodeError
    with pytest.raises(DecodeError):
        onnx.ModelProto().ParseFromString(nested_ifs(MAX_BODY_DEPTH + 1).SerializeToString())


WALKS = {
    "node_paths": lambda m: list(node_paths(m.graph)),
    "prefixed_graphs": lambda m: list(prefixed_graphs(m.graph)),
    "all_nodes": all_nodes,
    "all_nodes, no schema": lambda m: all_nodes(m, trust_schema=False),
    "all_graphs": all_graphs,
    "node_reads": lambda m: node_reads(m.graph.node[0]),
    "graph_captures": lambda m: graph_captures(m.graph),
    "iter_nodes": lambda m: list(iter_nodes(m.graph)),
    "iter_nodes, bodies first": lambda m: list(iter_nodes(m.graph, bodies_first=True)),
    "any_node": lambda m: any_node(m.graph, lambda n: n.op_type == "Identity"),
    "iter_graphs": lambda m: list(iter_graphs(m.graph)),
    "iter_scoped": lambda m: list(iter_scoped(m.graph)),
}


@pytest.mark.parametrize("walk", WALKS.values(), ids=WALKS.keys())
def test_bodies_past_the_limit_are_one_error_line(walk):
    assert walk(nested_ifs(MAX_BODY_DEPTH))
    with pytest.raises(DmlLowerError) as caught:
        walk(nested_ifs(MAX_BODY_DEPTH + 1))
    message = str(caught.value)
    assert "\n" not in message and f"node 'if{MAX_BODY_DEPTH}'" in message and str(MAX_BODY_DEPTH) in message


def test_compile_refuses_bodies_past_the_limit_in_one_line():
    """A ModelProto built in memory: before, the ONNX checker's parse failed with a ValueError."""
    from onnx_dml_lowering.compiler import compile_model
    with pytest.raises(DmlLowerError, match=f"node 'if{MAX_BODY_DEPTH}': bodies nested more than"):
        compile_model(nested_ifs(MAX_BODY_DEPTH + 3))


@st.composite
def trees(draw, depth=0):
    """A graph of Relu / If nodes, If bodies nested up to 4 deep; names unique."""
    count = draw(st.integers(1, 3))
    nodes = []
    for _ in range(count):
        if depth < 4 and draw(st.booleans()):
            nodes.append(("If", draw(trees(depth + 1)), draw(trees(depth + 1))))
        else:
            nodes.append(("Relu",))
    return nodes


def build(tree, counter):
    nodes = []
    for item in tree:
        name = f"n{next(counter)}"
        if item[0] == "If":
            nodes.append(h.make_node("If", ["c"], ["out"], name=name,
                                     then_branch=body(f"{name}_then", build(item[1], counter)),
                                     else_branch=body(f"{name}_else", build(item[2], counter))))
        else:
            nodes.append(h.make_node("Relu", ["x"], ["out"], name=name))
    return nodes


@settings(max_examples=60, deadline=None, derandomize=True)
@given(trees())
def test_paths_name_every_node_once_in_identity_order(tree):
    import itertools
    model = h.make_model(h.make_graph(build(tree, itertools.count()), "main", [], []))
    paths = list(node_paths(model.graph))
    # the identity walk and the path walk visit the same nodes in the same order
    assert [n.name for _, n in all_nodes(model)] == [n.name for _, n in paths]
    for path, node in paths:
        parts = path.split("/")
        assert parts[-1] == node.name and len(parts) % 2 == 1
        assert all(a in ("then_branch", "else_branch") for a in parts[1:-1:2])
    # each graph's prefix is the path of its nodes less their own names
    prefixes = dict(prefixed_graphs(model.graph))
    assert {p for p, n in paths} == {prefix + n.name for prefix, g in prefixes.items() for n in g.node}


# A body read is an access to AttributeProto's g / graphs fields or a test of the GRAPH / GRAPHS
# attribute types; only the walker does either.
BODY_FIELDS = {"g", "graphs", "GRAPH", "GRAPHS"}


def body_reads(path: Path) -> "list[str]":
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in BODY_FIELDS:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "HasField"
                and any(isinstance(a, ast.Constant) and a.value in ("g", "graphs") for a in node.args)):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: HasField")
    return found


def test_no_module_but_the_walker_reads_bodies_out_of_attributes():
    sources = sorted(p for package in ("ir", "lowering", "runtime", "compiler") for p in (ROOT / package).rglob("*.py"))
    assert WALKER in sources and body_reads(WALKER)          # the check sees what it looks for
    assert [found for path in sources if path != WALKER for found in body_reads(path)] == []



# The standard domain is tested by is_standard only, and bodies are walked by the iterators only:
# a function that takes a node's bodies (node_bodies / graph_attributes) and calls itself, directly
# or through other functions of its module, is a hand-written recursion (without the depth guard).
BODY_ACCESSORS = {"node_bodies", "graph_attributes"}


def _called(call: ast.Call) -> "str | None":
    """The module-level function or own method a call names (`f(...)`, `self.f(...)`), else None."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
        return func.attr
    return None


def hand_written_walks(source: str, name: str) -> "list[str]":
    """`name:line: what` for each inline standard-domain tuple and each body recursion."""
    tree = ast.parse(source, name)
    found = [f"{name}:{n.lineno}: ('', 'ai.onnx')" for n in ast.walk(tree) if isinstance(n, ast.Tuple)
             and {e.value for e in n.elts if isinstance(e, ast.Constant)} == {"", "ai.onnx"}]
    calls: "dict[str, set[str]]" = {}
    takes_bodies: "dict[str, int]" = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            called = {_called(c) for c in ast.walk(fn) if isinstance(c, ast.Call)}
            calls.setdefault(fn.name, set()).update(c for c in called if c)
            if called & BODY_ACCESSORS:
                takes_bodies[fn.name] = fn.lineno
    for fn, line in takes_bodies.items():
        seen, todo = set(), list(calls[fn])
        while todo:
            callee = todo.pop()
            if callee == fn:
                found.append(f"{name}:{line}: {fn} recurses into bodies")
                break
            if callee in calls and callee not in seen:
                seen.add(callee)
                todo.extend(calls[callee])
    return found


def test_no_hand_written_walk_outside_the_walker():
    sources = sorted(p for package in ("ir", "lowering", "runtime", "compiler") for p in (ROOT / package).rglob("*.py"))
    found = [f for path in sources if path != WALKER
             for f in hand_written_walks(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == []


@pytest.mark.parametrize("source", [
    "def f(node):\n    return node.domain in ('', 'ai.onnx')\n",
    "def walk(graph):\n    for node in graph.node:\n        for body in node_bodies(node):\n            walk(body)\n",
    "class P:\n    def place(self, g, prefix):\n        for node in g.node:\n"
    "            for a, sub in graph_attributes(node):\n                self.place(sub, prefix + a)\n",
    "def outer(graph):\n    for node in graph.node:\n        inner(node)\n"
    "def inner(node):\n    for body in node_bodies(node):\n        outer(body)\n",
])
def test_the_walk_check_sees_what_it_forbids(source):
    assert hand_written_walks(source, "example.py")
