"""Operator descriptors and host steps of the lowered graph; each validates itself.

DirectML operators reference views by name; `validate(views, level)` checks them against the
feature level's support table (ir.support) and the operator's own constraints.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Union

from .dtypes import DataType
from .errors import DmlLowerError
from .feature_levels import FeatureLevel
from .support import (DIAGONAL_MATRIX, DIAGONAL_MATRIX1, ELEMENT_WISE_BIT_AND, ELEMENT_WISE_BIT_OR,
                      ELEMENT_WISE_IDENTITY, NONZERO_COORDINATES, OperatorSupport)
from .tensor_desc import Dim, TensorDesc

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def validate_tensors(support: OperatorSupport, level: FeatureLevel,
                     tensors: "Mapping[str, TensorDesc]") -> None:
    """Validate an operator's tensors against its support table at `level`; raise naming the
    operator, tensor, level and the violated row of the table."""
    row = support.row(level)
    if row is None:
        raise DmlLowerError(f"{support.name} is not available at feature level {level} "
                            f"(introduced in {support.introduced})")
    for name, desc in tensors.items():
        allowed = row.tensors[name]
        if not allowed.min_dims <= desc.rank <= allowed.max_dims:
            raise DmlLowerError(
                f"{support.name} {name}: DimensionCount {desc.rank} is outside "
                f"{allowed.min_dims}..{allowed.max_dims} at feature level {level}")
        if desc.data_type not in allowed.types:
            raise DmlLowerError(
                f"{support.name} {name}: data type {desc.data_type.name} is not supported at "
                f"feature level {level} (supported: {allowed.describe().split('; ')[1]})")
    if row.same_dimension_count and len({d.rank for d in tensors.values()}) > 1:
        ranks = ", ".join(f"{n} {d.rank}" for n, d in tensors.items())
        raise DmlLowerError(f"{support.name}: tensors must share one DimensionCount at "
                            f"feature level {level} ({ranks})")


def effective_rank(sizes: "tuple[Dim, ...]") -> int:
    """DimensionCount excluding leading dimensions of size 1."""
    rank = len(sizes)
    for size in sizes:
        if size != 1:
            break
        rank -= 1
    return rank


@dataclass(frozen=True)
class Step:
    kind: ClassVar[str] = ""
    is_dml_operator: ClassVar[bool] = False
    # A DirectML operator names the kernel-set method that runs it (runtime.kernel_set.DmlKernels) and
    # the fields it passes, in the method's argument order (a view name goes as the array it names).
    kernel: ClassVar[str] = ""
    kernel_args: ClassVar["tuple[str, ...]"] = ()

    def reads(self) -> "tuple[str, ...]":
        """Names of the views this step reads."""
        return ()

    def writes(self) -> "tuple[str, ...]":
        """Names of the views this step writes."""
        return ()

    def validate(self, views: "Mapping[str, TensorDesc]", level: FeatureLevel) -> None:
        return None


@dataclass(frozen=True)
class NonZeroCoordinates(Step):
    """DML_NONZERO_COORDINATES_OPERATOR_DESC."""
    input: str
    output_count: str
    output_coordinates: str
    kind: ClassVar[str] = "NONZERO_COORDINATES"
    is_dml_operator: ClassVar[bool] = True
    kernel: ClassVar[str] = "nonzero_coordinates"
    kernel_args: ClassVar["tuple[str, ...]"] = ("input", "output_count", "output_coordinates")

    def reads(self) -> "tuple[str, ...]":
        return (self.input,)

    def writes(self) -> "tuple[str, ...]":
        return (self.output_count, self.output_coordinates)

    def validate(self, views: "Mapping[str, TensorDesc]", level: FeatureLevel) -> None:
        x, count, coords = views[self.input], views[self.output_count], views[self.output_coordinates]
        validate_tensors(NONZERO_COORDINATES, level, {
            "InputTensor": x, "OutputCountTensor": count, "OutputCoordinatesTensor": coords})
        if any(s != 1 for s in count.sizes):
            raise DmlLowerError(f"NONZERO_COORDINATES OutputCountTensor: sizes {list(count.sizes)} must all be 1")
        if any(s != 1 for s in coords.sizes[:-2]):
            raise DmlLowerError(f"NONZERO_COORDINATES OutputCoordinatesTensor: sizes "
                                f"{list(coords.sizes)} must be {{1,...,M,N}}")
        m, n = coords.sizes[-2], coords.sizes[-1]
        if x.is_bound and m != x.element_count:
            raise DmlLowerError(f"NONZERO_COORDINATES OutputCoordinatesTensor: M = {m} must equal "
                                f"the input's element count {x.element_count}")
        low = effective_rank(x.sizes)
        if not isinstance(n, int) or not low <= n <= x.rank:
            raise DmlLowerError(f"NONZERO_COORDINATES OutputCoordinatesTensor: N = {n} must lie in "
                                f"{low}..{x.rank} (effective rank .. input DimensionCount)")


@dataclass(frozen=True)
class DiagonalMatrix(Step):
    """DML_DIAGONAL_MATRIX_OPERATOR_DESC: Output[.., y, x] = Value where y + Offset == x."""
    output: str
    offset: int
    value: float
    kind: ClassVar[str] = "DIAGONAL_MATRIX"
    is_dml_operator: ClassVar[bool] = True
    kernel: ClassVar[str] = "diagonal_matrix"
    kernel_args: ClassVar["tuple[str, ...]"] = ("output", "offset", "value")

    def writes(self) -> "tuple[str, ...]":
        return (self.output,)

    def validate(self, views: "Mapping[str, TensorDesc]", level: FeatureLevel) -> None:
        validate_tensors(DIAGONAL_MATRIX, level, {"OutputTensor": views[self.output]})
        if not INT32_MIN <= self.offset <= INT32_MAX:
            raise DmlLowerError(f"DIAGONAL_MATRIX Offset {self.offset} does not fit its 32-bit INT")


@dataclass(frozen=True)
class DiagonalMatrix1(Step):
    """DML_DIAGONAL_MATRIX1_OPERATOR_DESC: Value inside the band [FillBegin, FillEnd) of x - y."""
    input: "str | None"
    output: str
    value_data_type: DataType
    value: "Union[int, float]"
    fill_begin: int
    fill_end: int
    kind: ClassVar[str] = "DIAGONAL_MATRIX1"
    is_dml_operator: ClassVar[bool] = True
    kernel: ClassVar[str] = "diagonal_matrix1"
    kernel_args: ClassVar["tuple[str, ...]"] = ("input", "output", "value", "fill_begin", "fill_end")

    def reads(self) -> "tuple[str, ...]":
        return (self.input,) if self.input else ()

    def writes(self) -> "tuple[str, ...]":
        return (self.output,)

    def validate(self, views: "Mapping[str, TensorDesc]", level: FeatureLevel) -> None:
        out = views[self.output]
        tensors = {"OutputTensor": out}
        if self.input:
            tensors["InputTensor"] = views[self.input]
        validate_tensors(DIAGONAL_MATRIX1, level, tensors)
        if DataType(self.value_data_type) != out.data_type:
            raise DmlLowerError(f"DIAGONAL_MATRIX1 ValueDataType {DataType(self.value_data_type).name} "
                                f"must equal the output's {out.data_type.name}")
        if self.input:
            x = views[self.input]
            if x.data_type != out.data_type or x.rank != out.rank or tuple(x.sizes) != tuple(out.sizes):
                raise DmlLowerError("DIAGONAL_MATRIX1: InputTensor and OutputTensor must share "
                                    "DataType, DimensionCount and Sizes")
        for name, bound in (("DiagonalFillBegin", self.fill_begin), ("DiagonalFillEnd", self.fill_end)):
            if not INT32_MIN <= bound <= INT32_MAX:
                raise DmlLowerError(f"DIAGONAL_MATRIX1 {name} {bound} does not fit its 32-bit INT")


@dataclass(frozen=True)
class ElementWiseIdentity(Step):
    """DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC: the strided copy that realises crops and transposes."""
    input: str
    output: str
    kind: ClassVar[str] = "ELEMENT_WISE_IDENTITY"
    is_dml_operator: ClassVar[bool] = True
    kernel: ClassVar[str] = "identity"
    kernel_args: ClassVar["tuple[str, ...]"] = ("input", "output")

    def reads(self) -> "tuple[str, ...]":
        return (self.input,)

    def writes(self) -> "tuple[str, ...]":
        return (self.output,)

    def validate(self, views: "Mapping[str, TensorDesc]", level: FeatureLevel) -> None:
        x, y = views[self.input], views[self.output]
        validate_tensors(ELEMENT_WISE_IDENTITY, level, {"InputTensor": x, "OutputTensor": y})
        if x.data_type != y.data_type or tuple(x.sizes) != tuple(y.sizes):
            raise DmlLowerError("ELEMENT_WISE_IDENTITY: InputTensor and OutputTensor must share "
                                f"DataType and Sizes ({x.describe()} vs {y.describe()})")


@dataclass(frozen=True)
class _ElementWiseBinary(Step):
    a: str
    b: str
    output: str
    is_dml_operator: ClassVar[bool] = True
    kernel_args: ClassVar["tuple[str, ...]"] = ("a", "b", "output")
    support: ClassVar[OperatorSupport]

    def reads(self) -> "tuple[str, ...]":
        return (self.a, self.b)

    def writes(self) -> "tuple[str, ...]":
        return (self.output,)

    def validate(self, views: "Mapping[str, TensorDesc]", level: FeatureLevel) -> None:
        a, b, out = views[self.a], views[self.b], views[self.output]
        validate_tensors(self.support, level, {"ATensor": a, "BTensor": b, "OutputTensor": out})
        if len({d.data_type for d in (a, b, out)}) > 1 or len({tuple(d.sizes) for d in (a, b, out)}) > 1:
            raise DmlLowerError(f"{self.kind}: ATensor, BTensor and OutputTensor must share DataType and Sizes "
                                f"({a.describe()}, {b.describe()}, {out.describe()})")


@dataclass(frozen=True)
class ElementWiseBitOr(_ElementWiseBinary):
    """DML_ELEMENT_WISE_BIT_OR_OPERATOR_DESC."""
    kind: ClassVar[str] = "ELEMENT_WISE_BIT_OR"
    kernel: ClassVar[str] = "bit_or"
    support: ClassVar[OperatorSupport] = ELEMENT_WISE_BIT_OR


@dataclass(frozen=True)
class ElementWiseBitAnd(_ElementWiseBinary):
    """DML_ELEMENT_WISE_BIT_AND_OPERATOR_DESC."""
    kind: ClassVar[str] = "ELEMENT_WISE_BIT_AND"
    kernel: ClassVar[str] = "bit_and"
    support: ClassVar[OperatorSupport] = ELEMENT_WISE_BIT_AND


# Host-side steps: what happens around the DirectML operators, made visible.

@dataclass(frozen=True)
class Upload(Step):
    """Copy a host tensor (an ONNX value) into a packed view."""
    tensor: str
    view: str
    kind: ClassVar[str] = "UPLOAD"

    def writes(self) -> "tuple[str, ...]":
        return (self.view,)


@dataclass(frozen=True)
class Download(Step):
    """Read a view back to the host as an ONNX value of `onnx_type` and `shape`."""
    view: str
    tensor: str
    onnx_type: int
    shape: "tuple[Dim, ...]"
    kind: ClassVar[str] = "DOWNLOAD"

    def reads(self) -> "tuple[str, ...]":
        return (self.view,)


@dataclass(frozen=True)
class ClearBuffer(Step):
    """ClearUnorderedAccessViewUint over a whole buffer (every 32-bit word = value)."""
    buffer: str
    value: int = 0
    kind: ClassVar[str] = "CLEAR_BUFFER"


@dataclass(frozen=True)
class ReadCount(Step):
    """Blocking readback of a UINT32 scalar to the host; binds `symbol` for later sizes."""
    view: str
    symbol: str
    kind: ClassVar[str] = "READBACK_COUNT"

    def reads(self) -> "tuple[str, ...]":
        return (self.view,)


@dataclass(frozen=True)
class EmptyTensor(Step):
    """A host value with a zero-sized dimension: DirectML cannot hold it, nothing runs."""
    tensor: str
    onnx_type: int
    shape: "tuple[Dim, ...]"               # a NonZero of a scalar: (0, nnz), nnz read back at run time
    kind: ClassVar[str] = "EMPTY_TENSOR"


@dataclass(frozen=True)
class OnnxRegion(Step):
    """ONNX nodes left to onnxruntime (or onnx.reference): a placeholder in the printed graph."""
    name: str
    onnx_nodes: "tuple[str, ...]"
    inputs: "tuple[str, ...]"
    outputs: "tuple[str, ...]"
    kind: ClassVar[str] = "ONNX_REGION"


@dataclass(frozen=True)
class LowerAtRunTime(Step):
    """A lowered node whose sizes are known only when the graph runs: specialised then, cached."""
    onnx_node: str
    rule: str
    inputs: "tuple[str, ...]"
    outputs: "tuple[str, ...]"
    kind: ClassVar[str] = "LOWER_AT_RUN_TIME"


@dataclass(frozen=True)
class ControlFlow(Step):
    """An ONNX If / Loop / Scan whose bodies hold lowered nodes: the host runs the condition and
    trip count, and each body's own lowered graph per branch or iteration.

    `construct` is "if", "loop" or "scan"; `inputs` are the node's own inputs ("" where an optional
    one is absent), `captures` the outer values its bodies read, `bodies` (attribute name, lowered
    graph) pairs, e.g. ("then_branch", g), ("else_branch", g) or ("body", g)."""
    construct: str
    onnx_node: str
    inputs: "tuple[str, ...]"
    captures: "tuple[str, ...]"
    outputs: "tuple[str, ...]"
    bodies: "tuple[tuple[str, Any], ...]" = field(hash=False)   # Any: ir.graph.Graph (graph imports this module)
    kind: ClassVar[str] = "CONTROL_FLOW"

    def body(self, name: str) -> Any:
        return dict(self.bodies)[name]


# Every step class of this module by its kind (graph JSON, the interpreter's table): derived, so a new
# operator is its class alone.
STEP_TYPES: "dict[str, type[Step]]" = {cls.kind: cls for cls in list(globals().values())
                                       if isinstance(cls, type) and issubclass(cls, Step) and cls.kind}
