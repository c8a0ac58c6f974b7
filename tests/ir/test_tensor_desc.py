"""ir.tensor_desc: DMLCalcBufferTensorSize against a brute-force oracle, and descriptor validation."""
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnx_dml_lowering.ir import DataType, DmlLowerError, TensorDesc, min_size_bytes

T = DataType


def oracle_min_bytes(bits: int, sizes, strides) -> int:
    """Brute force: the largest linear element offset + 1, in bits, ceil to bytes, round up to 4."""
    if strides is None:                      # packed row-major
        strides, acc = [], 1
        for size in reversed(sizes):
            strides.insert(0, acc)
            acc *= size
    last = max(sum(i * s for i, s in zip(index, strides))
               for index in itertools.product(*(range(n) for n in sizes)))
    nbytes = -(-((last + 1) * bits) // 8)
    return -(-nbytes // 4) * 4


SIZE_STRIDE_CASES = [
    ((1,), None), ((1,), (1,)), ((3,), None), ((3,), (1,)), ((3,), (2,)), ((3,), (0,)),
    ((5,), (7,)), ((7,), None), ((9,), None), ((2, 3), None), ((2, 3), (3, 1)),
    ((2, 3), (1, 2)),                    # transposed
    ((2, 3), (4, 1)),                    # padded rows
    ((2, 3), (0, 1)), ((2, 3), (1, 0)), ((2, 3), (0, 0)),      # broadcasts
    ((4, 1, 5), None), ((4, 1, 5), (5, 9, 1)), ((4, 1, 5), (1, 0, 4)),
    ((1, 1, 2, 4), None), ((1, 1, 8, 3), (0, 0, 2, 16)),        # NonZero coordinates into int64 slots
    ((2, 3, 4), (12, 4, 1)), ((2, 3, 4), (1, 2, 6)), ((2, 3, 4), (0, 4, 1)), ((2, 3, 4), (13, 4, 1)),
    ((3, 5, 1, 1, 2), None), ((3, 5, 1, 1, 2), (1, 3, 7, 0, 15)),
    ((2,) * 8, None), ((2,) * 8, (128, 64, 32, 16, 8, 4, 2, 1)), ((2,) * 8, (1, 2, 4, 8, 16, 32, 64, 0)),
    ((1,) * 8, None), ((1,) * 8, (5,) * 8),
]

GRID_TYPES = [T.FLOAT32, T.FLOAT16, T.FLOAT64, T.UINT8, T.INT8, T.UINT16, T.INT16, T.UINT32, T.INT32,
              T.UINT64, T.INT64, T.UINT4, T.INT4]
BITS = {T.FLOAT32: 32, T.FLOAT16: 16, T.FLOAT64: 64, T.UINT8: 8, T.INT8: 8, T.UINT16: 16,
        T.INT16: 16, T.UINT32: 32, T.INT32: 32, T.UINT64: 64, T.INT64: 64, T.UINT4: 4, T.INT4: 4}


@pytest.mark.parametrize("dtype", GRID_TYPES, ids=lambda t: t.name)
def test_min_size_matches_brute_force_oracle(dtype):
    for sizes, strides in SIZE_STRIDE_CASES:
        expected = oracle_min_bytes(BITS[dtype], sizes, strides)
        assert min_size_bytes(dtype, sizes, strides) == expected, (sizes, strides)
        desc = TensorDesc(dtype, sizes, strides)
        assert desc.min_total_size == expected, (sizes, strides)
        assert desc.total_bytes == expected, (sizes, strides)
        desc.validate()                       # the minimum itself is always valid


@pytest.mark.parametrize("dtype,sizes,strides,expected", [
    (T.FLOAT32, (2, 3), None, 24),
    (T.FLOAT16, (3,), None, 8),              # 6 bytes -> 8
    (T.UINT8, (5,), None, 8),                # 5 bytes -> 8
    (T.UINT8, (4,), None, 4),
    (T.INT64, (4, 3), (0, 1), 24),           # broadcast rows: 3 elements
    (T.UINT4, (3,), None, 4),                # 12 bits -> 2 bytes -> 4
    (T.INT4, (9,), None, 8),                 # 36 bits -> 5 bytes -> 8
    (T.UINT4, (8,), None, 4),                # 32 bits -> 4 bytes
    (T.UINT4, (2, 5), (16, 1), 12),          # last offset 20 -> 21 elements -> 84 bits -> 11 bytes -> 12
])
def test_min_size_hand_examples(dtype, sizes, strides, expected):
    assert oracle_min_bytes(BITS[dtype], sizes, strides) == expected
    assert min_size_bytes(dtype, sizes, strides) == expected


def test_hand_worked_strided_sizes():
    # (2,3) strides (4,1): last offset 1*4 + 2*1 = 6 -> 7 elements -> 28 bytes.
    assert min_size_bytes(T.FLOAT32, (2, 3), (4, 1)) == 28
    # NonZero coordinates {1,1,8,3} strides {0,0,2,16}: last 7*2 + 2*16 = 46 -> 47 words -> 188 bytes.
    assert min_size_bytes(T.UINT32, (1, 1, 8, 3), (0, 0, 2, 16)) == 188
    # fully broadcast: one element, rounded up to 4
    assert min_size_bytes(T.UINT8, (7, 9), (0, 0)) == 4
    assert min_size_bytes(T.FLOAT64, (7, 9), (0, 0)) == 8


def test_total_size_may_exceed_minimum():
    desc = TensorDesc(T.FLOAT32, (2, 3), total_size=64)
    desc.validate()
    assert desc.total_bytes == 64
    assert desc.min_total_size == 24


def _raises(desc, *fragments, what="view probe"):
    with pytest.raises(DmlLowerError) as info:
        desc.validate(what)
    message = str(info.value)
    assert what in message, message
    for fragment in fragments:
        assert fragment.lower() in message.lower(), (fragment, message)
    return message


@pytest.mark.parametrize("sizes", [(0,), (2, 0, 3), (1, 1, 1, 0), (4, -1)])
def test_zero_or_negative_size_is_rejected(sizes):
    _raises(TensorDesc(T.FLOAT32, sizes), "size")


@pytest.mark.parametrize("rank", [0, 9, 12])
def test_dimension_count_outside_1_to_8(rank):
    _raises(TensorDesc(T.FLOAT32, (1,) * rank), "DimensionCount", str(rank))


@pytest.mark.parametrize("rank", range(1, 9))
def test_dimension_count_1_to_8_accepted(rank):
    TensorDesc(T.FLOAT32, (2,) * rank).validate()


def test_more_than_2_pow_32_minus_1_elements():
    _raises(TensorDesc(T.UINT8, (65536, 65536)), "elements", str(2**32 - 1))
    _raises(TensorDesc(T.UINT8, (2, 2**31)), "elements")
    _raises(TensorDesc(T.UINT8, (2**32,)), "elements")


def test_exactly_2_pow_32_minus_1_elements_is_allowed():
    assert 65535 * 65537 == 2**32 - 1
    TensorDesc(T.UINT8, (65535, 65537)).validate()
    TensorDesc(T.UINT8, (2**32 - 1,)).validate()


@pytest.mark.parametrize("dtype,sizes,strides,total", [
    (T.FLOAT32, (2, 3), None, 20),
    (T.FLOAT32, (2, 3), (4, 1), 24),          # strided minimum is 28
    (T.FLOAT32, (3, 2), (1, 3), 20),          # transposed 2x3: minimum 24
    (T.UINT32, (1, 1, 8, 3), (0, 0, 2, 16), 96),
    (T.UINT4, (9,), None, 4),
    (T.INT64, (2,), None, 12),
])
def test_total_size_below_minimum(dtype, sizes, strides, total):
    minimum = oracle_min_bytes(BITS[dtype], sizes, strides)
    assert total < minimum
    _raises(TensorDesc(dtype, sizes, strides, total_size=total), "TotalTensorSizeInBytes", str(total),
            "minimum", str(minimum))


@pytest.mark.parametrize("total", [26, 30, 33, 25])
def test_total_size_not_multiple_of_4(total):
    _raises(TensorDesc(T.UINT8, (24,), total_size=total), "TotalTensorSizeInBytes", str(total), "multiple of 4")


@pytest.mark.parametrize("dtype,alignment", [
    (T.FLOAT32, 3), (T.FLOAT32, 12), (T.FLOAT32, 2), (T.FLOAT32, 1), (T.INT64, 4), (T.FLOAT64, 2),
    (T.FLOAT16, 1), (T.UINT8, 6), (T.UINT8, 24), (T.INT64, 48),
])
def test_bad_alignment(dtype, alignment):
    _raises(TensorDesc(dtype, (4,), alignment=alignment), "GuaranteedBaseOffsetAlignment", str(alignment))


@pytest.mark.parametrize("dtype,alignment", [
    (T.FLOAT32, 0), (T.FLOAT32, 4), (T.FLOAT32, 16), (T.FLOAT32, 256), (T.INT64, 8), (T.INT64, 16),
    (T.UINT8, 1), (T.UINT8, 2), (T.FLOAT16, 2), (T.UINT4, 1), (T.INT4, 16),
])
def test_good_alignment(dtype, alignment):
    TensorDesc(dtype, (4,), alignment=alignment).validate()


@pytest.mark.parametrize("strides", [(-1,), (3, -1), (-3, 1)])
def test_negative_stride(strides):
    sizes = (2,) * len(strides)
    _raises(TensorDesc(T.FLOAT32, sizes, strides, total_size=64), "negative stride")


@pytest.mark.parametrize("sizes,strides", [((2, 3), (1,)), ((2, 3), (3, 1, 1)), ((4,), ()),
                                           ((1, 1, 2, 4), (8, 4, 1))])
def test_wrong_stride_count(sizes, strides):
    _raises(TensorDesc(T.FLOAT32, sizes, strides, total_size=256), "strides", str(len(strides)),
            str(len(sizes)))


def test_unknown_data_type_rejected():
    _raises(TensorDesc(T.UNKNOWN, (4,), total_size=4), "UNKNOWN")


def test_unknown_flags_rejected_owned_by_dml_accepted():
    TensorDesc(T.FLOAT32, (4,), flags=1).validate()
    _raises(TensorDesc(T.FLOAT32, (4,), flags=2), "flags")


def test_default_what_is_tensor():
    with pytest.raises(DmlLowerError, match="tensor"):
        TensorDesc(T.FLOAT32, (0,)).validate()


def test_messages_are_one_line():
    for desc in [TensorDesc(T.FLOAT32, (2, 3), (4, 1), total_size=24), TensorDesc(T.FLOAT32, ()),
                 TensorDesc(T.FLOAT32, (4,), alignment=3)]:
        with pytest.raises(DmlLowerError) as info:
            desc.validate("v")
        assert "\n" not in str(info.value)


# -- symbolic sizes ---------------------------------------------------------------------------

def test_symbolic_sizes_bind():
    desc = TensorDesc(T.INT64, (3, "nnz"))
    assert not desc.is_bound
    assert desc.symbols == ("nnz",)
    assert desc.rank == 2
    desc.validate()                           # structure is fine; sizes not known yet
    bound = desc.bind({"nnz": 5, "other": 9})
    assert bound.is_bound and bound.sizes == (3, 5)
    assert bound.data_type == T.INT64 and bound.strides is None
    assert bound.min_total_size == oracle_min_bytes(64, (3, 5), None) == 120
    assert bound.element_count == 15
    assert desc.sizes == (3, "nnz")           # the original is untouched


def test_symbolic_sizes_bind_with_strides_and_total():
    desc = TensorDesc(T.UINT32, ("n", "m", 2), (2 * 7, 2, 1), total_size=400)
    bound = desc.bind({"n": 3, "m": 4})
    assert bound.sizes == (3, 4, 2)
    assert bound.strides == (14, 2, 1) and bound.total_size == 400
    assert bound.min_total_size == oracle_min_bytes(32, (3, 4, 2), (14, 2, 1))
    bound.validate()


def test_bound_zero_symbol_is_an_empty_dimension():
    with pytest.raises(DmlLowerError, match="size"):
        TensorDesc(T.INT64, (3, "nnz")).bind({"nnz": 0}).validate()


def test_bind_missing_symbol_names_it():
    with pytest.raises(DmlLowerError, match="nnz"):
        TensorDesc(T.INT64, (3, "nnz")).bind({"count": 4})


def test_unbound_desc_has_no_concrete_sizes():
    desc = TensorDesc(T.INT64, (3, "nnz"))
    with pytest.raises(DmlLowerError, match="nnz"):
        desc.concrete_sizes()
    with pytest.raises(DmlLowerError):
        _ = desc.min_total_size


def test_bind_on_bound_desc_is_identity():
    desc = TensorDesc(T.FLOAT32, (2, 3))
    assert desc.bind({}) == desc


# -- DirectML's 32-bit fields: Strides are UINT, elements are indexed in 32 bits ---------------------

U32 = 2**32 - 1

THIRTY_TWO_BIT_CASES = [
    # sizes, strides, the field it breaks (None: fits)
    ((1, 1), (1, U32), None),                       # the widest stride that fits
    ((1, 1), (1, U32 + 1), "Strides"),
    ((2,), (U32,), None),                           # last element at index 2^32 - 1 exactly
    ((3,), (2**31,), "element index"),              # strides fit, index 2^32 does not
    ((2**31 - 1, 1), (2, 2 * (2**31 - 1)), None),   # NonZero's rank-1 coordinates at 2^31 - 1 elements
    ((2**31 + 1, 1), (2, 2 * (2**31 + 1)), "Strides"),  # ... and at 2^31 + 1 (the 4294967298)
    ((2**30 + 1, 2), (4, 2), "element index"),      # the element-major layout (NonZero -> Transpose)
    ((2**30, 2), (4, 2), None),
]


@pytest.mark.parametrize("sizes,strides,field", THIRTY_TWO_BIT_CASES)
def test_32_bit_strides_and_element_index(sizes, strides, field):
    desc = TensorDesc(T.UINT32, sizes, strides)
    if field is None:
        desc.validate()
        return
    last = sum((s - 1) * t for s, t in zip(sizes, strides))
    wide = max(strides)
    _raises(desc, field, str(wide if field == "Strides" else last), str(U32))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2**17), st.integers(0, 2**34)), min_size=1, max_size=4))
def test_32_bit_limits_property(dims):
    """validate refuses exactly the descriptors whose strides or last element index pass 2^32 - 1
    (the element count kept under DirectML's limit, so only these rules can fire)."""
    sizes, strides = zip(*dims)
    desc = TensorDesc(T.UINT8, sizes, strides)
    if desc.element_count > U32:
        return
    too_big = max(strides) > U32 or sum((s - 1) * t for s, t in zip(sizes, strides)) > U32
    if too_big:
        with pytest.raises(DmlLowerError, match="32-bit"):
            desc.validate()
    else:
        desc.validate()
