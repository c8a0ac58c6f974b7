"""DML_BUFFER_TENSOR_DESC: sizes, element strides, flags, total size, alignment.

A size may be a symbol (a str) that is bound when the graph runs: NonZero's count read
back to the host is the only source of such symbols.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Mapping, Union, cast

from .dtypes import DataType
from .errors import DmlLowerError

Dim = Union[int, str]

MAX_DIMENSIONS = 8                  # DML_TENSOR_DIMENSION_COUNT_MAX1
MAX_ELEMENTS = 2**32 - 1
UINT32_MAX = 2**32 - 1              # Sizes and Strides are UINT arrays; elements are indexed in 32 bits
MINIMUM_BUFFER_ALIGNMENT = 16       # DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT
FLAG_NONE, FLAG_OWNED_BY_DML = 0, 1


def _round4(n: int) -> int:
    return (n + 3) // 4 * 4


def packed_strides(sizes: "tuple[int, ...]") -> "tuple[int, ...]":
    strides, acc = [], 1
    for size in reversed(sizes):
        strides.append(acc)
        acc *= size
    return tuple(reversed(strides))


def min_size_bytes(dtype: DataType, sizes: "tuple[int, ...]",
                   strides: "tuple[int, ...] | None") -> int:
    """DMLCalcBufferTensorSize: the least TotalTensorSizeInBytes a descriptor may declare."""
    if strides is None:
        elements = 1
        for size in sizes:
            elements *= size
    else:
        elements = sum((s - 1) * t for s, t in zip(sizes, strides)) + 1
    return _round4((elements * dtype.bits + 7) // 8)


@dataclass(frozen=True)
class TensorDesc:
    data_type: DataType
    sizes: "tuple[Dim, ...]"
    strides: "tuple[int, ...] | None" = None
    flags: int = FLAG_NONE
    total_size: "int | None" = None     # None: the minimum for the (bound) sizes
    alignment: int = 0                  # GuaranteedBaseOffsetAlignment; 0 = no guarantee

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_type", DataType(self.data_type))
        object.__setattr__(self, "sizes", tuple(s if isinstance(s, str) else int(s) for s in self.sizes))
        if self.strides is not None:
            object.__setattr__(self, "strides", tuple(int(t) for t in self.strides))

    @property
    def rank(self) -> int:
        return len(self.sizes)

    # Derived once (cached in the instance): descriptors are immutable and this is asked for on every step.
    @cached_property
    def symbols(self) -> "tuple[str, ...]":
        return tuple(s for s in self.sizes if isinstance(s, str))

    @property
    def is_bound(self) -> bool:
        return not self.symbols

    def concrete_sizes(self) -> "tuple[int, ...]":
        if self.symbols:
            raise DmlLowerError(f"tensor sizes {self.sizes} still hold unbound symbols")
        return cast("tuple[int, ...]", self.sizes)       # no symbols: every size is an int

    @property
    def element_count(self) -> int:
        count = 1
        for size in self.concrete_sizes():
            count *= size
        return count

    @property
    def effective_strides(self) -> "tuple[int, ...]":
        return self.strides if self.strides is not None else packed_strides(self.concrete_sizes())

    @property
    def min_total_size(self) -> int:
        return min_size_bytes(self.data_type, self.concrete_sizes(), self.strides)

    @property
    def total_bytes(self) -> int:
        """TotalTensorSizeInBytes as the descriptor declares it."""
        return self.total_size if self.total_size is not None else self.min_total_size

    def bind(self, env: Mapping[str, int]) -> "TensorDesc":
        """The descriptor with every symbol replaced by its value from `env`."""
        if self.is_bound:
            return self
        try:
            sizes = tuple(env[s] if isinstance(s, str) else s for s in self.sizes)
        except KeyError as missing:
            raise DmlLowerError(f"tensor size symbol {missing} is not bound yet") from None
        return replace(self, sizes=sizes)

    def validate(self, what: str = "tensor") -> None:
        """Raise DmlLowerError naming the violated DML_BUFFER_TENSOR_DESC rule."""
        if self.data_type == DataType.UNKNOWN:
            raise DmlLowerError(f"{what}: DataType UNKNOWN is not allowed")
        if not 1 <= self.rank <= MAX_DIMENSIONS:
            raise DmlLowerError(f"{what}: DimensionCount {self.rank} is outside 1..{MAX_DIMENSIONS}")
        if self.flags not in (FLAG_NONE, FLAG_OWNED_BY_DML):
            raise DmlLowerError(f"{what}: unknown tensor flags {self.flags}")
        if not self.is_bound:
            return
        sizes = self.concrete_sizes()
        if any(s <= 0 for s in sizes):
            raise DmlLowerError(f"{what}: Sizes {list(sizes)} hold a size of 0 or less; DirectML forbids empty dimensions")
        if self.element_count > MAX_ELEMENTS:
            raise DmlLowerError(f"{what}: {self.element_count} elements exceed DirectML's limit of {MAX_ELEMENTS} (2^32 - 1)")
        if self.strides is not None:
            if len(self.strides) != self.rank:
                raise DmlLowerError(f"{what}: {len(self.strides)} strides for {self.rank} sizes")
            if any(t < 0 for t in self.strides):
                raise DmlLowerError(f"{what}: negative stride in {list(self.strides)}")
            wide = next((t for t in self.strides if t > UINT32_MAX), None)
            if wide is not None:
                raise DmlLowerError(f"{what}: stride {wide} in {list(self.strides)} does not fit DirectML's 32-bit "
                                    f"Strides field (at most {UINT32_MAX})")
            last = sum((s - 1) * t for s, t in zip(sizes, self.strides))
            if last > UINT32_MAX:
                raise DmlLowerError(f"{what}: sizes {list(sizes)} and strides {list(self.strides)} reach element "
                                    f"index {last}, past DirectML's 32-bit element index (at most {UINT32_MAX})")
        if self.total_size is not None and self.total_size < self.min_total_size:
            raise DmlLowerError(
                f"{what}: TotalTensorSizeInBytes {self.total_size} is below the minimum "
                f"{self.min_total_size} implied by sizes {list(sizes)} and strides "
                f"{list(self.strides) if self.strides else 'packed'}")
        if self.total_bytes % 4:
            raise DmlLowerError(f"{what}: TotalTensorSizeInBytes {self.total_bytes} is not a multiple of 4")
        align = self.alignment
        if align and (align & (align - 1) or align < self.data_type.size):
            raise DmlLowerError(
                f"{what}: GuaranteedBaseOffsetAlignment {align} must be 0 or a power of two "
                f"at least the element size {self.data_type.size}")

    def describe(self) -> str:
        sizes = ",".join(str(s) for s in self.sizes)
        text = f"{self.data_type.name}{{{sizes}}}"
        if self.strides is not None:
            text += " strides{" + ",".join(str(t) for t in self.strides) + "}"
        if self.total_size is not None:
            text += f" total={self.total_size}"
        if self.flags:
            text += " OWNED_BY_DML"
        if self.alignment:
            text += f" align={self.alignment}"
        return text
