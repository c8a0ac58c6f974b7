"""One kernel per IR operator, following the DirectML pseudocode; all I/O goes through views.
This module is the numpy kernel set (runtime.kernel_set.DmlKernels), plus the host steps
upload, download and clear.

The kernels are vectorised numpy over the views. NONZERO_COORDINATES streams its input in blocks
that stay in cache: each block is tested, its non-zero positions found, and their coordinates
written straight into the strided coordinates view (no full-size mask or index tuple is built).
"""
from __future__ import annotations

from typing import Callable

import math

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError

POISON_WORD = 0xBAADF00D

# Float non-zero test on the bits: -0.0 is zero, NaN and denormals are not (no FPU involved).
_MAGNITUDE = {np.dtype(np.float16): (np.uint16, 0x7FFF), np.dtype(np.float32): (np.uint32, 0x7FFFFFFF),
              np.dtype(np.float64): (np.uint64, 0x7FFFFFFFFFFFFFFF)}

# Elements per NONZERO_COORDINATES block: its mask and index scratch stay in the L2 cache.
BLOCK = 1 << 20

# Denormals of both widths: a float `x != 0` is the bit test above unless the FPU flushes them.
_DENORMALS: "dict[np.dtype, np.ndarray]" = {np.dtype(np.float32): np.full(64, np.finfo(np.float32).smallest_subnormal, np.float32),
              np.dtype(np.float64): np.full(64, np.finfo(np.float64).smallest_subnormal, np.float64)}


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """a and b are the very same elements: one address, type and shape, both C-contiguous
    (strides on size-1 dimensions may differ and do not matter)."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.dtype == b.dtype and a.shape == b.shape
            and a.flags.c_contiguous and b.flags.c_contiguous)


def upload(host: np.ndarray, dest: np.ndarray, name: str) -> None:
    host = np.asarray(host)
    if host.dtype.itemsize != dest.dtype.itemsize and host.nbytes == dest.nbytes:
        host = np.ascontiguousarray(host).reshape(-1).view(dest.dtype)   # bytes as other words (64-bit split)
    if host.size != dest.size:
        raise DmlLowerError(f"input {name}: {host.size} elements do not fit a view of {dest.size}")
    if host.dtype == np.bool_:
        host = host.view(np.uint8)
    elif host.dtype.kind == "V" and host.dtype != dest.dtype and host.dtype.itemsize == dest.dtype.itemsize:
        host = host.view(dest.dtype)        # an ml_dtypes type (bfloat16) carried as its bits, never converted
    host = host.reshape(dest.shape)
    # A buffer bound to a host tensor is read-only: only then can dest be the host's memory.
    if not dest.flags.writeable and _same_memory(host, dest):
        return  # the emulator bound the buffer to the host tensor itself: nothing to copy
    dest[...] = host


def download(source: np.ndarray, dtype: np.dtype, shape: "tuple[int, ...]", share: bool = False) -> np.ndarray:
    """The host tensor of `shape` and `dtype` read from view `source`: one pass over the data.

    share=True (the emulator's promise that nothing writes the buffer again) lets a packed view
    of the same element size become the host tensor without a copy.
    """
    if source.size != math.prod(shape):
        raise DmlLowerError(f"download of {source.size} elements into shape {list(shape)}")
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.not_equal(source, 0, order="C").reshape(shape)
    if source.dtype.itemsize != dtype.itemsize:
        return source.astype(dtype, order="C").reshape(shape)
    if share and source.flags.c_contiguous:
        data = source.reshape(shape)
    else:
        data = np.array(source, order="C", copy=True).reshape(shape)
    return data.view(dtype)


def _fill_words(raw: np.ndarray, value: int) -> None:
    """Every aligned 32-bit word of the byte array = value (a repeated byte becomes a memset)."""
    value &= 0xFFFFFFFF
    pattern = np.frombuffer(np.uint32(value).tobytes(), np.uint8)
    if (pattern == pattern[0]).all():
        raw.fill(pattern[0])
        return
    words = raw[: raw.size // 4 * 4].view(np.uint32)
    words.fill(value)
    if raw.size % 4:
        raw[raw.size // 4 * 4:] = pattern[: raw.size % 4]


def clear(raw: np.ndarray, value: int) -> None:
    _fill_words(raw, value)


def _fpu_keeps_denormals(dtype: np.dtype) -> bool:
    with np.errstate(all="ignore"):
        return bool(np.not_equal(_DENORMALS[dtype], 0).all())


class _BlockTest:
    """The non-zero test of one input type, writing a block's mask into preallocated scratch."""

    def __init__(self, dtype: np.dtype, block: int) -> None:
        self.mask = np.empty(block, np.bool_)
        self.bits = None
        if dtype in _MAGNITUDE and not (dtype in _DENORMALS and _fpu_keeps_denormals(dtype)):
            bits, magnitude = _MAGNITUDE[dtype]
            self.bits, self.magnitude = np.dtype(bits), bits(magnitude)
            self.scratch = np.empty(block, bits)

    def view(self, flat: np.ndarray) -> np.ndarray:
        return flat if self.bits is None else flat.view(self.bits)

    def __call__(self, block: np.ndarray) -> np.ndarray:
        mask = self.mask[: block.size]
        if self.bits is None:
            np.not_equal(block, 0, out=mask)            # float: -0.0 == 0, NaN != 0, denormal != 0
        else:
            scratch = self.scratch[: block.size]
            np.bitwise_and(block, self.magnitude, out=scratch)
            np.not_equal(scratch, 0, out=mask)
        return mask


def _write_coordinates(index: np.ndarray, sizes: "tuple[int, ...]", columns: "list[np.ndarray]",
                       begin: int, whole: bool, spare: np.ndarray, product: np.ndarray) -> None:
    """Rows begin.. of `columns` get the trailing coordinates of flat element indices `index`.

    sizes[c] is the input size of coordinate column c; `whole`: the columns cover every
    dimension that is not 1, so the first column is the remaining quotient itself. `index`,
    `spare` and `product` are scratch of at least index.size elements (all overwritten); the
    last two are None when no column needs a quotient (each is the index itself or zero).
    """
    k = index.size
    end = begin + k
    rest, spare = index, (spare[:k] if spare is not None else None)
    for c in range(len(columns) - 1, -1, -1):
        out = columns[c][begin:end]
        size = sizes[c]
        if c == 0 and whole:
            np.copyto(out, rest, casting="unsafe")
            return
        if size == 1:
            out.fill(0)
            continue
        if size & (size - 1) == 0:
            np.right_shift(rest, size.bit_length() - 1, out=spare)
            np.bitwise_and(rest, size - 1, out=out, casting="unsafe")
        else:
            np.floor_divide(rest, size, out=spare)
            np.multiply(spare, size, out=product[:k])
            np.subtract(rest, product[:k], out=out, casting="unsafe")
        rest, spare = spare, rest


def _scan(test: _BlockTest, flat: np.ndarray, block: int, n: int, sizes: "tuple[int, ...]",
          columns: "list[np.ndarray]", whole: bool, scratch: tuple) -> int:
    """Test `flat` block by block, writing each block's coordinates; returns the non-zero count."""
    values = test.view(flat)
    total = 0
    for start in range(0, flat.size, block):
        index = np.flatnonzero(test(values[start:start + block]))
        if not index.size:
            continue
        if n:
            if start:
                index += start
            _write_coordinates(index, sizes, columns, total, whole, *scratch)
        total += index.size
    return total


def nonzero_coordinates(x: np.ndarray, count: np.ndarray, coords: np.ndarray, strict: bool) -> None:
    """Rows of coords hold the trailing N coordinates of each non-zero element, ascending.

    Rows >= count are undefined: left as they are, or poisoned in strict mode.
    """
    n = coords.shape[-1]
    table = coords if coords.ndim == 2 else coords[(0,) * (coords.ndim - 2)]
    columns = [table[:, c] for c in range(n)]
    shape = x.shape
    sizes = tuple(int(s) for s in shape[len(shape) - n:]) if n else ()
    whole = math.prod(shape[: len(shape) - n]) == 1
    flat = x.reshape(-1)
    block = min(BLOCK, flat.size)
    test = _BlockTest(flat.dtype, block)
    # Scratch for the quotients, unless every column is a copy of the index or all zero.
    scratch: "tuple[np.ndarray | None, np.ndarray | None]"
    if any(sizes[c] != 1 for c in range(n) if c or not whole):
        scratch = (np.empty(block, np.int64), np.empty(block, np.int64))
    else:
        scratch = (None, None)
    if flat.dtype.kind in "biu":        # integer and bool tests raise no floating-point error
        total = _scan(test, flat, block, n, sizes, columns, whole, scratch)
    else:
        with np.errstate(all="ignore"):
            total = _scan(test, flat, block, n, sizes, columns, whole, scratch)
    if strict:
        table[total:, :] = POISON_WORD
    count[...] = total


def _truncate(x: float, bits: int) -> int:
    """x86's truncating float-to-integer conversion of `bits` (cvttss2si): NaN, infinities and values outside
    [-2^(bits-1), 2^(bits-1)) give the 'integer indefinite' -2^(bits-1)."""
    if not math.isfinite(x) or not -(2.0 ** (bits - 1)) <= math.trunc(x) < 2.0 ** (bits - 1):
        return -(1 << (bits - 1))
    return math.trunc(x)


def scalar_for(dtype: np.dtype, value: float) -> np.generic:
    """DIAGONAL_MATRIX's FLOAT Value in the output type, as DirectML 1.15.4 writes it (measured bit
    for bit on DirectML.dll: tests/runtime/directml/test_directml_grid.py). Integers truncate toward
    zero through a 32-bit conversion (8-, 16- and 32-bit signed, 8- and 16-bit unsigned) or a 64-bit
    one (UINT32, INT64; UINT64 from 2^63 up converts Value - 2^63 and sets the top bit), then keep
    the low bits; NaN and values outside the conversion's range give its 'integer indefinite'
    (the lowest value). Out-of-range Values are a device's choice (this is lavapipe's x86 one); no
    lowering emits them (EyeLike's is 1.0)."""
    as_float = np.float32(value)
    if dtype.kind == "f":
        return dtype.type(as_float)
    x, bits = float(as_float), dtype.itemsize * 8
    if bits == 64 and dtype.kind == "u" and not x < 2.0 ** 63:       # NaN takes this branch too
        integer = (_truncate(x - 2.0 ** 63, 64) % (1 << 64)) | (1 << 63)
    else:
        integer = _truncate(x, 64 if bits == 64 or (bits == 32 and dtype.kind == "u") else 32)
    wrapped = integer % (1 << bits)
    if dtype.kind == "i" and wrapped >= 1 << (bits - 1):
        wrapped -= 1 << bits
    return dtype.type(wrapped)


def _zero(out: np.ndarray) -> None:
    """out = 0 (all-zero bits for every type): a memset when out is one contiguous block."""
    if out.flags.c_contiguous:
        out.reshape(-1).view(np.uint8).fill(0)
    else:
        out.fill(0)


def _diagonal(out: np.ndarray, first: int, offset: int, length: int) -> np.ndarray:
    """A writable strided view of out[..., first + i, first + offset + i] for i < length."""
    corner = out[..., first:, first + offset:]
    return np.lib.stride_tricks.as_strided(
        corner, shape=out.shape[:-2] + (length,),
        strides=out.strides[:-2] + (out.strides[-2] + out.strides[-1],), writeable=True)


def diagonal_matrix(out: np.ndarray, offset: int, value: float) -> None:
    """Output[.., y, x] = Value if y + Offset == x else 0."""
    height, width = out.shape[-2:]
    _zero(out)
    first = max(0, -offset)
    length = max(0, min(height, width - offset)) - first
    if length > 0:
        _diagonal(out, first, offset, length)[...] = scalar_for(out.dtype, value)


def diagonal_matrix1(source: "np.ndarray | None", out: np.ndarray, value: object, begin: int, end: int) -> None:
    """Value where (End >= Begin) ^ (x - y >= Begin) ^ (x - y < End), else Input (or 0)."""
    height, width = out.shape[-2:]
    use = _band_test(height, width, begin, end)
    fill = diagonal1_fill(out.dtype, value)
    if source is None:
        _zero(out)
    elif not (source.ctypes.data == out.ctypes.data and source.strides == out.strides
              and source.shape == out.shape):
        np.copyto(out, source)           # numpy buffers a partial overlap; in place needs no copy
    if use is True or (use is not False and use.all()):
        out[...] = fill
    elif use is not False:
        np.copyto(out, fill, where=use)     # only the band is written: no full-size temporary


def diagonal1_fill(dtype: np.dtype, value: object) -> np.ndarray:
    """DIAGONAL_MATRIX1's Value as the output type holds it (its DML_SCALAR_UNION): exact for
    integers, one line when it does not fit."""
    try:
        fill = np.array(value).astype(dtype, casting="same_kind" if dtype.kind == "f" else "unsafe")
        if dtype.kind in "iu" and int(fill) != value:
            raise OverflowError
    except (OverflowError, ValueError):
        raise DmlLowerError(f"DIAGONAL_MATRIX1 Value {value!r} does not fit {dtype}") from None
    return fill


def _band_test(height: int, width: int, begin: int, end: int) -> "np.ndarray | bool":
    """DIAGONAL_MATRIX1's test (End >= Begin) ^ (x - y >= Begin) ^ (x - y < End) over [height,
    width], or one bool where it holds everywhere or nowhere. x - y spans -(height - 1) ..
    width - 1: a bound outside that span makes its comparison constant, so a causal mask's open
    bound costs nothing and no sum of a bound and an index can overflow."""
    if height == 0 or width == 0:
        return False
    low, high = -(height - 1), width - 1
    rows = np.arange(height, dtype=np.int64)[:, None]
    columns = np.arange(width, dtype=np.int64)[None, :]
    at_least = True if begin <= low else False if begin > high else columns >= rows + begin
    below = True if end > high else False if end <= low else columns < rows + end
    use = (end >= begin) ^ at_least ^ below       # bool ^ array stays an array, bool ^ bool a bool
    return bool(use) if isinstance(use, (bool, np.bool_)) else use


# Bytes per piece when a copy releases its source behind it.
SLAB = 4 << 20


def identity(source: np.ndarray, out: np.ndarray, release: "Callable[[int], None] | None" = None) -> None:
    """out = source through both views' strides.

    release(address), given by the emulator when the source's buffer dies with this copy, is
    called as the copy advances: no source element lies below `address` any more, so the
    memory under it may be returned to the OS (peak memory stays near one buffer, not two)."""
    if release is None or not _ascending(source):
        out[...] = source
        return
    _copy_releasing(source, out, release)


def _ascending(a: np.ndarray) -> bool:
    """Slabs along each axis occupy disjoint, ascending byte ranges (row-major-like order)."""
    extent = a.itemsize
    for size, stride in zip(reversed(a.shape), reversed(a.strides)):
        if size > 1:
            if stride < extent:
                return False
            extent = stride * (size - 1) + extent
    return True


def _copy_releasing(source: np.ndarray, out: np.ndarray, release: Callable[[int], None]) -> None:
    if source.ndim == 0 or source.nbytes <= SLAB:
        out[...] = source
        return
    rows = source.shape[0]
    per_row = max(1, source.nbytes // rows)
    step = max(1, SLAB // per_row)
    base = source.__array_interface__["data"][0]
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        if stop - start == 1 and source.ndim > 1:
            _copy_releasing(source[start], out[start], release)
        else:
            out[start:stop] = source[start:stop]
        if stop < rows:
            release(base + stop * source.strides[0])


def bit_or(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """Output may alias an input (DirectML allows in-place element-wise operators)."""
    np.bitwise_or(a, b, out=out)


def bit_and(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    np.bitwise_and(a, b, out=out)
