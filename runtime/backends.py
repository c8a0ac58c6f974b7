"""The backends a model runs on, for check, run, reduce, conformance run and the zoo alike: one
table of the names a user can give (parsed once, by runtime/backend_names.py) and one protocol.

    cpu                 the lowered graph, DirectML operators on the numpy emulator
    ort                 the lowered graph, each DirectML operator on onnxruntime (stand-ins)
    dml                 the lowered graph, each DirectML operator on Microsoft's DirectML.dll (the
                        DirectML host, runtime/directml; unavailable without `make directml`)
    ort-cpu, ort-dml,   the model as the user ships it on that onnxruntime execution provider
    ort:<ProviderName>  (the file path, external data included; or the ModelProto / bytes given)
    saved:<LABEL>       outputs saved earlier (saved_outputs.py), read back

A backend is prepared once (`prepare()` -> Prepared: what it runs and what of the model it will
not run itself) and run per feed set (`run(feeds, oracle_value)` -> BackendRun: its outputs and
everything it did not produce or did not compute itself). A node cut out or run by another
provider, or an output not compared, makes the backend's result PARTIAL.

A provider runs the model file as shipped: a session-creation failure (a node without a kernel
included) is that backend's ERROR with onnxruntime's message. `provider_model="modified"` runs a
modified copy instead (our checked, shape-inferred model, with a node the provider has no kernel
for cut out and its value computed by ONNX semantics, and --outputs' intermediates exposed); the
report says so.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

import numpy as np
import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.ir.errors import first_line
from onnx_dml_lowering.lowering.onnx_graphs import node_reads

from onnx_dml_lowering.runtime.compiled_view import CompiledView, LoweredView, lowered_view

from .feeds import restore_declared
from .ort_messages import ProviderLoadError, ProviderRunError, parse_provider_failure
from .backend_names import (CHOICES, DML_PROVIDER, PROVIDER_ALIASES, PROVIDER_PREFIX, BackendLike, BackendName, Lowering,
                            as_backend_name, describe_backend, is_provider, parse_backend, provider_backend)
from onnx_dml_lowering.runtime.ort.assignment import describe_findings, node_providers, placement_findings
from onnx_dml_lowering.runtime.ort.providers import ProviderSpec, resolve, resolve_provider
from onnx_dml_lowering.runtime.ort.sessions import (SHRINK_RUN_OPTION, make_provider_session, may_share_arena,
                                                    shrink_shared_arena)
from onnx_dml_lowering.runtime.ort.settings import SessionSettings
from .ort_values import EMPTY_REASON, left_empty, run_session
from .region_cache import ORACLE as ORACLE_PASS
from .region_cache import RegionResults
from .run_time_fallbacks import RunTimeCounts
from .weights import is_lazy

if TYPE_CHECKING:
    from .oracle import Oracle
    from .saved_outputs import LoadedOutputs
    from .session import EmulatorSession

PROVIDER_MODELS = ("shipped", "modified")
# the backend names' parser and table (backend_names.py), offered here as ever
__all__ = ["CHOICES", "Backend", "BackendName", "BackendOptions", "BackendRun", "Prepared", "describe_backend",
           "is_provider", "make_backends", "parse_backend", "provider_backend"]


@dataclass
class BackendOptions:
    """What the caller asked of the backends (every field has the plain default)."""
    providers: "list[str] | None" = None          # the ort backend's onnxruntime providers (default CPU)
    provider_options: "list[str] | None" = None   # NAME=VALUE, for provider backends
    ep_libraries: "list[str] | None" = None       # NAME=PATH plugin libraries, for provider backends
    no_fallback: bool = False                     # provider sessions: no silent CPU fallback
    provider_model: str = "shipped"               # PROVIDER_MODELS
    settings: "SessionSettings | None" = None     # every onnxruntime session's
    strict: "bool | None" = None
    memory_limit: "int | str | None" = None
    loaded: "LoadedOutputs | None" = None         # the saved:<LABEL> backends' outputs


@dataclass
class Prepared:
    """What a prepared backend runs, and the nodes of the model it will not run itself."""
    ran: str = ""                                             # one line: what it runs
    partial: "dict[str, str]" = field(default_factory=dict)   # node -> why it does not run it (PARTIAL)
    unsupported_nodes: "dict[str, str]" = field(default_factory=dict)   # cut out: no kernel
    needs: "set[str]" = field(default_factory=set)            # values it will ask oracle_value for
    node_providers: "dict[str, str] | None" = None
    # provider fallbacks and folded nodes, one line each: worked out when first read (check's report
    # reads them, run never does; on SSDlite320 finding its folded NonZero nodes walks the graph)
    notes: "Callable[[], list[str]]" = field(default=list, repr=False)

    @functools.cached_property
    def placement_notes(self) -> "list[str]":
        return self.notes()


@dataclass
class BackendRun:
    """One backend's results on one feed set."""
    outputs: "dict[str, np.ndarray]" = field(default_factory=dict)
    not_compared: "dict[str, str]" = field(default_factory=dict)   # output -> why it cannot be compared
    fed: "list[str]" = field(default_factory=list)            # values of cut nodes computed by ONNX semantics
    lowered_iterations: int = 0                               # control-flow bodies run lowered
    # the emulator's ONNX regions: name -> (their node names, the engine that ran them)
    regions: "dict[str, tuple[list[str], str]]" = field(default_factory=dict)
    # the lowered graph's run-time matches: their calls, and those their rule declined (ran on ONNX)
    run_time: RunTimeCounts = field(default_factory=RunTimeCounts)


OracleValue = Callable[[str], np.ndarray]


class Backend(Protocol):
    name: BackendName

    def prepare(self) -> Prepared:
        """Build what runs; a DmlLowerError here is the backend's ERROR."""

    def run(self, feeds: Mapping[str, np.ndarray], oracle_value: OracleValue) -> BackendRun:
        """Run on one validated feed set (initializer defaults included)."""


class Lowered:
    """The lowered graph, its DirectML operators on one kernel set (a subclass per Lowering)."""
    LOWERING: Lowering

    def __init__(self, compiled: LoweredView, name: BackendName, options: BackendOptions) -> None:
        self.compiled, self.name, self.options = compiled, name, options
        self.providers: "list[str] | None" = None
        # the lowered graph is the partition's, computed when first asked for (compile_model):
        # asked here, so an error it raises ends the command before anything runs
        _ = compiled.partition

    def prepare(self) -> Prepared:
        return Prepared(self.name.description)

    def _session(self) -> EmulatorSession:
        return self.compiled.session(self.LOWERING, self.providers, self.options.settings)

    def run(self, feeds: Mapping[str, np.ndarray], oracle_value: OracleValue) -> BackendRun:
        before = self._session().lowered_iterations
        mark = self._session().run_time.mark()
        with _region_results(self.compiled).passing(self.name.text):   # a pass of check's schedule
            outputs = self.compiled.run(feeds, backend=self.LOWERING, providers=self.providers,
                                        strict=self.options.strict, memory_limit=self.options.memory_limit,
                                        session_settings=self.options.settings)
        session = self._session()
        return BackendRun(dict(outputs), self._not_compared(session), lowered_iterations=session.lowered_iterations - before,
                          regions=self._regions(session), run_time=session.run_time.since(mark))

    def _not_compared(self, session: EmulatorSession) -> "dict[str, str]":
        return {}

    def _regions(self, session: EmulatorSession) -> "dict[str, tuple[list[str], str]]":
        return {}


class Emulator(Lowered):
    """cpu: the lowered graph on the numpy emulator; it names the engine of each ONNX region."""
    LOWERING = Lowering.EMULATOR

    def _regions(self, session: EmulatorSession) -> "dict[str, tuple[list[str], str]]":
        return {name: ([n.name for n in session.regions.regions[name]], str(engine))
                for name, engine in session.regions.engines.items()}


class StandIns(Lowered):
    """ort: each DirectML operator as its minimal ONNX sub-graph on onnxruntime (--providers)."""
    LOWERING = Lowering.STAND_INS

    def __init__(self, compiled: LoweredView, name: BackendName, options: BackendOptions) -> None:
        super().__init__(compiled, name, options)
        self.providers = options.providers or ["cpu"]

    def _not_compared(self, session: EmulatorSession) -> "dict[str, str]":
        # some operator ran on numpy (no onnxruntime kernel): what depends on it is not theirs
        return {n: f"computed by the numpy kernel: {why}" for n, why in session.unvalidated_outputs.items()}


class DirectML(Lowered):
    """dml: each DirectML operator on Microsoft's DirectML.dll (runtime/directml)."""
    LOWERING = Lowering.DIRECTML

    def prepare(self) -> Prepared:
        # the host's start-up (Wine, the devices: seconds) runs while the other backends and the
        # oracle do; the first DirectML operator waits for its hello. The host's modules are
        # imported here, by the one backend that uses them (~9 ms of every other command)
        from .directml.dml_host import shared_host
        shared_host().process.spawn()
        return super().prepare()

    def run(self, feeds: Mapping[str, np.ndarray], oracle_value: OracleValue) -> BackendRun:
        from .directml.dml_host import DirectMLRefused
        try:
            return super().run(feeds, oracle_value)
        except DirectMLRefused as exc:
            # the device does not take a descriptor the lowering emitted: nothing after it ran
            why = f"the DirectML device refuses it: {exc}"
            return BackendRun(not_compared={n: why for n in self.compiled.output_names})


LOWERED_BACKENDS: "dict[Lowering, type[Lowered]]" = {
    Lowering.EMULATOR: Emulator, Lowering.STAND_INS: StandIns, Lowering.DIRECTML: DirectML}


def _region_results(compiled: CompiledView) -> RegionResults:
    """The region runs the compiled model's region engines share (a model without a shared
    cache: a store of its own, which no schedule names)."""
    cache = getattr(compiled, "shared_sessions", None)
    return cache.results if cache is not None else RegionResults()


def schedule_reuse(compiled: CompiledView, oracle: "Oracle | None", backends: "list[Backend]") -> None:
    """Tells the compiled model's shared region runs which passes over each feed set may take
    one (region_cache.py), in check's order: the oracle, when its regions go through that cache
    (the hybrid kind; onnxruntime's reading has its own), then the lowered backends. Another
    backend (a provider's file, saved outputs) runs no region of that cache."""
    engine = getattr(oracle, "engine", None)
    lowered = [b.name.text for b in backends if isinstance(b, Lowered)]
    if engine is None and not lowered:
        return          # no pass goes through the cache (a provider-only run): none is made for it
    cache = getattr(compiled, "shared_sessions", None)
    if cache is None:
        return
    first = [ORACLE_PASS] if engine is not None and engine.shares and engine.cache is cache else []
    cache.results.schedule(first + lowered)


class Saved:
    """saved:<LABEL>: outputs an earlier check or run saved, read back for the first feed set."""

    def __init__(self, compiled: CompiledView, name: BackendName, loaded: LoadedOutputs) -> None:
        self.compiled, self.name, self.loaded = compiled, name, loaded

    def prepare(self) -> Prepared:
        return Prepared(self.name.description)

    def run(self, feeds: Mapping[str, np.ndarray], oracle_value: OracleValue) -> BackendRun:
        # an output the file records its backend left out (or holds no value of) is not compared, as live
        held, left_out = self.loaded.results(self.name.text, self.compiled.output_names)
        return BackendRun({n: restore_declared(self.compiled.types, n, v) for n, v in held.items()}, left_out)


def _cuttable(exc: ProviderLoadError, model: onnx.ModelProto) -> "str | None":
    """The node of `model` a load failure says the provider has no kernel for, in whichever words
    onnxruntime says it (ort_messages), which the modified provider model cuts out; else None."""
    if not exc.not_implemented or exc.node not in {n.name for n in model.graph.node}:
        return None
    return exc.node


def _shipped(compiled: CompiledView) -> "tuple[onnx.ModelProto | str | bytes, str]":
    """What onnxruntime is given for the model as the user shipped it, and how to say it."""
    source = compiled.source
    if isinstance(source, onnx.ModelProto):
        if any(map(is_lazy, source.graph.initializer)):
            # weights left in the user's files (a sub-model reduce or the zoo built from a loaded
            # model): serialised as they are, their locations would mean nothing to onnxruntime;
            # ort_model makes them external initializers in those same files, so the graph and its
            # optimisations are the file's
            return source, "the ModelProto as given (its weights read from their files)"
        return source.SerializeToString(), "the ModelProto as given (serialised unmodified)"
    if isinstance(source, (bytes, bytearray)):
        return bytes(source), "the model bytes as given"
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source), f"the model file as shipped ({os.fspath(source)})"
    raise DmlLowerError("this compiled model has no source to run on a provider (compile_model records it)")


class Provider:
    """The model on one onnxruntime execution provider: the file as shipped, or (provider_model
    "modified") our shape-inferred copy with each node the provider has no kernel for cut out."""

    def __init__(self, compiled: CompiledView, name: BackendName, spec: ProviderSpec, options: BackendOptions) -> None:
        self.compiled, self.name, self.spec, self.options = compiled, name, spec, options
        self.modified = options.provider_model == "modified"
        self.unsupported: "dict[str, str]" = {}     # node -> onnxruntime's reason
        self.cut_outputs: "dict[str, str]" = {}     # value produced by a cut node -> node
        self._session: Any = None           # an onnxruntime InferenceSession (no type information)
        self._outputs: "list[str]" = []
        self._tensor_outputs: "set[str]" = set()
        self._assignment: "dict[str, str] | None" = None
        self._absent: "dict[str, str]" = {}         # output of ours the shipped model does not have -> why
        # set before prepare() by a caller that runs one feed set and then releases the session
        # (check's _run_providers_first): the session may then use the shared CPU arena (release)
        self.run_once = False
        self._shared_arena = False          # the session allocates from the shared CPU arena

    # the result is an onnxruntime InferenceSession (no type information)
    def _make(self, model: "onnx.ModelProto | str | bytes") -> Any:
        # (one fed values of cut nodes runs in check's old order, beside the region sessions: not)
        self._shared_arena = self.run_once and not self.cut_outputs and may_share_arena(self.spec, self.options.settings)
        return make_provider_session(model, self.spec, self.options.no_fallback, self.options.settings,
                                     checked=self.compiled.model, shared_arena=self._shared_arena)

    def prepare(self) -> Prepared:
        if self.modified:
            ran = self._build_modified()
        else:
            model, ran = _shipped(self.compiled)
            try:
                self._session = self._make(model)
            except ProviderLoadError as exc:
                raise self._pointed(exc) from None
            produced = {o.name for o in self._session.get_outputs()}
            self._absent = {n: "not an output of the model as shipped (the modified provider model exposes it)"
                            for n in self.compiled.output_names if n not in produced}
        self._outputs = [n for n in self.compiled.output_names if n not in self.cut_outputs and n not in self._absent]
        # the outputs an empty value cannot stand for (an empty optional is one, and is compared)
        self._tensor_outputs = {o.name for o in self.compiled.model.graph.output if o.type.HasField("tensor_type")}
        prepared = Prepared(ran, unsupported_nodes=dict(self.unsupported), needs=set(self.cut_outputs))
        for node, reason in self.unsupported.items():
            prepared.partial[node] = (f"no kernel on {self.spec.name}: cut out, its value computed by ONNX "
                                      f"semantics ({first_line(reason)[:160]})")
        assignment = node_providers(self._session) if self._session is not None else None
        prepared.node_providers = self._assignment = assignment
        if assignment is not None:
            for node, provider in assignment.items():
                if provider != self.spec.name:
                    prepared.partial.setdefault(node, f"ran on {provider} (requested {self.spec.name})")
            prepared.notes = functools.partial(self._placement_notes, assignment)
        elif self._session is not None:
            prepared.notes = lambda: ["this onnxruntime cannot report which provider ran each node"]
        return prepared

    def _placement_notes(self, assignment: "dict[str, str]") -> "list[str]":
        return describe_findings([f for f in placement_findings(self.compiled.model, assignment, self.spec.name)
                                  if f.node not in self.unsupported], self.spec.name)

    def _build_modified(self) -> str:
        model = onnx.ModelProto()
        model.CopyFrom(self.compiled.model)
        for _ in range(len(model.graph.node) + 1):
            if not model.graph.output:
                break                   # every output came from a cut node: nothing left to run
            try:
                self._session = self._make(model)
                break
            except ProviderLoadError as exc:
                node = _cuttable(exc, model)
                if node is None:
                    raise
                self._cut(model, node, exc.reason)
        cut = f", {len(self.unsupported)} node(s) without a kernel cut out" if self.unsupported else ""
        return f"a modified copy of the model (checked, shape-inferred{cut})"

    def _pointed(self, exc: ProviderLoadError) -> ProviderLoadError:
        """The shipped file's load failure; where it is a node the modified copy would cut out, the
        error names the option that runs the rest of the model."""
        node = _cuttable(exc, self.compiled.model)
        if node is None:
            return exc
        return ProviderLoadError(f"{exc}; --provider-model modified cuts out each node without a kernel ({display(node)} "
                                 f"here), computes its values by ONNX semantics and runs the rest on {self.spec.name}",
                                 exc.provider, exc.reason, exc.failure)

    def _cut(self, model: onnx.ModelProto, name: str, reason: str) -> None:
        """Removes node `name`: each value it produced that a remaining node reads becomes a graph
        input (fed from the oracle); each that is a graph output leaves the outputs (UNSUPPORTED)."""
        node = next(n for n in model.graph.node if n.name == name)
        self.unsupported[name] = reason
        model.graph.node.remove(node)
        read = {r for n in model.graph.node for r in node_reads(n)}
        for value in node.output:
            if not value:
                continue
            self.cut_outputs[value] = name
            if value in read:
                info = self.compiled.types.get(value)
                vi = (onnx.helper.make_tensor_value_info(value, info.onnx_type, None)
                      if info is not None and info.onnx_type else onnx.ValueInfoProto(name=value))
                model.graph.input.append(vi)
        for values, keep in ((model.graph.output, lambda v: v.name not in self.cut_outputs),
                             # a value fed in for a node cut since then is read by nothing now
                             (model.graph.input, lambda v: v.name not in self.cut_outputs or v.name in read)):
            kept = [v for v in values if keep(v)]
            del values[:]
            values.extend(kept)

    def release(self, kept: "BackendRun | None" = None, shrink: bool = True) -> None:
        """Drops the session (onnxruntime's copy of the weights, its pre-packed ones, its arena):
        check runs this backend's one feed set before the region sessions exist, or after they are
        released (check.py).

        `kept`: this session's run, whose outputs the caller keeps; they are made memory of their
        own (owned), as onnxruntime hands them back as views of the session's allocator and one
        kept would keep that memory (Mask R-CNN: 0.68 GB) after the release. Another provider's are
        copied while the session lives: its allocators may go with it. A session on the shared CPU
        arena (run_once) has had the arena's empty extensions handed back at the end of its run
        (SHRINK_RUN_OPTION); its outputs are copied once it is gone, so the copies never add to the
        session's peak, and the extensions they held (or a failed run's) are handed back then: the
        region sessions made next start from an arena that holds nothing. `shrink` False: nothing
        runs after it (check's last provider on a small model), and that hand-back (a one-node
        session of its own) is skipped."""
        def own() -> None:
            if kept is not None:
                kept.outputs = {name: owned(value) for name, value in kept.outputs.items()}
        if not self._shared_arena:
            own()
        self._session = None
        if self._shared_arena:
            own()
            if shrink:
                shrink_shared_arena()

    def run(self, feeds: Mapping[str, np.ndarray], oracle_value: OracleValue) -> BackendRun:
        result = BackendRun()
        result.not_compared = {v: f"node {node} has no kernel on {self.spec.description}: {self.unsupported[node]}"
                               for v, node in self.cut_outputs.items() if v in self.compiled.output_names}
        result.not_compared.update(self._absent)
        if self._session is None:
            if self._outputs:
                raise RuntimeError(f"backend {self.name.text} ran after its session was released")
            return result
        feeds = dict(feeds)
        wanted = {i.name for i in self._session.get_inputs()}
        wanted |= {i.name for i in self._session.get_overridable_initializers()}
        for value in self.cut_outputs:
            if value in wanted:
                feeds[value] = oracle_value(value)
                result.fed.append(value)
        try:
            values = run_session(self._session, self._outputs, {k: v for k, v in feeds.items() if k in wanted},
                                 [SHRINK_RUN_OPTION] if self._shared_arena else [])
        except Exception as exc:
            raise ProviderRunError(f"onnxruntime ({self.spec.description}) failed to run the model: {first_line(exc)}"
                                   f"{known_run_failure(self.compiled, exc)}",
                                   self.spec.name, first_line(exc), parse_provider_failure(exc)) from None
        result.outputs = dict(zip(self._outputs, values))
        for name in [n for n, v in result.outputs.items() if left_empty(v) and n in self._tensor_outputs]:
            del result.outputs[name]        # the run's other outputs are compared; this one cannot be
            result.not_compared[name] = self._empty_reason(name)
        return result

    def _empty_reason(self, name: str) -> str:
        """Why output `name` came back empty: the DML EP's activation fusion where it predicts that
        (dml_fusion), else what onnxruntime did."""
        if self.spec.name == DML_PROVIDER:
            from .dml_fusion import fused_output_risks
            for risk in fused_output_risks(self.compiled.model, self._assignment):
                if risk.output == name:
                    return risk.run_reason()
        return f"{EMPTY_REASON} ({self.spec.description})"


def owned(value: np.ndarray) -> np.ndarray:
    """`value` in memory of its own: a copy of the bytes, bit for bit, of an array that is a view
    of another object's memory (onnxruntime's outputs are views of its allocator's)."""
    if isinstance(value, np.ndarray) and value.base is not None:
        return np.array(value, copy=True)
    return value


def known_run_failure(compiled: CompiledView, exc: BaseException) -> str:
    """'; known onnxruntime deviation (...)' when the node onnxruntime failed to run is one its
    deviation table lists (SplitToSequence fails with a scalar split > 1), else ''."""
    from .ort_deviations import failing_deviation
    from .ort_messages import run_failure_node
    failed = run_failure_node(exc)
    if failed is None:
        return ""
    ranks = {name: getattr(info, "rank", None) for name, info in compiled.types.items()}
    entry = failing_deviation(compiled.model.graph, *failed, ranks)
    return f" ({entry.name})" if entry is not None else ""


def make_backends(compiled: CompiledView, names: "Sequence[BackendLike]",
                  options: BackendOptions) -> "tuple[list[Backend], dict[str, str]]":
    """(the backends to run, in order; {name: why it is unavailable here}).

    An unknown backend or provider name is a usage error; so is a list where no backend is
    available, and a provider option given with no provider backend. A provider onnxruntime knows
    but this machine lacks (DirectML on Linux) is unavailable while the others run.
    """
    if not names:
        raise DmlLowerError(f"no backend to run; choose from {CHOICES}")
    if options.provider_model not in PROVIDER_MODELS:
        raise DmlLowerError(f"provider model {options.provider_model!r} is unknown; choose from "
                            f"{', '.join(PROVIDER_MODELS)}")
    parsed = [as_backend_name(n) for n in names]
    if not any(p.is_provider for p in parsed):
        for what, given in (("provider option", options.provider_options), ("provider library", options.ep_libraries)):
            if given:
                raise DmlLowerError(f"{what} {given[0]}: no requested backend runs on a provider (it applies to "
                                    f"{', '.join(PROVIDER_ALIASES)}, {PROVIDER_PREFIX}<ProviderName>; backends "
                                    f"{','.join(p.text for p in parsed)})")
    backends: "list[Backend]" = []
    unavailable: "dict[str, str]" = {}
    for p in parsed:
        try:
            made = _make_backend(compiled, p, options)
        except _Unavailable as exc:
            unavailable[p.text] = str(exc)
            continue
        backends.append(made)
    if not backends:
        raise DmlLowerError(next(iter(unavailable.values())))
    if options.loaded is not None:
        asked = {p.text for p in parsed}
        backends += [Saved(compiled, parse_backend(label), options.loaded) for label in options.loaded.by_backend
                     if label not in asked]
    return backends, unavailable


class _Unavailable(Exception):
    """A backend this machine lacks (its one line): reported while the others run."""


def _make_backend(compiled: CompiledView, name: BackendName, options: BackendOptions) -> Backend:
    import onnxruntime as ort
    if name.lowering is not None:
        if name.lowering is Lowering.STAND_INS:
            resolve(options.providers)          # a provider this machine lacks: one line, before any run
        if name.lowering is Lowering.DIRECTML:
            from .directml.home import DirectMLUnavailable, find_home
            try:
                find_home("dml_host")       # the setup serves its host, as ort-dml's is asked (one line)
            except DirectMLUnavailable as exc:
                raise _Unavailable(str(exc)) from None
        return LOWERED_BACKENDS[name.lowering](lowered_view(compiled, name.text), name, options)
    if name.is_saved:
        if options.loaded is None or name.text not in options.loaded.by_backend:
            raise DmlLowerError(f"backend {name.text!r}: no saved outputs under that label were loaded")
        return Saved(compiled, name, options.loaded)
    try:
        spec = resolve_provider(name.provider, options.provider_options, options.ep_libraries)
    except DmlLowerError as exc:
        if name.provider not in ort.get_all_providers():
            raise
        raise _Unavailable(str(exc)) from None
    return Provider(compiled, name, spec, options)
