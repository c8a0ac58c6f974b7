"""One engine for ONNX regions: the sub-models, sessions and fallback chain that both the oracle
(oracle.py) and the lowered run's ONNX regions (onnx_regions.py) run nodes through.

A region is a run of a model's nodes: the values fed at run time, the initializers embedded in
its sub-model, and the outputs wanted. A RegionEngine is made per model (or body model) and side;
it builds a region's sub-model (weights stay by reference: ort_model hands lazy initializers to
onnxruntime as external data in the user's own files; fed values carry their rank), opens it on
one engine of the table below, runs it and hands the results back by output name. onnxruntime
then optimises a region as it optimises the shipped file (Conv+BatchNormalization and MatMul+Add
fusion, pre-packing need initializers and ranks), so a region computes what onnxruntime's own run
of the model computes, bit for bit where the cut does not split a fusion.

The sessions engines open on onnxruntime go through one SessionCache, which a CompiledModel holds
and both of its sides pass in: the lowered run and the hybrid oracle cut the same model into
onnxruntime regions and, on the models measured, mostly the same ones (the same nodes on the same
inputs to the same outputs, on the same providers with the same session settings). Such a
sub-model is the same computation, so one session serves both (session creation is most of a
region's cost on a cold `check`). The key holds everything that makes two sub-models or sessions
differ (region_key); anything else, and the two sides build their own sessions. The thread count a
region gets when the user sets none (`tiny`: one thread for small work) is estimated here, from the
region and the model's types alone, so it is the same whichever side builds the session first.

The runs are shared too: within one feed set of a check, a pass (the oracle's, then each lowered
backend's) running a deterministic onnxruntime region on feeds bit for bit those of an earlier
pass's run of it takes that run's outputs (read-only views, the producer's made read-only too)
instead of running it again; what differs runs for real (region_cache.py: the keys, the schedule,
when entries are dropped, and why sharing read-only memory keeps the sides independent). The
oracle stays independent: it runs first, so what it compares against is always computed from its
own values.

Sessions on the other engines (the numpy definitions, onnx.reference, the host's control flow)
hold per-side state (a host region's body oracles) and cost little: each engine keeps its own.
"""
from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, NoReturn, Sequence, TypeVar

import numpy as np
import onnx
from onnx import helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import first_line
from onnx_dml_lowering.lowering.onnx_graphs import body_nodes, is_standard, node_reads, standard_opset

from .nondeterminism import is_random
from .onnx_definitions import ENGINE as DEFINITIONS
from .onnx_definitions import DefinitionsRegion
from .oracle_control_flow import BodyEvaluators, HostRegion
from .region_cache import RegionResults
from .ort_messages import kernel_nodes, parse_provider_failure
from onnx_dml_lowering.runtime.ort.sessions import few_elements, make_session
from onnx_dml_lowering.runtime.ort.settings import SessionSettings
from .ort_values import run_session
from .ort_deviations import region_reason
from .ort_workarounds import loops_as_onnx_defines
from .weights import reference_evaluator, tensor_array

# The engines a region can run on.
ORT = "onnxruntime"                          # on the engine's providers
REFERENCE = "onnx.reference"                 # an onnx.reference evaluator of the sub-model
REFERENCE_ORACLE = "reference oracle"        # the sub-model as `--oracle reference` runs it (its
                                             # If / Loop / Scan onnx.reference gets wrong on the host)
HOST = "host control flow"                   # If / Loop / Scan as ONNX defines them, bodies on oracles
HYBRID = "hybrid oracle"                     # the sub-model as the hybrid oracle runs it: onnxruntime
                                             # except the nodes it deviates on (ort_deviations.TABLE)

T = TypeVar("T")                             # what a SessionCache entry holds: a session, a verdict

@dataclass(frozen=True)
class Region:
    """Nodes of one model; `fed` are passed at run time, `embedded` are initializers the sub-model
    holds; `name` is only displayed (and names the sub-model's graph)."""
    nodes: "tuple[onnx.NodeProto, ...]"
    fed: "tuple[str, ...]"
    embedded: "tuple[str, ...]"
    outputs: "tuple[str, ...]"
    name: str = "region"

    @property
    def node_names(self) -> "list[str]":
        return [n.name for n in self.nodes]

    @functools.cached_property
    def identity(self) -> tuple:
        """The sub-model it is, whatever order its lists are in (region_key without the options);
        made once per region: a region of a large model has thousands of nodes."""
        return region_key(self.nodes, self.fed, self.embedded, self.outputs, ())[:4]


def region_key(nodes: "Iterable[onnx.NodeProto]", fed: "Iterable[str]", embedded: "Iterable[str]",
               outputs: "Iterable[str]", providers: "Iterable[str]", settings: "SessionSettings | None" = None
               ) -> tuple:
    """What identifies a region's onnxruntime session: equal keys are the same sub-model with the
    same options (node names are unique model-wide, compiler/node_ids.py; `settings`: the user's
    SessionSettings, hashable, or None)."""
    return (frozenset(n.name for n in nodes), frozenset(fed), frozenset(embedded), frozenset(outputs),
            tuple(providers), settings)


def deterministic(nodes: "Iterable[onnx.NodeProto]", model: onnx.ModelProto) -> bool:
    """No random operator among the nodes (or in their bodies): equal feeds give equal results."""
    return not any(is_random(n, model) for n in nodes)


class SessionCache:
    """The onnxruntime region sessions of one CompiledModel, shared by its engines, and the runs of
    them a later pass may take (`results`: region_cache.RegionResults); `hits` counts sessions
    an engine did not build."""

    def __init__(self) -> None:
        self._sessions: dict = {}
        self._verdicts: dict = {}
        self.results = RegionResults()
        self.hits = 0
        self._engines: "weakref.WeakSet[RegionEngine]" = weakref.WeakSet()   # the engines that took sessions

    def attach(self, engine: "RegionEngine") -> None:
        self._engines.add(engine)

    def release(self) -> None:
        """Drops every onnxruntime session, the engines' references too (each is built again if
        asked for): check's provider backends on a small model run after these, which must not hold
        their weights and arenas beside the shipped file's session (check.py, providers last)."""
        for engine in list(self._engines):
            engine.forget(ORT)
        self._sessions.clear()

    @property
    def reused(self) -> int:
        """Region runs taken from an earlier pass instead of run."""
        return self.results.reused

    def get(self, key: tuple, build: Callable[[], T]) -> T:
        """The session under `key`, built once (a build that raises caches nothing)."""
        if key in self._sessions:
            self.hits += 1
            return self._sessions[key]
        session = self._sessions[key] = build()
        return session

    def verdict(self, key: tuple, decide: Callable[[], T]) -> T:
        """What `decide` says of a region under `key`, decided once for every engine on this cache
        (a region of a large model has thousands of nodes to walk, on every pass over every run)."""
        if key not in self._verdicts:
            self._verdicts[key] = decide()
        return self._verdicts[key]

    def sessions(self) -> list:
        return list(self._sessions.values())

    def __len__(self) -> int:
        return len(self._sessions)


def reference_deviation(node: onnx.NodeProto) -> "str | None":
    """Why onnx.reference (onnx 1.23) must not evaluate this node itself, or None: it gets the node
    wrong or cannot evaluate it, where the host runs it as ONNX defines it."""
    if not is_standard(node):
        return None
    if node.op_type == "Loop" and (len(node.input) < 2 or not node.input[1]):
        # its Loop loops `while cond`, and an absent cond is None
        return "onnx.reference runs a Loop with an empty condition input zero times; ONNX runs it M times"
    if node.op_type == "Loop" and len(node.output) > max(len(node.input) - 2, 0):
        # np.vstack: [n] scalars become [n, 1], [a, b] values [n * a, b]; zero trips raise
        return "onnx.reference concatenates Loop scan outputs (np.vstack); ONNX stacks them on a new axis"
    if node.op_type == "Scan" and any(a.name in _SCAN_LAYOUT and any(a.ints) for a in node.attribute):
        return "onnx.reference implements Scan only forward along axis 0"
    return None


_SCAN_LAYOUT = {"scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"}


def reference_gets_wrong(node: onnx.NodeProto) -> "str | None":
    """reference_deviation of the node or of a node in its bodies, at any depth ("node 'n': ...")."""
    reason = reference_deviation(node)
    if reason is not None:
        return reason
    for inner in body_nodes(node):
        reason = reference_deviation(inner)
        if reason is not None:
            return f"node {inner.name!r}: {reason}"
    return None


# (node, attribute, body graph, first feeds) -> the body's evaluator (oracle_control_flow.BodyEvaluators)
Bodies = BodyEvaluators
# (sub-model, types, memory limit) -> a session running it as the reference oracle does (oracle.ReferenceSession)
ReferenceOracle = Callable[[onnx.ModelProto, Mapping, "int | None"], object]


class RegionEngine:
    """Sub-models, sessions and runs of one model's regions on one side (see the module docstring).

    `passed`: initializers the caller feeds rather than embeds (values the DirectML side
    generates); initializers that are also graph inputs are always fed (a feed overrides them).
    `cache`: the CompiledModel's SessionCache (shared onnxruntime sessions and results), or None
    for sessions of this engine's own. `bodies`: the evaluators of the bodies a host region runs;
    `reference_oracle`, `hybrid_oracle`: what runs a region on the reference-oracle and the
    hybrid-oracle engines (injected: the oracle is built over this engine). `memory_limit`: the
    bytes the host's control flow may accumulate (None: the default), passed to the host regions
    and reference oracles it opens."""

    def __init__(self, model: onnx.ModelProto, types: Mapping, settings: "SessionSettings | None" = None,
                 providers: "Sequence[str] | None" = None, passed: "Iterable[str]" = (),
                 cache: "SessionCache | None" = None, bodies: "Bodies | None" = None,
                 reference_oracle: "ReferenceOracle | None" = None, hybrid_oracle: "ReferenceOracle | None" = None,
                 memory_limit: "int | None" = None) -> None:
        self.model = model
        self.types = types
        self.settings = settings                  # the user's onnxruntime session settings (--threads ...)
        self.providers = list(providers or ["CPUExecutionProvider"])
        self.shares = cache is not None           # results go to / come from the other side
        self.cache = cache if cache is not None else SessionCache()
        self.bodies = bodies
        self.reference_oracle = reference_oracle
        self.hybrid_oracle = hybrid_oracle
        self.memory_limit = memory_limit
        self.opset = standard_opset(model, 1)
        fed = {vi.name for vi in model.graph.input} | set(passed)
        # what a verdict on a region depends on besides its nodes: the model, its types, what is fed
        self._verdict_key = (id(model), id(types), frozenset(fed))
        self.inits = {i.name: i for i in model.graph.initializer if i.name not in fed}
        self.inits.update(_identity_aliases(model, self.inits, fed))
        self._opened: dict = {}                   # (engine, key) -> the session this side uses
        self.cache.attach(self)
        # (chain, key) -> (engine, why the ones before it were passed over)
        self._chosen: "dict[tuple, tuple[str, str | None]]" = {}

    # -- regions and sub-models ---------------------------------------------------------------
    def region(self, nodes: "Sequence[onnx.NodeProto]", inputs: "Iterable[str]", outputs: "Iterable[str]",
               name: str = "region") -> Region:
        inputs = list(inputs)
        return Region(tuple(nodes), tuple(n for n in inputs if n not in self.inits),
                      tuple(n for n in inputs if n in self.inits), tuple(outputs), name)

    def key(self, region: Region) -> tuple:
        """region_key of the region on this engine's providers and settings."""
        return (*region.identity, tuple(self.providers), self.settings)

    @functools.cached_property
    def ranks(self) -> "dict[str, int | None]":
        """Value name -> rank, as inference recorded it (None: unknown)."""
        return {name: getattr(info, "rank", None) for name, info in self.types.items()}

    def submodel(self, region: Region, typed: bool = True, as_fed: "Mapping[str, tuple[int, int]] | None" = None
                 ) -> onnx.ModelProto:
        """The region as a model of this one's opset, IR version and functions; embedded weights
        stay by reference (a lazy initializer's proto holds its file location, not its bytes).
        `typed`: every input must have a known type (onnxruntime needs them; it infers an output's);
        else an unknown one is left untyped (onnx.reference infers it). Inputs carry their rank, not their
        dims: onnxruntime fuses MatMul + Add into Gemm only on a known rank, and a dim inference got
        wrong must not make it refuse a feed. `as_fed`: inputs declared with the (ONNX type, rank)
        a run fed them instead (fed_otherwise)."""
        as_fed = as_fed or {}

        def vi(name: str, output: bool = False) -> onnx.ValueInfoProto:
            if name in as_fed:
                onnx_type, rank = as_fed[name]
                return helper.make_tensor_value_info(name, onnx_type, [None] * rank)
            info = self.types.get(name)
            if info is None or not getattr(info, "onnx_type", 0):
                # onnxruntime types an output itself, from its producer: a custom-domain node's
                # (com.microsoft FusedMatMul) that onnx's inference does not know; an input it cannot
                if typed and not output:
                    raise DmlLowerError(f"ONNX region {region.name}: the type of {name!r} is unknown")
                return onnx.ValueInfoProto(name=name)
            shape = getattr(info, "shape", None)
            return helper.make_tensor_value_info(name, info.onnx_type, None if shape is None else [None] * len(shape))

        graph = helper.make_graph(loops_as_onnx_defines(list(region.nodes)), region.name,
                                  [vi(n) for n in region.fed], [vi(n, output=True) for n in region.outputs],
                                  [self.inits[n] for n in region.embedded])
        sub = helper.make_model(graph, opset_imports=list(self.model.opset_import), ir_version=self.model.ir_version)
        sub.functions.extend(self.model.functions)
        return sub

    def tiny(self, region: Region) -> bool:
        """The region's work is small (one intra-op thread will do): its embedded initializers and
        its fed values hold few elements. A fed value counts its declared shape, a symbolic or
        unknown dim as 1: the estimate is made before any value exists, so it is the same whichever
        side opens the session first."""
        fed = 0
        for name in region.fed:
            shape = getattr(self.types.get(name), "shape", None) or ()
            count = 1
            for dim in shape:
                count *= dim if isinstance(dim, int) and dim > 0 else 1
            fed += count
        return few_elements([self.inits[n] for n in region.embedded], fed)

    # -- sessions -----------------------------------------------------------------------------
    def fed_otherwise(self, feeds: "Mapping[str, np.ndarray]") -> "dict[str, tuple[int, int]]":
        """The feeds whose rank or type is not what inference declared, as (ONNX type, rank): a value
        another engine produced (an onnxruntime region reading an operator otherwise than the
        spec, a deviation the table does not know yet). A region never refuses what its producer
        gave: its session is opened again declaring these as fed (the declarations' other uses,
        onnxruntime's rank-dependent fusions, hold for the ranks fed)."""
        differ: "dict[str, tuple[int, int]]" = {}
        for name, value in feeds.items():
            info = self.types.get(name)
            rank, onnx_type = getattr(info, "rank", None), getattr(info, "onnx_type", 0)
            if not isinstance(value, np.ndarray) or rank is None or not onnx_type or value.dtype.kind in "OUSV":
                continue
            if value.ndim != rank or value.dtype != helper.tensor_dtype_to_np_dtype(onnx_type):
                differ[name] = (int(helper.np_dtype_to_tensor_dtype(value.dtype)), value.ndim)
        return differ

    def _ort_session(self, region: Region, as_fed: "Mapping[str, tuple[int, int]]") -> Any:
        # an onnxruntime InferenceSession (no type information)
        return make_session(self.submodel(region, as_fed=as_fed), self.providers, tiny=self.tiny(region),
                            settings=self.settings)

    def constants(self, region: Region) -> "dict[str, np.ndarray]":
        """The region's embedded initializers as arrays (lazy ones mapped, not read)."""
        return {n: tensor_array(self.inits[n]) for n in region.embedded}

    def deviation(self, engine: str, region: Region) -> "str | None":
        """Why `engine` must not run the region though it could load it, or None."""
        return self.cache.verdict(("deviation", engine, region.identity, self._verdict_key),
                                  lambda: ENGINES[engine].deviation(self, region))

    def deterministic(self, region: Region) -> bool:
        """No random operator among the region's nodes (equal feeds give equal results)."""
        return bool(self.cache.verdict(("deterministic", region.identity, self._verdict_key),
                                       lambda: deterministic(region.nodes, self.model)))

    # an onnxruntime InferenceSession (no type information), an onnx.reference evaluator or one of
    # ours (HostRegion, DefinitionsRegion, a region oracle): each runs as run(outputs, feeds)
    def session(self, region: Region, engine: str) -> Any:
        """The region's session on `engine`, opened once; onnxruntime's come from the shared cache
        (a build that raises keeps nothing: the next call tries again)."""
        key = self.key(region)
        opened = self._opened.get((engine, key))
        if opened is None:
            build = ENGINES[engine].build
            opened = self.cache.get(key, lambda: build(self, region)) if engine == ORT else build(self, region)
            self._opened[(engine, key)] = opened
        return opened

    def forget(self, engine: str) -> None:
        """Drops this side's references to the sessions it opened on `engine` (SessionCache.release)."""
        self._opened = {k: v for k, v in self._opened.items() if k[0] != engine}

    def sessions(self) -> list:
        """The sessions this engine opened, in order."""
        return list(self._opened.values())

    def open(self, region: Region, chain: Sequence[str]) -> "tuple[str, object]":
        """The first engine of `chain` that may run the region and loads it, with its session; the
        last one is not tried but built (its failure is the caller's). The choice and the reason the
        ones before it were passed over are kept (chosen)."""
        key = (tuple(chain), self.key(region))
        if key in self._chosen:
            engine = self._chosen[key][0]
            return engine, self.session(region, engine)
        why = None              # why the first engine passed over was (the ones after follow from it)
        for engine in chain[:-1]:
            reason = self.deviation(engine, region)
            if reason is None:
                try:
                    session = self.session(region, engine)
                except Exception as exc:  # onnxruntime raises its own Fail / NotImplemented types
                    reason = f"{engine} cannot run it: {first_line(exc)}"
            if reason is not None:
                why = why or reason
                continue
            self._chosen[key] = (engine, why)
            return engine, session
        session = self.session(region, chain[-1])
        self._chosen[key] = (chain[-1], why)
        return chain[-1], session

    def chosen(self, region: Region, chain: Sequence[str]) -> "tuple[str, str | None] | None":
        """(engine, why the engines before it in `chain` were passed over) once opened."""
        return self._chosen.get((tuple(chain), self.key(region)))

    def probe(self, region: Region, exc: BaseException) -> "list[str]":
        """The nodes of a region onnxruntime failed to load (`exc`) that it cannot load: the one its
        error names, else each node tried alone."""
        failure = parse_provider_failure(exc)
        if failure is not None and failure.node in region.node_names:
            return [failure.node]
        named = kernel_nodes(failure, region.nodes)     # a kernel constructor's refusal: its operator's nodes
        if len(named) == 1:
            return [named[0].name]
        bad = []
        for node in region.nodes:
            reads = node_reads(node)
            try:
                self.session(self.region([node], reads, [o for o in node.output if o]), ORT)
            except Exception:
                bad.append(node.name)
        return bad

    # -- runs ---------------------------------------------------------------------------------
    def run(self, region: Region, feeds: "Mapping[str, np.ndarray]", chain: Sequence[str],
            reuse: bool = False) -> "dict[str, np.ndarray]":
        """The region's outputs by name, on the first engine of `chain` that takes it. `feeds` hold
        at least the region's fed values. `reuse`: on onnxruntime, a deterministic region takes the
        outputs of an earlier pass's run of it on bit-identical feeds, and leaves its own run for a
        later pass (region_cache.py)."""
        engine, session = self.open(region, chain)
        feeds = {n: feeds[n] for n in region.fed}
        if engine == ORT:
            differ = self.fed_otherwise(feeds)
            if differ:
                session = self.cache.get((*self.key(region), frozenset(differ.items())),
                                         lambda: self._ort_session(region, differ))
        shared = reuse and self.shares and engine == ORT and self.deterministic(region)
        if shared:
            taken = self.cache.results.take(self.key(region), feeds)
            if taken is not None:
                return taken
        results = {n: np.asarray(v) for n, v in zip(region.outputs, run_session(session, region.outputs, feeds))}
        if shared:
            self.cache.results.keep(self.key(region), feeds, results)
        return results


def _identity_aliases(model: onnx.ModelProto, inits: "Mapping[str, onnx.TensorProto]", fed: "set[str]"
                      ) -> "dict[str, onnx.TensorProto]":
    """The outputs of main-graph Identity nodes over an initializer (exporters write shared weights
    so: Mask R-CNN's mask-head biases), at any depth of such chains, each as that initializer under
    the output's name (a lazy one's proto holds its file location, not its bytes). A region reading
    one embeds it like the initializer itself: fed from another region, it was a graph input of the
    sub-model, and onnxruntime, which folds the Identity away on the shipped file, could not treat
    the bias as constant there (a plain FusedConv instead of its NCHWc Conv: other rounding)."""
    aliases: "dict[str, onnx.TensorProto]" = {}
    for node in model.graph.node:
        if (node.op_type != "Identity" or not is_standard(node) or len(node.input) != 1
                or len(node.output) != 1 or not node.output[0] or node.output[0] in fed):
            continue
        source = aliases.get(node.input[0]) or inits.get(node.input[0])
        if source is None:
            continue
        alias = onnx.TensorProto()
        alias.CopyFrom(source)
        alias.name = node.output[0]
        aliases[alias.name] = alias
    return aliases


def _missing(what: str) -> Callable[[RegionEngine, Region], NoReturn]:
    def build(engine: RegionEngine, region: Region) -> NoReturn:
        raise ValueError(f"this region engine has no {what!r} engine (it was made without one)")
    return build


def _host(engine: RegionEngine, region: Region) -> HostRegion:
    if engine.bodies is None:
        return _missing(HOST)(engine, region)
    return HostRegion(region.nodes, engine.constants(region), engine.bodies, engine.opset, engine.memory_limit)


def _reference_oracle(engine: RegionEngine, region: Region) -> object:
    if engine.reference_oracle is None:
        return _missing(REFERENCE_ORACLE)(engine, region)
    return engine.reference_oracle(engine.submodel(region, typed=False), engine.types, engine.memory_limit)


def _hybrid_oracle(engine: RegionEngine, region: Region) -> object:
    if engine.hybrid_oracle is None:
        return _missing(HYBRID)(engine, region)
    return engine.hybrid_oracle(engine.submodel(region), engine.types, engine.memory_limit)


def _hybrid_deviation(engine: RegionEngine, region: Region) -> "str | None":
    # only what onnxruntime deviates on goes there: a region it cannot load keeps the reference oracle
    if region_reason(region.nodes, engine.ranks, engine.inits) is None:
        return "onnxruntime deviates on none of its nodes"
    return None


def _reference_deviation(engine: RegionEngine, region: Region) -> "str | None":
    for node in region.nodes:
        reason = reference_gets_wrong(node)
        if reason is not None:
            return reason if reason.startswith("node ") else f"node {node.name!r}: {reason}"
    return None


@dataclass(frozen=True)
class Engine:
    """How a region is opened on one engine (`build` -> an object with run(outputs, feeds)), and
    why the engine must not run a region it could load (`deviation`, None: it may)."""
    build: Callable[[RegionEngine, Region], object]
    deviation: Callable[[RegionEngine, Region], "str | None"] = lambda engine, region: None


ENGINES: "dict[str, Engine]" = {
    ORT: Engine(lambda e, r: e._ort_session(r, {}),
                lambda e, r: region_reason(r.nodes, e.ranks, e.inits)),      # onnxruntime's known deviations
    REFERENCE: Engine(lambda e, r: reference_evaluator(e.submodel(r, typed=False)), _reference_deviation),
    REFERENCE_ORACLE: Engine(_reference_oracle),          # it runs what onnx.reference gets wrong on the host
    HYBRID: Engine(_hybrid_oracle, _hybrid_deviation),
    DEFINITIONS: Engine(lambda e, r: DefinitionsRegion(r.nodes, e.constants(r))),
    HOST: Engine(_host),
}
