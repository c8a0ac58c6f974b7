"""The conformance grids as (name, model, feeds per data set): NonZero and EyeLike over every ONNX
type they take, ranks 0..8, scalars, empty tensors, -0.0 / NaN / denormals, large k, and every
idiom the lowering recognises. Deterministic: the same seeds give the same cases, byte for byte."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.ir.dtypes import ONNX_NUMERIC_AND_BOOL, onnx_to_numpy, onnx_type_name

OPSET = 13
IR_VERSION = 8                      # onnx_test_runner of onnxruntime 1.18+ reads it

NONZERO_SHAPES = {0: (), 1: (7,), 2: (3, 5), 3: (2, 3, 4), 4: (2, 1, 3, 2), 5: (1, 2, 3, 1, 2),
                  6: (2, 1, 2, 1, 2, 3), 7: (1, 2, 2, 1, 3, 1, 2), 8: (2, 1, 2, 1, 2, 1, 2, 2)}
EMPTY_SHAPES = ((0,), (3, 0), (0, 4, 2), (2, 0, 1, 3, 1, 1, 1, 2))
EYE_SHAPES = ((1, 1), (4, 4), (3, 5), (5, 3))
BIG = (2 ** 31, 2 ** 40)


@dataclass
class Case:
    name: str
    model: onnx.ModelProto
    data_sets: "list[dict[str, np.ndarray]]"
    what: str


def _model(nodes: "list[onnx.NodeProto]", inputs: "list[onnx.ValueInfoProto]", outputs: "list[onnx.ValueInfoProto]",
           inits: "Sequence[onnx.TensorProto]" = (), opset: int = OPSET) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "conformance", inputs, outputs, list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION,
                        producer_name="dml-lower conformance")


def _vi(name: str, elem: int, shape: "Sequence[int | None] | None") -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def _short(onnx_type: int) -> str:
    return onnx_type_name(onnx_type).split(" ")[0].lower()


def nonzero_input(onnx_type: int, shape: "tuple[int, ...]", rng: np.random.Generator) -> np.ndarray:
    """Mixed density with the values that decide NonZero: -0.0 (zero), NaN and denormals
    (non-zero), integer extremes, 64-bit values non-zero in their high word only."""
    dtype = onnx_to_numpy(onnx_type)
    keep = rng.random(shape) < rng.choice([0.0, 0.2, 0.6, 1.0])
    if dtype == np.bool_:
        return np.asarray(keep)
    if dtype.kind == "f":
        values = (rng.uniform(0.5, 4.0, shape) * rng.choice([-1, 1], shape)).astype(dtype)
        values = np.where(keep, values, dtype.type(0)).astype(dtype)
        flat = values.reshape(-1)
        zeros, ones = np.flatnonzero(~keep.reshape(-1)), np.flatnonzero(keep.reshape(-1))
        flat[zeros[::2]] = -0.0
        if ones.size:
            flat[ones[0]] = np.nan
            flat[ones[-1]] = np.finfo(dtype).smallest_subnormal
        return values
    info = np.iinfo(dtype)
    values = rng.integers(1, min(int(info.max), 1000), shape, endpoint=True).astype(dtype)
    if info.min < 0:
        values = np.where(rng.random(shape) < 0.5, -values, values).astype(dtype)
    flat = values.reshape(-1)
    if flat.size:
        flat[0] = info.max
        if dtype.itemsize == 8:
            flat[-1] = dtype.type(1 << 40)           # the low 32-bit word is zero
    return np.where(keep, values, dtype.type(0)).astype(dtype)


def nonzero_cases(seeds: int) -> "list[Case]":
    cases = []
    for onnx_type in ONNX_NUMERIC_AND_BOOL:
        name = _short(onnx_type)
        shapes = [(f"rank{r}", s) for r, s in NONZERO_SHAPES.items()]
        shapes += [("empty_" + "x".join(map(str, s)), s) for s in EMPTY_SHAPES]
        for label, shape in shapes:
            model = _model([h.make_node("NonZero", ["x"], ["y"], name="nonzero")],
                           [_vi("x", onnx_type, shape)], [_vi("y", T.INT64, [len(shape), None])])
            rng = np.random.default_rng([onnx_type, len(shape), sum(shape)])
            sets = [{"x": nonzero_input(onnx_type, shape, rng)} for _ in range(seeds)]
            if label == "rank0":
                sets[0] = {"x": np.array(0, onnx_to_numpy(onnx_type))}        # zero scalar
            cases.append(Case(f"test_nonzero_{name}_{label}", model, sets,
                              f"NonZero of {onnx_type_name(onnx_type)} {list(shape)}"))
    return cases


def _eyelike(in_type: int, shape: "tuple[int, ...]", k: "int | None", dtype: "int | None") -> onnx.ModelProto:
    attrs: "dict[str, Any]" = {} if k is None else {"k": k}
    if dtype is not None:
        attrs["dtype"] = dtype
    out_type = in_type if dtype is None else dtype
    return _model([h.make_node("EyeLike", ["x"], ["y"], name="eyelike", **attrs)],
                  [_vi("x", in_type, shape)], [_vi("y", out_type, shape)])


def _eye_sets(in_type: int, shape: "tuple[int, ...]", seeds: int) -> "list[dict[str, np.ndarray]]":
    rng = np.random.default_rng([in_type, *shape])
    return [{"x": nonzero_input(in_type, shape, rng)} for _ in range(seeds)]


def eyelike_cases(seeds: int) -> "list[Case]":
    cases = []
    for onnx_type in ONNX_NUMERIC_AND_BOOL:                       # the input's type is the output's
        cases.append(Case(f"test_eyelike_{_short(onnx_type)}_input_3x5_k1", _eyelike(onnx_type, (3, 5), 1, None),
                          _eye_sets(onnx_type, (3, 5), seeds), f"EyeLike of {onnx_type_name(onnx_type)}"))
        cases.append(Case(f"test_eyelike_float_to_{_short(onnx_type)}", _eyelike(T.FLOAT, (4, 4), -1, onnx_type),
                          _eye_sets(T.FLOAT, (4, 4), seeds), f"EyeLike dtype={onnx_type_name(onnx_type)}"))
    for rows, cols in EYE_SHAPES:
        ks = sorted({0, 1, -1, rows, -rows, cols, -cols, *BIG, *(-b for b in BIG)})
        for k in ks:
            label = f"k{k}" if k >= 0 else f"km{-k}"
            cases.append(Case(f"test_eyelike_float_{rows}x{cols}_{label}", _eyelike(T.FLOAT, (rows, cols), k, None),
                              _eye_sets(T.FLOAT, (rows, cols), seeds), f"EyeLike {rows}x{cols} k={k}"))
    for shape in ((0, 4), (4, 0)):
        cases.append(Case(f"test_eyelike_float_empty_{shape[0]}x{shape[1]}", _eyelike(T.FLOAT, shape, 0, None),
                          _eye_sets(T.FLOAT, shape, seeds), f"EyeLike {list(shape)}"))
    return cases


def _ints(name: str, values: object) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def idiom_cases(seeds: int) -> "list[Case]":
    """One model per idiom rule of lowering/*_idioms.py, each as the exporters emit it."""
    cases: "list[Case]" = []

    def add(name: str, nodes: "list[onnx.NodeProto]", inputs: "list[onnx.ValueInfoProto]",
            outputs: "list[onnx.ValueInfoProto]", inits: "list[onnx.TensorProto]",
            feeds_of: "Callable[[np.random.Generator], dict[str, np.ndarray]]", what: str) -> None:
        rng = np.random.default_rng(len(cases))
        opset = 14 if any(n.op_type == "Trilu" for n in nodes) else OPSET
        cases.append(Case(f"test_idiom_{name}", _model(nodes, inputs, outputs, inits, opset),
                          [feeds_of(rng) for _ in range(seeds)], what))

    _nonzero_idioms(add)
    _diagonal_idioms(add)
    return cases


def _nonzero_idioms(add: Callable[..., None]) -> None:
    """idiom_cases' NonZero ones: argwhere, columns by Slice or Split, masked select."""
    for rank, shape in ((0, ()), (2, (3, 4)), (4, (2, 3, 1, 2))):
        add(f"nonzero_transpose_rank{rank}",
            [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             h.make_node("Transpose", ["nz"], ["y"], name="transpose", perm=[1, 0])],
            [_vi("x", T.FLOAT, shape)], [_vi("y", T.INT64, [None, rank])], [],
            lambda rng, s=shape: {"x": nonzero_input(T.FLOAT, s, rng)}, "nonzero_transpose (torch.nonzero)")
    slices = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
              h.make_node("Transpose", ["nz"], ["t"], name="transpose", perm=[1, 0])]
    inits = []
    for i in range(3):
        slices += [h.make_node("Slice", ["t", f"s{i}", f"e{i}", "ax"], [f"c{i}"], name=f"slice{i}"),
                   h.make_node("Squeeze", [f"c{i}", "ax"], [f"col{i}"], name=f"squeeze{i}")]
        inits += [_ints(f"s{i}", [i]), _ints(f"e{i}", [i + 1])]
    add("nonzero_columns_slice", slices, [_vi("x", T.INT32, (2, 3, 4))],
        [_vi(f"col{i}", T.INT64, [None]) for i in range(3)], inits + [_ints("ax", [1])],
        lambda rng: {"x": nonzero_input(T.INT32, (2, 3, 4), rng)}, "nonzero_columns (nonzero(as_tuple=True))")
    split = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             h.make_node("Transpose", ["nz"], ["t"], name="transpose", perm=[1, 0]),
             h.make_node("Split", ["t"], ["p0", "p1"], name="split", axis=1)]
    split += [h.make_node("Squeeze", [f"p{i}", "ax"], [f"col{i}"], name=f"squeeze{i}") for i in range(2)]
    add("nonzero_columns_split", split, [_vi("x", T.BOOL, (4, 5))],
        [_vi(f"col{i}", T.INT64, [None]) for i in range(2)], [_ints("ax", [1])],
        lambda rng: {"x": nonzero_input(T.BOOL, (4, 5), rng)}, "nonzero_columns (torch.where(cond))")
    add("masked_select",
        [h.make_node("NonZero", ["mask"], ["nz"], name="nonzero"),
         h.make_node("Transpose", ["nz"], ["t"], name="transpose", perm=[1, 0]),
         h.make_node("GatherND", ["x", "t"], ["y"], name="gather")],
        [_vi("x", T.FLOAT, (3, 4)), _vi("mask", T.BOOL, (3, 4))], [_vi("y", T.FLOAT, [None])], [],
        lambda rng: {"x": rng.standard_normal((3, 4)).astype(np.float32),
                     "mask": nonzero_input(T.BOOL, (3, 4), rng)}, "nonzero_transpose (x[mask])")


def _diagonal_idioms(add: Callable[..., None]) -> None:
    """idiom_cases' diagonal ones: eyes, triangles of a fill, a stored band."""
    for k in (0, 2, -(2 ** 40)):
        add(f"eyelike_of_fill_k{k}".replace("-", "m"),
            [h.make_node("ConstantOfShape", ["shape"], ["fill"], name="fill",
                         value=h.make_tensor("v", T.FLOAT, [1], [0.0])),
             h.make_node("EyeLike", ["fill"], ["y"], name="eye", k=k, dtype=T.INT32)],
            [_vi("shape", T.INT64, [2])], [_vi("y", T.INT32, [None, None])], [],
            lambda rng: {"shape": np.array([int(rng.integers(1, 6)), int(rng.integers(1, 6))], np.int64)},
            "eyelike_constant_of_shape")
    add("eye_from_ranges",
        [h.make_node("Range", ["zero", "n", "one"], ["r0"], name="range_rows"),
         h.make_node("Range", ["zero", "m", "one"], ["r1"], name="range_cols"),
         h.make_node("Unsqueeze", ["r0", "axes"], ["u"], name="unsqueeze"),
         h.make_node("Equal", ["u", "r1"], ["eq"], name="equal"),
         h.make_node("Cast", ["eq"], ["y"], name="cast", to=T.FLOAT)],
        [_vi("n", T.INT64, []), _vi("m", T.INT64, [])], [_vi("y", T.FLOAT, [None, None])],
        [_ints("zero", 0), _ints("one", 1), _ints("axes", [1])],
        lambda rng: {"n": np.array(int(rng.integers(1, 7)), np.int64), "m": np.array(int(rng.integers(1, 7)), np.int64)},
        "eye_from_ranges (torch.eye(n, m))")
    for upper in (0, 1):
        add(f"trilu_of_fill_upper{upper}",
            [h.make_node("ConstantOfShape", ["shape"], ["fill"], name="fill",
                         value=h.make_tensor("v", T.FLOAT, [1], [1.0])),
             h.make_node("Trilu", ["fill", "k"], ["y"], name="trilu", upper=upper)],
            [_vi("shape", T.INT64, [3])], [_vi("y", T.FLOAT, [None, None, None])], [_ints("k", 1)],
            lambda rng: {"shape": np.array([2, int(rng.integers(1, 6)), int(rng.integers(1, 6))], np.int64)},
            "trilu_constant_fill (attention masks)")
    add("trilu_of_expand",
        [h.make_node("Expand", ["c", "shape"], ["fill"], name="expand"),
         h.make_node("Trilu", ["fill"], ["y"], name="trilu", upper=0)],
        [_vi("shape", T.INT64, [2])], [_vi("y", T.FLOAT, [None, None])],
        [numpy_helper.from_array(np.array([[-np.inf]], np.float32).reshape(()), "c")],
        lambda rng: {"shape": np.array([int(rng.integers(1, 6)), int(rng.integers(1, 6))], np.int64)},
        "trilu_constant_fill (Expand of a scalar)")
    band = np.eye(4, 6, 1, dtype=np.float32) * 2.0
    add("constant_band",
        [h.make_node("Add", ["x", "band"], ["y"], name="add")],
        [_vi("x", T.FLOAT, (4, 6))], [_vi("y", T.FLOAT, (4, 6))], [numpy_helper.from_array(band, "band")],
        lambda rng: {"x": rng.standard_normal((4, 6)).astype(np.float32)}, "constant_diagonal (initializer)")


# 64-bit values whose low 32-bit word is zero (a NonZero that looks at one word misses them),
# and for double -0.0 (zero), NaN and the smallest subnormal (its high word is zero).
HIGH_WORD = {T.INT64: [0, 1 << 32, -(1 << 63), 0, 1 << 40, -(1 << 32), 0, 1],
             T.UINT64: [0, 1 << 32, 1 << 63, 0, 1 << 40, (1 << 64) - (1 << 32), 0, 1],
             T.DOUBLE: [0.0, -0.0, 2.0, float("nan"), 5e-324, -0.0, -1.0, 0.0]}
HIGH_WORD_SHAPES = ((8,), (2, 4), (2, 2, 2))


def nonzero_high_word_cases(seeds: int) -> "list[Case]":
    cases = []
    for onnx_type, values in HIGH_WORD.items():
        dtype = onnx_to_numpy(onnx_type)
        base = np.array(values, dtype)
        for shape in HIGH_WORD_SHAPES:
            rng = np.random.default_rng([onnx_type, len(shape)])
            sets = [{"x": (base if n == 0 else rng.permutation(base)).reshape(shape)} for n in range(seeds)]
            model = _model([h.make_node("NonZero", ["x"], ["y"], name="nonzero")],
                           [_vi("x", onnx_type, shape)], [_vi("y", T.INT64, [len(shape), None])])
            cases.append(Case(f"test_nonzero_{_short(onnx_type)}_highword_{'x'.join(map(str, shape))}", model, sets,
                              f"NonZero of {onnx_type_name(onnx_type)} non-zero in the high word only, -0.0, NaN"))
    return cases


TRILU_SHAPE = (2, 3, 4)
TRILU_KS = (0, 1, -2)


def trilu_cases(seeds: int) -> "list[Case]":
    """Trilu(x, k) over every type, upper and lower, k inside and at the edges, a batch of 2."""
    cases = []
    for onnx_type in ONNX_NUMERIC_AND_BOOL:
        for upper in (1, 0):
            for k in TRILU_KS:
                model = _model([h.make_node("Trilu", ["x", "k"], ["y"], name="trilu", upper=upper)],
                               [_vi("x", onnx_type, TRILU_SHAPE)], [_vi("y", onnx_type, TRILU_SHAPE)],
                               [_ints("k", k)], opset=14)
                rng = np.random.default_rng([onnx_type, upper, k + 8])
                sets = [{"x": nonzero_input(onnx_type, TRILU_SHAPE, rng)} for _ in range(seeds)]
                label = f"k{k}" if k >= 0 else f"km{-k}"
                cases.append(Case(f"test_trilu_{_short(onnx_type)}_{'upper' if upper else 'lower'}_{label}", model,
                                  sets, f"Trilu upper={upper} k={k} of {onnx_type_name(onnx_type)} {list(TRILU_SHAPE)}"))
    for k in (-(2 ** 40), 2 ** 40):
        model = _model([h.make_node("Trilu", ["x", "k"], ["y"], name="trilu", upper=1)],
                       [_vi("x", T.FLOAT, TRILU_SHAPE)], [_vi("y", T.FLOAT, TRILU_SHAPE)], [_ints("k", k)], opset=14)
        rng = np.random.default_rng(abs(k) % 1000 + (k > 0))
        cases.append(Case(f"test_trilu_float_upper_{'k' if k > 0 else 'km'}{abs(k)}", model,
                          [{"x": nonzero_input(T.FLOAT, TRILU_SHAPE, rng)} for _ in range(seeds)],
                          f"Trilu upper k={k} (beyond the matrix)"))
    return cases


def _const(name: str, value: object, dtype: type = np.int64) -> onnx.NodeProto:
    return h.make_node("Constant", [], [name], name=f"c_{name}",
                       value=numpy_helper.from_array(np.asarray(value, dtype), name))


# (name, comparison, window, cast, swap, offset): the masks tests/lowering/test_mask_idioms.py builds.
MASKS = (("causal", "LessOrEqual", 0, None, False, "none"),
         ("causal_strict", "Less", 0, None, False, "none"),
         ("causal_swapped", "GreaterOrEqual", 0, None, True, "none"),
         ("future", "Greater", 0, None, False, "none"),
         ("causal_float", "LessOrEqual", 0, T.FLOAT, False, "none"),
         ("causal_int32", "LessOrEqual", 0, T.INT32, False, "none"),
         ("sliding_window2", "LessOrEqual", 2, None, False, "none"),
         ("sliding_window3_float", "LessOrEqual", 3, T.FLOAT, False, "none"),
         ("causal_offset", "LessOrEqual", 0, None, False, "constant"),
         ("causal_past", "LessOrEqual", 0, None, False, "run-time"),
         ("causal_shift", "LessOrEqual", 0, None, False, "shift"),
         ("sliding_window2_past", "LessOrEqual", 2, T.FLOAT, False, "run-time"),
         ("equal_diagonal", "Equal", 0, T.FLOAT, False, "none"))


def mask_cases(seeds: int) -> "list[Case]":
    """Range-comparison causal / sliding-window masks (lowering/mask_idioms.py): kv OP q (+ offset)."""
    cases: "list[Case]" = []
    for name, op, window, cast, swap, offset in MASKS:
        nodes = [_const("zero", 0), _const("one", 1), _const("ax_row", [-1]), _const("ax_col", [0]),
                 h.make_node("Range", ["zero", "n", "one"], ["q0"], name="range_q")]
        inputs = [_vi("n", T.INT64, [])]
        q, total = "q0", "n"
        if offset == "constant":
            nodes += [_const("shift", 2), h.make_node("Add", ["q0", "shift"], ["q"], name="add_shift"),
                      h.make_node("Add", ["n", "shift"], ["total"], name="total")]
            q, total = "q", "total"
        elif offset in ("run-time", "shift"):
            inputs.append(_vi("past", T.INT64, []))
            nodes.append(h.make_node("Add", ["past", "q0"], ["q"], name="add_past"))
            q = "q"
            if offset == "run-time":
                nodes.append(h.make_node("Add", ["n", "past"], ["total"], name="total"))
                total = "total"
        nodes += [h.make_node("Range", ["zero", total, "one"], ["kv0"], name="range_kv"),
                  h.make_node("Unsqueeze", [q, "ax_row"], ["q_idx"], name="unsqueeze_q"),
                  h.make_node("Unsqueeze", ["kv0", "ax_col"], ["kv_idx"], name="unsqueeze_kv"),
                  h.make_node(op, ["q_idx", "kv_idx"] if swap else ["kv_idx", "q_idx"], ["cmp"], name="cmp")]
        y = "cmp"
        if window:
            nodes += [_const("w", window), h.make_node("Sub", ["q_idx", "w"], ["low"], name="sub_w"),
                      h.make_node("Greater", ["kv_idx", "low"], ["inside"], name="gt_w"),
                      h.make_node("And", ["cmp", "inside"], ["window"], name="and_w")]
            y = "window"
        out_type = T.BOOL
        if cast is not None:
            nodes.append(h.make_node("Cast", [y], ["y"], name="cast", to=cast))
            out_type = cast
        else:
            nodes.append(h.make_node("Identity", [y], ["y"], name="identity"))
        rng = np.random.default_rng(len(cases))
        sets = [{"n": np.array(int(rng.integers(1, 7)), np.int64),
                 **({"past": np.array(int(rng.integers(0, 4)), np.int64)} if offset in ("run-time", "shift") else {})}
                for _ in range(seeds)]
        cases.append(Case(f"test_idiom_mask_{name}", _model(nodes, inputs, [_vi("y", out_type, [None, None])]),
                          sets, f"range_comparison_mask: kv {op} q, window {window}, offset {offset}"))
    return cases


def control_flow_cases(seeds: int) -> "list[Case]":
    """If / Loop bodies holding NonZero / EyeLike (lowered per body). Each Loop has a condition
    input and no scan output, where onnx.reference follows ONNX (runtime/region_engine.reference_deviation)."""
    cases: "list[Case]" = []
    shape = (3, 4)

    for op in ("NonZero", "EyeLike"):
        out_type = T.INT64 if op == "NonZero" else T.FLOAT
        out_shape = [2, None] if op == "NonZero" else list(shape)
        then = h.make_graph([h.make_node(op, ["x"], ["t"], name=f"then_{op.lower()}")], "then", [],
                            [_vi("t", out_type, out_shape)])
        attrs: "dict[str, Any]" = {} if op == "NonZero" else {"k": 1}
        other = h.make_graph([h.make_node("Relu", ["x"], ["r"], name="else_relu"),
                              h.make_node(op, ["r"], ["e"], name=f"else_{op.lower()}", **attrs)], "else", [],
                             [_vi("e", out_type, out_shape)])
        model = _model([h.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
                       [_vi("c", T.BOOL, []), _vi("x", T.FLOAT, shape)], [_vi("y", out_type, out_shape)])
        rng = np.random.default_rng(len(cases))
        sets = [{"c": np.array(n % 2 == 0), "x": nonzero_input(T.FLOAT, shape, rng)} for n in range(seeds)]
        cases.append(Case(f"test_control_if_{op.lower()}", model, sets, f"If whose branches hold {op}"))
    # Loop: acc += EyeLike(x, k=1) (float) / acc += sum(NonZero(x)) (int64), M times.
    for op, acc_type, acc_shape in (("EyeLike", T.FLOAT, list(shape)), ("NonZero", T.INT64, [])):
        if op == "EyeLike":
            inner = [h.make_node("EyeLike", ["x"], ["v"], name="body_eyelike", k=1)]
        else:
            inner = [h.make_node("NonZero", ["x"], ["nz"], name="body_nonzero"),
                     h.make_node("ReduceSum", ["nz"], ["v"], name="body_sum", keepdims=0)]
        body = h.make_graph(inner + [h.make_node("Add", ["acc", "v"], ["acc_out"], name="body_add"),
                                     h.make_node("Identity", ["cond"], ["cond_out"], name="body_cond")],
                            "body", [_vi("i", T.INT64, []), _vi("cond", T.BOOL, []), _vi("acc", acc_type, acc_shape)],
                            [_vi("cond_out", T.BOOL, []), _vi("acc_out", acc_type, acc_shape)])
        model = _model([h.make_node("Loop", ["m", "go", "acc0"], ["y"], name="loop", body=body)],
                       [_vi("m", T.INT64, []), _vi("go", T.BOOL, []), _vi("acc0", acc_type, acc_shape),
                        _vi("x", T.FLOAT, shape)], [_vi("y", acc_type, acc_shape)])
        rng = np.random.default_rng(10 + len(cases))
        dtype = onnx_to_numpy(acc_type)
        sets = [{"m": np.array(int(rng.integers(0, 4)), np.int64), "go": np.array(True),
                 "acc0": np.zeros(acc_shape, dtype), "x": nonzero_input(T.FLOAT, shape, rng)} for _ in range(seeds)]
        cases.append(Case(f"test_control_loop_{op.lower()}", model, sets, f"Loop whose body holds {op}"))
    return cases


def dml_ep_cases(seeds: int) -> "list[Case]":
    """Where onnxruntime's DML EP deviates from ONNX (DML_EP_PLACEMENT.md §5c) and the grids above
    do not already reach: Trilu's k narrowed to int32 (2^31 acts as INT32_MIN) and k + 1
    overflowing at INT32_MAX, and Cast to bool (fractions, negatives, NaN; int32 past 255, which the
    DML EP gets right; int64 past 2^32, which it does not)."""
    cases = []
    for k, upper in ((2 ** 31, 1), (2 ** 31 - 1, 0)):
        model = _model([h.make_node("Trilu", ["x", "k"], ["y"], name="trilu", upper=upper)],
                       [_vi("x", T.FLOAT, TRILU_SHAPE)], [_vi("y", T.FLOAT, TRILU_SHAPE)], [_ints("k", k)], opset=14)
        rng = np.random.default_rng([k, upper])
        cases.append(Case(f"test_trilu_float_{'upper' if upper else 'lower'}_k{k}", model,
                          [{"x": nonzero_input(T.FLOAT, TRILU_SHAPE, rng)} for _ in range(seeds)],
                          f"Trilu upper={upper} k={k} (the DML EP narrows k to int32)"))
    # float: clipped; int32: ONNX's answer (measured: negatives and 256 stay true); int64: its low word
    edges = {T.FLOAT: [0.0, -0.0, 0.5, -0.5, 1.0, 2.5, -3.0, np.nan, np.inf, -np.inf, 1e-45, 256.0],
             T.INT32: [0, 1, -1, 2, 255, 256, -256, 2 ** 31 - 1, -2 ** 31, 7, 0, 3],
             T.INT64: [0, 1, -1, 2 ** 32, 2 ** 40, -2 ** 63, 2 ** 32 + 1, -2 ** 32, 2 ** 63 - 1, 256, 0, 3]}
    what = {T.FLOAT: "the DML EP clips to [0, 1]", T.INT32: "the DML EP gives ONNX's answer",
            T.INT64: "the DML EP reads the low 32 bits"}
    for onnx_type, values in edges.items():
        dtype = onnx_to_numpy(onnx_type)
        model = _model([h.make_node("Cast", ["x"], ["y"], name="cast", to=T.BOOL)],
                       [_vi("x", onnx_type, (12,))], [_vi("y", T.BOOL, (12,))])
        rng = np.random.default_rng([onnx_type, 12])
        sets = [{"x": np.array(values, dtype)}] + [{"x": rng.permutation(np.array(values, dtype))}
                                                  for _ in range(seeds - 1)]
        cases.append(Case(f"test_cast_{_short(onnx_type)}_to_bool", model, sets,
                          f"Cast {onnx_type_name(onnx_type)} to bool ({what[onnx_type]})"))
    return cases + [empty_output_case(seeds)]


def empty_output_case(seeds: int) -> Case:
    """y = Relu(x) beside nz = NonZero(b), both graph outputs: where b holds no true element (set 0)
    the DML EP's empty nz ends onnxruntime's read-back of the run's outputs and y is never read back
    (dml_deviations.unread_outputs); in the other sets b holds one true element and both are read back."""
    model = _model([h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("NonZero", ["b"], ["nz"], name="nonzero")],
                   [_vi("x", T.FLOAT, (3, 5)), _vi("b", T.BOOL, (3, 5))],
                   [_vi("y", T.FLOAT, (3, 5)), _vi("nz", T.INT64, (2, None))], opset=13)
    rng = np.random.default_rng(20261128)
    sets = []
    for index in range(max(seeds, 1)):
        b = np.zeros(15, bool)
        if index:
            b[rng.integers(15)] = True
        sets.append({"x": rng.standard_normal((3, 5)).astype(np.float32), "b": b.reshape(3, 5)})
    return Case("test_nonzero_empty_beside_relu", model, sets,
                "Relu beside a NonZero, both outputs (an empty NonZero ends the DML EP's read-back of the outputs)")


def dml_fusion_cases(seeds: int) -> "list[Case]":
    """The DML EP's activation fusion (runtime/dml_fusion.py, measured on onnxruntime-directml
    1.24.4): a Gemm without C and a MeanVarianceNormalization, each fused with the Relu reading
    it, fail at session creation; a Conv whose output is also a graph output, fused with its Relu,
    gives that output back empty. The values are exact in float32 whatever the order of the sums
    (small integers; MeanVarianceNormalization's channels +-s, half each, so mean 0 and variance
    s^2), so every other provider passes them bit for bit."""
    rng = np.random.default_rng(20261129)

    def small(shape: "tuple[int, ...]") -> np.ndarray:
        return rng.integers(-3, 4, shape).astype(np.float32)

    def balanced(shape: "tuple[int, ...]") -> np.ndarray:
        signs = np.tile(np.repeat(np.array([1, -1], np.float32), 20), (shape[1], 1))     # 40 a channel: 2 x 4 x 5
        channels = rng.permuted(signs, axis=1) * np.float32(2.0 ** int(rng.integers(-2, 3)))
        return np.moveaxis(channels.reshape(shape[1], shape[0], *shape[2:]), 0, 1).copy()

    gemm = _model([h.make_node("Gemm", ["a", "b"], ["g"], name="gemm"), h.make_node("Relu", ["g"], ["y"], name="relu")],
                  [_vi("a", T.FLOAT, (3, 4)), _vi("b", T.FLOAT, (4, 5))], [_vi("y", T.FLOAT, (3, 5))])
    mvn = _model([h.make_node("MeanVarianceNormalization", ["x"], ["n"], name="mvn"),
                  h.make_node("Relu", ["n"], ["y"], name="relu")],
                 [_vi("x", T.FLOAT, (2, 3, 4, 5))], [_vi("y", T.FLOAT, (2, 3, 4, 5))])
    conv = _model([h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                   h.make_node("Relu", ["c"], ["y"], name="relu")],
                  [_vi("x", T.FLOAT, (1, 2, 5, 5))], [_vi("c", T.FLOAT, (1, 3, 5, 5)), _vi("y", T.FLOAT, (1, 3, 5, 5))],
                  [numpy_helper.from_array(small((3, 2, 3, 3)), "w")])
    return [Case("test_dml_fusion_gemm_without_c_relu", gemm,
                 [{"a": small((3, 4)), "b": small((4, 5))} for _ in range(seeds)],
                 "Gemm without C read by Relu alone (the DML EP's fused Gemm needs C)"),
            Case("test_dml_fusion_mvn_relu", mvn, [{"x": balanced((2, 3, 4, 5))} for _ in range(seeds)],
                 "MeanVarianceNormalization read by Relu alone (the fused node refuses its axes)"),
            Case("test_dml_fusion_conv_output_relu", conv, [{"x": small((1, 2, 5, 5))} for _ in range(seeds)],
                 "Conv read by Relu alone and a graph output too (the fused Conv's output comes back empty)")]


def all_cases(seeds: int = 2) -> "list[Case]":
    cases = (nonzero_cases(seeds) + nonzero_high_word_cases(seeds) + eyelike_cases(seeds) + trilu_cases(seeds)
             + idiom_cases(seeds) + mask_cases(seeds) + control_flow_cases(seeds) + dml_ep_cases(seeds)
             + dml_fusion_cases(seeds))
    assert len({c.name for c in cases}) == len(cases), "two cases share a folder name"
    return cases
