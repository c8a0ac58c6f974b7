"""The DML EP's support queries (DML_EP_PLACEMENT.md §2.2): each looks at attributes, input and
output counts and types only, so each is reproduced here. A query returns "" to accept, a reason
to reject, or is absent (None from support_query: not modelled, said as a warning)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import onnx


def _attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _present(names: "Sequence[str]", index: int) -> bool:
    return index < len(names) and bool(names[index])


def _slice(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    return f"{len(node.input)} inputs (at most 5)" if len(node.input) > 5 else ""


def _scatter(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    reduction = _attr(node, "reduction", b"none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    return f"reduction {reduction!r} (only 'none')" if reduction != "none" else ""


def _max_pool(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    return "storage_order 1 (only 0)" if _attr(node, "storage_order", 0) != 0 else ""


def _pad(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    pads = _attr(node, "pads", []) or []
    return "a negative pad" if any(p < 0 for p in pads) else ""


def _resize(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    mode = _attr(node, "mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode == "cubic":
        return "mode 'cubic'"
    if _attr(node, "exclude_outside", 0) != 0:
        return "exclude_outside != 0"
    if _attr(node, "extrapolation_value", 0.0) != 0.0:
        return "extrapolation_value != 0"
    return ""


def _rnn(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    return "layout 1 (only 0)" if _attr(node, "layout", 0) != 0 else ""


def _layer_norm(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    outputs = [o for o in node.output if o]
    return f"{len(outputs)} outputs (only 1)" if len(outputs) > 1 else ""


def _skip_layer_norm(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    return "the mean or inv_std_var output is present" if _present(node.output, 1) or _present(node.output, 2) else ""


def _qlinear_sigmoid(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    return f"{len(node.input)} inputs (needs 5)" if len(node.input) < 5 else ""


def _batch_norm(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    if _attr(node, "training_mode", 0) != 0:
        return "training_mode 1"
    if len(node.input) < 5:
        return f"{len(node.input)} inputs (needs 5)"
    x = types.get(node.input[0])
    for name in node.input[1:5]:
        if x is not None and types.get(name) not in (None, x):
            return f"input {name!r} is {types.get(name)}, not the input's {x}"
    return ""


def _matmul_nbits(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    bits, k, block = _attr(node, "bits", 4), _attr(node, "K", 0), _attr(node, "block_size", 0)
    if bits not in (4, 8):
        return f"bits {bits} (only 4 or 8)"
    if block and k % block:
        return f"K {k} is not a multiple of block_size {block}"
    return ""


def _attention(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    if _present(node.input, 4) or _present(node.input, 6) or _present(node.output, 1):
        return "past / past_sequence_length / present is used"
    for flag in ("unidirectional", "do_rotary", "past_present_share_buffer"):
        if _attr(node, flag, 0) == 1:
            return f"{flag}=1"
    return ""


def _qattention(node: onnx.NodeProto, types: "dict[str, str]") -> str:
    if _attr(node, "unidirectional", 0) == 1 and _present(node.input, 5):
        return "unidirectional=1 with a mask"
    for flag in ("do_rotary", "past_present_share_buffer"):
        if _attr(node, flag, 0) == 1:
            return f"{flag}=1"
    return ""


QUERIES: "dict[str, Callable[[onnx.NodeProto, dict], str]]" = {
    "QuerySlice": _slice, "QueryScatter": _scatter, "QueryMaxPool": _max_pool, "QueryPad": _pad,
    "QueryResize": _resize, "QueryRecurrentNeuralNetwork": _rnn, "QueryLayerNormalization": _layer_norm,
    "QuerySkipLayerNormalization": _skip_layer_norm, "QueryQLinearSigmoid": _qlinear_sigmoid,
    "QueryBatchNormalization": _batch_norm, "QueryMatMulNBits": _matmul_nbits, "QueryAttention": _attention,
    "QueryQAttention": _qattention,
    # QueryEinSum asks the EinSum helper whether it can map the equation: not reproduced here.
}


def support_query(name: str, node: onnx.NodeProto, types: dict) -> "str | None":
    """"" accepted, a reason rejected, None when the query is not modelled."""
    query = QUERIES.get(name)
    return None if query is None else query(node, types)
