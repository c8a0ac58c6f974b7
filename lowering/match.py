"""The shape of every lowering rule, in the manner of onnxscript's rewriter: three plain methods.

Every rule (an ONNX operator on its own, such as NonZero, or an idiom of several nodes around an
anchor op, such as torch.eye's Range / Equal / Cast) is an `IdiomRule`:

- `pattern(anchor, view)`: which nodes, structurally. Walks the graph from the anchor node and
  returns a `Found` (the covered nodes, the tensors the fragment reads at run time, the values
  it produces, and named bindings for the other two methods) or None when the nodes are not
  this rule's (nothing is reported; the next rule is tried).
- `decline_reason(level, **bindings)`: None when the rule applies at this feature level, else the
  reason it does not (reported in the placement if no later rule lowers the anchor).
- `rewrite(f, **bindings)`: builds the IR fragment once the sizes (and, for `value_inputs`, the
  values) of the inputs are known, at compile time or per call at run time. `f` is a
  `Fragment`: the shared setup every rewrite starts from (an empty graph at the level with the
  outputs declared, buffer names, concrete shapes and values). A size or value that does not fit
  raises `Decline(reason)`, the one way a rewrite (or a helper it calls) declines; that call then
  runs on ONNX. `Declined(reason)` is what the registry hands the compiler, never what a rule returns.

A rule anchored at a common op may also override `may_match(node)`: a look at the anchor as stored,
before its NodeInfo is built, False only where pattern gives None (constant_diagonal's at Constant).

A rule is registered with one line giving its name, anchor op and priority (registry.py: larger
patterns first; precedence is the priority alone, no rule looks at another's pattern), with a
comment saying what it rewrites into. docs/rules.md walks through writing one. For example
(helpers from common / diagonal_idioms / diagonal):

    class RangeLessMask(IdiomRule):
        # Less(Unsqueeze(Range(0, n, 1), -1), Range(0, m, 1)) -> DIAGONAL_MATRIX1 above the diagonal
        operators = ("DIAGONAL_MATRIX1",)
        note = "Range, Range, Unsqueeze, Less become one generator"

        def pattern(self, anchor, view):
            ranges = column_ranges(anchor, view)
            if ranges is None:                  # (also: intermediates read nowhere else)
                return None                     # not this idiom: nothing is reported
            unsqueeze, (rows, n), (cols, m) = ranges
            return Found((anchor.name, unsqueeze.name, rows.name, cols.name), (n, m),
                         (anchor.outputs[0].name,), value_inputs=(n.name, m.name), n=n, m=m)

        def decline_reason(self, level, n, m):  # the bindings arrive as keywords
            return level_reason(DIAGONAL_MATRIX1, level)

        def rewrite(self, f, n, m):             # f: the shared Fragment setup
            dims = (range_length(f.value(n)), range_length(f.value(m)))
            return emit_band(f.graph, f.names, f.outputs[0], ONNX_BOOL, dims, 1, 2**63, 1, f.level)

    register_idiom("range_less_mask", "Less", 10, RangeLessMask())  # DIAGONAL_MATRIX1 band
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Union

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError, EmptyTensor, FeatureLevel, Graph, verify_graph

from .node import Names, NodeInfo, TensorInfo

if TYPE_CHECKING:
    import onnx


@dataclass(frozen=True)
class Declined:
    """The outcome of a rule that does not lower (its decline_reason, or a Decline its rewrite
    raised): what the registry returns to the compiler in place of a Match or a fragment."""
    reason: str


class Decline(Exception):
    """The one way a rewrite (or a helper it calls) declines: the concrete sizes or values do not fit."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GraphView(Protocol):
    """What an idiom may ask of the ONNX graph around its anchor (implemented by the compiler)."""

    def producer(self, tensor: str) -> "NodeInfo | None": ...
    def consumers(self, tensor: str) -> "list[NodeInfo]": ...
    def constant(self, tensor: str) -> Any: ...            # np.ndarray for constants, else None
    def is_graph_output(self, tensor: str) -> bool: ...
    def tensor(self, name: str) -> TensorInfo: ...
    def value_prefix(self, tensor: str) -> str: ...        # unique IR prefix for a generated constant


# build(shapes by input name, values of the value inputs, level) -> fragment or Declined
BuildFn = Callable[[Mapping[str, tuple], Mapping[str, Any], FeatureLevel], Union[Graph, Declined]]


@dataclass
class Match:
    rule: str
    nodes: "tuple[str, ...]"                    # covered ONNX nodes, anchor first
    inputs: "tuple[TensorInfo, ...]"            # host tensors the fragment reads at run time
    outputs: "tuple[str, ...]"                  # ONNX values the fragment produces
    build: BuildFn
    operators: "tuple[str, ...]" = ()           # DirectML operators it emits (for the report)
    value_inputs: "tuple[str, ...]" = ()        # inputs whose values, not just sizes, shape it
    note: str = ""
    extra: dict = field(default_factory=dict)   # idiom-specific report fields (bytes saved, ...)
    # Set where the rewrite reads nothing but this and its inputs' types, shapes and values, by
    # position: two matches with equal `portable`, shapes and values build one graph up to names,
    # which the runtime builds once for both (runtime/run_time_builds.py).
    portable: "tuple | None" = None

    def static_shapes(self) -> "dict[str, tuple] | None":
        shapes = {}
        for t in self.inputs:
            if not t.is_static:
                return None
            shapes[t.name] = tuple(t.shape)
        return shapes


class Found:
    """What a pattern matched: the parts of a Match it decides, plus the rule's own bindings
    (keyword arguments of decline_reason and rewrite). `note`, `operators` and `prefix` (the buffer name
    prefix, the anchor's name by default) override the rule's defaults for this match; `portable` is
    Match.portable."""

    def __init__(self, nodes: "tuple[str, ...]", inputs: "tuple[TensorInfo, ...]", outputs: "tuple[str, ...]",
                 value_inputs: "tuple[str, ...]" = (), note: "str | None" = None,
                 operators: "tuple[str, ...] | None" = None, extra: "dict | None" = None,
                 prefix: "str | None" = None, portable: "tuple | None" = None, **bindings: Any) -> None:
        self.nodes, self.inputs, self.outputs = tuple(nodes), tuple(inputs), tuple(outputs)
        self.portable = portable      # Match.portable
        self.value_inputs = tuple(value_inputs)
        self.note, self.operators, self.extra = note, operators, dict(extra or {})
        self.prefix = prefix          # None: the anchor's unique prefix, set by Idiom.match
        self.bindings = bindings


class Fragment:
    """The setup every rewrite shares: an empty graph at the level with the match's outputs
    declared, names for its buffers, and the concrete shapes and values of its inputs."""

    def __init__(self, found: Found, shapes: Mapping[str, tuple], values: Mapping[str, Any],
                 level: FeatureLevel) -> None:
        self.level = level
        self.graph = Graph(level)
        self.graph.outputs.extend(found.outputs)
        self.outputs = found.outputs
        self.names = Names(found.prefix if found.prefix is not None else found.nodes[0])
        self.shapes, self.values = shapes, values

    def tensor(self, t: TensorInfo) -> TensorInfo:
        """`t` with its concrete shape."""
        return TensorInfo(t.name, t.onnx_type, tuple(self.shapes[t.name]))

    def value(self, t: TensorInfo) -> np.ndarray:
        return np.asarray(self.values[t.name])

    def dims(self, t: TensorInfo) -> "tuple[int, ...]":
        """The sizes a shape tensor holds; a negative size declines."""
        dims = tuple(int(d) for d in self.value(t).reshape(-1))
        if any(d < 0 for d in dims):
            raise Decline(f"shape {list(dims)} holds a negative size")
        return dims

    def empty(self, y: str, onnx_type: int, shape: "tuple[Any, ...]") -> Graph:
        """The zero-sized result `y`: no DirectML operator."""
        self.graph.add(EmptyTensor(y, onnx_type, tuple(shape)))
        return self.graph


class IdiomRule:
    """Base of every rule: override pattern and rewrite, and decline_reason if the rule has
    level-dependent reasons to decline. See the module docstring."""

    operators: "tuple[str, ...]" = ()    # DirectML operators it emits (for the report)
    note: str = ""                       # what the placement report says about a lowering

    def may_match(self, node: "onnx.NodeProto") -> bool:
        """A cheap look at the anchor as stored, before its NodeInfo is built (a few tens of
        microseconds each, on thousands of nodes): False only where pattern would give None."""
        return True

    def pattern(self, anchor: NodeInfo, view: GraphView) -> "Found | None":
        raise NotImplementedError

    def decline_reason(self, level: FeatureLevel, *args: Any, **bindings: Any) -> "str | None":
        return None

    def rewrite(self, f: Fragment, *args: Any, **bindings: Any) -> Graph:
        raise NotImplementedError


def verified(build: Callable[[], Graph]) -> "Union[Graph, Declined]":
    """Run a fragment builder and verify its result; a descriptor the level rejects, or a
    Decline raised by the builder, declines."""
    try:
        result = build()
        verify_graph(result)
    except Decline as exc:
        return Declined(exc.reason)
    except DmlLowerError as exc:
        return Declined(str(exc))
    return result


def sole_consumer(view: GraphView, tensor: str) -> "NodeInfo | None":
    """The one node reading `tensor`, if exactly one does and it is no graph output."""
    users = view.consumers(tensor)
    if len(users) != 1 or view.is_graph_output(tensor):
        return None
    return users[0]


def sole_producer(view: GraphView, tensor: str, *op_types: str) -> "NodeInfo | None":
    """The node of one of `op_types` producing `tensor`, if `tensor` is read by one node only."""
    node = view.producer(tensor)
    if node is None or node.op_type not in op_types or sole_consumer(view, tensor) is None:
        return None
    return node


def constant_ints(view: GraphView, node: NodeInfo, index: int, attr: str) -> "list[int] | None":
    """An int list given as input `index` (newer opsets) or as attribute `attr` (older)."""
    if index < len(node.inputs) and node.inputs[index] is not None:
        value = view.constant(node.input(index).name)
        return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]
    value = node.attrs.get(attr)
    return None if value is None else [int(v) for v in value]


def constant_scalar(view: GraphView, tensor: "TensorInfo | None") -> Any:
    """The Python value of a one-element constant, else None."""
    value = None if tensor is None else view.constant(tensor.name)
    if value is None or np.asarray(value).size != 1:
        return None
    return np.asarray(value).reshape(-1)[0].item()


def producer_through(view: GraphView, tensor: str, *op_types: str) -> "tuple[NodeInfo, tuple[NodeInfo, ...]] | None":
    """sole_producer looking through Identity nodes (a value-preserving step exporters such as
    paddle2onnx leave between a fill and its user): the node of one of `op_types` and the
    Identities passed, each read by the next node alone."""
    passed: "list[NodeInfo]" = []
    while True:
        node = sole_producer(view, tensor, "Identity", *op_types)
        if node is None or node.op_type in op_types or len(passed) > 16:
            return None if node is None or node.op_type not in op_types else (node, tuple(passed))
        passed.append(node)
        tensor = node.input(0).name
