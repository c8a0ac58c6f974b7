"""The ONNX definitions, in numpy, of the operators the hybrid oracle evaluates itself.

The hybrid oracle evaluates NonZero, EyeLike, Trilu and the nodes an idiom covers with ONNX
semantics rather than onnxruntime's kernels. Those nodes use a couple of dozen operators, each
a few lines of numpy written from the ONNX operator specification, so they need not pay for
onnx.reference (importing it loads about 170 operator modules, and each evaluator parses its
model): that was the largest single cost of `check` on small models.

An operator is a plain function whose keyword arguments are its ONNX attributes with their
defaults; `DEFINITIONS` maps op types to them. A case these definitions leave to onnx.reference
(a type numpy does not hold natively, a float Range, a float -> integer Cast, NonZero of a
scalar) raises NotDefined; `defines(node, input_types)` says so before a run where the types are
known. tests/runtime/test_onnx_definitions.py proves every definition equal to onnx.reference
bit for bit over grids of types, shapes and attributes, and with hypothesis.

This is an oracle, separate from the emulator's kernels (runtime/kernels.py): it follows the
specification's wording, not DirectML's operators.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence, overload

import numpy as np
import onnx
from onnx import helper

from onnx_dml_lowering.ir.dtypes import NUMPY_NATIVE, numpy_to_onnx, onnx_to_numpy
from onnx_dml_lowering.lowering.common import one_value
from onnx_dml_lowering.lowering.onnx_graphs import is_standard

ENGINE = "numpy ONNX definitions"
_NATIVE_ONNX = frozenset(numpy_to_onnx(dtype) for dtype in NUMPY_NATIVE)
_FLOATS = frozenset("fc")


class NotDefined(Exception):
    """A case these definitions leave to onnx.reference."""


def _native(*arrays: np.ndarray) -> None:
    for array in arrays:
        if array.dtype not in NUMPY_NATIVE:
            raise NotDefined(f"type {array.dtype} is not one numpy holds natively")


@overload
def _ints(array: np.ndarray) -> "list[int]": ...
@overload
def _ints(array: None) -> None: ...
def _ints(array: "np.ndarray | None") -> "list[int] | None":
    return None if array is None else [int(v) for v in np.asarray(array).reshape(-1)]


# -- NonZero, EyeLike, Trilu --------------------------------------------------------------------
def nonzero(x: np.ndarray) -> "list[np.ndarray]":
    # [rank, count] int64: the indices of the non-zero elements, in row-major order
    _native(x)
    if x.ndim == 0:
        raise NotDefined("NonZero of a scalar (ONNX and onnxruntime disagree on its shape)")
    return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]


def eyelike(x: np.ndarray, dtype: "int | None" = None, k: int = 0) -> "list[np.ndarray]":
    # a 2-D tensor of x's shape, ones on the k-th diagonal (j - i == k), zeros elsewhere
    _native(x)
    if x.ndim != 2:
        raise NotDefined(f"EyeLike of a {x.ndim}-D tensor (ONNX requires 2-D)")
    out_type = x.dtype if dtype is None else _target(dtype)
    rows, cols = x.shape
    out = np.zeros((rows, cols), dtype=out_type)
    first = max(0, -k)
    count = max(0, min(rows - first, cols - (first + k)))
    index = np.arange(first, first + count)
    out[index, index + k] = 1
    return [out]


def trilu(x: np.ndarray, k: "np.ndarray | None" = None, upper: int = 1) -> "list[np.ndarray]":
    # keep the elements with j - i >= k (upper) or j - i <= k (lower) of every matrix, zero the rest
    _native(x)
    if x.ndim < 2:
        raise NotDefined(f"Trilu of a {x.ndim}-D tensor (ONNX requires at least 2-D)")
    diagonal = 0 if k is None else int(one_value(k, "Trilu's input k"))
    rows, cols = x.shape[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = offset >= diagonal if upper else offset <= diagonal
    return [np.where(keep, x, np.zeros((), dtype=x.dtype))]


# -- shape and layout ---------------------------------------------------------------------------
def transpose(x: np.ndarray, perm: "Sequence[int] | None" = None) -> "list[np.ndarray]":
    # dimensions permuted by perm (default: reversed)
    return [np.transpose(x, None if perm is None else list(perm))]


def _axes(axes_input: "np.ndarray | None", axes_attr: "Sequence[int] | None", rank: int) -> "list[int] | None":
    axes = _ints(axes_input) if axes_input is not None else (None if axes_attr is None else list(axes_attr))
    if axes is None:
        return None
    normal = [a + rank if a < 0 else a for a in axes]
    if any(a < 0 or a >= rank for a in normal) or len(set(normal)) != len(normal):
        raise NotDefined(f"axes {axes} out of range or repeated for rank {rank}")
    return normal


def squeeze(x: np.ndarray, axes_input: "np.ndarray | None" = None,
            axes: "Sequence[int] | None" = None) -> "list[np.ndarray]":
    # the listed dimensions of size 1 removed (all of them when no axes are given)
    if axes_input is not None and np.size(axes_input) == 0:
        raise NotDefined("Squeeze with an empty axes input (runtimes read it as 'none' or as 'all')")
    chosen = _axes(axes_input, axes or None, x.ndim)          # opset 1 / 11: axes=[] is no axes
    if chosen is None:
        return [x.reshape([d for d in x.shape if d != 1])]
    if any(x.shape[a] != 1 for a in chosen):
        raise NotDefined("Squeeze of a dimension that is not 1")
    return [x.reshape([d for i, d in enumerate(x.shape) if i not in chosen])]


def unsqueeze(x: np.ndarray, axes_input: "np.ndarray | None" = None,
              axes: "Sequence[int] | None" = None) -> "list[np.ndarray]":
    # dimensions of size 1 inserted at the listed positions of the output
    rank = x.ndim + len(_ints(axes_input) if axes_input is not None else list(axes or []))
    chosen = _axes(axes_input, axes, rank)
    if not chosen:
        raise NotDefined("Unsqueeze without axes")
    shape = list(x.shape)
    for a in sorted(chosen):
        shape.insert(a, 1)
    return [x.reshape(shape)]


def reshape(x: np.ndarray, shape: np.ndarray, allowzero: int = 0) -> "list[np.ndarray]":
    # x's elements in a new shape; 0 copies the input's dimension (unless allowzero), -1 is inferred
    wanted = _ints(shape)
    if any(d < -1 for d in wanted) or wanted.count(-1) > 1:
        raise NotDefined(f"Reshape to {wanted}: only one -1 and no other negative size")
    if not allowzero:
        if any(d == 0 and i >= x.ndim for i, d in enumerate(wanted)):
            raise NotDefined(f"Reshape to {wanted}: a 0 copies an input dimension the input does not have")
        wanted = [x.shape[i] if d == 0 else d for i, d in enumerate(wanted)]
    return [x.reshape(wanted)]


def identity(x: np.ndarray) -> "list[np.ndarray]":
    return [x]


def split(x: np.ndarray, split_input: "np.ndarray | None" = None, axis: int = 0,
          split: "Sequence[int] | None" = None, num_outputs: "int | None" = None,
          outputs: int = 1) -> "list[np.ndarray]":
    # x cut along axis into parts of the given sizes, or into `outputs` parts (the last smaller)
    axis = axis + x.ndim if axis < 0 else axis
    size = x.shape[axis]
    sizes = _ints(split_input) if split_input is not None else (list(split) if split else None)
    if sizes is None:
        parts = num_outputs or outputs
        if num_outputs is None and size % parts:
            raise NotDefined(f"Split of {size} into {parts} equal parts (uneven parts need num_outputs)")
        chunk = -(-size // parts)
        sizes = [chunk] * (parts - 1) + [size - chunk * (parts - 1)]
    if any(s < 0 for s in sizes) or sum(sizes) != size or len(sizes) != outputs:
        raise NotDefined(f"Split sizes {sizes} do not cover dimension {size} in {outputs} outputs")
    cuts = np.cumsum(sizes)[:-1]
    return list(np.split(x, cuts, axis=axis))


def slice_(x: np.ndarray, starts: np.ndarray, ends: np.ndarray, axes: "np.ndarray | None" = None,
           steps: "np.ndarray | None" = None) -> "list[np.ndarray]":
    # per listed axis, elements start, start + step, ... before end (indices clamped to the dimension)
    begin, end = _ints(starts), _ints(ends)
    chosen = _ints(axes) if axes is not None else list(range(len(begin)))
    stride = _ints(steps) if steps is not None else [1] * len(begin)
    if not len(begin) == len(end) == len(chosen) == len(stride):
        raise NotDefined("Slice with starts, ends, axes and steps of different lengths")
    if len(set(a + x.ndim if a < 0 else a for a in chosen)) != len(chosen):
        raise NotDefined("Slice with a repeated axis")
    index = [slice(None)] * x.ndim
    for b, e, a, s in zip(begin, end, chosen, stride):
        if s == 0:
            raise NotDefined("Slice with a zero step")
        index[a + x.ndim if a < 0 else a] = slice(b, e, s)
    return [x[tuple(index)]]


def expand(x: np.ndarray, shape: np.ndarray) -> "list[np.ndarray]":
    # x broadcast (numpy rules) to the shape, or to x's shape where that is larger
    target = np.broadcast_shapes(x.shape, tuple(_ints(shape)))
    return [np.array(np.broadcast_to(x, target))]


def constant_of_shape(shape: np.ndarray, value: "onnx.TensorProto | None" = None) -> "list[np.ndarray]":
    # a tensor of the given shape filled with value's single element (float32 0 by default)
    fill = np.zeros(1, dtype=np.float32) if value is None else onnx.numpy_helper.to_array(value).reshape(-1)
    _native(fill)
    if fill.size != 1:
        raise NotDefined("ConstantOfShape value with more than one element")
    return [np.full(tuple(_ints(shape)), fill[0], dtype=fill.dtype)]


def range_(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> "list[np.ndarray]":
    # start, start + delta, ... before limit: max(ceil((limit - start) / delta), 0) integers
    _native(start)
    if start.dtype.kind not in "iu":
        raise NotDefined("Range of floats (the count's rounding is left to onnx.reference)")
    first, last, step = int(start), int(limit), int(delta)
    if step == 0:
        raise NotDefined("Range with a zero delta")
    count = max(-(-(last - first) // step), 0)
    return [(first + step * np.arange(count, dtype=np.int64)).astype(start.dtype)]


# -- element-wise -------------------------------------------------------------------------------
def _binary(ufunc: Callable) -> Callable:
    def apply(a: np.ndarray, b: np.ndarray) -> "list[np.ndarray]":
        _native(a, b)
        if a.dtype != b.dtype:
            raise NotDefined(f"operands of types {a.dtype} and {b.dtype}")
        return [np.asarray(ufunc(a, b))]
    apply.__name__ = ufunc.__name__
    return apply


def not_(x: np.ndarray) -> "list[np.ndarray]":
    _native(x)
    return [np.logical_not(x)]


def cast(x: np.ndarray, to: int, saturate: int = 1, round_mode: str = "up") -> "list[np.ndarray]":
    # x converted to type `to`; float -> integer (out of range or NaN: undefined) is left to onnx.reference
    _native(x)
    target = _target(to)
    if x.dtype.kind in _FLOATS and target.kind in "iu":
        raise NotDefined("Cast from a float type to an integer type")
    return [x.astype(target)]


def _target(onnx_type: int) -> np.dtype:
    if onnx_type not in _NATIVE_ONNX:
        raise NotDefined(f"ONNX type {onnx_type} is not one numpy holds natively")
    return onnx_to_numpy(onnx_type)


DEFINITIONS: "dict[str, Callable]" = {
    "NonZero": nonzero, "EyeLike": eyelike, "Trilu": trilu,
    "Transpose": transpose, "Squeeze": squeeze, "Unsqueeze": unsqueeze, "Reshape": reshape,
    "Identity": identity, "Split": split, "Slice": slice_, "Expand": expand,
    "ConstantOfShape": constant_of_shape, "Range": range_,
    "Equal": _binary(np.equal), "Less": _binary(np.less), "LessOrEqual": _binary(np.less_equal),
    "Greater": _binary(np.greater), "GreaterOrEqual": _binary(np.greater_equal),
    "And": _binary(np.logical_and), "Or": _binary(np.logical_or), "Xor": _binary(np.logical_xor),
    "Not": not_, "Add": _binary(np.add), "Sub": _binary(np.subtract), "Mul": _binary(np.multiply),
    "Cast": cast,
}
# The second input of operators that older opsets gave as an attribute of the same name: the
# function takes the input under this keyword.
_INPUT_KEYWORD = {"Squeeze": "axes_input", "Unsqueeze": "axes_input", "Split": "split_input"}
# The attributes each definition takes (a node with any other is left to onnx.reference).
_ATTRIBUTES = {"Cast": {"to", "saturate", "round_mode"}, "EyeLike": {"dtype", "k"}, "Trilu": {"upper"},
               "Transpose": {"perm"}, "Squeeze": {"axes"}, "Unsqueeze": {"axes"}, "Reshape": {"allowzero"},
               "Split": {"axis", "split", "num_outputs"}, "ConstantOfShape": {"value"}}


def defines(node: onnx.NodeProto, input_types: "Sequence[int]" = (),
            input_ranks: "Sequence[int | None]" = ()) -> bool:
    """These definitions evaluate `node` (default domain, known op, known attributes, no input of a
    type numpy does not hold natively where the type is known: 0 = unknown, no NonZero of a
    scalar where the rank is known)."""
    if not is_standard(node) or node.op_type not in DEFINITIONS:
        return False
    if any(a.name not in _ATTRIBUTES.get(node.op_type, ()) for a in node.attribute):
        return False
    if node.op_type == "Slice" and len(node.input) < 3:       # opset 1's attribute form
        return False
    if node.op_type == "NonZero" and list(input_ranks[:1]) == [0]:
        return False
    return all(t == 0 or t in _NATIVE_ONNX for t in input_types)


def evaluate(node: onnx.NodeProto, inputs: "Sequence[np.ndarray | None]") -> "list[np.ndarray]":
    """The node's outputs by its ONNX definition; NotDefined for a case left to onnx.reference."""
    function = DEFINITIONS[node.op_type]
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "Split":
        attributes["outputs"] = len(node.output)
    if isinstance(attributes.get("round_mode"), bytes):
        attributes["round_mode"] = attributes["round_mode"].decode()
    keyword = _INPUT_KEYWORD.get(node.op_type)
    if keyword is not None:
        if len(inputs) > 1 and inputs[1] is not None:
            attributes[keyword] = inputs[1]
        return function(inputs[0], **attributes)    # shape operators: nothing to overflow
    args = list(inputs)
    while args and args[-1] is None:
        args.pop()
    with np.errstate(all="ignore"):         # overflow to inf and NaN are defined results, not warnings
        return function(*args, **attributes)


class DefinitionsRegion:
    """A run of nodes evaluated by their definitions, with the session interface the oracle uses
    (`run(outputs, feeds)`). `constants` are the region's initializers as arrays."""

    def __init__(self, nodes: "Sequence[onnx.NodeProto]", constants: "Mapping[str, np.ndarray]") -> None:
        self.nodes = list(nodes)
        self.constants = dict(constants)

    def run(self, outputs: "Sequence[str] | None", feeds: "Mapping[str, np.ndarray]") -> "list[np.ndarray]":
        env: "dict[str, np.ndarray]" = {**self.constants, **feeds}
        for node in self.nodes:
            values = evaluate(node, [env[name] if name else None for name in node.input])
            env.update((name, value) for name, value in zip(node.output, values) if name)
        wanted = outputs if outputs is not None else [o for n in self.nodes for o in n.output if o]
        return [env[name] for name in wanted]
