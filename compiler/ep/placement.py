"""Predict, off Windows, which nodes onnxruntime's DirectML EP takes and which it leaves to the
CPU EP, and where the device-host copies fall (`dml-lower inspect --ep dml`).

The algorithm is onnxruntime 1.27's, as shared/spec/DML_EP_PLACEMENT.md §3 reads it from the
source (with the registration table of the version asked for: registry.TABLES): the graph
onnxruntime's level-1 optimisations leave (run for real, level1.py), then per graph (bodies are partitioned on their own)
  A. tentative = a DML kernel registered at exactly the node's schema since-version whose types
     match on the first present argument of each type constraint;
  B. GetCpuPreferredNodes: from the CPU outputs of Shape / Size, a node goes to the CPU when every
     input is a small initializer, a graph input, or a CPU value its kernel does not read as a
     declared CPU input (so shape arithmetic goes, the consumer taking it as a CPU input stays);
  C. the support query and the device's data types for every other tentative node;
  D. the rest to the CPU EP when it has a kernel, or when onnxruntime's cast insertion (after
     partitioning, in every session) gives it one: a node reading float16 runs in float32 between
     inserted Casts where the CPU EP has the float32 kernel; else no provider at all (session failure);
then the Memcpy nodes onnxruntime inserts at the edges between the two sides."""
from __future__ import annotations

import heapq
import re
from collections import Counter
from pathlib import Path

import numpy as np

import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.printer import name_list
from onnx_dml_lowering.lowering.onnx_graphs import is_standard, iter_graphs, node_paths, node_reads, prefixed_graphs, subgraph_reads
from onnx_dml_lowering.runtime.dml_deviations import (FAILURES, cast_bool_deviation, empty_output_risks,
                                                      failing_nodes, roi_align_deviation)
from onnx_dml_lowering.runtime.dml_fusion import fused_output_risks
from onnx_dml_lowering.runtime.onnx_inference import infer_shapes

from .level1 import CPU_CAST_PREFIX, Level1, constants_as_initializers, level1_model, undo_cpu_casts
from .registry import (DEVICE_DEPENDENT, DML_TYPES, NEWEST_ORT, TABLE_SOURCES, DmlKernel, Schema, choose_table,
                       cpu_kernels, dml_kernels,
                          schema, type_name)
from .queries import support_query
from ..node_ids import identify_nodes

DML = "DmlExecutionProvider"
CPU = "CPUExecutionProvider"
NONE = "none"              # no provider has a kernel: onnxruntime fails to create the session
CAST_INSERTION = ("onnxruntime's cast insertion runs it on the CPU EP in float32 between inserted Casts (after "
                  "partitioning, in every session, for a float16 node no provider takes)")
REMOVED = "removed"        # gone before partitioning (level-1 optimisations, inlining)
# What a prediction cannot know; `--verify` (ep/verify.py) puts what its run settled in its place.
UNKNOWABLE = ("not knowable off Windows: the device's data-type support (assumed above), the DirectML.dll actually "
              "loaded, and kernel-creation failures; session options that change constant folding (free dimension "
              "overrides) are not modelled")
SMALL_INITIALIZER = 100    # elements (fallback_cpu_capability.cc kSmallInitializerThreshold)
_HALF_TYPES = ("float16", "bfloat16")   # the CPU preference never takes a node reading these
_SHAPE_SEEDS = ("Shape", "Size", "SequenceLength")
_SEQUENCE_OPS = ("SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceLength", "SequenceErase",
                 "SequenceInsert", "ConcatFromSequence", "OptionalHasElement", "OptionalGetElement")


# what `optimize --for dml` does about a named failure, where it rewrites it away
_FAILURE_REMEDY = {"reshape_allowzero_infer": "; optimize --for dml drops its allowzero, exactly"}

def _value_types(model: onnx.ModelProto, into: "dict[str, str]") -> None:
    """value name -> element type name ('seq', 'optional', ... for non-tensors), bodies included."""
    for _, graph in prefixed_graphs(model.graph):
        for init in graph.initializer:
            into.setdefault(init.name, type_name(init.data_type))
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            kind = vi.type.WhichOneof("value")
            if kind == "tensor_type" and vi.type.tensor_type.elem_type:
                into.setdefault(vi.name, type_name(vi.type.tensor_type.elem_type))
            elif kind == "sequence_type":
                into.setdefault(vi.name, "seq")
            elif kind and kind != "tensor_type":
                into.setdefault(vi.name, kind.replace("_type", ""))
        for node in graph.node:
            if is_standard(node.domain) and node.op_type == "Constant":
                for attr in node.attribute:
                    if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                        into.setdefault(node.output[0], type_name(attr.t.data_type))


def _inferred(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return infer_shapes(model, strict_mode=False)
    except Exception:  # inference is a help for the types, not a requirement
        return model


def _ranks(model: onnx.ModelProto) -> "dict[str, int]":
    out: "dict[str, int]" = {}
    for _, graph in prefixed_graphs(model.graph):
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            t = vi.type.tensor_type
            if vi.type.WhichOneof("value") == "tensor_type" and t.HasField("shape"):
                out.setdefault(vi.name, len(t.shape.dim))
    return out


class _Graph:
    """One graph's edges, as onnxruntime's partitioner sees them."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.nodes = list(graph.node)
        self.initializers = {i.name: i for i in graph.initializer}
        self.inputs = {i.name for i in graph.input} - set(self.initializers)
        self.producer: "dict[str, int]" = {}
        self.consumers: "dict[str, list[int]]" = {}
        self.implicit: "list[list[str]]" = []
        for index, node in enumerate(self.nodes):
            for out in node.output:
                if out:
                    self.producer[out] = index
            implicit = [n for n in subgraph_reads(node) if n not in node.input] if node.attribute else []
            self.implicit.append(implicit)
            for name in dict.fromkeys([n for n in node.input if n] + implicit):
                self.consumers.setdefault(name, []).append(index)

    def small_initializer(self, name: str) -> bool:
        init = self.initializers.get(name)
        return init is not None and int(np.prod(init.dims, dtype=np.int64)) <= SMALL_INITIALIZER


def _formal(params: "tuple[tuple[str, str], ...]", index: int) -> "str | None":
    if index < len(params):
        return params[index][0]
    if params and params[-1][1] == "Variadic":
        return params[-1][0]
    return None


def type_mismatch(node: onnx.NodeProto, sch: Schema, kernel_types: "dict[str, tuple[str, ...]]",
                  types: "dict[str, str]") -> "str | None":
    """onnxruntime's MatchKernelDefTypes: per type constraint, only the first present argument
    bound to it is checked. The reason a kernel does not match, or None."""
    for constraint, allowed in kernel_types.items():
        args = [("input", i, n, _formal(sch.inputs, i)) for i, n in enumerate(node.input)] + \
               [("output", i, n, _formal(sch.outputs, i)) for i, n in enumerate(node.output)]
        for kind, index, name, formal in args:
            if not name or formal != constraint:
                continue
            t = types.get(name)
            if t is None or "ALL" in allowed or t in allowed or (t == "seq" and any(a.startswith("seq(") for a in allowed)):
                break
            return f"the kernel lacks {t} for type {constraint} ({kind} {index} {name!r})"
    return None


def _device_reject(t: "str | None", lacks: "frozenset[str]") -> "str | None":
    if t is None:
        return None
    if t not in DML_TYPES:
        return f"{t} has no DirectML tensor type"
    if t in lacks:
        return f"the device lacks {t} (assumed: --device-lacks {t})"
    return None


# a word read with a vowel sound first: a vowel letter but a "you" (uint8, unique, use), or 8, 11, 18
_AN = re.compile(r"(?:[aeio]|u(?!int|ni(?!n)|s[aeiu]|ti)|8|1[18](?!\d))", re.I)


def indefinite(word: str) -> str:
    """'a double', 'an int64', 'a uint8', 'an optional': the word after the article its sound takes."""
    return f"{'an' if _AN.match(word) else 'a'} {word}"


def _since_text(kernels: "dict[int, DmlKernel]") -> str:
    return ", ".join(str(v) for v in sorted(kernels))


class Predictor:
    def __init__(self, opsets: "dict[str, int]", types: "dict[str, str]", ranks: "dict[str, int]",
                 lacks: "frozenset[str]", version: str = NEWEST_ORT) -> None:
        self.opsets, self.types, self.ranks, self.lacks = opsets, types, ranks, lacks
        self.version = version        # the onnxruntime whose DML registration table is modelled
        self.placed: "list[dict]" = []
        self.copies: "list[dict]" = []
        self.warnings: "list[str]" = []
        self.unknown_types: "set[str]" = set()
        self.relu_nan: "list[str]" = []      # float Relu nodes on DML (NaN gives 0 there)
        self.fused_by_level1: "list[str]" = []   # nodes level 1 fused, eliminated or created (release-dependent)

    def _entry(self, path: str, node: onnx.NodeProto, since: "int | None", provider: str, reason: str) -> dict:
        return {"node": path, "op_type": node.op_type, "domain": node.domain or "ai.onnx",
                "since_version": since, "provider": provider, "reason": reason}

    def place(self, graph: onnx.GraphProto) -> None:
        """Place the graph's nodes, then each body's (at any depth, named by path); a body knows
        the initializers of the graphs around it (no copy is inserted for those)."""
        outer: "dict[int, frozenset[str]]" = {}
        for each, holder in iter_graphs(graph):
            outer[id(each)] = (outer[id(holder)] | {t.name for t in holder.initializer}) if holder is not None \
                else frozenset()
        for prefix, each in prefixed_graphs(graph):
            self._place_graph(each, prefix, outer.get(id(each), frozenset()))

    def _place_graph(self, graph: onnx.GraphProto, prefix: str, outer_initializers: "frozenset[str]") -> None:
        g = _Graph(graph)
        schemas = [schema(n.op_type, n.domain, self.opsets.get(n.domain or "ai.onnx", 0)) for n in g.nodes]
        kernel, why = self._kernels(g, schemas)
        preferred = _cpu_preferred(g, kernel, self.types)
        provider = self._providers(g, prefix, schemas, (kernel, why, preferred))
        self._copies(g, prefix, provider, kernel, outer_initializers)

    def _kernels(self, g: _Graph, schemas: list) -> "tuple[dict[int, DmlKernel], dict[int, str]]":
        """A. kernel lookup: exact since-version, first-argument types. The DML kernel of each node
        that has one, and why each other has none."""
        kernel: "dict[int, DmlKernel]" = {}
        why: "dict[int, str]" = {}
        for i, (node, sch) in enumerate(zip(g.nodes, schemas)):
            kernels = dml_kernels(node.op_type, node.domain, self.version)
            if sch is None:
                why[i] = f"no schema for {node.domain or 'ai.onnx'}:{node.op_type} at this opset"
            elif not kernels:
                why[i] = f"the DML EP registers no {node.op_type} kernel"
            elif sch.since_version not in kernels:
                why[i] = (f"no DML kernel for since-version {sch.since_version} (opset "
                          f"{self.opsets.get(node.domain or 'ai.onnx')}); DML registers {node.op_type} at "
                          f"since-version {_since_text(kernels)} only")
            else:
                k = kernels[sch.since_version]
                mismatch = type_mismatch(node, sch, k.types, self.types)
                if mismatch:
                    why[i] = f"DML's {node.op_type}-{k.since_version} kernel: {mismatch}"
                else:
                    kernel[i] = k
        return kernel, why

    def _providers(self, g: _Graph, prefix: str, schemas: list,
                   found: "tuple[dict[int, DmlKernel], dict[int, str], dict[int, str]]") -> "dict[int, str]":
        """C. support query and device data types; D. the CPU EP or nothing. Each node's provider,
        its entry (and a warning for a node no provider takes) recorded."""
        kernel, why, preferred = found
        provider: "dict[int, str]" = {}
        for i, node in enumerate(g.nodes):
            path = prefix + node.name
            node_schema = schemas[i]
            since = node_schema.since_version if node_schema else None
            if i in kernel and i not in preferred:
                reject = self._dml_reject(g, i, kernel[i])
                if reject is None:
                    provider[i] = DML
                    self._warn_dml(path, node)
                    self.placed.append(self._entry(path, node, since, DML, ""))
                    continue
                why[i] = reject
            reason = preferred.get(i) or why[i]
            on_cpu = self._cpu_kernel(node, schemas[i])
            if on_cpu is not None and self._cast_to_float(node, schemas[i]):
                provider[i] = CPU
                self.placed.append(self._entry(path, node, since, CPU, f"{reason}; {CAST_INSERTION}"))
            elif on_cpu is None:
                provider[i] = CPU
                self.placed.append(self._entry(path, node, since, CPU, reason))
            else:
                provider[i] = NONE
                self.placed.append(self._entry(path, node, since, NONE,
                                               f"{reason}; and {on_cpu}: onnxruntime cannot create the session"))
                self.warnings.append(no_provider_warning(path, node.op_type))
        return provider

    def _dml_reject(self, g: _Graph, i: int, k: DmlKernel) -> "str | None":
        node = g.nodes[i]
        if k.support_query:
            verdict = support_query(k.support_query, node, self.types)
            if verdict is None:
                self.warnings.append(f"{node.name} ({node.op_type}): the support query {k.support_query} is not "
                                     "modelled here; assumed to accept the node")
            elif verdict:
                return f"the support query {k.support_query} rejects it: {verdict}"
        defs = [("input", j, n) for j, n in enumerate(node.input) if n and j not in k.cpu_inputs]
        defs += [("implicit input", j, n) for j, n in enumerate(g.implicit[i])]
        defs += [("output", j, n) for j, n in enumerate(node.output) if n]
        for kind, j, name in defs:
            t = self.types.get(name)
            if t is None:
                self.unknown_types.add(name)
                continue
            if t in ("seq", "optional", "sparse_tensor", "map"):
                if node.op_type in _SEQUENCE_OPS or t == "optional" and node.op_type.startswith("Optional"):
                    continue
                return f"{kind} {j} {name!r} is {indefinite(t)}, which DML takes only in sequence operators"
            reject = _device_reject(t, self.lacks)
            if reject:
                return f"{reject} ({kind} {j} {name!r})"
        return None

    def _cpu_kernel(self, node: onnx.NodeProto, sch: "Schema | None", types: "dict[str, str] | None" = None) -> "str | None":
        """None when the CPU EP has a kernel for the node (its values of `types`, default the
        graph's), else why not."""
        if sch is None:
            return "no CPU kernel either"
        kernels = cpu_kernels(node.op_type, node.domain, sch.since_version)
        if not kernels:
            return f"the CPU EP has no {node.op_type} kernel for since-version {sch.since_version} either"
        reasons = [type_mismatch(node, sch, k.types, self.types if types is None else types) for k in kernels]
        if all(reasons):
            return f"the CPU EP's kernel {(reasons[0] or '').removeprefix('the kernel ')} too"
        return None

    def _cast_to_float(self, node: onnx.NodeProto, sch: "Schema | None") -> bool:
        """onnxruntime's InsertCastTransformer takes the node: it runs after partitioning, in every
        session, on each node no provider took that reads a float16 tensor, casting its float16
        inputs and outputs to and from float32 and assigning it to the CPU EP, whose float32 kernel
        must then exist (insert_cast_transformer.cc; bfloat16 is not cast)."""
        values = [n for n in list(node.input) + list(node.output) if n]
        if not any(self.types.get(n) == "float16" for n in node.input if n):
            return False
        as_float = dict(self.types)
        as_float.update({n: "float" for n in values if self.types.get(n) == "float16"})
        return self._cpu_kernel(node, sch, as_float) is None

    def _warn_roi_align(self, path: str, node: onnx.NodeProto) -> None:
        """RoiAlign's measured deviations on DML (dml_deviations.roi_align_deviation)."""
        sch = schema("RoiAlign", "", self.opsets.get("ai.onnx", 0))
        mode = next((a.s.decode(errors="replace") for a in node.attribute
                     if a.name == "coordinate_transformation_mode"), None)
        if sch is None:
            return
        key = roi_align_deviation(sch.since_version, mode)
        if key == "roialign_10_half_pixel":
            self.warnings.append(f"{path} (RoiAlign-{sch.since_version}): the DML EP computes it in half_pixel mode, "
                                 "every ROI moved by half a pixel (ONNX's RoiAlign-10 has no offset), measured on "
                                 "onnxruntime-directml 1.24.4 (a named DML EP deviation)")
        elif key == "roialign_unclamped":
            self.warnings.append(f"{path} (RoiAlign, output_half_pixel): the DML EP keeps an ROI under one pixel as "
                                 "it is (ONNX makes it one pixel wide and high), so small boxes give other values, "
                                 "measured on onnxruntime-directml 1.24.4 (a named DML EP deviation)")

    def _warn_dml(self, path: str, node: onnx.NodeProto) -> None:
        """What is placed on DML but may fail there or differ from ONNX: said, not hidden."""
        if not is_standard(node.domain):
            return
        rank = self.ranks.get(node.output[0]) if node.output else None
        out_type = self.types.get(node.output[0]) if node.output else None
        if node.op_type == "Trilu":
            if rank is not None and rank > 4:
                self.warnings.append(f"{path} (Trilu): rank {rank} is placed on DML and fails at kernel creation "
                                     "(DML's Trilu takes rank <= 4)")
            elif rank is None:
                self.warnings.append(f"{path} (Trilu): rank unknown here; a rank above 4 fails at kernel creation on DML")
            self.warnings.append(f"{path} (Trilu): needs DML_OPERATOR_DIAGONAL_MATRIX1 (DirectML >= 1.9, feature "
                                 "level 5.1); an older DirectML.dll loaded at run time fails, it does not fall back")
        if node.op_type == "EyeLike" and out_type in ("int64", "uint64", "double"):
            self.warnings.append(f"{path} (EyeLike): {indefinite(out_type)} output needs DirectML feature level 5.1; an older "
                                 "DirectML.dll loaded at run time fails, it does not fall back")
        if node.op_type == "Relu" and out_type in ("float", "float16"):      # measured types
            self.relu_nan.append(path)
        if node.op_type == "RoiAlign":
            self._warn_roi_align(path, node)
        deviation = cast_bool_deviation(self.types.get(node.input[0])) if node.op_type == "Cast" and \
            out_type == "bool" and node.input else None
        if deviation == "cast_bool_clip":
            self.warnings.append(f"{path} (Cast to bool): DML casts to bool by clipping to [0, 1], so fractions, "
                                 "negatives and NaN come out false (optimize --for dml rewrites it as a comparison)")
        elif deviation == "cast_bool_low_word":
            self.warnings.append(f"{path} (Cast to bool): DML casts {self.types.get(node.input[0])} to bool from its "
                                 "low 32 bits only, so 2^32 comes out false (optimize --for dml rewrites it as a "
                                 "comparison)")

    def _copies(self, g: _Graph, prefix: str, provider: "dict[int, str]", kernel: "dict[int, DmlKernel]",
                outer_initializers: "frozenset[str]" = frozenset()) -> None:
        """MemcpyToHost / MemcpyFromHost per value crossing sides (transformer_memcpy.cc), as
        onnxruntime 1.24.4 inserts them around control flow (measured: tests/compiler/ep/
        test_control_flow_copies.py): a value an If / Loop / Scan body reads from outside is not
        copied for that node, on either provider; inside the body such a value is a graph input,
        copied to DML when nodes of both sides read it there. A node no provider takes is never
        run (onnxruntime's copy pass fails on it, "Provider type ... is not set"): no copy of or
        for it."""
        for value, consumers in g.consumers.items():
            needs: "dict[str, list[str]]" = {"gpu": [], "cpu": []}
            for c in consumers:
                node = g.nodes[c]
                if value not in node.input or provider.get(c) == NONE:
                    continue        # read only inside its bodies (their own copies decide), or never run
                if provider.get(c) == DML:
                    cpu_read = all(j in kernel[c].cpu_inputs for j, n in enumerate(node.input) if n == value) \
                        and value in node.input
                    needs["cpu" if cpu_read else "gpu"].append(prefix + node.name)
                else:
                    needs["cpu"].append(prefix + node.name)
            if value in g.producer:
                p = g.producer[value]
                if provider.get(p) == NONE:
                    continue        # never produced: no copy of it
                pnode = g.nodes[p]
                on_gpu = provider.get(p) == DML and not (is_standard(pnode.domain) and pnode.op_type in ("Shape", "Size"))
                source = prefix + pnode.name
            elif value in g.inputs and needs["gpu"] and needs["cpu"]:
                on_gpu, source = False, f"graph input {value!r}"
            elif prefix and value not in g.initializers and value not in outer_initializers \
                    and needs["gpu"] and needs["cpu"]:
                on_gpu, source = False, f"outer value {value!r}"
            else:
                continue        # initializers are duplicated per side
            kind, to = ("MemcpyToHost", needs["cpu"]) if on_gpu else ("MemcpyFromHost", needs["gpu"])
            if to:
                self.copies.append({"copy": kind, "value": value, "from": source, "to": to})


def _initializer_names(model: onnx.ModelProto) -> "set[str]":
    return {i.name for _, graph in prefixed_graphs(model.graph) for i in graph.initializer}


def _producers(model: onnx.ModelProto) -> "dict[str, str]":
    """value -> the path of the node producing it, every graph of the model."""
    return {out: path for path, node in node_paths(model.graph) for out in node.output if out}


def _removed_reason(node: onnx.NodeProto, folded: "set[str]", functions: "set[tuple[str, str]]",
                    producers: "dict[str, str]") -> "tuple[str, bool | None]":
    """Why level 1 removed the node, and whether that is a fusion or elimination whose rules change
    between onnxruntime releases (inlining, Constants, folding and Identity / Dropout do not);
    None: its outputs are gone, which is one or the other as their readers say (_node_entries)."""
    if (node.domain, node.op_type) in functions:
        return (f"a call of the model-local function {node.domain}:{node.op_type}: onnxruntime inlines it at load "
                f"(its nodes are listed as _inlfunc_{node.op_type}_<node>)"), False
    if is_standard(node.domain) and node.op_type == "Constant":
        return "a Constant: onnxruntime turns it into an initializer at load", False
    if any(o in folded for o in node.output if o):
        return "constant-folded by onnxruntime's level-1 optimisations (its output is an initializer now)", False
    if is_standard(node.domain) and node.op_type in ("Identity", "Dropout"):
        return f"removed by onnxruntime's level-1 {node.op_type} elimination", False
    now = [producers[o] for o in node.output if o in producers]
    if now:
        return (f"replaced by onnxruntime's level-1 optimisations (fused or expanded): its output is now "
                f"produced by {now[0]}"), True
    return ("removed by onnxruntime's level-1 optimisations: its outputs are no longer in the graph (constant-"
            "folded together with the nodes reading them, or eliminated)"), None


def assumed_redist(version: str) -> str:
    """The DirectML that onnxruntime version ships (both tables' onnxruntime ship redist 1.15.4)."""
    return f"DirectML redist 1.15.4 (feature level 5.1 or above, as onnxruntime {version.removesuffix('.0')} ships it)"


def no_provider_warning(path: str, op_type: str) -> str:
    """The one wording of a node no provider takes (inspect --ep dml, optimize --for dml)."""
    # measured on onnxruntime.dll 1.24.4: a DML session's copy pass refuses the node (its
    # "provider type ... is not set"); a CPU-only session says NOT_IMPLEMENTED
    return (f"{path} ({op_type}): no provider has a kernel for it; onnxruntime cannot create the session "
            "(a DML session says the node's provider type is not set)")


def predict_placement(raw: onnx.ModelProto, model_dir: "str | None",
                      device_lacks: "tuple[str, ...]" = (), ort_version: "str | None" = None) -> dict:
    """The `ep_placement` report (its keys: docs/commands/inspect.md) for a model as stored (weights external
    or inline; this process never loads external weights)."""
    return predict_with_graph(raw, model_dir, device_lacks, ort_version=ort_version)[0]


def _cpu_preferred(g: _Graph, kernel: "dict[int, DmlKernel]", types: "dict[str, str]") -> "dict[int, str]":
    """B. GetCpuPreferredNodes: the DML-capable nodes onnxruntime's CPU preference pass takes (a
    shape sub-graph read on the CPU), each with why."""
    cpu_values: "dict[str, int]" = {}
    queue: "list[int]" = []
    queued: "set[int]" = set()

    def reach(value: str, producer: int) -> None:
        cpu_values[value] = producer
        for c in g.consumers.get(value, []):
            if c not in queued:
                queued.add(c)
                heapq.heappush(queue, c)
    for i in kernel:
        if is_standard(g.nodes[i].domain) and g.nodes[i].op_type in _SHAPE_SEEDS:
            for out in g.nodes[i].output:
                if out:
                    reach(out, i)
    preferred: "dict[int, str]" = {}
    while queue:
        i = heapq.heappop(queue)
        node = g.nodes[i]
        if i not in kernel:
            for out in node.output:
                if out:
                    reach(out, i)
            continue
        via = []
        for j, name in enumerate(node.input):
            if not name or types.get(name) in _HALF_TYPES:
                break
            if g.small_initializer(name) or name in g.inputs:
                continue
            if name not in cpu_values or j in kernel[i].cpu_inputs:
                break
            via.append(f"{name!r} from {g.nodes[cpu_values[name]].name}")
        else:
            preferred[i] = ("shape sub-graph: onnxruntime's CPU preference pass takes it (it reads "
                            + ", ".join(via) + " on the CPU)")
            for out in node.output:
                if out:
                    reach(out, i)
    return preferred


def predict_with_graph(raw: onnx.ModelProto, model_dir: "str | None", device_lacks: "tuple[str, ...]" = (),
                       level1: "Level1 | None" = None, ort_version: "str | None" = None, chosen: str = ""
                       ) -> "tuple[dict, onnx.ModelProto]":
    """The report and the graph it was predicted on (after level 1, nodes named by identity).
    `level1`: who runs the level-1 optimisations (default: the onnxruntime installed here);
    `ort_version`: the registration table modelled (a TABLES key; None: as the commands choose it,
    registry.choose_table), `chosen`: why that one."""
    import onnxruntime as ort
    if ort_version is None:
        table = choose_table(None)
        ort_version, chosen = table.version, chosen or table.why
    bad = [t for t in device_lacks if t not in DEVICE_DEPENDENT]
    if bad:
        raise DmlLowerError(f"--device-lacks {bad[0]!r}: the device decides only {', '.join(DEVICE_DEPENDENT)}")
    lacks = frozenset(device_lacks)
    model = onnx.ModelProto()
    model.CopyFrom(raw)
    identify_nodes(model)
    warnings: "list[str]" = []
    level1 = level1 if level1 is not None else Level1(level1_model, f"onnxruntime {ort.__version__} installed here")
    optimised, refused = _level1_optimised(model, model_dir, level1, warnings)
    predictor = _placed(model, optimised, lacks, ort_version)
    dml_nodes = {e["node"] for e in predictor.placed if e["provider"] == DML}
    warnings += [f"{f.node} ({f.op_type}): {FAILURES[f.key].removeprefix('DML EP deviation: ')}, measured on "
                 f"onnxruntime-directml 1.24.4 (a named DML EP deviation{_FAILURE_REMEDY.get(f.key, '')})"
                 for f in failing_nodes(optimised, predictor.ranks) if f.node in dml_nodes]
    # an empty DML output beside others leaves them never read back (dml_deviations.unread_outputs)
    placed = {e["node"]: e["provider"] for e in predictor.placed}
    warnings += [r.describe() for r in empty_output_risks(optimised, placed)]
    # a graph output whose only reader, an activation, the DML EP fuses into its producer (dml_fusion)
    warnings += [r.describe() for r in fused_output_risks(optimised, placed)]
    if predictor.relu_nan:
        warnings.append(f"{name_list(predictor.relu_nan, 4)} (Relu): the DML EP's Relu gives 0 for NaN (ONNX says NaN), "
                        "measured on onnxruntime-directml 1.24.4 (a named DML EP deviation)")
    nodes = _node_entries(model, optimised, predictor)
    if predictor.fused_by_level1 and f"onnxruntime {ort_version} " not in f"{level1.by} ".replace(".dll", ""):
        warnings.append(f"{name_list(predictor.fused_by_level1, 4)}: removed, fused or created by the level-1 "
                        f"optimisations of {level1.by.removesuffix(' installed here')}, whose fusions may differ "
                        f"from onnxruntime {ort_version}'s: that release may keep the stored nodes (--verify runs "
                        "its own)")
    if predictor.unknown_types:
        warnings.append(f"{len(predictor.unknown_types)} value types are unknown offline (e.g. "
                        f"{sorted(predictor.unknown_types)[0]!r}); their nodes are assumed to pass the device type check")
    warnings.append(UNKNOWABLE)
    return {
        "ep": DML,
        "onnxruntime": ort_version,
        "assumptions": {
            "registration_table": f"onnxruntime {ort_version} DirectML EP ({TABLE_SOURCES[ort_version]})"
                                  + (f"; {chosen}" if chosen else ""),
            "registration_table_chosen": chosen,
            **_level1_assumed(level1, refused),
            "cpu_kernels": f"onnxruntime {ort.__version__} installed here",
            "device_types": {t: t not in lacks for t in DEVICE_DEPENDENT},
            "directml": assumed_redist(ort_version),
        },
        "nodes": nodes,
        "copies": predictor.copies,
        "warnings": predictor.warnings + warnings,
    }, optimised


def _level1_assumed(level1: Level1, refused: str) -> "dict[str, str]":
    """The assumptions' level-1 keys: who ran it, and why it could not run ('' where it did)."""
    ran = f"{level1.by}, ORT_ENABLE_BASIC" if not refused else \
        f"none: {level1.by}'s CPU-only ORT_ENABLE_BASIC session refused the model"
    return {"level1_optimisations": ran, "level1_refused": refused}


def _level1_optimised(model: onnx.ModelProto, model_dir: "str | None", level1: Level1,
                      warnings: "list[str]") -> "tuple[onnx.ModelProto, str]":
    """(The model after level 1 (as stored when onnxruntime refuses it), its nodes named; why level 1
    was refused, or ''); what happened said in `warnings`."""
    optimised, refused = level1.optimise(model, model_dir)
    if optimised is None:
        refused = refused or "onnxruntime gave no reason"
        # the pass is a session with the CPU EP alone (level 1 is EP-agnostic): a node with no CPU
        # kernel fails it, which says nothing of whether the DML EP takes that node and the model
        warnings.append(f"level-1 optimisations not applied: the CPU-only session of "
                        f"{level1.by.replace(' installed here', '')} that runs them refuses the model here "
                        f"({refused}), a refusal of the CPU EP's, not the DML EP's; placement is predicted on the model as stored (its Constants "
                        "made initializers, as onnxruntime's graph load makes them at every level)")
        optimised = constants_as_initializers(model)
    undone = undo_cpu_casts(optimised.graph, {o: n for _, n in node_paths(model.graph) for o in n.output})
    if undone:
        warnings.append(f"onnxruntime's CPU-only session here inserted {undone} float16 casts ({CPU_CAST_PREFIX}*) "
                        "around the nodes its CPU EP took through them; they are taken out, and a DML session "
                        "casts only the float16 nodes DML does not take (placed on the CPU EP below)")
    identify_nodes(optimised)    # onnxruntime leaves the nodes it creates unnamed
    return optimised, refused


def _placed(model: onnx.ModelProto, optimised: onnx.ModelProto, lacks: "frozenset[str]", ort_version: str) -> Predictor:
    """The Predictor, having placed the optimised graph (types and ranks from both models)."""
    opsets = {o.domain or "ai.onnx": o.version for o in optimised.opset_import}
    types: "dict[str, str]" = {}
    inferred = _inferred(optimised)
    _value_types(inferred, types)
    original_inferred = _inferred(model)
    _value_types(original_inferred, types)
    ranks = _ranks(inferred)
    for name, rank in _ranks(original_inferred).items():
        ranks.setdefault(name, rank)
    predictor = Predictor(opsets, types, ranks, lacks, ort_version)
    predictor.place(optimised.graph)
    return predictor


def _node_entries(model: onnx.ModelProto, optimised: onnx.ModelProto, predictor: Predictor) -> "list[dict]":
    """One entry per node of the stored model (placed, or why level 1 removed it), then the nodes
    level 1 created."""
    placed = {e["node"]: e for e in predictor.placed}
    folded = _initializer_names(optimised) - _initializer_names(model)
    functions = {(f.domain, f.name) for f in model.functions}
    producers = _producers(optimised)
    model_opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    nodes: "list[dict]" = []
    seen: "set[str]" = set()
    readers: "dict[str, list[str]]" = {}
    for path, node in node_paths(model.graph):
        for name in node_reads(node):       # an If reading the value in a body reads it too
            readers.setdefault(name, []).append(path)
    for path, node in node_paths(model.graph):
        if path in placed:
            nodes.append(placed[path])
            seen.add(path)
            continue
        sch = schema(node.op_type, node.domain, model_opsets.get(node.domain or "ai.onnx", 0))
        reason, fused = _removed_reason(node, folded, functions, producers)
        nodes.append({"node": path, "op_type": node.op_type, "domain": node.domain or "ai.onnx",
                      "since_version": sch.since_version if sch else None, "provider": REMOVED, "reason": reason})
        if fused is None:       # a node still there read its output: eliminated or fused (a folded chain's are all gone)
            fused = any(reader in placed for out in node.output if out for reader in readers.get(out, ()))
        if fused:
            predictor.fused_by_level1.append(path)
    for path, entry in placed.items():
        if path not in seen:
            entry = dict(entry)
            inlined = path.split("/")[-1].startswith("_inlfunc_")
            created = "inlined from a model-local function" if inlined else "created by onnxruntime's level-1 optimisations"
            entry["reason"] = created + (f"; {entry['reason']}" if entry["reason"] else "")
            nodes.append(entry)
            if not inlined:
                predictor.fused_by_level1.append(path)
    return nodes


def placement_for_file(path: str, device_lacks: "tuple[str, ...]" = (), raw: "onnx.ModelProto | None" = None,
                       level1: "Level1 | None" = None, ort_version: "str | None" = None, chosen: str = ""
                       ) -> "tuple[dict, onnx.ModelProto]":
    """The report for the model file and the graph it was predicted on."""
    if raw is None:
        raw = onnx.load(str(path), load_external_data=False)
    return predict_with_graph(raw, str(Path(path).resolve().parent), device_lacks, level1, ort_version, chosen)


def format_placement(report: dict) -> "list[str]":
    """The text inspect prints under its summary: counts, every node not on DML with why, copies,
    warnings (the JSON has every node)."""
    a = report["assumptions"]
    devices = ", ".join(t for t, ok in a["device_types"].items() if ok) or "none of the 64-bit/16-bit types"
    chosen = a.get("registration_table_chosen")
    level1 = "no level-1 optimisations (refused, below)" if a.get("level1_refused") else \
        f"level-1 optimisations by {a['level1_optimisations'].split(' installed')[0]} here"
    lines = [f"DML EP placement predicted (onnxruntime {report['onnxruntime']} registration table"
             f"{f' [{chosen}]' if chosen else ''}; {level1}):",
             f"  assumed: the device supports {devices}; {a['directml']}"]
    by_provider: "dict[str, list[dict]]" = {}
    for n in report["nodes"]:
        by_provider.setdefault(n["provider"], []).append(n)
    dml = by_provider.get(DML, [])
    counts = Counter(n["op_type"] for n in dml)
    lines.append(f"  {DML}: {len(dml)} node{'s' if len(dml) != 1 else ''}" + (": " + ", ".join(
        f"{op} {c}" for op, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) if dml else ""))
    for provider, title in ((CPU, CPU), (NONE, "no provider"), (REMOVED, "removed before partitioning")):
        entries = by_provider.get(provider, [])
        if not entries:
            continue
        lines.append(f"  {title}: {len(entries)} node{'s' if len(entries) != 1 else ''}")
        for n in entries:
            version = f"-{n['since_version']}" if n["since_version"] is not None else ""
            lines.append(f"    {n['node']} ({n['op_type']}{version}): {n['reason']}")
    lines.append(f"  copies: {len(report['copies'])}")
    for c in report["copies"]:
        lines.append(f"    {c['copy']} of {c['value']!r}: {c['from']} -> {', '.join(c['to'])}")
    for w in report["warnings"]:
        lines.append(f"  warning: {w}")
    return lines
