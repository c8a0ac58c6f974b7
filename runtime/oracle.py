"""The ONNX-semantics oracle every backend is compared with.

Kinds (`check --oracle`):
- "hybrid" (default): ONNX semantics evaluate every node whose semantics this project
  implements or where onnxruntime deviates or lacks a kernel (NonZero, EyeLike, Trilu, the nodes
  an idiom covers, control flow holding them, nodes onnxruntime's CPU provider cannot load):
  the numpy ONNX definitions of onnx_definitions.py where they define the node (proven equal to
  onnx.reference by differential tests, without its import and per-model set-up), onnx.reference
  otherwise; onnxruntime's CPU provider evaluates the rest, in as few regions as the
  dependencies allow. A node one engine cannot evaluate falls back to the next (definitions ->
  onnx.reference -> onnxruntime), by name, with the reason.
- "reference": the whole model on onnx.reference (slow, independent of onnxruntime).
- "ort-cpu": the whole model on onnxruntime's CPU provider.
- a path to an .npz: golden outputs saved elsewhere (`check --save-outputs` on another machine).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np
import onnx
from onnx import helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import first_line
from onnx_dml_lowering.lowering.schedule import engine_runs, node_bodies, node_reads

from .feeds import restore_declared
from .onnx_definitions import ENGINE as DEFINITIONS
from .onnx_definitions import DefinitionsRegion, NotDefined, defines
from .ort_providers import SessionSettings, few_elements, make_session
from .weights import reference_evaluator, tensor_array
from .ort_values import run_session
from .ort_workarounds import loops_as_onnx_defines
from .region_sessions import SharedSessions, deterministic, region_key
from .saved_outputs import load_golden, split_metadata

REFERENCE = "onnx.reference"
ORT_CPU = "onnxruntime CPUExecutionProvider"
SEMANTIC_OPS = frozenset({"NonZero", "EyeLike", "Trilu"})
ORACLE_KINDS = ("hybrid", "reference", "ort-cpu")

# onnxruntime names the node it has no kernel for in its load error.
NO_KERNEL_NODE = re.compile(r"node with name '([^']*)'")


def holds_semantic_op(node: onnx.NodeProto) -> bool:
    """The node is NonZero / EyeLike / Trilu, or a control-flow node with one inside."""
    if node.op_type in SEMANTIC_OPS and node.domain in ("", "ai.onnx"):
        return True
    return any(holds_semantic_op(inner) for body in node_bodies(node) for inner in body.node)


def reference_deviation(node: onnx.NodeProto) -> "str | None":
    """Why onnx.reference must not evaluate this node (it deviates from the ONNX spec), or None."""
    if node.op_type == "Loop" and node.domain in ("", "ai.onnx") and (len(node.input) < 2 or not node.input[1]):
        # onnx 1.23's reference Loop runs zero iterations when the condition input is empty,
        # where ONNX runs the trip count M.
        return "onnx.reference runs a Loop with an empty condition input zero times; ONNX runs it M times"
    if node.op_type == "Loop" and node.domain in ("", "ai.onnx") and len(node.output) > max(len(node.input) - 2, 0):
        # ... and concatenates a Loop's scan outputs where ONNX stacks them ([n] + shape).
        return "onnx.reference concatenates Loop scan outputs along axis 0; ONNX stacks them on a new axis"
    return None


def _value_info(name: str, types: Mapping) -> onnx.ValueInfoProto:
    info = types.get(name)
    if info is None or not getattr(info, "onnx_type", 0):
        return onnx.ValueInfoProto(name=name)           # untyped: the engine infers it
    return helper.make_tensor_value_info(name, info.onnx_type, None)


@dataclass
class Fallback:
    node: str
    engine: str
    reason: str


@dataclass
class _Run:
    engine: str
    nodes: "list[onnx.NodeProto]"
    inputs: "list[str]" = field(default_factory=list)
    outputs: "list[str]" = field(default_factory=list)


class Oracle:
    """Evaluates a (checked, shape-inferred) model with ONNX semantics; see the module docstring."""

    def __init__(self, model: onnx.ModelProto, types: Mapping, kind: str = "hybrid",
                 semantic_nodes: Iterable[str] = (), settings: "SessionSettings | None" = None,
                 shared: "SharedSessions | None" = None) -> None:
        self.model = model
        self.settings = settings          # the user's onnxruntime session settings (--threads ...)
        # onnxruntime region sessions shared with the lowered run's ONNX regions (same sub-model)
        self.shared = shared
        self.types = types
        self.kind = kind
        self.golden: "dict[str, np.ndarray] | None" = None
        self.golden_meta: "dict[str, str]" = {}      # its feeds' fingerprint, who saved it
        if kind not in ORACLE_KINDS:
            if not kind.endswith(".npz"):
                raise DmlLowerError(f"unknown oracle {kind!r}; choose from {', '.join(ORACLE_KINDS)} "
                                    "or a golden-outputs FILE.npz")
            self.golden, self.golden_meta = split_metadata(load_golden(kind))
        self.output_names = [o.name for o in model.graph.output]
        self.semantic = set(semantic_nodes)
        self.forced_reference: "set[str]" = set()   # nodes onnxruntime's CPU provider cannot load
        self.fallbacks: "list[Fallback]" = []
        self._sessions: dict = {}
        self._shared_keys: dict = {}                 # session key -> its key in `shared` (results shareable)
        self._runs: "list[_Run] | None" = None
        self._planned_keep: "set[str]" = set()
        passed = {vi.name for vi in model.graph.input}
        self._inits = {i.name: i for i in model.graph.initializer if i.name not in passed}
        self.values: "dict[str, np.ndarray]" = {}    # the values of the last hybrid run
        self.keep: "set[str]" = set()                # intermediate values a caller needs in .values

    @property
    def description(self) -> str:
        if self.golden is not None:
            return f"golden outputs from {self.kind}"
        return {"hybrid": f"{DEFINITIONS} ({REFERENCE} where they stop) for NonZero / EyeLike / Trilu / idiom nodes, "
                          f"{ORT_CPU} for the rest",
                "reference": f"{REFERENCE} (whole model)", "ort-cpu": f"{ORT_CPU} (whole model)"}[self.kind]

    # -- the evaluation ---------------------------------------------------------------------
    def run(self, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        if self.golden is not None:
            missing = [n for n in self.output_names if n not in self.golden]
            if missing:
                raise DmlLowerError(f"oracle file {self.kind!r} has no output {missing[0]!r} "
                                    f"(it holds: {', '.join(sorted(self.golden)) or 'nothing'})")
            return {n: restore_declared(self.types, n, np.asarray(self.golden[n])) for n in self.output_names}
        if self.kind == "reference":
            return self._whole_on_reference(feeds)
        if self.kind == "ort-cpu":
            return self._whole_on_ort(feeds)
        return self._hybrid(feeds)

    def _whole_on_reference(self, feeds) -> "dict[str, np.ndarray]":
        try:
            results = reference_evaluator(self.model).run(None, dict(feeds))
        except Exception as exc:
            where = self._failing_reference_node(feeds)
            raise DmlLowerError(f"onnx.reference cannot evaluate {where or 'the model'}: {type(exc).__name__}: "
                                f"{first_line(exc)} (the default hybrid oracle falls back node by node)") from None
        return {n: np.asarray(v) for n, v in zip(self.output_names, results)}

    def _failing_reference_node(self, feeds) -> "str | None":
        """The first node onnx.reference fails on, run one by one in graph order ("node 'n' (Op)")."""
        env = dict(feeds)
        for node in self.model.graph.node:
            outs = [o for o in node.output if o]
            try:
                env.update(self._call(REFERENCE, [node], node_reads(node), outs, env))
            except Exception:
                return f"node {node.name!r} ({node.op_type})"
        return None

    def _whole_on_ort(self, feeds) -> "dict[str, np.ndarray]":
        try:
            session = make_session(self.model, ["CPUExecutionProvider"], settings=self.settings)
            results = run_session(session, self.output_names, feeds)
        except Exception as exc:
            raise DmlLowerError(f"the ort-cpu oracle cannot evaluate the model: {first_line(exc)}") from None
        return {n: np.asarray(v) for n, v in zip(self.output_names, results)}

    # -- hybrid -----------------------------------------------------------------------------
    def engine_of(self, node: onnx.NodeProto) -> str:
        if reference_deviation(node) is not None:
            return ORT_CPU
        if node.name in self.semantic or node.name in self.forced_reference or holds_semantic_op(node):
            infos = [self.types.get(name) for name in node.input if name]
            if defines(node, [getattr(i, "onnx_type", 0) or 0 for i in infos], [getattr(i, "rank", None) for i in infos]):
                return DEFINITIONS
            return REFERENCE
        return ORT_CPU

    def routed(self) -> "list[Fallback]":
        """Nodes onnxruntime evaluates because onnx.reference is known to deviate on them."""
        return [Fallback(n.name, ORT_CPU, reason) for n in self.model.graph.node
                if (reason := reference_deviation(n)) is not None and holds_semantic_op(n)]

    def node_engines(self) -> "dict[str, str]":
        """Which engine evaluates each node (after any fallback)."""
        engines = {n.name: self.engine_of(n) for n in self.model.graph.node}
        for fb in self.fallbacks:
            engines[fb.node] = fb.engine
        return engines

    def _plan(self) -> "list[_Run]":
        nodes = list(self.model.graph.node)
        reads = [node_reads(node) for node in nodes]          # once per node: protobuf reads are slow
        reads_of = {node.name: r for node, r in zip(nodes, reads)}
        runs = [_Run(engine, members) for engine, members in engine_runs(nodes, self.engine_of, reads)]
        last_read: "dict[str, int]" = {n: len(runs) for n in list(self.output_names) + sorted(self.keep)}
        for index, run in enumerate(runs):
            for node in run.nodes:
                for name in reads_of[node.name]:
                    last_read[name] = max(last_read.get(name, -1), index)
        for index, run in enumerate(runs):
            produced: "set[str]" = set()
            taken: "set[str]" = set()
            for node in run.nodes:
                for name in reads_of[node.name]:
                    if name not in produced and name not in taken:
                        taken.add(name)
                        run.inputs.append(name)
                produced.update(o for o in node.output if o)
            run.outputs = [o for node in run.nodes for o in node.output if o and last_read.get(o, -1) > index]
        return runs

    def _submodel(self, nodes: "list[onnx.NodeProto]", inputs: "list[str]", outputs: "list[str]") -> onnx.ModelProto:
        graph = helper.make_graph(loops_as_onnx_defines(nodes), "oracle_region",
                                  [_value_info(n, self.types) for n in inputs if n not in self._inits],
                                  [_value_info(n, self.types) for n in outputs],
                                  [self._inits[n] for n in inputs if n in self._inits])
        sub = helper.make_model(graph, opset_imports=list(self.model.opset_import),
                                ir_version=self.model.ir_version)
        sub.functions.extend(self.model.functions)
        return sub

    def _session(self, engine: str, nodes, inputs, outputs):
        key = (engine, tuple(n.name for n in nodes), tuple(outputs))
        if key not in self._sessions and engine == DEFINITIONS:
            self._sessions[key] = DefinitionsRegion(nodes, {n: tensor_array(self._inits[n]) for n in inputs
                                                            if n in self._inits})
        if key not in self._sessions and engine == REFERENCE:
            self._sessions[key] = reference_evaluator(self._submodel(list(nodes), list(inputs), list(outputs)))
        if key not in self._sessions:
            embedded = [n for n in inputs if n in self._inits]
            tiny = few_elements(self._inits[n] for n in embedded)

            def build():     # the sub-model only when this side builds the session
                sub = self._submodel(list(nodes), list(inputs), list(outputs))
                return make_session(sub, ["CPUExecutionProvider"], tiny=tiny, settings=self.settings)
            if self.shared is None:
                self._sessions[key] = build()
            else:
                fed = [n for n in inputs if n not in self._inits]
                shared_key = region_key(nodes, fed, embedded, outputs, ["CPUExecutionProvider"], self.settings)
                self._sessions[key] = self.shared.get(shared_key, build)
                if deterministic(nodes, self.model):
                    self._shared_keys[key] = shared_key
        return self._sessions[key]

    def _plan_loadable(self) -> "list[_Run]":
        """Plans until every onnxruntime region loads: a node it has no kernel for moves to onnx.reference."""
        for _ in range(len(self.model.graph.node) + 1):
            runs = self._plan()
            failed = None
            for run in runs:
                if run.engine != ORT_CPU:
                    continue
                try:
                    self._session(ORT_CPU, run.nodes, run.inputs, run.outputs)
                except Exception as exc:
                    failed = (run, exc)
                    break
            if failed is None:
                return runs
            run, exc = failed
            names = {n.name for n in run.nodes}
            found = NO_KERNEL_NODE.search(str(exc))
            culprits = [found.group(1)] if found and found.group(1) in names else self._probe(run)
            if not culprits:
                raise DmlLowerError(f"the oracle cannot load nodes [{', '.join(sorted(names))}] on onnxruntime: "
                                    f"{first_line(exc)}")
            self.forced_reference.update(culprits)
        raise DmlLowerError("the oracle could not place the model's nodes on its engines")

    def _probe(self, run: _Run) -> "list[str]":
        """The nodes of a region that onnxruntime cannot load one by one."""
        bad = []
        for node in run.nodes:
            outs = [o for o in node.output if o]
            try:
                self._session(ORT_CPU, [node], node_reads(node), outs)
            except Exception:
                bad.append(node.name)
        return bad

    def _hybrid(self, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        if self._runs is None or self._planned_keep != self.keep:
            self._planned_keep = set(self.keep)
            self._runs = self._plan_loadable()
        env = dict(feeds)
        for run in self._runs:
            env.update(self._evaluate(run, env))
        self.values = env
        for name in self.output_names:          # a graph output that is an initializer no node reads
            if name not in env and name in self._inits:
                env[name] = tensor_array(self._inits[name])
        missing = [n for n in self.output_names if n not in env]
        if missing:
            raise DmlLowerError(f"the oracle produced no value for output {missing[0]!r}")
        return {n: np.asarray(env[n]) for n in self.output_names}

    def _call(self, engine: str, nodes, inputs, outputs, env) -> "dict[str, np.ndarray]":
        session = self._session(engine, nodes, inputs, outputs)
        feeds = {n: env[n] for n in inputs if n not in self._inits}
        results = dict(zip(outputs, run_session(session, outputs, feeds)))
        shared_key = self._shared_keys.get((engine, tuple(n.name for n in nodes), tuple(outputs)))
        if shared_key is not None:
            self.shared.remember(shared_key, feeds, results)    # for the lowered run, on equal feeds
        return {n: np.asarray(v) for n, v in results.items()}

    def _evaluate(self, run: _Run, env) -> "dict[str, np.ndarray]":
        try:
            return self._call(run.engine, run.nodes, run.inputs, run.outputs, env)
        except Exception as exc:
            if len(run.nodes) == 1 and run.engine == ORT_CPU:
                raise DmlLowerError(f"the oracle cannot evaluate node {run.nodes[0].name!r} "
                                    f"({run.nodes[0].op_type}): {first_line(exc)}") from None
        # Node by node, so one node the engine cannot evaluate moves to the other engine alone.
        local = dict(env)
        wanted = set(run.outputs)
        for node in run.nodes:
            outs = [o for o in node.output if o]
            reads = node_reads(node)
            try:
                local.update(self._call(run.engine, [node], reads, outs, local))
                continue
            except NotDefined as exc:
                reason = f"{run.engine} leave this case to {REFERENCE}: {first_line(exc)}"
            except Exception as exc:
                reason = f"{run.engine} failed: {type(exc).__name__}: {first_line(exc)}"
            other = {REFERENCE: ORT_CPU, DEFINITIONS: REFERENCE}.get(run.engine, REFERENCE)
            try:
                local.update(self._call(other, [node], reads, outs, local))
            except Exception as exc:
                raise DmlLowerError(f"the oracle cannot evaluate node {node.name!r} ({node.op_type}): "
                                    f"{reason}; {other} failed too: {first_line(exc)}") from None
            if not any(fb.node == node.name for fb in self.fallbacks):
                self.fallbacks.append(Fallback(node.name, other, reason))
        return {n: local[n] for n in wanted}

    def to_dict(self) -> dict:
        data = {"kind": self.kind if self.golden is None else "golden", "description": self.description}
        if self.golden is None and self.kind == "hybrid":
            engines = self.node_engines()
            data["node_engines"] = engines
            data["regions"] = [{"engine": r.engine, "nodes": [n.name for n in r.nodes]} for r in self._runs or []]
            data["fallbacks"] = [{"node": f.node, "engine": f.engine, "reason": f.reason}
                                 for f in self.routed() + self.fallbacks]
        return data


def reference_outputs(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
    """The whole model on onnx.reference (the independent oracle)."""
    return Oracle(model, {}, "reference").run(feeds)
