"""Each idiom rule on its own: its pattern takes the exporter's form and ignores a near miss, and
its decline_reason (compile time) or rewrite (concrete sizes and values) declines with the reason."""
from pathlib import Path

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler.frontend import check_and_infer
from onnx_dml_lowering.compiler.graph_view import OnnxGraphView
from onnx_dml_lowering.ir import Graph, parse_level
from onnx_dml_lowering import lowering
from onnx_dml_lowering.lowering import IDIOMS, Declined, IdiomRule, Match, idioms_for
from onnx_dml_lowering.lowering.registry import first_pattern
from onnx_dml_lowering.lowering.diagonal_idioms import match_initializer
from tests.lowering.test_nonzero_idioms import rows_model, slice_columns_model, split_columns_model, transpose_model

L51, L50, L20 = parse_level("5_1"), parse_level("5_0"), parse_level("2_0")


def make(nodes, inputs, outputs, inits=(), opset=13):
    graph = h.make_graph(nodes, "rule", inputs, outputs, list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)


def match(model, anchor: str, rule: str, level=L51):
    """The named rule's result at node `anchor`: a Match, Declined (its check) or None (its pattern)."""
    view = OnnxGraphView(check_and_infer(model))
    info = view.info(anchor)
    (idiom,) = [i for i in idioms_for(info.op_type) if i.name == rule]
    return idiom.match(info, view, level)


def build(m: Match, values: dict, level=L51):
    shapes = {t.name: tuple(np.shape(values[t.name])) if t.name in values else tuple(t.shape) for t in m.inputs}
    return m.build(shapes, {k: np.asarray(v) for k, v in values.items()}, level)


# -- nonzero_transpose ----------------------------------------------------------------------

def test_nonzero_transpose_check_reasons():
    m = match(transpose_model(T.FLOAT, (2, 3)), "nz", "nonzero_transpose")
    assert isinstance(m, Match) and m.nodes == ("nz", "tr") and isinstance(build(m, {}), Graph)
    assert match(transpose_model(T.FLOAT, (2, 3)), "nz", "nonzero_transpose", L20) == Declined(
        "NONZERO_COORDINATES is not available at feature level 2_0 (introduced in 3_0)")
    assert match(transpose_model(T.FLOAT, (1,) * 9), "nz", "nonzero_transpose") == Declined(
        "input rank 9 exceeds NONZERO_COORDINATES's 8 dimensions at feature level 5_1")


def test_nonzero_transpose_pattern_near_misses():
    assert match(transpose_model(T.FLOAT, (2, 3), perm=(0, 1)), "nz", "nonzero_transpose") is None
    model = transpose_model(T.FLOAT, (2, 3))
    model.graph.output.append(h.make_tensor_value_info("nz", T.INT64, [2, None]))   # read elsewhere
    assert match(model, "nz", "nonzero_transpose") is None


# -- nonzero_columns ------------------------------------------------------------------------

def test_nonzero_columns_check_reasons():
    m = match(split_columns_model(T.FLOAT, (2, 3)), "nz", "nonzero_columns")
    assert isinstance(m, Match) and m.outputs == ("y0", "y1") and isinstance(build(m, {}), Graph)
    assert match(slice_columns_model(T.FLOAT, (2, 3)), "nz", "nonzero_columns", L20) == Declined(
        "NONZERO_COORDINATES is not available at feature level 2_0 (introduced in 3_0)")
    assert match(split_columns_model(T.STRING, (2, 3)), "nz", "nonzero_columns") == Declined(
        "input type string has no DirectML equivalent")


def test_nonzero_columns_pattern_near_misses():
    model = slice_columns_model(T.FLOAT, (2, 3))
    model.graph.initializer[2].CopyFrom(h.make_tensor("a0", T.INT64, [1], [0]))   # a row, not a column
    assert match(model, "nz", "nonzero_columns") is None
    assert match(slice_columns_model(T.FLOAT, (4,)), "nz", "nonzero_columns") is not None
    assert match(transpose_model(T.FLOAT, (2, 3)), "nz", "nonzero_columns") is None   # no column taken


# -- nonzero_rows ----------------------------------------------------------------------------

def test_nonzero_rows_check_reasons_and_portable():
    m = match(rows_model(T.FLOAT, (2, 3), "slice"), "nz", "nonzero_rows")
    assert isinstance(m, Match) and m.outputs == ("y0", "y1") and isinstance(build(m, {}), Graph)
    # the rewrite reads the input's type, the rows and the layout alone: shared between equal matches
    assert m.portable == ("nonzero_rows", T.FLOAT, ((0, False), (1, False)), 0)
    assert match(rows_model(T.FLOAT, (2, 3), "gather"), "nz", "nonzero_columns") is None   # no Transpose
    assert match(rows_model(T.FLOAT, (2, 3), "split13"), "nz", "nonzero_rows", L20) == Declined(
        "NONZERO_COORDINATES is not available at feature level 2_0 (introduced in 3_0)")
    t = match(rows_model(T.FLOAT, (2, 3), "gather_negative", transpose=True), "nz", "nonzero_columns")
    assert t.portable == ("nonzero_columns", T.FLOAT, ((0, False), (1, False)), 1)


def set_init(model, name, values, dims=(1,)):
    (init,) = [i for i in model.graph.initializer if i.name == name]
    init.CopyFrom(h.make_tensor(name, T.INT64, list(dims), values))
    return model


def test_nonzero_rows_pattern_near_misses():
    def rows(model):
        return match(model, "nz", "nonzero_rows")
    assert rows(set_init(set_init(rows_model(T.FLOAT, (2, 3), "slice"), "a0", [1]), "q0", [1])) is None  # a point
    assert rows(set_init(rows_model(T.FLOAT, (2, 3), "slice"), "q0", [1])) is None           # squeezes nnz
    model = set_init(rows_model(T.FLOAT, (2, 3), "gather"), "k0", [0, 1], (2,))              # two indices
    model.graph.output[0].CopyFrom(h.make_tensor_value_info("y0", T.INT64, [2, None]))
    assert rows(model) is None
    assert rows(set_init(rows_model(T.FLOAT, (2, 3), "gather"), "k0", [2], ())) is None      # past the rank
    model = rows_model(T.FLOAT, (2, 3), "gather")
    model.graph.node[1].attribute[0].CopyFrom(h.make_attribute("axis", 1))                   # a coordinate
    assert rows(model) is None
    model = rows_model(T.FLOAT, (2, 3), "slice")
    model.graph.node.append(h.make_node("Shape", ["nz"], ["n"], name="shape"))               # read elsewhere
    model.graph.output.append(h.make_tensor_value_info("n", T.INT64, [2]))
    assert rows(model) is None


def test_a_run_time_slice_step_is_no_step_of_one():
    """A steps input that is not a constant may be anything (-1 keeps nothing of [r, r + 1)): both
    layouts decline the pattern rather than take it for a step of 1."""
    for transpose, rule in ((False, "nonzero_rows"), (True, "nonzero_columns")):
        model = rows_model(T.FLOAT, (2, 3), "slice_clamped", transpose=transpose)
        model.graph.initializer.remove([i for i in model.graph.initializer if i.name == "st0"][0])
        model.graph.input.append(h.make_tensor_value_info("st0", T.INT64, [1]))
        assert match(model, "nz", rule) is None


# -- eyelike_constant_of_shape --------------------------------------------------------------

def eyelike_of_fill(graph_output_fill=False):
    outputs = [h.make_tensor_value_info("y", T.FLOAT, [None, None])]
    if graph_output_fill:
        outputs.append(h.make_tensor_value_info("x", T.FLOAT, [None, None]))
    return make([h.make_node("ConstantOfShape", ["shape"], ["x"], name="fill"),
                 h.make_node("EyeLike", ["x"], ["y"], name="eye", k=1)],
                [h.make_tensor_value_info("shape", T.INT64, [2])], outputs)


def test_eyelike_constant_of_shape_reasons():
    m = match(eyelike_of_fill(), "eye", "eyelike_constant_of_shape")
    assert isinstance(m, Match) and m.value_inputs == ("shape",)
    assert isinstance(build(m, {"shape": [3, 4]}), Graph)
    assert build(m, {"shape": [3, -1]}) == Declined("shape [3, -1] holds a negative size")
    assert build(m, {"shape": [2, 3, 4]}) == Declined("EyeLike needs a 2-D input; ConstantOfShape gives [2, 3, 4]")
    # below 2_0 neither diagonal operator exists: that is the reason, not the output type
    assert build(m, {"shape": [3, 4]}, parse_level("1_0")) == Declined(
        "DIAGONAL_MATRIX is not available at feature level 1_0 (introduced in 2_0), nor is DIAGONAL_MATRIX1 "
        "(introduced in 5_1): one diagonal of output type float (FLOAT32) needs DIAGONAL_MATRIX (feature level 2_0; "
        "target 1_0)")
    assert isinstance(build(m, {"shape": [3, 4]}, parse_level("2_0")), Graph)


def test_eyelike_constant_of_shape_near_miss():
    assert match(eyelike_of_fill(graph_output_fill=True), "eye", "eyelike_constant_of_shape") is None


# -- eye_from_ranges ------------------------------------------------------------------------

def eye_from_range(elem=T.INT64, delta=1, expand=False):
    inits = [h.make_tensor("zero", elem, [], [0]), h.make_tensor("step", elem, [], [delta])]
    nodes = [h.make_node("Range", ["zero", "n", "step"], ["r"], name="range"),
             h.make_node("Unsqueeze", ["r", "axes"], ["col"], name="unsq"),
             h.make_node("Equal", ["col", "r"], ["eq"], name="eq"),
             h.make_node("Cast", ["eq"], ["y"], name="cast", to=T.FLOAT)]
    inits.append(h.make_tensor("axes", T.INT64, [1], [-1]))
    inputs = [h.make_tensor_value_info("n", elem, [])]
    out = "y"
    if expand:
        nodes.append(h.make_node("Expand", ["y", "shape"], ["z"], name="expand"))
        inputs.append(h.make_tensor_value_info("shape", T.INT64, [3]))
        out = "z"
    return make(nodes, inputs, [h.make_tensor_value_info(out, T.FLOAT, [None] * (3 if expand else 2))], inits)


def test_eye_from_ranges_reasons():
    m = match(eye_from_range(T.FLOAT), "eq", "eye_from_ranges")
    assert isinstance(m, Match) and m.nodes == ("unsq", "eq", "range", "cast")
    assert isinstance(build(m, {"n": np.float32(5)}), Graph)
    assert build(m, {"n": np.float32(2**25)}) == Declined(
        "a float Range of 33554432 elements is not exact past 16777216")
    m = match(eye_from_range(expand=True), "eq", "eye_from_ranges")
    assert isinstance(build(m, {"n": 3, "shape": [2, 1, 3]}), Graph)
    assert build(m, {"n": 3, "shape": [2, 6, 3]}) == Declined("Expand to [2, 6, 3] does not broadcast a 3x3 eye")
    assert build(m, {"n": 1, "shape": [2, 4, 3]}) == Declined("Expand to [2, 4, 3] stretches the 1x1 eye itself")
    assert build(m, {"n": 3, "shape": [2, -1, 3]}) == Declined("shape [2, -1, 3] holds a negative size")


def test_eye_from_ranges_near_misses():
    assert match(eye_from_range(delta=2), "eq", "eye_from_ranges") is None
    model = eye_from_range()
    model.graph.output.append(h.make_tensor_value_info("col", T.INT64, [None, 1]))   # an intermediate read elsewhere
    assert match(model, "eq", "eye_from_ranges") is None


# -- trilu_constant_fill --------------------------------------------------------------------

def trilu_of(fill_node, inputs, inits=()):
    nodes = [fill_node, h.make_node("Trilu", ["x", "k"], ["y"], name="trilu", upper=0)]
    return make(nodes, inputs + [h.make_tensor_value_info("k", T.INT64, [])],
                [h.make_tensor_value_info("y", T.FLOAT, [None, None])], inits, opset=14)


def trilu_of_ones():
    fill = h.make_node("ConstantOfShape", ["shape"], ["x"], name="fill", value=h.make_tensor("v", T.FLOAT, [1], [1.0]))
    return trilu_of(fill, [h.make_tensor_value_info("shape", T.INT64, [None])])


def trilu_of_expand(constant):
    fill = h.make_node("Expand", ["c", "shape"], ["x"], name="fill")
    return trilu_of(fill, [h.make_tensor_value_info("shape", T.INT64, [2])], [numpy_helper.from_array(constant, "c")])


def test_trilu_constant_fill_reasons():
    m = match(trilu_of_ones(), "trilu", "trilu_constant_fill")
    assert isinstance(m, Match) and m.value_inputs == ("shape", "k")
    assert isinstance(build(m, {"shape": [4, 4], "k": 0}), Graph)
    assert build(m, {"shape": [5], "k": 0}) == Declined("Trilu needs at least 2 dimensions; its input has shape [5]")
    assert build(m, {"shape": [4, 4], "k": 0}, L50) == Declined(
        "a band wider than one diagonal needs DIAGONAL_MATRIX1 (feature level 5_1; target 5_0)")
    m = match(trilu_of_expand(np.full((2, 3), 7.0, np.float32)), "trilu", "trilu_constant_fill")
    assert build(m, {"shape": [4, 4], "k": 0}) == Declined("Expand of [2, 3] to [4, 4] does not broadcast")


def test_trilu_constant_fill_near_miss():
    not_uniform = np.array([[1.0, 2.0]], np.float32)
    assert match(trilu_of_expand(not_uniform), "trilu", "trilu_constant_fill") is None


# -- constant_diagonal ----------------------------------------------------------------------

def test_constant_diagonal_reasons():
    tril = np.tril(np.ones((4, 4), np.float32))
    m = match_initializer("w", tril, L51)
    assert isinstance(m, Match) and m.operators == ("DIAGONAL_MATRIX1",) and isinstance(build(m, {}), Graph)
    assert build(m, {}, L50) == Declined(
        "a band wider than one diagonal needs DIAGONAL_MATRIX1 (feature level 5_1; target 5_0)")
    third = match_initializer("w", np.eye(3) / 3, L50)
    assert third.operators == ("DIAGONAL_MATRIX",) and build(third, {}, L50) == Declined(
        "Value 0.3333333333333333, which FLOAT32 cannot hold exactly, needs DIAGONAL_MATRIX1 (feature level 5_1; "
        "target 5_0)")
    const = h.make_node("Constant", [], ["w"], name="const", value=numpy_helper.from_array(tril, "w"))
    model = make([const, h.make_node("Add", ["x", "w"], ["y"], name="add")],
                 [h.make_tensor_value_info("x", T.FLOAT, [4, 4])], [h.make_tensor_value_info("y", T.FLOAT, [4, 4])])
    m = match(model, "const", "constant_diagonal")
    assert m.nodes == ("const",) and m.extra == {"initializer": "w", "initializer_bytes_saved": 64}


def test_constant_diagonal_near_misses():
    partly = np.eye(4, dtype=np.float32)
    partly[3, 3] = 0                                  # a diagonal only partly filled
    assert match_initializer("w", partly, L51) is None
    assert match_initializer("w", np.eye(4, dtype=np.float32) * np.arange(1, 5), L51) is None   # not one value


# -- one rule shape, one registry -------------------------------------------------------------

def test_every_rule_has_the_one_shape_and_its_anchors_are_in_priority_order():
    """NonZero and EyeLike are rules like the idioms: an IdiomRule with pattern, decline_reason and
    rewrite of its own, under its op at priority 0; an anchor's rules are tried largest first."""
    assert {"NonZero", "EyeLike", "Trilu", "CumSum", "Equal", "Less", "Constant"} <= set(IDIOMS)
    for anchor, idioms in IDIOMS.items():
        assert [i.priority for i in idioms] == sorted((i.priority for i in idioms), reverse=True), anchor
        for idiom in idioms:
            rule = type(idiom.rule)
            assert isinstance(idiom.rule, IdiomRule) and rule.rewrite is not IdiomRule.rewrite, idiom.name
            assert not hasattr(idiom.rule, "check"), idiom.name          # the applicability test's name
    alone = {op: [i.name for i in IDIOMS[op] if i.priority == 0] for op in ("NonZero", "EyeLike", "Trilu")}
    assert alone == {"NonZero": ["nonzero"], "EyeLike": ["eyelike"], "Trilu": ["trilu"]}


def test_nonzero_and_eyelike_rules_check_a_rank_known_only_at_run_time():
    """A rank unknown at compile time matches; the rewrite declines it on the concrete shape."""
    def of_unknown_rank(node, out_type):     # x = Reshape(a, s): its rank is the run-time length of s
        return make([h.make_node("Reshape", ["a", "s"], ["x"], name="reshape"), node],
                    [h.make_tensor_value_info("a", T.FLOAT, [None]), h.make_tensor_value_info("s", T.INT64, [None])],
                    [h.make_tensor_value_info("y", out_type, [None, None])])

    nz = of_unknown_rank(h.make_node("NonZero", ["x"], ["y"], name="nz"), T.INT64)
    m = match(nz, "nz", "nonzero")
    assert isinstance(m, Match) and m.operators == ("NONZERO_COORDINATES", "ELEMENT_WISE_IDENTITY")
    assert isinstance(build(m, {"x": np.ones((2, 3), np.float32)}), Graph)
    assert build(m, {"x": np.ones((1,) * 9, np.float32)}) == Declined(
        "input rank 9 exceeds NONZERO_COORDINATES's 8 dimensions at feature level 5_1")
    eye = of_unknown_rank(h.make_node("EyeLike", ["x"], ["y"], name="eye", k=2**40), T.FLOAT)
    m = match(eye, "eye", "eyelike")
    assert isinstance(m, Match) and m.operators == ("DIAGONAL_MATRIX",)
    assert isinstance(build(m, {"x": np.ones((3, 4), np.float32)}), Graph)      # k misses: an all-zero matrix
    assert build(m, {"x": np.ones((2, 3, 4), np.float32)}) == Declined("input rank 3: EyeLike needs a 2-D input")


def test_precedence_is_the_priority_alone():
    """No rule's pattern steps aside for another's: on torch.eye's Equal the mask rule matches too,
    and eye_from_ranges comes first only by its priority (the partition and optimize both use it)."""
    model = eye_from_range()
    assert isinstance(match(model, "eq", "range_comparison_mask"), Match)
    view = OnnxGraphView(check_and_infer(model))
    idiom, found = first_pattern(view.info("eq"), view)
    assert idiom.name == "eye_from_ranges" and found.nodes == ("unsq", "eq", "range", "cast")
    assert [i.name for i in idioms_for("Equal")] == ["eye_from_ranges", "range_comparison_mask"]


def test_rules_decline_one_way():
    """A rewrite declines by raising Decline, never by returning Declined (only the machinery turns
    a reason into Declined), and no rule calls another rule's pattern: the source says so."""
    source = Path(lowering.__file__).parent
    returned = {p.name for p in source.glob("*.py") if "return Declined(" in p.read_text()}
    assert returned == {"match.py", "registry.py"}
    peeks = {p.name for p in source.glob("*.py") if ".rule.pattern(" in p.read_text()}
    assert peeks == {"registry.py"}


def test_the_rule_guide_quotes_the_code():
    """docs/rules.md's example rule and its registration line stand in lowering/diagonal_idioms.py as written."""
    guide = (Path(__file__).parents[2] / "docs" / "rules.md").read_text()
    source = (Path(lowering.__file__).parent / "diagonal_idioms.py").read_text()
    blocks = guide.split("```python\n")[1:]
    assert len(blocks) == 2
    for block in blocks:
        code = block.split("```")[0]
        assert code in source, code
