"""DmlKernels: the kernel set the interpreter runs DirectML operators with, one method per operator.

Two implement it: the numpy kernels (the module runtime.kernels itself) and the onnxruntime
stand-ins (runtime.ort_operators.OrtOperators). Every argument that is an array is a numpy view
through the operator's tensor descriptor (sizes and strides), into the emulator's buffers; a
kernel writes its outputs through those views and returns nothing. Host steps (upload,
download, clear) are not operators of a kernel set: the numpy emulator always does them.
"""
from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class DmlKernels(Protocol):
    def nonzero_coordinates(self, x: np.ndarray, count: np.ndarray, coords: np.ndarray, strict: bool) -> None:
        """DML_OPERATOR_NONZERO_COORDINATES: count = the number of non-zero elements of x; row i
        of coords = the trailing coords.shape[-1] coordinates of the i-th, ascending. Rows >= count
        are undefined (poisoned when strict)."""

    def diagonal_matrix(self, out: np.ndarray, offset: int, value: float) -> None:
        """DML_OPERATOR_DIAGONAL_MATRIX: out[.., y, x] = value (a FLOAT) if y + offset == x, else 0."""

    def diagonal_matrix1(self, source: "np.ndarray | None", out: np.ndarray, value: object,
                         begin: int, end: int) -> None:
        """DML_OPERATOR_DIAGONAL_MATRIX1: value (exactly typed) on the band begin <= x - y < end
        (inverted when end < begin), source (or 0 without one) elsewhere."""

    def identity(self, source: np.ndarray, out: np.ndarray,
                 release: "Callable[[int], None] | None" = None) -> None:
        """DML_OPERATOR_ELEMENT_WISE_IDENTITY: out = source. release(address), when given, may be
        called as the copy advances: no source element lies below address any more."""

    def bit_or(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        """DML_OPERATOR_ELEMENT_WISE_BIT_OR: out = a | b (out may alias an input)."""

    def bit_and(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        """DML_OPERATOR_ELEMENT_WISE_BIT_AND: out = a & b (out may alias an input)."""
