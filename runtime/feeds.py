"""Feed validation and normalisation, and seeded random feeds."""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import ml_dtypes
import numpy as np
import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import MemoryLimitExceeded
from onnx_dml_lowering.ir.dtypes import NUMPY_NATIVE, onnx_to_numpy, onnx_type_name

from .memory import default_limit, format_size

# float8e8m0 is a power of two (an exponent only): it has no zero and no sign.
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)


def describe_type(type_proto: onnx.TypeProto) -> str:
    """ONNX's spelling of a value's type: tensor(float), sequence(tensor(int64)), map(string, ...)."""
    kind = type_proto.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        elem = onnx_type_name(getattr(type_proto, kind).elem_type)
        return f"{'tensor' if kind == 'tensor_type' else 'sparse_tensor'}({elem})"
    if kind == "sequence_type":
        return f"sequence({describe_type(type_proto.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({describe_type(type_proto.optional_type.elem_type)})"
    if kind == "map_type":
        return f"map({onnx_type_name(type_proto.map_type.key_type)}, {describe_type(type_proto.map_type.value_type)})"
    return "undefined" if kind is None else kind


def input_dtype(vi: onnx.ValueInfoProto) -> np.dtype:
    """The numpy dtype a feed of graph input `vi` has, or one line naming the input and its ONNX
    type when it is not a tensor numpy can hold (sequence, optional, map, string, complex)."""
    if vi.type.WhichOneof("value") != "tensor_type":
        raise DmlLowerError(f"input {vi.name!r}: type {describe_type(vi.type)} is not supported: "
                            "only tensor inputs can be fed")
    try:
        return onnx_to_numpy(vi.type.tensor_type.elem_type)
    except DmlLowerError:
        raise DmlLowerError(f"input {vi.name!r}: type {describe_type(vi.type)} is not supported: "
                            f"{_why_not_fed(vi.type.tensor_type.elem_type)}") from None


def _why_not_fed(elem_type: int) -> str:
    # complex64 / complex128 have numpy types: what they lack is onnxruntime (its provider kernels
    # register no complex type), which every backend and the oracle's regions run on
    if elem_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128):
        return "onnxruntime does not support the type (its kernels register no complex tensors), so it is not fed"
    return "it has no numpy type to feed it with"


def _declared(vi: onnx.ValueInfoProto) -> "tuple[int, tuple | None]":
    input_dtype(vi)                               # a type that cannot be fed is named first
    tensor = vi.type.tensor_type
    if not tensor.HasField("shape"):
        return tensor.elem_type, None
    return tensor.elem_type, tuple(declared_dims(tensor.shape))


def declared_dims(shape: onnx.TensorShapeProto) -> "list[int | str | None]":
    """Each size a shape declares: a number, a name, or None (unknown). A negative size declares
    nothing (onnxruntime reads it as unknown, as some exporters mean -1)."""
    return [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else (d.dim_param or None) for d in shape.dim]


def normalise(array: object) -> np.ndarray:
    """Native byte order, C order; read-only and Fortran-ordered arrays are copied, not refused."""
    array = np.asarray(array)
    if array.dtype.byteorder not in ("=", "|"):
        array = array.astype(array.dtype.newbyteorder("="))
    return array if array.flags.c_contiguous else array.copy(order="C")


def check_feeds(inputs: "list[onnx.ValueInfoProto]", feeds: Mapping[str, object],
                optional: "Sequence[onnx.ValueInfoProto]" = ()) -> "dict[str, np.ndarray]":
    """One-line DmlLowerError for a missing, extra, mistyped or misshaped feed.

    `optional` inputs (initializers that are also graph inputs) may be fed to override them.
    """
    if not isinstance(feeds, Mapping):
        raise DmlLowerError(f"feeds must be a mapping of input name to array, not {type(feeds).__name__}")
    out = {}
    for vi, elem, dims in _named(inputs, feeds, optional):
        try:
            array = normalise(feeds[vi.name])
        except (TypeError, ValueError) as exc:
            raise DmlLowerError(f"input {vi.name!r}: not an array ({exc})") from None
        array = restore_dtype(array, onnx_to_numpy(elem))  # bfloat16 / float8 / 4-bit saved in an .npz: raw bytes
        _check_declared(vi, elem, dims, array.dtype, array.shape)
        out[vi.name] = array
    return out


def check_feed_headers(inputs: "list[onnx.ValueInfoProto]", headers: "Mapping[str, tuple[np.dtype, tuple]]",
                       optional: "Sequence[onnx.ValueInfoProto]" = ()) -> None:
    """check_feeds on each feed's dtype and shape alone (an .npz entry's header): the same one line,
    before a byte of data is read or inflated."""
    for vi, elem, dims in _named(inputs, headers, optional):
        dtype, shape = headers[vi.name]
        dtype = np.dtype(dtype)
        if dtype.byteorder not in ("=", "|"):
            dtype = dtype.newbyteorder("=")        # normalise converts the data alike
        _check_declared(vi, elem, dims, restored_dtype(dtype, onnx_to_numpy(elem)), tuple(shape))


def _named(inputs: "Sequence[onnx.ValueInfoProto]", feeds: Mapping, optional: "Sequence[onnx.ValueInfoProto]"
           ) -> "list[tuple[onnx.ValueInfoProto, int, tuple | None]]":
    """(input, declared element type, declared dims) for every input to check, in order; an extra
    feed, an input no feed can satisfy or a missing feed is one line."""
    names = [vi.name for vi in inputs]
    allowed = names + [vi.name for vi in optional]
    extra = [n for n in feeds if n not in allowed]
    if extra:
        raise DmlLowerError(f"feed {extra[0]!r} is not an input of the model (inputs: {', '.join(names) or 'none'})")
    out = []
    for vi in list(inputs) + [vi for vi in optional if vi.name in feeds]:
        elem, dims = _declared(vi)                 # an input no feed can satisfy is named as such
        if vi.name not in feeds:
            raise DmlLowerError(f"input {vi.name!r} is missing from the feeds")
        out.append((vi, elem, dims))
    return out


def _check_declared(vi: onnx.ValueInfoProto, elem: int, dims: "tuple | None", dtype: np.dtype,
                    shape: tuple) -> None:
    """A feed's dtype and shape against the input's declared type and fixed dims (dimension names
    are not enforced: dimension_notes)."""
    expected = onnx_to_numpy(elem)
    if dtype != expected:
        got = (f"raw {dtype.itemsize}-byte records ({dtype.str}, how np.savez keeps an "
               f"ml_dtypes array such as bfloat16)" if dtype.kind == "V" and dtype.names is None
               else str(dtype))
        named = onnx_type_name(elem)
        want = named if named == str(expected) else f"{named} ({expected})"
        raise DmlLowerError(f"input {vi.name!r}: expected {want}, got {got}")
    if dims is None:
        return
    if len(shape) != len(dims):
        raise DmlLowerError(f"input {vi.name!r}: expected rank {len(dims)} {list(dims)}, "
                            f"got rank {len(shape)} {list(shape)}")
    for axis, (want, got) in enumerate(zip(dims, shape)):
        if isinstance(want, int) and want != got:
            raise DmlLowerError(f"input {vi.name!r}: dimension {axis} must be {want}, got {got} "
                                f"(shape {list(shape)})")


def dimension_notes(inputs: "list[onnx.ValueInfoProto]", feeds: Mapping[str, np.ndarray]) -> "list[str]":
    """One line for each feed that gives a dimension name of the model another size than its first
    use. Exporters declare sizes that real use breaks (Optimum's merged decoders give attention_mask
    input_ids's `sequence_length`, then take past + new tokens in it); onnxruntime does not enforce
    the names, so neither do we: the feeds run as given, and the note says where they depart."""
    first: "dict[str, tuple[str, int, int]]" = {}        # dim_param -> (input, axis, size) first seen
    notes = []
    for vi in inputs:
        if vi.name not in feeds or vi.type.WhichOneof("value") != "tensor_type":
            continue
        shape = np.shape(feeds[vi.name])
        for axis, dim in enumerate(vi.type.tensor_type.shape.dim):
            if not dim.dim_param or axis >= len(shape):
                continue
            seen = first.setdefault(dim.dim_param, (vi.name, axis, shape[axis]))
            if seen[2] == shape[axis]:
                continue
            where = (f"input {vi.name!r} has {seen[2]} on axis {seen[1]} and {shape[axis]} on axis {axis}"
                     if seen[0] == vi.name else
                     f"input {seen[0]!r} has {seen[2]} (axis {seen[1]}), {vi.name!r} has {shape[axis]} (axis {axis})")
            notes.append(f"note: the model names these sizes both {dim.dim_param!r}, but {where}; run as fed, as "
                         "onnxruntime does (it does not enforce dimension names); if one size was meant, "
                         "feed them so")
    return notes


def with_defaults(feeds: "dict[str, np.ndarray]", optional: "list[onnx.ValueInfoProto]",
                  initializers: Mapping[str, np.ndarray]) -> "tuple[dict[str, np.ndarray], list[str]]":
    """Checked feeds completed with the initializer of every initializer-that-is-also-an-input not
    fed (its default), so every engine sees the same values; and the names that took the default."""
    defaulted = [vi.name for vi in optional if vi.name not in feeds and vi.name in initializers]
    out = dict(feeds)
    out.update({name: initializers[name] for name in defaulted})
    return out, defaulted


def restored_dtype(dtype: np.dtype, expected: np.dtype) -> np.dtype:
    """The dtype restore_dtype gives an array of `dtype`: raw void records of the declared ml_dtypes
    type's size are that type."""
    if dtype.kind == "V" and dtype.fields is None and dtype != expected \
            and dtype.itemsize == expected.itemsize and expected not in NUMPY_NATIVE:
        return expected
    return dtype


def restore_dtype(array: np.ndarray, expected: np.dtype) -> np.ndarray:
    """numpy writes ml_dtypes arrays (bfloat16, float8, int4, ...) to .npy as raw void records:
    given the declared type, such an array becomes that type again, bit for bit."""
    dtype = restored_dtype(array.dtype, expected)
    return array if dtype == array.dtype else array.view(dtype)


def with_declared_types(inputs: "Sequence[onnx.ValueInfoProto]", feeds: "Mapping[str, np.ndarray]") -> "dict[str, np.ndarray]":
    """Feeds read back from an .npz (or a script's raw records) with each input's declared
    bfloat16 / float8 / 4-bit type again, as soon as they are read: every view of them (the feeds
    line, JSON, the engines) then sees that type, not raw records ('|V2'). Anything else is left
    as it is, for check_feeds to judge."""
    types = {vi.name: vi.type.tensor_type.elem_type for vi in inputs}
    out = dict(feeds)
    for name, value in feeds.items():
        if types.get(name) and isinstance(value, np.ndarray):
            try:
                out[name] = restore_dtype(value, onnx_to_numpy(types[name]))
            except DmlLowerError:           # a type numpy has no dtype for: check_feeds says so
                pass
    return out


def restore_declared(types: Mapping, name: str, value: np.ndarray) -> np.ndarray:
    """A saved output (golden file, --load-outputs) with its declared type again: bfloat16 / float8
    / 4-bit ones read back as raw records. `types`: name -> TensorInfo of the compiled model."""
    info = types.get(name)
    if info is None or not getattr(info, "onnx_type", 0):
        return value
    try:
        return restore_dtype(value, onnx_to_numpy(info.onnx_type))
    except DmlLowerError:           # a type numpy has no dtype for: left as read
        return value




# Bytes numpy holds per element while drawing one random feed (float64 draws and the mask),
# besides the feed itself.
DRAW_BYTES_PER_ELEMENT = 17


def check_feed_sizes(inputs: "list[onnx.ValueInfoProto]", shapes: "Mapping[str, tuple]", limit: int,
                     drawn: bool = True) -> None:
    """Before anything is drawn: one line naming the input, its shape and the bytes when the
    feeds (plus numpy's temporaries for drawing the largest, when `drawn`) would exceed `limit`.
    Python integers, so a shape whose size numpy itself refuses (past 2^63 bytes) is named too."""
    total, largest, draw = 0, None, 0
    for vi in inputs:
        shape = shapes[vi.name]
        count = 1
        for d in shape:
            count *= int(d)
        size = count * input_dtype(vi).itemsize
        total += size
        if largest is None or size > largest[1]:
            largest = (vi.name, size, shape)
        draw = max(draw, count * DRAW_BYTES_PER_ELEMENT) if drawn else 0
    if largest is not None and total + draw > limit:
        name, size, shape = largest
        need = (f"the random feeds need {format_size(total + draw)} with numpy's draws" if drawn
                else f"the all-zero feeds need {format_size(total)}")
        hint = "use smaller --dim values or raise --memory-limit" if drawn else "use smaller --dim values"
        raise MemoryLimitExceeded(f"input {name!r} of shape {list(shape)} needs {size:,} bytes ({format_size(size)}); "
                            f"{need}, over the memory limit of {format_size(limit)} ({hint})")
    for vi in inputs:           # within the limit, yet empty (no bytes to count) or a limit past numpy's
        _check_indexable(vi, shapes[vi.name])


# numpy's largest array, in bytes: the product of the non-zero dimensions and the element size
# must fit its signed index type (else 'array is too big', whatever the array's zero elements)
NUMPY_MAX_BYTES = int(np.iinfo(np.intp).max)
# the widest element a feed is drawn through (float64 draws) or stored in (complex128)
_WIDEST_DRAW = 8


def _check_indexable(vi: onnx.ValueInfoProto, shape: tuple) -> None:
    """One line naming the input and the dimension past which its array (or a draw for it) has more
    bytes than numpy can index: an empty input (a 0 among its sizes) has no bytes for the memory
    limit to refuse, yet numpy refuses its shape."""
    width, size = max(input_dtype(vi).itemsize, _WIDEST_DRAW), 1
    names = _declared(vi)[1] or ()
    for axis, dim in enumerate(shape):
        size *= int(dim) or 1
        if size * width > NUMPY_MAX_BYTES:
            name = names[axis] if axis < len(names) and isinstance(names[axis], str) else None
            label = f"dimension {name!r} (axis {axis})" if name else f"axis {axis}"
            hint = f"give --dim {name} a smaller size" if name else "the model declares that size"
            raise DmlLowerError(
                f"input {vi.name!r} of shape {list(shape)}: {label} of size {int(dim):,} makes an array of "
                f"more than {NUMPY_MAX_BYTES:,} bytes (with its other non-zero sizes and {width}-byte "
                f"elements), more than numpy can index, even with no element: {hint}")


def feed_shapes(inputs: "list[onnx.ValueInfoProto]", dims: "Mapping[str, int] | None",
                dim_default: int) -> "dict[str, tuple]":
    """Each input's shape: symbolic dimensions from `dims` by name, else `dim_default`."""
    dims = dims or {}
    return {vi.name: tuple(d if isinstance(d, int) else dims.get(d, dim_default) for d in (_declared(vi)[1] or ()))
            for vi in inputs}


# The size random and zero feeds give a symbolic dimension --dim does not set.
DIM_DEFAULT = 3


def zero_feeds(inputs: "list[onnx.ValueInfoProto]", dims: "Mapping[str, int] | None" = None,
               dim_default: int = DIM_DEFAULT, memory_limit: "int | None" = None) -> "dict[str, np.ndarray]":
    """All-zero feeds at `dims` (others `dim_default`, as for random feeds), without drawing."""
    shapes = feed_shapes(inputs, dims, dim_default)
    check_feed_sizes(inputs, shapes, default_limit() if memory_limit is None else memory_limit, drawn=False)
    return {vi.name: np.zeros(shapes[vi.name], input_dtype(vi)) for vi in inputs}


def _is_float(dtype: np.dtype) -> bool:
    """numpy floats and ml_dtypes' (bfloat16, float8), which numpy reports as kind 'V'."""
    if dtype.kind == "f":
        return True
    try:
        ml_dtypes.finfo(dtype)
        return True
    except (ValueError, TypeError):
        return False


def range_problem(bounds: "tuple[float, float]") -> str:
    """Why (LO, HI) is no range to draw from ('' when it is one)."""
    if not all(math.isfinite(b) for b in bounds):
        return "LO and HI must be finite numbers"
    if bounds[0] > bounds[1]:
        return "LO is above HI"
    if not math.isfinite(bounds[1] - bounds[0]):
        return "HI - LO is past the largest double; give a narrower range"
    return ""


def random_feeds(inputs: "list[onnx.ValueInfoProto]", seed: int = 0, dim_default: int = DIM_DEFAULT,
                 dims: "Mapping[str, int] | None" = None, zero_fraction: "float | None" = None,
                 value_range: "tuple[float, float] | None" = None,
                 memory_limit: "int | None" = None,
                 input_zero_fraction: "Mapping[str, float] | None" = None,
                 input_value_range: "Mapping[str, tuple[float, float]] | None" = None) -> "dict[str, np.ndarray]":
    """Seeded feeds with plenty of zeros (so NonZero has work) and a -0.0 among floats.

    Symbolic dimensions take their value from `dims` (by dim_param name), else `dim_default`.
    Without a range, floats are standard normal and integers uniform in [-100, 100] (clipped to
    the type), half of the elements forced to zero and one float -0.0. `value_range` (LO, HI)
    bounds the values: uniform for floats, integers in [LO, HI] for integer types, and nothing
    outside it is fed (no forced zeros, no -0.0) unless a zero fraction is given too.
    `zero_fraction` is the share of elements forced to zero: 1 gives NonZero an empty input, 0 a
    full one (then no other element is zero); booleans are True with the share kept (default
    half), whatever the range. `input_zero_fraction` and
    `input_value_range` set them for single inputs by name, over the global ones. float8e8m0 has
    no zero and no sign: its feeds are powers of two (within the range) whatever the zero fraction.
    `memory_limit` (bytes; default three quarters of physical memory): feeds that would not fit
    are refused in one line before anything is drawn.
    """
    _check_feed_options([vi.name for vi in inputs], (zero_fraction, input_zero_fraction),
                        (value_range, input_value_range))
    rng = np.random.default_rng(seed)
    shapes = feed_shapes(inputs, dims, dim_default)
    check_feed_sizes(inputs, shapes, default_limit() if memory_limit is None else memory_limit)
    return {vi.name: _draw(vi, shapes[vi.name], rng, (input_zero_fraction or {}).get(vi.name, zero_fraction),
                           (input_value_range or {}).get(vi.name, value_range))
            for vi in inputs}


def _check_feed_options(names: "list[str]", fractions: tuple, ranges: tuple) -> None:
    """random_feeds' (global, per-input) zero fractions and value ranges: one line for a name no
    input has, a fraction outside [0, 1] or a range that is none."""
    (zero_fraction, input_zero_fraction), (value_range, input_value_range) = fractions, ranges
    for what, per_input in (("zero fraction", input_zero_fraction), ("value range", input_value_range)):
        unknown = [n for n in per_input or {} if n not in names]
        if unknown:
            raise DmlLowerError(f"{what} for {unknown[0]!r}: the model has no such input "
                                f"(inputs: {', '.join(names) or 'none'})")
    for fraction in [zero_fraction, *(input_zero_fraction or {}).values()]:
        if fraction is not None and not 0.0 <= fraction <= 1.0:
            raise DmlLowerError(f"zero fraction {fraction} is not between 0 and 1")
    for name, bounds in [(None, value_range), *(input_value_range or {}).items()]:
        if bounds is None:
            continue
        problem = range_problem(bounds)
        if problem:
            what = f"value range {bounds[0]},{bounds[1]}" + (f" for {name!r}" if name is not None else "")
            raise DmlLowerError(f"{what}: {problem}")


def _draw(vi: onnx.ValueInfoProto, shape: "tuple[int, ...]", rng: np.random.Generator, zero_fraction: "float | None",
          value_range: "tuple[float, float] | None") -> np.ndarray:
    """One input's random feed (random_feeds' rules), drawn from `rng` in the order it always was."""
    elem, _ = _declared(vi)
    dtype = onnx_to_numpy(elem)
    # an explicit range holds: zeros outside it only when a zero fraction asks for them too
    default_keep = 1.0 if value_range is not None and dtype != np.bool_ else 0.5
    keep_share = default_keep if zero_fraction is None else 1.0 - zero_fraction
    keep = np.asarray(rng.random(shape) < keep_share)      # 0-d too: numpy hands a scalar back
    if dtype == _E8M0:
        return _draw_e8m0(elem, dtype, shape, rng, value_range)
    if dtype == np.bool_:
        array = keep if value_range is None else _bools_within(vi.name, keep, value_range, zero_fraction is not None)
    elif _is_float(dtype):
        if value_range is not None:
            _within_float(vi.name, dtype, value_range)
        values = rng.standard_normal(shape) if value_range is None else rng.uniform(*value_range, shape)
        array = (values * keep).astype(np.float32 if dtype.kind == "V" else dtype).astype(dtype)
        if array.size >= 4 and zero_fraction is None and value_range is None:
            flat = array.reshape(-1)
            flat[rng.integers(0, flat.size)] = -0.0
    else:
        info = ml_dtypes.iinfo(dtype)
        lo, hi = (max(info.min, -100), min(info.max, 100)) if value_range is None else (
            max(info.min, int(np.ceil(value_range[0]))), min(info.max, int(np.floor(value_range[1]))))
        if lo > hi and value_range is not None:          # the default range always holds values
            raise DmlLowerError(f"value range {value_range[0]},{value_range[1]} of input {vi.name!r} "
                                f"holds no {dtype} value")
        wide = np.uint64 if hi > np.iinfo(np.int64).max else np.int64     # a uint64 range past int64's
        array = (rng.integers(lo, hi, shape, endpoint=True, dtype=wide) * keep).astype(dtype)
    if np.ndim(array) == 0:
        array = np.array(array, dtype=dtype)              # a writable 0-d array, not a numpy scalar
    if zero_fraction is not None and dtype != np.bool_:
        # Kept elements that came out zero anyway would make "full" less than full.
        filler = np.asarray(value_range[1] if value_range and value_range[1] != 0 else 1).astype(dtype)
        array[keep & (array == 0)] = filler
    return np.asarray(array, dtype=dtype)


def _within_float(name: str, dtype: np.dtype, value_range: "tuple[float, float]") -> None:
    """A float range past the type's largest finite value would feed infinities (and numpy's
    overflow warning), and one whose two ends round to one value outside it (1e-50,1e-46 in
    float32: both 0) would feed only that value: one line each, as an integer range holding no
    value of its type is."""
    lo, hi = value_range
    largest = float(ml_dtypes.finfo(dtype).max)
    if max(abs(lo), abs(hi)) > largest:
        raise DmlLowerError(f"value range {lo},{hi} of input {name!r} goes past the "
                            f"largest finite {dtype} ({largest:g}): its values would be infinite")
    store = np.float32 if dtype.kind == "V" else dtype          # as the draw rounds: through float32 for those
    ends = [float(np.asarray(end).astype(store).astype(dtype).astype(np.float64)) for end in (lo, hi)]
    if ends[0] == ends[1] and not lo <= ends[0] <= hi:
        raise DmlLowerError(f"value range {lo},{hi} of input {name!r} holds no {dtype} value: both ends "
                            f"round to {ends[0]:g}")


def _bools_within(name: str, keep: np.ndarray, value_range: "tuple[float, float]", zeros_asked: bool) -> np.ndarray:
    """Random bools whose values (0 and 1) lie in the range: both, True alone (False only where a
    zero fraction asks for it), False alone, or none (one line)."""
    lo, hi = value_range
    if lo > 1 or hi < 0 or (lo > 0 and hi < 1):
        raise DmlLowerError(f"value range {lo},{hi} of input {name!r} holds no bool value (0 or 1)")
    if lo > 0:
        return keep if zeros_asked else np.ones_like(keep)
    return np.zeros_like(keep) if hi < 1 else keep


def _draw_e8m0(elem: int, dtype: np.dtype, shape: "tuple[int, ...]", rng: np.random.Generator,
               value_range: "tuple[float, float] | None") -> np.ndarray:
    """float8e8m0 has no zero and no sign: powers of two within the range."""
    lo, hi = (2.0 ** -8, 2.0 ** 8) if value_range is None else value_range
    if hi <= 0:
        raise DmlLowerError(f"value range holds no {onnx_type_name(elem)} value (it has no zero and no sign)")
    low = int(np.ceil(np.log2(max(lo, float(ml_dtypes.finfo(dtype).tiny)))))
    high = min(int(np.floor(np.log2(hi))), 127)
    if low > high:
        raise DmlLowerError(f"value range holds no {onnx_type_name(elem)} value (only powers of two)")
    exponents = rng.integers(low, high, shape, endpoint=True)
    return np.asarray(np.exp2(exponents).astype(np.float32).astype(dtype))


def feed_summary(feeds: "Mapping[str, np.ndarray]") -> "dict[str, dict]":
    """What each feed holds, for the reports' feeds line and JSON: dtype, shape, the smallest and
    largest value (None when it has none; NaN / inf left out and counted in `nonfinite`), and how
    many elements are zero."""
    out = {}
    for name, value in feeds.items():
        array = np.asarray(value)
        entry = {"dtype": str(array.dtype), "shape": list(array.shape), "min": None, "max": None,
                 "zeros": None, "nonfinite": 0}
        if array.dtype.kind not in "biufV":        # strings, objects: no range to say
            out[name] = entry
            continue
        try:
            # in place for numpy's own types; ml_dtypes' (2 bytes at most) through a float32 copy
            numbers = array if array.dtype.kind in "biuf" else array.astype(np.float32)
        except (TypeError, ValueError):          # a record type that is no number
            out[name] = entry
            continue
        # over every element (a NaN or inf is no zero), before the non-finite ones leave the range
        entry["zeros"] = int(numbers.size - np.count_nonzero(numbers))
        if numbers.dtype.kind == "f":
            finite = np.isfinite(numbers)
            entry["nonfinite"] = int(numbers.size - np.count_nonzero(finite))
            numbers = numbers[finite] if entry["nonfinite"] else numbers
        if numbers.size:
            entry["min"], entry["max"] = numbers.min().item(), numbers.max().item()
        out[name] = entry
    return out
