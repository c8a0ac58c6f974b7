"""check: run backends on the same feeds and compare each output with ONNX semantics.

Backends: "cpu" - the lowered graph on the numpy DirectML emulator; "ort" - the lowered graph
with each DirectML operator run by onnxruntime's CPU provider; "ort-cpu" / "ort-dml" /
"ort:<ProviderName>" - the original model on that onnxruntime execution provider.

Statuses per output and backend: match, mismatch (the only failure besides error), deviation (a
named, known one), unsupported (the provider has no kernel for the node producing it),
nondeterministic (computed from a random operator: not compared), error (the backend crashed).
A backend that is not available here is reported and skipped while the others run.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np
import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import first_line
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.lowering.schedule import node_bodies, node_reads

from .compare import BackendReport, OutputResult, compare
from .feeds import check_feeds, restore_declared, with_defaults
from .nondeterminism import random_values
from .oracle import NO_KERNEL_NODE, Oracle
from .ort_providers import (ProviderSpec, SessionSettings, make_provider_session, node_providers,
                            placement_findings, provider_name, resolve_backend)
from .ort_values import run_session
from .saved_outputs import PREFIX as SAVED_PREFIX
from .saved_outputs import LoadedOutputs, describe_saved, verify_feeds

BACKENDS = {
    "cpu": "lowered graph, DirectML operators on the numpy emulator",
    "ort": "lowered graph, DirectML operators on onnxruntime CPUExecutionProvider",
    "ort-cpu": "original model on onnxruntime CPUExecutionProvider",
    "ort-dml": "original model on onnxruntime DmlExecutionProvider",
}
_ORT_ALIASES = {"ort-cpu": "CPUExecutionProvider", "ort-dml": "DmlExecutionProvider"}

SCALAR_NONZERO_DEVIATION = "known onnxruntime deviation: a scalar NonZero gives (1, nnz); ONNX says (0, nnz)"


def describe_backend(backend: str) -> str:
    if backend.startswith("ort:"):
        return f"original model on onnxruntime {backend[4:]}"
    if backend.startswith(SAVED_PREFIX):
        return describe_saved(backend)
    return BACKENDS[backend]


@dataclass
class Tolerances:
    atol: float = 1e-6
    rtol: float = 1e-5
    per_output: "dict[str, tuple[float | None, float | None]]" = field(default_factory=dict)

    def for_output(self, name: str) -> "tuple[float, float]":
        atol, rtol = self.per_output.get(name, (None, None))
        return (self.atol if atol is None else atol, self.rtol if rtol is None else rtol)

    def check_names(self, outputs: "list[str]") -> None:
        """A tolerance naming no output of the model is a usage error, not silently ignored; so is
        a NaN or infinite one, which would let every comparison pass."""
        values = [("atol", None, self.atol), ("rtol", None, self.rtol)]
        values += [(kind, name, pair[i]) for name, pair in self.per_output.items()
                   for i, kind in enumerate(("atol", "rtol"))]
        for kind, name, value in values:
            if value is not None:
                _finite(value, f"{kind} {name + '=' if name else ''}{value}")
        for name in self.per_output:
            if name not in outputs:
                raise DmlLowerError(f"tolerance for {name!r}: the model has no output of that name "
                                    f"(outputs: {', '.join(outputs)})")

    @staticmethod
    def parse(atols: "list[str] | None", rtols: "list[str] | None") -> "Tolerances":
        """From CLI values: a bare number sets the global value, NAME=NUMBER one output's."""
        tol = Tolerances()
        for values, index in ((atols or [], 0), (rtols or [], 1)):
            for text in values:
                name, _, number = text.rpartition("=")
                try:
                    value = float(number)
                except ValueError:
                    raise DmlLowerError(f"tolerance {text!r} is not NUMBER or OUTPUT=NUMBER") from None
                _finite(value, repr(text))
                if value < 0:
                    raise DmlLowerError(f"tolerance {text!r} is negative")
                if name:
                    pair = list(tol.per_output.get(name, (None, None)))
                    pair[index] = value
                    tol.per_output[name] = tuple(pair)
                elif index == 0:
                    tol.atol = value
                else:
                    tol.rtol = value
        return tol


def _finite(value: float, text: str) -> None:
    if not math.isfinite(value):
        raise DmlLowerError(f"tolerance {text} is not a finite number: a NaN or infinite tolerance "
                            "would let every comparison pass")


@dataclass
class CheckReport:
    model: str
    feature_level: str
    placement: list
    regions: "dict[str, str]"
    backends: "list[BackendReport]"
    oracle: "dict" = field(default_factory=lambda: {"kind": "reference", "description": "onnx.reference"})
    iterations: int = 1
    unavailable: "dict[str, str]" = field(default_factory=dict)
    expected: "dict" = field(default_factory=dict, repr=False)    # the oracle's, first feed set
    # control flow (issue 11): per lowered backend, If branches / Loop and Scan iterations that
    # ran a body's lowered graph, summed over the feed sets (EmulatorSession.lowered_iterations)
    control_flow_iterations: "dict[str, int]" = field(default_factory=dict)
    # initializers that are also graph inputs and were not fed: their stored value was used
    defaults: "dict[str, np.ndarray]" = field(default_factory=dict, repr=False)
    # Ctrl-C: the feed sets fully checked before it (`iterations`) are the report; the one under
    # way when it came is dropped.
    interrupted: bool = False
    # A later feed set that could not be checked (the oracle failed on it, or it did not fit the
    # inputs): its one-line error; the report covers the `iterations` sets before it.
    stopped: str = ""
    # The main graph's NonZero nodes when every one of them returned no coordinate at every feed
    # set checked (known with the hybrid oracle): no coordinate was compared.
    empty_nonzero: "list[str]" = field(default_factory=list)
    # The --dim sizes the random feeds were drawn at (set by the CLI; a zoo reads them back).
    dims: "dict[str, int]" = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No MISMATCH and no backend ERROR, and every feed set asked for was checked (a run a later
        set stopped is not a pass)."""
        return all(b.ok for b in self.backends) and not self.stopped

    def to_dict(self) -> dict:
        return {"model": self.model, "feature_level": self.feature_level, "ok": self.ok,
                "oracle": self.oracle, "iterations": self.iterations, "interrupted": self.interrupted,
                "stopped": self.stopped, "empty_nonzero": list(self.empty_nonzero), "dims": dict(self.dims),
                "placement": [p.to_dict() for p in self.placement],
                "onnx_regions": dict(self.regions),
                "unavailable_backends": dict(self.unavailable),
                "control_flow_iterations": dict(self.control_flow_iterations),
                "initializer_defaults": {name: {"dtype": str(v.dtype), "shape": list(v.shape)}
                                         for name, v in self.defaults.items()},
                "backends": [b.to_dict(describe_backend(b.backend)) for b in self.backends]}


def node_list(names: "list[str]", most: int = 8) -> str:
    """Node names for a report line; a long list shows its ends and its length."""
    names = [display(name) for name in names]
    if len(names) <= most:
        return ", ".join(names)
    return f"{', '.join(names[:3])}, ... {', '.join(names[-2:])} ({len(names)} nodes)"


def _is_nonzero(node) -> bool:
    return node.op_type == "NonZero" and node.domain in ("", "ai.onnx")


def _nonzero_in_bodies(model) -> bool:
    """A NonZero inside an If / Loop / Scan body, at any depth."""
    def walk(nodes, inside: bool) -> bool:
        return any((inside and _is_nonzero(n)) or any(walk(g.node, True) for g in node_bodies(n)) for n in nodes)
    return walk(model.graph.node, False)


def scalar_nonzero_outputs(compiled) -> "dict[str, str]":
    """Outputs produced directly by a NonZero over a 0-d input: node name by output name."""
    out = {}
    for node in compiled.model.graph.node:
        if _is_nonzero(node):
            info = compiled.types.get(node.input[0])
            if info is not None and info.shape == ():
                out[node.output[0]] = node.name
    return out


def _provider_of(backend: str) -> "str | None":
    if backend in _ORT_ALIASES:
        return _ORT_ALIASES[backend]
    if backend.startswith("ort:") and backend[4:]:
        return backend[4:]
    return None


def plan_backends(backends: "list[str]", provider_options: "list[str] | None" = None,
                  ep_libraries: "list[str] | None" = None) -> "tuple[dict[str, ProviderSpec], dict[str, str]]":
    """(the provider of each onnxruntime backend, {backend: why it is unavailable here}).

    An unknown backend or provider name is a usage error; so is a list where no backend is
    available. A provider onnxruntime knows but this machine lacks (DirectML on Linux) is
    reported unavailable while the other backends run.
    """
    import onnxruntime as ort
    if not backends:
        raise DmlLowerError("no backend to check; choose from " + ", ".join(BACKENDS) + ", ort:<ProviderName>")
    if not any(_provider_of(b) for b in backends):
        for option, given in (("--provider-option", provider_options), ("--ep-library", ep_libraries)):
            if given:
                raise DmlLowerError(f"{option} {given[0]}: no requested backend uses it (it applies to "
                                    f"ort-cpu, ort-dml, ort:<ProviderName>; --backends {','.join(backends)})")
    providers: "dict[str, list[str]]" = {}
    unavailable: "dict[str, str]" = {}
    for backend in backends:
        provider = _provider_of(backend)
        if backend not in BACKENDS and provider is None:
            raise DmlLowerError(f"unknown check backend {backend!r}; choose from {', '.join(BACKENDS)}, "
                                "ort:<ProviderName>")
        if provider is not None:
            try:
                providers[backend] = resolve_backend(backend, provider_options, ep_libraries)
            except DmlLowerError as exc:
                if provider_name(backend) not in ort.get_all_providers():
                    raise
                unavailable[backend] = str(exc)
    if len(unavailable) == len(backends):
        raise DmlLowerError(next(iter(unavailable.values())))
    return providers, unavailable


class OriginalOnProvider:
    """The original model on one onnxruntime provider. A node the provider has no kernel for is
    cut out: its outputs are UNSUPPORTED, and what reads them is fed the oracle's values."""

    def __init__(self, compiled, provider: ProviderSpec, no_fallback: bool = False,
                 settings: "SessionSettings | None" = None) -> None:
        self.compiled = compiled
        self.settings = settings
        self.provider = provider
        self.providers = [provider.name]
        self.no_fallback = no_fallback
        self.assignment: "dict[str, str] | None" = None
        self.unsupported: "dict[str, str]" = {}     # node -> onnxruntime's reason
        self.cut_outputs: "dict[str, str]" = {}     # value produced by a cut node -> node
        self.fed: "set[str]" = set()                # cut values fed from the oracle
        self._session = None
        self._built = False
        self._outputs: "list[str]" = []

    def _build(self) -> None:
        model = onnx.ModelProto()
        model.CopyFrom(self.compiled.model)
        for _ in range(len(model.graph.node) + 1):
            if not model.graph.output:
                break                   # every output came from a cut node: nothing left to run
            try:
                self._session = make_provider_session(model, self.provider, self.no_fallback, self.settings)
                break
            except DmlLowerError as exc:
                found = NO_KERNEL_NODE.search(str(exc))
                names = {n.name for n in model.graph.node}
                if not found or found.group(1) not in names or "NOT_IMPLEMENTED" not in str(exc):
                    raise
                self._cut(model, found.group(1), str(exc).split("cannot load the model: ", 1)[-1])
        self._built = True
        self.assignment = node_providers(self._session) if self._session is not None else None
        self._outputs = [n for n in self.compiled.output_names if n not in self.cut_outputs]

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

    def prepare(self) -> None:
        if not self._built:
            self._build()

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def run(self, feeds: Mapping[str, np.ndarray], oracle_value: Callable[[str], np.ndarray]) -> "dict[str, np.ndarray]":
        self.prepare()
        if self._session is None:
            return {}
        feeds = dict(feeds)
        wanted = {i.name for i in self._session.get_inputs()}
        wanted |= {i.name for i in self._session.get_overridable_initializers()}
        for value in self.cut_outputs:
            if value in wanted:
                feeds[value] = oracle_value(value)
                self.fed.add(value)
        try:
            results = run_session(self._session, self._outputs, {k: v for k, v in feeds.items() if k in wanted})
        except Exception as exc:
            raise DmlLowerError(f"onnxruntime ({', '.join(self.providers)}) failed to run the model: "
                                f"{first_line(exc)}") from None
        return dict(zip(self._outputs, results))


def _semantic_nodes(compiled) -> "set[str]":
    return {n for p in compiled.placement for n in p.onnx_nodes if not n.startswith("initializer:")}


def make_oracle(compiled, kind: str = "hybrid", settings: "SessionSettings | None" = None) -> Oracle:
    return Oracle(compiled.model, compiled.types, kind, _semantic_nodes(compiled), settings,
                  getattr(compiled, "shared_sessions", None))


def check(compiled, feeds: Mapping[str, object], backends: "list[str]", tolerances: Tolerances,
          strict: "bool | None" = None, model_name: str = "",
          memory_limit: "int | str | None" = None, oracle: "str | Oracle" = "hybrid",
          more_feeds: "Iterable[Mapping[str, object]] | None" = None,
          loaded: "LoadedOutputs | None" = None, provider_options: "list[str] | None" = None,
          ep_libraries: "list[str] | None" = None, no_fallback: bool = False,
          session_settings: "SessionSettings | None" = None,
          feed_label: "Callable[[int], str] | None" = None) -> "tuple[dict, CheckReport]":
    """Every backend against the oracle on the same (validated) feeds.

    `more_feeds`: further feed sets (--iterations), any iterable; every set is checked the same
    way, drawn one at a time and dropped once checked (a generator keeps memory flat in their
    number). KeyboardInterrupt (Ctrl-C) after at least one set was checked ends the loop: the
    report covers the sets checked (`report.interrupted`); before that it propagates. So does a
    later set the oracle cannot evaluate or that does not fit the inputs: the report covers the
    sets before it and `report.stopped` says which set failed and why (`feed_label(i)` names set
    #i, e.g. its seed).
    `provider_options` (NAME=VALUE), `ep_libraries` (NAME=PATH) and `no_fallback` apply to the
    backends that run the original model on an onnxruntime provider. `session_settings` apply to
    every onnxruntime session: the oracle's, the lowered backends' and the original's.
    """
    providers, unavailable = plan_backends(backends, provider_options, ep_libraries)
    tolerances.check_names(compiled.output_names)
    if memory_limit is not None:
        from .memory import parse_size
        memory_limit = parse_size(memory_limit)        # a bad size is a usage error, before any run
    # an initializer that is also an input is its default unless fed: every engine gets it
    first, defaulted = with_defaults(check_feeds(compiled.inputs, feeds, compiled.optional_inputs),
                                     compiled.optional_inputs, compiled.initializers)
    more = iter(more_feeds or ())
    the_oracle = oracle if isinstance(oracle, Oracle) else make_oracle(compiled, oracle, session_settings)
    if the_oracle.golden is not None or loaded is not None:
        if next(more, None) is not None:
            raise DmlLowerError("saved outputs hold one feed set: use them with --iterations 1")
    if the_oracle.golden is not None:
        verify_feeds("--oracle", the_oracle.kind, the_oracle.golden_meta, first)
    if loaded is not None:
        verify_feeds("--load-outputs", loaded.path, loaded.meta, first)
    deviations = scalar_nonzero_outputs(compiled)
    randoms = random_values(compiled.model)
    runnable = [b for b in backends if b not in unavailable]
    reports = {b: BackendReport(b) for b in runnable}
    if loaded is not None:
        reports.update({b: BackendReport(b) for b in loaded.by_backend})
    originals = {b: OriginalOnProvider(compiled, providers[b], no_fallback, session_settings) for b in runnable if b in providers}
    for backend, original in originals.items():
        started = time.perf_counter()
        try:
            original.prepare()
        except DmlLowerError as exc:
            reports[backend].error = str(exc)
        reports[backend].seconds += time.perf_counter() - started
        the_oracle.keep.update(original.cut_outputs)
    before = control_flow_iterations(compiled, runnable, session_settings)    # the session may have run before
    first_expected: "dict[str, np.ndarray]" = {}
    checked = 0
    interrupted = False
    stopped = ""
    # NonZero node -> its output; dropped once it returns a coordinate (or its value is not kept).
    # Only when every NonZero is in the main graph: one in a body may well have compared some.
    still_empty = {n.name: n.output[0] for n in compiled.model.graph.node if _is_nonzero(n)} \
        if the_oracle.kind == "hybrid" and the_oracle.golden is None and not _nonzero_in_bodies(compiled.model) else {}
    nonzero_nodes = len(still_empty)
    the_oracle.keep.update(still_empty.values())       # the oracle's run may hold them inside

    def stop(iteration: int, exc: DmlLowerError) -> str:
        label = f" ({feed_label(iteration)})" if feed_label is not None else ""
        return f"feed set #{iteration}{label}: {exc}"

    def feed_sets() -> "Iterator[tuple[int, Mapping[str, object]]]":
        """The sets in turn; one that cannot be drawn (a data loader's error) ends them as a set the
        oracle cannot evaluate does: the report covers the sets before it."""
        nonlocal stopped
        sets = itertools.chain([first], more)
        for iteration in itertools.count():
            try:
                raw = next(sets)
            except StopIteration:
                return
            except DmlLowerError as exc:
                if iteration == 0:
                    raise
                stopped = stop(iteration, exc)
                return
            yield iteration, raw

    try:
        for iteration, raw in feed_sets():
            marks = {b: len(r.outputs) for b, r in reports.items()}
            try:
                try:
                    feed_set = raw if iteration == 0 else with_defaults(
                        check_feeds(compiled.inputs, raw, compiled.optional_inputs), compiled.optional_inputs,
                        compiled.initializers)[0]
                    expected = the_oracle.run(feed_set)
                    # counted once the set is checked (a set Ctrl-C drops clears nothing)
                    returned = [node for node, value in still_empty.items()
                                if the_oracle.values.get(value) is None or np.shape(the_oracle.values[value])[-1]]
                except DmlLowerError as exc:
                    if iteration == 0:
                        raise
                    stopped = stop(iteration, exc)
                    break
                if iteration == 0:
                    first_expected = expected

                def oracle_value(name: str) -> np.ndarray:
                    if name not in the_oracle.values:
                        raise DmlLowerError(f"the {the_oracle.kind} oracle keeps no intermediate value {name!r} "
                                            "to feed a node the provider lacks; use the default hybrid oracle")
                    return the_oracle.values[name]

                for backend, report in reports.items():
                    if report.error:
                        continue
                    started = time.perf_counter()
                    try:
                        if backend.startswith(SAVED_PREFIX):
                            actual = {n: restore_declared(compiled.types, n, v) for n, v in loaded.by_backend[backend].items()}
                        elif backend in originals:
                            actual = originals[backend].run(feed_set, oracle_value)
                        else:
                            actual = compiled.run(feed_set, backend=backend,
                                                  providers=["cpu"] if backend == "ort" else None,
                                                  strict=strict, memory_limit=memory_limit,
                                                  session_settings=session_settings)
                    except DmlLowerError as exc:
                        if "memory limit" in str(exc):
                            raise                               # a limit the user set: not a backend's failure
                        report.error = str(exc)
                        continue
                    finally:
                        report.seconds += time.perf_counter() - started
                    if iteration == 0:
                        report.values = {k: np.asarray(v) for k, v in actual.items()}
                    original = originals.get(backend)
                    unsupported = {}
                    if original is not None:
                        unsupported = {v: f"node {node} has no kernel on {original.provider.description}: "
                                          f"{original.unsupported[node]}"
                                       for v, node in original.cut_outputs.items()}
                    elif backend == "ort":
                        unsupported = {v: f"computed by the numpy kernel: {why}"
                                       for v, why in compiled.session("ort", ["cpu"], session_settings).unvalidated_outputs.items()}
                    for name, want in expected.items():
                        result = _compare_one(name, backend, want, actual, tolerances, deviations, randoms,
                                              unsupported)
                        result.iteration = iteration
                        report.outputs.append(result)
            except KeyboardInterrupt:
                for backend, report in reports.items():       # the feed set under way is dropped
                    del report.outputs[marks[backend]:]
                raise
            checked += 1
            for node in returned:
                del still_empty[node]
            del feed_set, raw                                   # one feed set alive at a time
    except KeyboardInterrupt:
        if checked == 0:
            raise
        interrupted = True

    for backend, original in originals.items():
        reports[backend].unsupported_nodes = dict(original.unsupported)
        reports[backend].fed_from_oracle = sorted(original.fed)
        reports[backend].node_providers = original.assignment
        if original.assignment is not None:
            reports[backend].placement_notes = [
                f.describe(original.provider.name)
                for f in placement_findings(compiled.model, original.assignment, original.provider.name)
                if f.node not in original.unsupported]
        elif original.loaded:
            reports[backend].placement_notes = ["this onnxruntime cannot report which provider ran each node"]
    regions = {}
    if "cpu" in runnable:
        runner = compiled.session("cpu", None, session_settings).regions
        for name, engine in runner.engines.items():
            regions[name] = f"[{node_list([n.name for n in runner.regions[name]])}] {engine}"
    report = CheckReport(model_name, compiled.feature_level.name, compiled.placement, regions,
                         list(reports.values()), the_oracle.to_dict(), checked, unavailable,
                         expected=first_expected, interrupted=interrupted, stopped=stopped,
                         empty_nonzero=list(still_empty) if nonzero_nodes and len(still_empty) == nonzero_nodes else [])
    report.defaults = {name: first[name] for name in defaulted}
    after = control_flow_iterations(compiled, runnable, session_settings)
    report.control_flow_iterations = {b: n - before.get(b, 0) for b, n in after.items()}
    return first, report


def control_flow_iterations(compiled, backends: "list[str]",
                            settings: "SessionSettings | None" = None) -> "dict[str, int]":
    """Per lowered backend that ran, how many control-flow branches / iterations ran lowered
    (only for models with a control-flow node run by the host)."""
    if not compiled.partition.bodies:
        return {}
    return {b: compiled.session(b, ["cpu"] if b == "ort" else None, settings).lowered_iterations
            for b in ("cpu", "ort") if b in backends}


def _compare_one(name: str, backend: str, want: np.ndarray, actual: Mapping[str, np.ndarray],
                 tolerances: Tolerances, deviations: "dict[str, str]", randoms: "dict[str, str]",
                 unsupported: "dict[str, str]") -> OutputResult:
    want = np.asarray(want)
    if name in randoms:
        result = OutputResult(name, backend, "nondeterministic", list(want.shape), None, str(want.dtype), None)
        result.detail = f"computed from random node {randoms[name]}: not compared"
        return result
    if name in unsupported:
        result = OutputResult(name, backend, "unsupported", list(want.shape), None, str(want.dtype), None)
        result.detail = unsupported[name]
        return result
    atol, rtol = tolerances.for_output(name)
    got = actual.get(name)
    result = compare(name, backend, want, got, atol, rtol)
    if (result.status == "mismatch" and (backend.startswith("ort-") or backend.startswith("ort:"))
            and name in deviations and got is not None and want.shape[:1] == (0,)
            and np.shape(got) == (1,) + want.shape[1:]):
        result.status = "deviation"
        result.detail = f"{SCALAR_NONZERO_DEVIATION} (node {deviations[name]}; got {list(np.shape(got))})"
    return result
