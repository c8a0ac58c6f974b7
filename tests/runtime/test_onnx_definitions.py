"""The hybrid oracle's numpy ONNX definitions (runtime/onnx_definitions.py) against onnx.reference,
bit for bit, over tables of type x shape x attribute and hypothesis-drawn inputs; the cases they
leave to onnx.reference; and the oracle routing through them."""
from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.runtime.compiled_view import ModelView
from onnx_dml_lowering.runtime.onnx_definitions import DEFINITIONS, NotDefined, defines, evaluate
from onnx_dml_lowering.runtime.oracle import ORT_CPU, REFERENCE, HybridOracle
from onnx_dml_lowering.runtime.onnx_definitions import ENGINE as DEFINITIONS_ENGINE
from tests.builders import graph_model
from tests.oracle import assert_same, reference

NATIVE = [T.FLOAT, T.DOUBLE, T.FLOAT16, T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8, T.UINT16, T.UINT32,
          T.UINT64, T.BOOL]
NUMERIC = [t for t in NATIVE if t != T.BOOL]
FLOATS = [T.FLOAT, T.DOUBLE, T.FLOAT16]
INTS = [t for t in NUMERIC if t not in FLOATS]


def np_type(onnx_type: int) -> np.dtype:
    return np.dtype(h.tensor_dtype_to_np_dtype(onnx_type))


def values(onnx_type: int, shape, seed: int = 0, zeros: float = 0.4) -> np.ndarray:
    """Seeded values of the type with a share of zeros; floats include NaN, +-inf and -0.0."""
    rng = np.random.default_rng(seed)
    dtype = np_type(onnx_type)
    size = int(np.prod(shape))
    if dtype == np.bool_:
        return rng.random(shape) > zeros
    if dtype.kind == "f":
        out = rng.normal(0, 50, size).astype(dtype)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], dtype=dtype)
        out[: min(size, 5)] = specials[: min(size, 5)]
        rng.shuffle(out)
    else:
        info = np.iinfo(dtype)
        out = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    out = out.reshape(shape)
    out[rng.random(shape) < zeros] = 0
    return out


def run_both(node: onnx.NodeProto, feeds: "dict[str, np.ndarray]", opset: int = 18,
             initializers: "dict[str, np.ndarray] | None" = None) -> None:
    """The node on onnx.reference and by its definition: every output the same bits (NaN
    payloads free only for Expand, which onnx.reference computes as data * ones)."""
    inputs = [(n, h.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for n, v in feeds.items()]
    outputs = [h.make_empty_tensor_value_info(o) for o in node.output]
    model = graph_model([node], inputs, outputs, initializers or {}, opset=opset)
    want = reference(model, feeds)
    env = {**feeds, **(initializers or {})}
    types = [h.np_dtype_to_tensor_dtype(env[n].dtype) for n in node.input if n]
    assert defines(node, types)
    got = evaluate(node, [env[n] if n else None for n in node.input])
    for name, value in zip(node.output, got):
        assert_same(value, want[name], f"{node.op_type} {name}", nan_payloads=node.op_type != "Expand")


# -- NonZero, EyeLike, Trilu ------------------------------------------------------------------
@pytest.mark.parametrize("onnx_type", NATIVE)
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (0, 3), (1, 1, 1, 1), (4, 1)])
def test_nonzero(onnx_type, shape):
    run_both(h.make_node("NonZero", ["x"], ["y"]), {"x": values(onnx_type, shape)}, opset=13)


@pytest.mark.parametrize("onnx_type, dtype", [(t, None) for t in NATIVE] + [(T.FLOAT, t) for t in NATIVE])
@pytest.mark.parametrize("k", [-5, -1, 0, 1, 3])
@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (5, 2), (0, 3)])
def test_eyelike(onnx_type, dtype, k, shape):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    run_both(h.make_node("EyeLike", ["x"], ["y"], **attrs), {"x": values(onnx_type, shape)}, opset=13)


@pytest.mark.parametrize("onnx_type", NATIVE)
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -3, -1, 0, 1, 2, 7])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 5), (5, 2), (1, 0, 3)])
def test_trilu(onnx_type, upper, k, shape):
    node = h.make_node("Trilu", ["x"] + ([] if k is None else ["k"]), ["y"], upper=upper)
    inits = {} if k is None else {"k": np.array(k, dtype=np.int64)}
    run_both(node, {"x": values(onnx_type, shape)}, opset=14, initializers=inits)


@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=4, max_side=6)),
       st.integers(-8, 8), st.booleans())
def test_trilu_property(x, k, upper):
    node = h.make_node("Trilu", ["x", "k"], ["y"], upper=int(upper))
    run_both(node, {"x": x}, opset=14, initializers={"k": np.array(k, dtype=np.int64)})


@given(hnp.arrays(st.sampled_from([np.float32, np.int64, np.bool_, np.uint8]),
                  hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5)))
def test_nonzero_property(x):
    run_both(h.make_node("NonZero", ["x"], ["y"]), {"x": x}, opset=13)


def test_trilu_extreme_k_keeps_or_zeroes_everything():
    """k far outside the matrix: ONNX keeps all (upper, k very negative) or nothing (k very large),
    with no overflow in the diagonal offset."""
    x = values(T.FLOAT, (3, 4))
    node = h.make_node("Trilu", ["x", "k"], ["y"], upper=1)
    for k, want in [(np.iinfo(np.int64).min, x), (np.iinfo(np.int64).max, np.zeros_like(x))]:
        (got,) = evaluate(node, [x, np.array(k, dtype=np.int64)])
        assert_same(got, want)


# -- shape and layout ---------------------------------------------------------------------------
@pytest.mark.parametrize("perm", [None, [0, 1, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0]])
@pytest.mark.parametrize("onnx_type", [T.FLOAT, T.INT64, T.BOOL])
def test_transpose(perm, onnx_type):
    attrs = {} if perm is None else {"perm": perm}
    run_both(h.make_node("Transpose", ["x"], ["y"], **attrs), {"x": values(onnx_type, (2, 3, 4))})


@pytest.mark.parametrize("shape, axes", [((1, 3, 1, 2), None), ((1, 3, 1, 2), [0]), ((1, 3, 1, 2), [-2, 0]),
                                         ((3, 1), [1]), ((1,), [0])])
@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze(shape, axes, opset):
    x = values(T.INT64, shape)
    if opset < 13:
        node = h.make_node("Squeeze", ["x"], ["y"], **({} if axes is None else {"axes": axes}))
        run_both(node, {"x": x}, opset=opset)
    else:
        node = h.make_node("Squeeze", ["x"] + ([] if axes is None else ["axes"]), ["y"])
        inits = {} if axes is None else {"axes": np.array(axes, dtype=np.int64)}
        run_both(node, {"x": x}, opset=opset, initializers=inits)


@pytest.mark.parametrize("shape, axes", [((3,), [0]), ((3,), [1]), ((3,), [-1]), ((2, 3), [0, 3]),
                                         ((2, 3), [-1, 1]), ((), [0])])
@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze(shape, axes, opset):
    x = values(T.FLOAT, shape)
    if opset < 13:
        run_both(h.make_node("Unsqueeze", ["x"], ["y"], axes=axes), {"x": x}, opset=opset)
    else:
        run_both(h.make_node("Unsqueeze", ["x", "axes"], ["y"]), {"x": x}, opset=opset,
                 initializers={"axes": np.array(axes, dtype=np.int64)})


@pytest.mark.parametrize("shape, target, allowzero", [((2, 3, 4), [6, 4], 0), ((2, 3, 4), [0, -1], 0),
                                                      ((2, 3, 4), [-1], 0), ((2, 0, 4), [0, 5], 1),
                                                      ((2, 3, 4), [4, 0, 2], 0)])
def test_reshape(shape, target, allowzero):
    run_both(h.make_node("Reshape", ["x", "shape"], ["y"], allowzero=allowzero), {"x": values(T.FLOAT, shape)},
             initializers={"shape": np.array(target, dtype=np.int64)})


@pytest.mark.parametrize("case", ["attr", "input", "even", "num_outputs", "uneven"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_split(case, axis):
    x = values(T.FLOAT, (6, 7, 5))
    size = x.shape[axis]
    sizes = [1, size - 3, 2]
    if case == "attr":
        run_both(h.make_node("Split", ["x"], ["a", "b", "c"], axis=axis, split=sizes), {"x": x}, opset=11)
    elif case == "input":
        run_both(h.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=axis), {"x": x}, opset=13,
                 initializers={"s": np.array(sizes, dtype=np.int64)})
    elif case == "even":
        parts = 2 if size % 2 == 0 else (5 if size == 5 else 7)
        run_both(h.make_node("Split", ["x"], [f"o{i}" for i in range(parts)], axis=axis), {"x": x}, opset=13)
    else:
        run_both(h.make_node("Split", ["x"], ["a", "b", "c"], axis=axis, num_outputs=3), {"x": x}, opset=18)


BIG = np.iinfo(np.int64).max


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1], [3], None, None), ([0, 1], [2, -1], [0, 2], None), ([-1], [-BIG], [1], [-1]),
    ([2, 0], [BIG, 5], [-1, 0], [2, 3]), ([5], [0], [0], [-2]), ([-100], [100], [2], None),
    ([3], [1], [1], [1]), ([0], [BIG], [0], [-1])])
def test_slice(starts, ends, axes, steps):
    x = values(T.FLOAT, (6, 7, 5))
    inits = {"s": np.array(starts, dtype=np.int64), "e": np.array(ends, dtype=np.int64)}
    names = ["x", "s", "e"]
    if axes is not None or steps is not None:
        inits["a"] = np.array(axes if axes is not None else list(range(len(starts))), dtype=np.int64)
        names.append("a")
    if steps is not None:
        inits["t"] = np.array(steps, dtype=np.int64)
        names.append("t")
    run_both(h.make_node("Slice", names, ["y"]), {"x": x}, initializers=inits)


@pytest.mark.parametrize("shape, target", [((3, 1), [3, 4]), ((1,), [2, 3]), ((2, 1, 4), [2, 3, 1]),
                                           ((3,), [1]), ((1, 1), [0, 1])])
@pytest.mark.parametrize("onnx_type", [T.FLOAT, T.BOOL, T.INT64, T.FLOAT16])
def test_expand(shape, target, onnx_type):
    run_both(h.make_node("Expand", ["x", "shape"], ["y"]), {"x": values(onnx_type, shape)},
             initializers={"shape": np.array(target, dtype=np.int64)})


@pytest.mark.parametrize("value", [None, np.array([1], np.int64), np.array([-2.5], np.float32),
                                   np.array([True]), np.array([7], np.uint8), np.array([0.5], np.float16)])
@pytest.mark.parametrize("shape", [[2, 3], [0], [4]])
def test_constant_of_shape(value, shape):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    run_both(h.make_node("ConstantOfShape", ["s"], ["y"], **attrs), {"s": np.array(shape, dtype=np.int64)})


@pytest.mark.parametrize("onnx_type", [T.INT64, T.INT32, T.INT16])
@pytest.mark.parametrize("start, limit, delta", [(0, 5, 1), (2, 11, 3), (10, 0, -2), (5, 5, 1), (0, 5, -1), (-4, 3, 2)])
def test_range(onnx_type, start, limit, delta):
    dtype = np_type(onnx_type)
    run_both(h.make_node("Range", ["a", "b", "c"], ["y"]),
             {"a": np.array(start, dtype), "b": np.array(limit, dtype), "c": np.array(delta, dtype)})


def test_identity():
    run_both(h.make_node("Identity", ["x"], ["y"]), {"x": values(T.FLOAT16, (3, 2))})


# -- element-wise -------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Add", "Sub", "Mul"])
@pytest.mark.parametrize("onnx_type", NUMERIC)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((4,), ())])
def test_binary_numeric(op, onnx_type, shapes):
    a, b = values(onnx_type, shapes[0], seed=1), values(onnx_type, shapes[1], seed=2)
    b.reshape(-1)[:1] = a.reshape(-1)[:1]           # at least one equal pair
    run_both(h.make_node(op, ["a", "b"], ["y"]), {"a": a, "b": b}, opset=16)


@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Equal"])
def test_binary_bool(op):
    run_both(h.make_node(op, ["a", "b"], ["y"]), {"a": values(T.BOOL, (4, 5), 1), "b": values(T.BOOL, (1, 5), 2)})


def test_not():
    run_both(h.make_node("Not", ["x"], ["y"]), {"x": values(T.BOOL, (3, 4))})


@pytest.mark.parametrize("source, target", [(s, t) for s, t in itertools.product(NATIVE, NATIVE)
                                            if not (s in FLOATS and t in INTS)])
def test_cast(source, target):
    run_both(h.make_node("Cast", ["x"], ["y"], to=target), {"x": values(source, (4, 6))})


# -- what is left to onnx.reference ------------------------------------------------------------
@pytest.mark.parametrize("node, inputs, why", [
    (h.make_node("NonZero", ["x"], ["y"]), [np.array(3.0, np.float32)], "scalar"),
    (h.make_node("Cast", ["x"], ["y"], to=T.INT32), [np.array([1.5], np.float32)], "float type to an integer"),
    (h.make_node("Range", ["a", "b", "c"], ["y"]), [np.array(0.0, np.float32), np.array(1.0, np.float32),
                                                   np.array(0.1, np.float32)], "floats"),
    (h.make_node("EyeLike", ["x"], ["y"], dtype=T.BFLOAT16), [np.zeros((2, 2), np.float32)], "natively"),
    (h.make_node("Squeeze", ["x", "a"], ["y"]), [np.zeros((2, 1)), np.array([0])], "not 1"),
])
def test_cases_left_to_reference(node, inputs, why):
    with pytest.raises(NotDefined, match=why):
        evaluate(node, inputs)


def test_squeeze_with_an_empty_axes_attribute_squeezes_every_size_1_dimension():
    """Opsets 1 / 11: axes=[] is no axes (onnx.reference and onnxruntime agree)."""
    x = values(T.FLOAT, (1, 2, 1, 3, 1))
    node = h.make_node("Squeeze", ["x"], ["y"])
    node.attribute.append(h.make_attribute("axes", [], attr_type=onnx.AttributeProto.INTS))
    run_both(node, {"x": x}, opset=11)
    assert evaluate(node, [x])[0].shape == (2, 3)


@pytest.mark.parametrize("node, inputs, why", [
    # ambiguous: onnx.reference squeezes nothing, onnxruntime everything
    (h.make_node("Squeeze", ["x", "a"], ["y"]), [np.zeros((1, 2)), np.array([], np.int64)], "empty axes"),
    # invalid models onnxruntime refuses: never a value from the definitions
    (h.make_node("Split", ["x"], ["a", "b"], axis=0), [np.zeros((7, 2))], "equal parts"),
    (h.make_node("Split", ["x", "s"], ["a", "b"]), [np.zeros((7, 2)), np.array([9, -2])], "do not cover"),
    (h.make_node("Reshape", ["x", "s"], ["y"]), [np.zeros((0, 3)), np.array([3, 0, 0])], "does not have"),
    (h.make_node("Reshape", ["x", "s"], ["y"]), [np.zeros(6), np.array([-2, 6])], "only one -1"),
    (h.make_node("Reshape", ["x", "s"], ["y"]), [np.zeros(6), np.array([-1, -1])], "only one -1"),
    (h.make_node("Slice", ["x", "s", "e", "a"], ["y"]), [np.zeros((3, 4)), np.array([0, 1]), np.array([2]),
                                                         np.array([0, 1])], "different lengths"),
    (h.make_node("Slice", ["x", "s", "e", "a"], ["y"]), [np.zeros((3, 4)), np.array([0, 1]), np.array([2, 2]),
                                                         np.array([0, -2])], "repeated axis"),
])
def test_invalid_or_ambiguous_cases_are_left_to_reference(node, inputs, why):
    with pytest.raises(NotDefined, match=why):
        evaluate(node, inputs)


def test_defines_declines_unknown_ops_domains_attributes_and_types():
    assert not defines(h.make_node("Relu", ["x"], ["y"]))
    assert not defines(h.make_node("NonZero", ["x"], ["y"], domain="com.example"))
    assert not defines(h.make_node("Cast", ["x"], ["y"], to=1, unknown=3))
    assert not defines(h.make_node("NonZero", ["x"], ["y"]), [T.BFLOAT16])
    assert not defines(h.make_node("Slice", ["x"], ["y"], starts=[0], ends=[1]))        # opset 1 attributes
    assert defines(h.make_node("NonZero", ["x"], ["y"]), [0])
    assert set(DEFINITIONS) >= {"NonZero", "EyeLike", "Trilu"}


# -- the oracle routes through them --------------------------------------------------------------
def _nonzero_chain(in_type: int, shape) -> onnx.ModelProto:
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz"), h.make_node("Transpose", ["nz"], ["t"], name="t"),
             h.make_node("Neg", ["x"], ["n"], name="neg")]
    return graph_model(nodes, [("x", in_type, shape)], [("t", T.INT64, 2), ("n", in_type, shape)])


def test_oracle_evaluates_semantic_nodes_by_definition():
    model = _nonzero_chain(T.FLOAT, [3, 4])
    x = values(T.FLOAT, (3, 4))
    oracle = HybridOracle(model, ModelView(model).types, semantic_nodes={"t"})
    got = oracle.run({"x": x})
    engines = oracle.node_engines()
    assert engines == {"nz": DEFINITIONS_ENGINE, "t": DEFINITIONS_ENGINE, "neg": ORT_CPU}
    assert not oracle.fallbacks
    for name, want in reference(model, {"x": x}).items():
        assert_same(got[name], want, name)


def test_oracle_leaves_a_scalar_nonzero_to_reference():
    """Rank known (0): planned on onnx.reference. Rank unknown: tried by definition, moved to
    onnx.reference at run time, and the fallback says why."""
    model = _nonzero_chain(T.FLOAT, [])
    x = {"x": np.array(2.0, np.float32)}
    want = reference(model, x)
    planned = HybridOracle(model, ModelView(model).types, semantic_nodes={"t"})
    got = planned.run(x)
    assert planned.node_engines()["nz"] == REFERENCE and not planned.fallbacks
    for name in want:
        assert_same(got[name], want[name], name)
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz"), h.make_node("Transpose", ["nz"], ["t"], name="t")]
    untyped = graph_model(nodes, [("x", T.FLOAT, None)], [("t", T.INT64, 2)])
    moved = HybridOracle(untyped, {}, semantic_nodes={"t"})
    got = moved.run(x)
    (fallback,) = moved.fallbacks
    assert fallback.node == "nz" and fallback.engine == REFERENCE and "scalar" in fallback.reason
    assert_same(got["t"], reference(untyped, x)["t"], "t")
