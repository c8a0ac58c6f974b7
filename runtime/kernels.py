"""One kernel per IR operator, following the DirectML pseudocode; all I/O goes through views."""
from __future__ import annotations

import numpy as np

from ir import DmlLowerError

POISON_WORD = 0xBAADF00D

# Float non-zero test on the bits: -0.0 is zero, NaN and denormals are not (no FPU involved).
_MAGNITUDE = {np.dtype(np.float16): (np.uint16, 0x7FFF), np.dtype(np.float32): (np.uint32, 0x7FFFFFFF),
              np.dtype(np.float64): (np.uint64, 0x7FFFFFFFFFFFFFFF)}


def upload(host: np.ndarray, dest: np.ndarray, name: str) -> None:
    host = np.asarray(host)
    if host.size != dest.size:
        raise DmlLowerError(f"input {name}: {host.size} elements do not fit a view of {dest.size}")
    if host.dtype == np.bool_:
        host = host.view(np.uint8)
    dest[...] = host.reshape(dest.shape)


def download(source: np.ndarray, dtype: np.dtype, shape: "tuple[int, ...]") -> np.ndarray:
    if source.size != int(np.prod(shape)):
        raise DmlLowerError(f"download of {source.size} elements into shape {list(shape)}")
    data = source.copy(order="C").reshape(shape)
    if dtype == np.bool_:
        return data != 0
    return data.view(dtype) if data.dtype.itemsize == np.dtype(dtype).itemsize else data.astype(dtype)


def clear(raw: np.ndarray, value: int) -> None:
    words = raw[: raw.size // 4 * 4].view(np.uint32)
    words.fill(value & 0xFFFFFFFF)
    if raw.size % 4:
        raw[raw.size // 4 * 4:] = np.frombuffer(np.uint32(value).tobytes(), np.uint8)[: raw.size % 4]


def nonzero_mask(values: np.ndarray) -> np.ndarray:
    flat = values.reshape(-1)
    if flat.dtype in _MAGNITUDE:
        bits, magnitude = _MAGNITUDE[flat.dtype]
        return (flat.view(bits) & bits(magnitude)) != 0
    return flat != 0


def nonzero_coordinates(x: np.ndarray, count: np.ndarray, coords: np.ndarray, strict: bool) -> None:
    """Rows of coords hold the trailing N coordinates of each non-zero element, ascending."""
    index = np.flatnonzero(nonzero_mask(x))
    n = coords.shape[-1]
    table = coords.reshape(coords.shape[-2:]) if coords.ndim == 2 else coords[(0,) * (coords.ndim - 2)]
    unravelled = np.unravel_index(index, x.shape) if x.ndim else ()
    for column in range(n):
        table[: index.size, column] = unravelled[x.ndim - n + column]
    if strict:
        table[index.size:, :] = POISON_WORD
    count[...] = index.size


def _scalar_for(dtype: np.dtype, value: float) -> np.generic:
    """DIAGONAL_MATRIX's FLOAT Value in the output type: integers truncate toward zero."""
    as_float = np.float32(value)
    if dtype.kind == "f":
        return dtype.type(as_float)
    if not np.isfinite(as_float):
        raise DmlLowerError(f"DIAGONAL_MATRIX Value {value} has no integer equivalent")
    bits = dtype.itemsize * 8
    wrapped = int(np.trunc(as_float)) % (1 << bits)
    if dtype.kind == "i" and wrapped >= 1 << (bits - 1):
        wrapped -= 1 << bits
    return dtype.type(wrapped)


def diagonal_matrix(out: np.ndarray, offset: int, value: float) -> None:
    """Output[.., y, x] = Value if y + Offset == x else 0."""
    height, width = out.shape[-2:]
    out.fill(0)
    rows = np.arange(max(0, -offset), max(0, min(height, width - offset)))
    if rows.size:
        out[..., rows, rows + offset] = _scalar_for(out.dtype, value)


def diagonal_matrix1(source: "np.ndarray | None", out: np.ndarray, value, begin: int, end: int) -> None:
    """Value where (End >= Begin) ^ (x - y >= Begin) ^ (x - y < End), else Input (or 0)."""
    height, width = out.shape[-2:]
    top_x = np.arange(width)[None, :] - np.arange(height)[:, None]
    use = (end >= begin) ^ (top_x >= begin) ^ (top_x < end)
    try:
        fill = np.array(value).astype(out.dtype, casting="same_kind" if out.dtype.kind == "f" else "unsafe")
        if out.dtype.kind in "iu" and int(fill) != value:
            raise OverflowError
    except (OverflowError, ValueError):
        raise DmlLowerError(f"DIAGONAL_MATRIX1 Value {value!r} does not fit {out.dtype}") from None
    base = source if source is not None else out.dtype.type(0)
    out[...] = np.where(use, fill, base)


def identity(source: np.ndarray, out: np.ndarray) -> None:
    out[...] = source
