"""Node identity. ONNX does not require node names to be unique, non-empty or valid UTF-8, yet the
partition, the oracle, control flow, onnxruntime's assignment info and every report need a key
per node. So at load every node of the model (main graph, every If / Loop / Scan body at any
depth, every model-local function) gets a name unique across the whole model, once, by its
position; from then on that name *is* the node's identity and the only thing displayed.

- a valid name no other node has is kept as it is;
- an empty name becomes `<OpType>_<index in its graph>`;
- a name that repeats (anywhere in the model) or is not valid UTF-8 becomes `<name>#<k>`, k
  counting its occurrences in traversal order (main graph first, then each body depth-first, then
  functions), so two nodes named `n` are shown as `n#1` and `n#2`; invalid bytes are shown as
  `\\xNN` escapes.
Every candidate is checked against every name already in use, so no rewrite can collide with a
name the model already has."""
from __future__ import annotations

import onnx

from onnx_dml_lowering.lowering.onnx_graphs import all_nodes


def _text(name: "str | bytes") -> "tuple[str, bool]":
    """(the name as text, whether it was valid UTF-8). protobuf hands back bytes for a string
    field that is not valid UTF-8."""
    if isinstance(name, bytes):
        try:
            return name.decode("utf-8"), True
        except UnicodeDecodeError:
            return name.decode("utf-8", "backslashreplace"), False
    return name, True


def identify_nodes(model: onnx.ModelProto) -> "dict[str, str | bytes]":
    """Rename every node of `model` (in place) to its unique identity; returns {identity: the
    original name} for the nodes whose name changed (empty ones included)."""
    nodes = all_nodes(model)
    names = [node.name for _, node in nodes]
    # The common case, every name a distinct non-empty str (protobuf gives bytes only for a name
    # that is not UTF-8): nothing to rename, decided in one set over the names.
    unique = set(names)
    if len(unique) == len(names) and "" not in unique and not any(isinstance(n, bytes) for n in unique):
        return {}
    texts = [_text(name) for name in names]
    counts: "dict[str, int]" = {}
    for text, _valid in texts:
        if text:
            counts[text] = counts.get(text, 0) + 1
    taken = {text for text, valid in texts if valid and text and counts[text] == 1}
    seen: "dict[str, int]" = {}
    renamed: "dict[str, str | bytes]" = {}
    for (index, node), (text, valid) in zip(nodes, texts):
        if text and valid and counts[text] == 1:
            continue
        if not text:
            candidate = f"{node.op_type}_{index}"
            while candidate in taken:
                candidate += "_"
        else:
            k = seen.get(text, 0)
            while True:
                k += 1
                candidate = f"{text}#{k}"
                if candidate not in taken:
                    break
            seen[text] = k
        taken.add(candidate)
        renamed[candidate] = node.name
        node.name = candidate
    return renamed
