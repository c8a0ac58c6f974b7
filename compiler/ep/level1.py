"""onnxruntime's own level-1 graph optimisations, run on this machine: the DML EP partitions the
graph they leave (constants lifted, constant sub-graphs and static Shapes folded, Identity /
Dropout removed, model-local functions inlined), and they are EP-agnostic, so running them here
with the CPU EP and reading the optimised model back reproduces that graph without
re-implementing them."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

import onnx
from onnx import helper, numpy_helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import first_line


@dataclass(frozen=True)
class Level1:
    """Who runs the level-1 optimisations the prediction starts from: `optimise(model, model_dir)`
    gives (the optimised model, "") or (None, why not); `by` names that onnxruntime."""
    optimise: "Callable[[onnx.ModelProto, str | None], tuple[onnx.ModelProto | None, str]]"
    by: str


def level1_model(model: onnx.ModelProto, model_dir: "str | None") -> "tuple[onnx.ModelProto | None, str]":
    """(the model as onnxruntime's ORT_ENABLE_BASIC level leaves it, "") or (None, why not) when
    onnxruntime refuses the model here (a node with no kernel in any provider fails the session
    before the optimised model is saved). External weights are read by onnxruntime from
    `model_dir` and written back external (this process never loads them)."""
    import onnxruntime as ort

    from onnx_dml_lowering.runtime import ort_crash
    from onnx_dml_lowering.runtime.ort.model import EXTERNAL_FOLDER_OPTION, ort_model
    # the one way a ModelProto reaches onnxruntime: weights load_model left in the user's files
    # (a model optimize --for dml loaded) become external initializers in those files; serialised
    # as they are, onnxruntime refused them and the prediction ran on no graph at all
    prepared = ort_model(model)
    folder = prepared.folder or model_dir
    with tempfile.TemporaryDirectory(prefix="dml-lower-level1-") as tmp:
        out = Path(tmp) / "level1.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(out)
        options.log_severity_level = 3
        if folder is not None:
            options.add_session_config_entry(EXTERNAL_FOLDER_OPTION, folder)
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        try:
            with ort_crash.loading(ort_crash.where(model, ["CPUExecutionProvider"], "onnxruntime's level-1 "
                                                   "optimisation of the model") if ort_crash.armed() else None):
                ort.InferenceSession(prepared.data, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime refuses the model: say why, in its words
            if not out.is_file():
                return None, first_line(exc)
        try:
            return onnx.load(str(out), load_external_data=False), ""
        except Exception as exc:
            raise DmlLowerError(f"onnxruntime's level-1 optimised model cannot be read back: {first_line(exc)}") from None


# Constant's attributes holding a plain value: (element type, whether it is a list)
_CONSTANT_VALUES = {"value_float": (onnx.TensorProto.FLOAT, False), "value_floats": (onnx.TensorProto.FLOAT, True),
                    "value_int": (onnx.TensorProto.INT64, False), "value_ints": (onnx.TensorProto.INT64, True),
                    "value_string": (onnx.TensorProto.STRING, False), "value_strings": (onnx.TensorProto.STRING, True)}


def constants_as_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the model as onnxruntime's graph load leaves it, before any optimisation level:
    every standard Constant node (in the bodies too) becomes an initializer of its graph named
    by its output (graph.cc), so no provider is ever asked to place one. The prediction needs it
    where level 1 could not run (onnxruntime refused the model here)."""
    from onnx_dml_lowering.lowering.onnx_graphs import is_standard, iter_graphs
    loaded = onnx.ModelProto()
    loaded.CopyFrom(model)
    for graph in [each for each, _ in iter_graphs(loaded.graph)]:
        for node in [n for n in graph.node if n.op_type == "Constant" and is_standard(n.domain)]:
            tensor = _constant_tensor(node)
            if tensor is not None:       # a function's attribute reference: no value to lift
                graph.initializer.append(tensor)
                graph.node.remove(node)
    return loaded


def _constant_tensor(node: onnx.NodeProto) -> "onnx.TensorProto | None":
    """The Constant node's value as a tensor named by its output (a sparse value made dense, as
    onnxruntime's load makes it), or None when it holds no value of its own."""
    if len(node.attribute) != 1 or not node.output:
        return None
    attr = node.attribute[0]
    value = helper.get_attribute_value(attr)
    if attr.name == "value":
        tensor = onnx.TensorProto()
        tensor.CopyFrom(value)
    elif attr.name == "sparse_value":
        tensor = _sparse_as_dense(value)
    elif attr.name in _CONSTANT_VALUES:
        elem, is_list = _CONSTANT_VALUES[attr.name]
        tensor = helper.make_tensor("", elem, [len(value)] if is_list else [], value if is_list else [value])
    else:
        return None
    tensor.name = node.output[0]
    return tensor


# The elements past which a sparse Constant's dense form is only its type and shape: the prediction
# reads an initializer's name, type and shape, never its values, and a model may declare [2^20, 2^20].
DENSE_SPARSE_MAX = 1 << 20


def _sparse_as_dense(value: onnx.SparseTensorProto) -> onnx.TensorProto:
    """The dense tensor a sparse value stands for (values and all up to DENSE_SPARSE_MAX elements)."""
    count = int(np.prod(value.dims, dtype=np.float64))        # float: no int64 wrap on absurd dims
    if count > DENSE_SPARSE_MAX or any(d < 0 for d in value.dims):
        return onnx.TensorProto(data_type=value.values.data_type, dims=list(value.dims))
    values, indices = numpy_helper.to_array(value.values), numpy_helper.to_array(value.indices)
    dense = np.zeros(count, values.dtype)
    # indices are linear ([NNZ]) or one coordinate row per value ([NNZ, rank])
    dense[indices if indices.ndim == 1 else np.ravel_multi_index(tuple(indices.T), tuple(value.dims))] = values
    return numpy_helper.from_array(dense.reshape(tuple(value.dims)))


CPU_CAST_PREFIX = "InsertedPrecisionFreeCast_"


def undo_cpu_casts(graph: onnx.GraphProto, original: "dict[str, onnx.NodeProto]") -> int:
    """_undo_casts in the graph and every body at any depth; how many casts were removed."""
    from onnx_dml_lowering.lowering.onnx_graphs import iter_graphs
    return sum(_undo_casts(each, original) for each, _ in iter_graphs(graph))


def _undo_casts(graph: onnx.GraphProto, original: "dict[str, onnx.NodeProto]") -> int:
    """Remove the casts a CPU-only session inserts around float16 nodes its CPU EP has no kernel
    for (onnxruntime's InsertCastTransformer runs after partitioning and cannot be disabled): a
    session with the DML EP inserts them only around the float16 nodes no provider took, which
    the placement decides (placement.Predictor._cast_to_float), not this CPU-only session. An
    output-side cast gives its name back to the
    node it follows; an input-side cast is bypassed, and one that replaced a Cast of the model
    (`original`: value -> the node producing it in the model as stored) becomes that Cast again.
    Returns how many were removed from this graph (its bodies aside)."""
    removed = 0
    casts = [n for n in graph.node if n.op_type == "Cast" and n.name.startswith(CPU_CAST_PREFIX)]
    outputs = {o.name for o in graph.output}
    produced = {o for n in graph.node for o in n.output}
    for cast in casts:
        source, target = cast.input[0], cast.output[0]
        value = target[len(CPU_CAST_PREFIX):]
        merged = original.get(value)
        if value not in produced and merged is not None and merged.op_type == "Cast":
            for node in graph.node:
                for i, name in enumerate(node.input):
                    if name == target:
                        node.input[i] = value
            cast.name = merged.name
            cast.output[0] = value
            del cast.attribute[:]
            cast.attribute.extend(merged.attribute)
            produced.add(value)
            continue
        readers = [n for n in graph.node if source in n.input]
        producer = next((n for n in graph.node if source in n.output), None)
        if producer is not None and readers == [cast] and source not in outputs:
            producer.output[list(producer.output).index(source)] = target      # output side
        else:
            for node in graph.node:                                            # input side
                for i, name in enumerate(node.input):
                    if name == target:
                        node.input[i] = source
            if target in outputs:
                continue   # a graph output stays produced by its cast
        graph.node.remove(cast)
        removed += 1
    return removed
