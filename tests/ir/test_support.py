"""ir.support + ir.operators validate(): every feature level x data type x DimensionCount against an
independent transcription of the spec's tensor-support tables (the operator pages in shared/spec and
DML_FACTS section 4), plus each operator's own constraints."""
import pytest

from onnx_dml_lowering.ir import (ALL_LEVELS, DataType, DiagonalMatrix, DiagonalMatrix1, DmlLowerError,
                ElementWiseIdentity, NonZeroCoordinates, OPERATORS, TensorDesc, parse_level)

T = DataType
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# -- the spec, transcribed (names, not ir.support objects) --------------------------------------
EIGHT = {"FLOAT32", "FLOAT16", "INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8"}
ELEVEN = EIGHT | {"FLOAT64", "INT64", "UINT64"}

# operator -> [(since level, {tensor: (min dims, max dims, types)})], any order
SPEC = {
    "NONZERO_COORDINATES": [
        ("4_0", {"InputTensor": (1, 8, EIGHT), "OutputCountTensor": (1, 8, {"UINT32"}),
                 "OutputCoordinatesTensor": (2, 8, {"UINT32"})}),
        ("3_0", {"InputTensor": (4, 5, EIGHT), "OutputCountTensor": (4, 5, {"UINT32"}),
                 "OutputCoordinatesTensor": (4, 5, {"UINT32"})}),
    ],
    "DIAGONAL_MATRIX": [
        ("2_0", {"OutputTensor": (4, 4, {"FLOAT32", "FLOAT16"})}),
        ("2_1", {"OutputTensor": (4, 4, EIGHT)}),
        ("4_0", {"OutputTensor": (2, 4, EIGHT)}),
        ("5_1", {"OutputTensor": (2, 4, ELEVEN)}),
    ],
    "DIAGONAL_MATRIX1": [
        ("5_1", {"InputTensor": (2, 4, ELEVEN), "OutputTensor": (2, 4, ELEVEN)}),
    ],
    "ELEMENT_WISE_IDENTITY": [
        ("1_0", {"InputTensor": (4, 5, {"FLOAT32", "FLOAT16"}), "OutputTensor": (4, 5, {"FLOAT32", "FLOAT16"})}),
        ("2_1", {"InputTensor": (4, 5, EIGHT), "OutputTensor": (4, 5, EIGHT)}),
        ("3_0", {"InputTensor": (1, 8, EIGHT), "OutputTensor": (1, 8, EIGHT)}),
        ("4_1", {"InputTensor": (1, 8, ELEVEN), "OutputTensor": (1, 8, ELEVEN)}),
    ],
}
SPEC_NUMBER = {"NONZERO_COORDINATES": 133, "DIAGONAL_MATRIX": 93, "DIAGONAL_MATRIX1": 163,
               "ELEMENT_WISE_IDENTITY": 1}
SPEC_INTRODUCED = {"NONZERO_COORDINATES": "3_0", "DIAGONAL_MATRIX": "2_0", "DIAGONAL_MATRIX1": "5_1",
                   "ELEMENT_WISE_IDENTITY": "1_0"}
LEVEL_NAMES = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2",
               "6_0", "6_1", "6_2", "6_3", "6_4"]


def level_value(name: str) -> int:
    major, minor = name.split("_")
    return int(f"0x{major}{minor}00", 16)


def spec_row(op: str, level: str):
    """The newest spec table at or below `level` (None: the operator does not exist yet)."""
    rows = [(since, table) for since, table in SPEC[op] if level_value(since) <= level_value(level)]
    if not rows:
        return None, None
    return max(rows, key=lambda r: level_value(r[0]))


def spec_accepts(op: str, level: str, tensors: "dict[str, tuple[str, int]]") -> bool:
    """tensors: tensor -> (type name, DimensionCount)."""
    since, table = spec_row(op, level)
    if table is None:
        return False
    for name, (dtype, dims) in tensors.items():
        low, high, types = table[name]
        if not (low <= dims <= high and dtype in types):
            return False
    if op == "NONZERO_COORDINATES" and since == "3_0":
        if len({dims for _, dims in tensors.values()}) != 1:
            return False
    return True


def accepts(step, views, level) -> bool:
    try:
        step.validate(views, parse_level(level))
    except DmlLowerError as exc:
        assert str(exc) and "\n" not in str(exc)
        return False
    return True


ALL_TYPES = list(DataType)


def test_transcription_covers_every_level():
    assert [lv.name for lv in ALL_LEVELS] == LEVEL_NAMES


@pytest.mark.parametrize("op", sorted(SPEC))
def test_operator_numbers_and_introduction(op):
    assert OPERATORS[op].number == SPEC_NUMBER[op]
    assert OPERATORS[op].introduced.name == SPEC_INTRODUCED[op]
    for level in LEVEL_NAMES:
        exists = level_value(level) >= level_value(SPEC_INTRODUCED[op])
        assert (OPERATORS[op].row(level) is not None) == exists, level


# -- NONZERO_COORDINATES --------------------------------------------------------------------------

def _nonzero_views(in_type, in_dims, count_type, count_dims, coord_type, coord_dims):
    """Shapes that satisfy every NonZero shape rule whatever the DimensionCounts are."""
    in_sizes = (1,) * (in_dims - 1) + (6,)           # M = 6, effective rank 1
    views = {
        "x": TensorDesc(in_type, in_sizes),
        "count": TensorDesc(count_type, (1,) * count_dims),
        "coords": TensorDesc(coord_type, (1,) * (coord_dims - 2) + (6, 1) if coord_dims >= 2 else (6,)),
    }
    return NonZeroCoordinates("x", "count", "coords"), views


@pytest.mark.parametrize("level", LEVEL_NAMES)
def test_nonzero_table_grid(level):
    wrong = []
    for dtype in ALL_TYPES:
        for dims in range(1, 9):
            # sweep the input; count and coordinates follow its DimensionCount
            cases = [
                ("InputTensor", (dtype, dims, T.UINT32, dims, T.UINT32, max(dims, 2))),
                ("OutputCountTensor", (T.FLOAT32, 4, dtype, dims, T.UINT32, 4)),
                ("OutputCoordinatesTensor", (T.FLOAT32, 4, T.UINT32, 4, dtype, dims)),
                ("OutputCountTensor@5", (T.INT8, 5, dtype, dims, T.UINT32, 5)),
                ("OutputCoordinatesTensor@5", (T.UINT16, 5, T.UINT32, 5, dtype, dims)),
            ]
            for label, (it, idim, ct, cdim, ot, odim) in cases:
                step, views = _nonzero_views(it, idim, ct, cdim, ot, odim)
                expected = spec_accepts("NONZERO_COORDINATES", level, {
                    "InputTensor": (it.name, idim), "OutputCountTensor": (ct.name, cdim),
                    "OutputCoordinatesTensor": (ot.name, odim)})
                if accepts(step, views, level) != expected:
                    wrong.append((label, dtype.name, dims, "expected accept" if expected else "expected reject"))
    assert not wrong, wrong


def _nz(in_sizes, coord_sizes, count_sizes=None, in_type=T.FLOAT32, count_type=T.UINT32,
        coord_type=T.UINT32):
    count_sizes = count_sizes if count_sizes is not None else (1,) * len(in_sizes)
    views = {"x": TensorDesc(in_type, in_sizes), "count": TensorDesc(count_type, count_sizes),
             "coords": TensorDesc(coord_type, coord_sizes)}
    return NonZeroCoordinates("x", "count", "coords"), views


@pytest.mark.parametrize("level", ["3_0", "4_0", "5_1", "6_4"])
@pytest.mark.parametrize("in_sizes,rank", [((1, 2, 3, 4), 3), ((1, 1, 5, 5, 5), 3), ((1, 1, 1, 1), 0),
                                           ((1, 1, 12, 5), 2), ((2, 1, 1, 1), 4), ((1, 3, 1, 1, 1), 4)])
def test_nonzero_n_between_effective_rank_and_input_dimension_count(level, in_sizes, rank):
    m = 1
    for s in in_sizes:
        m *= s
    dims = len(in_sizes)
    for n in range(1, dims + 3):
        coords = (1,) * (dims - 2) + (m, n)         # same DimensionCount as the input (3_0 rule)
        step, views = _nz(in_sizes, coords)
        assert accepts(step, views, level) == (rank <= n <= dims), (in_sizes, n)


@pytest.mark.parametrize("level", ["4_0", "5_1"])
def test_nonzero_spec_example_12x5(level):
    # {1,1,12,5}: 60 elements, effective rank 2: {1,1,60,N} valid for N in 2..4 only
    for n in range(1, 7):
        step, views = _nz((1, 1, 12, 5), (1, 1, 60, n))
        assert accepts(step, views, level) == (2 <= n <= 4), n
    # and at 4_0+ a 2-D {60, N} coordinates tensor is equally valid
    for n in (2, 3, 4):
        step, views = _nz((1, 1, 12, 5), (60, n))
        assert accepts(step, views, level)


@pytest.mark.parametrize("level", ["3_0", "4_0", "5_1"])
@pytest.mark.parametrize("m", [59, 61, 1, 120])
def test_nonzero_m_must_equal_input_element_count(level, m):
    step, views = _nz((1, 1, 12, 5), (1, 1, m, 2))
    assert not accepts(step, views, level)
    step, views = _nz((1, 1, 12, 5), (1, 1, 60, 2))
    assert accepts(step, views, level)


@pytest.mark.parametrize("level", ["3_0", "4_0", "5_1"])
@pytest.mark.parametrize("count_sizes", [(1, 1, 1, 2), (2, 1, 1, 1), (1, 1, 4, 1), (1, 1, 1, 60)])
def test_nonzero_count_sizes_must_all_be_1(level, count_sizes):
    step, views = _nz((1, 1, 12, 5), (1, 1, 60, 2), count_sizes)
    assert not accepts(step, views, level)


@pytest.mark.parametrize("level", ["3_0", "4_0", "5_1"])
@pytest.mark.parametrize("count_type", [t for t in DataType if t != T.UINT32])
def test_nonzero_count_must_be_uint32(level, count_type):
    step, views = _nz((1, 1, 12, 5), (1, 1, 60, 2), count_type=count_type)
    assert not accepts(step, views, level)


@pytest.mark.parametrize("level", ["3_0", "4_0", "5_1"])
@pytest.mark.parametrize("coord_type", [t for t in DataType if t != T.UINT32])
def test_nonzero_coordinates_must_be_uint32(level, coord_type):
    step, views = _nz((1, 1, 12, 5), (1, 1, 60, 2), coord_type=coord_type)
    assert not accepts(step, views, level)


@pytest.mark.parametrize("level", ["3_0", "4_0", "5_1"])
@pytest.mark.parametrize("coords", [(2, 1, 60, 2), (1, 2, 60, 2), (1, 3, 1, 60, 2)])
def test_nonzero_coordinates_leading_dims_must_be_1(level, coords):
    step, views = _nz((1, 1, 12, 5), coords)
    assert not accepts(step, views, level)


@pytest.mark.parametrize("level", ["1_0", "2_0", "2_1"])
def test_nonzero_does_not_exist_before_3_0(level):
    step, views = _nz((1, 1, 12, 5), (1, 1, 60, 2))
    with pytest.raises(DmlLowerError, match="NONZERO_COORDINATES"):
        step.validate(views, parse_level(level))


def test_nonzero_3_0_requires_one_dimension_count():
    # 5-D input, 4-D coordinates, 5-D count: fine from 4_0, not at 3_0/3_1
    cases = [
        ((1, 1, 1, 12, 5), (1, 1, 60, 2), (1, 1, 1, 1, 1)),
        ((1, 1, 12, 5), (1, 1, 60, 2), (1, 1, 1, 1, 1)),
        ((1, 1, 12, 5), (1, 1, 1, 60, 2), (1, 1, 1, 1)),
    ]
    for in_sizes, coords, count in cases:
        step, views = _nz(in_sizes, coords, count)
        for level in ("3_0", "3_1"):
            assert not accepts(step, views, level), (in_sizes, coords, count, level)
        for level in ("4_0", "4_1", "5_1", "6_4"):
            assert accepts(step, views, level), (in_sizes, coords, count, level)
    # the same DimensionCount everywhere is fine at 3_0: {1,1,M,N} and {1,1,1,M,N}
    for in_sizes, coords in [((1, 1, 12, 5), (1, 1, 60, 2)), ((1, 1, 1, 12, 5), (1, 1, 1, 60, 2)),
                             ((2, 3, 4, 5, 6), (1, 1, 1, 720, 5))]:
        step, views = _nz(in_sizes, coords)
        assert accepts(step, views, "3_0")


def test_nonzero_4_0_small_ranks():
    # 1-D input {5}: effective rank 1, count {1}, coordinates {5, 1}
    step, views = _nz((5,), (5, 1), (1,))
    assert accepts(step, views, "4_0")
    assert not accepts(step, views, "3_1")
    # {1}: effective rank 0, N = 1 is the only positive choice
    step, views = _nz((1,), (1, 1), (1,))
    assert accepts(step, views, "4_0")
    step, views = _nz((1,), (1, 2), (1,))
    assert not accepts(step, views, "4_0")
    # 8-D input, 8-D coordinates
    sizes = (2, 1, 2, 1, 2, 1, 2, 3)
    step, views = _nz(sizes, (1,) * 6 + (48, 8), (1,) * 8)
    assert accepts(step, views, "4_0")
    step, views = _nz(sizes, (48, 7), (1,))
    assert not accepts(step, views, "4_0")   # effective rank 8 > N = 7


@pytest.mark.parametrize("level", ["3_0", "4_0", "5_1", "6_4"])
@pytest.mark.parametrize("in_type", [T.FLOAT64, T.INT64, T.UINT64])
def test_nonzero_no_64_bit_input(level, in_type):
    step, views = _nz((1, 1, 12, 5), (1, 1, 60, 2), in_type=in_type)
    assert not accepts(step, views, level)


# -- DIAGONAL_MATRIX ----------------------------------------------------------------------------

def _sizes(dims):
    return (1,) * (dims - 2) + (3, 4) if dims >= 2 else (4,)


@pytest.mark.parametrize("level", LEVEL_NAMES)
def test_diagonal_matrix_table_grid(level):
    wrong = []
    for dtype in ALL_TYPES:
        for dims in range(1, 9):
            step = DiagonalMatrix("y", 1, 1.0)
            views = {"y": TensorDesc(dtype, _sizes(dims))}
            expected = spec_accepts("DIAGONAL_MATRIX", level, {"OutputTensor": (dtype.name, dims)})
            if accepts(step, views, level) != expected:
                wrong.append((dtype.name, dims, expected))
    assert not wrong, wrong


@pytest.mark.parametrize("level", ["2_0", "4_0", "5_1"])
def test_diagonal_matrix_offset_must_fit_int32(level):
    views = {"y": TensorDesc(T.FLOAT32, (1, 1, 3, 4))}
    for offset in (INT32_MIN, INT32_MAX, 0, -3, 4, -(2**20)):
        assert accepts(DiagonalMatrix("y", offset, 1.0), views, level), offset
    for offset in (INT32_MIN - 1, INT32_MAX + 1, 2**40, -(2**63)):
        assert not accepts(DiagonalMatrix("y", offset, 1.0), views, level), offset


def test_diagonal_matrix_messages_name_operator_tensor_and_level():
    with pytest.raises(DmlLowerError) as info:
        DiagonalMatrix("y", 0, 1.0).validate({"y": TensorDesc(T.INT64, (3, 4))}, parse_level("5_0"))
    message = str(info.value)
    assert "DIAGONAL_MATRIX" in message and "OutputTensor" in message and "5_0" in message
    assert "INT64" in message
    with pytest.raises(DmlLowerError, match=r"DIAGONAL_MATRIX.*2_0"):
        DiagonalMatrix("y", 0, 1.0).validate({"y": TensorDesc(T.FLOAT32, (3, 4))}, parse_level("2_0"))
    with pytest.raises(DmlLowerError, match=r"DIAGONAL_MATRIX.*1_0"):
        DiagonalMatrix("y", 0, 1.0).validate({"y": TensorDesc(T.FLOAT32, (1, 1, 3, 4))}, parse_level("1_0"))


# -- DIAGONAL_MATRIX1 ---------------------------------------------------------------------------

@pytest.mark.parametrize("level", LEVEL_NAMES)
def test_diagonal_matrix1_table_grid(level):
    wrong = []
    for dtype in ALL_TYPES:
        for dims in range(1, 9):
            views = {"x": TensorDesc(dtype, _sizes(dims)), "y": TensorDesc(dtype, _sizes(dims))}
            for with_input in (False, True):
                step = DiagonalMatrix1("x" if with_input else None, "y", dtype, 1, -1, 2)
                tensors = {"OutputTensor": (dtype.name, dims)}
                if with_input:
                    tensors["InputTensor"] = (dtype.name, dims)
                expected = spec_accepts("DIAGONAL_MATRIX1", level, tensors)
                if accepts(step, views, level) != expected:
                    wrong.append((dtype.name, dims, with_input, expected))
    assert not wrong, wrong


SPEC_ELEVEN = [T[n] for n in sorted(ELEVEN)]


@pytest.mark.parametrize("level", ["5_1", "6_4"])
@pytest.mark.parametrize("out_type", SPEC_ELEVEN, ids=lambda t: t.name)
def test_diagonal_matrix1_value_type_must_equal_output_type(level, out_type):
    views = {"y": TensorDesc(out_type, (3, 4))}
    assert accepts(DiagonalMatrix1(None, "y", out_type, 1, 0, 1), views, level)
    for value_type in DataType:
        if value_type != out_type:
            assert not accepts(DiagonalMatrix1(None, "y", value_type, 1, 0, 1), views, level), value_type


@pytest.mark.parametrize("level", ["5_1", "6_4"])
def test_diagonal_matrix1_input_must_match_output(level):
    y = TensorDesc(T.FLOAT32, (2, 3, 4))
    good = {"x": TensorDesc(T.FLOAT32, (2, 3, 4)), "y": y}
    assert accepts(DiagonalMatrix1("x", "y", T.FLOAT32, 1.0, 0, 1), good, level)
    # strides may differ: only type, DimensionCount and sizes must match
    strided = {"x": TensorDesc(T.FLOAT32, (2, 3, 4), (0, 1, 3)), "y": y}
    assert accepts(DiagonalMatrix1("x", "y", T.FLOAT32, 1.0, 0, 1), strided, level)
    for x in [TensorDesc(T.FLOAT16, (2, 3, 4)), TensorDesc(T.INT32, (2, 3, 4)),
              TensorDesc(T.FLOAT32, (3, 4)), TensorDesc(T.FLOAT32, (1, 2, 3, 4)),
              TensorDesc(T.FLOAT32, (2, 4, 3)), TensorDesc(T.FLOAT32, (1, 3, 4))]:
        assert not accepts(DiagonalMatrix1("x", "y", T.FLOAT32, 1.0, 0, 1), {"x": x, "y": y}, level), x


@pytest.mark.parametrize("level", ["5_1", "6_4"])
def test_diagonal_matrix1_bounds_must_fit_int32(level):
    views = {"y": TensorDesc(T.INT64, (3, 4))}
    for begin, end in [(INT32_MIN, INT32_MAX), (INT32_MAX, INT32_MIN), (INT32_MIN, 1), (0, INT32_MAX),
                       (5, -5)]:
        assert accepts(DiagonalMatrix1(None, "y", T.INT64, 2**40 + 1, begin, end), views, level)
    for begin, end in [(INT32_MIN - 1, 0), (0, INT32_MAX + 1), (2**40, 0), (0, -(2**40)),
                       (INT32_MAX + 1, INT32_MIN - 1)]:
        assert not accepts(DiagonalMatrix1(None, "y", T.INT64, 1, begin, end), views, level), (begin, end)


@pytest.mark.parametrize("level", ["1_0", "4_0", "5_0"])
def test_diagonal_matrix1_does_not_exist_before_5_1(level):
    with pytest.raises(DmlLowerError, match="DIAGONAL_MATRIX1"):
        DiagonalMatrix1(None, "y", T.FLOAT32, 1.0, 0, 1).validate({"y": TensorDesc(T.FLOAT32, (3, 4))},
                                                                  parse_level(level))


# -- ELEMENT_WISE_IDENTITY ----------------------------------------------------------------------

@pytest.mark.parametrize("level", LEVEL_NAMES)
def test_element_wise_identity_table_grid(level):
    wrong = []
    for dtype in ALL_TYPES:
        for dims in range(1, 9):
            sizes = (2,) * dims
            views = {"x": TensorDesc(dtype, sizes, tuple(reversed(range(1, dims + 1)))),
                     "y": TensorDesc(dtype, sizes)}
            expected = spec_accepts("ELEMENT_WISE_IDENTITY", level, {
                "InputTensor": (dtype.name, dims), "OutputTensor": (dtype.name, dims)})
            if accepts(ElementWiseIdentity("x", "y"), views, level) != expected:
                wrong.append((dtype.name, dims, expected))
    assert not wrong, wrong


@pytest.mark.parametrize("level", ["3_0", "4_1", "6_4"])
def test_element_wise_identity_same_type_and_sizes(level):
    y = TensorDesc(T.UINT32, (3, 4))
    assert accepts(ElementWiseIdentity("x", "y"), {"x": TensorDesc(T.UINT32, (3, 4), (1, 3)), "y": y}, level)
    for x in [TensorDesc(T.INT32, (3, 4)), TensorDesc(T.UINT32, (4, 3)), TensorDesc(T.UINT32, (1, 3, 4)),
              TensorDesc(T.UINT32, (12,)), TensorDesc(T.FLOAT32, (3, 4))]:
        assert not accepts(ElementWiseIdentity("x", "y"), {"x": x, "y": y}, level), x


def test_element_wise_identity_64_bit_from_4_1():
    views = {"x": TensorDesc(T.INT64, (3, 4), (1, 3)), "y": TensorDesc(T.INT64, (3, 4))}
    assert not accepts(ElementWiseIdentity("x", "y"), views, "4_0")
    assert accepts(ElementWiseIdentity("x", "y"), views, "4_1")
