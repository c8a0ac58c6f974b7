"""Feed validation and normalisation, and seeded random feeds."""
from __future__ import annotations

from typing import Mapping

import ml_dtypes
import numpy as np
import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.dtypes import onnx_to_numpy, onnx_type_name


def _declared(vi: onnx.ValueInfoProto) -> "tuple[int, tuple | None]":
    tensor = vi.type.tensor_type
    if not tensor.HasField("shape"):
        return tensor.elem_type, None
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim)
    return tensor.elem_type, dims


def normalise(array: np.ndarray) -> np.ndarray:
    """Native byte order, C order; read-only and Fortran-ordered arrays are copied, not refused."""
    array = np.asarray(array)
    if array.dtype.byteorder not in ("=", "|"):
        array = array.astype(array.dtype.newbyteorder("="))
    return array if array.flags.c_contiguous else array.copy(order="C")


def check_feeds(inputs: "list[onnx.ValueInfoProto]", feeds: Mapping[str, object],
                optional: "list[onnx.ValueInfoProto]" = ()) -> "dict[str, np.ndarray]":
    """One-line DmlLowerError for a missing, extra, mistyped or misshaped feed.

    `optional` inputs (initializers that are also graph inputs) may be fed to override them.
    """
    if not isinstance(feeds, Mapping):
        raise DmlLowerError(f"feeds must be a mapping of input name to array, not {type(feeds).__name__}")
    names = [vi.name for vi in inputs]
    allowed = names + [vi.name for vi in optional]
    extra = [n for n in feeds if n not in allowed]
    if extra:
        raise DmlLowerError(f"feed {extra[0]!r} is not an input of the model (inputs: {', '.join(names) or 'none'})")
    out = {}
    for vi in list(inputs) + [vi for vi in optional if vi.name in feeds]:
        if vi.name not in feeds:
            raise DmlLowerError(f"input {vi.name!r} is missing from the feeds")
        elem, dims = _declared(vi)
        try:
            array = normalise(feeds[vi.name])
        except (TypeError, ValueError) as exc:
            raise DmlLowerError(f"input {vi.name!r}: not an array ({exc})") from None
        expected = onnx_to_numpy(elem)
        if array.dtype.kind == "V" and array.dtype.fields is None and array.dtype.itemsize == expected.itemsize \
                and expected.kind == "V":
            array = array.view(expected)          # bfloat16 / float8 saved in an .npz reads back as raw bytes
        if array.dtype != expected:
            raise DmlLowerError(f"input {vi.name!r}: expected {onnx_type_name(elem)} ({expected}), "
                                f"got {array.dtype}")
        if dims is not None:
            if array.ndim != len(dims):
                raise DmlLowerError(f"input {vi.name!r}: expected rank {len(dims)} {list(dims)}, "
                                    f"got rank {array.ndim} {list(array.shape)}")
            for axis, (want, got) in enumerate(zip(dims, array.shape)):
                if isinstance(want, int) and want != got:
                    raise DmlLowerError(f"input {vi.name!r}: dimension {axis} must be {want}, got {got} "
                                        f"(shape {list(array.shape)})")
        out[vi.name] = array
    return out


def _is_float(dtype: np.dtype) -> bool:
    """numpy floats and ml_dtypes' (bfloat16, float8), which numpy reports as kind 'V'."""
    if dtype.kind == "f":
        return True
    try:
        ml_dtypes.finfo(dtype)
        return True
    except (ValueError, TypeError):
        return False


def random_feeds(inputs: "list[onnx.ValueInfoProto]", seed: int = 0, dim_default: int = 3,
                 dims: "Mapping[str, int] | None" = None, zero_fraction: "float | None" = None,
                 value_range: "tuple[float, float] | None" = None,
                 input_zero_fraction: "Mapping[str, float] | None" = None,
                 input_value_range: "Mapping[str, tuple[float, float]] | None" = None) -> "dict[str, np.ndarray]":
    """Seeded feeds with plenty of zeros (so NonZero has work) and a -0.0 among floats.

    Symbolic dimensions take their value from `dims` (by dim_param name), else `dim_default`.
    `zero_fraction` (default 0.5) is the share of elements forced to zero: 1 gives NonZero an
    empty input, 0 a full one (then no other element is zero). `value_range` (LO, HI) bounds the
    values: uniform for floats, integers in [LO, HI] for integer types. `input_zero_fraction` and
    `input_value_range` set them for single inputs by name, over the global ones.
    """
    names = [vi.name for vi in inputs]
    for what, per_input in (("zero fraction", input_zero_fraction), ("value range", input_value_range)):
        unknown = [n for n in per_input or {} if n not in names]
        if unknown:
            raise DmlLowerError(f"{what} for {unknown[0]!r}: the model has no such input "
                                f"(inputs: {', '.join(names) or 'none'})")
    for fraction in [zero_fraction, *(input_zero_fraction or {}).values()]:
        if fraction is not None and not 0.0 <= fraction <= 1.0:
            raise DmlLowerError(f"zero fraction {fraction} is not between 0 and 1")
    for bounds in [value_range, *(input_value_range or {}).values()]:
        if bounds is not None and bounds[0] > bounds[1]:
            raise DmlLowerError(f"value range {bounds[0]},{bounds[1]}: LO is above HI")
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    global_fraction, global_range = zero_fraction, value_range
    feeds = {}
    for vi in inputs:
        zero_fraction = (input_zero_fraction or {}).get(vi.name, global_fraction)
        value_range = (input_value_range or {}).get(vi.name, global_range)
        keep_share = 0.5 if zero_fraction is None else 1.0 - zero_fraction
        elem, declared = _declared(vi)
        shape = tuple(d if isinstance(d, int) else dims.get(d, dim_default) for d in (declared or ()))
        dtype = onnx_to_numpy(elem)
        keep = rng.random(shape) < keep_share
        if dtype == np.bool_:
            array = keep
        elif _is_float(dtype):
            values = rng.standard_normal(shape) if value_range is None else rng.uniform(*value_range, shape)
            array = (values * keep).astype(np.float32 if dtype.kind == "V" else dtype).astype(dtype)
            if array.size >= 4 and zero_fraction is None:
                flat = array.reshape(-1)
                flat[rng.integers(0, flat.size)] = -0.0
        else:
            info = np.iinfo(dtype)
            lo, hi = (max(info.min, -100), min(info.max, 100)) if value_range is None else (
                max(info.min, int(np.ceil(value_range[0]))), min(info.max, int(np.floor(value_range[1]))))
            if lo > hi:
                raise DmlLowerError(f"value range {value_range[0]},{value_range[1]} of input {vi.name!r} "
                                    f"holds no {dtype} value")
            array = (rng.integers(lo, hi, shape, endpoint=True) * keep).astype(dtype)
        if zero_fraction is not None and dtype != np.bool_:
            # Kept elements that came out zero anyway would make "full" less than full.
            filler = np.asarray(value_range[1] if value_range and value_range[1] != 0 else 1).astype(dtype)
            array[keep & (array == 0)] = filler
        feeds[vi.name] = np.asarray(array, dtype=dtype)
    return feeds
