"""NonZero idioms: Transpose(NonZero) with no copy, and per-axis columns as views (as_tuple)."""
import itertools

import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import ALL_LEVELS
from onnx_dml_lowering.lowering.node import NodeInfo, TensorInfo
from onnx_dml_lowering.lowering.nonzero_idioms import slice_index
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


# -- rows of NonZero's own [rank, nnz] layout, no Transpose (YOLOv5's `(x > t).nonzero().T`) -------

BIG = 2**62            # "to the end", as exporters write it


def slice_bounds(r, rank, form):
    """(start, end, axis, step) of a Slice keeping row r alone, in the spellings exporters and hand-written
    models use: plain, counted from the end (axis -2 or -1), clamped past either end, backwards, strided."""
    return {"slice": (r, r + 1, 0, None),
            "slice_negative": (r - rank, r + 1 - rank if r + 1 < rank else BIG, -2, None),
            "slice_clamped": (r if r else -BIG, r + 1 if r + 1 < rank else BIG, 0, 1),
            "slice_backwards": (r, r - 1 if r else -BIG, 0, -1),
            "slice_strided": (r, BIG, 0, rank)}[form]


def taken(form, data, r, rank, axis, name, opset):
    """Nodes and initializers taking index r of `axis` of `data` (2-D) into `name` ([nnz])."""
    if form.startswith("gather"):
        index = r - rank if form == "gather_negative" else r
        return [h.make_node("Gather", [data, f"k{r}"], [name], name=f"take{r}", axis=axis)], \
            [h.make_tensor(f"k{r}", T.INT64, [], [index])]
    start, end, slice_axis, step = slice_bounds(r, rank, form)
    slice_axis = slice_axis if axis == 0 else (1 if slice_axis == 0 else -1)
    inits = [h.make_tensor(f"s{r}", T.INT64, [1], [start]), h.make_tensor(f"e{r}", T.INT64, [1], [end]),
             h.make_tensor(f"a{r}", T.INT64, [1], [slice_axis])]
    ins = [data, f"s{r}", f"e{r}", f"a{r}"]
    if step is not None:
        inits.append(h.make_tensor(f"st{r}", T.INT64, [1], [step]))
        ins.append(f"st{r}")
    squeeze = (h.make_node("Squeeze", [f"row{r}"], [name], name=f"sq{r}", axes=[axis]) if opset < 13 else
               h.make_node("Squeeze", [f"row{r}", f"q{r}"], [name], name=f"sq{r}"))
    inits += [] if opset < 13 else [h.make_tensor(f"q{r}", T.INT64, [1], [axis - 2])]
    return [h.make_node("Slice", ins, [f"row{r}"], name=f"slice{r}"), squeeze], inits


def rows_model(x_type, shape, form, rows=None, opset=13, transpose=False):
    """NonZero [-> Transpose] -> one taker per row (Slice + Squeeze, Split + Squeeze, Gather)."""
    rank = len(shape)
    rows = range(rank) if rows is None else rows
    axis = 1 if transpose else 0
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz")]
    if transpose:
        nodes.append(h.make_node("Transpose", ["nz"], ["t"], name="tr", perm=[1, 0]))
    data, inits = "t" if transpose else "nz", []
    if form.startswith("split"):
        outs = [f"c{i}" for i in range(rank)]
        if form == "split18":
            nodes.append(h.make_node("Split", [data], outs, name="split", axis=axis - 2, num_outputs=rank))
        elif opset < 13:
            nodes.append(h.make_node("Split", [data], outs, name="split", axis=axis, split=[1] * rank))
        else:
            inits.append(h.make_tensor("ones", T.INT64, [rank], [1] * rank))
            nodes.append(h.make_node("Split", [data, "ones"], outs, name="split", axis=axis))
        inits += [] if opset < 13 else [h.make_tensor("ax", T.INT64, [1], [axis])]
        nodes += [h.make_node("Squeeze", [f"c{i}"], [f"y{i}"], name=f"sq{i}", axes=[axis]) if opset < 13 else
                  h.make_node("Squeeze", [f"c{i}", "ax"], [f"y{i}"], name=f"sq{i}") for i in range(rank)]
        return model(nodes, x_type, shape, [(f"y{i}", 1) for i in range(rank)], inits, opset)
    for r in rows:
        more, more_inits = taken(form, data, r, rank, axis, f"y{r}", opset)
        nodes += more
        inits += more_inits
    return model(nodes, x_type, shape, [(f"y{r}", 1) for r in rows], inits, opset)


ROW_FORMS = ["slice", "slice_negative", "slice_clamped", "slice_backwards", "slice_strided", "gather",
             "gather_negative", "split13", "split11", "split18"]
ROW_OPSETS = {"split11": 11, "split18": 18}


def run_densities(m, x_type, shape, rng, level="5_1"):
    for density in (0.0, 0.4, 1.0):
        compiled = differential(m, {"x": make_input(x_type, shape, density, rng)}, level).compiled
    return compiled


@pytest.mark.parametrize("x_type", [T.FLOAT, T.BOOL, T.INT8, T.FLOAT16, T.INT64])
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("form", ROW_FORMS)
def test_rows_idiom(x_type, rank, form, rng):
    shape = SHAPES[rank]
    m = rows_model(x_type, shape, form, opset=ROW_OPSETS.get(form, 13))
    compiled = run_densities(m, x_type, shape, rng)
    (entry,) = compiled.placement
    assert entry.rule == "nonzero_rows" and entry.status == "lowered", entry
    assert len(entry.onnx_nodes) == 1 + {"slice": 2 * rank, "gather": rank, "split": 1 + rank}[form.split("_")[0].rstrip("0123456789")]
    # each row a view: nothing after NONZERO_COORDINATES (before it, a 64-bit input's words are combined)
    assert compiled.graph.dml_operators[-1:] == ["NONZERO_COORDINATES"] and compiled.session().log == []


@pytest.mark.parametrize("form", ["slice", "gather", "split13"])
@pytest.mark.parametrize("shape", [(0,), (3, 0, 2), (0, 0)])
def test_rows_idiom_empty(form, shape, rng):
    compiled = differential(rows_model(T.FLOAT, shape, form), {"x": make_input(T.FLOAT, shape, 0.5, rng)}).compiled
    assert compiled.placement[0].rule == "nonzero_rows" and compiled.graph.dml_operators == []


def test_rows_idiom_opset_9_slice_attributes(rng):
    """Slice-1 takes starts / ends / axes as attributes, Squeeze-1 its axes."""
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz")]
    for r in range(3):
        nodes += [h.make_node("Slice", ["nz"], [f"row{r}"], name=f"slice{r}", starts=[r - 3], ends=[r + 1], axes=[0]),
                  h.make_node("Squeeze", [f"row{r}"], [f"y{r}"], name=f"sq{r}", axes=[0])]
    m = model(nodes, T.FLOAT, (2, 3, 4), [(f"y{r}", 1) for r in range(3)], opset=9)
    compiled = run_densities(m, T.FLOAT, (2, 3, 4), rng)
    assert compiled.placement[0].rule == "nonzero_rows"


def test_rows_idiom_some_rows_repeated(rng):
    shape = (2, 3, 4)
    m = rows_model(T.FLOAT, shape, "gather", rows=[2, 0])
    m.graph.node.extend([h.make_node("Gather", ["nz", "k_again"], ["again"], name="again", axis=0)])
    m.graph.initializer.append(h.make_tensor("k_again", T.INT64, [], [-1]))      # row 2 once more, as -1
    m.graph.output.append(h.make_tensor_value_info("again", T.INT64, [None]))
    compiled = run_densities(m, T.FLOAT, shape, rng)
    (entry,) = compiled.placement
    assert entry.rule == "nonzero_rows" and len(entry.onnx_nodes) == 4


@pytest.mark.parametrize("level", ["2_1", "3_0", "4_0", "5_1"])
def test_rows_idiom_levels(level, rng):
    shape = SHAPES[3]
    compiled = run_densities(rows_model(T.FLOAT, shape, "slice"), T.FLOAT, shape, rng, level)
    assert compiled.placement[0].status == ("onnx" if level == "2_1" else "lowered")


# -- nz[:, k]: Gather of one index of the transposed coordinates ------------------------------------

@pytest.mark.parametrize("x_type", [T.FLOAT, T.BOOL, T.UINT16])
@pytest.mark.parametrize("rank", [1, 2, 3, 5])
@pytest.mark.parametrize("form", ["gather", "gather_negative"])
def test_columns_idiom_gather(x_type, rank, form, rng):
    shape = SHAPES[rank]
    compiled = run_densities(rows_model(x_type, shape, form, transpose=True), x_type, shape, rng)
    (entry,) = compiled.placement
    assert entry.rule == "nonzero_columns" and len(entry.onnx_nodes) == 2 + rank, entry
    assert compiled.graph.dml_operators == ["NONZERO_COORDINATES"]


@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 4), (0, 3)])
def test_gather_of_a_one_element_index_keeps_the_axis(transpose, shape, rng):
    """Gather with indices [k] (1-D): [nnz, 1] of the transposed coordinates, [1, nnz] of NonZero's."""
    rank = len(shape)
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz")]
    if transpose:
        nodes.append(h.make_node("Transpose", ["nz"], ["t"], name="tr", perm=[1, 0]))
    nodes += [h.make_node("Gather", ["t" if transpose else "nz", "k"], ["y"], name="take", axis=int(transpose)),
              h.make_node("Gather", ["t" if transpose else "nz", "k0"], ["y0"], name="take0", axis=int(transpose))]
    m = model(nodes, T.FLOAT, shape, [("y", 2), ("y0", 1)],
              [h.make_tensor("k", T.INT32, [1], [rank - 1]), h.make_tensor("k0", T.INT64, [], [0])])
    compiled = run_densities(m, T.FLOAT, shape, rng)          # the shapes too are the reference's
    assert compiled.placement[0].rule == ("nonzero_columns" if transpose else "nonzero_rows")


def onnx_text_slice(start, end, step, size):
    """The indices Slice keeps by the ONNX operator text: negative bounds + size, then start clamped
    to [0, size] and end to [0, size] stepping forward, [0, size - 1] and [-1, size - 1] stepping back."""
    start, end = start + size if start < 0 else start, end + size if end < 0 else end
    low, high = (0, size) if step > 0 else (-1, size - 1)
    start = min(max(start, 0), size if step > 0 else size - 1)
    kept, i = [], start
    end = min(max(end, low), high)
    while (i < end) if step > 0 else (i > end):
        kept.append(i)
        i += step
    return kept


class _Constants:
    """The one thing slice_index asks of a graph view: constant values by name."""

    def __init__(self, values):
        self.values = values

    def constant(self, name):
        return self.values.get(name)


@pytest.mark.parametrize("rank", [1, 2, 3, 4])
def test_slice_index_agrees_with_reference_and_the_onnx_text(rank):
    """Every Slice slice_index takes keeps that one row by numpy's clamping (onnx.reference's) and
    by the ONNX text's; where they differ (a start before the axis stepping back) it takes none."""
    bounds = list(range(-rank - 2, rank + 3)) + [2**62, -2**62]
    names = ["data", "s", "e", "a", "st"]
    node = NodeInfo("slice", "Slice", 13, tuple(TensorInfo(n, T.INT64, None) for n in names), ())
    taken = 0
    for start, end, step in itertools.product(bounds, bounds, (1, 2, 3, -1, -2)):
        view = _Constants({"s": [start], "e": [end], "a": [0], "st": [step]})
        numpy_kept = list(range(rank)[start:end:step])
        text_kept = onnx_text_slice(start, end, step, rank)
        index = slice_index(view, node, rank, 0)
        if index is None:
            assert len(numpy_kept) != 1 or numpy_kept != text_kept, (start, end, step)
        else:
            taken += 1
            assert numpy_kept == text_kept == [index], (start, end, step)
    assert taken >= rank


@pytest.mark.parametrize("keepdims,squeeze,split", [(0, False, False), (1, True, False), (1, False, False),
                                                    (0, False, True)])
def test_rows_idiom_split_to_sequence(keepdims, squeeze, split, rng):
    """SplitToSequence(axis 0) of NonZero itself: a kept unit axis is [1, nnz] in this layout."""
    nodes, inits, outs = [h.make_node("NonZero", ["x"], ["nz"], name="nz")], [], []
    if split:
        inits.append(h.make_tensor("one", T.INT64, [], [1]))
    nodes.append(h.make_node("SplitToSequence", ["nz"] + (["one"] if split else []), ["seq"], name="un", axis=0,
                             keepdims=keepdims))
    keep = split or keepdims == 1
    for i in range(3):
        inits.append(h.make_tensor(f"p{i}", T.INT64, [], [i - 1]))
        nodes.append(h.make_node("SequenceAt", ["seq", f"p{i}"], [f"a{i}"], name=f"at{i}"))
        out = f"a{i}"
        if squeeze and keep:
            inits.append(h.make_tensor(f"q{i}", T.INT64, [1], [0]))
            nodes.append(h.make_node("Squeeze", [out, f"q{i}"], [f"y{i}"], name=f"sq{i}"))
            out = f"y{i}"
        outs.append((out, 2 if keep and not squeeze else 1))
    m = model(nodes, T.FLOAT, [None, None, None], outs, inits)
    for shape in ((2, 3, 4), (0, 3, 1)):
        compiled = run_densities(m, T.FLOAT, shape, rng)
        assert compiled.placement[0].rule == "nonzero_rows" and compiled.placement[0].status == "lowered"
