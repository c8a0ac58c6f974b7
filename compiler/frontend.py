"""Load, check and shape-infer an ONNX model; describe its nodes as plain data for the rules."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Sequence, Union, cast

import onnx
from google.protobuf.message import DecodeError
from onnx import helper, shape_inference

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import first_line
from onnx_dml_lowering.lowering import NodeInfo, TensorInfo
from onnx_dml_lowering.runtime import input_files
from onnx_dml_lowering.runtime.inline_weights import parse_without_weights
from onnx_dml_lowering.runtime.model_content import check_value_types
from onnx_dml_lowering.runtime.weights import (PROTO_LIMIT, is_lazy, lifted, no_external, resolve_external,
                                               split_initializers)
from onnx_dml_lowering.lowering.onnx_graphs import standard_opset
from onnx_dml_lowering.runtime.onnx_inference import infer_shapes

from .body_names import distinct_body_names, restore_names
from .onnx_errors import explain_checker, onnx_message
from .opsets import check_opsets

ModelLike = Union[str, os.PathLike, bytes, onnx.ModelProto]


def load_model(model: ModelLike) -> onnx.ModelProto:
    """A private copy of the model, or DmlLowerError naming the file and what is wrong."""
    if isinstance(model, onnx.ModelProto):
        size = model.ByteSize()
        if size > PROTO_LIMIT:
            raise DmlLowerError(f"model proto of {size} bytes passes protobuf's 2 GB limit: save it with its "
                                "weights as external data (onnx.save(model, path, save_as_external_data=True)) "
                                "and pass the path")
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        no_external(copy, "model", own_marks=True)
        _check_declarations(copy, "model")
        return copy
    if isinstance(model, (bytes, bytearray)):
        proto = _parse("model bytes", bytes(model))
        no_external(proto, "model bytes")
        _check_declarations(proto, "model bytes")
        return proto
    return resolved(load_stored(model), model)


def resolved(stored: onnx.ModelProto, path: "str | os.PathLike") -> onnx.ModelProto:
    """The model file `path` as load_model gives it, from `stored`, the file as load_stored read it
    (taken over, not copied): its external data checked and resolved."""
    # Large initializers stay in their files (memory-mapped when read); the rest is loaded.
    resolve_external(stored, str(Path(path).parent), f"model file {str(path)!r}")
    return stored


def load_stored(path: "str | os.PathLike") -> onnx.ModelProto:
    """The model file as stored, external data references left unread (inspect reports them,
    optimize keeps them external), large inline weights too (pointing at their bytes in the file:
    inline_weights.in_model_file): read as load_model reads the file, nothing else."""
    what = f"model file {str(path)!r}"
    regular_size(Path(path), what)
    # Large inline weights are left in the file like external ones (runtime.inline_weights).
    proto = _without_inline_weights(Path(path)) or _parse(what, read_regular_file(Path(path), what))
    _check_declarations(proto, what)
    return proto


def _check_declarations(proto: onnx.ModelProto, what: str) -> None:
    """What the model declares, whoever reads it next: its opset imports (each domain once, none
    past the installed onnx) and its value types (element types ONNX defines, no negative size)."""
    check_opsets(proto)
    check_value_types(proto, what)


def _parse(what: str, data: bytes) -> onnx.ModelProto:
    if not data:
        raise DmlLowerError(f"{what} is empty")
    try:
        proto = onnx.ModelProto()
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise DmlLowerError(f"{what} is not an ONNX model (protobuf parse failed: {first_line(exc)})") from None
    if not proto.graph.node and not proto.graph.output and not proto.opset_import:
        raise DmlLowerError(f"{what} is not an ONNX model (no graph, no opset import)")
    return proto


def _without_inline_weights(path: Path) -> "onnx.ModelProto | None":
    """The model with its large inline weights left in the file (runtime.inline_weights), or None
    to read and parse the file whole."""
    try:
        proto = parse_without_weights(str(path))
    except (OSError, ValueError, DecodeError, RuntimeError):
        return None                      # the ordinary read names what is wrong
    if proto is None or (not proto.graph.node and not proto.graph.output and not proto.opset_import):
        return None
    return proto


def regular_size(path: Path, what: str) -> int:
    """The size of a regular file (a model, a test data tensor): input_files.regular_file, the one
    check every reader of a file makes."""
    return input_files.regular_file(path, what).st_size


def read_regular_file(path: Path, what: str) -> bytes:
    """The bytes of a regular file (regular_size); the read stops at the size the stat gave."""
    size = regular_size(path, what)
    if size > PROTO_LIMIT:
        raise DmlLowerError(f"{what} is {size} bytes, past protobuf's 2 GB limit for one message "
                            "(larger weights belong in external data files)")
    try:
        with open(path, "rb") as file:
            return file.read(size)
    except OSError as exc:
        raise DmlLowerError(f"{what} cannot be read: {exc.strerror or exc}") from None


def check_and_infer(model: onnx.ModelProto, what: str = "") -> onnx.ModelProto:
    """onnx.checker then strict shape inference; either failure is one line naming the node, led by
    `what` (the model file, "model file '...'") where the model came from one.
    Initializers left in their external files are typed graph inputs for the checker (it would look
    for the files beside the working directory); shape inference reads only their types and shapes."""
    # Without lazy initializers the lifted copy would equal the model: check the model itself.
    checked = lifted(model)[0] if any(is_lazy(t) for t in model.graph.initializer) else model
    try:
        onnx.checker.check_model(checked)
    except onnx.checker.ValidationError as exc:
        raise DmlLowerError(explain_checker(model, onnx_message(exc), what)) from None
    del checked             # the lifted copy: not kept through inference (1.4 MiB of the Mask R-CNN export's inspect)
    # onnx's inference reads every initializer as a constant, those that are also graph inputs
    # too (ConstantOfShape, Reshape, Range and data propagation take their values, so a default
    # [3, 3] sized values a feed of [2, 5] replaces): it sees them as the plain inputs they are,
    # declared type and shape only, and the defaults go back after.
    inputs = {vi.name for vi in model.graph.input}
    if not any(t.name in inputs for t in model.graph.initializer):
        return _infer(model, what=what)
    bare, defaults = split_initializers(model, lambda t: t.name in inputs)
    inferred = _infer(bare, defaults, what)
    del bare
    inferred.graph.initializer.extend(defaults)
    return inferred


def _infer(model: onnx.ModelProto, defaults: "Sequence[onnx.TensorProto]" = (), what: str = "") -> onnx.ModelProto:
    """Strict shape inference with data propagation, as check_and_infer says; `defaults`, the
    initializers taken out as plain inputs, still count as large values below."""
    # Data propagation makes a shape of every rank-1 value it derives, one entry per element: a
    # large weight flattened and then gathered from took 24 GB (onnx 1.23). Shape values are small,
    # so where an initializer that large exists, a plain pass comes first and data propagation runs
    # only when no rank-1 value is that large.
    # Data propagation keys what it derives by value name for the whole model: subgraphs that
    # reuse a name (an If's two decoders) collide, so they get distinct names for the passes.
    large = any(math.prod(t.dims) > DATA_PROP_ELEMENTS for t in [*model.graph.initializer, *defaults])
    view, lifted = _without_float_weights(model)
    restore = distinct_body_names(view)
    try:
        if large:
            plain = infer_shapes(view, check_type=True, strict_mode=True)
            if _large_flat_value(plain):
                return _with_weights(plain, model, lifted, restore)
            del plain                   # a copy of the view: not kept through the next pass
        inferred = _with_data_propagation(view)
        return _with_weights(inferred, model, lifted, restore)
    except INFERENCE_ERRORS as exc:
        lead = f"{what}: " if what else ""
        raise DmlLowerError(f"{lead}ONNX shape inference failed: {onnx_message(exc, restore)}") from None
    finally:
        restore_names(view, restore)            # the model itself when nothing was lifted


# A floating-point initializer of at least this many bytes is given to shape inference as a typed
# graph input: inference never reads such a value (data propagation reads integers; the scales of a
# Resize are a few floats), and onnx copies the whole model four times to infer it (serialised,
# parsed in C++, serialised back, parsed): SSDlite320's 11 MB of sub-megabyte weights took its
# compile from 77 to 144 MB of peak RSS. The weights go back, in their order, into the result.
VIEW_FLOAT_BYTES = 4096
_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}


def _without_float_weights(model: onnx.ModelProto) -> "tuple[onnx.ModelProto, list[str]]":
    """The model for shape inference: its inline floating-point weights of VIEW_FLOAT_BYTES or more
    (not lazy: those hold no bytes) as typed graph inputs appended last, and their names; the model
    itself when it has none."""
    def weight(t: onnx.TensorProto) -> bool:
        return (t.data_type in _FLOATS and not is_lazy(t) and t.name not in inputs
                and t.ByteSize() >= VIEW_FLOAT_BYTES)
    inputs = {vi.name for vi in model.graph.input}
    if not any(weight(t) for t in model.graph.initializer):
        return model, []
    view, moved = split_initializers(model, weight)
    view.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in moved)
    return view, [t.name for t in moved]


def _with_weights(inferred: onnx.ModelProto, model: onnx.ModelProto, lifted: "list[str]",
                  restore: "dict[str, str]") -> onnx.ModelProto:
    """The inferred view with the body names restored and, where weights were lifted, the
    initializers of `model` back in their order and the lifted inputs gone."""
    restore_names(inferred, restore)
    if lifted:
        count = len(inferred.graph.input) - len(lifted)
        if [vi.name for vi in inferred.graph.input[count:]] != lifted:
            raise RuntimeError("shape inference reordered the graph inputs: the lifted weights cannot be put back")
        del inferred.graph.input[count:]
        del inferred.graph.initializer[:]
        inferred.graph.initializer.extend(model.graph.initializer)
    return inferred


INFERENCE_ERRORS = (shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError)


def _with_data_propagation(model: onnx.ModelProto) -> onnx.ModelProto:
    """Strict inference with data propagation; where only data propagation fails, the plain pass.
    onnx's propagators have their own errors on valid models (Sub over two Unsqueezed Ranges is
    "Invalid rank for Sub broadcasting" in onnx 1.23, where onnxruntime runs the model): what
    they derive only sharpens shapes, so the plain strict pass, which still rejects a model that is
    wrong, decides. Its error is the one reported when both fail."""
    try:
        return infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except INFERENCE_ERRORS:
        return infer_shapes(model, check_type=True, strict_mode=True)


# A rank-1 value past this many elements is no shape value: data propagation would list it whole,
# about 40 bytes an element (a flattened activation of a detector is far below).
DATA_PROP_ELEMENTS = 1 << 24


def _large_flat_value(model: onnx.ModelProto) -> bool:
    """A rank-1 value past DATA_PROP_ELEMENTS, or one that may be: a node reading a value that
    large whose output's rank or size the plain pass does not know (a Reshape to a size computed
    from Shape, which data propagation would resolve)."""
    shapes: "dict[str, list[int | None] | None]" = {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        tensor = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        shapes[vi.name] = (None if tensor is None or not tensor.HasField("shape") else
                           [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim])
    for t in model.graph.initializer:
        shapes[t.name] = [int(d) for d in t.dims]

    def large(name: str) -> bool:
        shape = shapes.get(name)
        return shape is not None and None not in shape and math.prod(cast("list[int]", shape)) > DATA_PROP_ELEMENTS

    for name, shape in shapes.items():
        if shape is not None and len(shape) == 1 and large(name):
            return True
    for node in model.graph.node:
        if any(large(i) for i in node.input if i):
            for out in node.output:
                shape = shapes.get(out)
                if out and (shape is None or (len(shape) <= 1 and None in shape)):
                    return True
    return False


def mark_outputs(model: onnx.ModelProto, names: "list[str] | str") -> "list[str]":
    """Make intermediate values graph outputs too (after shape inference), so every backend and the
    oracle report them. `names` is a list of value names or "all": every node output shape inference
    gives a tensor type; a sequence, map or optional value, or one without a type, is left out (only
    tensors are compared), never an error the user did not ask for by name."""
    known = {vi.name: vi for vi in model.graph.value_info}
    produced = [o for n in model.graph.node for o in n.output if o]
    outputs = {o.name for o in model.graph.output}
    if names == "all":
        names = [n for n in produced if n not in outputs and _typed_tensor(known.get(n))]
    added = []
    for name in names:
        if name in outputs or name in added:
            continue
        if name not in produced:
            raise DmlLowerError(f"--outputs {name}: no node of the main graph produces a value of that name")
        if not _typed_tensor(known.get(name)):
            raise DmlLowerError(f"--outputs {name}: {_why_untyped(known.get(name))}, so it cannot be an output "
                                "(only tensors are compared)")
        model.graph.output.append(known[name])
        added.append(name)
    return added


def _typed_tensor(info: "onnx.ValueInfoProto | None") -> bool:
    """A value shape inference gives a tensor type with an element type (what an output compares)."""
    return info is not None and info.type.WhichOneof("value") == "tensor_type" \
        and bool(info.type.tensor_type.elem_type)


def _why_untyped(info: "onnx.ValueInfoProto | None") -> str:
    from onnx_dml_lowering.runtime.feeds import describe_type
    kind = None if info is None else info.type.WhichOneof("value")
    if info is None or kind is None or (kind == "tensor_type" and not info.type.tensor_type.elem_type):
        return "shape inference gives that value no type"
    return f"shape inference gives that value the type {describe_type(info.type)}, not a tensor's"


def default_opset(model: onnx.ModelProto) -> int:
    return standard_opset(model, 0)




def node_info(node: onnx.NodeProto, opset: int, types: "dict[str, TensorInfo]", prefix: str = "") -> NodeInfo:
    def info(name: str) -> TensorInfo:
        return types.get(name, TensorInfo(name, 0, None))

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    # an omitted optional input is None; an omitted output keeps its place with the name ""
    return NodeInfo(node.name, node.op_type, opset, tuple(info(n) if n else None for n in node.input),
                    tuple(info(n) for n in node.output), attrs, prefix)




