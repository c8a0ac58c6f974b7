"""onnx's Backend interface over the compiler and the CPU emulator, so that
`onnx.backend.test.BackendTest(onnx_dml_lowering.compiler.backend, __name__)` runs onnx's own node tests."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep, namedtupledict

from onnx_dml_lowering.ir import DEFAULT_LEVEL, DmlLowerError


if TYPE_CHECKING:
    from .compiled import CompiledModel

class EmulatorRep(BackendRep):
    """A compiled model ready to run repeatedly."""

    def __init__(self, compiled: CompiledModel) -> None:
        self.compiled = compiled

    def run(self, inputs: Any, **kwargs: Any) -> "tuple[Any, ...]":
        names = [vi.name for vi in self.compiled.inputs]
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            inputs = list(inputs)
            if len(inputs) > len(names):      # zip would drop the extra ones without a word
                raise DmlLowerError(f"{len(inputs)} inputs given in order, but the model has {len(names)} "
                                    f"({', '.join(names) or 'none'})")
            feeds = dict(zip(names, inputs))
        outputs = self.compiled.run(feeds, strict=kwargs.get("strict"))
        return namedtupledict("Outputs", self.compiled.output_names)(
            *[outputs[n] for n in self.compiled.output_names])


class EmulatorBackend(Backend):
    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> EmulatorRep:
        from onnx_dml_lowering.compiler import compile_model
        if not cls.supports_device(device):
            raise DmlLowerError(f"device {device!r}: this backend runs the lowered graph on the CPU emulator only "
                                "(supports_device says so)")
        return EmulatorRep(compile_model(model, feature_level=kwargs.get("feature_level", DEFAULT_LEVEL)))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> Any:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: "Sequence[tuple[np.dtype, tuple[int, ...]]] | None" = None, **kwargs: Any) -> Any:
        """Wrap one node in a model typed from the inputs and outputs_info, and run it.

        A node with subgraphs (If / Loop / Scan) takes, after its own inputs, the outer values its
        subgraphs read, in first-read order (lowering.onnx_graphs.node_reads)."""
        from onnx_dml_lowering.ir.dtypes import numpy_to_onnx
        from onnx_dml_lowering.lowering.onnx_graphs import node_reads
        # in this machine's byte order: a big-endian array is the same values (compiled.run takes it too)
        arrays = [a.astype(a.dtype.newbyteorder("=")) if a.dtype.byteorder == (">" if np.little_endian else "<")
                  else a for a in (np.asarray(a) for a in inputs)]
        names = node_reads(node)
        if len(arrays) != len(names):
            raise DmlLowerError(f"run_node: node {node.name or node.op_type} reads {len(names)} values "
                                f"({', '.join(names)}), {len(arrays)} inputs given")
        in_vis = [helper.make_tensor_value_info(n, numpy_to_onnx(a.dtype), list(a.shape))
                  for n, a in zip(names, arrays)]
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())

        def model_of(out_vis: list) -> onnx.ModelProto:
            return helper.make_model(helper.make_graph([node], "run_node", in_vis, out_vis),
                                     opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
        if outputs_info is None:        # onnx's signature has it optional: the outputs typed by shape inference
            out_vis = _inferred_outputs(node, model_of([helper.make_value_info(n, onnx.TypeProto())
                                                        for n in node.output if n]))
        else:
            out_vis = [helper.make_tensor_value_info(n, numpy_to_onnx(dt), [None] * len(shape))
                       for n, (dt, shape) in zip(node.output, outputs_info)]
        return cls.run_model(model_of(out_vis), arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper() == "CPU"


def _inferred_outputs(node: onnx.NodeProto, model: onnx.ModelProto) -> "list[onnx.ValueInfoProto]":
    """The node's outputs as onnx's shape inference types them (element type and rank; sizes left
    free), or one line naming the output it cannot type."""
    from onnx_dml_lowering.ir.display import display
    from onnx_dml_lowering.ir.errors import first_line
    shown = display(node.name or node.op_type)
    from onnx_dml_lowering.runtime.onnx_inference import infer_shapes
    try:
        inferred = infer_shapes(model, strict_mode=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise DmlLowerError(f"run_node: node '{shown}': onnx's shape inference fails on it ({first_line(exc)}): "
                            "give outputs_info, a (dtype, shape) for each output") from None
    out_vis = []
    for info in inferred.graph.output:
        tensor = info.type.tensor_type
        if not info.type.HasField("tensor_type") or not tensor.elem_type or not tensor.HasField("shape"):
            raise DmlLowerError(f"run_node: node '{shown}': onnx's shape inference gives output '{display(info.name)}' "
                                "no tensor type and rank: give outputs_info, a (dtype, shape) for each output")
        out_vis.append(helper.make_tensor_value_info(info.name, tensor.elem_type, [None] * len(tensor.shape.dim)))
    return out_vis


prepare = EmulatorBackend.prepare
run_model = EmulatorBackend.run_model
run_node = EmulatorBackend.run_node
supports_device = EmulatorBackend.supports_device
is_compatible = EmulatorBackend.is_compatible
