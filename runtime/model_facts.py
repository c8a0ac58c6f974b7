"""What runtime reads of an ONNX model to feed and type it: the inputs a caller must feed, those an
initializer gives a default, the initializers' values and every value's TensorInfo. compile_model
and the runtime's own ModelView (runtime/compiled_view.py) read a model through these."""
from __future__ import annotations

from typing import Any

import onnx

from onnx_dml_lowering.lowering import TensorInfo
from onnx_dml_lowering.runtime.weights import tensor_array


def _shape_of(type_proto: onnx.TypeProto) -> Any:
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims: "list[int | str | None]" = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return tuple(dims)


def value_types(model: onnx.ModelProto) -> "dict[str, TensorInfo]":
    """Every tensor name the (inferred) graph knows: element type and shape."""
    infos: "dict[str, TensorInfo]" = {}
    graph = model.graph
    # Reading a TypeProto field by field costs ~10 us in protobuf; its serialized bytes ~1 us, and
    # the values of a model share a few types: each distinct type is read once.
    described: "dict[bytes, tuple | None]" = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        key = vi.type.SerializeToString()
        if key not in described:
            described[key] = ((vi.type.tensor_type.elem_type, _shape_of(vi.type))
                              if vi.type.HasField("tensor_type") else None)
        known = described[key]
        if known is not None:
            infos[vi.name] = TensorInfo(vi.name, known[0], known[1])
    inputs = {vi.name for vi in graph.input}
    for init in graph.initializer:
        if init.name not in inputs:       # an input's initializer is a default: a feed may reshape it
            infos[init.name] = TensorInfo(init.name, init.data_type, tuple(int(d) for d in init.dims))
    return infos


def graph_inputs(model: onnx.ModelProto) -> "list[onnx.ValueInfoProto]":
    """The inputs a caller must feed (initializers that double as inputs are optional)."""
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def overridable_inputs(model: onnx.ModelProto) -> "list[onnx.ValueInfoProto]":
    """Graph inputs that also have an initializer: a feed may replace the default."""
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name in inits]


def initializer_arrays(model: onnx.ModelProto) -> "dict[str, Any]":
    """Every initializer's value (those left in external files as memory maps, not copies)."""
    return {i.name: tensor_array(i) for i in model.graph.initializer}
