"""runtime.feeds' random feeds, drawn through the Python API: an explicit value range holds (no
forced zeros, no -0.0 unless a zero fraction asks), per-input ranges and zero fractions beside the
global ones, 0-d inputs drawn like any other, and one-line errors for an input the model lacks or a
range no draw can come from. (What the CLI makes of --val-range / --zero-fraction, and the report's
'feeds:' line, are tested in tests/compiler/test_feed_sources.py and test_feed_report.py.)"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.dtypes import onnx_to_numpy
from onnx_dml_lowering.runtime.feeds import random_feeds
from tests.builders import tensor

TYPES = [T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16, T.INT8, T.INT32, T.INT64, T.UINT8, T.UINT16]
SCALARS = [T.BOOL, T.FLOAT, T.DOUBLE, T.FLOAT16, T.BFLOAT16, T.INT64, T.INT32, T.UINT8, T.INT8]


@pytest.mark.parametrize("elem", TYPES)
@pytest.mark.parametrize("bounds", [(5, 6), (-3, -1), (1, 1), (0.5, 2.5)])
def test_explicit_range_holds_without_a_zero_fraction(elem, bounds) -> None:
    if elem in (T.UINT8, T.UINT16) and bounds[1] < 0:
        return                              # no unsigned value there: refused, as tested elsewhere
    feeds = random_feeds([tensor("x", elem, [40, 50])], seed=1, value_range=bounds)
    values = feeds["x"].astype(np.float64)
    assert values.min() >= np.floor(bounds[0]) and values.max() <= bounds[1] + 1e-2 * abs(bounds[1])
    assert not np.any(values == 0) and not np.any(np.signbit(values) & (values == 0))


@pytest.mark.parametrize("fraction", [0.25, 0.5, 1.0])
def test_a_zero_fraction_given_with_the_range_still_zeroes(fraction) -> None:
    for per_input in (False, True):
        kwargs = ({"input_zero_fraction": {"x": fraction}} if per_input else {"zero_fraction": fraction})
        x = random_feeds([tensor("x", T.FLOAT, [100, 100])], seed=2, value_range=(5, 6), **kwargs)["x"]
        assert abs(np.mean(x == 0) - fraction) < 0.02
        assert np.all((x == 0) | ((x >= 5) & (x <= 6)))


def test_per_input_range_leaves_other_inputs_their_default_zeros() -> None:
    feeds = random_feeds([tensor("x", T.INT64, [100, 100]), tensor("y", T.INT64, [100, 100]),
                          tensor("b", T.BOOL, [100, 100])], seed=3, input_value_range={"x": (5, 6)})
    assert not np.any(feeds["x"] == 0)
    assert abs(np.mean(feeds["y"] == 0) - 0.5) < 0.03          # the default: half zero
    assert abs(np.mean(feeds["b"]) - 0.5) < 0.03                # booleans: half true, range or not


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([T.FLOAT, T.DOUBLE, T.INT32, T.INT64]), st.integers(-10**6, 10**6),
       st.integers(0, 10**6), st.integers(0, 2**31))
def test_range_property(elem, lo, width, seed) -> None:
    x = random_feeds([tensor("x", elem, [7, 5])], seed=seed, value_range=(lo, lo + width))["x"]
    hi, values = lo + width, x.astype(np.float64)
    assert lo - abs(lo) * 1e-6 <= values.min() and values.max() <= hi + abs(hi) * 1e-6   # float32 rounding


@pytest.mark.parametrize("keyword", ["input_value_range", "input_zero_fraction"])
def test_python_api_names_an_unknown_input(keyword):
    inputs = [tensor("x", T.FLOAT, [3, 4]), tensor("y", T.FLOAT, [3, 4]), tensor("k", T.INT32, [3, 4])]
    with pytest.raises(DmlLowerError, match=r"for 'zz': the model has no such input \(inputs: x, y, k\)"):
        random_feeds(inputs, **{keyword: {"zz": (0.0, 1.0) if keyword == "input_value_range" else 0.5}})


@pytest.mark.parametrize("bounds, message", [
    ((float("nan"), 1.0), "value range nan,1.0 for 'x': LO and HI must be finite numbers"),
    ((-1e308, 1e308), "value range -1e+308,1e+308 for 'x': HI - LO is past the largest double"),
])
def test_python_api_refuses_ranges_it_cannot_draw_from(bounds, message):
    with pytest.raises(DmlLowerError, match="^" + message.replace("(", r"\(").replace("+", r"\+")):
        random_feeds([h.make_tensor_value_info("x", T.FLOAT, [2])], input_value_range={"x": bounds})


@pytest.mark.parametrize("elem", SCALARS)
@pytest.mark.parametrize("fraction", [None, 0.0, 0.5, 1.0])
@pytest.mark.parametrize("value_range", [None, (-6, 6), (2, 3)])
def test_scalar_inputs_are_drawn_like_any_other(elem, fraction, value_range):
    """A 0-d input under a zero fraction and a value range is a 0-d array of its type: zero at
    fraction 1, non-zero at 0, inside the range when not zero."""
    if elem == T.BOOL and value_range == (2, 3):
        with pytest.raises(DmlLowerError, match="holds no bool value"):
            random_feeds([h.make_tensor_value_info("s", elem, [])], zero_fraction=fraction, value_range=value_range)
        return
    for seed in range(6):
        value = random_feeds([h.make_tensor_value_info("s", elem, [])], seed=seed, zero_fraction=fraction,
                             value_range=value_range)["s"]
        assert isinstance(value, np.ndarray) and value.shape == () and value.dtype == onnx_to_numpy(elem)
        as_float = float(value.astype(np.float64)) if elem != T.BOOL else float(value)
        if fraction == 1.0:
            assert as_float == 0
        elif fraction == 0.0:
            assert as_float != 0
        if value_range is not None and elem != T.BOOL and as_float != 0:
            assert value_range[0] - 0.01 <= as_float <= value_range[1] + 0.01


@pytest.mark.parametrize("command", ["check", "run"])
def test_a_negative_declared_size_is_unknown_as_onnxruntime_reads_it(command, tmp_path, capsys):
    """x declared [-5, 4] (some exporters write -1 for unknown): onnxruntime runs it at any size;
    random feeds draw the default size there and a fed array of any size passes (it was an internal
    error: numpy's negative dimensions), and the placement reads an unknown size too (it decided on
    -5: `Sizes [-5, 4] hold a size of 0 or less`, while the run fed [3, 4]): the loader makes the
    size unknown for every reader (runtime.model_content)."""
    import onnx
    import onnxruntime as ort
    from tests.builders import graph_model
    from tests.cli_runner import cli
    model = graph_model([h.make_node("NonZero", ["x"], ["y"], name="nz")], [("x", T.FLOAT, [-5, 4])],
                        [("y", T.INT64, [2, "k"])])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    assert ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).get_inputs()[0].shape == [None, 4]
    code, out, err = cli([command, path], capsys)
    assert code == 0 and err == "" and "size of 0 or less" not in out, out + err
    np.savez(tmp_path / "in.npz", x=np.eye(7, 4, dtype=np.float32))
    code, out, err = cli([command, path, "--inputs", tmp_path / "in.npz"], capsys)
    assert code == 0 and err == "", err
    for shown in ("compile", "inspect"):
        code, out, err = cli([shown, path], capsys)
        assert code == 0 and "[-5" not in out and "size of 0 or less" not in out, out + err


def _one_input(elem: int, shape: list) -> "list":
    return [h.make_tensor_value_info("x", elem, shape)]


@pytest.mark.parametrize("lo, hi", [(0, 1e20), (1e19, 1.5e19), (2**63, 2**64 - 1)])
def test_a_uint64_range_past_int64_is_drawn_within_it(lo, hi):
    """numpy's default int64 draw refused a uint64 range past 2^63 (an internal error)."""
    x = random_feeds(_one_input(T.UINT64, [64]), seed=1, value_range=(lo, hi))["x"]
    assert x.dtype == np.uint64 and x.min() >= min(lo, 2**64 - 1) and int(x.max()) <= min(hi, 2**64 - 1)


@pytest.mark.parametrize("elem, lo, hi", [(T.FLOAT, 1e300, 1e308), (T.FLOAT16, 6e4, 1e5), (T.BFLOAT16, 1e39, 1e40),
                                          (T.FLOAT8E4M3FN, -500, 1), (T.FLOAT, -1e39, 0)])
def test_a_float_range_past_the_types_largest_value_is_one_line(elem, lo, hi):
    """It fed infinities, with numpy's overflow warning; an integer range outside its type is refused too."""
    with pytest.raises(DmlLowerError, match="goes past the largest finite"):
        random_feeds(_one_input(elem, [8]), value_range=(lo, hi))


def test_the_feed_summary_counts_zeros_over_every_element():
    """bfloat16 / float8 counted zeros on the finite values and took them from the size: all +inf
    was '9 of 9 zero'."""
    import ml_dtypes
    from onnx_dml_lowering.runtime.feeds import feed_summary
    for dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.float16, np.float32):
        values = np.array([0, 0, 0, np.inf, np.nan, -np.inf, 1, 2, -0.0], np.float32).astype(dtype)
        entry = feed_summary({"x": values})["x"]
        assert entry["zeros"] == 4 and entry["nonfinite"] == 3, (dtype, entry)     # e4m3fn's inf: NaN


@pytest.mark.parametrize("bounds, values", [((0, 1), {False, True}), ((-3, 7), {False, True}), ((1, 1), {True}),
                                            ((0.5, 2), {True}), ((0, 0), {False}), ((-1, 0.5), {False})])
def test_a_bool_input_takes_the_values_its_range_holds(bounds, values):
    """A range was ignored for bools (random bools whatever it said): 0 and 1 are their values."""
    x = random_feeds(_one_input(T.BOOL, [400]), seed=4, value_range=bounds)["x"]
    assert set(x.tolist()) == values
    if values == {True}:        # a zero fraction still asks for False
        x = random_feeds(_one_input(T.BOOL, [400]), seed=4, value_range=bounds, zero_fraction=0.5)["x"]
        assert set(x.tolist()) == {False, True}


@pytest.mark.parametrize("bounds", [(2, 3), (0.2, 0.8), (-2, -1)])
def test_a_bool_range_without_0_or_1_is_one_line(bounds):
    with pytest.raises(DmlLowerError, match=r"of input 'x' holds no bool value \(0 or 1\)"):
        random_feeds(_one_input(T.BOOL, [4]), value_range=bounds)


@pytest.mark.parametrize("elem, lo, hi", [(T.FLOAT, 1e-50, 1e-46), (T.FLOAT16, 1e-9, 1e-8), (T.BFLOAT16, 1.001, 1.002),
                                          (T.FLOAT8E4M3FN, 0.0001, 0.0002), (T.FLOAT, -1e-46, -1e-50)])
def test_a_float_range_holding_no_value_of_its_type_is_one_line(elem, lo, hi):
    """Both ends round to one value outside the range: every element would be that value (zeros)."""
    with pytest.raises(DmlLowerError, match="holds no .* value: both ends round to"):
        random_feeds(_one_input(elem, [8]), value_range=(lo, hi))


@pytest.mark.parametrize("elem, lo, hi", [(T.FLOAT, 1e-45, 1e-44), (T.FLOAT16, 1, 1.0001), (T.FLOAT, 0, 1e-46),
                                          (T.BFLOAT16, 2, 2)])
def test_a_narrow_float_range_holding_a_value_of_its_type_is_drawn(elem, lo, hi):
    x = random_feeds(_one_input(elem, [64]), seed=1, value_range=(lo, hi))["x"].astype(np.float64)
    assert x.min() >= lo - abs(lo) * 1e-2 and x.max() <= hi + abs(hi) * 1e-2


# -- shapes past what numpy can index ---------------------------------------------------------------

NUMPY_MAX = int(np.iinfo(np.intp).max)


@pytest.mark.parametrize("rows, cols, named", [
    (NUMPY_MAX, 0, "rows"),                 # no element, no byte: the memory limit passes it
    (NUMPY_MAX // 8 + 1, 0, "rows"),        # the smallest past it with 8-byte draws
    (0, 2**61, "cols"),                     # the zero first
    (2**40, 2**30, "cols"),                 # the product, dimension by dimension
])
@pytest.mark.parametrize("make", ["random", "zero"])
def test_a_shape_numpy_cannot_index_is_one_line_naming_the_input_and_dimension(rows, cols, named, make):
    """`--dim rows=9223372036854775807 --dim cols=0` was 'internal error: ValueError: array is too
    big': numpy refuses a shape whose non-zero sizes times the element size pass 2^63 - 1 bytes,
    however empty the array. Refused in one line before anything is drawn, by the one sizing check."""
    from onnx_dml_lowering.runtime.feeds import zero_feeds
    inputs = [tensor("x", T.FLOAT, ["rows", "cols"])]
    # the oracle: what numpy itself says of the float64 array a draw makes at that shape
    with pytest.raises(ValueError, match="array is too big"):
        np.empty((rows, cols), np.float64)
    draw = random_feeds if make == "random" else zero_feeds
    with pytest.raises(DmlLowerError, match=rf"input 'x' of shape \[{rows}, {cols}\]: dimension '{named}'") as info:
        draw(inputs, dims={"rows": rows, "cols": cols}, memory_limit=2**100)
    assert "numpy" in str(info.value) and f"--dim {named}" in str(info.value)


@pytest.mark.parametrize("rows", [NUMPY_MAX // 8, 2**40])
def test_an_empty_shape_numpy_can_index_is_drawn(rows):
    """Just within numpy's limit, an empty input is fed (an empty NonZero input is a case to check)."""
    from onnx_dml_lowering.runtime.feeds import zero_feeds
    inputs = [tensor("x", T.FLOAT, ["rows", "cols"])]
    assert random_feeds(inputs, dims={"rows": rows, "cols": 0})["x"].shape == (rows, 0)
    assert zero_feeds(inputs, dims={"rows": rows, "cols": 0})["x"].shape == (rows, 0)


@pytest.mark.parametrize("elem", [T.COMPLEX64, T.COMPLEX128])
def test_a_complex_input_is_refused_for_onnxruntime_not_for_numpy(elem) -> None:
    from onnx_dml_lowering.runtime.feeds import input_dtype
    with pytest.raises(DmlLowerError) as caught:
        input_dtype(h.make_tensor_value_info("x", elem, [2]))
    assert "onnxruntime does not support" in str(caught.value) and "no numpy type" not in str(caught.value)
