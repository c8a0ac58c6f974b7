"""The default tolerance of every ONNX float type (runtime/tolerances.py) through the comparison
(runtime/compare.py): one rounding of the output type passes, values further apart never do (the
type's epsilon as an rtol passed 6 against 3 in float4e2m1 and 1 against 2^100 in float8e8m0).
The verdicts are checked against each type's values enumerated and ranked here, not against the
comparator's own bit arithmetic."""
from __future__ import annotations

import math
from functools import lru_cache

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnx_dml_lowering.runtime.compare import compare
from onnx_dml_lowering.runtime.tolerances import DEFAULT_ATOL, DEFAULT_RTOL, Tolerances

# every float type ONNX has, as numpy holds it
FLOATS = [np.dtype(t) for t in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz,
                                ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn, ml_dtypes.float6_e2m3fn,
                                ml_dtypes.float6_e3m2fn)]
E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)


def bits_of(dtype: np.dtype) -> int:
    return int(ml_dtypes.finfo(dtype).bits)


@lru_cache(maxsize=None)
def finite_values(dtype: np.dtype) -> np.ndarray:
    """Every finite value of a type of 16 bits or fewer, sorted, -0.0 and +0.0 one value."""
    patterns = np.arange(1 << bits_of(dtype), dtype=np.uint16 if dtype.itemsize == 2 else np.uint8)
    with np.errstate(invalid="ignore"):                            # signalling NaN patterns
        values = patterns.view(dtype).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


def steps_apart(dtype: np.dtype, e: float, a: float) -> int:
    """How many representable values of `dtype` from e to a (finite both)."""
    if dtype.itemsize <= 2:
        ranks = np.searchsorted(finite_values(dtype), [e, a])
        return abs(int(ranks[1]) - int(ranks[0]))
    if a == e:
        return 0
    step = np.nextafter(np.array(e, dtype), np.array(a, dtype))
    return 1 if float(step) == a else 2                            # 2: two or more


def default_verdict(dtype: np.dtype, e: float, a: float) -> bool:
    """The documented default, one element: NaN matches NaN, an infinity itself; e8m0 exact;
    within atol 1e-5 + rtol 1e-5 * |e|; for a type coarser than float32 also one step apart."""
    if math.isnan(e) or math.isnan(a):
        return math.isnan(e) and math.isnan(a)
    if math.isinf(e) or math.isinf(a) or dtype == E8M0:
        return e == a
    if abs(a - e) <= DEFAULT_ATOL + DEFAULT_RTOL * abs(e):
        return True
    return float(ml_dtypes.finfo(dtype).eps) > DEFAULT_RTOL and steps_apart(dtype, e, a) <= 1


@st.composite
def pairs(draw):
    """(dtype, expected, actual): random bit patterns of the type, the actual one the same pattern,
    one or a few patterns away (neighbours in the type's order for finite values), or another."""
    dtype = draw(st.sampled_from(FLOATS))
    size, width = draw(st.integers(1, 12)), bits_of(dtype)
    unsigned = np.dtype(f"u{dtype.itemsize}")
    want = np.array([draw(st.integers(0, (1 << width) - 1)) for _ in range(size)], unsigned)
    got = want.copy()
    for i in range(size):
        how = draw(st.sampled_from(["same", "near", "near", "other"]))
        if how == "near":
            got[i] = (int(want[i]) + draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))) % (1 << width)
        elif how == "other":
            got[i] = draw(st.integers(0, (1 << width) - 1))
    return dtype, want.view(dtype), got.view(dtype)


@settings(max_examples=400, deadline=None)
@given(pairs())
def test_the_default_passes_one_rounding_of_the_type_and_nothing_further(pair):
    dtype, want, got = pair
    atol, rtol = Tolerances().for_output("y", dtype)
    result = compare("y", "b", want, got, atol, rtol)
    with np.errstate(invalid="ignore"):
        e64, a64 = want.astype(np.float64), got.astype(np.float64)
    verdicts = [default_verdict(dtype, float(e), float(a)) for e, a in zip(e64, a64)]
    assert result.status == ("match" if all(verdicts) else "mismatch"), (want, got)
    assert result.mismatches == verdicts.count(False)
    for e, a, passes in zip(e64.tolist(), a64.tolist(), verdicts):
        if e == a or (math.isnan(e) and math.isnan(a)):
            assert passes                          # the same value (or NaN twice) always matches
        elif math.isfinite(e) and math.isfinite(a) and abs(a - e) > DEFAULT_ATOL + DEFAULT_RTOL * abs(e):
            # further than the float32-level tolerance: past one step of the type (for e8m0 any
            # other value, a binade or more) never matches
            assert not passes or (dtype != E8M0 and steps_apart(dtype, e, a) <= 1)


@pytest.mark.parametrize("dtype, want, got, match", [
    (ml_dtypes.float8_e8m0fnu, [2.0 ** 100, 1.0, 2.0 ** 20, 2.0 ** 127], [1.0, 2.0 ** -100, 1.0, 2.0 ** -127], False),
    (ml_dtypes.float8_e8m0fnu, [2.0 ** -20], [2.0 ** -30], False),            # both below the default atol
    (ml_dtypes.float8_e8m0fnu, [1.0], [2.0], False),                          # one binade
    (ml_dtypes.float8_e8m0fnu, [2.0 ** -127, 1.0], [2.0 ** -127, 1.0], True),
    (ml_dtypes.float4_e2m1fn, [6.0, 4.0, 2.0], [3.0, 2.0, 1.0], False),       # two steps each
    (ml_dtypes.float4_e2m1fn, [6.0, 4.0, 0.5, -0.5], [4.0, 3.0, 0.0, 0.0], True),   # one step each
    (ml_dtypes.float4_e2m1fn, [0.5], [-0.5], False),                          # 0 lies between
    (ml_dtypes.float8_e4m3fn, [1.0], [1.25], False),                          # two steps of 0.125
    (ml_dtypes.float8_e4m3fn, [1.0, 448.0], [1.125, 416.0], True),
    (ml_dtypes.float8_e5m2, [1.0], [0.75], False),                            # two steps below
    (np.float16, [1.0], [1.0 - 2.0 ** -10], False),                           # two steps below 1
    (np.float16, [100.0, 2.0 ** -24], [100.0625, 0.0], True),                 # one step; within atol
])
def test_coarse_types_at_the_default(dtype, want, got, match):
    dtype = np.dtype(dtype)
    result = compare("y", "b", np.array(want, np.float64).astype(dtype), np.array(got, np.float64).astype(dtype),
                     *Tolerances().for_output("y", dtype))
    assert result.status == ("match" if match else "mismatch"), result.detail


def test_a_mismatch_line_says_the_steps_and_its_figures_pass():
    """The smallest atol passes with the steps kept (the rtol still the default); the smallest rtol
    passes alone, as a given rtol replaces the steps."""
    dtype = np.dtype(ml_dtypes.float4_e2m1fn)
    want, got = np.array([6.0, 4.0, 0.5], dtype), np.array([3.0, 3.0, 1.0], dtype)     # 2 steps, 1, 1
    atol, rtol = Tolerances().for_output("y", dtype)
    result = compare("y", "b", want, got, atol, rtol)
    assert result.status == "mismatch" and result.mismatches == 1 and result.steps == 1
    assert "at rtol 1e-05 or 1 step of float4_e2m1fn" in result.detail
    assert compare("y", "b", want, got, result.smallest_atol, rtol).status == "match"
    assert compare("y", "b", want, got, atol, result.smallest_rtol).status == "match"       # plain rule
    assert compare("y", "b", want, got, atol, float(np.nextafter(result.smallest_rtol, 0))).status == "mismatch"
    assert result.smallest_rtol > 0.9 and result.to_dict()["steps"] == 1      # 0.5 against 1.0 needs ~1
