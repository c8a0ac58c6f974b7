"""Hypothesis strategies for the exporter idioms around NonZero and the diagonal generators:
Transpose(NonZero), as_tuple columns (Slice / Split -> Squeeze), x[mask] (GatherND),
EyeLike(ConstantOfShape), torch.eye's Range / Unsqueeze / Equal / Cast, Trilu(ConstantOfShape),
and constant band matrices (initializers, Constant nodes) generated instead of stored.

Each strategy also draws near-misses of its pattern (a second consumer, the intermediate as a
graph output, a perm or axis that is not the idiom's, fractional Range bounds, a band with one
element off) so that a rule that matches too eagerly is caught, not only one that is wrong.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.ir.dtypes import onnx_to_numpy, onnx_type_name
from tests.builders import graph_model
from tests.fuzz.strategies import (DECLARED, INT64_MAX, LAYOUTS, Case, _bits_dtype,
                                   arrays, declared_shape, element_bits, ks_for, levels,
                                   numpy_type, onnx_types, shapes)


def _value_info(name: str, elem: int, shape) -> "object":
    return h.make_tensor_value_info(name, elem, shape)


def _scalar_of(dtype: np.dtype, bits: int) -> np.ndarray:
    """A 0-d array of `dtype` holding exactly these bits."""
    if dtype == np.bool_:
        return np.array(bool(bits & 1))
    return np.array(bits, dtype=_bits_dtype(dtype)).view(dtype)


# -- NonZero idioms ------------------------------------------------------------------------------

@st.composite
def row_takers(draw, rank, nodes, inits, outputs) -> str:
    """nonzero_rows / nonzero_columns: each axis taken from NonZero's [rank, nnz] (or, Transposed,
    [nnz, rank]) by a Slice of any start / end / step (clamped, backwards, or keeping several rows:
    a near miss) + Squeeze, or a Gather of one index (scalar or [k], negative too)."""
    transposed = draw(st.booleans())
    axis, data = (1, "t") if transposed else (0, "nz")
    if transposed:
        nodes.append(h.make_node("Transpose", ["nz"], ["t"], name="transpose", perm=[1, 0]))
    said = []
    for i, row in enumerate(draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank + 1))):
        if draw(st.booleans()):
            index = np.array(draw(st.sampled_from([row, row - rank])), np.int64)
            index = index.reshape(1) if draw(st.booleans()) else index
            inits.append(numpy_helper.from_array(index, f"k{i}"))
            nodes.append(h.make_node("Gather", [data, f"k{i}"], [f"y{i}"], name=f"gather{i}", axis=axis))
            outputs.append(_value_info(f"y{i}", T.INT64, [None] * index.ndim + [None]))
            said.append(f"Gather {index.tolist()}")
            continue
        step = draw(st.sampled_from([1, 2, -1, -3]))
        # Bounds where numpy (onnx.reference), the ONNX text and onnxruntime agree: a start inside the
        # axis, "to the end" in the step's direction only (onnxruntime's Slice keeps the start for an
        # end of INT64_MAX stepping back, and a start before the axis stepping back keeps nothing in
        # numpy but the first element by the text and onnxruntime)
        start = draw(st.integers(-rank, rank - 1))
        end = draw(st.integers(-rank - 2, rank + 2) | st.just(INT64_MAX if step > 0 else -INT64_MAX))
        inits += [numpy_helper.from_array(np.array([v], np.int64), f"{n}{i}")
                  for n, v in (("s", start), ("e", end), ("a", axis), ("st", step))]
        nodes.append(h.make_node("Slice", [data, f"s{i}", f"e{i}", f"a{i}", f"st{i}"], [f"r{i}"], name=f"slice{i}"))
        if len(range(rank)[start:end:step]) == 1:
            nodes.append(h.make_node("Squeeze", [f"r{i}", f"a{i}"], [f"y{i}"], name=f"squeeze{i}"))
            outputs.append(_value_info(f"y{i}", T.INT64, [None]))
        else:                                           # not one row: the slice itself, not the idiom
            outputs.append(_value_info(f"r{i}", T.INT64, [None, None]))
        said.append(f"Slice [{start}:{end}:{step}]")
    return f"NonZero(x){' -> Transpose' if transposed else ''} -> {', '.join(said)}"


@st.composite
def nonzero_idiom_cases(draw, level=levels) -> Case:
    kind = draw(st.sampled_from(["transpose", "slice_columns", "split_columns", "row_takers", "masked_select"]))
    in_type = draw(onnx_types)
    how = draw(DECLARED)
    min_rank = 0 if kind == "transpose" else 1
    shape = draw(shapes(min_rank=min_rank, max_rank=8 if kind == "transpose" else 5))
    rank = len(shape)
    x = draw(arrays(numpy_type(in_type), shape))
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nonzero")]
    inits: list = []
    outputs: list = []
    extra_inputs: list = []
    feeds_extra: dict = {}
    # Near-miss: NonZero's own result also leaves the graph (the idiom may not swallow it).
    nz_out = draw(st.booleans()) if kind != "masked_select" else False
    if kind == "transpose":
        perm = draw(st.sampled_from([None, [1, 0], [0, 1]]))
        nodes.append(h.make_node("Transpose", ["nz"], ["y"], name="transpose",
                                 **({} if perm is None else {"perm": perm})))
        outputs.append(_value_info("y", T.INT64, [None, None]))
        what = f"Transpose(NonZero(x), perm={perm})"
    elif kind == "slice_columns":
        nodes.append(h.make_node("Transpose", ["nz"], ["t"], name="transpose", perm=[1, 0]))
        columns = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
        t_out = draw(st.booleans())
        if t_out:
            outputs.append(_value_info("t", T.INT64, [None, None]))
        for i in columns:
            form = draw(st.sampled_from(["positive", "negative", "open_end", "wide", "axis0"]))
            start, end, axis = i, i + 1, 1
            if form == "negative":
                start, end, axis = i - rank, (i + 1 - rank) if i + 1 < rank else INT64_MAX, -1
            elif form == "open_end":
                end = INT64_MAX if i == rank - 1 else i + 1
            elif form == "wide":                       # two columns: not the idiom
                end = i + 2
            elif form == "axis0":                      # rows, not columns: not the idiom
                axis = 0
            inits += [numpy_helper.from_array(np.array([start], np.int64), f"s{i}"),
                      numpy_helper.from_array(np.array([end], np.int64), f"e{i}"),
                      numpy_helper.from_array(np.array([axis], np.int64), f"a{i}"),
                      numpy_helper.from_array(np.array([1], np.int64), f"q{i}")]
            nodes += [h.make_node("Slice", ["t", f"s{i}", f"e{i}", f"a{i}"], [f"col{i}"], name=f"slice{i}"),
                      h.make_node("Squeeze", [f"col{i}", f"q{i}"], [f"y{i}"], name=f"squeeze{i}")]
            wide = form in ("wide", "axis0")
            if wide:
                # Squeeze(axes=[1]) of a 2-wide slice is invalid; keep the slice itself.
                nodes.pop()
                outputs.append(_value_info(f"col{i}", T.INT64, [None, None]))
            else:
                outputs.append(_value_info(f"y{i}", T.INT64, [None]))
        what = f"NonZero(x) -> Transpose -> Slice/Squeeze columns {columns}{' (t is an output)' if t_out else ''}"
    elif kind == "split_columns":
        nodes.append(h.make_node("Transpose", ["nz"], ["t"], name="transpose", perm=[1, 0]))
        inits += [numpy_helper.from_array(np.array([1] * rank, np.int64), "split"),
                  numpy_helper.from_array(np.array([1], np.int64), "axes")]
        nodes.append(h.make_node("Split", ["t", "split"], [f"c{i}" for i in range(rank)], name="split", axis=1))
        squeezed = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
        for i in range(rank):
            if squeezed[i]:
                nodes.append(h.make_node("Squeeze", [f"c{i}", "axes"], [f"y{i}"], name=f"squeeze{i}"))
                outputs.append(_value_info(f"y{i}", T.INT64, [None]))
            else:                                       # a column left 2-D: not the idiom
                outputs.append(_value_info(f"c{i}", T.INT64, [None, None]))
        what = f"NonZero(x) -> Transpose -> Split -> Squeeze {squeezed}"
    elif kind == "row_takers":
        what = draw(row_takers(rank, nodes, inits, outputs))
    else:
        # x[mask]: Greater(x, threshold) -> NonZero -> Transpose -> GatherND(x, idx)
        in_type = draw(st.sampled_from([T.FLOAT, T.FLOAT16, T.DOUBLE, T.INT32, T.INT64, T.INT8, T.UINT8]))
        x = draw(arrays(numpy_type(in_type), shape))
        threshold = _scalar_of(numpy_type(in_type), draw(element_bits(numpy_type(in_type))))
        nodes = [h.make_node("Greater", ["x", "threshold"], ["mask"], name="greater"),
                 h.make_node("NonZero", ["mask"], ["nz"], name="nonzero"),
                 h.make_node("Transpose", ["nz"], ["idx"], name="transpose", perm=[1, 0]),
                 h.make_node("GatherND", ["x", "idx"], ["y"], name="gather")]
        outputs.append(_value_info("y", in_type, [None]))
        if draw(st.booleans()):
            outputs.append(_value_info("idx", T.INT64, [None, None]))
        extra_inputs.append(_value_info("threshold", in_type, []))
        feeds_extra["threshold"] = threshold
        what = "GatherND(x, Transpose(NonZero(Greater(x, threshold))))"
    if nz_out:
        outputs.append(_value_info("nz", T.INT64, [None, None]))
        what += " (nz is an output)"
    what = f"{what}; x: {onnx_type_name(in_type)} {list(shape)} declared {how}"
    graph_inputs = [_value_info("x", in_type, declared_shape(shape, how))] + extra_inputs
    model = graph_model(nodes, graph_inputs, outputs, opset=13)
    if inits:
        model.graph.initializer.extend(inits)
    return Case(what, model, {"x": x, **feeds_extra}, draw(level), {"x": draw(LAYOUTS)})


# -- diagonal idioms -----------------------------------------------------------------------------

def _draw_trilu_k(draw, rows: int, cols: int, data: str, inputs: list, inits: list, feeds: dict):
    """Trilu's k: absent, fed at run time, or a constant; returns (k, how, Trilu's inputs)."""
    k_how = draw(st.sampled_from(["absent", "fed", "constant"]))
    # (onnx.reference's Trilu overflows for |k| near 2**63: numpy's tri computes M - k.)
    k = min(max(draw(ks_for(rows, cols)), -(2**62)), 2**62) if k_how != "absent" else None
    if k_how == "fed":
        inputs.append(_value_info("k", T.INT64, []))
        feeds["k"] = np.array(k, np.int64)
    elif k_how == "constant":
        inits.append(numpy_helper.from_array(np.array(k, np.int64), "k"))
    return k, k_how, [data] + (["k"] if k_how != "absent" else [])


def _shape_source(draw, dims: "tuple[int, ...]", name: str = "shape"):
    """The int64 shape tensor: a feed, or an initializer (a compile-time constant)."""
    value = np.array(dims, np.int64)
    if draw(st.booleans()):
        return [_value_info(name, T.INT64, [len(dims)])], [], {name: value}, "fed"
    return [], [numpy_helper.from_array(value, name)], {}, "constant"


@st.composite
def _fill_attr(draw):
    """ConstantOfShape's value attribute: absent (float 0), or a one-element tensor of any type."""
    if draw(st.integers(0, 4)) == 0:
        return None, T.FLOAT, "absent"
    fill_type = draw(onnx_types)
    value = _scalar_of(numpy_type(fill_type), draw(element_bits(numpy_type(fill_type))))
    tensor = numpy_helper.from_array(value.reshape(1), "value")
    return tensor, fill_type, repr(value)


def _array_words(a: np.ndarray) -> str:
    if a.dtype.kind == "f":
        return f"np.array({a.tolist()!r}, np.{a.dtype}) [bits {a.reshape(-1).view(_bits_dtype(a.dtype)).tolist()}]"
    return f"np.array({a.tolist()!r}, np.{a.dtype})"


@st.composite
def _expand_target(draw, eye: "tuple[int, int]") -> "tuple[int, ...]":
    """An Expand target that broadcasts with a rows x cols eye: leading batch dimensions, 1s
    where the eye supplies the size, fewer dimensions, or (near-miss) one that stretches a
    size-1 side of the eye."""
    rows, cols = eye
    last = [draw(st.sampled_from([rows, 1])), draw(st.sampled_from([cols, 1]))]
    if rows == 1 and draw(st.booleans()):
        last[0] = draw(st.integers(2, 4))
    if cols == 1 and draw(st.booleans()):
        last[1] = draw(st.integers(2, 4))
    batch = draw(st.lists(st.integers(1, 2), max_size=2))
    target = batch + last
    if not batch and draw(st.integers(0, 3)) == 0:
        target = last[1:]
    return tuple(target)


# Range element types for torch.eye's pattern (the exporter uses int64; the others are near-misses).
RANGE_TYPES = [T.INT64, T.INT64, T.INT32, T.FLOAT, T.DOUBLE]


@st.composite
def diagonal_idiom_cases(draw, level=levels) -> Case:
    kind = draw(st.sampled_from(["eyelike_of_fill", "eye_from_ranges", "trilu_of_fill", "trilu_of_expand",
                                 "constant_band"]))
    lv = draw(level)
    if kind == "eyelike_of_fill":
        rows, cols = draw(shapes(min_rank=2, max_rank=2, max_dim=20))
        inputs, inits, feeds, src = _shape_source(draw, (rows, cols))
        fill, fill_type, fill_words = draw(_fill_attr())
        dtype = draw(st.one_of(st.none(), onnx_types))
        k = draw(st.one_of(st.none(), ks_for(rows, cols)))
        attrs = {} if fill is None else {"value": fill}
        eye_attrs = {**({} if k is None else {"k": k}), **({} if dtype is None else {"dtype": dtype})}
        nodes = [h.make_node("ConstantOfShape", ["shape"], ["fill"], name="fill", **attrs),
                 h.make_node("EyeLike", ["fill"], ["y"], name="eyelike", **eye_attrs)]
        outputs = [_value_info("y", fill_type if dtype is None else dtype, [None, None])]
        if draw(st.booleans()):
            outputs.append(_value_info("fill", fill_type, [None, None]))
        what = (f"EyeLike(ConstantOfShape(shape={[rows, cols]} {src}, value={fill_words}), k={k}, "
                f"dtype={None if dtype is None else onnx_type_name(dtype)}) outputs {[o.name for o in outputs]}")
        opset = 13
    elif kind == "eye_from_ranges":
        # torch.eye(n, m) from the dynamo exporter, and near-misses of it.
        range_type = draw(st.sampled_from(RANGE_TYPES))
        dt = numpy_type(range_type)
        whole = st.integers(-2, 12)
        if dt.kind == "f":
            number = st.one_of(whole, st.sampled_from([0.5, 2.5, 3.999, -0.5, 1.5, 0.25]))
            start = draw(st.one_of(st.just(0), st.sampled_from([0.5, -0.0, 1])))
            delta = draw(st.one_of(st.just(1), st.sampled_from([1.5, 0.5, 2])))
        else:
            number = whole
            start = draw(st.one_of(st.just(0), st.sampled_from([1, -1])))
            delta = draw(st.one_of(st.just(1), st.sampled_from([2, -1])))
        n = draw(number)
        square = draw(st.booleans())
        m = n if square else draw(number)
        inits = [numpy_helper.from_array(np.array(start, dt), "start"),
                 numpy_helper.from_array(np.array(delta, dt), "delta"),
                 numpy_helper.from_array(np.array([draw(st.sampled_from([-1, 1]))], np.int64), "axes")]
        inputs, feeds = [], {}
        limits_fed = draw(st.booleans())
        for name, value in (("n", n), ("m", m)):
            if name == "m" and square:
                continue
            if limits_fed:
                inputs.append(_value_info(name, range_type, []))
                feeds[name] = np.array(value, dt)
            else:
                inits.append(numpy_helper.from_array(np.array(value, dt), name))
        cols_range = "rows" if square else "cols"
        nodes = [h.make_node("Range", ["start", "n", "delta"], ["rows"], name="range_rows")]
        if not square:
            nodes.append(h.make_node("Range", ["start", "m", "delta"], ["cols"], name="range_cols"))
        nodes.append(h.make_node("Unsqueeze", ["rows", "axes"], ["column"], name="unsqueeze"))
        operands = ["column", cols_range] if draw(st.booleans()) else [cols_range, "column"]
        nodes.append(h.make_node("Equal", operands, ["eq"], name="equal"))
        to = draw(st.one_of(st.none(), onnx_types))
        if to is None:
            last, last_type = "eq", T.BOOL
        else:
            nodes.append(h.make_node("Cast", ["eq"], ["y"], name="cast", to=to))
            last, last_type = "y", to
        outputs = []
        if to is not None and draw(st.integers(0, 4)) == 0:
            outputs.append(_value_info("eq", T.BOOL, [None, None]))
        expand_words, out_rank = "", 2
        if draw(st.booleans()):
            # Batched eye: Expand(eye, target); a target that stretches the eye is a near-miss.
            rows_len = len(np.arange(start, n, delta, dtype=dt))
            cols_len = len(np.arange(start, m, delta, dtype=dt))
            target = draw(_expand_target((rows_len, cols_len)))
            nodes.append(h.make_node("Expand", [last, "target"], ["batched"], name="expand"))
            t_inputs, t_inits, t_feeds, t_src = _shape_source(draw, target, "target")
            inputs += t_inputs
            inits += t_inits
            feeds.update(t_feeds)
            last, out_rank = "batched", max(2, len(target))
            expand_words = f" -> Expand(target={list(target)} {t_src})"
        outputs.insert(0, _value_info(last, last_type, [None] * out_rank))
        what = (f"Cast(Equal({', '.join(operands)}), to={None if to is None else onnx_type_name(to)}) over "
                f"Range({start}, n={n}, {delta}){'' if square else f' and Range({start}, m={m}, {delta})'} "
                f"of {onnx_type_name(range_type)}, limits {'fed' if limits_fed else 'constant'}{expand_words}, "
                f"outputs {[o.name for o in outputs]}")
        opset = 13
    elif kind == "trilu_of_expand":
        # Trilu(Expand(c, target), k) with c a constant of one repeated bit pattern (causal
        # masks spelled with Expand); near-misses: one element of c differs.
        elem = draw(onnx_types)
        dt = numpy_type(elem)
        dims = draw(shapes(min_rank=2, max_rank=4, max_dim=8))
        rows, cols = dims[-2:]
        c_shape = draw(st.sampled_from([(), (1,), (cols,), (1, cols), (rows, 1), (1, 1)]))
        value = _scalar_of(dt, draw(element_bits(dt)))
        c = np.full(c_shape, value, dt)
        if c.size > 1 and draw(st.integers(0, 3)) == 0:
            c.reshape(-1)[draw(st.integers(0, c.size - 1))] = _scalar_of(dt, draw(element_bits(dt)))
        # The target may leave 1 where c supplies the size.
        target = list(dims)
        if len(c_shape) >= 1 and c_shape[-1] == cols and draw(st.booleans()):
            target[-1] = 1
        if len(c_shape) == 2 and c_shape[0] == rows and draw(st.booleans()):
            target[-2] = 1
        inputs, inits, feeds, src = _shape_source(draw, tuple(target), "target")
        inits.append(numpy_helper.from_array(c, "c"))
        upper = draw(st.sampled_from([None, 0, 1]))
        k, k_how, trilu_inputs = _draw_trilu_k(draw, rows, cols, "filled", inputs, inits, feeds)
        nodes = [h.make_node("Expand", ["c", "target"], ["filled"], name="expand"),
                 h.make_node("Trilu", trilu_inputs, ["y"], name="trilu",
                             **({} if upper is None else {"upper": upper}))]
        outputs = [_value_info("y", elem, [None] * len(dims))]
        what = (f"Trilu(Expand(c={_array_words(c)}, target={target} {src}), k={k} {k_how}, upper={upper})")
        opset = 14
    elif kind == "trilu_of_fill":
        dims = draw(shapes(min_rank=2, max_rank=4, max_dim=10))
        inputs, inits, feeds, src = _shape_source(draw, dims)
        fill, fill_type, fill_words = draw(_fill_attr())
        upper = draw(st.sampled_from([None, 0, 1]))
        rows, cols = dims[-2:]
        k, k_how, trilu_inputs = _draw_trilu_k(draw, rows, cols, "fill", inputs, inits, feeds)
        attrs = {} if fill is None else {"value": fill}
        nodes = [h.make_node("ConstantOfShape", ["shape"], ["fill"], name="fill", **attrs),
                 h.make_node("Trilu", trilu_inputs, ["y"], name="trilu",
                             **({} if upper is None else {"upper": upper}))]
        outputs = [_value_info("y", fill_type, [None] * len(dims))]
        what = (f"Trilu(ConstantOfShape(shape={list(dims)} {src}, value={fill_words}), k={k} {k_how}, "
                f"upper={upper})")
        opset = 14
    else:
        # A constant band matrix (generated instead of stored), as an initializer or a Constant.
        elem = draw(onnx_types)
        dt = numpy_type(elem)
        dims = draw(shapes(min_rank=2, max_rank=4, max_dim=8))
        rows, cols = dims[-2:]
        lo = draw(st.integers(-rows - 1, cols + 1))
        if draw(st.booleans()):
            hi = lo + 1                                 # one diagonal: DIAGONAL_MATRIX
            inverted = False
        else:
            hi = draw(st.integers(-rows - 1, cols + 1))
            inverted = draw(st.booleans())
        diag = np.arange(cols)[None, :] - np.arange(rows)[:, None]
        band = (diag >= min(lo, hi)) & (diag < max(lo, hi))
        if inverted:
            band = ~band
        value = _scalar_of(dt, draw(element_bits(dt)))
        zero = np.zeros((), dt)
        array = np.where(np.broadcast_to(band, dims), value, zero).astype(dt)
        if array.size and draw(st.integers(0, 4)) == 0:
            # Near-miss: one element changed (another value, or -0.0 for +0.0).
            flat = array.reshape(-1)
            flat[draw(st.integers(0, flat.size - 1))] = _scalar_of(dt, draw(element_bits(dt)))
        as_constant = draw(st.booleans())
        inputs, feeds, inits = [], {}, []
        if as_constant:
            nodes = [h.make_node("Constant", [], ["w"], name="constant",
                                 value=numpy_helper.from_array(array, "w"))]
        else:
            nodes = []
            inits.append(numpy_helper.from_array(array, "w"))
        # Identity hands the generated tensor to an ONNX region, as any consumer would.
        nodes.append(h.make_node("Identity", ["w"], ["y"], name="identity"))
        outputs = [_value_info("y", elem, [None] * len(dims))]
        what = (f"Identity of a constant {onnx_type_name(elem)} {list(dims)} "
                f"{'Constant node' if as_constant else 'initializer'} holding {value!r} "
                f"{'outside' if inverted else 'on'} diagonals [{min(lo, hi)}, {max(lo, hi)}) "
                f"(bits of w: {array.reshape(-1).view(_bits_dtype(dt)) if dt != np.bool_ else array.reshape(-1)})")
        opset = 14
    model = graph_model(nodes, inputs, outputs, opset=opset)
    if inits:
        model.graph.initializer.extend(inits)
    return Case(what, model, feeds, lv)


def idiom_cases(level=levels) -> st.SearchStrategy[Case]:
    return st.one_of(nonzero_idiom_cases(level), diagonal_idiom_cases(level))


# -- Range-comparison masks and general Trilu ------------------------------------------------------

MASK_OPS = ["Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"]
MASK_RANGE_TYPES = {T.INT64: np.int64, T.INT32: np.int32, T.FLOAT: np.float32}


@st.composite
def _mask_index(draw, name: str, axis: int, length: int, elem: int, nodes: list, inputs: list, feeds: dict,
                inits: list, cast: "int | None" = None):
    """`name` = Unsqueeze(Cast(Range(start, start + length, step) + offset)) along `axis` (-1 or -2), the Cast
    only when `cast` names a type (values may wrap in it: the lowering must then decline); near-misses:
    step 2, a vector offset. Returns a description."""
    dtype = MASK_RANGE_TYPES[elem]
    start = draw(st.integers(-4, 4))
    step = 2 if draw(st.integers(0, 9)) == 0 else 1
    for what, value in (("start", start), ("limit", start + length * step), ("step", step)):
        if what != "step" and draw(st.booleans()):
            inputs.append(_value_info(f"{name}_{what}", elem, []))
            feeds[f"{name}_{what}"] = np.array(value, dtype)
        else:
            inits.append(numpy_helper.from_array(np.array(value, dtype), f"{name}_{what}"))
    nodes.append(h.make_node("Range", [f"{name}_start", f"{name}_limit", f"{name}_step"], [f"{name}_r"],
                             name=f"{name}_range"))
    index = f"{name}_r"
    offset_kind = draw(st.sampled_from(["none", "constant", "fed", "vector"]))
    words = f"Range({start}, {start + length * step}, {step})"
    if offset_kind != "none":
        value = draw(st.integers(-6, 6))
        off = np.array(value, dtype) if offset_kind != "vector" else np.arange(length, dtype=dtype) + value
        if offset_kind == "fed":
            inputs.append(_value_info(f"{name}_off", elem, []))
            feeds[f"{name}_off"] = off
        else:
            inits.append(numpy_helper.from_array(off, f"{name}_off"))
        op = draw(st.sampled_from(["Add", "Sub"]))
        nodes.append(h.make_node(op, [index, f"{name}_off"], [f"{name}_o"], name=f"{name}_offset"))
        index = f"{name}_o"
        words += f" {op} {offset_kind} {off.tolist()}"
    if cast is not None:
        nodes.append(h.make_node("Cast", [index], [f"{name}_cast"], name=f"{name}_cast", to=cast))
        index = f"{name}_cast"
        words += f" as {onnx_type_name(cast)}"
    inits.append(numpy_helper.from_array(np.array([-1 if axis == -2 else 0], np.int64), f"{name}_axes"))
    nodes.append(h.make_node("Unsqueeze", [index, f"{name}_axes"], [name], name=f"{name}_unsqueeze"))
    return f"{words} along axis {axis}"


@st.composite
def mask_idiom_cases(draw, level=levels) -> Case:
    """A comparison of a column and a row index (or, near-miss, two of one axis), maybe And-ed with a
    second (a window), wrapped in Not / Or, Cast; or Trilu over an input of any type."""
    lv = draw(level)
    nodes, inputs, feeds, inits = [], [], {}, []
    if draw(st.integers(0, 3)) == 0:
        elem = draw(onnx_types)
        shape = draw(shapes(min_rank=2, max_rank=5, max_dim=6))
        x = draw(arrays(numpy_type(elem), shape))
        inputs.append(_value_info("x", elem, [None] * len(shape)))
        feeds["x"] = x
        k, k_how, names = _draw_trilu_k(draw, shape[-2], shape[-1], "x", inputs, inits, feeds)
        upper = draw(st.integers(0, 1))
        nodes.append(h.make_node("Trilu", names, ["y"], name="trilu", upper=upper))
        model = graph_model(nodes, inputs, [_value_info("y", elem, [None] * len(shape))], opset=14)
        model.graph.initializer.extend(inits)
        return Case(f"Trilu(x: {onnx_type_name(elem)} {list(shape)}, k={k} {k_how}, upper={upper})", model, feeds, lv)
    elem = draw(st.sampled_from(list(MASK_RANGE_TYPES)))
    words = []
    rows, cols = draw(st.integers(0, 7)), draw(st.integers(0, 7))

    def comparison(tag: str) -> str:
        col_axis = -2 if draw(st.integers(0, 9)) == 0 else -1         # near-miss: two row indices
        cast = draw(st.sampled_from([None, None, None, T.INT8, T.UINT8, T.INT16, T.INT32, T.INT64]))
        words.append(draw(_mask_index(f"{tag}c", col_axis, rows if col_axis == -2 else cols, elem, nodes, inputs,
                                      feeds, inits, cast)))
        words.append(draw(_mask_index(f"{tag}r", -2, rows, elem, nodes, inputs, feeds, inits, cast)))
        op = draw(st.sampled_from(MASK_OPS))
        operands = [f"{tag}c", f"{tag}r"] if draw(st.booleans()) else [f"{tag}r", f"{tag}c"]
        # Sub-then-compare: (a - b) OP bound. Square and not empty only: onnx's data propagation refuses
        # a Sub of constant [n, 1] and [1, m] indices when n != m (it broadcasts them as 1-D values).
        if rows == cols > 0 and draw(st.integers(0, 2)) == 0:
            index_type = elem if cast is None else cast
            bound = np.array(draw(st.integers(-5, 5)), onnx_to_numpy(index_type))
            if draw(st.booleans()):
                inputs.append(_value_info(f"{tag}_bound", index_type, []))
                feeds[f"{tag}_bound"] = bound
            else:
                inits.append(numpy_helper.from_array(bound, f"{tag}_bound"))
            nodes.append(h.make_node("Sub", operands, [f"{tag}_diff"], name=f"{tag}_diff"))
            words.append(f"{op}(Sub({', '.join(operands)}), {bound.item()})")
            operands = [f"{tag}_diff", f"{tag}_bound"] if draw(st.booleans()) else [f"{tag}_bound", f"{tag}_diff"]
        else:
            words.append(f"{op}({', '.join(operands)})")
        nodes.append(h.make_node(op, operands, [f"{tag}_cmp"], name=f"{tag}_cmp"))
        return f"{tag}_cmp"

    y = comparison("a")
    combine = draw(st.sampled_from(["none", "And", "Or", "Not"]))
    if combine in ("And", "Or"):
        other = comparison("b")
        nodes.append(h.make_node(combine, [y, other], ["combined"], name="combined"))
        y = "combined"
    elif combine == "Not":
        nodes.append(h.make_node("Not", [y], ["combined"], name="combined"))
        y = "combined"
    out_type = T.BOOL
    if draw(st.booleans()):
        out_type = draw(onnx_types)
        nodes.append(h.make_node("Cast", [y], ["cast"], name="cast", to=out_type))
        y = "cast"
    nodes.append(h.make_node("Identity", [y], ["y"], name="out"))
    model = graph_model(nodes, inputs, [_value_info("y", out_type, [None, None])], opset=14)
    model.graph.initializer.extend(inits)
    what = f"mask {combine} of {'; '.join(words)} as {onnx_type_name(out_type)}"
    return Case(what, model, feeds, lv)
