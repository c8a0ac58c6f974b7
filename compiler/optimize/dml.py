"""`dml-lower optimize --for dml`: rewrites that keep NonZero / eye / mask sub-graphs on
onnxruntime's DirectML EP, each exact under ONNX semantics (DML_EP_PLACEMENT.md §5b):

- opset down-conversion to 21 (onnx's version converter) when every node's opset-21 schema takes
  its attributes and types: opset 22+ loses EyeLike, Conv, pools and at 23+ Cast / Reshape /
  Unsqueeze / Transpose / Shape to the CPU, because DML registers none of those since-versions;
- NonZero over int64 / uint64 (unregistered types) -> NonZero(Not(Equal(x, 0))): the output
  depends only on the predicate x != 0;
- Cast to bool -> Not(Equal(x, 0)), from float / float16 / double and int64 / uint64 only: ONNX
  casts every non-zero (NaN included) to true; DML's cast clips a float to [0, 1] after a float ->
  uint8 conversion, so fractions, negatives and NaN come out false, and reads only the low 32 bits
  of a 64-bit integer, so 2^32 comes out false (measured on 1.24.4; DML's Equal compares all 64);
  the other integer types already give ONNX's answer and are left alone;
- Equal over bool (unregistered) -> Not(Xor(a, b)): the truth table;
- EyeLike at opset >= 22 (unregistered) -> Where(Trilu(Trilu(Expand(true, S), k, 1), k, 0), 1, 0):
  the two triangles keep exactly j - i = k; S is the shape the input was built from;
- Reshape with allowzero=1 whose shape holds a -1 (a constant, or a Concat with a constant piece
  holding one: torch's dynamo exports) -> the same Reshape with allowzero=0: the DML EP claims it and
  then fails (E_INVALIDARG, measured on 1.24.4), and ONNX forbids a 0 beside a -1 under
  allowzero=1, so no valid shape has a 0 for allowzero to change.

Each rewrite is applied only where the replacement's since-versions and types are registered
for DML (read from the registration table of the onnxruntime chosen as every DML EP prediction
chooses it: registry.choose_table), so it never trades one CPU node for another. The
report says, per rewrite, which nodes it replaced, where the prediction placed them before and
their replacements after, and how the predicted copies changed."""
from __future__ import annotations

from typing import Any, Callable, Iterator

from dataclasses import dataclass, field

import numpy as np

import onnx
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper

from onnx_dml_lowering.ir.display import display, name_list
from onnx_dml_lowering.lowering.onnx_graphs import all_nodes, is_standard, prefixed_graphs, standard_opset
from onnx_dml_lowering.runtime.dml_deviations import (cast_bool_deviation, failing_nodes,
                                                      reshapes_allowzero_minus_one)
from onnx_dml_lowering.runtime.weights import lifted

from ..ep.placement import DML, _inferred, _value_types, predict_placement, type_mismatch
from ..ep.registry import Schema, TableChoice, choose_table, dml_kernels, schema
from ..node_ids import identify_nodes
from .names import Label, Names, labeller, labelled_graphs, restore_names, with_op
from .verify import check_level, node_names, verify_rewrite

TARGET_OPSET = 21
INT32_SAFE = 2**31 - 2     # Trilu's k on DML is int32 and k + 1 is computed: keep both in range


@dataclass
class DmlRewrite:
    kind: str
    nodes: "list[str]" = field(default_factory=list)          # the nodes replaced
    created: "dict[str, list[tuple[str, str]]]" = field(default_factory=dict)  # replaced -> (op, new node)
    before: "dict[str, str]" = field(default_factory=dict)    # replaced node -> predicted provider
    after: "dict[str, list[str]]" = field(default_factory=dict)
    copies_before: int = 0
    copies_after: int = 0
    failures_before: int = 0     # nodes predicted to fail on the DML EP (dml_deviations.failing_nodes)
    failures_after: int = 0
    note: str = ""
    # what the text calls them (names.labeller: the file's names, an unnamed node by its operator and output)
    shown: "dict[str, str]" = field(default_factory=dict)            # replaced node -> its label
    created_shown: "dict[str, list[str]]" = field(default_factory=dict)  # replaced -> "Op name" of each new one

    def lines(self) -> "list[str]":
        moved = [n for n in self.nodes if self.before.get(n) != DML and self.after.get(n)
                 and all(p == DML for p in self.after[n])]
        out = [f"{self.kind}: {len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''} rewritten, "
               f"{len(moved)} moved to DML; predicted copies {self.copies_before} -> {self.copies_after}"
               + (f"; predicted DML EP failures {self.failures_before} -> {self.failures_after}"
                  if self.failures_before != self.failures_after else "")
               + (f" ({self.note})" if self.note else "")]
        return out + self._node_lines()

    def _node_lines(self) -> "list[str]":
        """One line per replaced node; nodes rewritten in place alike (one node of the same operator,
        the same name, the same providers before and after) share one line, names shortened."""
        def movement(n: str) -> str:
            return f"{self.before.get(n, '?')} -> {', '.join(sorted(set(self.after.get(n, [])))) or '?'}"
        in_place: "dict[tuple[str, str], list[str]]" = {}
        for n in self.nodes:
            created = self.created.get(n, [])
            if len(created) == 1 and created[0][1] == n:
                in_place.setdefault((created[0][0], movement(n)), []).append(n)
        out = []
        for n in self.nodes:
            created = self.created.get(n, [])
            group = in_place.get((created[0][0], movement(n)), []) if len(created) == 1 else []
            if len(group) > 1 and n != group[0]:
                continue
            if len(group) > 1:
                shown = [self.shown.get(g, g) for g in group]
                out.append(f"  {name_list(shown, 4)}: {movement(n)} (each a {created[0][0]}, in place)")
            else:
                made = self.created_shown.get(n) or [f"{op} {name}" for op, name in created]
                out.append(f"  {display(self.shown.get(n, n))}: {movement(n)}"
                           f" ({' + '.join(display(text) for text in made)})")
        return out


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    for _, g in prefixed_graphs(graph):
        yield g


def _since(op: str, opset: int) -> int:
    """The since-version of an ONNX-domain op at `opset` (the ops rewritten here all have one)."""
    return onnx.defs.get_schema(op, opset, "").since_version


def _registered(op: str, opset: int, types: "dict[str, str]", version: str) -> bool:
    """A DML kernel exists for `op` at `opset` taking these types (constraint -> type), in the
    registration table of onnxruntime `version`."""
    sch = schema(op, "", opset)
    kernel = dml_kernels(op, "", version).get(sch.since_version) if sch else None
    return kernel is not None and all(t in kernel.types.get(c, (t,)) or "ALL" in kernel.types.get(c, ())
                                      for c, t in types.items())


class _DmlOptimizer:
    def __init__(self, model: onnx.ModelProto, version: str, renamed: "dict[str, str | bytes] | None" = None) -> None:
        self.model = model
        self.version = version          # the onnxruntime whose DML registration table is read
        self.opset = standard_opset(model, 0)
        renamed = renamed or {}
        self.names = Names(model, renamed.values())      # new to every name anywhere in the model
        self.label = labeller(renamed)
        self.types: "dict[str, str]" = {}
        self.elem: "dict[str, int]" = {}
        inferred = _inferred(model)
        _value_types(inferred, self.types)
        for graph in _graphs(inferred.graph):
            for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
                if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.elem_type:
                    self.elem.setdefault(vi.name, vi.type.tensor_type.elem_type)
            for init in graph.initializer:
                self.elem.setdefault(init.name, init.data_type)
        self.rewrites: "list[DmlRewrite]" = []

    def _each(self, kind: str, match: Callable[[onnx.NodeProto], bool],
              build: "Callable[[onnx.GraphProto, onnx.NodeProto], list[onnx.NodeProto]]") -> None:
        """Apply `build(graph, node) -> new nodes` to every node `match(node)` takes, in every graph.
        Bodies go before the graph holding them: a graph's nodes are replaced by copies, bodies and
        all, so a body rewritten after its parent would be rewritten in a copy no model holds."""
        rewrite = DmlRewrite(kind)
        graphs = list(labelled_graphs(self.model.graph, self.label))
        made: "dict[int, list[tuple[onnx.NodeProto, list[onnx.NodeProto]]]]" = {}
        for index in reversed(range(len(graphs))):
            graph = graphs[index][2]
            nodes = list(graph.node)
            out, made[index] = [], []
            for node in nodes:
                new = build(graph, node) if is_standard(node) and match(node) else [node]
                if len(new) != 1 or new[0] is not node:
                    made[index].append((node, new))
                out.extend(new)
            if len(out) != len(nodes) or any(a is not b for a, b in zip(out, nodes)):
                del graph.node[:]
                graph.node.extend(out)
        for index, (prefix, shown, _) in enumerate(graphs):     # reported in the model's order
            for node, new in made[index]:
                rewrite.nodes.append(prefix + node.name)
                rewrite.shown[prefix + node.name] = shown + self.label(node)
                rewrite.created[prefix + node.name] = [(n.op_type, prefix + n.name) for n in new]
                rewrite.created_shown[prefix + node.name] = [with_op(n, self.label, shown) for n in new]
        if rewrite.nodes:
            self.rewrites.append(rewrite)

    def base(self, node: onnx.NodeProto) -> str:
        """What a node's generated names derive from: its name in the file, or for an unnamed node its
        first output (its identity, `Cast_0`, is in no file)."""
        shown = self.label(node)
        return node.output[0] if shown != node.name and node.output and node.output[0] else node.name

    def _const(self, graph: onnx.GraphProto, base: str, array: np.ndarray) -> str:
        name = self.names(base)
        graph.initializer.append(numpy_helper.from_array(array, name))
        return name

    # NonZero over int64 / uint64 -> NonZero(Not(Equal(x, 0)))
    def nonzero_64(self) -> None:
        def match(node: onnx.NodeProto) -> bool:
            return node.op_type == "NonZero" and self.types.get(node.input[0]) in ("int64", "uint64") \
                and _registered("Equal", self.opset, {"T": self.types[node.input[0]]}, self.version)

        def build(graph: onnx.GraphProto, node: onnx.NodeProto) -> "list[onnx.NodeProto]":
            x = node.input[0]
            zero = self._const(graph, f"{self.base(node)}_zero",
                               np.zeros((), oh.tensor_dtype_to_np_dtype(self.elem[x])))
            eq, nz = self.names(f"{self.base(node)}_is_zero"), self.names(f"{self.base(node)}_nonzero_mask")
            return [oh.make_node("Equal", [x, zero], [eq], name=self.names(f"{self.base(node)}_equal")),
                    oh.make_node("Not", [eq], [nz], name=self.names(f"{self.base(node)}_not")),
                    oh.make_node("NonZero", [nz], list(node.output), name=node.name)]
        self._each("NonZero over int64 / uint64 -> NonZero(Not(Equal(x, 0)))", match, build)

    # Cast(x -> bool) -> Not(Equal(x, 0))
    def cast_to_bool(self) -> None:
        def match(node: onnx.NodeProto) -> bool:
            if node.op_type != "Cast":
                return False
            to = next((a.i for a in node.attribute if a.name == "to"), None)
            src = self.types.get(node.input[0])
            # only the source types whose cast the DML EP gets wrong (measured): the rest are ONNX's already
            return to == TensorProto.BOOL and src is not None and cast_bool_deviation(src) is not None \
                and _registered("Equal", self.opset, {"T": src}, self.version)

        def build(graph: onnx.GraphProto, node: onnx.NodeProto) -> "list[onnx.NodeProto]":
            x = node.input[0]
            zero = self._const(graph, f"{self.base(node)}_zero", np.zeros((), oh.tensor_dtype_to_np_dtype(self.elem[x])))
            eq = self.names(f"{self.base(node)}_is_zero")
            return [oh.make_node("Equal", [x, zero], [eq], name=self.names(f"{self.base(node)}_equal")),
                    oh.make_node("Not", [eq], list(node.output), name=node.name)]
        self._each("Cast to bool -> Not(Equal(x, 0))", match, build)
        if self.rewrites and self.rewrites[-1].kind.startswith("Cast"):
            self.rewrites[-1].note = ("exact where DML's cast is not: a float's fractions, negatives and NaN, an "
                                      "int64's high 32 bits")

    # Equal over bool -> Not(Xor(a, b))
    def bool_equal(self) -> None:
        def match(node: onnx.NodeProto) -> bool:
            return node.op_type == "Equal" and self.types.get(node.input[0]) == "bool"

        def build(graph: onnx.GraphProto, node: onnx.NodeProto) -> "list[onnx.NodeProto]":
            xor = self.names(f"{self.base(node)}_differ")
            return [oh.make_node("Xor", list(node.input), [xor], name=self.names(f"{self.base(node)}_xor")),
                    oh.make_node("Not", [xor], list(node.output), name=node.name)]
        self._each("Equal over bool -> Not(Xor(a, b))", match, build)

    # Reshape(allowzero=1) whose shape holds a -1 -> Reshape(allowzero=0)
    def reshape_allowzero(self) -> None:
        targets = {n.output[0] for g in _graphs(self.model.graph)
                   for n in reshapes_allowzero_minus_one(g, self.opset) if n.output}

        def match(node: onnx.NodeProto) -> bool:
            return node.op_type == "Reshape" and bool(node.output) and node.output[0] in targets

        def build(graph: onnx.GraphProto, node: onnx.NodeProto) -> "list[onnx.NodeProto]":
            plain = onnx.NodeProto()
            plain.CopyFrom(node)
            del plain.attribute[:]
            plain.attribute.extend(a for a in node.attribute if a.name != "allowzero")
            return [plain]
        self._each("Reshape allowzero=1 with a -1 in its shape -> allowzero=0", match, build)
        if self.rewrites and self.rewrites[-1].kind.startswith("Reshape"):
            # ONNX forbids a 0 beside a -1 under allowzero=1, so no valid shape copies a dimension
            self.rewrites[-1].note = ("exact: the shape holds a -1, beside which allowzero=1 allows no 0; the DML EP "
                                      "fails on allowzero=1 there")

    # EyeLike at opset >= 22 -> Where(Trilu(Trilu(Expand(true, S), k, 1), k, 0), 1, 0)
    def eyelike_22(self) -> None:
        if _since("EyeLike", self.opset) in dml_kernels("EyeLike", "", self.version):
            return
        producers = {o: n for g in _graphs(self.model.graph) for n in g.node for o in n.output}

        def match(node: onnx.NodeProto) -> bool:
            return node.op_type == "EyeLike" and node.input[0] in self.elem

        def build(graph: onnx.GraphProto, node: onnx.NodeProto) -> "list[onnx.NodeProto]":
            attrs = {a.name: oh.get_attribute_value(a) for a in node.attribute}
            k = int(np.clip(attrs.get("k", 0), -INT32_SAFE, INT32_SAFE))   # saturated beyond any matrix
            elem = attrs.get("dtype", self.elem[node.input[0]])
            x = node.input[0]
            new = []
            source = producers.get(x)
            if source is not None and source.op_type == "ConstantOfShape" and source.input:
                shape = source.input[0]      # the shape X was built from: no Shape of X (CPU at 23+)
            else:
                shape = self.names(f"{self.base(node)}_shape")
                new.append(oh.make_node("Shape", [x], [shape], name=self.names(f"{self.base(node)}_shape")))
            true = self._const(graph, f"{self.base(node)}_true", np.array(True))
            kk = self._const(graph, f"{self.base(node)}_k", np.array(k, dtype=np.int64))
            one = self._const(graph, f"{self.base(node)}_one", np.ones((), oh.tensor_dtype_to_np_dtype(elem)))
            zero = self._const(graph, f"{self.base(node)}_zero", np.zeros((), oh.tensor_dtype_to_np_dtype(elem)))
            full, upper, band = (self.names(f"{self.base(node)}_{s}") for s in ("all", "upper", "diagonal"))
            new += [oh.make_node("Expand", [true, shape], [full], name=self.names(f"{self.base(node)}_expand")),
                    oh.make_node("Trilu", [full, kk], [upper], name=self.names(f"{self.base(node)}_upper"), upper=1),
                    oh.make_node("Trilu", [upper, kk], [band], name=self.names(f"{self.base(node)}_lower"), upper=0),
                    oh.make_node("Where", [band, one, zero], list(node.output), name=node.name)]
            return new
        self._each(f"EyeLike-{_since('EyeLike', self.opset)} (no DML kernel) -> "
                   "Where(Trilu(Trilu(Expand(true, S), k, 1), k, 0), 1, 0)", match, build)


def downconvert_blockers(model: onnx.ModelProto, label: "Label | None" = None, target: int = TARGET_OPSET
                         ) -> "list[str]":
    """Why the model's nodes cannot all take their opset-`target` schema exactly (empty: they can):
    an op newer than the target, an attribute the older schema lacks, a type it does not take; each
    node named by `label` (default: its name)."""
    types: "dict[str, str]" = {}
    _value_types(_inferred(model), types)
    out = []
    for _, node in all_nodes(model):
        if not is_standard(node):
            continue
        name = label(node) if label is not None else node.name
        try:
            old = onnx.defs.get_schema(node.op_type, target, "")
        except onnx.defs.SchemaError:
            out.append(f"{name} ({node.op_type}) has no schema at opset {target}")
            continue
        extra = [a.name for a in node.attribute if a.name not in old.attributes]
        if extra:
            out.append(f"{name} ({node.op_type}): attribute {extra[0]!r} is not in {node.op_type}-{old.since_version}")
            continue
        allowed = {c.type_param_str: {s[len("tensor("):-1] if s.startswith("tensor(") else s
                                      for s in c.allowed_type_strs} for c in old.type_constraints}
        checks = {c: tuple(v) for c, v in allowed.items()}
        mismatch = type_mismatch(node, _schema_of(old), checks, types)
        if mismatch:
            out.append(f"{name} ({node.op_type}): {node.op_type}-{old.since_version} {mismatch.removeprefix('the kernel ')}")
    return out


def _schema_of(s: Any) -> Schema:
    from ..ep.registry import _option
    return Schema(s.since_version, tuple((p.type_str, _option(p)) for p in s.inputs),
                  tuple((p.type_str, _option(p)) for p in s.outputs))


def _downconvert(model: onnx.ModelProto, label: Label) -> "tuple[onnx.ModelProto, DmlRewrite | None, str]":
    """The model at opset TARGET_OPSET, the rewrite that says so (nodes by identity, shown by `label`),
    or the model as it is and why."""
    opset = standard_opset(model, 0)
    if opset <= TARGET_OPSET:
        return model, None, ""
    blockers = downconvert_blockers(model, label)
    if blockers:
        return model, None, (f"opset {opset} kept (down-conversion to {TARGET_OPSET} is not exact: "
                             f"{blockers[0]}{f'; and {len(blockers) - 1} more' if len(blockers) > 1 else ''})")
    from onnx import version_converter
    try:
        converted = version_converter.convert_version(model, TARGET_OPSET)
        onnx.checker.check_model(lifted(converted)[0])     # weights left in their files: typed inputs
    except Exception as exc:  # the converter has no adapter for some node: keep the opset
        return model, None, f"opset {opset} kept (onnx's version converter: {' '.join(str(exc).split())[:160]})"
    names = [n.name for _, n in all_nodes(model)]
    if [n.name for _, n in all_nodes(converted)] != names:
        return model, None, f"opset {opset} kept (onnx's version converter changed the nodes, not only their version)"
    keep_annotations(model, converted)
    rewrite = DmlRewrite(f"opset {opset} -> {TARGET_OPSET} (every node's opset-{TARGET_OPSET} schema takes it as it is)")
    for prefix, shown, graph in labelled_graphs(model.graph, label):
        for n in graph.node:
            if is_standard(n) and onnx.defs.get_schema(n.op_type, opset).since_version > TARGET_OPSET:
                path, op = prefix + n.name, f"{n.op_type}-{_since(n.op_type, TARGET_OPSET)}"
                rewrite.nodes.append(path)
                rewrite.created[path] = [(op, path)]
                rewrite.shown[path] = shown + label(n)
                rewrite.created_shown[path] = [with_op(n, label, shown, op)]
    return converted, rewrite, ""


def keep_annotations(model: onnx.ModelProto, converted: onnx.ModelProto) -> None:
    """Put back what onnx's version converter drops without converting it: each node's
    metadata_props (the torch exporter's scopes and stack traces, what Model Explorer groups by),
    each graph's metadata_props, the value_info of initializers, and the metadata of graph inputs,
    outputs, values and weights.
    The nodes are the same ones, in the same order (the caller checked their names)."""
    for (_, before), (_, after) in zip(all_nodes(model), all_nodes(converted)):
        if before.metadata_props and not after.metadata_props:
            after.metadata_props.extend(before.metadata_props)
    graphs = dict(prefixed_graphs(converted.graph))
    for prefix, graph in prefixed_graphs(model.graph):
        out = graphs.get(prefix)
        if out is None:
            continue
        if graph.metadata_props and not out.metadata_props:       # the exporter's graph signature
            out.metadata_props.extend(graph.metadata_props)
        have = {v.name for v in out.value_info}
        out.value_info.extend(v for v in graph.value_info if v.name not in have)
        for part in ("input", "output", "value_info", "initializer"):
            by_name = {item.name: item for item in getattr(out, part)}
            for item in getattr(graph, part):
                twin = by_name.get(item.name)
                if twin is not None and item.metadata_props and not twin.metadata_props:
                    twin.metadata_props.extend(item.metadata_props)


def optimize_for_dml(model: onnx.ModelProto, model_dir: "str | None" = None, table: "TableChoice | None" = None
                     ) -> "tuple[onnx.ModelProto, list[DmlRewrite], list[str]]":
    """The rewritten model, the rewrites with their predicted placement effect, and notes on what
    was kept and why. `table`: the DML EP registration table modelled (default: choose_table's)."""
    version = (table or choose_table(None)).version
    out, steps, notes, renamed = _rewritten(model, model_dir, version, down=True)
    down = next((r for _, r in steps if r.kind.startswith("opset ")), None)
    if down is not None and not _gains(down):
        # the opset changed and the prediction moved nothing: the file keeps its opset
        out, steps, notes, renamed = _rewritten(model, model_dir, version, down=False)
        notes.insert(0, f"opset {standard_opset(model, 0)} kept (down-conversion to {TARGET_OPSET} would move no "
                        "node to DML and change no copy and no failure, as predicted)")
    escaped = restore_names(out, renamed)   # the names the model had (protobuf cannot write non-UTF-8 back)
    if escaped:
        notes.append(f"node names that are not UTF-8 are written as their identities: {', '.join(escaped)}")
    return out, [r for _, r in steps], notes


def _gains(rewrite: DmlRewrite) -> bool:
    """The prediction says the rewrite moves a node to DML, or changes the copies or the failures."""
    moved = any(rewrite.before.get(n) != DML and rewrite.after.get(n) and all(p == DML for p in rewrite.after[n])
                for n in rewrite.nodes)
    return (moved or rewrite.copies_before != rewrite.copies_after
            or rewrite.failures_before != rewrite.failures_after)


def _rewritten(model: onnx.ModelProto, model_dir: "str | None", version: str, down: bool
               ) -> "tuple[onnx.ModelProto, list[tuple[onnx.ModelProto, DmlRewrite]], list[str], dict]":
    """Every rewrite applied to a copy of `model` (`down`: the opset down-conversion first), their
    effects predicted; the node identities given (renamed: identity -> original name)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    renamed = identify_nodes(out)      # the report and the prediction name nodes by identity
    identities = node_names(out)
    notes: "list[str]" = []
    steps: "list[tuple[onnx.ModelProto, DmlRewrite]]" = []
    if down:
        pre = onnx.ModelProto()
        pre.CopyFrom(out)
        out, converted, why = _downconvert(out, labeller(renamed))
        if why:
            notes.append(why)
        if converted is not None:
            steps.append((pre, converted))
    for method in ("nonzero_64", "cast_to_bool", "bool_equal", "eyelike_22", "reshape_allowzero"):
        opt = _DmlOptimizer(out, version, renamed)
        before = onnx.ModelProto()
        before.CopyFrom(out)
        getattr(opt, method)()
        for rewrite in opt.rewrites:
            steps.append((before, rewrite))
    # checked before anything is predicted on it: a clash of ours is an internal error, never a DML EP
    # load failure the prediction's warning would blame on DirectML
    if steps:
        verify_rewrite(out, check_level(model), identities, "optimize --for dml")
    _predict_effects(out, steps, model_dir, version)
    return out, steps, notes, renamed


def _predict_effects(final: onnx.ModelProto, steps: "list[tuple[onnx.ModelProto, DmlRewrite]]",
                     model_dir: "str | None", version: str) -> None:
    """Fill each rewrite's before / after providers and copy counts from the placement prediction
    (with onnxruntime `version`'s table) of the model before that step and after it."""
    if not steps:
        return
    models = [m for m, _ in steps[1:]] + [final]
    cache: "dict[int, dict]" = {}

    def placement(m: onnx.ModelProto) -> dict:
        key = id(m)
        if key not in cache:
            cache[key] = predict_placement(m, model_dir, ort_version=version)
        return cache[key]
    for (before_model, rewrite), after_model in zip(steps, models):
        before, after = placement(before_model), placement(after_model)
        by_path_before = {n["node"]: n["provider"] for n in before["nodes"]}
        by_path_after = {n["node"]: n["provider"] for n in after["nodes"]}
        rewrite.copies_before, rewrite.copies_after = len(before["copies"]), len(after["copies"])
        rewrite.failures_before, rewrite.failures_after = len(failing_nodes(before_model)), len(failing_nodes(after_model))
        for node in rewrite.nodes:
            rewrite.before[node] = by_path_before.get(node, "?")
            rewrite.after[node] = [by_path_after.get(path, "?") for _, path in rewrite.created.get(node, [])]
