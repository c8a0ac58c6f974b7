"""Per-operator tensor support tables, one row per feature level that changed them.

Validation (ir.operators) and `capabilities` both read these tables, so what is printed is
what is enforced.
"""
from __future__ import annotations

from dataclasses import dataclass

from .dtypes import DataType as T
from .errors import DmlLowerError
from .feature_levels import FeatureLevel, parse_level

_EIGHT = frozenset({T.FLOAT32, T.FLOAT16, T.INT32, T.INT16, T.INT8, T.UINT32, T.UINT16, T.UINT8})
_ELEVEN = _EIGHT | {T.FLOAT64, T.INT64, T.UINT64}
_HALF_FLOAT = frozenset({T.FLOAT32, T.FLOAT16})
_UINT32 = frozenset({T.UINT32})


@dataclass(frozen=True)
class TensorSupport:
    min_dims: int
    max_dims: int
    types: frozenset

    def describe(self) -> str:
        dims = str(self.min_dims) if self.min_dims == self.max_dims else f"{self.min_dims}..{self.max_dims}"
        types = ", ".join(t.name for t in sorted(self.types, key=lambda t: -t.bits * 100 - (t.is_float * 10)))
        return f"{dims} dims; {types}"


@dataclass(frozen=True)
class SupportRow:
    since: FeatureLevel
    tensors: "dict[str, TensorSupport]"
    same_dimension_count: bool = False      # all tensors share DimensionCount (NonZero at 3_0)


@dataclass(frozen=True)
class OperatorSupport:
    name: str
    number: int                             # DML_OPERATOR_TYPE value
    introduced: FeatureLevel
    rows: "tuple[SupportRow, ...]"          # newest first

    def row(self, level: "FeatureLevel | str") -> "SupportRow | None":
        """The table in force at `level`, or None when the operator does not exist there."""
        level = parse_level(level)
        for row in self.rows:
            if level >= row.since:
                return row
        return None

    def at(self, level: "FeatureLevel | str") -> SupportRow:
        """row(level) where the operator must exist: a rule's check has declined the levels
        without it (lowering.common.level_reason says the same)."""
        row = self.row(level)
        if row is None:
            raise DmlLowerError(f"{self.name} is not available at feature level {parse_level(level)} "
                                f"(introduced in {self.introduced})")
        return row


def _lv(name: str) -> FeatureLevel:
    return parse_level(name)


def _row(since: str, same: bool = False, **tensors: TensorSupport) -> SupportRow:
    return SupportRow(_lv(since), dict(tensors), same)


NONZERO_COORDINATES = OperatorSupport("NONZERO_COORDINATES", 133, _lv("3_0"), (
    _row("4_0",
         InputTensor=TensorSupport(1, 8, _EIGHT),
         OutputCountTensor=TensorSupport(1, 8, _UINT32),
         OutputCoordinatesTensor=TensorSupport(2, 8, _UINT32)),
    _row("3_0", same=True,
         InputTensor=TensorSupport(4, 5, _EIGHT),
         OutputCountTensor=TensorSupport(4, 5, _UINT32),
         OutputCoordinatesTensor=TensorSupport(4, 5, _UINT32)),
))

DIAGONAL_MATRIX = OperatorSupport("DIAGONAL_MATRIX", 93, _lv("2_0"), (
    _row("5_1", OutputTensor=TensorSupport(2, 4, _ELEVEN)),
    _row("4_0", OutputTensor=TensorSupport(2, 4, _EIGHT)),
    _row("2_1", OutputTensor=TensorSupport(4, 4, _EIGHT)),
    _row("2_0", OutputTensor=TensorSupport(4, 4, _HALF_FLOAT)),
))

DIAGONAL_MATRIX1 = OperatorSupport("DIAGONAL_MATRIX1", 163, _lv("5_1"), (
    _row("5_1", InputTensor=TensorSupport(2, 4, _ELEVEN), OutputTensor=TensorSupport(2, 4, _ELEVEN)),
))

ELEMENT_WISE_IDENTITY = OperatorSupport("ELEMENT_WISE_IDENTITY", 1, _lv("1_0"), (
    _row("4_1", InputTensor=TensorSupport(1, 8, _ELEVEN), OutputTensor=TensorSupport(1, 8, _ELEVEN)),
    _row("3_0", InputTensor=TensorSupport(1, 8, _EIGHT), OutputTensor=TensorSupport(1, 8, _EIGHT)),
    _row("2_1", InputTensor=TensorSupport(4, 5, _EIGHT), OutputTensor=TensorSupport(4, 5, _EIGHT)),
    _row("1_0", InputTensor=TensorSupport(4, 5, _HALF_FLOAT), OutputTensor=TensorSupport(4, 5, _HALF_FLOAT)),
))

_SMALL_UNSIGNED = frozenset({T.UINT32, T.UINT16, T.UINT8})


def _bitwise(name: str, number: int) -> OperatorSupport:
    return OperatorSupport(name, number, _lv("3_0"), (
        _row("4_1", ATensor=TensorSupport(1, 8, _ELEVEN), BTensor=TensorSupport(1, 8, _ELEVEN),
             OutputTensor=TensorSupport(1, 8, _ELEVEN)),
        _row("3_0", ATensor=TensorSupport(1, 8, _SMALL_UNSIGNED), BTensor=TensorSupport(1, 8, _SMALL_UNSIGNED),
             OutputTensor=TensorSupport(1, 8, _SMALL_UNSIGNED)),
    ))


# Glue for 64-bit NonZero: the two 32-bit words of each element combined.
ELEMENT_WISE_BIT_AND = _bitwise("ELEMENT_WISE_BIT_AND", 121)    # 12 before NONZERO_COORDINATES (133)
ELEMENT_WISE_BIT_OR = _bitwise("ELEMENT_WISE_BIT_OR", 122)

# Every table above by operator name, in the order they are written (capabilities prints them so):
# derived, so a new operator is its table alone.
OPERATORS: "dict[str, OperatorSupport]" = {op.name: op for op in list(globals().values())
                                           if isinstance(op, OperatorSupport)}
