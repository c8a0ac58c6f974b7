"""tf2onnx's MatrixBandPart (tf.linalg.band_part) index grid lowered to one DIAGONAL_MATRIX1 band:
the graph exactly as tf2onnx emits it over num_lower x num_upper x shapes (batch dimensions too) x
dtypes x opsets 13 / 18, differential against onnx.reference and a plain numpy band_part; near
misses decline with their reason and still give the ONNX answer."""
from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from tests.lowering.tf_band_part import band_part_model
from tests.oracle import differential

RULE = "index_grid_band_mask"
BOUNDS = [(-1, 0), (0, -1), (1, 2), (2, 0), (0, 3), (5, 1), (1, 1)]
# declared shape, fed shape: rank 2 static and symbolic, batch dimensions, wide and tall, 1 x 1
SHAPES = [((4, 4), (4, 4)), (("r", "c"), (3, 5)), (("b", "r", "c"), (2, 5, 3)),
          ((2, "h", "r", "c"), (2, 3, 4, 4)), (("r", "c"), (1, 1)), ((6, 2), (6, 2))]
# each dtype at one opset, alternating, so both opsets see every shape and bound
DTYPES = [(T.FLOAT, 13), (T.FLOAT16, 18), (T.INT32, 13), (T.INT64, 18), (T.BOOL, 13), (T.DOUBLE, 18)]


def numpy_band_part(x: np.ndarray, num_lower: int, num_upper: int) -> np.ndarray:
    """tf.linalg.band_part's definition: keep (i, j) where (lower < 0 or i - j <= lower) and
    (upper < 0 or j - i <= upper)."""
    rows, cols = x.shape[-2:]
    d = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = ((num_lower < 0) | (-d <= num_lower)) & ((num_upper < 0) | (d <= num_upper))
    return np.where(keep, x, np.zeros((), x.dtype))


def feed(shape, elem: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    if elem == T.BOOL:
        return rng.random(shape) < 0.7
    if dtype.kind == "f":
        return (rng.standard_normal(shape) + 3).astype(dtype)      # no zero: the mask shows
    return rng.integers(1, 100, shape).astype(dtype)


def _node(model: onnx.ModelProto, op: str) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.op_type == op)


def lowered(compiled) -> "list":
    return [p for p in compiled.placement if p.rule == RULE and p.status == "lowered"]


@pytest.mark.parametrize("bounds,shapes", list(itertools.product(BOUNDS, SHAPES)))
def test_tf2onnx_band_part_grid(bounds, shapes) -> None:
    num_lower, num_upper = bounds
    declared, fed = shapes
    for k, (elem, opset) in enumerate(DTYPES):
        model = band_part_model(num_lower, num_upper, declared, elem, opset)
        x = feed(fed, elem, seed=k)
        result = differential(model, {"x": x})
        assert np.array_equal(result.outputs["y"], numpy_band_part(x, num_lower, num_upper))
        (entry,) = lowered(result.compiled)
        assert {"CumSum", "Reshape", "Div", "Mod", "Sub", "Greater", "Not"} <= \
            {n.split("/")[-1].split("__")[0] for n in entry.onnx_nodes}
        assert entry.dml_operators == ["DIAGONAL_MATRIX1"] or (num_lower, num_upper) in ((0, 0),)
        low = "(-inf" if num_lower < 0 else f"[{-num_lower}"          # an infinite end is open
        high = "+inf)" if num_upper < 0 else f"{num_upper + 1})"
        assert entry.extra["band"] == f"x - y in {low}, {high}"
        assert result.compiled.session().log == []


@pytest.mark.parametrize("bound_type", [T.INT32, T.INT64])
def test_bounds_not_int64_go_through_their_cast(bound_type) -> None:
    model = band_part_model(2, 1, ("r", "c"), T.FLOAT, 13, bound_type=bound_type)
    x = feed((5, 6), T.FLOAT, 0)
    result = differential(model, {"x": x})
    assert np.array_equal(result.outputs["y"], numpy_band_part(x, 2, 1))
    assert lowered(result.compiled)[0].extra["band"] == "x - y in [-2, 2)"


@pytest.mark.parametrize("elem,opset", DTYPES)
def test_eyelike_form_and_identity_form(elem, opset) -> None:
    """(0, 0) is tf2onnx's EyeLike form, lowered by the eye rules; (-1, -1) an Identity: no mask."""
    for declared, fed in (((4, 5), (4, 5)), (("b", "r", "c"), (2, 3, 4))):
        model = band_part_model(0, 0, declared, elem, opset)
        x = feed(fed, elem, 1)
        result = differential(model, {"x": x})
        assert np.array_equal(result.outputs["y"], numpy_band_part(x, 0, 0))
        assert any(p.status == "lowered" for p in result.compiled.placement)
    model = band_part_model(-1, -1, ("r", "c"), elem, opset)
    assert differential(model, {"x": feed((3, 3), elem, 2)}).compiled.placement == []


@settings(max_examples=30, deadline=None)
@given(num_lower=st.integers(-1, 7), num_upper=st.integers(-1, 7), rows=st.integers(1, 7),
       cols=st.integers(1, 7), batch=st.lists(st.integers(1, 3), max_size=2), opset=st.sampled_from([13, 18]))
def test_band_part_property(num_lower, num_upper, rows, cols, batch, opset) -> None:
    if (num_lower, num_upper) in ((0, 0), (-1, -1)):
        return                                              # not the index grid (above)
    declared = tuple(f"b{i}" for i in range(len(batch))) + ("r", "c")
    model = band_part_model(num_lower, num_upper, declared, T.FLOAT, opset)
    x = feed(tuple(batch) + (rows, cols), T.FLOAT, rows * 8 + cols)
    result = differential(model, {"x": x})
    assert np.array_equal(result.outputs["y"], numpy_band_part(x, num_lower, num_upper))
    assert lowered(result.compiled) and result.compiled.session().log == []


def test_bounds_fed_at_run_time() -> None:
    """num_upper a graph input: the band is read from its value when the sizes are known."""
    model = band_part_model(1, 2, ("r", "c"))
    upper = next(i for i in model.graph.initializer if i.name.startswith("num_upper"))
    model.graph.input.append(h.make_tensor_value_info(upper.name, T.INT64, []))
    model.graph.initializer.remove(upper)
    (entry,) = lowered(compile_model(model))
    assert entry.extra["band"] == "x - y bounds from run-time values"
    for value in (-1, 0, 3):
        x = feed((4, 6), T.FLOAT, value + 5)
        result = differential(model, {"x": x, upper.name: np.array(value, np.int64)})
        d = np.arange(6)[None, :] - np.arange(4)[:, None]         # the graph's own d <= value, -1 too
        assert np.array_equal(result.outputs["y"], np.where((-d <= 1) & (d <= value), x, np.float32(0)))


@pytest.mark.parametrize("bounds", [(1, 2), (-1, 0), (0, -1), (3, 0)])
def test_difference_taken_row_minus_column(bounds) -> None:
    """Sub(row, col) = i - j: the same comparisons mean the mirrored band, still one band."""
    model = band_part_model(*bounds, ("b", "r", "c"))
    sub = _node(model, "Sub")
    sub.input[:] = [sub.input[1], sub.input[0]]
    x = feed((2, 4, 6), T.FLOAT, 7)
    result = differential(model, {"x": x})
    assert np.array_equal(result.outputs["y"], numpy_band_part(x, bounds[1], bounds[0]))
    assert lowered(result.compiled) and result.compiled.session().log == []


# -- near misses: decline with a reason, the answer still the ONNX one ------------------------------

def _div_by_rows(model):
    _node(model, "Div").input[1] = _node(model, "Mul").input[0]


def _inclusive(model):
    next(a for a in _node(model, "CumSum").attribute if a.name == "exclusive").i = 0


def _counts_twos(model):
    expand = _node(model, "Expand")
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(2, np.int64), "two"))
    expand.input[0] = "two"


def _two_diagonals(model):
    """Equal instead of Greater, no Not, Or instead of And: d == 2 or d == -1, two separate diagonals."""
    for node in model.graph.node:
        if node.op_type == "Greater":
            node.op_type = "Equal"
        elif node.op_type == "Not":
            node.op_type = "Identity"
        elif node.op_type == "And":
            node.op_type = "Or"


def _vector_bound(model):
    upper = next(i for i in model.graph.initializer if i.name.startswith("num_upper"))
    upper.CopyFrom(onnx.numpy_helper.from_array(np.array([[0, 1, 2, 3, 4]], np.int64), upper.name))


@pytest.mark.parametrize("mutate,reason,when", [
    (_div_by_rows, "Div by [4], not by the column count 5", "run"),
    (_inclusive, "CumSum is not exclusive and forward", "compile"),
    (_counts_twos, "CumSum counts Expand(2, ...), not ones", "compile"),
    (_two_diagonals, "the mask is no band of diagonals (bounds [-1, 2])", "run"),
    (_vector_bound, "a bound of shape [1, 5] is no scalar", "run"),
])
def test_near_misses_decline_with_their_reason(mutate, reason, when) -> None:
    model = band_part_model(1, 2, (4, 5))
    mutate(model)
    onnx.checker.check_model(model, full_check=True)
    x = feed((4, 5), T.FLOAT, 3)
    result = differential(model, {"x": x})
    (entry,) = [p for p in result.compiled.placement if p.rule == RULE]
    if when == "compile":
        assert entry.status == "onnx" and reason in entry.reason
    else:
        log = result.compiled.session().log
        assert entry.status == "lowered" and len(log) == 1 and reason in log[0], log
