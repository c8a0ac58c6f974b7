"""What a lowering rule sees of an ONNX node: plain data, filled in by the compiler's front end."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable

from onnx_dml_lowering.ir.errors import DmlLowerError
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
    prefix: str = ""           # the node's IR name prefix, unique in its model (see unique_names)

    @property
    def is_static(self) -> bool:
        return all(t is None or t.is_static for t in self.inputs)

    def input(self, i: int) -> TensorInfo:
        """Input i where the operator requires it: the ONNX checker has rejected a model that
        leaves a required input empty, so only an input the schema makes optional can be None."""
        t = self.inputs[i] if -len(self.inputs) <= i < len(self.inputs) else None
        if t is None:
            raise DmlLowerError(f"node {self.name!r} ({self.op_type}): input {i} is missing")
        return t


_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_SAFE = re.compile(r"[A-Za-z0-9_]+")


def sanitise(name: str) -> str:
    """An identifier for IR names: no '.', which separates a prefix from what it names."""
    return _UNSAFE.sub("_", name) or "node"


def is_sanitised(name: str) -> bool:
    """sanitise(name) == name, without building the copy (unique_names asks it of every node)."""
    return _SAFE.fullmatch(name) is not None


def unique_names(wanted: "Iterable[tuple[Hashable, str]]") -> "dict[Hashable, str]":
    """Distinct sanitised prefixes for (key, wanted name) pairs, deterministic in their order.

    A name that needs no sanitising keeps itself (the first to want it, if several do); any other
    gets its sanitised form, with the first free suffix _2, _3, ... when that is already taken,
    so `nz.1`, `nz_1` and `nz-1` become `nz_1_2`, `nz_1` and `nz_1_3`."""
    pairs = list(wanted)
    taken: "set[str]" = set()
    out: "dict[Hashable, str]" = {}
    for key, name in pairs:
        if key not in out and is_sanitised(name) and name not in taken:
            out[key] = name
            taken.add(name)
    for key, name in pairs:
        if key in out:
            continue
        base = candidate = sanitise(name)
        suffix = 2
        while candidate in taken:
            candidate, suffix = f"{base}_{suffix}", suffix + 1
        out[key] = candidate
        taken.add(candidate)
    return out


class Names:
    """Buffer / view / symbol names for one fragment: `prefix.what`."""

    def __init__(self, prefix: str) -> None:
        self.prefix = sanitise(prefix)

    def __call__(self, what: str) -> str:
        return f"{self.prefix}.{what}"


def product(dims: "tuple[Dim, ...]") -> int:
    total = 1
    for d in dims:
        total *= int(d)
    return total
