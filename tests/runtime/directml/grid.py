"""The cases of the bit-exactness grid (test_directml_grid.py): one DirectML operator on tensor
descriptors and whole buffers, run by the emulator's numpy kernels and by DirectML.dll alike.

A case's buffers are the bytes DirectML is bound to, TotalTensorSizeInBytes each; an output's
starts as a pattern, so whatever either side leaves unwritten is compared too."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from onnx_dml_lowering.ir import DataType, DmlLowerError, TensorDesc
from onnx_dml_lowering.ir.feature_levels import ALL_LEVELS
from onnx_dml_lowering.ir.support import OPERATORS
from onnx_dml_lowering.runtime import kernels as K
from onnx_dml_lowering.runtime.directml.dml_host import DirectMLRefused, DmlHost, input_count
from onnx_dml_lowering.runtime.directml.kernels import diagonal1_fields, diagonal_fields

T = DataType
PATTERN = 0xA5          # an output buffer's bytes before the operator runs


def view(buffer: np.ndarray, desc: TensorDesc) -> np.ndarray:
    """The numpy view through `desc` over a byte buffer (as the emulator's bindings build it)."""
    dtype = desc.data_type.numpy
    words = buffer[: buffer.size // dtype.itemsize * dtype.itemsize].view(dtype)
    return np.lib.stride_tricks.as_strided(words, shape=desc.concrete_sizes(),
                                           strides=[s * dtype.itemsize for s in desc.effective_strides])


@dataclass
class Case:
    operator: str
    label: str
    tensors: "list[TensorDesc | None]"
    fields: bytes
    data: "list[bytes | None]"                        # every tensor's bytes (an output's: the pattern)
    emulate: "Callable[[list[np.ndarray | None]], None]"
    levels: "list[str]" = field(default_factory=list)     # the feature levels whose tables allow it

    def __post_init__(self) -> None:
        self.levels = allowed_levels(self.operator, self.tensors)

    def on_emulator(self) -> "list[bytes]":
        buffers = [None if d is None else np.frombuffer(bytearray(d) + bytes(8), np.uint8) for d in self.data]
        views = [None if b is None else view(b, t) for b, t in zip(buffers, self.tensors)]
        self.emulate(views)
        return [b[: t.total_bytes].tobytes() for b, t in zip(buffers[input_count(self.operator):], self.tensors[input_count(self.operator):])]

    def on_directml(self, host: DmlHost) -> "list[bytes]":
        return host.execute(self.operator, self.tensors, self.fields, self.data).outputs


def allowed_levels(operator: str, tensors: "list[TensorDesc | None]") -> "list[str]":
    """The feature levels at which the IR's tables take these descriptors for `operator`."""
    support, names = OPERATORS[operator], list(OPERATORS[operator].rows[0].tensors)
    levels = []
    for level in ALL_LEVELS:
        row = support.row(level)
        if row is None:
            continue
        ok = all(row.tensors[n].min_dims <= t.rank <= row.tensors[n].max_dims and t.data_type in row.tensors[n].types
                 for n, t in zip(names, tensors) if t is not None)
        if ok and row.same_dimension_count:
            ok = len({t.rank for t in tensors if t is not None}) == 1
        if ok:
            levels.append(level.name)
    return levels


def output(desc: TensorDesc) -> bytes:
    return bytes([PATTERN]) * desc.total_bytes


def packed(dtype: DataType, sizes: "tuple[int, ...]", strides=None, total=None) -> TensorDesc:
    return TensorDesc(dtype, sizes, strides, total_size=total)


def nonzero_case(x: np.ndarray, n: int, label: str, count_rank: int = 1, coords_rank: int = 2,
                 coords_strides: bool = False) -> Case:
    """NONZERO_COORDINATES of `x` (its own type), N = n; coords_strides: the DML EP's layout,
    {M, N} UINT32 coordinates at strides {2, 2M} in an INT64-sized buffer (each coordinate the low
    word of an int64 slot), so the high words DirectML must leave alone are compared too."""
    sizes = x.shape or (1,)
    m = int(np.prod(sizes))
    xd = packed(DataType[_name(x.dtype)], sizes)
    count = packed(T.UINT32, (1,) * count_rank)
    lead = (1,) * (coords_rank - 2)
    coords = (packed(T.UINT32, lead + (m, n), lead + (2, 2 * m), total=8 * m * n) if coords_strides
              else packed(T.UINT32, lead + (m, n)))
    data = [np.ascontiguousarray(x).tobytes().ljust(xd.total_bytes, b"\0"), output(count), output(coords)]
    return Case("NONZERO_COORDINATES", label, [xd, count, coords], b"", data,
                lambda v: K.nonzero_coordinates(v[0], v[1], v[2], False))


def diagonal_case(dtype: DataType, sizes: "tuple[int, ...]", offset: int, value: float, label: str) -> Case:
    out = packed(dtype, sizes)
    return Case("DIAGONAL_MATRIX", label, [out], diagonal_fields(offset, value), [output(out)],
                lambda v: K.diagonal_matrix(v[0], offset, value))


def diagonal1_case(dtype: DataType, sizes: "tuple[int, ...]", value, begin: int, end: int,
                   source: "np.ndarray | None", label: str) -> Case:
    out = packed(dtype, sizes)
    src = packed(dtype, sizes) if source is not None else None
    data = [None if source is None else source.tobytes().ljust(out.total_bytes, b"\0"), output(out)]
    return Case("DIAGONAL_MATRIX1", label, [src, out], diagonal1_fields(dtype.numpy, value, begin, end), data,
                lambda v: K.diagonal_matrix1(v[0], v[1], value, begin, end))


def identity_case(x: np.ndarray, in_desc: TensorDesc, out_desc: TensorDesc, label: str) -> Case:
    data = [x.tobytes().ljust(in_desc.total_bytes, b"\0")[: in_desc.total_bytes], output(out_desc)]
    return Case("ELEMENT_WISE_IDENTITY", label, [in_desc, out_desc], b"", data,
                lambda v: K.identity(v[0], v[1]))


def bitwise_case(operator: str, a: np.ndarray, b: np.ndarray, label: str) -> Case:
    d = packed(DataType[_name(a.dtype)], a.shape)
    kernel = K.bit_or if operator == "ELEMENT_WISE_BIT_OR" else K.bit_and
    data = [a.tobytes().ljust(d.total_bytes, b"\0"), b.tobytes().ljust(d.total_bytes, b"\0"), output(d)]
    return Case(operator, label, [d, d, d], b"", data, lambda v: kernel(v[0], v[1], v[2]))


def _name(dtype: np.dtype) -> str:
    for t in DataType:
        try:
            if t.numpy == dtype:
                return t.name
        except DmlLowerError:
            continue
    raise AssertionError(dtype)


@dataclass
class Outcome:
    case: Case
    emulator: "list[bytes] | None" = None
    directml: "list[bytes] | None" = None
    refused: "DirectMLRefused | None" = None

    @property
    def equal(self) -> bool:
        return self.refused is None and self.emulator == self.directml

    def describe(self) -> str:
        c = self.case
        head = f"{c.operator} {c.label} [{', '.join(t.describe() if t else '-' for t in c.tensors)}]"
        if self.refused is not None:
            return f"{head}: refused: {self.refused}"
        for i, (e, d) in enumerate(zip(self.emulator or [], self.directml or [])):
            if e != d:
                at = next(j for j in range(min(len(e), len(d))) if e[j] != d[j]) if len(e) == len(d) else -1
                return f"{head}: output {i} differs first at byte {at}: emulator {e[at:at + 8].hex()} DirectML {d[at:at + 8].hex()}"
        return head


def run_cases(host: DmlHost, cases: "list[Case]") -> "list[Outcome]":
    outcomes = []
    for case in cases:
        outcome = Outcome(case, emulator=case.on_emulator())
        try:
            outcome.directml = case.on_directml(host)
        except DirectMLRefused as exc:
            outcome.refused = exc
        outcomes.append(outcome)
    return outcomes
