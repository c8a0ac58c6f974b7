"""NonZero / EyeLike (and their idioms) inside If / Loop / Scan bodies, nested, and inside
model-local functions: lowered, run by the host per branch / iteration, and differential against
onnx.reference (onnxruntime's CPU provider where onnx.reference departs from ONNX: a Loop with
an empty condition input, a zero-trip Loop with scan outputs, Loop scan outputs of rank >= 2)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import ALL_LEVELS, ControlFlow, DmlLowerError, format_graph, graph_from_dict, graph_to_dict
from onnx_dml_lowering.runtime.oracle import HybridOracle, OrtCpuOracle
from tests.builders import graph_model, tensor
from tests.oracle import assert_outputs_same, differential

RNG = np.random.default_rng(11)


def mask(shape, density=0.5, dtype=np.float32):
    return (RNG.random(shape) < density).astype(dtype)


def body(nodes, inputs, outputs, inits=(), name="body"):
    return h.make_graph(nodes, name, [tensor(*i) for i in inputs], [tensor(*o) for o in outputs], list(inits))


def if_model():
    then = body([h.make_node("NonZero", ["x"], ["a"], name="nz")], [], [("a", T.INT64, [2, None])], name="then")
    other = body([h.make_node("Neg", ["x"], ["xn"], name="neg"), h.make_node("NonZero", ["xn"], ["b"], name="nz")],
                 [], [("b", T.INT64, [2, None])], name="else")
    node = h.make_node("If", ["c"], ["y"], name="if_node", then_branch=then, else_branch=other)
    return graph_model([node], [("c", T.BOOL, []), ("x", T.FLOAT, [3, 4])], [("y", T.INT64, [2, None])])


def loop_model(cond_input="c"):
    """Carried: a float matrix m (m + EyeLike(m) each iteration); scan outputs: per-iteration
    NonZero count of (m > threshold) as a [1] tensor."""
    nodes = [h.make_node("EyeLike", ["m_in"], ["eye"], name="eye"),
             h.make_node("Add", ["m_in", "eye"], ["m_out"], name="add"),
             h.make_node("Greater", ["m_out", "t"], ["big"], name="gt"),
             h.make_node("NonZero", ["big"], ["nz_out"], name="nz"),
             h.make_node("Shape", ["nz_out"], ["shape"], name="shape"),
             h.make_node("Slice", ["shape", "one", "two"], ["count"], name="count"),
             h.make_node("Less", ["i", "limit"], ["c_out"], name="less")]
    loop_body = body(nodes, [("i", T.INT64, []), ("c_in", T.BOOL, []), ("m_in", T.FLOAT, [3, 3])],
                     [("c_out", T.BOOL, []), ("m_out", T.FLOAT, [3, 3]), ("count", T.INT64, [1])],
                     [onnx.numpy_helper.from_array(np.array([1], np.int64), "one"),
                      onnx.numpy_helper.from_array(np.array([2], np.int64), "two")])
    node = h.make_node("Loop", ["M", cond_input, "m0"], ["m", "counts"], name="loop", body=loop_body)
    inputs = [("M", T.INT64, []), ("m0", T.FLOAT, [3, 3]), ("t", T.FLOAT, []), ("limit", T.INT64, [])]
    if cond_input:
        inputs.insert(1, ("c", T.BOOL, []))
    return graph_model([node], inputs, [("m", T.FLOAT, [3, 3]), ("counts", T.INT64, [None, 1])])


def loop_feeds(trips=4, cond=True, limit=10):
    feeds = {"M": np.array(trips, np.int64), "m0": RNG.random((3, 3)).astype(np.float32),
             "t": np.array(1.5, np.float32), "limit": np.array(limit, np.int64)}
    if cond is not None:
        feeds["c"] = np.array(cond)
    return feeds


def scan_model(input_axis=0, input_direction=0, output_axis=0, output_direction=0):
    """State: the running sum of EyeLike(k=1) of each slice plus the slice; scan output: the
    EyeLike itself."""
    nodes = [h.make_node("EyeLike", ["s_in"], ["e"], name="eye", k=1),
             h.make_node("Add", ["acc_in", "e"], ["tmp"], name="add"),
             h.make_node("Add", ["tmp", "s_in"], ["acc_out"], name="add2"),
             h.make_node("Identity", ["e"], ["e_out"], name="copy")]
    scan_body = body(nodes, [("acc_in", T.FLOAT, [3, 4]), ("s_in", T.FLOAT, [3, 4])],
                     [("acc_out", T.FLOAT, [3, 4]), ("e_out", T.FLOAT, [3, 4])])
    node = h.make_node("Scan", ["acc0", "xs"], ["acc", "es"], name="scan", body=scan_body, num_scan_inputs=1,
                       scan_input_axes=[input_axis], scan_input_directions=[input_direction],
                       scan_output_axes=[output_axis], scan_output_directions=[output_direction])
    xs_shape = [3, 4]
    xs_shape.insert(input_axis % 3, 5)
    return graph_model([node], [("acc0", T.FLOAT, [3, 4]), ("xs", T.FLOAT, xs_shape)],
                       [("acc", T.FLOAT, [3, 4]), ("es", T.FLOAT, 3)]), xs_shape


def nested_model():
    """Loop { If (cond) { Loop { NonZero } } else { EyeLike } }, the innermost reading outer values."""
    inner_nodes = [h.make_node("Add", ["x", "v_in"], ["xv"], name="add"),
                   h.make_node("NonZero", ["xv"], ["nz_out"], name="nz"),
                   h.make_node("Transpose", ["nz_out"], ["coords"], name="tr"),
                   h.make_node("Identity", ["v_in"], ["v_out"], name="keep"),
                   h.make_node("Identity", ["ci"], ["co"], name="go")]
    inner = body(inner_nodes, [("j", T.INT64, []), ("ci", T.BOOL, []), ("v_in", T.FLOAT, [2, 3])],
                 [("co", T.BOOL, []), ("v_out", T.FLOAT, [2, 3]), ("coords", T.INT64, [None, 2])], name="inner")
    then = body([h.make_node("Loop", ["two", "", "acc_in"], ["unused", "found"], name="inner_loop", body=inner),
                 h.make_node("Shape", ["found"], ["n"], name="n")],
                [], [("n", T.INT64, [3])], name="then")
    other = body([h.make_node("EyeLike", ["x"], ["e"], name="eye", dtype=T.INT64),
                  h.make_node("Shape", ["e"], ["n2"], name="n")], [], [("n2", T.INT64, [2])], name="else")
    # then: rank 3 shape, else: rank 2 shape -> both reduced to their sum, a [1] tensor
    then.node.append(h.make_node("ReduceSum", ["n"], ["ns"], name="sum", keepdims=1))
    del then.output[:]
    then.output.append(tensor("ns", T.INT64, [1]))
    other.node.append(h.make_node("ReduceSum", ["n2"], ["ns2"], name="sum", keepdims=1))
    del other.output[:]
    other.output.append(tensor("ns2", T.INT64, [1]))
    outer_nodes = [h.make_node("Mod", ["i", "two"], ["odd_i"], name="mod"),
                   h.make_node("Cast", ["odd_i"], ["odd"], name="odd", to=T.BOOL),
                   h.make_node("If", ["odd"], ["ns_out"], name="if_node", then_branch=then, else_branch=other),
                   h.make_node("Add", ["acc_in", "x"], ["acc_out"], name="acc"),
                   h.make_node("Identity", ["c_in"], ["c_out"], name="go")]
    outer = body(outer_nodes, [("i", T.INT64, []), ("c_in", T.BOOL, []), ("acc_in", T.FLOAT, [2, 3])],
                 [("c_out", T.BOOL, []), ("acc_out", T.FLOAT, [2, 3]), ("ns_out", T.INT64, [1])], name="outer")
    node = h.make_node("Loop", ["M", "", "acc0"], ["acc", "sizes"], name="loop", body=outer)
    return graph_model([node], [("M", T.INT64, []), ("x", T.FLOAT, [2, 3]), ("acc0", T.FLOAT, [2, 3])],
                       [("acc", T.FLOAT, [2, 3]), ("sizes", T.INT64, [None, 1])],
                       initializers={"two": np.array(2, np.int64)})


def ort_cpu(model, feeds):
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return {o.name: v for o, v in zip(session.get_outputs(), session.run(None, feeds))}


def host_steps(compiled):
    return [s for s in compiled.graph.steps if isinstance(s, ControlFlow)]


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_nonzero_in_both_branches(cond):
    result = differential(if_model(), {"c": np.array(cond), "x": mask((3, 4))})
    (step,) = host_steps(result.compiled)
    assert step.construct == "if" and step.captures == ("x",)
    paths = sorted(n for p in result.compiled.placement for n in p.onnx_nodes)
    # both branches name their node nz: identities are unique across the model (compiler/node_ids.py)
    assert paths == ["if_node/else_branch/nz#1", "if_node/then_branch/nz#2"]
    assert all(p.status == "lowered" for p in result.compiled.placement)


def test_loop_with_nonzero_and_eyelike_and_a_carried_matrix():
    model = loop_model()
    compiled = compile_model(model)
    for trips in (1, 4):
        feeds = loop_feeds(trips)
        before = compiled.session().lowered_iterations
        differential(model, feeds, compiled=compiled)
        assert compiled.session().lowered_iterations - before == trips
    rules = {p.onnx_nodes[-1]: p.rule for p in compiled.placement}
    assert rules == {"loop/body/eye": "eyelike", "loop/body/nz": "nonzero"}
    # the carried matrix changes values, not sizes: specialisations stay cached across iterations
    body_runner = compiled.session().main.body("loop", "body")
    assert len(body_runner.specialised) <= 1


def test_loop_stops_on_the_body_condition():
    differential(loop_model(), loop_feeds(trips=9, limit=2))


def test_zero_trip_loop():
    model = loop_model()
    feeds = loop_feeds(trips=0)
    ours = compile_model(model).run(feeds, strict=True)
    assert_outputs_same(ours, ort_cpu(model, feeds))
    assert ours["counts"].shape == (0, 1)
    feeds = loop_feeds(trips=3, cond=False)
    assert_outputs_same(compile_model(model).run(feeds, strict=True), ort_cpu(model, feeds))


def test_loop_with_an_empty_condition_input():
    """Given M and no cond input, ONNX's Loop is a for loop whose body cond is ignored ("cond = ...;
    // ignored"): M trips whatever it says. onnx.reference runs none; onnxruntime stops when the
    body's cond turns false. Expected: the same Loop given cond True and a body cond that stays true
    (its limit past M), on onnxruntime."""
    model = loop_model(cond_input="")
    for trips, limit in ((5, 10), (5, 2), (0, 2)):
        feeds = loop_feeds(trips, cond=None, limit=limit)
        want = ort_cpu(loop_model(), {**feeds, "c": np.array(True), "limit": np.array(10, np.int64)})
        compiled = compile_model(model)
        assert_outputs_same(compiled.run(feeds, strict=True), want)
        assert_outputs_same(dict(HybridOracle(compiled.model, compiled.types).run(feeds)), want)
        if 0 < limit < trips:              # onnxruntime as it is (and the ort-cpu oracle): the deviation
            assert ort_cpu(model, feeds)["counts"].shape[0] == limit + 1 < trips
            assert OrtCpuOracle(compiled.model, compiled.types).run(feeds)["counts"].shape[0] == limit + 1


@pytest.mark.parametrize("axes", [(0, 0, 0, 0), (1, 1, 0, 1), (-1, 0, 2, 0), (2, 1, -1, 1)])
def test_scan_with_eyelike(axes):
    model, xs_shape = scan_model(*axes)
    feeds = {"acc0": RNG.random((3, 4)).astype(np.float32), "xs": RNG.random(xs_shape).astype(np.float32)}
    compiled = compile_model(model)
    if axes == (0, 0, 0, 0):
        differential(model, feeds, compiled=compiled)
    else:  # onnx.reference implements only the default axes and directions
        assert_outputs_same(compiled.run(feeds, strict=True), ort_cpu(model, feeds))
    assert [p.onnx_nodes for p in compiled.placement] == [["scan/body/eye"]]
    assert host_steps(compiled)[0].construct == "scan"


def test_nested_loop_in_if_in_loop():
    model = nested_model()
    feeds = {"M": np.array(3, np.int64), "x": mask((2, 3)), "acc0": np.zeros((2, 3), np.float32)}
    ours = compile_model(model).run(feeds, strict=True)
    assert_outputs_same(ours, ort_cpu(model, feeds))
    compiled = compile_model(model)
    paths = {p.onnx_nodes[0]: p.status for p in compiled.placement}
    assert paths == {"loop/body/if_node/then_branch/inner_loop/body/nz": "lowered",
                     "loop/body/if_node/else_branch/eye": "lowered"}
    entry = next(p for p in compiled.placement if p.rule.startswith("nonzero"))
    assert entry.onnx_nodes[-1].endswith("/tr") and entry.extra["graph_path"] == \
        "loop/body/if_node/then_branch/inner_loop/body"
    compiled.run(feeds)
    # 3 outer iterations, 3 If branches (one of them then_branch), 2 inner-loop iterations in it
    assert compiled.session().lowered_iterations == 3 + 3 + 2


def test_printed_graph_shows_bodies_and_json_round_trips():
    compiled = compile_model(nested_model())
    text = format_graph(compiled.graph)
    assert "loop     loop (M, -, acc0; captures two, x)" in text
    assert "\n      body:\n" in text and "DML_OPERATOR_NONZERO_COORDINATES" in text
    assert graph_from_dict(graph_to_dict(compiled.graph)) == compiled.graph


def function_model(kind):
    if kind == "nonzero":
        nodes = [h.make_node("NonZero", ["a"], ["t"], name="nz"), h.make_node("Transpose", ["t"], ["b"], name="tr")]
        out = ("y", T.INT64, [None, 2])
    else:
        nodes = [h.make_node("EyeLike", ["a"], ["b"], name="eye", k=1)]
        out = ("y", T.FLOAT, [3, 4])
    function = h.make_function("local", "Wrap", ["a"], ["b"], nodes, [h.make_opsetid("", 13)])
    graph = h.make_graph([h.make_node("Relu", ["x"], ["r"], name="relu"),
                          h.make_node("Wrap", ["r"], ["y"], domain="local", name="call")], "g",
                         [tensor("x", T.FLOAT, [3, 4])], [tensor(*out)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("local", 1)],
                        functions=[function], ir_version=8)


@pytest.mark.parametrize("kind,rule", [("nonzero", "nonzero_transpose"), ("eyelike", "eyelike")])
def test_local_functions_are_inlined_and_lowered(kind, rule):
    x = mask((3, 4)) - 0.5
    result = differential(function_model(kind), {"x": x})
    assert result.entry.status == "lowered" and result.entry.rule == rule
    assert result.entry.onnx_nodes[0] == f"call/Wrap/{'nz' if kind == 'nonzero' else 'eye'}"


@pytest.mark.parametrize("level", [level.name for level in ALL_LEVELS])
def test_every_feature_level(level):
    feeds = loop_feeds(3)
    result = differential(loop_model(), feeds, level=level)
    for p in result.compiled.placement:
        assert p.onnx_nodes[-1].startswith("loop/body/")
        assert p.status == "lowered" or p.reason, p
    if not any(p.status == "lowered" for p in result.compiled.placement):
        assert not host_steps(result.compiled)      # nothing lowered inside: one ONNX region as today


def test_nothing_lowered_inside_stays_an_onnx_region():
    node = h.make_node("If", ["c"], ["y"], name="if_node",
                       then_branch=body([h.make_node("Relu", ["x"], ["a"], name="r")], [], [("a", T.FLOAT, [2])]),
                       else_branch=body([h.make_node("Neg", ["x"], ["b"], name="n")], [], [("b", T.FLOAT, [2])]))
    model = graph_model([node], [("c", T.BOOL, []), ("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])])
    result = differential(model, {"c": np.array(False), "x": np.array([1, -2], np.float32)})
    assert not host_steps(result.compiled) and not result.compiled.placement
    assert [s.kind for s in result.compiled.graph.steps] == ["ONNX_REGION"]


def test_declines_inside_bodies_carry_their_reasons():
    # double NonZero: NONZERO_COORDINATES takes no 64-bit input before 5_0 (level 4_1 declines)
    then = body([h.make_node("NonZero", ["x"], ["a"], name="nz")], [], [("a", T.INT64, [2, None])])
    other = body([h.make_node("NonZero", ["x"], ["b"], name="nz2")], [], [("b", T.INT64, [2, None])])
    model = graph_model([h.make_node("If", ["c"], ["y"], name="if_node", then_branch=then, else_branch=other)],
                        [("c", T.BOOL, []), ("x", T.UINT8, [1, 5])], [("y", T.INT64, [2, None])])
    result = differential(model, {"c": np.array(True), "x": np.array([[0, 1, 0, 2, 3]], np.uint8)}, level="1_0")
    assert result.compiled.placement and all(p.status == "onnx" and p.reason for p in result.compiled.placement)


def test_ort_backend_through_control_flow():
    model = nested_model()
    feeds = {"M": np.array(2, np.int64), "x": mask((2, 3)), "acc0": np.zeros((2, 3), np.float32)}
    compiled = compile_model(model)
    assert_outputs_same(compiled.run(feeds, backend="ort"), ort_cpu(model, feeds))
    feeds = loop_feeds(3)
    compiled = compile_model(loop_model())
    assert_outputs_same(compiled.run(feeds, backend="ort", strict=True), compiled.run(feeds, strict=False))


def test_strict_and_default_modes_agree():
    compiled = compile_model(loop_model())
    feeds = loop_feeds(4)
    strict, default = compiled.run(feeds, strict=True), compiled.run(feeds, strict=False)
    assert_outputs_same(strict, default)


def test_backend_prepare_and_run_node_with_subgraphs():
    from onnx_dml_lowering.compiler import backend
    model = if_model()
    feeds = [np.array(True), mask((3, 4))]
    (y,) = backend.prepare(model).run(feeds)
    assert_outputs_same({"y": y}, {"y": np.array(np.nonzero(feeds[1]), np.int64)})
    node = model.graph.node[0]       # its branches read x: fed after the node's own inputs
    (y,) = backend.run_node(node, feeds, outputs_info=[(np.int64, (2, 0))])
    assert_outputs_same({"y": y}, {"y": np.array(np.nonzero(feeds[1]), np.int64)})


def test_check_reports_the_lowered_iterations():
    from onnx_dml_lowering.runtime.check import Tolerances, check
    from onnx_dml_lowering.runtime.report import format_text
    compiled = compile_model(loop_model())
    _, report = check(compiled, loop_feeds(3), ["cpu", "ort"], Tolerances())
    assert report.ok and report.control_flow_iterations == {"cpu": 3, "ort": 3}
    assert "[cpu] control flow: 3 branch / iteration runs of lowered bodies" in format_text(report)


@pytest.mark.parametrize("backend", ["cpu", "ort"])
def test_scan_outputs_of_different_shapes_are_one_line(backend):
    """A Loop stacking NonZero results whose count changes between iterations: ONNX cannot stack
    them, and the host says so in one line naming the node and output (it was 'internal error:
    ValueError' from numpy; found by a new-user trial)."""
    V = h.make_tensor_value_info
    body = h.make_graph([h.make_node("Identity", ["c"], ["co"]), h.make_node("Cast", ["i"], ["iv"], to=T.FLOAT),
                         h.make_node("Less", ["iv", "x"], ["m"]), h.make_node("NonZero", ["m"], ["nz"])], "body",
                        [V("i", T.INT64, []), V("c", T.BOOL, [])], [V("co", T.BOOL, []), V("nz", T.INT64, [1, None])])
    model = graph_model([h.make_node("Loop", ["M", "c0"], ["rows"], body=body, name="loop")],
                        [("M", T.INT64, []), ("c0", T.BOOL, []), ("x", T.FLOAT, [4])], [("rows", T.INT64, 3)])
    feeds = {"M": np.array(3, np.int64), "c0": np.array(True), "x": np.array([0, 1, 2, 3], np.float32)}
    with pytest.raises(DmlLowerError, match=r"^node loop: Loop scan output 'rows' has shape \[1, 3\] in one iteration "
                                            r"and \[1, 2\] in another; ONNX stacks"):
        compile_model(model).run(feeds, backend=backend)


def defaulted_function_model(call_attributes: dict, nested: bool = False) -> onnx.ModelProto:
    """EyeLike(k = the function's attribute kk, whose default is 2); `nested`: called through an
    outer function that passes its own kk (default 3) on by reference."""
    eye = h.make_node("EyeLike", ["a"], ["b"], name="eye")
    eye.attribute.append(onnx.AttributeProto(name="k", ref_attr_name="kk", type=onnx.AttributeProto.INT))
    inner = h.make_function("local", "Eye", ["a"], ["b"], [eye], [h.make_opsetid("", 18)])
    inner.attribute_proto.append(h.make_attribute("kk", 2))
    functions = [inner]
    op = "Eye"
    if nested:
        call = h.make_node("Eye", ["a"], ["b"], domain="local", name="inner_call")
        call.attribute.append(onnx.AttributeProto(name="kk", ref_attr_name="kk", type=onnx.AttributeProto.INT))
        outer = h.make_function("local", "Outer", ["a"], ["b"], [call],
                                [h.make_opsetid("", 18), h.make_opsetid("local", 1)])
        outer.attribute_proto.append(h.make_attribute("kk", 3))
        functions.append(outer)
        op = "Outer"
    graph = h.make_graph([h.make_node(op, ["x"], ["y"], domain="local", name="call", **call_attributes)], "g",
                         [tensor("x", T.FLOAT, [3, 5])], [tensor("y", T.FLOAT, [3, 5])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18), h.make_opsetid("local", 1)],
                        functions=functions, ir_version=10)


@pytest.mark.parametrize("call_attributes, nested, k", [({}, False, 2), ({"kk": -1}, False, -1),
                                                        ({}, True, 3), ({"kk": 1}, True, 1)])
def test_a_function_attribute_default_applies_where_the_call_does_not_set_it(call_attributes, nested, k):
    """onnx's inliner drops a function's attribute defaults: the EyeLike ran with k = 0 and the
    check said MATCH. The diagonal is where onnxruntime (the shipped file) and numpy put it."""
    import onnxruntime as ort
    model = defaulted_function_model(call_attributes, nested)
    x = np.ones((3, 5), np.float32)
    ours = compile_model(model).run({"x": x}, strict=True)["y"]
    shipped = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(ours, np.eye(3, 5, k, dtype=np.float32))
    np.testing.assert_array_equal(ours, shipped)


def test_a_reference_attribute_outside_a_function_is_one_line():
    eye = h.make_node("EyeLike", ["x"], ["y"], name="eye")
    eye.attribute.append(onnx.AttributeProto(name="k", ref_attr_name="kk", type=onnx.AttributeProto.INT))
    model = graph_model([eye], [("x", T.FLOAT, [3, 3])], [("y", T.FLOAT, [3, 3])])
    with pytest.raises(DmlLowerError, match=r"^node eye \(EyeLike\): attribute k refers to kk, a function's "
                                            r"attribute, outside any function body$"):
        compile_model(model)


def test_a_default_passed_on_by_a_reference_without_one_is_refused():
    """An outer function passing its kk (no default) on to a function that defaults kk: where a
    call of the outer one leaves kk out, the inner default applies, which inlining cannot say."""
    model = defaulted_function_model({}, nested=True)
    del model.functions[1].attribute_proto[:]
    model.functions[1].attribute.append("kk")
    with pytest.raises(DmlLowerError, match=r"^node inner_call \(Eye\) in function Outer: attribute kk refers to "
                                            r"kk, which has no default"):
        compile_model(model)
