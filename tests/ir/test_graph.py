"""ir.graph + ir.verify + ir.serialize + ir.printer: the verifier's rules, lossless JSON, printing."""
import dataclasses
import json
import math

import pytest

from onnx_dml_lowering.ir import (ClearBuffer, DataType, DiagonalMatrix, DiagonalMatrix1, DmlLowerError, Download,
                ElementWiseIdentity, EmptyTensor, Graph, LowerAtRunTime, NonZeroCoordinates, OnnxRegion,
                ReadCount, TensorDesc, Upload, parse_level)
from onnx_dml_lowering.lowering import Declined, NodeInfo, TensorInfo, idioms_for
from onnx_dml_lowering.ir import verify_graph, graph_to_dict, graph_from_dict, format_graph

T = DataType
FLOAT, INT32, INT64, BOOL = 1, 6, 7, 9          # ONNX TensorProto numbers
FLOAT16, DOUBLE, UINT64, UINT8, INT8 = 10, 11, 13, 2, 3


def packed(graph, name, dtype, sizes, extra=0):
    """A buffer exactly as large as a packed view (+ extra bytes) and that view."""
    desc = TensorDesc(dtype, sizes)
    graph.add_buffer(name, desc.min_total_size + extra)
    graph.add_view(name + ".v", name, desc)
    return name + ".v"


def raises(graph, *fragments):
    with pytest.raises(DmlLowerError) as info:
        verify_graph(graph)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# -- a well-formed hand-built graph verifies ----------------------------------------------------

def nonzero_graph(level="5_1", shape=(1, 1, 2, 4), n=3):
    """x -> NONZERO_COORDINATES -> readback -> crop view -> download (hand-built)."""
    g = Graph(parse_level(level))
    g.inputs.append("x")
    m = 1
    for s in shape:
        m *= s
    x = packed(g, "xbuf", T.FLOAT32, shape)
    count = packed(g, "cbuf", T.UINT32, (1,) * len(shape))
    g.add_buffer("coords", 4 * m * n)
    g.add_view("coords.v", "coords", TensorDesc(T.UINT32, (1,) * (len(shape) - 2) + (m, n)))
    g.add_view("rows.v", "coords", TensorDesc(T.UINT32, ("nnz", n)))
    g.add(Upload("x", x))
    g.add(ClearBuffer("coords"))
    g.add(NonZeroCoordinates(x, count, "coords.v"))
    g.add(ReadCount(count, "nnz"))
    g.add(Download("rows.v", "y", 12, ("nnz", n)))
    g.outputs.append("y")
    return g


def test_hand_built_graph_verifies():
    verify_graph(nonzero_graph())
    verify_graph(nonzero_graph("3_0"))
    verify_graph(nonzero_graph("4_0", (3, 5), 2))


# -- the verifier's rules, each named -----------------------------------------------------------

def test_view_over_unknown_buffer():
    g = Graph()
    g.add_view("lost.v", "nowhere", TensorDesc(T.FLOAT32, (4,)))
    raises(g, "lost.v", "nowhere")


@pytest.mark.parametrize("nbytes,offset,sizes", [(16, 0, (8,)), (32, 16, (8,)), (24, 0, (7,)),
                                                  (48, 32, (2, 3))])
def test_view_extent_past_buffer(nbytes, offset, sizes):
    g = Graph()
    g.add_buffer("small", nbytes)
    g.add_view("big.v", "small", TensorDesc(T.FLOAT32, sizes), offset)
    raises(g, "big.v", "small", str(nbytes))


def test_view_extent_past_buffer_through_strides():
    g = Graph()
    g.add_buffer("b", 48)                     # a packed 3x4 FLOAT32
    g.add_view("t.v", "b", TensorDesc(T.FLOAT32, (4, 3), (1, 5)))   # wrong stride: needs 56 bytes
    raises(g, "t.v", "b")


@pytest.mark.parametrize("offset", [-16, -64])
def test_view_at_negative_offset_lies_outside_its_buffer(offset):
    g = Graph()
    g.add_buffer("b", 64)
    g.add_view("neg.v", "b", TensorDesc(T.FLOAT32, (2, 2)), offset)
    raises(g, "neg.v", str(offset))


def test_view_extent_exactly_fits():
    g = Graph()
    g.add_buffer("b", 64)
    g.add_view("v", "b", TensorDesc(T.FLOAT32, (8,)), 32)
    verify_graph(g)


@pytest.mark.parametrize("offset", [4, 8, 12, 20, 1])
def test_misaligned_offset_of_an_operator_binding(offset):
    """DirectML binds buffer tensors at 16-byte aligned offsets."""
    g = Graph()
    g.add_buffer("b", 256)
    g.add_view("skew.v", "b", TensorDesc(T.FLOAT32, (1, 1, 2, 2)), offset)
    g.add(DiagonalMatrix("skew.v", 0, 1.0))
    raises(g, "skew.v", str(offset))


@pytest.mark.parametrize("offset,ok", [(4, True), (12, True), (1, False), (6, False)])
def test_host_copy_views_need_element_alignment_only(offset, ok):
    """A view only uploaded or downloaded is a buffer copy, not an operator binding."""
    g = Graph()
    g.inputs.append("x")
    g.add_buffer("b", 256)
    g.add_view("host.v", "b", TensorDesc(T.FLOAT32, (4,)), offset)
    g.add(Upload("x", "host.v"))
    if ok:
        verify_graph(g)
    else:
        raises(g, "host.v", str(offset))


def test_offset_below_declared_alignment():
    g = Graph()
    g.add_buffer("b", 256)
    g.add_view("al.v", "b", TensorDesc(T.FLOAT32, (4,), alignment=64), 32)
    raises(g, "al.v", "32")


def test_invalid_descriptor_is_named_by_view():
    g = Graph()
    g.add_buffer("b", 256)
    g.add_view("bad.v", "b", TensorDesc(T.FLOAT32, (4,), total_size=18))
    raises(g, "bad.v", "multiple of 4")


def test_reading_a_buffer_nobody_wrote():
    g = Graph()
    a = packed(g, "a", T.FLOAT32, (2, 3))
    b = packed(g, "b", T.FLOAT32, (2, 3))
    g.add(ElementWiseIdentity(a, b))
    raises(g, "step 0", "ELEMENT_WISE_IDENTITY", a, "buffer a")


def test_reading_a_view_whose_buffer_another_view_wrote_is_fine():
    g = Graph()
    g.inputs.append("x")
    a = packed(g, "a", T.FLOAT32, (2, 3))
    g.add_view("a.t", "a", TensorDesc(T.FLOAT32, (3, 2), (1, 3)))
    b = packed(g, "b", T.FLOAT32, (3, 2))
    g.add(Upload("x", a))
    g.add(ElementWiseIdentity("a.t", b))
    verify_graph(g)


def test_download_of_unwritten_buffer():
    g = Graph()
    y = packed(g, "ybuf", T.FLOAT32, (3, 3))
    g.add(Download(y, "y", FLOAT, (3, 3)))
    g.outputs.append("y")
    raises(g, "step 0", "DOWNLOAD", y, "ybuf")


def test_symbol_used_before_its_readcount():
    g = nonzero_graph()
    download = g.steps.pop()                 # move the download before the readback
    g.steps.insert(3, download)
    raises(g, "step 3", "DOWNLOAD", "rows.v", "nnz")


def test_buffer_symbol_used_before_its_readcount():
    g = nonzero_graph()
    g.add_buffer("late", 8, ("nnz",))
    g.add_view("late.v", "late", TensorDesc(T.UINT32, (1, 1)))
    g.steps.insert(3, ClearBuffer("late"))
    g.steps.insert(4, Download("late.v", "z", 12, (1, 1)))
    raises(g, "step 4", "late.v", "nnz")


def test_upload_of_a_tensor_nobody_produced():
    g = Graph()
    v = packed(g, "in", T.FLOAT32, (4,))
    g.add(Upload("ghost", v))
    raises(g, "step 0", "UPLOAD", "ghost")


def test_upload_of_a_tensor_an_onnx_region_produced():
    g = Graph()
    g.inputs.append("a")
    v = packed(g, "in", T.FLOAT32, (4,))
    g.add(OnnxRegion("r0", ("relu",), ("a",), ("b",)))
    g.add(Upload("b", v))
    verify_graph(g)


def test_onnx_region_needing_an_unproduced_tensor():
    g = Graph()
    g.add(OnnxRegion("r0", ("relu",), ("nobody",), ("b",)))
    raises(g, "step 0", "ONNX_REGION", "nobody")


def test_output_never_produced():
    g = Graph()
    g.inputs.append("x")
    g.outputs.append("missing_y")
    raises(g, "missing_y")


def test_step_naming_an_unknown_view():
    g = Graph()
    g.add(DiagonalMatrix("phantom.v", 0, 1.0))
    raises(g, "step 0", "phantom.v")


@pytest.mark.parametrize("level,make,names", [
    ("5_0", lambda g: DiagonalMatrix1(None, packed(g, "d", T.FLOAT32, (3, 3)), T.FLOAT32, 1.0, 0, 1),
     ["DIAGONAL_MATRIX1", "5_0"]),
    ("4_0", lambda g: DiagonalMatrix(packed(g, "d", T.INT64, (3, 3)), 0, 1.0), ["DIAGONAL_MATRIX", "INT64", "4_0"]),
    ("2_1", lambda g: DiagonalMatrix(packed(g, "d", T.FLOAT32, (3, 3)), 0, 1.0), ["DIAGONAL_MATRIX", "2_1"]),
    ("1_0", lambda g: DiagonalMatrix(packed(g, "d", T.FLOAT32, (1, 1, 3, 3)), 0, 1.0), ["DIAGONAL_MATRIX", "1_0"]),
    ("5_1", lambda g: DiagonalMatrix(packed(g, "d", T.FLOAT32, (1, 1, 3, 3)), 2**31, 1.0),
     ["DIAGONAL_MATRIX", "Offset"]),
])
def test_operator_invalid_at_the_graphs_level(level, make, names):
    g = Graph(parse_level(level))
    g.add(make(g))
    raises(g, *names)


@pytest.mark.parametrize("level,ok", [("2_1", False), ("3_0", True), ("5_1", True)])
def test_nonzero_graph_at_level(level, ok):
    g = nonzero_graph(level)
    if ok:
        verify_graph(g)
    else:
        raises(g, "NONZERO_COORDINATES", level)


def test_readcount_must_read_a_uint32_scalar():
    g = nonzero_graph()
    g.steps[3] = ReadCount("coords.v", "nnz")
    raises(g, "step 3", "coords.v")


# -- JSON round trip ----------------------------------------------------------------------------

def _round_trip(graph):
    data = graph_to_dict(graph)
    text = json.dumps(data, allow_nan=False)          # strict JSON: no bare NaN / Infinity
    again = graph_from_dict(json.loads(text))
    return again, text


NONZERO_CASES = [((5,), FLOAT), ((2, 3), FLOAT), ((1, 1, 2, 4), FLOAT), ((2, 3, 4), INT32),
                 ((3, 1, 2, 2, 2), BOOL), ((), FLOAT), ((0, 3), FLOAT), ((7,), BOOL), ((4, 4), FLOAT16),
                 ((2, 2, 2, 2, 2, 2), UINT8)]
NONZERO_LEVELS = ["3_0", "3_1", "4_0", "4_1", "5_1", "6_4"]


class NoGraph:
    """The graph around a node lowered on its own: nothing else produces or reads its values."""

    def producer(self, tensor):
        return None

    def consumers(self, tensor):
        return []


def lower_alone(node, level):
    """The node's single-node rule (priority 0) on its static shapes: a Graph or Declined."""
    (rule,) = [i for i in idioms_for(node.op_type) if i.priority == 0]
    match = rule.match(node, NoGraph(), level)
    return match if isinstance(match, Declined) else match.build(match.static_shapes(), {}, level)


def lowered_graphs():
    graphs = []
    for level in NONZERO_LEVELS:
        for shape, onnx_type in NONZERO_CASES:
            if level in ("3_0", "3_1") and len(shape) > 5:
                continue
            node = NodeInfo("nz", "NonZero", 13, (TensorInfo("x", onnx_type, shape),),
                            (TensorInfo("y", INT64, None),))
            graphs.append((f"NonZero{list(shape)}@{level}", lower_alone(node, parse_level(level))))
    eye_cases = [((3, 3), FLOAT, {}), ((2, 5), FLOAT, {"k": 1}), ((4, 2), FLOAT16, {"k": -1}),
                 ((3, 4), INT32, {"k": -7}), ((3, 4), FLOAT, {"dtype": INT64, "k": 2}),
                 ((5, 5), FLOAT, {"dtype": BOOL}), ((2, 3), DOUBLE, {"k": 2**40}), ((0, 3), FLOAT, {})]
    for level in ["2_0", "2_1", "4_0", "5_1", "6_4"]:
        for shape, onnx_type, attrs in eye_cases:
            node = NodeInfo("eye", "EyeLike", 9, (TensorInfo("x", onnx_type, shape),),
                            (TensorInfo("y", attrs.get("dtype", onnx_type), shape),), dict(attrs))
            graphs.append((f"EyeLike{list(shape)}{attrs}@{level}", lower_alone(node, parse_level(level))))
    return graphs


LOWERED = lowered_graphs()
BUILT = [(n, g) for n, g in LOWERED if isinstance(g, Graph)]


def test_lowering_produces_enough_graphs_to_test():
    built = [g for _, g in LOWERED if isinstance(g, Graph)]
    assert len(built) >= 60
    kinds = {k for g in built for k in g.dml_operators}
    assert {"NONZERO_COORDINATES", "DIAGONAL_MATRIX"} <= kinds
    # NonZero lowers at every level from 3_0 for every case above
    for name, g in LOWERED:
        if name.startswith("NonZero") or name.endswith(("@5_1", "@6_4")):
            assert isinstance(g, Graph), (name, g)


@pytest.mark.parametrize("name,graph", BUILT, ids=[n for n, _ in BUILT])
def test_json_round_trip_of_lowered_graphs(name, graph):
    again, text = _round_trip(graph)
    assert again == graph
    assert graph_to_dict(again) == graph_to_dict(graph)
    assert json.dumps(graph_to_dict(again), allow_nan=False) == text
    verify_graph(again)
    assert format_graph(again) == format_graph(graph)


def _diag1_graph():
    """DIAGONAL_MATRIX1 steps whose values are NaN, +-inf, -0.0 and exact 64-bit integers."""
    g = Graph(parse_level("5_1"))
    g.inputs.append("x")
    x = packed(g, "xin", T.FLOAT64, (2, 3, 4))
    g.add(Upload("x", x))
    outs = [
        (None, packed(g, "o_nan", T.FLOAT32, (3, 4)), T.FLOAT32, float("nan"), 0, 1, FLOAT),
        (x, packed(g, "o_inf", T.FLOAT64, (2, 3, 4)), T.FLOAT64, float("inf"), -2**31, 1, DOUBLE),
        (None, packed(g, "o_ninf", T.FLOAT16, (1, 2, 3, 4)), T.FLOAT16, float("-inf"), 2, -1, FLOAT16),
        (None, packed(g, "o_nzero", T.FLOAT32, (3, 4)), T.FLOAT32, -0.0, 0, 2**31 - 1, FLOAT),
        (None, packed(g, "o_i64", T.INT64, (3, 4)), T.INT64, 2**62 + 1, -1, 2, INT64),
        (None, packed(g, "o_u64", T.UINT64, (3, 4)), T.UINT64, 2**64 - 1, 1, 0, UINT64),
        (None, packed(g, "o_i8", T.INT8, (4, 4)), T.INT8, -128, -2**31, 2**31 - 1, INT8),
    ]
    for index, (src, out, vtype, value, begin, end, onnx_type) in enumerate(outs):
        g.add(DiagonalMatrix1(src, out, vtype, value, begin, end))
        shape = g.views[out].desc.sizes
        g.add(Download(out, f"y{index}", onnx_type, shape))
        g.outputs.append(f"y{index}")
    g.add(EmptyTensor("empty", INT64, (3, 0)))
    g.add(OnnxRegion("region", ("a", "b"), ("x",), ("r",)))
    g.add(LowerAtRunTime("nz2", "nonzero", ("r",), ("s",)))
    return g


def _same_value(a, b):
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return type(a) is type(b) and a == b


def test_json_round_trip_with_nan_and_inf_values():
    g = _diag1_graph()
    verify_graph(g)
    again, text = _round_trip(g)
    assert "NaN" not in text and "Infinity" not in text
    assert again.feature_level == g.feature_level
    assert again.buffers == g.buffers
    assert again.views == g.views
    assert again.inputs == g.inputs and again.outputs == g.outputs
    assert len(again.steps) == len(g.steps)
    for before, after in zip(g.steps, again.steps):
        assert type(before) is type(after)
        for f in dataclasses.fields(before):
            x, y = getattr(before, f.name), getattr(after, f.name)
            assert _same_value(x, y), (before.kind, f.name, x, y)
    values = [s.value for s in again.steps if isinstance(s, DiagonalMatrix1)]
    assert math.isnan(values[0])
    assert values[1] == math.inf and values[2] == -math.inf
    assert values[3] == 0.0 and math.copysign(1.0, values[3]) == -1.0
    assert values[4] == 2**62 + 1 and type(values[4]) is int
    assert values[5] == 2**64 - 1 and values[6] == -128
    assert all(isinstance(s.value_data_type, DataType) for s in again.steps if isinstance(s, DiagonalMatrix1))
    verify_graph(again)
    # and a second trip is a fixed point
    assert json.dumps(graph_to_dict(again), allow_nan=False) == text


def test_from_dict_rejects_malformed_json():
    data = graph_to_dict(nonzero_graph())
    del data["views"][0]["desc"]["sizes"]
    with pytest.raises(DmlLowerError):
        graph_from_dict(data)
    data = graph_to_dict(nonzero_graph())
    data["steps"][0]["kind"] = "NOT_A_STEP"
    with pytest.raises(DmlLowerError, match="NOT_A_STEP"):
        graph_from_dict(data)


# -- printer ------------------------------------------------------------------------------------

PRINT_CASES = BUILT + [
    ("diag1", _diag1_graph()), ("hand-nonzero", nonzero_graph()), ("hand-nonzero-3_0", nonzero_graph("3_0"))]


@pytest.mark.parametrize("name,graph", PRINT_CASES, ids=[n for n, _ in PRINT_CASES])
def test_printer_mentions_every_buffer_view_and_operator(name, graph):
    text = format_graph(graph)
    assert graph.feature_level.name in text
    for buffer in graph.buffers:
        assert buffer in text, buffer
    for view in graph.views:
        assert view in text, view
    for step in graph.steps:
        if isinstance(step, OnnxRegion):
            assert step.name in text and all(n in text for n in step.onnx_nodes)
        if isinstance(step, LowerAtRunTime):
            assert step.onnx_node in text and step.rule in text
    for kind in graph.dml_operators:
        assert f"DML_OPERATOR_{kind}" in text
    for tensor in graph.inputs + graph.outputs:
        assert tensor in text


def test_printer_mentions_a_view_no_step_uses_yet():
    g = nonzero_graph()
    g.add_view("spare.v", "coords", TensorDesc(T.UINT32, (8, 3), (1, 8)))
    text = format_graph(g)
    assert "spare.v" in text


def test_printer_shows_operator_attributes():
    text = format_graph(_diag1_graph())
    for fragment in ["nan", "inf", "-inf", str(2**62 + 1), str(2**64 - 1), str(-2**31), str(2**31 - 1), "FLOAT16"]:
        assert fragment in text, fragment
    g = Graph(parse_level("4_0"))
    g.add(DiagonalMatrix(packed(g, "eyebuf", T.FLOAT32, (3, 5)), -2, 2.5))
    text = format_graph(g)
    assert "DML_OPERATOR_DIAGONAL_MATRIX" in text and "-2" in text and "2.5" in text and "eyebuf.v" in text


def test_json_round_trips_a_data_type_field_of_any_name(monkeypatch):
    """A new operator's DataType field is written by name and read back whatever it is called."""
    from typing import ClassVar

    from onnx_dml_lowering.ir.operators import STEP_TYPES, Step
    from onnx_dml_lowering.ir.serialize import step_from_dict, step_to_dict

    @dataclasses.dataclass(frozen=True)
    class Filled(Step):
        output: str
        fill_type: DataType
        kind: ClassVar[str] = "TEST_FILLED"

    monkeypatch.setitem(STEP_TYPES, Filled.kind, Filled)
    step = Filled("o.view", DataType.FLOAT16)
    data = json.loads(json.dumps(step_to_dict(step)))
    assert data["fill_type"] == "FLOAT16" and step_from_dict(data) == step
