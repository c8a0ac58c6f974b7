"""If / Loop / Scan bodies as models of their own, so the partition passes compile them like the
main graph: the body's formal inputs first, then the outer values it reads (its captures)."""
from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import helper

from onnx_dml_lowering.lowering import TensorInfo
from onnx_dml_lowering.lowering.onnx_graphs import graph_captures
# which control-flow nodes the runtime runs itself: runtime/control_flow.py decides, for the
# lowered run and the oracle alike
from onnx_dml_lowering.runtime.control_flow import host_construct as construct_of  # noqa: F401  (partition.py reads it from here)

from onnx_dml_lowering.runtime.model_facts import value_types
from onnx_dml_lowering.runtime.onnx_inference import infer_shapes


@dataclass
class BodyModel:
    attribute: str                          # then_branch / else_branch / body
    model: onnx.ModelProto                  # the body as a model: formal inputs, then captures
    types: "dict[str, TensorInfo]"          # what the body's values are known to be (outer ones too)
    formal: "list[str]"                     # the body's own inputs, in order
    captures: "list[str]"                   # outer values it reads


def _loose(vi: onnx.ValueInfoProto, elem_type: int, keep_dims: bool) -> onnx.ValueInfoProto:
    """The value's element type with its rank kept and, unless keep_dims, every dimension unknown:
    loop-carried values and scan states may change size from one iteration to the next."""
    tensor = vi.type.tensor_type
    elem = tensor.elem_type or elem_type
    if not elem:
        return helper.make_empty_tensor_value_info(vi.name)
    if not tensor.HasField("shape"):
        return helper.make_tensor_value_info(vi.name, elem, None)
    dims = [d.dim_value if d.HasField("dim_value") and keep_dims else
            (d.dim_param if d.HasField("dim_param") and keep_dims else None) for d in tensor.shape.dim]
    return helper.make_tensor_value_info(vi.name, elem, dims)


def body_model(parent: onnx.ModelProto, node: onnx.NodeProto, construct: str, attribute: str,
               graph: onnx.GraphProto, outer: "dict[str, TensorInfo]") -> BodyModel:
    """The body `attribute` of control-flow `node` as a model, shape-inferred from its inputs."""
    formal = list(graph.input)
    outer_types = [outer[n].onnx_type if n and n in outer else 0 for n in node.input]
    inputs = []
    for index, vi in enumerate(formal):
        if construct == "loop":
            # iteration number and condition are scalars; carried values may change shape
            fed = outer_types[index] if index >= 2 and index < len(outer_types) else 0
            inputs.append(_loose(vi, fed, keep_dims=index < 2))
        elif construct == "scan":
            states = len(node.input) - _num_scan_inputs(node)
            fed = outer_types[index] if index < len(outer_types) else 0
            inputs.append(_loose(vi, fed, keep_dims=index >= states))
        else:
            inputs.append(vi)
    captures = graph_captures(graph)
    for name in captures:
        info = outer.get(name)
        if info is not None and info.onnx_type:
            shape = None if info.shape is None else list(info.shape)
            inputs.append(helper.make_tensor_value_info(name, info.onnx_type, shape))
        else:
            inputs.append(helper.make_empty_tensor_value_info(name))
    outputs = [_loose(vo, 0, keep_dims=True) for vo in graph.output]
    sub = helper.make_graph(list(graph.node), f"{node.name}/{attribute}", inputs, outputs, list(graph.initializer))
    model = helper.make_model(sub, opset_imports=list(parent.opset_import), ir_version=parent.ir_version)
    model.functions.extend(parent.functions)
    try:
        model = infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # inference of a body may fail where the whole model's did not: use what is declared
        pass
    types = dict(outer)
    types.update(value_types(model))
    return BodyModel(attribute, model, types, [vi.name for vi in formal], captures)


def _num_scan_inputs(node: onnx.NodeProto) -> int:
    for attr in node.attribute:
        if attr.name == "num_scan_inputs":
            return attr.i
    return 0
