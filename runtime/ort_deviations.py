"""onnxruntime's own deviations from ONNX semantics, among operators real exports use: one table.

Each entry names an operator, the condition (attributes, input presence, a rank shape inference
knows) under which onnxruntime's CPU kernel computes something other than the ONNX spec, and
what it computes instead. Every entry is confirmed on the installed onnxruntime by a differential
test against onnx.reference (tests/runtime/test_ort_deviations.py), which also proves that nodes
outside the condition agree (so they stay on onnxruntime).

The table is used in three places, so a deviation is handled the same way everywhere:
- the hybrid oracle evaluates a node the table names with the ONNX definitions (numpy or
  onnx.reference), never onnxruntime (oracle.Oracle.engine_of);
- a region of the lowered run holding such a node does not run on onnxruntime (region_engine's
  onnxruntime engine refuses it with the entry's reason, and the chain's next engine runs it);
- a provider backend (`ort-cpu`, `ort:<EP>` ...) whose answer is onnxruntime's reading is a
  DEVIATION naming the entry, not a MISMATCH (runtime/ort_reading.py).
Scalar NonZero's entry is reported by check's own rule (its shape alone says which reading it is).
Sources searched: onnxruntime's GitHub issues and the ONNX backend tests its CI excludes
(onnx_backend_test_series_filters.jsonc), each re-run on the installed onnxruntime.
"""
from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np
import onnx

from onnx_dml_lowering.lowering.onnx_graphs import is_standard, iter_scoped, may_hold_bodies

# value name -> its rank where known (None or absent: unknown)
Ranks = Mapping[str, "int | None"]


@dataclass(frozen=True)
class OrtDeviation:
    key: str
    op_type: str
    condition: str          # when onnxruntime deviates (displayed, and in the docs' table)
    reading: str            # what onnxruntime computes, and what ONNX says
    applies: Callable[[onnx.NodeProto, Ranks, Mapping[str, onnx.TensorProto]], bool]

    @property
    def name(self) -> str:
        """The line a DEVIATION carries."""
        return f"known onnxruntime deviation ({self.key}): {self.reading}"


def _attribute(node: onnx.NodeProto, name: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _input(node: onnx.NodeProto, index: int) -> str:
    return node.input[index] if len(node.input) > index else ""


def _scalar_nonzero(node: onnx.NodeProto, ranks: Ranks, constants: Mapping[str, onnx.TensorProto]) -> bool:
    return ranks.get(node.input[0]) in (None, 0)


def _split_to_sequence(node: onnx.NodeProto, ranks: Ranks, constants: Mapping[str, onnx.TensorProto]) -> bool:
    # a split input that is (or may be) a scalar, with keepdims=0 (ONNX ignores keepdims then)
    split = _input(node, 1)
    return bool(split) and _attribute(node, "keepdims", 1) == 0 and ranks.get(split) in (None, 0)


def _resize_align_corners(node: onnx.NodeProto, ranks: Ranks, constants: Mapping[str, onnx.TensorProto]) -> bool:
    # sizes given (input 3): the output lengths are the sizes themselves, and both agree
    scales, sizes = _input(node, 2), _input(node, 3)
    if _attribute(node, "coordinate_transformation_mode", b"half_pixel") != b"align_corners" or not scales or sizes:
        return False
    given = constants.get(scales)
    if given is None or given.data_location == onnx.TensorProto.EXTERNAL:
        return True             # computed at run time (or not read here): may be fractional
    values = onnx.numpy_helper.to_array(given).reshape(-1)
    return bool(np.any(values != np.round(values)))


# The ends onnxruntime's Slice reads as "to the start" when stepping backwards (INT32_MAX, INT64_MAX),
# where ONNX clamps them to the axis's last element: nothing is taken.
_SENTINEL_ENDS = (2**31 - 1, 2**63 - 1)


def _slice_backwards_to_sentinel(node: onnx.NodeProto, ranks: Ranks, constants: Mapping[str, onnx.TensorProto]) -> bool:
    # a constant negative step whose end is one of the sentinels (or computed at run time); steps
    # computed at run time are taken as positive: TorchScript writes its steps of 1 as
    # Unsqueeze(Constant), and a backwards step always comes as a constant (x[::-1], flip)
    steps, ends = _input(node, 4), _input(node, 2)
    if not steps:
        return False                # Slice-1, or no steps input: every step is 1
    values = [_constant(constants, name) for name in (steps, ends)]
    if values[0] is None or not np.any(values[0] < 0):
        return False
    if values[1] is None or values[1].size != values[0].size:
        return True
    return bool(np.any((values[0] < 0) & np.isin(values[1], _SENTINEL_ENDS)))


def _constant(constants: Mapping[str, onnx.TensorProto], name: str) -> "np.ndarray | None":
    given = constants.get(name)
    if given is None or given.data_location == onnx.TensorProto.EXTERNAL:
        return None                 # computed at run time (or not read here)
    return onnx.numpy_helper.to_array(given).reshape(-1)


TABLE: "tuple[OrtDeviation, ...]" = (
    OrtDeviation("scalar_nonzero", "NonZero", "the input is (or may be) a scalar",
                 "onnxruntime gives (1, nnz) for a scalar NonZero; ONNX says (0, nnz)", _scalar_nonzero),
    OrtDeviation("split_to_sequence_keepdims", "SplitToSequence",
                 "keepdims=0 and a `split` input that is (or may be) a scalar",
                 "onnxruntime's SplitToSequence with keepdims=0 and a scalar split drops the split axis (split 1) "
                 "or fails (split > 1); ONNX ignores keepdims when split is given and keeps the axis",
                 _split_to_sequence),
    OrtDeviation("resize_align_corners_scales", "Resize",
                 "coordinate_transformation_mode=align_corners, a `scales` input and no `sizes`, the scales not "
                 "all whole numbers (or computed at run time)",
                 "onnxruntime's Resize with align_corners and scales maps output coordinates otherwise than ONNX's "
                 "x_out * (in - 1) / (out - 1) where an input length times its scale is not whole",
                 _resize_align_corners),
    OrtDeviation("slice_backwards_sentinel_end", "Slice",
                 "a constant negative step whose end is 2^31-1 or 2^63-1 (or computed at run time)",
                 "onnxruntime's Slice stepping backwards reads an end of 2^31-1 or 2^63-1 as 'to the start' and "
                 "takes elements; ONNX clamps the end to the axis's last index and takes none",
                 _slice_backwards_to_sentinel),
)
BY_KEY = {entry.key: entry for entry in TABLE}
_READS_CONSTANTS = {"Resize", "Slice"}     # the operators whose condition reads a constant input
_BY_OP = {entry.op_type: entry for entry in TABLE}


def deviation(node: onnx.NodeProto, ranks: Ranks, constants: "Mapping[str, onnx.TensorProto] | None" = None
              ) -> "OrtDeviation | None":
    """The table's entry whose condition this node meets (default domain), or None."""
    entry = _BY_OP.get(node.op_type)
    if entry is None or not is_standard(node):
        return None
    return entry if entry.applies(node, ranks, constants or {}) else None


def _body_ranks(graph: onnx.GraphProto, outer: Ranks) -> "dict[str, int | None]":
    ranks = dict(outer)
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        tensor = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tensor.HasField("shape"):
            ranks[vi.name] = len(tensor.shape.dim)
    ranks.update((t.name, len(t.dims)) for t in graph.initializer)
    return ranks


def first_deviation(nodes: "Iterable[onnx.NodeProto]", ranks: Ranks,
                    constants: "Mapping[str, onnx.TensorProto] | None" = None) -> "tuple[onnx.NodeProto, OrtDeviation] | None":
    """The first node (If / Loop / Scan bodies looked into, at any depth) the table names."""
    nodes = list(nodes)
    # (ranks, constants) a node sees, by the ids of the bodies enclosing it (each kept alive in
    # `held`, so no id is reused): a body sees its enclosing graphs' and its own
    facts: "dict[tuple[int, ...], tuple[Ranks, Mapping[str, onnx.TensorProto]]]" = {
        (): (ranks, _with_constant_nodes(nodes, constants))}
    held = []
    for node, scopes in iter_scoped(nodes):
        key = tuple(map(id, scopes))
        if key not in facts:
            held.append(scopes)
            outer_ranks, outer_constants = facts[key[:-1]]
            body = scopes[-1]
            facts[key] = (_body_ranks(body, outer_ranks),
                          _with_constant_nodes(body.node, ChainMap({t.name: t for t in body.initializer}, outer_constants)))  # type: ignore[arg-type]  # read only
        entry = deviation(node, *facts[key])
        if entry is not None:
            return node, entry
    return None


def constant_nodes(nodes: "Iterable[onnx.NodeProto]") -> "dict[str, onnx.TensorProto]":
    """The tensors Constant nodes among `nodes` hold (exporters write a Resize's scales so)."""
    return {node.output[0]: node.attribute[0].t for node in nodes
            if node.op_type == "Constant" and is_standard(node) and len(node.attribute) == 1
            and node.attribute[0].name == "value" and node.output}


class _Constants(Mapping):
    """`constants` and the tensors of the Constant nodes among `nodes`, each read when asked for: a
    large export holds a thousand Constant nodes (9 ms to read them all on GPT-2) and a condition
    asks for the one or two its node reads."""

    def __init__(self, nodes: "Iterable[onnx.NodeProto]", constants: "Mapping[str, onnx.TensorProto]") -> None:
        self._given = constants
        self._nodes = {node.output[0]: node for node in nodes if node.op_type == "Constant" and node.output}

    def __getitem__(self, name: str) -> onnx.TensorProto:
        if name in self._given:
            return self._given[name]
        found = constant_nodes([self._nodes[name]])      # KeyError where it is no such Constant
        return found[name]

    def __iter__(self) -> "Iterator[str]":
        return iter({**self._given, **constant_nodes(self._nodes.values())})

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:         # `constants or {}` asks: never by reading every Constant
        return bool(self._given) or bool(self._nodes)


def _with_constant_nodes(nodes: "Iterable[onnx.NodeProto]", constants: "Mapping[str, onnx.TensorProto] | None") -> "Mapping[str, onnx.TensorProto]":
    """`constants` and, where an operator whose condition reads constants is among the nodes, the
    Constant nodes' tensors (each read when a condition asks for it)."""
    nodes = list(nodes)
    if not any(node.op_type in _READS_CONSTANTS for node in nodes):
        return constants or {}
    return _Constants(nodes, constants or {})


def region_reason(nodes: "Iterable[onnx.NodeProto]", ranks: Ranks,
                  constants: "Mapping[str, onnx.TensorProto] | None" = None) -> "str | None":
    """Why onnxruntime must not run these nodes (a region of the lowered run), or None."""
    found = first_deviation(nodes, ranks, constants)
    if found is None:
        return None
    node, entry = found
    return f"node {node.name}: {entry.reading}"


def deviating_nodes(graph: onnx.GraphProto, ranks: Ranks, constants: "Mapping[str, onnx.TensorProto]",
                    tensors: "Callable[[str], bool]") -> "dict[str, OrtDeviation]":
    """Node name -> entry for the graph's nodes the table names (control flow holding one, at any
    depth, included), and with them the nodes that read a non-tensor value (a sequence) they make,
    transitively: engines hand each other tensors, so a sequence stays on the engine that made it.
    `tensors(name)`: the value is a tensor."""
    found: "dict[str, OrtDeviation]" = {}
    made: "dict[str, OrtDeviation]" = {}      # sequence value -> the entry of the node that made it
    constants = _with_constant_nodes(graph.node, constants)
    for node in graph.node:
        entry = deviation(node, ranks, constants)
        if entry is None and may_hold_bodies(node):
            hit = first_deviation([node], ranks, constants)
            entry = hit[1] if hit is not None else None
        if entry is None and made:
            entry = next((made[n] for n in node.input if n in made), None)
        if entry is not None:
            found[node.name] = entry
            made.update((o, entry) for o in node.output if o and not tensors(o))
    return found


def failing_deviation(graph: onnx.GraphProto, node_name: str, op_type: str, ranks: Ranks) -> "OrtDeviation | None":
    """The table's entry a main-graph node onnxruntime failed to run (ort_messages.run_failure_node)
    meets: its failure is that listed deviation (SplitToSequence with a scalar split > 1)."""
    node = next((n for n in graph.node if n.name == node_name and n.op_type == op_type), None)
    if node is None:
        return None
    return deviation(node, ranks, _with_constant_nodes([node], {t.name: t for t in graph.initializer}))
