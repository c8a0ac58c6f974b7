"""Masks and eyes new producers write with a value-preserving step inside an index (issue 35): the
index tracer sees through integer-exact Casts (jax2onnx's jnp.eye), Reshapes that only add or remove
unit axes (flax.nnx's causal mask) and Sub-then-compare (torch's sliding window), once, in the shared
helpers. Each form is built as the producer writes it and differential-tested against onnx.reference
at several sizes, strict; each guard (a Cast that wraps or rounds, a Reshape that moves larger axes,
a difference past its type) declines with its reason and still gives the ONNX answer."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from tests.builders import tensor
from tests.lowering.producers import MASK, const, entries, lowered, make
from tests.oracle import Differential, differential


# -- 2. jax2onnx's jnp.eye(n, m, k): Range -> Unsqueeze -> Expand -> Cast(int32) -> Add(k) -> Equal ---

def jax_eye_model(k=0, cast_to=T.INT32, start="zero"):
    """rows + k == cols over [n, m] grids; `start` names the Ranges' start (a fed `s` for the guards)."""
    nodes = [const("zero", 0), const("one", 1), const("ax0", [0]), const("ax1", [1]), const("k", k, cast_to),
             h.make_node("Range", [start, "n", "one"], ["r"], name="range_r"),
             h.make_node("Range", [start, "m", "one"], ["c"], name="range_c"),
             h.make_node("Sub", ["n", start], ["rows"], name="rows"), h.make_node("Sub", ["m", start], ["cols"], name="cols"),
             h.make_node("Unsqueeze", ["rows", "ax0"], ["n1"], name="n1"),
             h.make_node("Unsqueeze", ["cols", "ax0"], ["m1"], name="m1"),
             h.make_node("Concat", ["n1", "m1"], ["shape"], name="shape", axis=0),
             h.make_node("Unsqueeze", ["r", "ax1"], ["ru"], name="unsqueeze_r"),
             h.make_node("Unsqueeze", ["c", "ax0"], ["cu"], name="unsqueeze_c"),
             h.make_node("Expand", ["ru", "shape"], ["re"], name="expand_r"),
             h.make_node("Expand", ["cu", "shape"], ["ce"], name="expand_c"),
             h.make_node("Cast", ["re"], ["ri"], name="cast_r", to=cast_to),
             h.make_node("Cast", ["ce"], ["ci"], name="cast_c", to=cast_to),
             h.make_node("Add", ["ri", "k"], ["rk"], name="add_k"),
             h.make_node("Equal", ["rk", "ci"], ["eq"], name="equal"),
             h.make_node("Cast", ["eq"], ["y"], name="to_float", to=T.FLOAT)]
    inputs = [tensor("n", T.INT64, []), tensor("m", T.INT64, [])]
    if start != "zero":
        inputs.append(tensor(start, T.INT64, []))
        nodes = [n for n in nodes if n.name != "c_zero"]
    return make(nodes, inputs, [tensor("y", T.FLOAT, 2)])


@pytest.mark.parametrize("k", [0, 1, -2, 7])
def test_jax_eye(k):
    model = jax_eye_model(k)
    for n, m in ((1, 1), (4, 4), (3, 5), (6, 2), (9, 9)):
        result = differential(model, {"n": np.array(n), "m": np.array(m)})
        entry = lowered(result, MASK, {"equal", "cast_r", "cast_c", "add_k", "expand_r", "to_float", "range_r"})
        assert entry.dml_operators == ["DIAGONAL_MATRIX"]


@pytest.mark.parametrize("cast_to,start,size,fits", [
    (T.INT32, 2**31 - 3, 2, True),          # values 2^31-3 .. 2^31-2: int32 holds them
    (T.INT32, 2**31 - 3, 5, False),         # .. 2^31+1: the Cast wraps
    (T.INT8, 0, 100, True), (T.INT8, 0, 200, False), (T.INT8, -128, 3, True), (T.UINT8, -1, 3, False),
    (T.FLOAT16, 2040, 8, True), (T.FLOAT16, 2040, 12, False)])
def test_a_cast_that_would_change_values_declines(cast_to, start, size, fits):
    """A Cast is stepped through only where every index value it sees fits the target exactly; where
    one would wrap or round, the call runs on ONNX with that reason (and gives ONNX's answer)."""
    model = jax_eye_model(0, cast_to, start="s")
    feeds = {"n": np.array(start + size), "m": np.array(start + size), "s": np.array(start)}
    if cast_to == T.FLOAT16 and not fits:
        # The call runs on onnxruntime, whose float16 Equal of rounded indices is not onnx.reference's
        # (2049 and 2048 both round to 2048: the spec's Equal is true there; onnxruntime's is not).
        compiled = compile_model(model)
        compiled.run(feeds, strict=True)
        result = Differential(compiled, {}, {})
    else:
        result = differential(model, feeds)
    (entry,) = entries(result, MASK)
    log = result.compiled.session().log
    if fits:
        assert entry.status == "lowered" and log == [], log
    else:
        assert len(log) == 1 and "index values cast by cast_" in log[0] and "exactly" in log[0], log


# -- 3. flax.nnx's causal mask: Range -> Reshape[1,S] -> Expand[B,S] -> Reshape[B,S,1] >= Reshape[B,1,S] -----

def flax_causal_model(batch, seq, range_type=T.INT32, dynamic_batch=False, reorder=False):
    """make_causal_mask: idxs = broadcast_to(arange(S), [B, S]); idxs[..., None] >= idxs[..., None, :].
    dynamic_batch: B fed, the Reshapes take -1 for it. reorder: the query side Reshapes [B, S] to
    [S, B, 1] instead (a Reshape that moves larger axes: never an index), the key side to [1, B, S]."""
    b = -1 if dynamic_batch else batch
    q_shape = [seq, b, 1] if reorder else [b, seq, 1]
    nodes = [const("zero", 0, range_type), const("one", 1, range_type), const("s", seq, range_type),
             const("row", [1, seq]), const("q_shape", q_shape), const("k_shape", [1, b, seq] if reorder else [b, 1, seq]),
             h.make_node("Range", ["zero", "s", "one"], ["r"], name="arange"),
             h.make_node("Reshape", ["r", "row"], ["r1"], name="reshape_row"),
             h.make_node("Expand", ["r1", "bs"], ["idxs"], name="broadcast"),
             h.make_node("Reshape", ["idxs", "q_shape"], ["q"], name="reshape_q"),
             h.make_node("Reshape", ["idxs", "k_shape"], ["kv"], name="reshape_k"),
             h.make_node("GreaterOrEqual", ["q", "kv"], ["y"], name="causal")]
    inputs = []
    if dynamic_batch:
        inputs.append(tensor("batch", T.INT64, [1]))
        nodes[:0] = [const("seq", [seq]), h.make_node("Concat", ["batch", "seq"], ["bs"], name="bs", axis=0)]
    else:
        nodes.insert(0, const("bs", [batch, seq]))
    return make(nodes, inputs, [tensor("y", T.BOOL, 3)])


@pytest.mark.parametrize("range_type", [T.INT32, T.INT64])
@pytest.mark.parametrize("batch,seq", [(1, 2), (2, 5), (3, 8), (1, 16)])
def test_flax_causal_mask(batch, seq, range_type):
    result = differential(flax_causal_model(batch, seq, range_type), {})
    entry = lowered(result, MASK, {"causal", "reshape_q", "reshape_k", "broadcast", "reshape_row", "arange"})
    assert entry.extra["band"] == "x - y in (-inf, 1)"


def test_flax_causal_mask_with_a_fed_batch():
    model = flax_causal_model(0, 6, dynamic_batch=True)
    for batch in (1, 2, 5):
        lowered(differential(model, {"batch": np.array([batch])}), MASK)


@pytest.mark.parametrize("batch,seq", [(2, 5), (3, 4)])
def test_a_reshape_that_moves_larger_axes_is_no_index(batch, seq):
    result = differential(flax_causal_model(batch, seq, reorder=True), {})
    assert entries(result, MASK) == []


# -- 4. torch's sliding window (j <= i) & (i - j < w): Sub -> Less -------------------------------------

def torch_window_model(window=3, swap=False, fed_window=False, range_type=T.INT64):
    """(j <= i) & (i - j < w); swap writes the second half as (j - i > -w), the bound a Neg of w."""
    inputs = [tensor("n", range_type, [])]
    nodes = [const("zero", 0, range_type), const("one", 1, range_type), const("ax_i", [-1]), const("ax_j", [0])]
    if fed_window:
        inputs.append(tensor("w", range_type, []))
    else:
        nodes.append(const("w", window, range_type))
    bound = "w"
    if swap:
        nodes.append(h.make_node("Neg", ["w"], ["neg_w"], name="neg_w"))
        bound = "neg_w"
    nodes += [h.make_node("Range", ["zero", "n", "one"], ["r"], name="arange"),
              h.make_node("Unsqueeze", ["r", "ax_i"], ["i"], name="unsqueeze_i"),
              h.make_node("Unsqueeze", ["r", "ax_j"], ["j"], name="unsqueeze_j"),
              h.make_node("LessOrEqual", ["j", "i"], ["causal"], name="causal"),
              h.make_node("Sub", ["j", "i"] if swap else ["i", "j"], ["d"], name="sub"),
              h.make_node("Greater" if swap else "Less", ["d", bound], ["near"], name="near"),
              h.make_node("And", ["causal", "near"], ["y"], name="window")]
    return make(nodes, inputs, [tensor("y", T.BOOL, 2)])


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("range_type", [T.INT64, T.INT32, T.FLOAT])
def test_torch_sliding_window(swap, range_type):
    model = torch_window_model(3, swap, range_type=range_type)
    dtype = {T.INT64: np.int64, T.INT32: np.int32, T.FLOAT: np.float32}[range_type]
    for n in (1, 2, 5, 9):
        result = differential(model, {"n": np.array(n, dtype)})
        entry = lowered(result, MASK, {"window", "causal", "near", "sub", "arange", "unsqueeze_i", "unsqueeze_j"})
        if not swap:                            # swap's bound is a Neg left to ONNX: known per call
            assert entry.extra["band"] == "x - y in [-2, 1)"


@pytest.mark.parametrize("window", [-1, 0, 1, 3, 100])
def test_torch_sliding_window_fed(window):
    model = torch_window_model(fed_window=True)
    for n in (1, 4, 7):
        lowered(differential(model, {"n": np.array(n), "w": np.array(window)}), MASK)


def one_difference_window_model(low=0, high=3, read_outside=False):
    """torch's `d = i - j; (d >= low) & (d < high)`: one Sub read by both comparisons; `read_outside`
    also makes d a graph output, so the Sub stays ONNX while the mask still lowers."""
    nodes = [const("zero", 0), const("one", 1), const("ax_i", [-1]), const("ax_j", [0]),
             const("low", low), const("high", high),
             h.make_node("Range", ["zero", "n", "one"], ["r"], name="arange"),
             h.make_node("Unsqueeze", ["r", "ax_i"], ["i"], name="unsqueeze_i"),
             h.make_node("Unsqueeze", ["r", "ax_j"], ["j"], name="unsqueeze_j"),
             h.make_node("Sub", ["i", "j"], ["d"], name="sub"),
             h.make_node("GreaterOrEqual", ["d", "low"], ["past"], name="past"),
             h.make_node("Less", ["d", "high"], ["near"], name="near"),
             h.make_node("And", ["past", "near"], ["y"], name="window")]
    outputs = [tensor("y", T.BOOL, 2)] + ([tensor("d", T.INT64, 2)] if read_outside else [])
    return make(nodes, [tensor("n", T.INT64, [])], outputs)


@pytest.mark.parametrize("low,high,band", [(0, 3, "x - y in [-2, 1)"), (-1, 2, "x - y in [-1, 2)"),
                                           (2, 2, "no diagonal (all false)")])
@pytest.mark.parametrize("read_outside", [False, True])
def test_one_difference_compared_twice(low, high, band, read_outside):
    """Both bounds of a window on one Sub (the exporters' form of `(i - j >= 0) & (i - j < w)`) are one
    DIAGONAL_MATRIX1, the Sub covered; a Sub read outside the mask stays ONNX and the mask still lowers."""
    model = one_difference_window_model(low, high, read_outside)
    for n in (1, 2, 5, 9):
        result = differential(model, {"n": np.array(n)})
        entry = lowered(result, MASK, {"window", "past", "near"})
        # the Sub and the index steps under it are covered unless the graph output reads the Sub
        assert {"sub", "unsqueeze_i", "unsqueeze_j", "arange"} & set(entry.onnx_nodes) == \
            (set() if read_outside else {"sub", "unsqueeze_i", "unsqueeze_j", "arange"})
        assert entry.extra["band"] == band


def test_a_difference_past_its_type_declines():
    """int16 indices from near 2^15: i - j would wrap; the call runs on ONNX with the reason."""
    nodes = [const("one", 1, T.INT16), const("ax_i", [-1]), const("ax_j", [0]), const("w", 3, T.INT16),
             h.make_node("Range", ["s", "n", "one"], ["r"], name="arange"),
             h.make_node("Range", ["s2", "n2", "one"], ["r2"], name="arange2"),
             h.make_node("Unsqueeze", ["r", "ax_i"], ["i"], name="unsqueeze_i"),
             h.make_node("Unsqueeze", ["r2", "ax_j"], ["j"], name="unsqueeze_j"),
             h.make_node("Sub", ["i", "j"], ["d"], name="sub"),
             h.make_node("Less", ["d", "w"], ["y"], name="near")]
    model = make(nodes, [tensor(name, T.INT16, []) for name in ("s", "n", "s2", "n2")], [tensor("y", T.BOOL, 2)])
    feeds = {"s": np.int16(32760), "n": np.int16(32764), "s2": np.int16(-10), "n2": np.int16(-6)}
    result = differential(model, feeds)
    (log,) = result.compiled.session().log
    assert "the differences of sub" in log and "int16" in log
    feeds = {"s": np.int16(0), "n": np.int16(6), "s2": np.int16(-3), "n2": np.int16(2)}
    lowered(differential(model, feeds), MASK)


@pytest.mark.parametrize("n,cast_to,reason", [
    (100, T.INT8, ""), (200, T.INT8, "index values cast by cast_c 0..199 do not all fit int8 exactly ([-128, 127])"),
    (300, T.UINT8, "index values cast by cast_c 0..299 do not all fit uint8 exactly ([0, 255])"),
    (600, T.INT16, "")])
def test_a_static_cast_that_would_wrap_is_placed_on_onnx_with_the_reason(n, cast_to, reason):
    """With every size a constant the check is made at compile time: the placement says why."""
    nodes = [const("zero", 0), const("one", 1), const("n", n), const("ax0", [0]), const("ax1", [1]),
             h.make_node("Range", ["zero", "n", "one"], ["r"], name="range"),
             h.make_node("Unsqueeze", ["r", "ax1"], ["ru"], name="unsqueeze_r"),
             h.make_node("Unsqueeze", ["r", "ax0"], ["cu"], name="unsqueeze_c"),
             h.make_node("Cast", ["ru"], ["a"], name="cast_r", to=cast_to),
             h.make_node("Cast", ["cu"], ["b"], name="cast_c", to=cast_to),
             h.make_node("LessOrEqual", ["b", "a"], ["y"], name="causal")]
    result = differential(make(nodes, [], [tensor("y", T.BOOL, 2)]), {})
    (entry,) = entries(result, MASK)
    if reason:
        assert entry.status == "onnx" and entry.reason.startswith(reason), entry.reason
    else:
        assert entry.status == "lowered" and entry.extra["band"] == "x - y in (-inf, 1)"
