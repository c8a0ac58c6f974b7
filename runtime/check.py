"""check: the feed sets in turn, every backend (runtime/backends.py) on each, and each output
compared with ONNX semantics (the oracle).

Statuses per output and backend: match, mismatch (the only failure besides error), deviation (a
named, known one), unsupported (the backend did not produce it itself: not compared),
nondeterministic (computed from a random operator: not compared), error (the backend crashed).
A backend that ran part of the model (a node cut out or run by another provider, an output not
compared) is PARTIAL; `fail_partial` makes that a failure. A backend that is not available here
is reported and skipped while the others run.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator, Mapping

import ml_dtypes
import numpy as np

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import MemoryLimitExceeded, ModelContradiction
from onnx_dml_lowering.ir.printer import name_list as node_list
from onnx_dml_lowering.lowering.onnx_graphs import node_bodies

from .backends import (BackendOptions, describe_backend, is_provider, make_backends, parse_backend,
                       schedule_reuse)
from .compare import BackendReport, OutputResult, compare, is_float
from .dml_deviations import from_dml_ep, recognise
from .feeds import check_feeds, dimension_notes, with_defaults
from .nondeterminism import random_values
from .oracle import Oracle
from .ort_reading import OrtReading
from .ort_providers import SessionSettings
from .saved_outputs import LoadedOutputs, verify_feeds

__all__ = ["BackendOptions", "CheckReport", "LoadedOutputs", "Tolerances", "check", "describe_backend"]

SCALAR_NONZERO_DEVIATION = "known onnxruntime deviation: a scalar NonZero gives (1, nnz); ONNX says (0, nnz)"


DEFAULT_ATOL = DEFAULT_RTOL = 1e-5


@dataclass
class Tolerances:
    """The tolerance policy for float outputs (runtime/compare.py has the comparison rule): an
    element passes when |actual - expected| <= atol + rtol * |expected|. Defaults atol 1e-5 and rtol
    1e-5 (Polygraphy's): float32 results that differ only in the order of their roundings
    (onnxruntime fusing a whole graph, the oracle running regions) stay within them at values of
    order 1, and rtol scales the allowance with each element's magnitude. The default rtol is never
    below the output type's machine epsilon (one unit in the last place: float16 9.8e-4, bfloat16
    7.8e-3), since a difference of one rounding would otherwise always fail there. No tolerance
    scales with an output's overall magnitude: one masked entry at float32's lowest value would
    loosen every element. `exact` outputs (produced by a node this project lowers; set by
    `for_model`) are compared with atol = rtol = 0 unless `per_output` names them: the global values
    never loosen them."""
    atol: float = DEFAULT_ATOL
    rtol: "float | None" = None          # None: the default (DEFAULT_RTOL or the type's epsilon)
    per_output: "dict[str, tuple[float | None, float | None]]" = field(default_factory=dict)
    exact: "dict[str, str]" = field(default_factory=dict)     # output -> the lowered node producing it

    def for_output(self, name: str, dtype=None) -> "tuple[float, float]":
        """(atol, rtol) for output `name`, whose type is `dtype` (for the default rtol)."""
        atol, rtol = self.per_output.get(name, (None, None))
        if name in self.exact:
            base = (0.0, 0.0)
        else:
            base = (self.atol, default_rtol(dtype) if self.rtol is None else self.rtol)
        return (base[0] if atol is None else atol, base[1] if rtol is None else rtol)

    def for_model(self, compiled) -> "Tolerances":
        """These tolerances checked against the model's outputs, with its lowered nodes' outputs exact."""
        self.check_names(compiled.output_names)
        return replace(self, exact=lowered_outputs(compiled))

    def is_exact(self, name: str) -> bool:
        """Compared with atol = rtol = 0 because a lowered node produces it (no tolerance named for it)."""
        return name in self.exact and name not in self.per_output

    def check_names(self, outputs: "list[str]") -> None:
        """A tolerance naming no output of the model is a usage error, not silently ignored; so is
        a NaN or infinite one, which would let every comparison pass."""
        values: "list[tuple[str, str | None, float | None]]" = [("atol", None, self.atol), ("rtol", None, self.rtol)]
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
                    atol, rtol = tol.per_output.get(name, (None, None))
                    tol.per_output[name] = (value, rtol) if index == 0 else (atol, value)
                elif index == 0:
                    tol.atol = value
                else:
                    tol.rtol = value
        return tol


# ONNX operators that only move their first input's values (an exporter's trailing Identity or
# Reshape): a lowered node's value through them is still that node's exact value.
_MOVES = frozenset(("Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Expand"))


def default_rtol(dtype) -> float:
    """DEFAULT_RTOL, or the float type's machine epsilon where that is larger."""
    if dtype is None or not is_float(dtype):
        return DEFAULT_RTOL
    return max(DEFAULT_RTOL, float(ml_dtypes.finfo(dtype).eps))      # numpy's finfo knows no float8


def lowered_outputs(compiled) -> "dict[str, str]":
    """The model's outputs that a node this project lowers produces (NonZero, EyeLike, the eye /
    mask / Trilu idioms, a generated constant), directly or through nodes that only move values,
    each with that node: their values are exact."""
    graph = compiled.model.graph
    nodes = {n.name: n for n in graph.node}
    produced = {}
    for p in compiled.placement:
        if p.status != "lowered":
            continue
        for name in p.onnx_nodes:
            if name.startswith("initializer:"):
                produced[name[len("initializer:"):]] = name
            elif name in nodes:                   # a body's node (a path) is not the main graph's
                produced.update((value, name) for value in nodes[name].output if value)
    for node in graph.node:                       # in topological order: one pass follows chains
        if node.op_type in _MOVES and node.domain in ("", "ai.onnx") and node.input and node.input[0] in produced:
            produced[node.output[0]] = produced[node.input[0]]
    return {name: produced[name] for name in compiled.output_names if name in produced}


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
    # A PARTIAL backend (it ran only part of the model) fails the check (check(fail_partial=True)).
    fail_partial: bool = False
    # Feeds of the first set that depart from the model's dimension names (feeds.dimension_notes).
    feed_notes: "list[str]" = field(default_factory=list)
    # Where the feeds came from and what the first set holds (set by the CLI; report.feeds_line).
    feeds: dict = field(default_factory=dict)

    @property
    def partial(self) -> "list[BackendReport]":
        """The backends that ran without error but not the whole model themselves."""
        return [b for b in self.backends if not b.error and b.is_partial]

    @property
    def ok(self) -> bool:
        """No MISMATCH and no backend ERROR (nor PARTIAL when it fails), and every feed set asked
        for was checked (a run a later set stopped, or Ctrl-C cut short, is not a pass)."""
        return (all(b.ok for b in self.backends) and not self.stopped and not self.interrupted
                and not (self.fail_partial and self.partial))

    def to_dict(self) -> dict:
        return {"model": self.model, "feature_level": self.feature_level, "ok": self.ok,
                "fail_partial": self.fail_partial,
                "oracle": self.oracle, "iterations": self.iterations, "interrupted": self.interrupted,
                "stopped": self.stopped, "empty_nonzero": list(self.empty_nonzero), "dims": dict(self.dims),
                "feeds": dict(self.feeds),
                "placement": [p.to_dict() for p in self.placement],
                "onnx_regions": dict(self.regions),
                "unavailable_backends": dict(self.unavailable),
                "control_flow_iterations": dict(self.control_flow_iterations),
                "feed_notes": list(self.feed_notes),
                "initializer_defaults": {name: {"dtype": str(v.dtype), "shape": list(v.shape)}
                                         for name, v in self.defaults.items()},
                "backends": [b.to_dict(describe_backend(b.backend)) for b in self.backends]}


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


def _semantic_nodes(compiled) -> "set[str]":
    return {n for p in compiled.placement for n in p.onnx_nodes if not n.startswith("initializer:")}


def make_oracle(compiled, kind: str = "hybrid", settings: "SessionSettings | None" = None,
                ort_reading: bool = False, memory_limit: "int | str | None" = None) -> Oracle:
    """The oracle of `compiled`; `memory_limit` (--memory-limit, a size) bounds what its control
    flow accumulates on the host, as it bounds the lowered run's. onnxruntime's reading
    (ort_reading.py) shares no sessions: it runs other regions, rarely."""
    from .memory import parse_size
    return Oracle(compiled.model, compiled.types, kind, _semantic_nodes(compiled), settings,
                  None if ort_reading else getattr(compiled, "shared_sessions", None),
                  passed=compiled.partition.generated, ort_reading=ort_reading,
                  memory_limit=None if memory_limit is None else parse_size(memory_limit))


def lazy_oracle(compiled, feeds: Mapping[str, np.ndarray], needs: "set[str]",
                settings: "SessionSettings | None" = None, memory_limit: "int | str | None" = None
                ) -> Callable[[str], np.ndarray]:
    """oracle_value for a backend run outside check (run, conformance run): the hybrid oracle,
    evaluated on `feeds` the first time a value is asked for (a cut node's), never otherwise."""
    made: "list[Oracle]" = []

    def value(name: str) -> np.ndarray:
        if not made:
            made.append(make_oracle(compiled, settings=settings, memory_limit=memory_limit))
            made[0].keep.update(needs)
            made[0].run(feeds)
        return made[0].values[name]
    return value


class FeedsFailed(DmlLowerError):
    """The oracle could not evaluate the model on the first feed set (the message is its own): a
    failure of these feeds, which the caller may explain by how they were made (random sizes)."""


def check(compiled, feeds: Mapping[str, object], backends: "list[str]", tolerances: Tolerances,
          options: "BackendOptions | None" = None, *, oracle: "str | Oracle" = "hybrid",
          more_feeds: "Iterable[Mapping[str, object]] | None" = None, model_name: str = "",
          feed_label: "Callable[[int], str] | None" = None,
          fail_partial: bool = False,
          on_set: "Callable[[int, Mapping[str, np.ndarray], dict, dict], None] | None" = None
          ) -> "tuple[dict, CheckReport]":
    """Every backend (runtime/backends.py, built from `options`) against the oracle on the same
    (validated) feeds.

    `more_feeds`: further feed sets (--iterations), any iterable; every set is checked the same
    way, drawn one at a time and dropped once checked (a generator keeps memory flat in their
    number). KeyboardInterrupt (Ctrl-C) after at least one set was checked ends the loop: the
    report covers the sets checked (`report.interrupted`, not ok); before that it propagates. So
    does a later set the oracle cannot evaluate or that does not fit the inputs: the report covers
    the sets before it and `report.stopped` says which set failed and why (`feed_label(i)` names
    set #i, e.g. its seed). `fail_partial`: a PARTIAL backend makes the report not ok.
    `on_set(i, feeds, expected, {backend: outputs})` is called once set #i is compared (to save
    every set as it goes: --save-inputs / --save-outputs).
    """
    options = options or BackendOptions()
    tolerances = tolerances.for_model(compiled)
    if options.memory_limit is not None:
        from .memory import parse_size
        parse_size(options.memory_limit)        # a bad size is a usage error, before any run
    runners, unavailable = make_backends(compiled, backends, options)
    # an initializer that is also an input is its default unless fed: every engine gets it
    first, defaulted = with_defaults(check_feeds(compiled.inputs, feeds, compiled.optional_inputs),
                                     compiled.optional_inputs, compiled.initializers)
    more = iter(more_feeds or ())
    the_oracle = (oracle if isinstance(oracle, Oracle)
                  else make_oracle(compiled, oracle, options.settings, memory_limit=options.memory_limit))
    loaded = options.loaded
    if the_oracle.golden is not None or loaded is not None:
        if next(more, None) is not None:
            raise DmlLowerError("saved outputs hold one feed set: use them with --iterations 1")
    if the_oracle.golden is not None:
        verify_feeds("--oracle", the_oracle.kind, the_oracle.golden_meta, first)
    if loaded is not None:
        verify_feeds("--load-outputs", loaded.path, loaded.meta, first)
    deviations = scalar_nonzero_outputs(compiled)
    # onnxruntime's reading of the nodes it deviates on, for provider outputs that mismatch the spec
    reading = (OrtReading(lambda **kw: make_oracle(compiled, settings=options.settings, **kw), compiled.model,
                          compiled.types) if the_oracle.golden is None and the_oracle.kind != "ort-cpu" else None)
    randoms = random_values(compiled.model)
    reports = {b.name: BackendReport(b.name) for b in runners}
    for backend in runners:
        started = time.perf_counter()
        report = reports[backend.name]
        try:
            prepared = backend.prepare()
        except DmlLowerError as exc:
            report.error = str(exc)
        else:
            report.ran, report.partial = prepared.ran, dict(prepared.partial)
            report.unsupported_nodes = dict(prepared.unsupported_nodes)
            report.node_providers, report.placement_notes = prepared.node_providers, list(prepared.placement_notes)
            the_oracle.keep.update(prepared.needs)
        report.seconds += time.perf_counter() - started
    # the passes that may take a region run an earlier one did on the same bytes (region_cache.py)
    schedule_reuse(compiled, the_oracle, [b for b in runners if not reports[b.name].error])
    flow = {b.name: 0 for b in runners if compiled.partition.bodies and parse_backend(b.name).kind == "lowered"}
    fed: "dict[str, set[str]]" = {b.name: set() for b in runners}
    regions: "dict[str, str]" = {}
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

    def oracle_value(name: str) -> np.ndarray:
        if name not in the_oracle.values:
            raise DmlLowerError(f"the {the_oracle.kind} oracle keeps no intermediate value {name!r} "
                                "to feed a node the provider lacks; use the default hybrid oracle")
        return the_oracle.values[name]

    try:
        for iteration, raw in feed_sets():
            marks = {b: len(r.outputs) for b, r in reports.items()}
            try:
                try:
                    feed_set = first if iteration == 0 else with_defaults(      # set 0 is `first`
                        check_feeds(compiled.inputs, raw, compiled.optional_inputs), compiled.optional_inputs,
                        compiled.initializers)[0]
                    expected = the_oracle.run(feed_set)
                    # counted once the set is checked (a set Ctrl-C drops clears nothing)
                    returned = [node for node, value in still_empty.items()
                                if the_oracle.values.get(value) is None or np.shape(the_oracle.values[value])[-1]]
                except DmlLowerError as exc:
                    if iteration == 0:
                        raise FeedsFailed(str(exc)) from exc
                    stopped = stop(iteration, exc)
                    break
                if iteration == 0:
                    first_expected = expected
                actuals: "dict[str, dict]" = {}
                for backend in runners:
                    report = reports[backend.name]
                    if report.error:
                        continue
                    started = time.perf_counter()
                    try:
                        ran = backend.run(feed_set, oracle_value)
                    except DmlLowerError as exc:
                        if isinstance(exc, (MemoryLimitExceeded, ModelContradiction)):
                            raise           # a limit the user set, or the model's own fault: not a backend's failure
                        report.error = str(exc)
                        continue
                    finally:
                        report.seconds += time.perf_counter() - started
                    if iteration == 0:
                        report.values = {k: np.asarray(v) for k, v in ran.outputs.items()}
                    actuals[backend.name] = ran.outputs
                    fed[backend.name].update(ran.fed)
                    if backend.name in flow:
                        flow[backend.name] += ran.lowered_iterations
                    if ran.regions:
                        regions = {name: f"[{node_list(nodes)}] {engine}" for name, (nodes, engine) in ran.regions.items()}
                    for name, want in expected.items():
                        result = _compare_one(name, backend.name, want, ran.outputs, tolerances, deviations,
                                              randoms, ran.not_compared)
                        if result.status == "mismatch":
                            named = _known_deviation(compiled, backend.name, feed_set, name, ran.outputs.get(name),
                                                     reading, tolerances, the_oracle.values)
                            if named:
                                result.status, result.detail = "deviation", named
                        result.iteration = iteration
                        report.outputs.append(result)
                if on_set is not None:
                    on_set(iteration, feed_set, expected, actuals)
            except KeyboardInterrupt:
                for name, backend_report in reports.items():       # the feed set under way is dropped
                    del backend_report.outputs[marks[name]:]
                raise
            checked += 1
            for node in returned:
                del still_empty[node]
            del feed_set, raw                                   # one feed set alive at a time
    except KeyboardInterrupt:
        if checked == 0:
            raise
        interrupted = True
    finally:
        schedule_reuse(compiled, None, [])             # nothing is kept past the check

    for name, values in fed.items():
        reports[name].fed_from_oracle = sorted(values)
    check_report = CheckReport(model_name, compiled.feature_level.name, compiled.placement, regions,
                               list(reports.values()), the_oracle.to_dict(), checked, unavailable,
                               expected=first_expected, interrupted=interrupted, stopped=stopped,
                               empty_nonzero=list(still_empty) if nonzero_nodes and len(still_empty) == nonzero_nodes else [],
                               fail_partial=fail_partial)
    check_report.defaults = {name: first[name] for name in defaulted}
    check_report.feed_notes = dimension_notes(compiled.inputs + compiled.optional_inputs, first)
    check_report.control_flow_iterations = flow
    return first, check_report


def _known_deviation(compiled, backend: str, feeds, name: str, got, reading: "OrtReading | None",
                     tolerances: Tolerances, spec_values: Mapping[str, np.ndarray]) -> "str | None":
    """The named deviation a provider backend's mismatching output is: the DML EP's own (bit for
    bit its documented answer), or onnxruntime's reading of a node it deviates on (within the
    tolerances); None: a plain mismatch."""
    if from_dml_ep(backend, _provider(backend)):
        named = recognise(compiled.model, feeds, name, got)
        if named:
            return named
    if reading is None or got is None or not is_provider(backend):
        return None
    atol, rtol = tolerances.for_output(name, np.asarray(got).dtype)
    return reading.recognise(feeds, name, got, atol, rtol, tolerances.is_exact(name), spec_values)


def _provider(backend: str) -> "str | None":
    """The onnxruntime provider a backend runs on (None: not a provider backend)."""
    parsed = parse_backend(backend)
    return parsed.provider if parsed.kind == "provider" else None


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
    atol, rtol = tolerances.for_output(name, want.dtype)
    got = actual.get(name)
    exact = tolerances.is_exact(name)
    result = compare(name, backend, want, got, atol, rtol, exact=exact)
    if result.exact and result.status == "mismatch" and result.first_mismatch is not None:
        result.detail += f"; compared exactly: the output of lowered node {tolerances.exact[name]}"
    if (result.status == "mismatch" and is_provider(backend)
            and name in deviations and got is not None and want.shape[:1] == (0,)
            and np.shape(got) == (1,) + want.shape[1:]):
        result.status = "deviation"
        result.detail = f"{SCALAR_NONZERO_DEVIATION} (node {deviations[name]}; got {list(np.shape(got))})"
    return result
