"""The ONNX-semantics oracle every backend is compared with.

Kinds (`check --oracle`):
- "hybrid" (default): ONNX semantics evaluate every node whose semantics this project
  implements or where onnxruntime deviates or lacks a kernel (NonZero, EyeLike, Trilu, the nodes
  an idiom covers, control flow holding them, nodes onnxruntime's CPU provider cannot load):
  the numpy ONNX definitions of onnx_definitions.py where they define the node (proven equal to
  onnx.reference by differential tests, without its import and per-model set-up), onnx.reference
  otherwise; onnxruntime's CPU provider evaluates the rest, in as few regions as the
  dependencies allow. A node one engine cannot evaluate falls back to the next (definitions ->
  onnx.reference -> onnxruntime), by name, with the reason. An If / Loop / Scan that holds such a
  node, or that onnxruntime cannot load, runs on the host as ONNX defines it, each body evaluated
  by a hybrid oracle of its own (oracle_control_flow.py), at any depth.
- "reference": the whole model on onnx.reference (slow, independent of onnxruntime), except an
  If / Loop / Scan it gets wrong (region_engine.reference_gets_wrong, at any depth): that one runs
  on the host as ONNX defines it, its bodies on onnx.reference, and the report names it.
- "ort-cpu": the whole model on onnxruntime's CPU provider.
- a path to an .npz: golden outputs saved elsewhere (`check --save-outputs` on another machine).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import onnx

from onnx_dml_lowering.runtime.compiled_view import CompiledView
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import first_line
from onnx_dml_lowering.lowering.onnx_graphs import body_nodes, is_standard, node_paths, node_reads, standard_opset
from onnx_dml_lowering.lowering.owned_ops import owned
from onnx_dml_lowering.lowering.schedule import engine_runs

from .feeds import describe_type, restore_declared
from .memory import parse_size
from .onnx_definitions import ENGINE as DEFINITIONS
from .onnx_definitions import NotDefined, defines
from .ort_deviations import deviating_nodes
from .oracle_control_flow import body_model, body_types
from .oracle_names import ORACLE_KINDS, OracleKind, OracleName, parse_oracle  # noqa: F401  (re-exported)
from .control_flow import host_construct
from onnx_dml_lowering.runtime.ort.sessions import make_session
from onnx_dml_lowering.runtime.ort.settings import SessionSettings
from .weights import reference_evaluator, tensor_array
from .ort_values import run_session
from .region_cache import ORACLE as ORACLE_PASS
from .region_engine import (HOST, ORT, REFERENCE, Region, RegionEngine, SessionCache,  # noqa: F401
                            reference_gets_wrong)
from .saved_outputs import load_golden, split_metadata
from .sequences import RaggedSequence, as_array

ORT_CPU = "onnxruntime CPUExecutionProvider"     # the region engine's ORT on the CPU provider
# REFERENCE, DEFINITIONS and HOST (If / Loop / Scan run as ONNX defines them, bodies on nested
# oracles) are the region engine's names.


# The oracle's kinds and names live in oracle_names (no numpy, onnx or onnxruntime: the command
# line reads them before it imports those); re-exported here for the runtime and the API.
def holds_semantic_op(node: onnx.NodeProto) -> bool:
    """The node is an operator this project owns (lowering.owned_ops: NonZero, EyeLike, Trilu),
    or a control-flow node with one inside."""
    if owned(node.op_type, node.domain):
        return True
    return any(owned(inner.op_type, inner.domain) for inner in body_nodes(node))


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
    """Evaluates a (checked, shape-inferred) model with ONNX semantics; a subclass per kind (see the
    module docstring; make_oracle picks it). This base holds what the planned kinds (hybrid,
    reference) share: regions of nodes, each on its engine, control flow on the host."""
    KIND: OracleKind
    COMPUTES_SPEC = True       # ONNX semantics computed here (not onnxruntime's reading, not a file)

    def __init__(self, model: onnx.ModelProto, types: Mapping, semantic_nodes: Iterable[str] = (),
                 settings: "SessionSettings | None" = None, shared: "SessionCache | None" = None,
                 passed: Iterable[str] = (), ort_reading: bool = False, memory_limit: "int | None" = None) -> None:
        self.model = model
        self.settings = settings          # the user's onnxruntime session settings (--threads ...)
        self.memory_limit = memory_limit  # bytes (--memory-limit) the host's control flow may hold
        # its regions' sub-models and sessions; the onnxruntime ones (and their results) shared with
        # the lowered run's ONNX regions through `shared`, the CompiledModel's cache
        # `passed`: initializers the lowered run generates and feeds to its regions (a stored eye or
        # mask): fed here too, from the stored value, so both sides' regions are one session and
        # the lowered run can take this side's results when its generated value is bit for bit equal
        self.engine = RegionEngine(model, types, settings, ["CPUExecutionProvider"], cache=shared,
                                   bodies=self._body_oracle, passed=passed, memory_limit=memory_limit)
        self._passed = [t for t in model.graph.initializer if t.name in set(passed)]
        self.types = types
        self.output_names = [o.name for o in model.graph.output]
        self.semantic = set(semantic_nodes)
        self.forced_reference: "set[str]" = set()   # nodes onnxruntime's CPU provider cannot load
        self.fallbacks: "list[Fallback]" = []
        self._regions: "dict[tuple, Region]" = {}
        # the oracles of the bodies the host runs, by (control-flow node, attribute)
        self._bodies: "dict[tuple[str, str], Oracle]" = {}
        self.opset = standard_opset(model, 1)
        self.hint = " (the default hybrid oracle falls back node by node)"     # after onnx.reference's failures
        self._runs: "list[_Run] | None" = None
        self._planned_keep: "set[str]" = set()
        # engine_of of every main-graph node, made in one pass and kept while forced_reference
        # (the only input of engine_of that changes after __init__) keeps its size
        self._engines: "tuple[int, list[str]] | None" = None
        self._inits = self.engine.inits
        # onnxruntime's reading of the nodes it deviates on instead of their definitions (what a
        # provider backend showing the deviation gives: ort_reading.py); the hybrid kind's
        self.ort_reading = ort_reading
        self.ort_deviations: "dict[str, Any]" = {}
        self.values: "dict[str, np.ndarray]" = {}    # the values of the last planned run
        self.keep: "set[str]" = set()                # intermediate values a caller needs in .values
        # which NonZero nodes gave a coordinate (watch_nonzero): labelled by path, shared with the
        # oracles of the bodies, so a NonZero in a Loop counts every iteration that ran
        self.path_prefix = ""
        self.nonzero_returned: "set[str]" = set()
        self.nonzero_ran: "set[str]" = set()         # and which ran at all (a body's may not)
        self._watch: "dict[str, str] | None" = None    # NonZero output -> its label, once watched

    def watch_nonzero(self) -> "list[str]":
        """From now on each run adds to `nonzero_returned` the NonZero nodes (here and in the
        bodies the host runs) whose output held a coordinate; returns every NonZero's label (its
        path, as placement names it), at any depth."""
        self._watch = {n.output[0]: self.path_prefix + n.name for n in self.model.graph.node
                       if is_nonzero(n) and n.output and n.output[0]}
        self.keep.update(self._watch)
        for body in self._bodies.values():          # made before (an oracle the API passed in, run already)
            body.nonzero_returned, body.nonzero_ran = self.nonzero_returned, self.nonzero_ran
            body.watch_nonzero()
        return [path for path, n in node_paths(self.model.graph, self.path_prefix) if is_nonzero(n)]

    def _note_nonzero(self, env: "Mapping[str, np.ndarray]") -> None:
        for output, label in (self._watch or {}).items():
            value = env.get(output)
            if value is None or np.shape(value)[-1]:       # not kept: said to have returned, nothing claimed
                self.nonzero_returned.add(label)
            self.nonzero_ran.add(label)         # this graph ran (a body: this branch or iteration)

    @property
    def label(self) -> str:
        """How messages name it: its kind (a golden oracle: its file)."""
        return self.KIND.value

    @property
    def description(self) -> str:
        raise NotImplementedError

    def engine_of(self, node: onnx.NodeProto) -> str:
        raise NotImplementedError

    def main_engines(self) -> "list[str]":
        """engine_of of every main-graph node, in graph order: one pass over the graph per state of
        forced_reference, shared by the plan, the host check and the report (3,500 nodes: ~15 ms)."""
        if self._engines is None or self._engines[0] != len(self.forced_reference):
            self._engines = (len(self.forced_reference), [self.engine_of(n) for n in self.model.graph.node])
        return self._engines[1]

    # -- the evaluation ---------------------------------------------------------------------
    def run(self, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        return self._planned(feeds)

    def _reference_failure(self, nodes: "Iterable[onnx.NodeProto]", env: "Mapping[str, np.ndarray]", exc: Exception) -> str:
        """The line for onnx.reference failing on `nodes`: it names the first node it fails on, run
        one by one in order from `env`."""
        where = None
        env = dict(env)
        for node in nodes:
            outs = [o for o in node.output if o]
            try:
                env.update(self._call(REFERENCE, [node], node_reads(node), outs, env))
            except Exception:
                where = f"node {node.name!r} ({node.op_type})"
                break
        cause = reference_cause(exc)
        return (f"onnx.reference cannot evaluate {where or 'the model'}: {type(cause).__name__}: {first_line(cause)}"
                f"{self.hint}")

    # -- the plan ----------------------------------------------------------------------------
    def node_engines(self) -> "dict[str, str]":
        """Which engine evaluates each node (after any fallback)."""
        engines = {n.name: engine for n, engine in zip(self.model.graph.node, self.main_engines())}
        for fb in self.fallbacks:
            if fb.node in engines:
                engines[fb.node] = fb.engine
        for (node, attribute), body in self._bodies.items():      # named by path, as placement names them
            engines.update((f"{node}/{attribute}/{name}", engine) for name, engine in body.node_engines().items())
        return engines

    def _plan(self) -> "list[_Run]":
        nodes = list(self.model.graph.node)
        reads = [node_reads(node) for node in nodes]          # once per node: protobuf reads are slow
        reads_of = {node.name: r for node, r in zip(nodes, reads)}
        runs = [_Run(engine, members) for engine, members in engine_runs(nodes, self.engine_of, reads,
                                                                           labels=self.main_engines())]
        self._planned_runs(runs)
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
        # a run nothing reads from (dead nodes; a body's often) is not run: ONNX nodes have no effects
        return [run for run in runs if run.outputs]

    def _planned_runs(self, runs: "list[_Run]") -> None:
        """What a kind says of its plan (the reference oracle names what the host runs instead)."""

    def _region(self, nodes: "Sequence[onnx.NodeProto]", inputs: "Sequence[str]", outputs: "Sequence[str]") -> Region:
        # made once per run of the plan (its identity reads every node's name: slow on protobuf);
        # the region holds its nodes, so the ids in the key stay theirs
        key = (tuple(map(id, nodes)), tuple(inputs), tuple(outputs))
        if key not in self._regions:
            self._regions[key] = self.engine.region(list(nodes), inputs, outputs, "oracle_region")
        return self._regions[key]

    # an onnxruntime session (untyped) or an onnx.reference evaluator: Any
    def _session(self, engine: str, nodes: "Sequence[onnx.NodeProto]", inputs: "Sequence[str]",
                 outputs: "Sequence[str]") -> Any:
        return self.engine.session(self._region(nodes, inputs, outputs), ORT if engine == ORT_CPU else engine)

    def _body_oracle(self, node: onnx.NodeProto, attribute: str, graph: onnx.GraphProto,
                     feeds: "Mapping[str, np.ndarray]") -> "Oracle":
        """The oracle (of this one's kind) of one body the host runs, made on its first feeds, kept
        for every later iteration and run (its sessions with it); its fallbacks are this one's."""
        key = (node.name, attribute)
        if key not in self._bodies:
            types = body_types(graph, self.types, feeds)
            prefix = f"{node.name}/{attribute}/"
            body = type(self)(body_model(self.model, node, attribute, graph, types), types,
                              {p[len(prefix):] for p in self.semantic if p.startswith(prefix)}, self.settings,
                              ort_reading=self.ort_reading, memory_limit=self.memory_limit)
            body.fallbacks = self.fallbacks
            body.hint = self.hint
            body.path_prefix, body.nonzero_returned = self.path_prefix + prefix, self.nonzero_returned
            body.nonzero_ran = self.nonzero_ran
            if self._watch is not None:
                body.watch_nonzero()
            self._bodies[key] = body
        return self._bodies[key]

    def _fell_back(self, node: onnx.NodeProto, engine: str, reason: str) -> None:
        if not any(fb.node == node.name for fb in self.fallbacks):
            self.fallbacks.append(Fallback(node.name, engine, reason))

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
            run, error = failed
            culprits = self.engine.probe(self._region(run.nodes, run.inputs, run.outputs), error)
            if not culprits:
                names = sorted(n.name for n in run.nodes)
                raise DmlLowerError(f"the oracle cannot load nodes [{', '.join(names)}] on onnxruntime: "
                                    f"{first_line(error)}")
            self.forced_reference.update(culprits)
        raise DmlLowerError("the oracle could not place the model's nodes on its engines")

    def _planned(self, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        if self._runs is None or self._planned_keep != self.keep:
            self._planned_keep = set(self.keep)
            self._runs = self._plan_loadable()
        env = {**{t.name: tensor_array(t) for t in self._passed}, **feeds}
        with self.engine.cache.results.passing(ORACLE_PASS):     # a pass of check's schedule
            for run in self._runs:
                env.update(self._evaluate(run, env))
        self.values = env
        self._note_nonzero(env)
        for name in self.output_names:          # a graph output that is an initializer no node reads
            if name not in env and name in self._inits:
                env[name] = tensor_array(self._inits[name])
        missing = [n for n in self.output_names if n not in env]
        if missing:
            raise DmlLowerError(f"the oracle produced no value for output {missing[0]!r}")
        return self._carried(env)

    def _carried(self, values: "Mapping[str, Any]") -> "dict[str, np.ndarray]":
        """The outputs as every engine's results are carried (sequences.as_array: a sequence
        stacked, an empty one of its declared element type)."""
        declared = {o.name: describe_type(o.type) for o in self.model.graph.output}
        return {n: as_array(values[n], n, declared.get(n)) for n in self.output_names}

    def _call(self, engine: str, nodes: "Sequence[onnx.NodeProto]", inputs: "Sequence[str]", outputs: "Sequence[str]",
              env: "Mapping[str, np.ndarray]") -> "dict[str, np.ndarray]":
        # onnxruntime's deterministic runs are left for the lowered backends, on equal feeds
        return self.engine.run(self._region(nodes, inputs, outputs), env, (ORT if engine == ORT_CPU else engine,),
                               reuse=True)

    def _evaluate(self, run: _Run, env: "Mapping[str, np.ndarray]") -> "dict[str, np.ndarray]":
        try:
            return self._call(run.engine, run.nodes, run.inputs, run.outputs, env)
        except RaggedSequence:
            raise           # every engine evaluated it: no node to blame, no engine to fall back to
        except Exception as exc:
            if run.engine == HOST and isinstance(exc, DmlLowerError):
                raise       # a body's own line (its nodes fell back inside), or the construct's
            failed = exc
        if run.engine == HOST:
            raise DmlLowerError(f"the oracle cannot evaluate {_named(run.nodes)}: {type(failed).__name__}: "
                                f"{first_line(failed)}") from None
        return self._fall_back(run, env, failed)

    def _fall_back(self, run: _Run, env: "Mapping[str, np.ndarray]", failed: Exception) -> "dict[str, np.ndarray]":
        """A run its engine failed on, node by node on the next engine of the chain."""
        if len(run.nodes) == 1 and run.engine == ORT_CPU and host_construct(run.nodes[0], self.opset) is None:
            raise DmlLowerError(f"the oracle cannot evaluate {_named(run.nodes)}: {first_line(failed)}") from None
        # Node by node, so one node the engine cannot evaluate moves to the other engine alone.
        local = dict(env)
        wanted = set(run.outputs)
        for node in run.nodes:
            outs = [o for o in node.output if o]
            reads = node_reads(node)
            try:
                local.update(self._call(run.engine, [node], reads, outs, local))
                continue
            except RaggedSequence:
                raise
            except NotDefined as exc:
                reason = f"{run.engine} leave this case to {REFERENCE}: {first_line(exc)}"
            except Exception as exc:
                reason = f"{run.engine} failed: {type(exc).__name__}: {first_line(exc)}"
            # control flow goes to the host (whose bodies fall back node by node), never to
            # onnx.reference's Loop
            other = (HOST if host_construct(node, self.opset) is not None
                     else {REFERENCE: ORT_CPU, DEFINITIONS: REFERENCE}.get(run.engine, REFERENCE))
            try:
                local.update(self._call(other, [node], reads, outs, local))
            except RaggedSequence:
                raise
            except Exception as exc:
                if other == HOST and isinstance(exc, DmlLowerError):
                    raise
                raise DmlLowerError(f"the oracle cannot evaluate {_named([node])}: {reason}; {other} failed too: "
                                    f"{first_line(exc)}") from None
            self._fell_back(node, other, reason)
        return {n: local[n] for n in wanted}

    def to_dict(self) -> dict:
        return {"kind": self.KIND.value, "description": self.description}


def reference_cause(exc: BaseException) -> BaseException:
    """What onnx.reference failed on: its operators wrap any TypeError or ValueError (a broadcast
    that does not fit, a bad attribute) as a TypeError 'Issues with types ...' raised from it: told
    by type, the TypeError chained to the TypeError or ValueError it wraps."""
    while isinstance(exc, TypeError) and isinstance(exc.__cause__, (TypeError, ValueError)):
        exc = exc.__cause__
    return exc


def is_nonzero(node: onnx.NodeProto) -> bool:
    return node.op_type == "NonZero" and is_standard(node)


class HybridOracle(Oracle):
    """ONNX semantics where this project owns the node or onnxruntime deviates or lacks a kernel
    (definitions, onnx.reference), onnxruntime's CPU provider for the rest."""
    KIND = OracleKind.HYBRID

    def __init__(self, model: onnx.ModelProto, types: Mapping, semantic_nodes: Iterable[str] = (),
                 settings: "SessionSettings | None" = None, shared: "SessionCache | None" = None,
                 passed: Iterable[str] = (), ort_reading: bool = False, memory_limit: "int | None" = None) -> None:
        super().__init__(model, types, semantic_nodes, settings, shared, passed, ort_reading, memory_limit)
        # nodes onnxruntime is known to compute otherwise than ONNX (ort_deviations.TABLE), which
        # this oracle evaluates by their definitions (the operators this project owns are
        # evaluated by their definitions anyway: not listed)
        self.ort_deviations = {} if ort_reading else {
            node: entry for node, entry in deviating_nodes(model.graph, self.engine.ranks, self._inits,
                                                           lambda name: name in types).items()
            if not owned(entry.op_type, "")}

    @property
    def description(self) -> str:
        deviating = sorted({entry.key for entry in self.ort_deviations.values()})
        known = f" and the nodes onnxruntime deviates on ({', '.join(deviating)})" if deviating else ""
        return (f"{DEFINITIONS} ({REFERENCE} where they stop) for NonZero / EyeLike / Trilu / idiom nodes"
                f"{known}, {ORT_CPU} for the rest")

    def engine_of(self, node: onnx.NodeProto) -> str:
        hosted = host_construct(node, self.opset) is not None
        if (node.name in self.semantic or node.name in self.forced_reference or holds_semantic_op(node)
                or node.name in self.ort_deviations or (hosted and self._holds_semantic_path(node))):
            if hosted:       # control flow: its bodies' nodes each get their own engine
                return HOST
            infos = [self.types.get(name) for name in node.input if name]
            if defines(node, [getattr(i, "onnx_type", 0) or 0 for i in infos], [getattr(i, "rank", None) for i in infos]):
                return DEFINITIONS
            return REFERENCE
        return ORT_CPU

    def _holds_semantic_path(self, node: onnx.NodeProto) -> bool:
        """A node an idiom covers sits in one of the node's bodies (placement names it by its path)."""
        return any(p.startswith(f"{node.name}/{a.name}/") for a in node.attribute for p in self.semantic)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "node_engines": self.node_engines(),
                "ort_deviations": {node: entry.key for node, entry in self.ort_deviations.items()},
                "regions": [{"engine": r.engine, "nodes": [n.name for n in r.nodes]} for r in self._runs or []],
                "fallbacks": _fallbacks(self.fallbacks)}


class ReferenceOracle(Oracle):
    """The whole model on onnx.reference, except an If / Loop / Scan it gets wrong: that one on the
    host, its bodies on onnx.reference (independent of onnxruntime: nothing else to fall back to)."""
    KIND = OracleKind.REFERENCE

    def __init__(self, model: onnx.ModelProto, types: Mapping, semantic_nodes: Iterable[str] = (),
                 settings: "SessionSettings | None" = None, shared: "SessionCache | None" = None,
                 passed: Iterable[str] = (), ort_reading: bool = False, memory_limit: "int | None" = None) -> None:
        super().__init__(model, types, semantic_nodes, settings, shared, passed, ort_reading, memory_limit)
        self._hosts: "bool | None" = None            # does a node run on the host?
        self._reference: Any = None                  # the whole model's evaluator

    @property
    def description(self) -> str:
        return f"{REFERENCE} (whole model)"

    def engine_of(self, node: onnx.NodeProto) -> str:
        hosted = host_construct(node, self.opset) is not None
        return HOST if hosted and reference_gets_wrong(node) is not None else REFERENCE

    def run(self, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        if self._hosts is None:
            self._hosts = HOST in self.main_engines()
        return self._planned(feeds) if self._hosts else self._whole_on_reference(feeds)

    def _whole_on_reference(self, feeds: "Mapping[str, np.ndarray]") -> "dict[str, np.ndarray]":
        try:
            if self._reference is None:     # once: a body's runs once per iteration
                self._reference = reference_evaluator(self.model)
            results = self._reference.run(None, dict(feeds))
        except Exception as exc:
            raise DmlLowerError(self._reference_failure(self.model.graph.node, feeds, exc)) from None
        return self._carried(dict(zip(self.output_names, results)))

    def _planned_runs(self, runs: "list[_Run]") -> None:
        for run in runs:                # what the host evaluates instead is named
            for node in run.nodes if run.engine == HOST else ():
                self._fell_back(node, HOST, reference_gets_wrong(node) or "")

    def _fall_back(self, run: _Run, env: "Mapping[str, np.ndarray]", failed: Exception) -> "dict[str, np.ndarray]":
        raise DmlLowerError(self._reference_failure(run.nodes, env, failed)) from None

    def to_dict(self) -> dict:
        return {**super().to_dict(), "fallbacks": _fallbacks(self.fallbacks)}


class OrtCpuOracle(Oracle):
    """The whole model on onnxruntime's CPU provider."""
    KIND = OracleKind.ORT_CPU
    COMPUTES_SPEC = False

    @property
    def description(self) -> str:
        return f"{ORT_CPU} (whole model)"

    def run(self, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        return self._whole_on_ort(feeds)

    def _whole_on_ort(self, feeds: "Mapping[str, np.ndarray]") -> "dict[str, np.ndarray]":
        try:
            session = make_session(self.model, ["CPUExecutionProvider"], settings=self.settings,
                                   label="the model (the ort-cpu oracle)")
            results = run_session(session, self.output_names, feeds)
        except RaggedSequence:
            raise
        except Exception as exc:
            raise DmlLowerError(f"the ort-cpu oracle cannot evaluate the model: {first_line(exc)}") from None
        return self._carried(dict(zip(self.output_names, results)))



class GoldenOracle(Oracle):
    """Golden outputs saved elsewhere (check --save-outputs on another machine): one feed set's."""
    KIND = OracleKind.GOLDEN
    COMPUTES_SPEC = False

    def __init__(self, model: onnx.ModelProto, types: Mapping, path: str) -> None:
        # nothing is evaluated here: none of the planned state
        self.model, self.types, self.path = model, types, path
        self.output_names = [o.name for o in model.graph.output]
        self.golden, self.golden_meta = split_metadata(load_golden(path))   # meta: its feeds' fingerprint, who saved it
        self.values: "dict[str, np.ndarray]" = {}
        self.keep: "set[str]" = set()
        self.fallbacks = []

    @property
    def label(self) -> str:
        return self.path

    @property
    def description(self) -> str:
        return f"golden outputs from {self.path}"

    def run(self, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
        missing = [n for n in self.output_names if n not in self.golden]
        if missing:
            raise DmlLowerError(f"oracle file {self.path!r} has no output {missing[0]!r} "
                                f"(it holds: {', '.join(sorted(self.golden)) or 'nothing'})")
        return {n: restore_declared(self.types, n, np.asarray(self.golden[n])) for n in self.output_names}


# the class of each kind that evaluates a model (the golden one reads a file instead)
EVALUATING: "dict[OracleKind, type[Oracle]]" = {
    OracleKind.HYBRID: HybridOracle, OracleKind.REFERENCE: ReferenceOracle, OracleKind.ORT_CPU: OrtCpuOracle}


def _fallbacks(fallbacks: "list[Fallback]") -> "list[dict]":
    return [{"node": f.node, "engine": f.engine, "reason": f.reason} for f in fallbacks]


class _OracleSession:
    """A sub-model as one oracle kind runs it, with the session interface `run(outputs, feeds)`.
    `types`: the sub-model's values (TensorInfo), for the bodies the host runs; `memory_limit`:
    the bytes (--memory-limit) its control flow may hold on the host."""
    ORACLE: "type[Oracle]"

    def __init__(self, model: onnx.ModelProto, types: Mapping, memory_limit: "int | None" = None) -> None:
        self.oracle = self.ORACLE(model, types, memory_limit=memory_limit)
        self.oracle.hint = ""         # not the oracle: no --oracle advice

    def run(self, outputs: "Iterable[str] | None", feeds: Mapping[str, np.ndarray]) -> "list[np.ndarray]":
        results = self.oracle.run(feeds)
        return [results[name] for name in (outputs or self.oracle.output_names)]


class HybridSession(_OracleSession):
    """The hybrid oracle's run (onnxruntime's CPU provider except the nodes it deviates on,
    NonZero / EyeLike / Trilu by their definitions): the lowered run's ONNX regions holding a
    node onnxruntime deviates on run so, the rest of the region staying on onnxruntime."""
    ORACLE = HybridOracle


class ReferenceSession(_OracleSession):
    """onnx.reference, as the reference oracle runs it (the If / Loop / Scan it gets wrong on the
    host): the lowered run's ONNX regions fall back to it where onnxruntime cannot load them."""
    ORACLE = ReferenceOracle


def _named(nodes: "list[onnx.NodeProto]") -> str:
    if len(nodes) == 1:
        return f"node {nodes[0].name!r} ({nodes[0].op_type})"
    return f"nodes [{', '.join(n.name for n in nodes)}]"


# -- the factories (check, run, conformance run, reduce) --------------------------------------

def _semantic_nodes(compiled: CompiledView) -> "set[str]":
    return {n for p in compiled.placement if not p.initializer for n in p.onnx_nodes}


def make_oracle(compiled: CompiledView, kind: "str | OracleName" = "hybrid", settings: "SessionSettings | None" = None,
                ort_reading: bool = False, memory_limit: "int | str | None" = None) -> Oracle:
    """The one factory: the oracle of `compiled` of kind `kind` (a name, parsed here when the
    Python API gives text); `memory_limit` (--memory-limit, a size) bounds what its control flow
    accumulates on the host, as it bounds the lowered run's. onnxruntime's reading
    (ort_reading.py) shares no sessions: it runs other regions, rarely."""
    name = parse_oracle(kind)
    if name.kind is OracleKind.GOLDEN:
        return GoldenOracle(compiled.model, compiled.types, name.path)
    return EVALUATING[name.kind](compiled.model, compiled.types, _semantic_nodes(compiled), settings,
                                 None if ort_reading else compiled.shared_sessions,
                                 passed=compiled.partition.generated, ort_reading=ort_reading,
                                 memory_limit=None if memory_limit is None else parse_size(memory_limit))


def reference_outputs(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
    """The whole model on onnx.reference (the independent oracle)."""
    return ReferenceOracle(model, {}).run(feeds)
