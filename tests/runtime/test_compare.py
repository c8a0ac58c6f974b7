"""The comparison rule (runtime/compare.py): a hypothesis property against a plain element-by-element
formulation in Python floats, the smallest passing tolerances against a brute-force search, and
the bit-identical fast path."""
from __future__ import annotations

import json
import math
import tracemalloc
from unittest import mock

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnx_dml_lowering.runtime import compare as compare_module
from onnx_dml_lowering.runtime.compare import ceil_text, compare

DTYPES = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32), np.dtype(np.float64)]


def finfo(dtype):
    return ml_dtypes.finfo(dtype) if dtype == np.dtype(ml_dtypes.bfloat16) else np.finfo(dtype)


def reference_passes(e: float, a: float, atol: float, rtol: float) -> bool:
    """The rule, one element, in Python floats."""
    if math.isnan(e) or math.isnan(a):
        return math.isnan(e) and math.isnan(a)
    if math.isinf(e) or math.isinf(a):
        return e == a
    return abs(a - e) <= atol + rtol * abs(e)


def special_values(dtype) -> "list[float]":
    info = finfo(dtype)
    tiny = float(info.smallest_subnormal)
    return [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, tiny, -tiny, 3 * tiny,
            float(info.tiny), float(info.max), float(info.min), 1.0 + float(info.eps), 1e-5, -2.5]


@st.composite
def pairs(draw):
    """(expected, actual) of one dtype and shape: special values, random ones, and actual values
    equal, sign-flipped, one step away or independent of the expected ones."""
    dtype = draw(st.sampled_from(DTYPES))
    size = draw(st.integers(0, 24))
    values = st.one_of(st.sampled_from(special_values(dtype)),
                       st.floats(-1e4, 1e4, allow_nan=False, width=16 if dtype.itemsize == 2 else 32))
    with np.errstate(over="ignore"):
        expected = np.array([draw(values) for _ in range(size)], np.float64).astype(dtype)
        actual = expected.copy()
        for i in range(size):
            how = draw(st.sampled_from(["same", "same", "negate", "step", "other", "nan-payload"]))
            if how == "negate":
                actual[i] = -expected[i]
            elif how == "step":
                actual[i] = np.float64(expected[i]) * (1 + 2 * float(finfo(dtype).eps)) + draw(
                    st.sampled_from([0.0, 1e-6, -1e-5]))
            elif how == "other":
                actual[i] = draw(values)
            elif how == "nan-payload" and math.isnan(float(expected[i])):
                bits = actual.view(f"u{dtype.itemsize}")
                bits[i] ^= 1                   # another NaN: a payload bit flipped (the quiet bit kept)
    shape = draw(st.sampled_from([(size,), (1, size), (size, 1)]))
    return expected.reshape(shape), actual.reshape(shape)


@given(pairs(), st.sampled_from([(0.0, 0.0), (1e-5, 1e-5), (1e-6, 1e-5), (0.5, 0.0), (0.0, 0.01)]),
       st.sampled_from([1, 2, 5, 1 << 20]))
def test_rule_matches_the_element_by_element_formulation(pair, tolerances, block):
    expected, actual = pair
    atol, rtol = tolerances
    flat_e, flat_a = expected.reshape(-1).astype(np.float64), actual.reshape(-1).astype(np.float64)
    passes = [reference_passes(float(e), float(a), atol, rtol) for e, a in zip(flat_e, flat_a)]
    with mock.patch.object(compare_module, "BLOCK", block):          # blocks of every size agree
        result = compare("y", "b", expected, actual, atol, rtol)
    assert result.status == ("match" if all(passes) else "mismatch")
    assert result.mismatches == passes.count(False)
    if not all(passes):
        first = passes.index(False)
        assert result.first_mismatch == [int(i) for i in np.unravel_index(first, expected.shape)]
        diffs = [0.0 if (e == a or (math.isnan(e) and math.isnan(a))) else
                 math.inf if (math.isnan(e) or math.isnan(a)) else abs(a - e)
                 for e, a in zip(flat_e.tolist(), flat_a.tolist())]
        assert result.max_abs_error == max(diffs)
    json.dumps(result.to_dict())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("expected, actual, same", [
    (-math.inf, 0.0, False),             # an additive mask's -inf read back as 0
    (-math.inf, "min", False),           # ... or as the dtype's lowest finite value
    (math.inf, 7.0, False),
    (math.inf, "max", False),
    (math.inf, -math.inf, False),
    (math.inf, math.inf, True),
    (-math.inf, -math.inf, True),
    (math.nan, 0.0, False),
    (0.0, math.nan, False),
    (math.nan, math.nan, True),
    (-0.0, 0.0, True),
    (0.0, -0.0, True),
    ("subnormal", 0.0, True),            # within atol
    ("subnormal", -0.0, True),
])
def test_special_values_at_huge_tolerances(dtype, expected, actual, same):
    """Infinities and NaN stay what they are whatever the tolerances (1e30 here)."""
    info = finfo(dtype)
    named = {"min": info.min, "max": info.max, "subnormal": info.smallest_subnormal}
    want = np.array([1.0, named.get(expected, expected)], np.float64).astype(dtype)
    got = np.array([1.0, named.get(actual, actual)], np.float64).astype(dtype)
    result = compare("y", "b", want, got, 1e30, 1e30)
    assert result.status == ("match" if same else "mismatch"), result.detail
    if not same:
        assert result.first_mismatch == [1] and result.smallest_atol is None and result.smallest_rtol is None
        assert "no finite tolerance would pass" in result.detail


def brute_force_least(passes, above: float) -> float:
    """The least float64 above `above` for which `passes` holds, by doubling then bisecting on
    the values themselves (nextafter at the end), independent of compare's bit-pattern search."""
    high = max(above, 1e-300)
    while not passes(high):
        high *= 2
    low = above
    while True:
        middle = low + (high - low) / 2
        if middle in (low, high):
            break
        low, high = (low, middle) if passes(middle) else (middle, high)
    while not passes(high):               # step to the boundary
        high = float(np.nextafter(high, math.inf))
    while high > above and passes(float(np.nextafter(high, -math.inf))):
        high = float(np.nextafter(high, -math.inf))
    return high


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_smallest_tolerances_against_brute_force(seed, dtype):
    rng = np.random.default_rng(seed)
    want = (rng.standard_normal(40) * 10.0 ** rng.integers(-6, 3)).astype(dtype)
    got = (want.astype(np.float64) * (1 + rng.standard_normal(40) * 1e-4) + rng.standard_normal(40) * 1e-6).astype(dtype)
    atol, rtol = [(1e-6, 1e-5), (0.0, 0.0), (1e-5, 0.0), (0.0, 1e-6)][seed % 4]
    result = compare("y", "b", want, got, atol, rtol)
    if result.status == "match":
        assert result.smallest_atol is None and result.smallest_rtol is None
        return
    e, a = want.astype(np.float64).tolist(), got.astype(np.float64).tolist()

    def every(at, rt):
        return all(reference_passes(x, y, at, rt) for x, y in zip(e, a))

    assert result.smallest_atol == brute_force_least(lambda x: every(x, rtol), atol)
    if any(x == 0 and x != y for x, y in zip(e, a)):
        assert result.smallest_rtol is None       # differs where 0 is expected: no rtol passes
    else:
        assert result.smallest_rtol == brute_force_least(lambda r: every(atol, r), rtol)
        assert every(atol, float(ceil_text(result.smallest_rtol)))      # the printed figure passes
    assert every(float(ceil_text(result.smallest_atol)), rtol)
    assert compare("y", "b", want, got, result.smallest_atol, rtol).status == "match"
    assert compare("y", "b", want, got, float(np.nextafter(result.smallest_atol, 0)), rtol).status == "mismatch"
    assert f"atol {ceil_text(result.smallest_atol)} (at rtol {rtol:g})" in result.detail


@pytest.mark.parametrize("value, text", [(1.2345e-05, "1.24e-05"), (1e-05, "1e-05"), (0.00031, "0.00031"),
                                         (5e-324, "4.94e-324"), (1.0000001e-05, "1.01e-05"), (123456.0, "1.24e+05"), (0.1, "0.1")])
def test_ceil_text_rounds_up(value, text):
    assert ceil_text(value) == text and float(text) >= value


def test_smallest_tolerances_are_none_where_nothing_finite_passes():
    want = np.array([0.0, 1.0, 2.0], np.float32)
    result = compare("y", "b", want, np.array([1e-3, 1.0, 2.0], np.float32), 1e-6, 1e-5)
    assert result.smallest_atol == pytest.approx(1e-3, rel=1e-6) and result.smallest_rtol is None
    assert "no rtol would (it differs where 0 is expected)" in result.detail


def test_new_json_keys_come_after_the_old_ones():
    keys = list(compare("y", "b", np.ones(2, np.float32), np.zeros(2, np.float32), 0, 0).to_dict())
    old = ["output", "backend", "status", "expected_shape", "actual_shape", "expected_dtype", "actual_dtype",
           "detail", "max_abs_error", "max_rel_error", "first_mismatch", "mismatches", "iteration", "elements",
           "mean_abs_error", "mean_rel_error", "rel_undefined"]
    assert keys[:len(old)] == old
    assert keys[len(old):] == ["atol", "rtol", "exact", "smallest_atol", "smallest_rtol", "steps"]


def test_nearly_identical_arrays_build_no_float64_temporaries():
    """Identical bytes decide equality: a bit-identical output, or one where a few elements differ,
    allocates a small fraction of the array (the previous comparator built four float64 copies)."""
    want = np.random.default_rng(0).standard_normal(3_000_000).astype(np.float32)
    got = want.copy()
    got[::100_000] = np.nextafter(got[::100_000], np.float32(np.inf))
    for actual, status in ((want.copy(), "match"), (got, "match")):
        tracemalloc.start()
        result = compare("y", "b", want, actual, 1e-5, 1e-5)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert result.status == status and peak < want.nbytes / 4, peak
    assert result.max_abs_error > 0 and result.mean_abs_error < result.max_abs_error
    got[-1] = -got[-1]                    # the last block differs past the tolerance
    assert compare("y", "b", want, got, 1e-5, 1e-5).first_mismatch == [want.size - 1]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_zero_signs_and_nan_payloads_that_differ_in_bits_match(dtype):
    want = np.array([0.0, math.nan, 1.0], np.float64).astype(dtype)
    got = want.copy()
    got[0] = -0.0
    got.view(f"u{dtype.itemsize}")[1] ^= 1
    assert got.tobytes() != want.tobytes()
    result = compare("y", "b", want, got, 0.0, 0.0)
    assert result.status == "match" and result.max_abs_error == 0


@pytest.mark.parametrize("block", [1, 3, 1 << 20])
def test_integer_errors_cover_every_block(block):
    """Blocks without a difference still count in the means (an integer output across blocks)."""
    want = np.arange(10, dtype=np.int64)
    got = want.copy()
    got[7] += 4
    with mock.patch.object(compare_module, "BLOCK", block):
        result = compare("y", "b", want, got, 0.0, 0.0)
    assert (result.mismatches, result.first_mismatch, result.max_abs_error) == (1, [7], 4.0)
    assert result.mean_abs_error == 0.4 and result.mean_rel_error == pytest.approx(4 / 7 / 10)
    assert result.rel_undefined == 0 and result.smallest_atol is None and result.atol is None


@pytest.mark.parametrize("expected, actual", [
    (np.array(["1", "-7", "123456789"]), np.array(["1", "-7", "123456789"], object)),        # onnx.reference, ort
    (np.array(["a", "bé"], object), np.array(["a", "bé"])),
    (np.array([b"a", "bé".encode()]), np.array(["a", "bé"], object)),                      # UTF-8 bytes
    (np.array([["x", ""]], object), np.array([["x", ""]], "<U7")),
    (np.array([], "<U1"), np.array([], object)),
])
def test_a_string_tensor_is_onnx_string_whatever_numpy_holds_it_in(expected, actual):
    for want, got in ((expected, actual), (actual, expected)):
        result = compare("s", "b", want, got, 1e-5, 1e-5)
        assert result.status == "match", result.detail
        assert not want.size or result.expected_dtype == result.actual_dtype == "string"   # an empty object: any
    if expected.size:
        changed = np.array(actual, object)
        changed.reshape(-1)[-1] = "other"
        result = compare("s", "b", expected, changed, 1e-5, 1e-5)
        assert result.status == "mismatch" and result.mismatches == 1 and "got other" in result.detail


def test_a_string_against_a_number_is_a_dtype_mismatch():
    result = compare("s", "b", np.array(["1"]), np.array([1], np.int64), 1e-5, 1e-5)
    assert result.status == "mismatch" and result.detail == "dtype int64 != expected string"


@given(st.sampled_from([np.int64, np.uint64, np.int32, np.uint8, ml_dtypes.int4, ml_dtypes.uint4]),
       st.lists(st.tuples(st.integers(), st.integers()), min_size=1, max_size=12), st.sampled_from([1, 3, 1 << 20]))
def test_integer_errors_are_exact(dtype, pairs, block):
    """|actual - expected| as Python integers, past 2^53 too (float64 rounds 2^63 - 1 and 2^63 - 2 alike)."""
    if dtype in (np.int64, np.uint64, np.int32, np.uint8):
        info = np.iinfo(dtype)
    else:
        info = ml_dtypes.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    edges = [low, low + 1, high - 1, high, 0]
    values = [(edges[e % 5] if e % 3 == 0 else low + e % (high - low + 1),
               edges[a % 5] if a % 3 == 0 else low + a % (high - low + 1)) for e, a in pairs]
    want = np.array([e for e, _ in values], dtype)
    got = np.array([a for _, a in values], dtype)
    with mock.patch.object(compare_module, "BLOCK", block):
        result = compare("y", "b", want, got, 0.0, 0.0)
    distances = [abs(int(a) - int(e)) for e, a in values]
    assert result.mismatches == sum(d > 0 for d in distances)
    if result.mismatches:
        assert result.max_abs_error == max(distances) and isinstance(result.max_abs_error, int)
        assert result.mean_abs_error == pytest.approx(sum(distances) / len(distances), rel=1e-12)
        json.dumps(result.to_dict())


def test_int64_one_apart_past_2_53():
    want = np.array([2**63 - 2, -2**63, 2**62, 0], np.int64)
    got = np.array([2**63 - 1, -2**63, 2**62 + 1, 0], np.int64)
    result = compare("y", "b", want, got, 0.0, 0.0)
    assert (result.max_abs_error, result.mean_abs_error, result.mismatches) == (1, 0.5, 2)
    result = compare("y", "b", np.array([2**64 - 2, 0], np.uint64), np.array([0, 2**64 - 1], np.uint64), 0.0, 0.0)
    assert result.max_abs_error == 2**64 - 1 and result.mean_abs_error == pytest.approx((2**65 - 3) / 2)


SIGNALLING = {np.dtype(np.float32): 0x7F800001, np.dtype(np.float64): 0x7FF0000000000001,
              np.dtype(np.float16): 0x7C01, np.dtype(ml_dtypes.bfloat16): 0x7F81}


@pytest.mark.parametrize("dtype", list(SIGNALLING), ids=str)
@pytest.mark.parametrize("other, status", [(math.nan, "match"), (1.0, "mismatch"), ("snan", "match")])
def test_a_signalling_nan_raises_no_warning(dtype, other, status, recwarn):
    """Widening a signalling NaN raises FE_INVALID: nothing of it reaches the user (numpy's state
    set to raise outside does not leak in either)."""
    snan = np.array([SIGNALLING[dtype]], f"u{dtype.itemsize}").view(dtype)
    want = np.array([7.0, 1.0], np.float64).astype(dtype)
    got = want.copy()
    got[1:] = snan
    if other == "snan":
        want[1:] = snan
        want.view(f"u{dtype.itemsize}")[1] += 1          # another payload: bytes differ
    else:
        want[1] = other
    with np.errstate(all="raise"):
        for a, b in ((want, got), (got, want)):
            result = compare("y", "b", a, b, 1e-5, 1e-5)
            assert result.status == status, result.detail
    assert not recwarn.list
