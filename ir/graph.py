"""The lowered graph: buffers with byte sizes, views over them, and an ordered list of steps."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .errors import DmlLowerError
from .feature_levels import DEFAULT_LEVEL, FeatureLevel
from .operators import Step
from .tensor_desc import MINIMUM_BUFFER_ALIGNMENT, TensorDesc


@dataclass(frozen=True)
class Buffer:
    """A GPU buffer of `bytes * product(symbols)` bytes (symbols: NonZero counts read back)."""
    name: str
    bytes: int
    symbols: "tuple[str, ...]" = ()

    def size(self, env: "Mapping[str, int]") -> int:
        total = self.bytes
        for symbol in self.symbols:
            if symbol not in env:
                raise DmlLowerError(f"buffer {self.name}: size symbol {symbol!r} is not bound yet")
            total *= env[symbol]
        return total

    def describe(self) -> str:
        return "*".join([str(self.bytes), *self.symbols]) + " bytes"


@dataclass(frozen=True)
class View:
    """A tensor descriptor bound over a buffer at a byte offset."""
    name: str
    buffer: str
    desc: TensorDesc
    offset: int = 0


@dataclass
class Graph:
    feature_level: FeatureLevel = DEFAULT_LEVEL
    buffers: "dict[str, Buffer]" = field(default_factory=dict)
    views: "dict[str, View]" = field(default_factory=dict)
    steps: "list[Step]" = field(default_factory=list)
    inputs: "list[str]" = field(default_factory=list)     # host tensors the graph consumes
    outputs: "list[str]" = field(default_factory=list)    # host tensors the graph produces
    # Host tensor -> (the shape its steps were built for, the ONNX node built): a static lowering
    # took the shape the model declares, and a value of another shape (same element count or not)
    # would be read through the wrong descriptors, so the runtime refuses it.
    built_shapes: "dict[str, tuple[tuple[int, ...], str]]" = field(default_factory=dict)

    # -- building -------------------------------------------------------------------------
    def add_buffer(self, name: str, nbytes: int, symbols: "tuple[str, ...]" = ()) -> Buffer:
        if name in self.buffers:
            raise DmlLowerError(f"buffer {name!r} defined twice")
        buffer = Buffer(name, nbytes, tuple(symbols))
        self.buffers[name] = buffer
        return buffer

    def add_view(self, name: str, buffer: str, desc: TensorDesc, offset: int = 0) -> View:
        if name in self.views:
            raise DmlLowerError(f"view {name!r} defined twice")
        view = View(name, buffer, desc, offset)
        self.views[name] = view
        return view

    def add(self, step: Step) -> Step:
        self.steps.append(step)
        return step

    def merge(self, other: "Graph") -> None:
        """Append another graph's buffers, views and steps (names must not collide)."""
        for buffer in other.buffers.values():
            self.add_buffer(buffer.name, buffer.bytes, buffer.symbols)
        for view in other.views.values():
            self.add_view(view.name, view.buffer, view.desc, view.offset)
        self.steps.extend(other.steps)
        for name, built in other.built_shapes.items():
            self.built_shapes.setdefault(name, built)

    # -- queries ----------------------------------------------------------------------------
    def descs(self) -> "dict[str, TensorDesc]":
        return {name: view.desc for name, view in self.views.items()}

    @property
    def dml_operators(self) -> "list[str]":
        return [step.kind for step in self.steps if step.is_dml_operator]


BINDING_ALIGNMENT = MINIMUM_BUFFER_ALIGNMENT
