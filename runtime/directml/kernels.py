"""DirectMLKernels: the kernel set (runtime.kernel_set.DmlKernels) whose operators run on
Microsoft's DirectML.dll through the DirectML host, for the `dml` backend.

Each argument is the emulator's numpy view through the operator's tensor descriptor. What DirectML
is given is that view as a buffer binding: the descriptor's sizes and element strides, bound at the
view's first element, with TotalTensorSizeInBytes the bytes the view spans (rounded up to 4, as
DMLCalcBufferTensorSize does). Those bytes go as they are (an output's too), and the output's span
comes back whole: whatever DirectML writes or leaves between the view's elements lands in the
emulator's buffer as it would on the device."""
from __future__ import annotations


import struct
from typing import Callable, Sequence

import numpy as np

from onnx_dml_lowering.ir import TensorDesc

from .. import kernels as numpy_kernels
from .dml_host import DmlHost, data_type_of, shared_host


def _round4(n: int) -> int:
    return (n + 3) // 4 * 4


class _Bound:
    """One view as a DirectML buffer binding: its descriptor and the bytes it spans."""

    def __init__(self, view: np.ndarray) -> None:
        itemsize = view.itemsize
        shape = view.shape or (1,)
        strides = view.strides or (itemsize,)
        span = sum((n - 1) * s for n, s in zip(shape, strides)) + itemsize
        packed = view.ndim > 0 and view.flags.c_contiguous
        self.raw = np.lib.stride_tricks.as_strided(view, shape=(span // itemsize,), strides=(itemsize,)).view(np.uint8)
        self.desc = TensorDesc(data_type_of(view.dtype), tuple(int(n) for n in shape),
                               None if packed else tuple(int(s) // itemsize for s in strides),
                               total_size=_round4(span))

    def data(self) -> bytes:
        return self.raw.tobytes() + bytes(self.desc.total_bytes - self.raw.size)

    def write_back(self, returned: bytes) -> None:
        self.raw[...] = np.frombuffer(returned, np.uint8, count=self.raw.size)


def diagonal_fields(offset: int, value: float) -> bytes:
    """DML_DIAGONAL_MATRIX_OPERATOR_DESC's Offset (INT) and Value (FLOAT)."""
    return struct.pack("<i", offset) + np.float32(value).tobytes()


def diagonal1_fields(dtype: np.dtype, value: object, begin: int, end: int) -> bytes:
    """DML_DIAGONAL_MATRIX1_OPERATOR_DESC's ValueDataType, Value (DML_SCALAR_UNION), DiagonalFillBegin / End."""
    fill = numpy_kernels.diagonal1_fill(np.dtype(dtype), value).tobytes()
    return struct.pack("<I", int(data_type_of(dtype))) + fill.ljust(8, b"\0") + struct.pack("<ii", begin, end)


class DirectMLKernels:
    """The kernel set of the `dml` backend (one host per process: shared_host)."""

    def __init__(self, host: "DmlHost | None" = None) -> None:
        self._host = host
        self.operators_run = 0

    @property
    def host(self) -> DmlHost:
        if self._host is None:
            self._host = shared_host()
        return self._host

    def _run(self, operator: str, views: "Sequence[np.ndarray | None]", outputs: int, fields: bytes = b"") -> None:
        bound = [_Bound(v) if v is not None else None for v in views]
        executed = self.host.execute(operator, [b.desc if b else None for b in bound], fields,
                                     [b.data() if b else None for b in bound])
        for b, returned in zip(bound[len(bound) - outputs:], executed.outputs):
            if b is not None:
                b.write_back(returned)
        self.operators_run += 1

    def nonzero_coordinates(self, x: np.ndarray, count: np.ndarray, coords: np.ndarray, strict: bool) -> None:
        self._run("NONZERO_COORDINATES", [x, count, coords], 2)
        if strict:       # rows past the count are undefined: poisoned as the emulator does
            table = coords if coords.ndim == 2 else coords[(0,) * (coords.ndim - 2)]
            table[int(count.reshape(-1)[0]):, :] = numpy_kernels.POISON_WORD

    def diagonal_matrix(self, out: np.ndarray, offset: int, value: float) -> None:
        self._run("DIAGONAL_MATRIX", [out], 1, diagonal_fields(offset, value))

    def diagonal_matrix1(self, source: "np.ndarray | None", out: np.ndarray, value: object,
                         begin: int, end: int) -> None:
        self._run("DIAGONAL_MATRIX1", [source, out], 1, diagonal1_fields(out.dtype, value, begin, end))

    def identity(self, source: np.ndarray, out: np.ndarray,
                 release: "Callable[[int], None] | None" = None) -> None:
        self._run("ELEMENT_WISE_IDENTITY", [source, out], 1)

    def bit_or(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._run("ELEMENT_WISE_BIT_OR", [a, b, out], 1)

    def bit_and(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._run("ELEMENT_WISE_BIT_AND", [a, b, out], 1)



