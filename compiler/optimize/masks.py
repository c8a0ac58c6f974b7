"""optimize's mask pass: a Range-comparison attention mask (lowering.mask_idioms' pattern: causal,
sliding-window and offset masks, And / Or / Not of them, an optional Cast) becomes Trilu over
ConstantOfShape, in ONNX, where that is fewer nodes and bit-identical on onnxruntime CPU for every
input. The mask's sizes are run-time values: the ConstantOfShape reads the 1-D Shape-derived
tensor the Range limit is squeezed from (or Shape of the Range), so nothing is fixed at export
sizes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.lowering.diagonal_idioms import range_length
from onnx_dml_lowering.lowering.diagonal_sets import COMPARISONS, INF, Affine, Expr, as_band, diagonals, leaves
from onnx_dml_lowering.lowering.mask_idioms import RULE, Index
from onnx_dml_lowering.lowering.trilu_band import TRILU_BAND, leaf_gaps
from onnx_dml_lowering.lowering.registry import first_pattern
from onnx_dml_lowering.lowering.onnx_graphs import is_standard

from ..generators import TRILU_OPSET, TRILU_TYPES
from onnx_dml_lowering.runtime.model_facts import value_types
from onnx_dml_lowering.runtime.weights import proto_bytes
from onnx_dml_lowering.runtime.onnx_inference import infer_shapes
from ..graph_view import OnnxGraphView

INT64 = TensorProto.INT64
# Constant gaps are added to int64 index values below 2^62 (no tensor that large exists): no wrap.
GAP_BOUND = 2**61


class Kept(Exception):
    """The mask stays as it is; the message says why."""


@dataclass
class Length:
    """A Range's length: a static int, or a 1-D one-element int64 tensor (`shape_of`: the Range
    output whose Shape gives it, when no such tensor exists yet)."""
    static: "int | None" = None
    tensor: "str | None" = None
    shape_of: "str | None" = None

    @property
    def key(self) -> Any:
        return self.static if self.static is not None else (self.tensor, self.shape_of)


def _nonnegative(view: OnnxGraphView, tensor: str) -> bool:
    """`tensor` holds sizes: a Shape output, or a Slice / Gather of one."""
    node = view.producer(tensor)
    if node is None:
        return False
    if node.op_type in ("Slice", "Gather"):
        node = view.producer(node.input(0).name)
    return node is not None and node.op_type == "Shape"


def index_length(view: OnnxGraphView, ix: Index) -> Length:
    """How the rewrite gets the length of the Range that index `ix` counts along: static, the 1-D
    Shape-derived tensor its limit is squeezed from, or Shape of the Range (lowering's range_length
    is the static count alone); Kept when the Range's type or start rules the rewrite out."""
    rng = ix.steps[0].node
    if ix.onnx_type != INT64:
        raise Kept(f"its Range {rng.name} is {TensorProto.DataType.Name(ix.onnx_type).lower()}, not int64: "
                   "index values could round or wrap where Trilu's do not")
    if ix.steps[0].offset != Affine(0):
        raise Kept(f"its Range {rng.name} does not start at a constant 0: the length would need "
                   "Sub and Max nodes")
    if not ix.limit.terms:
        return Length(static=range_length(ix.limit.const))
    limit = rng.input(1).name
    squeeze = view.producer(limit)
    if squeeze is not None and squeeze.op_type in ("Squeeze", "Reshape"):
        source = squeeze.input(0)
        shape = view.tensor(source.name).shape or source.shape
        if shape == (1,) and source.onnx_type == INT64 and _nonnegative(view, source.name):
            return Length(tensor=source.name)
    return Length(shape_of=rng.outputs[0].name)


def run_time_offsets(expr: Expr) -> "list[str]":
    cmps = [leaf for leaf in leaves(expr) if leaf.kind == "cmp"]
    return [name for leaf in cmps for ix in (leaf.column, leaf.row)
            for step in ix.steps if step.op == "offset" and step.offset.terms for name, _ in step.offset.terms] + \
        [name for leaf in cmps for name, _ in leaf.shift.terms]


def unknown_band_reason(expr: Expr) -> str:
    """Why lowering's known_band gives no band: the condition that failed, never a guess. A
    comparison's gap (column - row - bound) holding a run-time value names where it comes from; a
    non-integer gap names it; only constant integer gaps that leave no band say so."""
    for leaf in (l for l in leaves(expr) if l.kind == "cmp"):
        gap = leaf.column.value.plus(leaf.row.value, -1).plus(leaf.shift, -1)
        if gap.terms:
            return moving_term_reason(leaf, gap.terms[0][0])
        if gap.const != int(gap.const):
            return f"a comparison's indices differ by {gap.const!r}, not an integer: its bound is between diagonals"
    return "its diagonals form no band"


def moving_term_reason(leaf: Expr, name: str) -> str:
    """Where run-time value `name`, which moves a comparison's band, enters it."""
    for ix in (leaf.column, leaf.row):
        rng = ix.steps[0]
        if any(t == name for t, _ in rng.offset.terms):
            return (f"its Range {rng.node.name} starts at a run-time value ({name}): the band moves with it, "
                    "and the rewrite's Trilu k is a constant")
    return (f"its band moves with a run-time value ({name}) that no Range start holds: "
            "the rewrite's Trilu k is a constant")


class MaskRewrite:
    """One matched mask: the nodes it removes and the generator replacing them."""
    rule: Any = RULE

    def __init__(self, opt: Any, view: OnnxGraphView, found: Any) -> None:
        self.opt, self.view, self.found = opt, view, found
        b = found.bindings
        self.expr, self.out_type, self.y = b["expr"], b["out_type"], found.outputs[0]
        self.covered = set(b.get("covered", found.nodes))
        self.value: Any = 1                     # what the generator's fill holds (a mask: true / 1)
        self.nodes: "list[onnx.NodeProto]" = []
        self.inits: "list[TensorProto]" = []
        self.ops: "list[str]" = []

    def band(self) -> "tuple[int, int, bool]":
        if self.found.bindings["expand_shape"] is not None:
            raise Kept("an Expand after it broadcasts the mask: its shape is not the Ranges'")
        offsets = run_time_offsets(self.expr)
        if offsets:
            raise Kept(f"a run-time offset ({offsets[0]}) near its type's limits wraps around in the "
                       "comparison; Trilu's k does not")
        for leaf in leaves(self.expr):
            if leaf.unsupported:
                raise Kept(leaf.unsupported)
            if leaf.kind == "cmp":
                gap = leaf.column.value.plus(leaf.row.value, -1)
                if abs(gap.const) > GAP_BOUND:
                    raise Kept(f"an offset of {gap.const} could wrap the index values")
                if abs(leaf.shift.const) > GAP_BOUND:       # Trilu's k is int64: bounds past it are kept
                    raise Kept(f"a compared difference's bound of {leaf.shift.const} could pass Trilu's int64 k")
            elif any(d != 1 for d in leaf.shape):
                raise Kept(f"an all-true operand of shape {list(leaf.shape)} broadcasts the mask")
            if leaf.kind == "cmp" and any(s.op == "expand" for ix in (leaf.column, leaf.row) for s in ix.steps):
                raise Kept("an index goes through Expand")
            if leaf.kind == "cmp" and any(s.op == "cast" for ix in (leaf.column, leaf.row) for s in ix.steps):
                raise Kept("an index goes through a Cast: its values may wrap or round where Trilu's do not")
        # A compared difference (`i - j < w`, `|i - j| <= w`) is exact: the Ranges are int64 from 0
        # (index_length) and the indices' offsets within GAP_BOUND, so no Sub or Abs of them wraps.
        band = RULE.known_band(self.expr)
        if band is None:
            raise Kept(unknown_band_reason(self.expr))
        return band

    def shape_tensor(self, prefix: str) -> str:
        """The mask's shape, [1, ..., 1, rows, cols], as a tensor (an initializer when static)."""
        cmps = [l for l in leaves(self.expr) if l.kind == "cmp"]
        rank = max([ix.rank for c in cmps for ix in (c.column, c.row)] +
                   [len(l.shape) for l in leaves(self.expr) if l.kind == "true"])
        inferred = self.view.tensor(self.y).shape
        if rank < 2 or (inferred is not None and len(inferred) != rank):
            raise Kept(f"its rank {rank} is not the inferred {len(inferred or ())}")
        sides = []
        for side in ("row", "column"):
            lengths = {}
            for c in cmps:
                length = index_length(self.view, getattr(c, side))
                lengths[length.key] = length
            if len(lengths) != 1:
                raise Kept(f"its {side} indices come from Ranges of different lengths")
            sides.append(next(iter(lengths.values())))
        parts: "list[Any]" = [[1] * (rank - 2)]
        for length in sides:
            if length.static is not None:
                if isinstance(parts[-1], list):
                    parts[-1].append(length.static)
                else:
                    parts.append([length.static])
                continue
            if length.shape_of is not None:
                name = f"{prefix}_len{len(self.nodes)}"
                self.add(helper.make_node("Shape", [length.shape_of], [name], name=name))
                ranged = self.view.producer(length.shape_of)
                assert ranged is not None                                       # shape_of is a Range's output
                self.covered.discard(ranged.name)   # the Range stays
                length.tensor = name
            parts.append(length.tensor)
        names = []
        for i, part in enumerate(parts):
            if isinstance(part, list):
                if part:
                    names.append(self.init(f"{prefix}_dims{i}", np.array(part, np.int64)))
            else:
                names.append(part)
        if len(names) == 1:
            return names[0]
        shape = f"{prefix}_shape"
        self.add(helper.make_node("Concat", names, [shape], name=shape, axis=0))
        return shape

    def init(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def add(self, node: onnx.NodeProto) -> None:
        self.nodes.append(node)
        self.ops.append(node.op_type)

    def build(self, prefix: str) -> None:
        begin, end, inverted = self.band()
        if self.opt.opset < TRILU_OPSET:
            raise Kept(f"Trilu needs opset {TRILU_OPSET} (model: {self.opt.opset})")
        if self.opt.level is not None:
            reason = self.rule.decline_reason(self.opt.level, **self.found.bindings)
            if reason is not None:
                raise Kept(f"feature level {self.opt.level}: {reason}")
        shape = self.shape_tensor(prefix)
        # bool, or the Cast's type when Trilu runs it (1 and +0 are what Cast gives true and false).
        work = self.out_type if self.out_type in TRILU_TYPES else TensorProto.BOOL
        if work != self.out_type and self.value != 1:
            raise Kept(f"its value {self.value!r} in {TensorProto.DataType.Name(self.out_type).lower()}, a type "
                       "onnxruntime's Trilu lacks, would need a Trilu of another type and a Cast")
        dtype = helper.tensor_dtype_to_np_dtype(work)
        empty = begin >= INF // 2
        if inverted and work != TensorProto.BOOL and self.value == 0 and np.signbit(self.value):
            raise Kept("its -0.0 outside a band: the Add joining the two triangles gives -0.0 + 0 = +0.0")
        fill = f"{prefix}_fill"
        last = self.y if work == self.out_type else f"{prefix}_band"
        open_low, open_high = begin <= -INF // 2, end >= INF // 2
        direct = empty or (not inverted and open_low and open_high)
        self.add(helper.make_node("ConstantOfShape", [shape], [last if direct else fill], name=fill,
                                  value=numpy_helper.from_array(np.array([0 if empty else self.value]).astype(dtype),
                                                                "value")))

        def trilu(source: str, k: int, upper: int, out: str, tag: str) -> str:
            inputs = [source] if k == 0 else [source, self.init(f"{prefix}_k{tag}", np.array(k, np.int64))]
            self.add(helper.make_node("Trilu", inputs, [out], name=f"{prefix}_trilu{tag}", upper=upper))
            return out

        if not direct and not inverted:
            current = fill
            if not open_low:
                current = trilu(current, begin, 1, last if open_high else f"{prefix}_upper", "_lo")
            if not open_high:
                trilu(current, end - 1, 0, last, "_hi")
        elif inverted:
            low = trilu(fill, begin - 1, 0, f"{prefix}_below", "_lo")
            high = trilu(fill, end, 1, f"{prefix}_above", "_hi")
            self.add(helper.make_node("Or" if work == TensorProto.BOOL else "Add", [low, high], [last],
                                      name=f"{prefix}_join"))
        if work != self.out_type:
            self.add(helper.make_node("Cast", [last], [self.y], name=f"{prefix}_cast", to=self.out_type))


class FillBandRewrite(MaskRewrite):
    """A window of Trilus over one shared fill (lowering.trilu_band's match): the same generator,
    sized by the fill's own shape tensor, holding the fill's value."""
    rule = TRILU_BAND

    def __init__(self, opt: Any, view: OnnxGraphView, found: Any) -> None:
        super().__init__(opt, view, found)
        self.value = found.bindings["band_value"]

    def band(self) -> "tuple[int, int, bool]":
        b = self.found.bindings
        if b["reason"]:
            raise Kept(b["reason"])
        fed = [t.name for leaf in leaves(self.expr) for t in leaf.shift_tensors]
        if fed:
            raise Kept(f"its Trilu k {fed[0]} is fed at run time: the rewrite's Trilu k is a constant")
        if any(abs(leaf.shift.const) > GAP_BOUND for leaf in leaves(self.expr)):
            raise Kept(f"a Trilu k past {GAP_BOUND} could pass Trilu's int64 k once moved by one")
        gaps = leaf_gaps(self.expr, {})
        assert gaps is not None                 # no k is fed
        band = as_band(diagonals(self.expr, gaps, (-INF, INF)), (-INF, INF))
        if band is None:
            raise Kept("its diagonals form no band")
        return band

    def shape_tensor(self, prefix: str) -> str:
        """The fill's shape tensor: the fill's sizes whatever they are at run time."""
        b = self.found.bindings
        shape, operand = b["shape"].name, b["operand_shape"]
        length = self.view.tensor(shape).shape
        if any(d != 1 for d in operand) or (operand and (length is None or length[0] < len(operand))):
            raise Kept(f"its Expand's operand of shape {list(operand)} may broadcast the fill past its shape tensor")
        return shape


def dead_feeders(graph: onnx.GraphProto, removed: "set[str]", view: OnnxGraphView) -> "tuple[set[str], set[str]]":
    """Constant nodes and initializers read only by `removed` nodes (grown in place): they go too."""
    graph_outputs = {o.name for o in graph.output}
    inputs = {i.name for i in graph.input}
    inits: "set[str]" = set()
    changed = True
    while changed:
        changed = False
        for name in list(removed):
            for t in view.info(name).inputs:
                if t is None or t.name in graph_outputs or t.name in inputs or t.name in inits:
                    continue
                if not all(c.name in removed for c in view.consumers(t.name)):
                    continue
                producer = view.producer(t.name)
                if producer is None and view.constant(t.name) is not None:
                    inits.add(t.name)
                elif producer is not None and producer.op_type == "Constant" and producer.name not in removed:
                    removed.add(producer.name)
                    changed = True
    return removed, inits


def inferred_view(model: onnx.ModelProto) -> OnnxGraphView:
    """The graph view with shapes inferred (the model itself is left as it is)."""
    try:
        types = value_types(infer_shapes(model, strict_mode=False))
    except Exception:  # onnx raises several types; the declared value_info is used as it is
        types = None
    return OnnxGraphView(model, types)


def rewrite_masks(opt: Any) -> None:
    """The mask pass of optimize's _Optimizer: rewrites each mask that qualifies, records the rest."""
    model = opt.model
    graph = model.graph
    view = inferred_view(model)
    seen: "set[str]" = set()
    for node in list(graph.node):
        if node.op_type not in COMPARISONS + ("Trilu",) or not is_standard(node) or node.name in seen:
            continue
        if node.name not in {n.name for n in graph.node}:      # removed by an earlier rewrite
            continue
        claimed = first_pattern(view.info(node.name), view)     # torch.eye's Equal: eye_from_ranges's
        kind = None if claimed is None else {RULE: MaskRewrite, TRILU_BAND: FillBandRewrite}.get(claimed[0].rule)
        if claimed is None or kind is None:
            continue
        found = claimed[1]
        seen |= set(found.nodes)
        mask = kind(opt, view, found)
        kinds = ", ".join(sorted({view.info(n).op_type for n in found.nodes}))
        what = f"mask {mask.y} ({kinds}; {found.extra['band']})"
        try:
            mask.build(opt.prefix(mask.y))
        except Kept as kept:
            opt.declined.append(f"{what}: kept, {kept}")
            continue
        removed, dead_inits = dead_feeders(graph, set(mask.covered), view)
        kept_reads = {i for n in mask.nodes for i in n.input}  # a constant shape the generator reads stays
        removed -= {n.name for n in graph.node if n.op_type == "Constant" and set(n.output) & kept_reads}
        dead_inits -= kept_reads
        delta = len(mask.nodes) - len(removed)
        if delta >= 0:
            opt.declined.append(f"{what}: kept, its generator ({' + '.join(mask.ops)}) is not fewer nodes "
                                f"({len(mask.nodes)} for {len(removed)})")
            continue
        dead_bytes = sum(proto_bytes(t) + 4 for t in graph.initializer if t.name in dead_inits)
        removed_bytes = sum(n.ByteSize() + 4 for n in graph.node if n.name in removed) + dead_bytes
        added = sum(n.ByteSize() + 4 for n in mask.nodes) + sum(t.ByteSize() + 4 for t in mask.inits)
        made = view.producer(mask.y)
        assert made is not None             # the mask's last node
        producer = made.name
        out = []
        for n in graph.node:
            if n.name == producer:
                out += mask.nodes
            if n.name not in removed:
                out.append(n)
        gone = {o for n in graph.node if n.name in removed for o in n.output} - {mask.y}
        del graph.node[:]
        graph.node.extend(out)
        kept_inits = [t for t in graph.initializer if t.name not in dead_inits] + mask.inits
        del graph.initializer[:]
        graph.initializer.extend(kept_inits)
        value_info = [v for v in graph.value_info if v.name not in gone]
        del graph.value_info[:]
        graph.value_info.extend(value_info)
        opt.taken |= {n.name for n in mask.nodes} | {o for n in mask.nodes for o in n.output}
        opt.add_rewrite(what, " + ".join(mask.ops), removed_bytes - added, delta)
        view = inferred_view(model)
