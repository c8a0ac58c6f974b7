"""ONNX nodes that generate a band of diagonals (value c on diagonals x - y in [begin, end), or
outside them, +0 elsewhere) in forms onnxruntime's CPU provider runs bit-exactly.

onnxruntime CPU (1.31) has Trilu only for float, double, float16, int32, int64 and bool, and
EyeLike only for float, double, int32, int64 and uint64; ConstantOfShape has no bfloat16. Other
types are generated in a carrier type that holds the value exactly and Cast, which is then exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

TRILU_TYPES = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT32,
               TensorProto.INT64, TensorProto.BOOL}
EYELIKE_TYPES = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64}
# Carriers: every value of the type converts to the carrier and back unchanged.
CARRIERS: "dict[int, int]" = {TensorProto.INT8: TensorProto.INT64, TensorProto.UINT8: TensorProto.INT64,
            TensorProto.INT16: TensorProto.INT64, TensorProto.UINT16: TensorProto.INT64,
            TensorProto.UINT32: TensorProto.INT64, TensorProto.BFLOAT16: TensorProto.FLOAT}
TRILU_OPSET, EYELIKE_OPSET = 14, 9


@dataclass
class Generator:
    """Nodes and small initializers whose last node writes `output`."""
    nodes: "list[NodeProto]" = field(default_factory=list)
    initializers: "list[TensorProto]" = field(default_factory=list)
    ops: "list[str]" = field(default_factory=list)
    opset: int = 0

    def size(self) -> int:
        """Serialized bytes this adds to the model (field tags and lengths included)."""
        return sum(n.ByteSize() + 4 for n in self.nodes) + sum(t.ByteSize() + 4 for t in self.initializers)


def _scalar(onnx_type: int, value: Any) -> TensorProto:
    dtype = helper.tensor_dtype_to_np_dtype(onnx_type)
    return numpy_helper.from_array(np.array([value]).astype(dtype), "value")


def carrier_value(value: Any, onnx_type: int) -> "tuple[int, Any] | None":
    """(generating type, value in it) such that Cast back to `onnx_type` gives `value`'s bits;
    None when onnxruntime has no exact form (uint64, float8 and 4-bit types)."""
    if onnx_type in TRILU_TYPES:
        return onnx_type, value
    carrier = CARRIERS.get(onnx_type)
    if carrier is None:
        return None
    if onnx_type == TensorProto.BFLOAT16:
        wide = np.float32(ml_dtypes.bfloat16(value))
        # bfloat16 -> float32 widens exactly; float32 -> bfloat16 of that value rounds to itself.
        if np.isnan(wide) or np.asarray(ml_dtypes.bfloat16(wide)).tobytes() != \
                np.asarray(ml_dtypes.bfloat16(value)).tobytes():
            return None
        return carrier, wide
    return carrier, int(value)


def band_generator(output: str, prefix: str, onnx_type: int, shape: "tuple[int, ...]", begin: int, end: int,
                   value: Any, inverted: bool) -> "Generator | None":
    """Nodes writing `output`, or None when no form is exact on onnxruntime CPU."""
    rows, cols = shape[-2:]
    gen = Generator()
    shape_name = f"{prefix}_shape"
    gen.initializers.append(numpy_helper.from_array(np.array(shape, np.int64), shape_name))
    typed = np.array(value, dtype=helper.tensor_dtype_to_np_dtype(onnx_type))
    is_one = typed.tobytes() == np.array(1, dtype=typed.dtype).tobytes()
    if (not inverted and end == begin + 1 and is_one and len(shape) == 2 and onnx_type in EYELIKE_TYPES):
        zeros = f"{prefix}_zeros"
        gen.nodes += [helper.make_node("ConstantOfShape", [shape_name], [zeros], name=f"{prefix}_fill"),
                      helper.make_node("EyeLike", [zeros], [output], name=f"{prefix}_eye", k=begin,
                                       dtype=onnx_type)]
        gen.ops, gen.opset = ["ConstantOfShape", "EyeLike"], EYELIKE_OPSET
        return gen
    carried = carrier_value(value, onnx_type)
    if carried is None:
        return None
    work_type, work_value = carried
    if inverted and np.signbit(typed) and typed.dtype.kind == "f" and typed == 0:
        return None                         # -0.0 + +0.0 is +0.0: the two halves cannot be added
    fill = f"{prefix}_fill"
    gen.nodes.append(helper.make_node("ConstantOfShape", [shape_name], [fill], name=fill,
                                      value=_scalar(work_type, work_value)))
    gen.ops.append("ConstantOfShape")
    last = output if work_type == onnx_type else f"{prefix}_band"

    def trilu(source: str, k: int, upper: int, out: str, tag: str) -> str:
        k_name = f"{prefix}_k{tag}"
        gen.initializers.append(numpy_helper.from_array(np.array(k, np.int64), k_name))
        gen.nodes.append(helper.make_node("Trilu", [source, k_name], [out], name=f"{prefix}_trilu{tag}",
                                          upper=upper))
        gen.ops.append("Trilu")
        return out

    if not inverted:
        current = fill
        needs_low, needs_high = begin > -(rows - 1), end - 1 < cols - 1
        if needs_low:
            current = trilu(current, begin, 1, last if not needs_high else f"{prefix}_upper", "_lo")
        if needs_high:
            current = trilu(current, end - 1, 0, last, "_hi")
    else:
        low = trilu(fill, begin - 1, 0, f"{prefix}_below", "_lo")
        high = trilu(fill, end, 1, f"{prefix}_above", "_hi")
        combine = "Or" if work_type == TensorProto.BOOL else "Add"
        gen.nodes.append(helper.make_node(combine, [low, high], [last], name=f"{prefix}_join"))
        gen.ops.append(combine)
    if work_type != onnx_type:
        gen.nodes.append(helper.make_node("Cast", [last], [output], name=f"{prefix}_cast", to=onnx_type))
        gen.ops.append("Cast")
    gen.opset = TRILU_OPSET if "Trilu" in gen.ops else EYELIKE_OPSET
    return gen
