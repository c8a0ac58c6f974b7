"""Per-output comparison of a backend's results with the oracle's.

Shape and dtype first (either differing is a MISMATCH), then every element, by this rule:

- integers and bool: exactly equal (an integer's errors computed exactly, int64 / uint64 too);
- strings: equal text; a string tensor is ONNX's STRING whatever numpy holds it in (onnxruntime's
  `object`, onnx.reference's and an .npz's fixed-width `<U`), so only the text is compared;
- floats (float16, float32, float64, bfloat16 and the float8 / float6 / float4 types), element by element:
  * NaN matches NaN only (any payload, either sign), and NaN on one side only is a mismatch;
  * +inf matches only +inf and -inf only -inf (an infinity against any finite value, or the
    opposite infinity, is a mismatch whatever the tolerances);
  * finite values a (actual) and e (expected) match when |a - e| <= atol + rtol * |e|, computed in
    float64 (the float64 value of each element is exact for every dtype here);
  * -0.0 and +0.0 are equal (their difference is 0);
  * with a `StepRtol` (the default rtol of a type coarser than float32, runtime/tolerances.py), finite
    values at most `steps` representable values of the type apart match too, whatever their distance.
- An output compared `exact` (one produced by a node this project lowers: NonZero, EyeLike, the
  eye / mask / Trilu idioms) is compared with atol = rtol = 0 unless the user named a tolerance
  for it: bit for bit, up to the sign of a zero and a NaN's payload.

The arrays' bytes are compared first, as unsigned integers of the element size, in blocks of
BLOCK elements: elements with identical bytes are equal (error 0), and only those whose bytes
differ are converted to float64 and compared by value. A bit-identical output (the common case)
costs one pass over its bytes and no float64 temporary.

A mismatch carries how many elements differ of how many (a float's: beyond the tolerance; one whose
bits differ within it is not counted), the first such index and its two
values, max / mean absolute and relative errors (relative ones only where the expected value is
not 0), and the smallest tolerances that would have passed: the smallest atol at the rtol in
force and the smallest rtol at the atol in force (exact float64 values, each the least one for
which every element passes; None when no finite value does: an infinity or NaN differs, or, for
rtol, an element differs where 0 is expected)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from decimal import ROUND_CEILING, Context
from typing import TYPE_CHECKING, Callable

import ml_dtypes
import numpy as np

from onnx_dml_lowering.ir.display import name_list

if TYPE_CHECKING:
    import numpy.typing as npt
    from .backend_names import BackendName

BLOCK = 1 << 20          # elements per block: float64 temporaries stay at a few MB whatever the output's size

# ml_dtypes' float and integer types (numpy's kind "V", not "f" / "i" / "u")
_ML_FLOATS = frozenset(np.dtype(t) for t in (
    ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
    ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn, ml_dtypes.float6_e2m3fn,
    ml_dtypes.float6_e3m2fn))
_ML_INTS = frozenset(np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2))


def is_float(dtype: npt.DTypeLike) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype in _ML_FLOATS


class StepRtol(float):
    """An rtol that also passes finite values at most `steps` representable values of the output
    type apart: the default of a float type coarser than float32 (tolerances.default_rtol), where
    one rounding of the type is a step of its grid, not a fixed fraction of the value (the type's
    epsilon as an rtol passes 6 against 3 in float4e2m1, and every smaller power of two in
    float8e8m0). As a number it is the rtol of the plain rule beside the steps."""
    steps: int

    def __new__(cls, value: float, steps: int = 1) -> "StepRtol":
        made = super().__new__(cls, value)
        made.steps = steps
        return made

    def __repr__(self) -> str:
        return f"StepRtol({float(self)!r}, steps={self.steps})"


@dataclass
class OutputResult:
    output: str
    backend: str
    status: str      # match | mismatch | deviation (named, known) | unsupported | nondeterministic
    expected_shape: "list[int]"
    actual_shape: "list[int] | None"
    expected_dtype: str
    actual_dtype: "str | None"
    detail: str = ""
    max_abs_error: "float | None" = None
    max_rel_error: "float | None" = None
    first_mismatch: "list[int] | None" = None
    mismatches: int = 0
    iteration: int = 0
    # added after the keys above (JSON readers of those keep working)
    elements: int = 0                              # how many elements were compared
    mean_abs_error: "float | None" = None
    mean_rel_error: "float | None" = None          # over the elements where it is defined
    rel_undefined: int = 0                         # elements differing from an expected 0
    # the tolerance policy (float outputs): the tolerances in force, whether the output was
    # compared exactly (a lowered node's), and on a value mismatch the smallest atol (at `rtol`)
    # and the smallest rtol (at `atol`) that would have passed (None: no finite value would)
    atol: "float | None" = None
    rtol: "float | None" = None
    exact: bool = False
    smallest_atol: "float | None" = None
    smallest_rtol: "float | None" = None
    # values this many steps of the output type apart pass too (a StepRtol in force); None: the plain rule
    steps: "int | None" = None

    def to_dict(self) -> dict:
        return asdict(self)


def compare(output: str, backend: str, expected: np.ndarray, actual: "np.ndarray | None",
            atol: float, rtol: float, exact: bool = False) -> OutputResult:
    """`expected` against `actual` by the module's rule; `exact` only labels the result (the caller
    passes atol = rtol = 0 for an exact output). No floating-point warning leaves it (a signalling
    NaN raises FE_INVALID when widened to float64): the verdict says what differs."""
    expected = np.asarray(expected)
    result = OutputResult(output, backend, "match", list(expected.shape), None, _dtype_name(expected), None)
    expected = _onnx_strings(expected)
    if actual is None:
        result.status, result.detail = "mismatch", "output missing"
        return result
    actual = np.asarray(actual)
    result.actual_shape, result.actual_dtype = list(actual.shape), _dtype_name(actual)
    actual = _onnx_strings(actual)
    result.elements = int(expected.size)
    if actual.shape != expected.shape:
        result.status, result.detail = "mismatch", f"shape {list(actual.shape)} != expected {list(expected.shape)}"
        return result
    if actual.dtype != expected.dtype:
        result.status, result.detail = "mismatch", f"dtype {result.actual_dtype} != expected {result.expected_dtype}"
        return result
    with np.errstate(all="ignore"):
        return _compare_values(result, expected, actual, atol, rtol, exact)


def _compare_values(result: OutputResult, expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float,
                    exact: bool) -> OutputResult:
    """compare() past shape and dtype: every element, block by block."""
    floats = is_float(expected.dtype)
    steps = rtol.steps if floats and isinstance(rtol, StepRtol) else None
    if floats:
        result.atol, result.rtol, result.exact, result.steps = float(atol), float(rtol), exact, steps
    want, got = _flat(expected), _flat(actual)
    stats: "_FloatStats | _ExactStats"
    if floats:
        stats = _FloatStats(float(atol), float(rtol), steps)
    else:
        stats = _ExactStats(errors=expected.dtype.kind in "iu" or expected.dtype in _ML_INTS)
    bits_want, bits_got = _bits(want), _bits(got)
    for start in range(0, want.size, BLOCK):
        stop = min(start + BLOCK, want.size)
        # only elements whose bytes differ are compared by value; the others are equal, error 0
        differs = bits_want[start:stop] != bits_got[start:stop]
        count = int(np.count_nonzero(differs))
        if count > (stop - start) // 2:           # most differ: the whole block (gathering them costs more)
            stats.add(np.arange(start, stop), want[start:stop], got[start:stop], 0)
        else:
            differ = np.flatnonzero(differs) if count else _NONE
            stats.add(start + differ, want[start:stop][differ], got[start:stop][differ], stop - start - count)
    stats.finish(result)
    if result.mismatches:
        result.status = "mismatch"
        index = np.unravel_index(stats.first, expected.shape) if expected.ndim else ()
        result.first_mismatch = [int(i) for i in index]
        result.detail = (f"{result.mismatches} of {want.size} elements differ; first at {result.first_mismatch}: "
                         f"got {value_text(actual[index])}, expected {value_text(expected[index])}")
        if floats:
            result.detail += "; " + passing_text(result)
    return result


def _onnx_strings(array: np.ndarray) -> np.ndarray:
    """A string tensor as one numpy type (object arrays of str), whichever numpy type holds it:
    onnxruntime's object, onnx.reference's and an .npz's fixed-width '<U', bytes ('S', or bytes
    objects: UTF-8, as ONNX stores strings). Any other array as it is."""
    if array.dtype.kind == "U":
        return array.astype(object)
    if not (array.dtype.kind == "S" or (_all_text(array) and any(isinstance(v, bytes) for v in array.flat))):
        return array
    out = np.empty(array.shape, object)
    out.reshape(-1)[:] = [v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else v for v in array.flat]
    return out


def _all_text(array: np.ndarray) -> bool:
    """An object array of str / bytes only (and at least one element: an empty one could be anything)."""
    return array.dtype.kind == "O" and array.size > 0 and all(isinstance(v, (str, bytes)) for v in array.flat)


def _dtype_name(array: np.ndarray) -> str:
    """numpy's name of its type; ONNX's 'string' for a string tensor (before _onnx_strings)."""
    return "string" if array.dtype.kind in "US" or _all_text(array) else str(array.dtype)


def value_text(value: object) -> str:
    """One element as a person writes it: 1.5, -0.0, nan, 7 (never np.float32(1.5))."""
    value = np.asarray(value)
    return str(value.item()) if value.dtype.kind in "iub" else str(value)


def passing_text(o: OutputResult) -> str:
    """The smallest tolerances that would have passed a value mismatch, rounded up (so the printed
    figure passes too)."""
    parts = []
    if o.smallest_atol is not None:
        steps = "" if o.steps is None else f" or {o.steps} step{'s' if o.steps != 1 else ''} of {o.actual_dtype}"
        parts.append(f"atol {ceil_text(o.smallest_atol)} (at rtol {o.rtol:g}{steps})")
    if o.smallest_rtol is not None:
        parts.append(f"rtol {ceil_text(o.smallest_rtol)} (at atol {o.atol:g})")
    if not parts:
        return "no finite tolerance would pass (an infinity or NaN differs)"
    text = "would pass with " + " or ".join(parts)
    if o.smallest_rtol is None:
        text += ("; no rtol would (an infinity or NaN differs)" if o.smallest_atol is None
                 else "; no rtol would (it differs where 0 is expected)")
    return text


def ceil_text(value: float) -> str:
    """`value` to 3 significant digits, rounded up where rounding would make a smaller float:
    1.2345e-05 -> 1.24e-05 (1e-05 stays 1e-05: it reads back as the same float)."""
    text = f"{value:.3g}"
    if float(text) >= value:
        return text
    return f"{float(Context(prec=3, rounding=ROUND_CEILING).create_decimal_from_float(value)):.3g}"


def _flat(array: np.ndarray) -> np.ndarray:
    """A 1-D view (a copy only for a non-contiguous array)."""
    return np.ascontiguousarray(array).reshape(-1)


_NONE = np.zeros(0, np.intp)
_NO_VALUES = np.zeros(0, np.float64)


def _bits(array: np.ndarray) -> np.ndarray:
    """The elements as unsigned integers of their size (no copy), so that comparing two arrays
    compares their bytes; strings, objects and 16-byte types are compared as they are."""
    size = array.dtype.itemsize
    if array.dtype.kind in "OUS" or size not in (1, 2, 4, 8):
        return array
    return array.view(np.dtype(f"u{size}"))


class _ExactStats:
    """Integers and bool: exact; integers also get absolute / relative errors, the absolute ones
    exact (int64 / uint64 past 2^53 differ by 1 where their float64 values are equal)."""

    def __init__(self, errors: bool) -> None:
        self.errors = _Errors() if errors else None
        self.count, self.first = 0, -1

    def add(self, where: np.ndarray, want: np.ndarray, got: np.ndarray, equal: int) -> None:
        """`want` / `got`: the elements at flat indices `where` whose bytes differ; `equal` more are identical."""
        if not want.size:
            if self.errors is not None:
                self.errors.add(_NO_VALUES, _NO_VALUES, equal)
            return
        bad = got != want
        if self.errors is not None:
            self.errors.add_exact(_int_distance(want, got), want.astype(np.float64), equal)
        if bad.any():
            self.count += int(np.count_nonzero(bad))
            if self.first < 0:
                self.first = int(where[np.argmax(bad)])

    def finish(self, result: OutputResult) -> None:
        result.mismatches = self.count
        if self.count and self.errors is not None:
            self.errors.finish(result)


def _int_distance(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    """|got - want| of integers, exact, as uint64: the larger minus the smaller, which fits uint64
    for every pair of 64-bit integers (the subtraction wraps modulo 2^64 onto the true distance)."""
    if want.dtype in _ML_INTS:
        want, got = want.astype(np.int8), got.astype(np.int8)
    high, low = np.maximum(want, got), np.minimum(want, got)
    return high.astype(np.uint64) - low.astype(np.uint64)


def _ordinal(values: np.ndarray) -> np.ndarray:
    """Each value's position in its float type's order, as int64: consecutive finite values of the
    type are consecutive integers, +0.0 and -0.0 both 0 (sign and magnitude from the bits; the
    4- and 6-bit types hold their bits in the low bits of a byte)."""
    info = ml_dtypes.finfo(values.dtype)
    bits = values.view(np.dtype(f"u{values.dtype.itemsize}")).astype(np.int64) & ((1 << info.bits) - 1)
    if float(info.min) > 0:                       # no sign bit (float8e8m0): the bits are the order
        return bits
    sign = 1 << (info.bits - 1)
    magnitude = bits & (sign - 1)
    return np.where(bits & sign, -magnitude, magnitude)


class _FloatStats:
    """Floats by the rule, one block at a time: the mismatch count and first index, the error
    figures and the smallest passing tolerances. `steps` (a StepRtol in force): finite values that
    many steps of the type apart pass too."""

    def __init__(self, atol: float, rtol: float, steps: "int | None" = None) -> None:
        self.atol, self.rtol, self.steps = atol, rtol, steps
        self.errors = _Errors()
        self.count, self.first = 0, -1
        self.smallest_atol: "float | None" = atol        # None once no finite atol can pass
        self.smallest_rtol: "float | None" = rtol

    def add(self, where: np.ndarray, want: np.ndarray, got: np.ndarray, equal: int) -> None:
        """`want` / `got`: the elements at flat indices `where` whose bytes differ; `equal` more are identical."""
        if not want.size:
            self.errors.add(_NO_VALUES, _NO_VALUES, equal)
            return
        e64, a64 = want.astype(np.float64), got.astype(np.float64)
        diff = np.abs(a64 - e64)
        magnitude = np.abs(e64)
        bad = ~(diff <= self.atol + self.rtol * magnitude)
        # a difference that is not finite has an infinity or NaN on a side (or overflowed):
        # decided here by the rule; the few elements concerned are gathered
        infinite = ~np.isfinite(diff)
        odd = np.flatnonzero(infinite) if infinite.any() else _NONE
        if odd.size:
            e, a = e64[odd], a64[odd]
            same = (e == a) | (np.isnan(e) & np.isnan(a))
            finite = np.isfinite(e) & np.isfinite(a)
            bad[odd] = ~same & ~(finite & (diff[odd] <= self.atol + self.rtol * magnitude[odd]))
            # NaN on one side only is an infinite error (NaN in the figures would hide it)
            diff[odd] = np.where(same, 0.0, np.where(finite, diff[odd], np.inf))
            if (bad[odd] & ~finite).any():
                self.smallest_atol = self.smallest_rtol = None
        self.errors.add(diff, e64, equal)
        plain = bad.copy() if self.steps is not None else bad      # past the plain rule (an rtol given instead)
        if self.steps is not None and bad.any():
            near = np.flatnonzero(bad & ~infinite)
            bad[near[np.abs(_ordinal(got[near]) - _ordinal(want[near])) <= self.steps]] = False
        if not bad.any():
            return
        self.count += int(np.count_nonzero(bad))
        if self.first < 0:
            self.first = int(where[np.argmax(bad)])
        self._smallest(diff[bad], magnitude[bad], diff[plain], magnitude[plain])

    def _smallest(self, diff: np.ndarray, magnitude: np.ndarray, plain_diff: np.ndarray,
                  plain_magnitude: np.ndarray) -> None:
        """The smallest atol (at the rtol in force, steps kept) over the failing elements, and the
        smallest rtol (at the atol in force) over those past the plain rule: a given rtol replaces
        the steps, so every element must pass by it."""
        if self.smallest_atol is not None:
            term = self.rtol * magnitude
            self.smallest_atol = _least(lambda x: diff <= x + term, diff - term, self.smallest_atol)
        if self.smallest_rtol is not None:
            if not plain_magnitude.all():
                self.smallest_rtol = None
            else:
                estimate = (plain_diff - self.atol) / plain_magnitude
                self.smallest_rtol = _least(lambda r: plain_diff <= self.atol + r * plain_magnitude, estimate,
                                            self.smallest_rtol)

    def finish(self, result: OutputResult) -> None:
        result.mismatches = self.count
        self.errors.finish(result)
        if self.count:
            result.smallest_atol, result.smallest_rtol = self.smallest_atol, self.smallest_rtol


def _least(passes: "Callable[[float], np.ndarray]", estimates: np.ndarray, floor: float) -> "float | None":
    """The least float64 x >= `floor` at which every element passes (`passes(x)` per element,
    monotone in x), or None when no finite x does. `floor`: the tolerance in force (which these
    elements fail) or the answer for the blocks before. `estimates` (x solved per element in
    float64) are within a few roundings of the answer; a bisection on the bit patterns of
    non-negative float64 (ordered like the values) makes it exact."""
    with np.errstate(invalid="ignore"):
        top = float(np.max(estimates))
    if not np.isfinite(top):
        return None
    ordered = lambda x: int(np.float64(x).view(np.int64))            # noqa: E731
    value = lambda bits: float(np.int64(bits).view(np.float64))       # noqa: E731
    every = lambda x: bool(np.all(passes(x)))                        # noqa: E731
    low, high = ordered(max(floor, 0.0)), ordered(max(top, floor, 0.0))
    step = 1
    while not every(value(high)):                 # the estimate fell short: widen upwards
        high += step
        step *= 2
        if not np.isfinite(value(high)):
            return None
    if high - 64 > low and not every(value(high - 64)):
        low = high - 64                           # the usual case: the answer is a few bits below
    if every(value(low)):                         # the answer for the blocks before holds here too
        return value(low)
    while high - low > 1:
        middle = (low + high) // 2
        if every(value(middle)):
            high = middle
        else:
            low = middle
    return value(high)


class _Errors:
    """Max / mean absolute error over every element; relative error only where it is defined: an
    element equal to the oracle's has 0, one that differs from an expected 0 has none (counted in
    `rel_undefined`, left out of the relative figures). Integers' absolute errors add up exactly
    (add_exact): the max is a Python int."""

    def __init__(self) -> None:
        self.elements = self.rel_count = self.rel_undefined = 0
        self.max_abs: "float | int" = 0.0
        self.sum_abs: "float | int" = 0.0
        self.max_rel = self.sum_rel = 0.0
        self.rel_nonzero = False

    def add(self, diff: np.ndarray, expected: np.ndarray, equal: int = 0) -> None:
        """`diff` / `expected` of some elements, and `equal` more that are identical (error 0)."""
        if diff.size:
            self.max_abs = max(self.max_abs, float(np.max(diff)))
            self.sum_abs += float(np.sum(diff))
        self._relative(diff, expected, equal)

    def add_exact(self, distance: np.ndarray, expected: np.ndarray, equal: int = 0) -> None:
        """add() for integers: `distance` the exact |actual - expected| as uint64."""
        if distance.size:
            self.max_abs = max(int(self.max_abs), int(np.max(distance)))
            # in two 32-bit halves: a block (2^20 elements) sums each without wrapping
            high, low = np.sum(distance >> np.uint64(32)), np.sum(distance & np.uint64(0xFFFFFFFF))
            self.sum_abs = int(self.sum_abs) + (int(high) << 32) + int(low)
        self._relative(distance.astype(np.float64), expected, equal)

    def _relative(self, diff: np.ndarray, expected: np.ndarray, equal: int) -> None:
        self.elements += diff.size + equal
        self.rel_count += equal
        if not diff.size:
            return
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            undefined = (diff != 0) & (expected == 0)
            # against an infinite or NaN expected value a difference is infinitely relative
            rel = np.where(diff == 0, 0.0, np.where(np.isfinite(expected), diff / np.abs(expected), np.inf))[~undefined]
        self.rel_undefined += int(np.count_nonzero(undefined))
        self.rel_count += rel.size
        if rel.size:
            self.max_rel = max(self.max_rel, float(np.max(rel)))
            self.sum_rel += float(np.sum(rel))
            self.rel_nonzero = self.rel_nonzero or bool(np.any(rel))

    def finish(self, result: OutputResult) -> None:
        if not self.elements:
            return
        result.max_abs_error, result.mean_abs_error = self.max_abs, self.sum_abs / self.elements
        result.rel_undefined = self.rel_undefined
        if self.rel_count and not (self.rel_undefined and not self.rel_nonzero):   # else every difference is at an expected 0
            result.max_rel_error, result.mean_rel_error = self.max_rel, self.sum_rel / self.rel_count


@dataclass
class BackendReport:
    backend: BackendName               # parsed where the user's text entered (backend_names.py)
    outputs: "list[OutputResult]" = field(default_factory=list)
    error: str = ""                    # the backend crashed: status ERROR, a failure
    seconds: float = 0.0               # wall time of its runs (all iterations)
    unsupported_nodes: "dict[str, str]" = field(default_factory=dict)
    fed_from_oracle: "list[str]" = field(default_factory=list)   # values of unsupported nodes fed in
    node_providers: "dict[str, str] | None" = None
    placement_notes: "list[str]" = field(default_factory=list)   # provider fallbacks, folded nodes
    values: "dict" = field(default_factory=dict, repr=False)   # its outputs for the first feed set
    ran: str = ""                      # what it ran (a provider: the file as shipped, or a modified copy)
    # node -> why the backend did not run it itself (cut out, or run by another provider): PARTIAL
    partial: "dict[str, str]" = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.error and all(o.status != "mismatch" for o in self.outputs)

    @property
    def not_compared(self) -> "list[str]":
        """Outputs it did not produce itself (UNSUPPORTED), each once."""
        return list(dict.fromkeys(o.output for o in self.outputs if o.status == "unsupported"))

    @property
    def is_partial(self) -> bool:
        """It ran only part of the model: a node cut out or run elsewhere, or an output not compared."""
        return bool(self.partial or self.not_compared)

    @property
    def status(self) -> str:
        """error | mismatch | partial | ok: what every view (text, JSON, zoo, JUnit) says of it."""
        if self.error:
            return "error"
        if not self.ok:
            return "mismatch"
        return "partial" if self.is_partial else "ok"

    def partial_text(self) -> str:
        """The nodes (and outputs) it did not run itself, in one short clause."""
        return partial_clause(list(self.partial), list(self.not_compared), "not compared")

    def partial_why(self, most: int = 3) -> str:
        """partial_text with why, for a one-line view (conformance run): 'nodes a, b: ran on X (...)'."""
        groups = partial_reasons(self.partial)
        shown = [f"node{'s' if len(nodes) > 1 else ''} {name_list(nodes, 4)}: {why}" for why, nodes in groups[:most]]
        if len(groups) > most:
            shown.append(f"{sum(len(n) for _, n in groups[most:])} more nodes for other reasons")
        if self.not_compared:
            shown.append(partial_clause([], list(self.not_compared), "not compared"))
        return "; ".join(shown)

    def to_dict(self, description: "str | None" = None) -> dict:
        """Its entry of check --json; `description` defaults to the backend's own."""
        data = {"backend": self.backend.text,
                "description": self.backend.description if description is None else description, "ok": self.ok,
                "status": self.status, "ran": self.ran, "partial": dict(self.partial),
                "not_compared": self.not_compared,
                "error": self.error, "seconds": round(self.seconds, 6),
                "unsupported_nodes": dict(self.unsupported_nodes), "fed_from_oracle": list(self.fed_from_oracle),
                "outputs": [o.to_dict() for o in self.outputs]}
        if self.node_providers is not None:
            data["node_providers"] = dict(self.node_providers)
        if self.placement_notes:
            data["placement_notes"] = list(self.placement_notes)
        return data


def partial_reasons(partial: "dict[str, str]") -> "list[tuple[str, list[str]]]":
    """A PARTIAL backend's nodes grouped by why it did not run them: [(why, nodes)], first seen first."""
    reasons: "dict[str, list[str]]" = {}
    for node, why in partial.items():
        reasons.setdefault(why, []).append(node)
    return list(reasons.items())


def partial_clause(nodes: "list[str]", outputs: "list[str]", outputs_verb: str) -> str:
    """What a PARTIAL backend left to others, in one clause of bounded length whatever the model's
    size: 'nodes a, b, ... (90 nodes) not run on it; outputs x, y not compared' (the JSON forms
    keep every name)."""
    parts = []
    if nodes:
        parts.append(f"node{'s' if len(nodes) > 1 else ''} {name_list(nodes, 4)} not run on it")
    if outputs:
        parts.append(f"output{'s' if len(outputs) > 1 else ''} {name_list(outputs, 4, 'outputs')} {outputs_verb}")
    return "; ".join(parts)
