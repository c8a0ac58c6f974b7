"""Hypothesis strategies for NonZero / EyeLike models, their feeds and feature levels.

Every generated array is built from bit patterns of its element width and then viewed as the
element type, so float specials (-0.0, NaN payloads, +-inf, subnormals) and 64-bit values
that are non-zero in only one 32-bit word are exact, whatever numpy would round them to.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir import ALL_LEVELS
from onnx_dml_lowering.ir.dtypes import ONNX_NUMERIC_AND_BOOL, onnx_to_numpy, onnx_type_name
from tests.builders import graph_model

MAX_ELEMENTS = 512
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_UINT_OF_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# Float bit patterns worth having: signed zeros, the subnormal edges, infinities, quiet and
# signalling NaNs with payloads, and (for double) values whose low or high 32-bit word alone is
# non-zero -- a non-zero test that looks at one word only gets those wrong.
_FLOAT_SPECIAL_BITS = {
    np.dtype(np.float16): [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x0100, 0x7C00, 0xFC00,
                           0x7E00, 0xFE00, 0x7C01, 0x3C00, 0xBC00, 0x7BFF],
    np.dtype(np.float32): [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000,
                           0x00010000, 0x0000FFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                           0x7F800001, 0x3F800000, 0xBF800000, 0x7F7FFFFF],
    np.dtype(np.float64): [0x0000000000000000, 0x8000000000000000, 0x0000000000000001,
                           0x8000000000000001, 0x00000000FFFFFFFF, 0x0000000100000000,
                           0x8000000100000000, 0x000FFFFFFFFFFFFF, 0x0010000000000000,
                           0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000,
                           0x7FF0000000000001, 0xFFF8000000000000, 0x3FF0000000000000,
                           0xBFF0000000000000, 0x7FEFFFFFFFFFFFFF],
}


def numpy_type(onnx_type: int) -> np.dtype:
    return onnx_to_numpy(onnx_type)


def _bits_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(_UINT_OF_WIDTH[dtype.itemsize])


def is_zero_bits(dtype: np.dtype, bits: int) -> bool:
    """Whether an element with these bits is zero (floats: +0.0 and -0.0)."""
    if dtype.kind == "f":
        return bits & ~(1 << (dtype.itemsize * 8 - 1)) == 0
    return bits == 0


def _int_special_bits(dtype: np.dtype) -> "list[int]":
    width = dtype.itemsize * 8
    mask = (1 << width) - 1
    info = np.iinfo(dtype)
    half = width // 2
    values = {0, 1, 2, 3, 0x7F, info.max, info.min, info.max - 1, -1, -2,
              1 << (width - 1),                    # sign bit only (1<<63 as uint64, INT_MIN)
              1 << half, (1 << half) - 1,           # high half only / low half only
              ((1 << half) - 1) << half}
    if width == 64:
        values |= {1 << 32, 1 << 31, 0xFFFFFFFF, 0xFFFFFFFF00000000, -(2**32), 2**32 + 1,
                   0x8000000000000001, 0x100000000 * 3, 1 << 62}
    return sorted({v & mask for v in values})


def element_bits(dtype: np.dtype) -> st.SearchStrategy[int]:
    """Bit patterns (as unsigned ints) of single elements of `dtype`."""
    if dtype == np.bool_:
        return st.sampled_from([0, 1])
    width = dtype.itemsize * 8
    if dtype.kind == "f":
        bits_type = _bits_dtype(dtype)

        def to_bits(value: float) -> int:
            return int(np.array(value, dtype).view(bits_type))

        return st.one_of(st.sampled_from(_FLOAT_SPECIAL_BITS[dtype]),
                         st.floats(width=width, allow_subnormal=True).map(to_bits),
                         st.integers(0, (1 << width) - 1))
    return st.one_of(st.sampled_from(_int_special_bits(dtype)),
                     st.integers(-4, 4).map(lambda v: v & ((1 << width) - 1)),
                     st.integers(0, (1 << width) - 1))


def nonzero_bits(dtype: np.dtype) -> st.SearchStrategy[int]:
    # A drawn zero becomes the smallest non-zero pattern (1: a subnormal for floats).
    return element_bits(dtype).map(lambda b: 1 if is_zero_bits(dtype, b) else b)


def zero_bits(dtype: np.dtype) -> st.SearchStrategy[int]:
    if dtype.kind == "f":
        return st.sampled_from([0, 1 << (dtype.itemsize * 8 - 1)])
    return st.just(0)


def _from_bits(bits: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return bits.astype(np.uint8).view(np.bool_)
    return bits.view(dtype)


@st.composite
def shapes(draw, min_rank: int = 0, max_rank: int = 8, max_elements: int = MAX_ELEMENTS,
           max_dim: "int | None" = None) -> "tuple[int, ...]":
    """Shapes of rank min_rank..max_rank with at most max_elements elements; sometimes a 0 dim."""
    rank = draw(st.integers(min_rank, max_rank))
    cap = max_dim or {1: 64, 2: 24, 3: 10, 4: 6}.get(rank, 4)
    dims: "list[int]" = []
    product = 1
    for _ in range(rank):
        hi = max(1, min(cap, max_elements // product))
        dim = draw(st.integers(1, hi))
        dims.append(dim)
        product *= dim
    # Zero-sized dimensions: shrinks toward the non-empty shape.
    if rank and draw(st.integers(0, 5)) == 5:
        dims[draw(st.integers(0, rank - 1))] = 0
    return tuple(dims)


@st.composite
def arrays(draw, dtype: np.dtype, shape: "tuple[int, ...]") -> np.ndarray:
    """An array of `dtype`: any density from all-zero to all-non-zero, specials included."""
    dtype = np.dtype(dtype)
    bits_type = _bits_dtype(dtype) if dtype != np.bool_ else np.dtype(np.uint8)
    mode = draw(st.sampled_from(["explicit", "density"]))
    if mode == "explicit":
        # hypothesis picks a fill value (zero, a special, anything) and sets some elements.
        bits = draw(hnp.arrays(bits_type, shape, elements=element_bits(dtype),
                               fill=st.one_of(zero_bits(dtype), element_bits(dtype))))
        return _from_bits(np.asarray(bits, bits_type), dtype)
    # A density and small pools of zero / non-zero patterns; a seeded rng places them.
    density = draw(st.one_of(st.sampled_from([0.0, 1.0, 0.5, 0.05, 0.95]),
                             st.floats(0.0, 1.0)))
    zeros = draw(st.lists(zero_bits(dtype), min_size=1, max_size=2))
    nonzeros = draw(st.lists(nonzero_bits(dtype), min_size=1, max_size=6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape, dtype=np.int64))
    keep = rng.random(size) < density
    pick_nz = np.array(nonzeros, dtype=np.uint64)[rng.integers(0, len(nonzeros), size)]
    pick_z = np.array(zeros, dtype=np.uint64)[rng.integers(0, len(zeros), size)]
    bits = np.where(keep, pick_nz, pick_z).astype(bits_type).reshape(shape)
    return _from_bits(bits, dtype)


onnx_types = st.sampled_from(ONNX_NUMERIC_AND_BOOL)
levels = st.sampled_from(ALL_LEVELS)

# Feature levels grouped by what DML_FACTS.md says changes between them (DIAGONAL_MATRIX from 2_0,
# eight types from 2_1, NONZERO_COORDINATES 4..5 dims at 3_0, 1..8 dims from 4_0, 64-bit
# ELEMENT_WISE_IDENTITY from 4_1, 64-bit DIAGONAL_MATRIX from 5_1). Tests run once per group.
LEVEL_GROUPS = {
    "1_0": ["1_0"], "2_0": ["2_0"], "2_1": ["2_1"], "3_0-3_1": ["3_0", "3_1"], "4_0": ["4_0"],
    "4_1-5_0": ["4_1", "5_0"], "5_1-6_4": ["5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"],
}
assert sorted(n for g in LEVEL_GROUPS.values() for n in g) == sorted(lv.name for lv in ALL_LEVELS)


def levels_in(group: str) -> st.SearchStrategy:
    return st.sampled_from([lv for lv in ALL_LEVELS if lv.name in LEVEL_GROUPS[group]])


# A property runs once per group, drawing its feature level with levels_in(group).
level_groups = pytest.mark.parametrize("group", list(LEVEL_GROUPS))


# EyeLike's k: the whole int64 range, with weight on the values that matter.
_K_LANDMARKS = [0, 1, -1, 2, -2, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**32, -(2**32),
                2**40, -(2**40), INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1]


def ks_for(rows: int, cols: int) -> st.SearchStrategy[int]:
    edges = [cols, cols - 1, cols + 1, -rows, -rows + 1, -rows - 1, rows, -cols]
    near = st.tuples(st.sampled_from(edges), st.integers(-2, 2)).map(
        lambda t: min(INT64_MAX, max(INT64_MIN, t[0] + t[1])))
    return st.one_of(st.sampled_from(_K_LANDMARKS), near,
                     st.integers(-max(rows, 1) - 1, max(cols, 1) + 1),
                     st.integers(INT64_MIN, INT64_MAX))


DECLARED = st.sampled_from(["static", "symbolic", "unknown"])

# How a feed is laid out in memory; the values never change (the reference gets a C copy).
LAYOUTS = st.sampled_from(["c", "fortran", "negative_strides", "strided", "readonly", "byteswapped"])


def lay_out(array: np.ndarray, how: str) -> np.ndarray:
    if how == "fortran":
        return array.copy(order="F")           # (np.asfortranarray makes a 0-d array 1-d)
    if how == "negative_strides" and array.ndim:
        flipped = np.flip(array).copy()
        return np.flip(flipped)
    if how == "strided" and array.ndim:
        wide = np.repeat(array, 2, axis=-1)
        return wide[..., ::2]
    if how == "readonly":
        out = array.copy()
        out.flags.writeable = False
        return out
    if how == "byteswapped" and array.dtype.itemsize > 1:
        return array.astype(array.dtype.newbyteorder())
    return array


def declared_shape(shape: "tuple[int, ...]", how: str) -> list:
    """The graph input's declared shape: static sizes, dim_params, or unknown dims (neither);
    the last two leave the sizes to be bound at run time."""
    if how == "static":
        return list(shape)
    if how == "symbolic":
        return [f"d{i}" for i in range(len(shape))]
    return [None] * len(shape)


# -- models ------------------------------------------------------------------------------------

class Case:
    """One model (described in words for the failure report), its feeds and feature level.

    `feeds` are C-contiguous native arrays (what the reference gets); `layouts` says how each
    feed is laid out in memory when it is handed to compile_model(...).run. (A plain class,
    not a dataclass, so that hypothesis prints it with __repr__.)
    """

    def __init__(self, what: str, model: Any, feeds: "dict[str, np.ndarray]", level: Any,
                 layouts: "dict[str, str] | None" = None) -> None:
        self.what, self.model, self.feeds, self.level = what, model, feeds, level
        self.layouts = dict(layouts or {})

    def our_feeds(self) -> "dict[str, np.ndarray]":
        return {n: lay_out(a, self.layouts.get(n, "c")) for n, a in self.feeds.items()}

    def __repr__(self) -> str:
        feeds = ", ".join(f"{n}={_array_repr(a)}" for n, a in self.feeds.items())
        layouts = {n: v for n, v in self.layouts.items() if v != "c"}
        return (f"Case({self.what}; feature level {self.level}; feeds {feeds}"
                f"{'; layouts ' + str(layouts) if layouts else ''})")


def _array_repr(a: np.ndarray) -> str:
    text = f"np.array({a.tolist()!r}, np.{a.dtype}).reshape({a.shape})"
    if a.dtype.kind == "f" and a.size:
        bits = a.view(_bits_dtype(a.dtype)).reshape(-1)
        text += f" [bits {np.array2string(bits, formatter={'int': hex}, threshold=64)}]"
    return text


def nonzero_model(in_type: int, in_shape: list, opset: int = 13):
    x = h.make_tensor_value_info("x", in_type, in_shape)
    y = h.make_tensor_value_info("y", T.INT64, [None, None])
    return graph_model([h.make_node("NonZero", ["x"], ["y"], name="nonzero")], [x], [y], opset=opset)


def eyelike_attrs(k: "int | None", dtype: "int | None") -> dict:
    attrs = {}
    if k is not None:
        attrs["k"] = k
    if dtype is not None:
        attrs["dtype"] = dtype
    return attrs


def eyelike_model(in_type: int, in_shape: list, k: "int | None", dtype: "int | None", opset: int = 13):
    out_type = in_type if dtype is None else dtype
    x = h.make_tensor_value_info("x", in_type, in_shape)
    y = h.make_tensor_value_info("y", out_type, [None, None])
    node = h.make_node("EyeLike", ["x"], ["y"], name="eyelike", **eyelike_attrs(k, dtype))
    return graph_model([node], [x], [y], opset=opset)


def _eyelike_words(k, dtype) -> str:
    return (f"k={'absent' if k is None else k}, "
            f"dtype={'absent' if dtype is None else onnx_type_name(dtype)}")


def _with_source(draw, model, x: np.ndarray, what: str) -> "tuple[Any, dict, str]":
    """Where input x comes from: a feed; a constant initializer; an initializer that is also a
    graph input (its default used, or overridden by the feed)."""
    from onnx import numpy_helper
    source = draw(st.sampled_from(["feed", "feed", "initializer", "default", "override"]))
    if source == "feed":
        return model, {"x": x}, what
    if source == "override":
        stored = draw(arrays(x.dtype, x.shape))
        model.graph.initializer.append(numpy_helper.from_array(stored, "x"))
        return model, {"x": x}, f"{what}, x also an initializer (overridden by the feed)"
    model.graph.initializer.append(numpy_helper.from_array(x, "x"))
    if source == "initializer":
        del model.graph.input[:]
        return model, {}, f"{what}, x a constant initializer {_array_repr(x)}"
    return model, {}, f"{what}, x an initializer and graph input, not fed: {_array_repr(x)}"


@st.composite
def nonzero_cases(draw, level=levels) -> Case:
    in_type = draw(onnx_types)
    shape = draw(shapes())
    how = draw(DECLARED)
    opset = draw(st.sampled_from([13, 9]))
    x = draw(arrays(numpy_type(in_type), shape))
    model = nonzero_model(in_type, declared_shape(shape, how), opset)
    what = f"NonZero(x: {onnx_type_name(in_type)} {list(shape)} declared {how}), opset {opset}"
    model, feeds, what = _with_source(draw, model, x, what)
    return Case(what, model, feeds, draw(level), {"x": draw(LAYOUTS)})


@st.composite
def eyelike_cases(draw, level=levels) -> Case:
    in_type = draw(onnx_types)
    dtype = draw(st.one_of(st.none(), onnx_types))
    rows, cols = draw(shapes(min_rank=2, max_rank=2, max_dim=24))
    k = draw(st.one_of(st.none(), ks_for(rows, cols)))
    how = draw(DECLARED)
    opset = draw(st.sampled_from([13, 9]))
    x = draw(arrays(numpy_type(in_type), (rows, cols)))
    model = eyelike_model(in_type, declared_shape((rows, cols), how), k, dtype, opset)
    what = (f"EyeLike(x: {onnx_type_name(in_type)} [{rows}, {cols}] declared {how}, "
            f"{_eyelike_words(k, dtype)}), opset {opset}")
    model, feeds, what = _with_source(draw, model, x, what)
    return Case(what, model, feeds, draw(level), {"x": draw(LAYOUTS)})


# Relu's types at opset 14 that onnxruntime or onnx.reference run.
_RELU_TYPES = [T.FLOAT, T.FLOAT16, T.DOUBLE, T.INT8, T.INT32, T.INT16, T.INT64]


@st.composite
def _with_unit_dims(draw, shape: "tuple[int, ...]", max_rank: int = 8) -> "tuple[int, ...]":
    """`shape` with 1s inserted (what Squeeze takes away)."""
    dims = list(shape)
    for _ in range(draw(st.integers(0, max_rank - len(dims)))):
        dims.insert(draw(st.integers(0, len(dims))), 1)
    return tuple(dims)


@st.composite
def _factorisation(draw, size: int, max_rank: int = 8) -> "tuple[int, ...]":
    """A shape with `size` elements (rank 0 possible when size is 1), for Reshape."""
    if size == 0:
        dims = list(draw(shapes(min_rank=1, max_rank=max_rank)))
        if 0 not in dims:
            dims[0] = 0
        return tuple(dims)
    factors, n, p = [], size, 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    factors = draw(st.permutations(factors))
    rank = draw(st.integers(0 if size == 1 else 1, max_rank))
    dims = [1] * rank
    for f in factors:
        dims[draw(st.integers(0, rank - 1))] *= f
    return tuple(dims)


@st.composite
def two_node_cases(draw, level=levels) -> Case:
    """Small multi-node models: the NonZero / EyeLike node sees sizes that are data-dependent
    (after NonZero) or of unknown rank (after Squeeze / Reshape), so it is specialised at run
    time, or its ONNX region mixes it with other nodes."""
    kind = draw(st.sampled_from(["nonzero_eyelike", "relu_nonzero", "eyelike_nonzero",
                                 "nonzero_cast_nonzero", "squeeze_nonzero", "squeeze_eyelike",
                                 "reshape_nonzero"]))
    how = draw(DECLARED)
    inputs_extra: list = []
    feeds_extra: dict = {}
    opset = 13
    if kind == "nonzero_eyelike":
        # EyeLike of NonZero's [rank, nnz] int64 result: its input shape is data-dependent.
        in_type = draw(onnx_types)
        shape = draw(shapes(max_rank=4))
        dtype = draw(st.one_of(st.none(), onnx_types))
        k = draw(st.one_of(st.none(), ks_for(len(shape), 8)))
        x = draw(arrays(numpy_type(in_type), shape))
        out_type = T.INT64 if dtype is None else dtype
        nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
                 h.make_node("EyeLike", ["nz"], ["y"], name="eyelike", **eyelike_attrs(k, dtype))]
        outputs = [h.make_tensor_value_info("y", out_type, [None, None])]
        if draw(st.booleans()):
            outputs.append(h.make_tensor_value_info("nz", T.INT64, [None, None]))
        what = f"EyeLike(NonZero(x), {_eyelike_words(k, dtype)})"
    elif kind == "relu_nonzero":
        in_type = draw(st.sampled_from(_RELU_TYPES))
        shape = draw(shapes())
        x = draw(arrays(numpy_type(in_type), shape))
        nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
                 h.make_node("NonZero", ["r"], ["y"], name="nonzero")]
        outputs = [h.make_tensor_value_info("y", T.INT64, [None, None])]
        what = "NonZero(Relu(x))"
        opset = 14
    elif kind == "eyelike_nonzero":
        in_type = draw(onnx_types)
        shape = draw(shapes(min_rank=2, max_rank=2, max_dim=16))
        dtype = draw(st.one_of(st.none(), onnx_types))
        k = draw(st.one_of(st.none(), ks_for(*shape)))
        x = draw(arrays(numpy_type(in_type), shape))
        mid_type = in_type if dtype is None else dtype
        nodes = [h.make_node("EyeLike", ["x"], ["e"], name="eyelike", **eyelike_attrs(k, dtype)),
                 h.make_node("NonZero", ["e"], ["y"], name="nonzero")]
        outputs = [h.make_tensor_value_info("y", T.INT64, [None, None])]
        if draw(st.booleans()):
            outputs.append(h.make_tensor_value_info("e", mid_type, [None, None]))
        what = f"NonZero(EyeLike(x, {_eyelike_words(k, dtype)}))"
    elif kind == "nonzero_cast_nonzero":
        # The second NonZero's [rank, nnz] input is data-dependent.
        in_type = draw(onnx_types)
        shape = draw(shapes(max_rank=5, max_elements=128))
        to = draw(onnx_types)
        x = draw(arrays(numpy_type(in_type), shape))
        nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero_a"),
                 h.make_node("Cast", ["nz"], ["c"], name="cast", to=to),
                 h.make_node("NonZero", ["c"], ["y"], name="nonzero_b")]
        outputs = [h.make_tensor_value_info("y", T.INT64, [None, None])]
        what = f"NonZero(Cast(NonZero(x), to={onnx_type_name(to)}))"
    elif kind == "squeeze_nonzero":
        # Squeeze without axes over non-static dims: NonZero's input rank is unknown until run
        # time (and may be 0).
        in_type = draw(onnx_types)
        shape = draw(shapes(max_rank=6).flatmap(_with_unit_dims))
        x = draw(arrays(numpy_type(in_type), shape))
        nodes = [h.make_node("Squeeze", ["x"], ["s"], name="squeeze"),
                 h.make_node("NonZero", ["s"], ["y"], name="nonzero")]
        outputs = [h.make_tensor_value_info("y", T.INT64, [None, None])]
        what = "NonZero(Squeeze(x))"
    elif kind == "squeeze_eyelike":
        in_type = draw(onnx_types)
        rows, cols = draw(st.tuples(st.integers(2, 16), st.integers(2, 16)))
        shape = draw(_with_unit_dims((rows, cols), max_rank=6))
        dtype = draw(st.one_of(st.none(), onnx_types))
        k = draw(st.one_of(st.none(), ks_for(rows, cols)))
        x = draw(arrays(numpy_type(in_type), shape))
        out_type = in_type if dtype is None else dtype
        nodes = [h.make_node("Squeeze", ["x"], ["s"], name="squeeze"),
                 h.make_node("EyeLike", ["s"], ["y"], name="eyelike", **eyelike_attrs(k, dtype))]
        outputs = [h.make_tensor_value_info("y", out_type, [None, None])]
        what = f"EyeLike(Squeeze(x), {_eyelike_words(k, dtype)})"
    else:
        # Reshape to a fed shape: NonZero's input rank (0..8) is known only at run time.
        in_type = draw(onnx_types)
        shape = draw(shapes(max_rank=3))
        target = draw(_factorisation(int(np.prod(shape, dtype=np.int64))))
        x = draw(arrays(numpy_type(in_type), shape))
        # allowzero=1 (opset 14): a 0 in the target is a zero-sized dimension, not "copy".
        nodes = [h.make_node("Reshape", ["x", "shape"], ["r"], name="reshape", allowzero=1),
                 h.make_node("NonZero", ["r"], ["y"], name="nonzero")]
        outputs = [h.make_tensor_value_info("y", T.INT64, [None, None])]
        inputs_extra = [h.make_tensor_value_info("shape", T.INT64, [None])]
        feeds_extra = {"shape": np.array(target, np.int64).reshape(-1)}
        what = f"NonZero(Reshape(x, shape={list(target)}, allowzero=1))"
        opset = 14
    what = what.replace("(x", f"(x: {onnx_type_name(in_type)} {list(shape)} declared {how}", 1)
    what += f", opset {opset}, outputs {[o.name for o in outputs]}"
    x_info = h.make_tensor_value_info("x", in_type, declared_shape(shape, how))
    model = graph_model(nodes, [x_info] + inputs_extra, outputs, opset=opset)
    return Case(what, model, {"x": x, **feeds_extra}, draw(level), {"x": draw(LAYOUTS)})


def any_cases(level=levels) -> st.SearchStrategy[Case]:
    return st.one_of(nonzero_cases(level), eyelike_cases(level), two_node_cases(level))


@st.composite
def rerun_cases(draw, level=levels) -> "list[Case]":
    """One model whose input sizes are bound at run time, with 2-4 feeds of different shapes:
    one CompiledModel must specialise (and cache) per input shape and give every answer right."""
    kind = draw(st.sampled_from(["nonzero", "eyelike", "reshape_nonzero"]))
    in_type = draw(onnx_types)
    how = draw(st.sampled_from(["symbolic", "unknown"]))
    lv = draw(level)
    count = draw(st.integers(2, 4))
    cases: "list[Case]" = []
    if kind == "nonzero":
        rank = draw(st.integers(0, 8))
        model = nonzero_model(in_type, declared_shape((0,) * rank, how))
        for _ in range(count):
            shape = draw(shapes(min_rank=rank, max_rank=rank))
            x = draw(arrays(numpy_type(in_type), shape))
            what = f"NonZero(x: {onnx_type_name(in_type)} rank {rank} declared {how}) at {list(shape)}"
            cases.append(Case(what, model, {"x": x}, lv, {"x": draw(LAYOUTS)}))
    elif kind == "eyelike":
        dtype = draw(st.one_of(st.none(), onnx_types))
        k = draw(st.one_of(st.none(), st.integers(-6, 6), ks_for(4, 4)))
        model = eyelike_model(in_type, declared_shape((0, 0), how), k, dtype)
        for _ in range(count):
            shape = draw(shapes(min_rank=2, max_rank=2, max_dim=12))
            x = draw(arrays(numpy_type(in_type), shape))
            what = (f"EyeLike(x: {onnx_type_name(in_type)} rank 2 declared {how}, "
                    f"{_eyelike_words(k, dtype)}) at {list(shape)}")
            cases.append(Case(what, model, {"x": x}, lv, {"x": draw(LAYOUTS)}))
    else:
        x_info = h.make_tensor_value_info("x", in_type, [None])
        s_info = h.make_tensor_value_info("shape", T.INT64, [None])
        y_info = h.make_tensor_value_info("y", T.INT64, [None, None])
        nodes = [h.make_node("Reshape", ["x", "shape"], ["r"], name="reshape", allowzero=1),
                 h.make_node("NonZero", ["r"], ["y"], name="nonzero")]
        model = graph_model(nodes, [x_info, s_info], [y_info], opset=14)
        for _ in range(count):
            (size,) = draw(shapes(min_rank=1, max_rank=1))
            target = draw(_factorisation(size))
            x = draw(arrays(numpy_type(in_type), (size,)))
            what = (f"NonZero(Reshape(x: {onnx_type_name(in_type)} [n] declared unknown, shape, "
                    f"allowzero=1)) at n={size}, shape={list(target)}")
            feeds = {"x": x, "shape": np.array(target, np.int64).reshape(-1)}
            cases.append(Case(what, model, feeds, lv, {"x": draw(LAYOUTS)}))
    return cases
