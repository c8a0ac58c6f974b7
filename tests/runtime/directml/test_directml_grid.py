"""The emulator proven bit-exact against Microsoft's DirectML.dll: every data type x ranks 1-8 x
empty / scalar / large, DIAGONAL_MATRIX and DIAGONAL_MATRIX1 offsets, bands and values (non-square
and batched too), NONZERO_COORDINATES over -0.0, NaN, infinities, subnormals and 64-bit values past
2^32, the strided copies and bitwise operators the lowering emits. Each case runs on the numpy
kernels and on DirectML.dll over the same descriptors and the same whole buffers; the output
buffers must be byte-equal, the bytes either side leaves unwritten included (an output starts as a
pattern: NONZERO_COORDINATES' rows past the count, the high words of the DML EP's int64 layout).

Feature levels: the device runs at its highest level and an operator's behaviour does not depend
on the level; the level tables decide which descriptors a lowering may emit. Every case the tables
allow at some level must run and match; every case DirectML refuses must be one the tables allow at
no level (the tables stay honest); and at every level each operator that exists there has matching
cases the tables allow there. The grid runs in one host (the session's), in seconds."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnx_dml_lowering.ir import ALL_LEVELS, DataType, TensorDesc
from onnx_dml_lowering.ir.support import OPERATORS

from .grid import (Case, bitwise_case, diagonal1_case, diagonal_case, identity_case, nonzero_case, packed,
                   run_cases)

pytestmark = pytest.mark.directml
T = DataType
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
TYPES = [T.FLOAT32, T.FLOAT16, T.FLOAT64, T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8, T.UINT16, T.UINT32, T.UINT64]
RANDOM = np.random.default_rng(20261127)


# -- NONZERO_COORDINATES -------------------------------------------------------------------------

def special_values(dtype: DataType) -> np.ndarray:
    """The values whose zero-ness is easy to get wrong, in the input's type."""
    np_type = dtype.numpy
    if dtype.is_float:
        info = np.finfo(np_type)
        return np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, info.smallest_subnormal,
                         -info.smallest_subnormal, info.tiny, 1.0, -1.0], np_type)
    info = np.iinfo(np_type)
    values = [0, 1, info.max, info.min, info.max - 1]
    if info.bits == 64:
        values += [2**32, 2**32 + 1, 2**40 * (3 if info.min == 0 else -3), 1 << 63 if info.min == 0 else -(2**32)]
    return np.array(values, object).astype(np_type)


def nonzero_input(dtype: DataType, shape: "tuple[int, ...]", kind: str) -> np.ndarray:
    count = int(np.prod(shape))
    if kind == "empty":          # no non-zero element: count 0 (a zero-sized tensor never reaches DirectML)
        pool = special_values(dtype)[:2] if dtype.is_float else np.zeros(1, dtype.numpy)
        return RANDOM.choice(pool, count).reshape(shape)
    if kind == "scalar":
        return special_values(dtype)[2:3].reshape(shape)
    pool = special_values(dtype)
    values = RANDOM.choice(pool, count)
    values[RANDOM.random(count) < 0.5] = 0
    return values.reshape(shape)


def shape_of(rank: int, kind: str) -> "tuple[int, ...]":
    if kind == "scalar":
        return (1,) * rank
    if kind == "large":          # about 2^18 elements: many thread groups, still fast on lavapipe
        side = max(2, round((1 << 18) ** (1 / rank)))
        return (side,) * rank
    return tuple(int(s) for s in RANDOM.integers(1, 5, rank))


def nonzero_cases() -> "list[Case]":
    cases = []
    for dtype, rank, kind in itertools.product(TYPES, range(1, 9), ("empty", "scalar", "random", "large")):
        if kind == "large" and rank not in (1, 3, 8):
            continue
        shape = shape_of(rank, kind)
        x = nonzero_input(dtype, shape, kind)
        effective = len(shape) - next((i for i, s in enumerate(shape) if s != 1), len(shape))
        for n in sorted({rank, max(1, effective)}):
            cases.append(nonzero_case(x, n, f"{kind} rank {rank} N {n}", count_rank=1 + (rank + n) % 8))
    for dtype, rank in itertools.product(TYPES, (4, 5)):         # 3_0's shape: every tensor of one rank
        x = nonzero_input(dtype, shape_of(rank, "random"), "random")
        cases.append(nonzero_case(x, rank, f"3_0 layout rank {rank}", count_rank=rank, coords_rank=rank))
    for dtype in TYPES:                                          # the DML EP's strided int64 layout
        x = nonzero_input(dtype, (3, 5), "random")
        cases.append(nonzero_case(x, 2, "DML EP int64 layout", coords_strides=True))
    return cases


# -- DIAGONAL_MATRIX and DIAGONAL_MATRIX1 --------------------------------------------------------

SHAPES = [(1, 1), (3, 3), (3, 5), (5, 3), (2, 4, 4), (2, 3, 2, 6), (1, 1, 4, 7)]
VALUES = [1.0, 2.5, -3.7, -0.0, 1e-40, 255.9, 300.7, -1.5, 65536.5, 3e9, 1e10, 9.3e18, 1.9e19, np.inf, np.nan]


def diagonal_cases() -> "list[Case]":
    cases = []
    for dtype, shape in itertools.product(TYPES, SHAPES):
        height, width = shape[-2:]
        offsets = [0, 1, -1, width - 1, -(height - 1), width, -height, INT32_MIN, INT32_MAX]
        for index, offset in enumerate(offsets):
            value = VALUES[(index + len(cases)) % len(VALUES)]
            cases.append(diagonal_case(dtype, shape, offset, value, f"offset {offset} value {value}"))
    for dtype, value in itertools.product(TYPES, VALUES):
        cases.append(diagonal_case(dtype, (1, 1, 3, 3), 0, value, f"4-D value {value}"))
    cases.append(diagonal_case(T.FLOAT32, (1024, 1024), 3, 1.0, "large"))
    return cases


def band_values(dtype: DataType) -> list:
    if dtype.is_float:
        info = np.finfo(dtype.numpy)
        return [1.0, -0.0, float(info.max), float(info.smallest_subnormal), float("nan"), float("-inf")]
    info = np.iinfo(dtype.numpy)
    values = [1, int(info.max), int(info.min)]
    if info.bits == 64:
        values.append(2**40 + 3 if info.min == 0 else -(2**40) - 3)
    return values


BANDS = [(0, 1), (-1, 2), (2, -1), (INT32_MIN, 1), (0, INT32_MAX), (5, 5), (3, 0), (INT32_MIN, INT32_MAX),
         (INT32_MAX, INT32_MIN), (-100, 100)]


def diagonal1_cases() -> "list[Case]":
    cases = []
    for dtype, shape in itertools.product(TYPES, SHAPES):
        values = band_values(dtype)
        for index, (begin, end) in enumerate(BANDS):
            value = values[index % len(values)]
            source = None
            if index % 2:
                source = RANDOM.choice(special_values(dtype), int(np.prod(shape))).reshape(shape)
            cases.append(diagonal1_case(dtype, shape, value, begin, end, source,
                                        f"band [{begin}, {end}) value {value} {'over input' if index % 2 else 'alone'}"))
    cases.append(diagonal1_case(T.UINT8, (1, 2048, 512), 1, INT32_MIN, 1, None, "large causal mask"))
    return cases


# -- the glue: strided copies and bitwise operators ------------------------------------------------

def glue_cases() -> "list[Case]":
    cases = []
    for dtype in TYPES:
        x = RANDOM.choice(special_values(dtype), 24).reshape(4, 6)
        source = TensorDesc(dtype, (6, 4), (1, 6))               # the transpose, as strides
        cases.append(identity_case(x, source, packed(dtype, (6, 4)), "transpose"))
        crop = TensorDesc(dtype, (2, 3), (6, 1), total_size=packed(dtype, (4, 6)).total_bytes)
        cases.append(identity_case(x, crop, packed(dtype, (2, 3)), "crop"))
        cases.append(identity_case(x.reshape(1, 2, 2, 6), packed(dtype, (1, 2, 2, 6)), packed(dtype, (1, 2, 2, 6)),
                                   "4-D copy"))
    for dtype, operator in itertools.product((T.UINT8, T.UINT16, T.UINT32, T.INT32, T.INT64, T.UINT64),
                                             ("ELEMENT_WISE_BIT_OR", "ELEMENT_WISE_BIT_AND")):
        a = RANDOM.choice(special_values(dtype), 30).reshape(5, 6)
        b = RANDOM.choice(special_values(dtype), 30).reshape(5, 6)
        cases.append(bitwise_case(operator, a, b, "words"))
    return cases


# -- the run --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def outcomes(dml_host):
    with np.errstate(all="ignore"):
        cases = nonzero_cases() + diagonal_cases() + diagonal1_cases() + glue_cases()
        return run_cases(dml_host, cases)


def test_every_case_the_tables_allow_is_byte_equal_on_directml(outcomes):
    allowed = [o for o in outcomes if o.case.levels]
    differ = [o.describe() for o in allowed if not o.equal]
    assert len(allowed) > 1500
    assert not differ, f"{len(differ)} of {len(allowed)} cases differ:\n" + "\n".join(differ[:20])


def test_what_directml_refuses_the_tables_allow_at_no_level(outcomes):
    refused = [o for o in outcomes if o.refused is not None]
    allowed_yet_refused = [o.describe() for o in refused if o.case.levels]
    assert not allowed_yet_refused, "\n".join(allowed_yet_refused[:20])
    # NONZERO_COORDINATES refuses 64-bit input, as its tables say (E_INVALIDARG at CreateOperator)
    refused_inputs = {o.case.tensors[0].data_type for o in refused if o.case.operator == "NONZERO_COORDINATES"}
    assert refused_inputs == {T.INT64, T.UINT64, T.FLOAT64}
    assert all(o.refused.stage == "CreateOperator" for o in refused)


def test_what_the_tables_allow_at_no_level_directml_refuses_or_the_emulator_matches(outcomes):
    """A case outside the tables that DirectML runs anyway must still be byte-equal: the tables
    may be stricter than the device, never the emulator wrong."""
    outside = [o for o in outcomes if not o.case.levels and o.refused is None]
    differ = [o.describe() for o in outside if not o.equal]
    assert not differ, "\n".join(differ[:20])


@pytest.mark.parametrize("level", ALL_LEVELS, ids=lambda level: level.name)
def test_every_level_has_matching_cases_for_every_operator_it_has(outcomes, level):
    for name, support in OPERATORS.items():
        if support.row(level) is None:
            continue
        matched = [o for o in outcomes if o.case.operator == name and level.name in o.case.levels and o.equal]
        assert matched, f"no {name} case the tables allow at {level.name} ran and matched"
