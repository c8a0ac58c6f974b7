"""NonZero idioms: Transpose(NonZero) with no copy, and per-axis columns as views (as_tuple)."""
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import ALL_LEVELS
from tests.builders import graph_model
from tests.oracle import differential
from tests.lowering.test_nonzero import SHAPES, make_input


def model(nodes, x_type, x_shape, outputs, inits=(), opset=13):
    """x -> nodes -> int64 outputs given as (name, rank)."""
    return graph_model(nodes, [("x", x_type, x_shape)], [(o, T.INT64, r) for o, r in outputs], inits, opset)


def transpose_model(x_type, shape, perm=(1, 0)):
    attrs = {"perm": list(perm)} if perm is not None else {}
    return model([h.make_node("NonZero", ["x"], ["nz"], name="nz"),
                  h.make_node("Transpose", ["nz"], ["y"], name="tr", **attrs)], x_type, shape, [("y", 2)])


def slice_columns_model(x_type, shape, columns=None, negative=False):
    rank = len(shape)
    columns = range(rank) if columns is None else columns
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz"), h.make_node("Transpose", ["nz"], ["t"], name="tr", perm=[1, 0])]
    inits, outs = [], []
    for i in columns:
        # Negative form: starts counted from the end, the last column's end "to infinity".
        start = i - rank if negative else i
        if negative:
            end = i + 1 - rank if i + 1 < rank else 2**62
        else:
            end = start + 1
        inits += [h.make_tensor(f"s{i}", T.INT64, [1], [start]), h.make_tensor(f"e{i}", T.INT64, [1], [end]),
                  h.make_tensor(f"a{i}", T.INT64, [1], [-1 if negative else 1])]
        nodes += [h.make_node("Slice", ["t", f"s{i}", f"e{i}", f"a{i}"], [f"col{i}"], name=f"slice{i}"),
                  h.make_node("Squeeze", [f"col{i}", f"a{i}"], [f"y{i}"], name=f"squeeze{i}")]
        outs.append((f"y{i}", 1))
    return model(nodes, x_type, shape, outs, inits)


def split_columns_model(x_type, shape, opset=13):
    rank = len(shape)
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz"), h.make_node("Transpose", ["nz"], ["t"], name="tr", perm=[1, 0])]
    inits = [h.make_tensor("axes", T.INT64, [1], [1])]
    if opset >= 13:
        inits.append(h.make_tensor("split", T.INT64, [rank], [1] * rank))
        nodes.append(h.make_node("Split", ["t", "split"], [f"c{i}" for i in range(rank)], name="split", axis=1))
        nodes += [h.make_node("Squeeze", [f"c{i}", "axes"], [f"y{i}"], name=f"sq{i}") for i in range(rank)]
    else:
        inits = []
        nodes.append(h.make_node("Split", ["t"], [f"c{i}" for i in range(rank)], name="split", axis=1, split=[1] * rank))
        nodes += [h.make_node("Squeeze", [f"c{i}"], [f"y{i}"], name=f"sq{i}", axes=[1]) for i in range(rank)]
    return model(nodes, x_type, shape, [(f"y{i}", 1) for i in range(rank)], inits, opset=opset)


TYPES = [T.FLOAT, T.BOOL, T.INT8, T.UINT16, T.FLOAT16, T.INT32]


@pytest.mark.parametrize("x_type", TYPES)
@pytest.mark.parametrize("rank", [0, 1, 2, 3, 5, 8])
@pytest.mark.parametrize("perm", [(1, 0), None])
def test_transpose_idiom(x_type, rank, perm, rng):
    m = transpose_model(x_type, SHAPES[rank], perm)
    for density in (0.0, 0.3, 1.0):
        compiled = differential(m, {"x": make_input(x_type, SHAPES[rank], density, rng)}).compiled
    (entry,) = compiled.placement
    assert entry.rule == "nonzero_transpose" and entry.onnx_nodes == ["nz", "tr"]
    # No transpose, no crop: NONZERO_COORDINATES is the only DirectML operator.
    assert compiled.graph.dml_operators == ["NONZERO_COORDINATES"]


@pytest.mark.parametrize("shape", [(0,), (3, 0, 2)])
def test_transpose_idiom_empty(shape, rng):
    compiled = differential(transpose_model(T.FLOAT, shape), {"x": make_input(T.FLOAT, shape, 0.5, rng)}).compiled
    assert compiled.placement[0].rule == "nonzero_transpose" and compiled.graph.dml_operators == []


@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
def test_transpose_idiom_every_level(level, rng):
    shape = SHAPES[3]
    compiled = differential(transpose_model(T.FLOAT, shape), {"x": make_input(T.FLOAT, shape, 0.5, rng)}, level).compiled
    entry = compiled.placement[0]
    assert (entry.status == "lowered") == (level.name >= "3_0"), entry.reason


@pytest.mark.parametrize("x_type", TYPES)
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("form", ["slice", "slice_negative", "split13", "split11"])
def test_columns_idiom(x_type, rank, form, rng):
    shape = SHAPES[rank]
    m = {"slice": lambda: slice_columns_model(x_type, shape),
         "slice_negative": lambda: slice_columns_model(x_type, shape, negative=True),
         "split13": lambda: split_columns_model(x_type, shape, 13),
         "split11": lambda: split_columns_model(x_type, shape, 11)}[form]()
    for density in (0.0, 0.4, 1.0):
        compiled = differential(m, {"x": make_input(x_type, shape, density, rng)}).compiled
    (entry,) = compiled.placement
    assert entry.rule == "nonzero_columns", entry
    assert compiled.graph.dml_operators == ["NONZERO_COORDINATES"]
    assert len(entry.onnx_nodes) == 2 + (2 * rank if form.startswith("slice") else 1 + rank)


def test_columns_idiom_with_some_axes_only(rng):
    shape = (3, 4, 2)
    compiled = differential(slice_columns_model(T.FLOAT, shape, columns=[2, 0]), {"x": make_input(T.FLOAT, shape, 0.5, rng)}).compiled
    assert compiled.placement[0].rule == "nonzero_columns"


@pytest.mark.parametrize("level", ["2_1", "3_0", "4_0", "5_1"])
def test_columns_idiom_levels(level, rng):
    shape = SHAPES[3]
    compiled = differential(split_columns_model(T.FLOAT, shape), {"x": make_input(T.FLOAT, shape, 0.5, rng)}, level).compiled
    assert compiled.placement[0].status == ("onnx" if level == "2_1" else "lowered")


def test_idiom_declines_when_an_intermediate_is_used_elsewhere(rng):
    """NonZero's own output is also a graph output: only the plain NonZero rule applies."""
    m = model([h.make_node("NonZero", ["x"], ["nz"], name="nz"),
               h.make_node("Transpose", ["nz"], ["y"], name="tr", perm=[1, 0])], T.FLOAT, (3, 4), [("y", 2), ("nz", 2)])
    compiled = differential(m, {"x": make_input(T.FLOAT, (3, 4), 0.5, rng)}).compiled
    assert [p.rule for p in compiled.placement] == ["nonzero"]


@pytest.mark.parametrize("x_type", [T.DOUBLE, T.INT64, T.UINT64])
def test_64bit_input_in_the_idiom(x_type, rng):
    compiled = differential(transpose_model(x_type, (3, 4)), {"x": make_input(x_type, (3, 4), 0.5, rng)}).compiled
    (entry,) = compiled.placement
    assert entry.rule == "nonzero_transpose" and "ELEMENT_WISE_BIT_OR" in entry.dml_operators


def test_transpose_result_is_the_coordinate_buffer_prefix():
    compiled = compile_model(transpose_model(T.FLOAT, (3, 4)))
    graph = compiled.graph
    (op,) = [s for s in graph.steps if s.kind == "NONZERO_COORDINATES"]
    coords = graph.views[op.output_coordinates]
    assert coords.desc.sizes == (12, 2) and coords.desc.strides == (4, 2)
    (download,) = [s for s in graph.steps if s.kind == "DOWNLOAD"]
    result = graph.views[download.view]
    assert result.buffer == coords.buffer and result.offset == 0 and result.desc.strides is None
