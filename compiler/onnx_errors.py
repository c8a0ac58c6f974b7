"""onnx's checker and shape-inference messages as one readable line.

Shape inference reports every failing node on a line of its own, nesting a subgraph's errors inside
its control-flow node's ("Inference error(s): (op_type:If, node name: ...): ... "); on a decoder
whose If branches all fail that is hundreds of lines, 10-18k characters once joined. The checker's
one error may span lines (a node dumped in text format). The line kept: the first error whole (its
lines joined), the nesting spelled as a path of nodes, the count of the others, a bounded length."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Mapping

from onnx_dml_lowering.runtime.onnx_inference import inference_notes

if TYPE_CHECKING:
    import onnx

# Past this a message is a dump, not a reason (a node printed whole, a long list of values).
MESSAGE_LIMIT = 400

_WRAPPER = re.compile(r"\[\w+\] Inference error\(s\): ")
_NODE = re.compile(r"\(op_type:([\w.]+)(?:, node name: (.*?))?\): ")


# onnx writes element types as its enum's numbers ('elem type: (1) vs (7)'): spelled as ONNX names them
_ELEM_TYPES = re.compile(r"(elem type[^()]*?)\((\d+)\) vs \((\d+)\)")


def _type_name(number: str) -> str:
    import onnx
    try:
        return onnx.TensorProto.DataType.Name(int(number)).lower()
    except ValueError:              # a number onnx's enum does not hold: as onnx wrote it
        return f"type {number}"


def _elem_types(match: "re.Match[str]") -> str:
    return f"{match.group(1)}{_type_name(match.group(2))} vs {_type_name(match.group(3))}"


def _node(match: "re.Match[str]") -> str:
    op, name = match.group(1), match.group(2)
    return f"node {name!r} ({op}): " if name else f"{op} node: "


def onnx_message(exc: BaseException, restore: "Mapping[str, str] | None" = None,
                 limit: int = MESSAGE_LIMIT) -> str:
    """The first error onnx reports in `exc` as one line of at most about `limit` characters,
    temporary value names (`restore`: temporary -> original) spelled as the model spells them."""
    lines = [" ".join(line.split()) for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    # Each further error of an inference list starts a line with "(op_type:"; other lines continue one.
    errors = [lines[0]]
    for line in lines[1:]:
        if line.startswith("(op_type:"):
            errors.append(line)
        else:
            errors[-1] += " " + line
    text = _ELEM_TYPES.sub(_elem_types, _NODE.sub(_node, _WRAPPER.sub("", errors[0])))
    # longest first: 'x~1' must not rewrite part of 'x~10'
    for temporary, original in sorted((restore or {}).items(), key=lambda item: -len(item[0])):
        if temporary in text:
            text = text.replace(temporary, original)
    if len(text) > limit:
        text = text[:limit].rstrip() + "..."
    more = len(errors) - 1
    return text + (f" (and {more} more error{'s' if more > 1 else ''})" if more else "") + inference_notes(exc)


def explain_checker(model: "onnx.ModelProto", message: str, what: str = "") -> str:
    """The checker's first line, with the node or value it is about named where it does not, led
    by `what` (the model file) where given."""
    lead = f"{what}: " if what else ""
    missing_op = re.search(r"No Op registered for (\S+) with domain_version of (\d+)", message)
    if missing_op:
        op, version = missing_op.groups()
        node = next((n for n in model.graph.node if n.op_type == op), None)
        if node is not None:
            return (f"{lead}node {node.name or node.op_type!r}: {op} does not exist at opset {version} "
                    f"of its domain (ONNX checker: {message})")
    if "Field 'shape' of 'type' is required" in message:
        for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
            for vi in values:
                if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape"):
                    return (f"{lead}graph {kind} {vi.name!r} has no shape; the ONNX checker requires one "
                            "(an empty shape for a scalar, dim_param for unknown sizes)")
    return f"{what or 'model'} fails the ONNX checker: {message}"
