"""What a lowering rule sees of an ONNX node: plain data, filled in by the compiler's front end."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from onnx_dml_lowering.ir.tensor_desc import Dim

@dataclass(frozen=True)
class TensorInfo:
    name: str
    onnx_type: int
    shape: Any = None          # tuple of int / symbol str / None per dim; None when rank unknown

    @property
    def rank(self) -> "int | None":
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)


@dataclass(frozen=True)
class NodeInfo:
    name: str
    op_type: str
    opset: int
    inputs: "tuple[TensorInfo | None, ...]"
    outputs: "tuple[TensorInfo, ...]"
    attrs: "dict[str, Any]" = field(default_factory=dict)

    @property
    def is_static(self) -> bool:
        return all(t is None or t.is_static for t in self.inputs)

    def with_shapes(self, shapes: "tuple[tuple[int, ...] | None, ...]") -> "NodeInfo":
        """The same node with concrete input shapes (a run-time specialisation)."""
        inputs = tuple(None if t is None else TensorInfo(t.name, t.onnx_type, None if s is None else tuple(s))
                       for t, s in zip(self.inputs, shapes))
        return NodeInfo(self.name, self.op_type, self.opset, inputs, self.outputs, self.attrs)


class Names:
    """Unique buffer / view / symbol names for one node's fragment."""

    def __init__(self, node_name: str) -> None:
        self.prefix = re.sub(r"[^A-Za-z0-9_]", "_", node_name) or "node"

    def __call__(self, what: str) -> str:
        return f"{self.prefix}.{what}"


def product(dims: "tuple[Dim, ...]") -> int:
    total = 1
    for d in dims:
        total *= int(d)
    return total
