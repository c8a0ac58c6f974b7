"""The tolerance policy of float outputs (runtime/compare.py has the comparison rule): the
global and per-output atol / rtol the user gives, each type's default rtol, and the outputs a
lowered node produces, compared exactly."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import ml_dtypes

from onnx_dml_lowering.ir import DmlLowerError

from onnx_dml_lowering.lowering.onnx_graphs import is_standard

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from onnx_dml_lowering.runtime.compiled_view import CompiledView

from .compare import StepRtol, is_float

__all__ = ["DEFAULT_ATOL", "DEFAULT_RTOL", "Tolerances", "default_rtol", "lowered_outputs"]

DEFAULT_ATOL = DEFAULT_RTOL = 1e-5


@dataclass
class Tolerances:
    """The tolerance policy for float outputs (runtime/compare.py has the comparison rule): an
    element passes when |actual - expected| <= atol + rtol * |expected|. Defaults atol 1e-5 and rtol
    1e-5 (Polygraphy's): float32 results that differ only in the order of their roundings
    (onnxruntime fusing a whole graph, the oracle running regions) stay within them at values of
    order 1, and rtol scales the allowance with each element's magnitude. For a type coarser than
    float32 (float16, bfloat16, float8, float6, float4) the default rtol also passes values one step
    of the type apart (a StepRtol): one rounding of the type, which 1e-5 would always fail there.
    Not its machine epsilon as an rtol: that is up to two steps, and in float4e2m1 (eps 0.5) 6
    against 3. float8e8m0, powers of two only (one step a factor of 2, no zero), is exact by default
    (atol and rtol 0 unless given). No tolerance
    scales with an output's overall magnitude: one masked entry at float32's lowest value would
    loosen every element. `exact` outputs (produced by a node this project lowers; set by
    `for_model`) are compared with atol = rtol = 0 unless `per_output` names them: the global values
    never loosen them."""
    atol: float = DEFAULT_ATOL
    rtol: "float | None" = None          # None: the default (default_rtol: by the output's type)
    per_output: "dict[str, tuple[float | None, float | None]]" = field(default_factory=dict)
    exact: "dict[str, str]" = field(default_factory=dict)     # output -> the lowered node producing it
    _given: "list[bool]" = field(default_factory=lambda: [False, False], repr=False, compare=False)  # by parse

    def for_output(self, name: str, dtype: "DTypeLike | None" = None) -> "tuple[float, float]":
        """(atol, rtol) for output `name`, whose type is `dtype` (for the default rtol)."""
        atol, rtol = self.per_output.get(name, (None, None))
        if name in self.exact:
            base = (0.0, 0.0)
        else:
            base = (self._atol_for(dtype), default_rtol(dtype) if self.rtol is None else self.rtol)
        return (base[0] if atol is None else atol, base[1] if rtol is None else rtol)

    def _atol_for(self, dtype: "DTypeLike | None") -> float:
        """The global atol; 0 for a type with no zero (float8e8m0, a power-of-two scale) unless given:
        1e-5 would pass every scale below it against every other."""
        given = self._given[0] or self.atol != DEFAULT_ATOL
        return self.atol if given or dtype is None or not _is_scale(dtype) else 0.0

    def for_model(self, compiled: CompiledView) -> "Tolerances":
        """These tolerances checked against the model's outputs, with its lowered nodes' outputs exact."""
        self.check_names(compiled.output_names, _declared_types(compiled))
        return replace(self, exact=lowered_outputs(compiled))

    def is_exact(self, name: str) -> bool:
        """Compared with atol = rtol = 0 because a lowered node produces it (no tolerance named for it)."""
        return name in self.exact and name not in self.per_output

    def check_names(self, outputs: "list[str]", types: "dict[str, str] | None" = None) -> None:
        """A tolerance naming no output of the model is a usage error, not silently ignored; so is
        a NaN or infinite one, which would let every comparison pass, and one naming an output
        `types` (output -> its declared ONNX type name) says is not a float: compared exactly,
        whatever its tolerance."""
        values: "list[tuple[str, str | None, float | None]]" = [("atol", None, self.atol), ("rtol", None, self.rtol)]
        values += [(kind, name, pair[i]) for name, pair in self.per_output.items()
                   for i, kind in enumerate(("atol", "rtol"))]
        for kind, name, value in values:
            if value is not None:
                _finite(value, f"tolerance {kind} {name + '=' if name else ''}{value}")
                if value < 0:           # the Python API builds Tolerances itself: as parse refuses it
                    raise DmlLowerError(f"tolerance {kind} {name + '=' if name else ''}{value}: a tolerance is 0 or more")
        for name in self.per_output:
            if name not in outputs:
                raise DmlLowerError(f"tolerance for {name!r}: the model has no output of that name "
                                    f"(outputs: {', '.join(outputs)})")
            declared = (types or {}).get(name, "float")
            if declared not in _FLOAT_TYPES:
                raise DmlLowerError(f"tolerance for {name!r}: that output is {declared}, compared exactly "
                                    "(a tolerance applies to float outputs only)")

    @staticmethod
    def parse(atols: "list[str] | None", rtols: "list[str] | None") -> "Tolerances":
        """From CLI values: a bare number sets the global value, NAME=NUMBER one output's. An error
        names the option and the value as given."""
        tol = Tolerances()
        for values, index in ((atols or [], 0), (rtols or [], 1)):
            option = ("--atol", "--rtol")[index]
            for text in values:
                name, sep, number = text.rpartition("=")
                try:
                    value = float(number)
                except ValueError:
                    raise DmlLowerError(f"{option} {text!r}: not NUMBER or OUTPUT=NUMBER") from None
                _finite(value, f"{option} {text!r}")
                if value < 0:
                    raise DmlLowerError(f"{option} {text!r}: a tolerance is 0 or more")
                if sep and not name:
                    raise DmlLowerError(f"{option} {text!r}: the output name before '=' is empty")
                tol._set(option, text, name, index, value)
        return tol

    def _set(self, option: str, text: str, name: str, index: int, value: float) -> None:
        """One parsed value in place; the same tolerance given two values is refused (which one
        counts would be a guess), as --dim given two sizes is."""
        pair = self.per_output.get(name, (None, None)) if name else (self.atol if self._given[0] else None,
                                                                     self.rtol if self._given[1] else None)
        if pair[index] is not None and pair[index] != value:
            raise DmlLowerError(f"{option} {text!r}: {name + ' ' if name else ''}given two values, "
                                f"{pair[index]:g} and {value:g}: give one")
        if name:
            self.per_output[name] = (value, pair[1]) if index == 0 else (pair[0], value)
            return
        if index == 0:
            self.atol = value
        else:
            self.rtol = value
        self._given[index] = True


# ONNX operators that only move their first input's values (an exporter's trailing Identity or
# Reshape): a lowered node's value through them is still that node's exact value.
_MOVES = frozenset(("Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Expand"))


def default_rtol(dtype: "DTypeLike | None") -> float:
    """DEFAULT_RTOL; for a float type coarser than that (its machine epsilon larger) DEFAULT_RTOL
    with values one step of the type apart passing too (a StepRtol); 0 for float8e8m0 (exact)."""
    if dtype is None or not is_float(dtype):
        return DEFAULT_RTOL
    if _is_scale(dtype):
        return 0.0
    if float(ml_dtypes.finfo(dtype).eps) <= DEFAULT_RTOL:      # numpy's finfo knows no float8
        return DEFAULT_RTOL
    return StepRtol(DEFAULT_RTOL, steps=1)


def _is_scale(dtype: "DTypeLike") -> bool:
    """A float type of powers of two only, without zero or sign (float8e8m0)."""
    return is_float(dtype) and float(ml_dtypes.finfo(dtype).min) > 0


def lowered_outputs(compiled: CompiledView) -> "dict[str, str]":
    """The model's outputs that a node this project lowers produces (NonZero, EyeLike, the eye /
    mask / Trilu idioms, a generated constant), directly or through nodes that only move values,
    each with that node: their values are exact."""
    graph = compiled.model.graph
    nodes = {n.name: n for n in graph.node}
    produced = {}
    for p in compiled.placement:
        if p.status != "lowered":
            continue
        if p.initializer:                         # generated: named by its placement label
            produced[p.initializer] = p.onnx_nodes[0]
            continue
        for name in p.onnx_nodes:
            if name in nodes:                     # a body's node (a path) is not the main graph's
                produced.update((value, name) for value in nodes[name].output if value)
    for node in graph.node:                       # in topological order: one pass follows chains
        if node.op_type in _MOVES and is_standard(node) and node.input and node.input[0] in produced:
            produced[node.output[0]] = produced[node.input[0]]
    return {name: produced[name] for name in compiled.output_names if name in produced}


_FLOAT_TYPES = frozenset(("float", "double", "float16", "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                          "float8e5m2fnuz", "float8e8m0", "float4e2m1", "float6e2m3", "float6e3m2"))


def _declared_types(compiled: CompiledView) -> "dict[str, str]":
    """Each main-graph output's declared ONNX tensor type, by name (as onnx names the types,
    lowercase; an output with no declared tensor type is left out)."""
    import onnx
    types = {}
    for vi in compiled.model.graph.output:
        elem = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
        if elem:
            types[vi.name] = onnx.TensorProto.DataType.Name(elem).lower()
    return types


def _finite(value: float, text: str) -> None:
    if not math.isfinite(value):
        raise DmlLowerError(f"{text}: not a finite number: a NaN or infinite tolerance would let every "
                            "comparison pass")
