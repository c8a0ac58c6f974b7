"""Feed validation and normalisation, and seeded random feeds."""
from __future__ import annotations

from typing import Mapping

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


def random_feeds(inputs: "list[onnx.ValueInfoProto]", seed: int = 0, dim_default: int = 3,
                 dims: "Mapping[str, int] | None" = None) -> "dict[str, np.ndarray]":
    """Seeded feeds with plenty of zeros (so NonZero has work) and a -0.0 among floats.

    Symbolic dimensions take their value from `dims` (by dim_param name), else `dim_default`.
    """
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    feeds = {}
    for vi in inputs:
        elem, declared = _declared(vi)
        shape = tuple(d if isinstance(d, int) else dims.get(d, dim_default) for d in (declared or ()))
        dtype = onnx_to_numpy(elem)
        keep = rng.random(shape) < 0.5
        if dtype == np.bool_:
            array = keep
        elif dtype.kind == "f":
            array = (rng.standard_normal(shape) * keep).astype(dtype)
            if array.size >= 4:
                flat = array.reshape(-1)
                flat[rng.integers(0, flat.size)] = -0.0
        else:
            info = np.iinfo(dtype)
            array = (rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True) * keep).astype(dtype)
        feeds[vi.name] = np.asarray(array, dtype=dtype)
    return feeds
