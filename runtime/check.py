"""check: the feed sets in turn, every backend (runtime/backends.py) on each, and each output
compared with ONNX semantics (the oracle).

Statuses per output and backend: match, mismatch (the only failure besides error), deviation (a
named, known one), unsupported (the backend did not produce it itself: not compared),
nondeterministic (computed from a random operator: not compared), error (the backend crashed).
A backend that ran part of the model (a node cut out or run by another provider, an output not
compared) is PARTIAL; `fail_partial` makes that a failure. A backend that is not available here
is reported and skipped while the others run.

The loop is an object, `CheckRun`: `prepare()` (backends made and prepared, the first feed set
validated, the oracle made), `sets()` (one `CheckedSet` per feed set, as each is compared: the
caller saves from those), `run_set()` (one set on the oracle and every backend; with one feed set
each provider backend runs it alone and releases its session: first on a model with
PROVIDERS_FIRST_FROM of weights, see _run_providers_first, else last, see _run_providers_last),
`classify()`
(every status rule of one output, in one place) and `report()` (the frozen CheckReport, built
once). `check()` is the whole run in one call.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Generator, Iterable, Iterator, Mapping, Sequence, Sized

import numpy as np

from onnx_dml_lowering.runtime.compiled_view import CompiledView
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import MemoryLimitExceeded, ModelContradiction
from onnx_dml_lowering.ir.printer import name_list as node_list

from .backend_names import BackendLike, BackendName, describe_backend
from .backends import Backend, BackendOptions, BackendRun, Provider, make_backends, schedule_reuse
from .check_report import CheckReport
from .compare import BackendReport, OutputResult, compare
from .feeds import check_feeds, declared_dims, dimension_notes, with_defaults
from .memory import parse_size
from .nondeterminism import random_values
from .interrupt import resume
from .oracle import GoldenOracle, HybridOracle, Oracle, OracleName, is_nonzero, make_oracle
from .oracle_on_demand import lazy_oracle
from .onnx_regions import RegionFailed
from .run_time_fallbacks import FallbackTally, checked_placement
from .ort_reading import OrtReading
from .saved_outputs import LoadedOutputs, model_values, verify_feeds, verify_golden
from .weights import stored_bytes
from .tolerances import DEFAULT_ATOL, DEFAULT_RTOL, Tolerances, default_rtol, lowered_outputs

if TYPE_CHECKING:
    import onnx

    from onnx_dml_lowering.runtime.dml_deviations import UnreadOutput

# the names this module has always offered (the Python API: docs/python-api.md)
__all__ = ["DEFAULT_ATOL", "DEFAULT_RTOL", "BackendOptions", "CheckAbout", "CheckReport", "CheckRun",
           "CheckedSet", "FeedsFailed", "LoadedOutputs", "Tolerances", "check", "default_rtol",
           "describe_backend", "lazy_oracle", "lowered_outputs", "make_oracle"]

# The model's weights from which its provider backends run a lone feed set first and release their
# session (_run_providers_first); below it they run it last, prepared only then, after the region
# sessions are released (_run_providers_last), and a crash inside onnxruntime names the oracle's
# region and its node. (On the large models the order first is the one measured: docs/performance.md.)
PROVIDERS_FIRST_FROM = 4 * 2**20

SCALAR_NONZERO_DEVIATION = "known onnxruntime deviation: a scalar NonZero gives (1, nnz); ONNX says (0, nnz)"


class FeedsFailed(DmlLowerError):
    """The oracle could not evaluate the model on the first feed set (the message is its own): a
    failure of these feeds, which the caller may explain by how they were made (random sizes)."""


@dataclass(frozen=True)
class CheckAbout:
    """What the caller knows of a run that its report carries (the CLI's model path, how its
    feeds were made); given to CheckRun, so the report is complete when it is built."""
    model_name: str = ""
    feed_label: "Callable[[int], str] | None" = None   # names feed set #i (its seed) in `stopped`
    fail_partial: bool = False                         # a PARTIAL backend fails the check
    dims: "Mapping[str, int]" = field(default_factory=dict)   # the --dim sizes random feeds were drawn at
    # where the feeds came from (report.feeds_line); an "iterations" entry is replaced by the
    # number of sets checked
    feeds: "Mapping[str, object]" = field(default_factory=dict)


@dataclass(frozen=True)
class CheckedSet:
    """One feed set compared: its (validated) feeds, the oracle's outputs, each backend's, and the
    outputs each backend did not compute itself and why (--save-outputs records them)."""
    index: int
    feeds: "Mapping[str, np.ndarray]"
    expected: "dict[str, np.ndarray]"
    actuals: "dict[BackendName, dict[str, np.ndarray]]"
    not_compared: "dict[BackendName, dict[str, str]]" = field(default_factory=dict)


@dataclass(frozen=True)
class UnderWay:
    """The feed set drawn and not yet fully checked (as the caller gave it): the one to save
    when the run fails or stops on it."""
    index: int
    feeds: "Mapping[str, object]"


def scalar_nonzero_outputs(compiled: CompiledView) -> "dict[str, str]":
    """Outputs produced directly by a NonZero over a 0-d input: node name by output name."""
    out = {}
    for node in compiled.model.graph.node:
        if is_nonzero(node):
            info = compiled.types.get(node.input[0])
            if info is not None and info.shape == ():
                out[node.output[0]] = node.name
    return out


class CheckRun:
    """Every backend (built from `options`) against the oracle on the same (validated) feeds.

    `more_feeds`: further feed sets (--iterations), any iterable, drawn one at a time and dropped
    once checked (a generator keeps memory flat in their number). KeyboardInterrupt (Ctrl-C) after
    at least one set was checked ends the sets: the report covers the sets checked (`interrupted`,
    not ok); before that it propagates. A later set the oracle cannot evaluate, that does not fit
    the inputs or that cannot be drawn ends them too: the report covers the sets before it and
    `stopped` says which set failed and why.
    """

    def __init__(self, compiled: CompiledView, feeds: Mapping[str, object], backends: "Sequence[BackendLike]", tolerances: Tolerances,
                 options: "BackendOptions | None" = None, *, oracle: "str | OracleName | Oracle" = "hybrid",
                 more_feeds: "Iterable[Mapping[str, object]] | None" = None, about: CheckAbout = CheckAbout()) -> None:
        if isinstance(backends, str):       # one name, or 'cpu,ort' as the CLI spells several
            backends = [name.strip() for name in backends.split(",") if name.strip()]
        self.compiled, self.names, self.about = compiled, backends, about
        self.options = options or BackendOptions()
        self.tolerances = tolerances
        self._oracle_asked = oracle
        # one feed set, known before the run (no further sets, or an empty sized collection of
        # them): each provider backend runs it alone, first (_run_providers_first) or last
        # (_run_providers_last), and its session is released after
        self._one_set = more_feeds is None or (isinstance(more_feeds, Sized) and len(more_feeds) == 0)
        heavy = sum(map(stored_bytes, compiled.model.graph.initializer)) >= PROVIDERS_FIRST_FROM
        self._providers_first, self._providers_last = self._one_set and heavy, self._one_set and not heavy
        self._more = iter(more_feeds or ())
        self.under_way: "UnderWay | None" = UnderWay(0, feeds)
        self.first: "dict[str, np.ndarray]" = {}        # feed set #0, validated, defaults included
        self._prepared = False
        self._report: "CheckReport | None" = None
        self._checked = 0
        self._interrupted = False
        self._stopped = ""
        self._sets = "not started"        # -> "under way" -> "done"

    # -- prepare ------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Validates what the run was given (each a usage error before any run: tolerances, the
        memory limit, the backends, feed set #0, saved outputs) and prepares every backend."""
        if self._prepared:
            return
        compiled, options = self.compiled, self.options
        if not compiled.output_names:       # a pass comparing nothing would say "all outputs match"
            raise DmlLowerError("the model has no graph output: nothing to compare (--outputs all compares every "
                                "value its nodes compute)")
        self.tolerances = self.tolerances.for_model(compiled)
        if options.memory_limit is not None:
            parse_size(options.memory_limit)        # a bad size is a usage error, before any run
        if options.loaded is not None:      # saved BACKEND:OUTPUT entries split at this model's outputs
            options.loaded.bind(compiled.output_names, model_values(compiled.model))
        self._runners, self._unavailable = make_backends(compiled, self.names, options)
        # an initializer that is also an input is its default unless fed: every engine gets it
        assert self.under_way is not None
        self.first, self._defaulted = with_defaults(
            check_feeds(compiled.inputs, self.under_way.feeds, compiled.optional_inputs),
            compiled.optional_inputs, compiled.initializers)
        asked = self._oracle_asked
        self.oracle = asked if isinstance(asked, Oracle) else make_oracle(
            compiled, asked, options.settings, memory_limit=options.memory_limit)
        self._verify_saved()
        self._prepare_classifier()
        self._prepare_backends()
        self._after_prepare()
        self._prepared = True

    def _verify_saved(self) -> None:
        """Saved outputs (a golden oracle, --load-outputs) hold one feed set: these feeds'."""
        loaded = self.options.loaded
        golden = self.oracle if isinstance(self.oracle, GoldenOracle) else None
        if golden is not None or loaded is not None:
            if next(self._more, None) is not None:
                raise DmlLowerError("saved outputs hold one feed set: use them with --iterations 1")
        if golden is not None:
            verify_feeds("--oracle", golden.path, golden.golden_meta, self.first)
            verify_golden(golden.path, golden.golden, golden.golden_meta, golden.model, golden.output_names)
        if loaded is not None:
            verify_feeds("--load-outputs", loaded.path, loaded.meta, self.first)

    def _prepare_classifier(self) -> None:
        compiled, oracle = self.compiled, self.oracle
        self._scalar_nonzero = scalar_nonzero_outputs(compiled)
        # onnxruntime's reading of the nodes it deviates on, for provider outputs that mismatch the spec
        self._reading = (OrtReading(lambda **kw: make_oracle(compiled, settings=self.options.settings, **kw),
                                    compiled.model, compiled.types)
                         if oracle.COMPUTES_SPEC else None)
        self._randoms = random_values(compiled.model)
        # NonZero nodes by path, in the main graph and the bodies the oracle runs; each is dropped
        # once it returns a coordinate (a body's: at any branch or iteration that ran)
        self._watching = oracle if isinstance(oracle, HybridOracle) else None
        self._still_empty = dict.fromkeys(self._watching.watch_nonzero()) if self._watching is not None else {}
        self._nonzero_nodes = len(self._still_empty)
        self._returned: "list[str]" = []
        # and those that never ran (a body's: no branch or iteration holding it ran), likewise
        self._never_ran = dict.fromkeys(self._still_empty)
        self._ran: "list[str]" = []

    def _prepare_backends(self) -> None:
        self._reports = {b.name: BackendReport(b.name) for b in self._runners}
        self._first: "list[Provider]" = []        # run before the oracle (_run_providers_first)
        self._ran_first: "dict[BackendName, BackendRun | DmlLowerError]" = {}
        self._last: "list[Provider]" = []         # prepared and run after the others (_run_providers_last)
        for backend in self._runners:
            if isinstance(backend, Provider):
                backend.run_once = self._one_set         # its session may use the shared arena
                if self._providers_last and not backend.modified:
                    self._last.append(backend)
                    continue
            self._prepare_backend(backend)

    def _prepare_backend(self, backend: Backend) -> None:
        """The backend prepared, what it says of itself in its report (its error, if it failed)."""
        started = time.perf_counter()
        report = self._reports[backend.name]
        try:
            prepared = backend.prepare()
        except DmlLowerError as exc:
            report.error = str(exc)
        else:
            report.ran, report.partial = prepared.ran, dict(prepared.partial)
            report.unsupported_nodes = dict(prepared.unsupported_nodes)
            report.node_providers, report.placement_notes = prepared.node_providers, list(prepared.placement_notes)
            self.oracle.keep.update(prepared.needs)
            if not prepared.needs and isinstance(backend, Provider) and self._providers_first:
                self._first.append(backend)
        report.seconds += time.perf_counter() - started

    def _after_prepare(self) -> None:
        # the passes that may take a region run an earlier one did on the same bytes (region_cache.py)
        schedule_reuse(self.compiled, self.oracle, [b for b in self._runners if not self._reports[b.name].error])
        bodies = bool(self.compiled.partition.bodies)
        self._flow = {b.name: 0 for b in self._runners if bodies and b.name.is_lowered}
        self._fed: "dict[BackendName, set[str]]" = {b.name: set() for b in self._runners}
        # the lowered backends' run-time matches whose rule declined on some call (ran on ONNX)
        self._run_time = {b.name: FallbackTally() for b in self._runners if b.name.is_lowered}
        self._regions: "dict[str, str]" = {}
        self._first_expected: "dict[str, np.ndarray]" = {}

    # -- the feed sets ------------------------------------------------------------------------
    def sets(self) -> Generator[CheckedSet, None, None]:
        """Each feed set checked, in turn (prepare() first). A Ctrl-C while one is under way drops
        that set's results; the caller's own work on a yielded set is the caller's."""
        if self._sets != "not started":      # the sets are drawn once: a second pass has none to give
            raise DmlLowerError(f"this check's feed sets were already drawn ({self._sets}): report() gives "
                                "what they found; a new CheckRun checks again")
        self.prepare()
        self._sets = "under way"
        try:
            for index, raw in self._drawn():
                marks = {b: len(r.outputs) for b, r in self._reports.items()}
                try:
                    done = self.run_set(index, raw)
                except KeyboardInterrupt:
                    for name, report in self._reports.items():       # the feed set under way is dropped
                        del report.outputs[marks[name]:]
                    raise
                if done is None:
                    break
                self._count_checked()
                yield done
                self.under_way = None                              # the caller is done with it too
                del done, raw                                      # one feed set alive at a time
        except KeyboardInterrupt:
            if self._checked == 0:
                raise
            self._interrupted = True
            resume()            # the report of the sets finished goes on: a signal stops it again
        finally:
            schedule_reuse(self.compiled, None, [])             # nothing is kept past the check
        self._sets = "done"

    def _drawn(self) -> "Iterator[tuple[int, Mapping[str, object]]]":
        """The sets in turn; one that cannot be drawn (a data loader's error) ends them as a set the
        oracle cannot evaluate does: the report covers the sets before it."""
        assert self.under_way is not None
        sets = itertools.chain([self.under_way.feeds], self._more)
        for index in itertools.count():
            try:
                raw = next(sets)
            except StopIteration:
                return
            except DmlLowerError as exc:
                if index == 0:
                    raise
                self._stopped = self._stop_line(index, exc)
                return
            self.under_way = UnderWay(index, raw)
            yield index, raw

    def _count_checked(self) -> None:
        """Set `under_way` is checked: counted (a set Ctrl-C drops clears nothing)."""
        self._checked += 1
        for node in self._returned:
            del self._still_empty[node]
        for node in self._ran:
            del self._never_ran[node]
        self._returned, self._ran = [], []

    def _stop_line(self, index: int, exc: DmlLowerError) -> str:
        label = f" ({self.about.feed_label(index)})" if self.about.feed_label is not None else ""
        return f"feed set #{index}{label}: {exc}"

    def run_set(self, index: int, raw: Mapping[str, object]) -> "CheckedSet | None":
        """Feed set #`index` on the oracle and every backend not in ERROR, each output classified;
        None: the set stopped the run (`stopped` says why)."""
        if index == 0:
            self._run_providers_first(self.first)
        try:
            feed_set = self.first if index == 0 else self._validated(raw)
            watching = self._watching           # the hybrid oracle's NonZero nodes (watch_nonzero)
            if watching is not None:
                watching.nonzero_returned.clear()
                watching.nonzero_ran.clear()
            expected = self.oracle.run(feed_set)
            returned = watching.nonzero_returned if watching is not None else set()
            ran = watching.nonzero_ran if watching is not None else set()
            self._returned = [node for node in self._still_empty if node in returned]
            self._ran = [node for node in self._never_ran if node in ran]
        except DmlLowerError as exc:
            if index == 0:
                raise FeedsFailed(str(exc)) from exc
            self._stopped = self._stop_line(index, exc)
            return None
        if index == 0:
            self._first_expected = expected
        actuals: "dict[BackendName, BackendRun]" = {}
        last = self._last if index == 0 else []
        for backend in self._runners:
            if backend in last:
                continue
            self._keep(backend, self._run_backend(backend, feed_set), index, feed_set, expected, actuals)
        if last:
            self._run_providers_last(feed_set, expected, actuals)
        kept = [b.name for b in self._runners if b.name in actuals]
        return CheckedSet(index, feed_set, expected, {b: actuals[b].outputs for b in kept},
                          {b: dict(actuals[b].not_compared) for b in kept})

    def _run_providers_last(self, feed_set: Mapping[str, np.ndarray], expected: "dict[str, np.ndarray]",
                            actuals: "dict[BackendName, BackendRun]") -> None:
        """The one feed set of a model under PROVIDERS_FIRST_FROM of weights on each provider backend
        of the file as shipped, prepared only now, its session released after: the oracle's (and the
        lowered backends') region sessions ran first, so a crash inside onnxruntime names a region
        and its node, and are released before it, so they and the shipped file's session never
        live at once (peak RSS). The report is the old order's: each backend's entries are its own,
        in the backends' order."""
        self.compiled.shared_sessions.release()
        for backend in self._last:
            self._prepare_backend(backend)
            ran = None
            try:
                ran = self._run_backend(backend, feed_set)
            finally:
                # its outputs made memory of their own; the arena handed back if another provider runs next
                backend.release(kept=ran, shrink=backend is not self._last[-1])
            self._keep(backend, ran, 0, feed_set, expected, actuals)

    def _keep(self, backend: Backend, ran: "BackendRun | None", index: int, feed_set: Mapping[str, np.ndarray],
              expected: "dict[str, np.ndarray]", actuals: "dict[BackendName, BackendRun]") -> None:
        """A backend's run of set #`index` (None: it is in ERROR) recorded and kept."""
        if ran is not None:
            actuals[backend.name] = ran
            self._record(backend.name, ran, index, feed_set, expected)

    def _run_providers_first(self, feed_set: Mapping[str, np.ndarray]) -> None:
        """The one feed set on each provider backend that needs no oracle value, its session released
        after: onnxruntime's session of the shipped file (its own copy of the weights, the pre-packed
        ones, its arena) and the region sessions the oracle and the lowered backends create next
        never hold their weights at once (peak RSS). Each outcome, outputs or error, is kept and
        recorded when the backend's turn comes (_run_backend): the report, its order and the
        statuses are the old order's; the outputs kept are the ones the report keeps for set #0
        anyway. With more sets (or an unknown number) each backend runs in turn on each set, its
        session alive throughout: every set's outputs would have to be kept, and drawn ahead; and so
        on a model under PROVIDERS_FIRST_FROM of weights."""
        for backend in self._first:
            started = time.perf_counter()
            ran = None
            try:
                ran = self._ran_first[backend.name] = backend.run(feed_set, self._oracle_value)
            except DmlLowerError as exc:
                self._ran_first[backend.name] = exc      # raised or recorded in its turn, as it would have been
            finally:
                # a Ctrl-C too: no set is checked then, nothing runs on. The outputs kept are made
                # memory of their own: a view kept would keep the session's memory (Provider.release)
                backend.release(kept=ran)
                self._reports[backend.name].seconds += time.perf_counter() - started

    def _validated(self, raw: Mapping[str, object]) -> "dict[str, np.ndarray]":
        compiled = self.compiled
        return with_defaults(check_feeds(compiled.inputs, raw, compiled.optional_inputs),
                             compiled.optional_inputs, compiled.initializers)[0]

    def _run_backend(self, backend: Backend, feed_set: Mapping[str, np.ndarray]) -> "BackendRun | None":
        """One backend on one set; None: it is in ERROR (now or before)."""
        report = self._reports[backend.name]
        if report.error:
            return None
        started = time.perf_counter()
        try:
            if backend.name in self._ran_first:                  # it ran this set before the oracle
                outcome = self._ran_first.pop(backend.name)
                if isinstance(outcome, DmlLowerError):
                    raise outcome
                return outcome
            return backend.run(feed_set, self._oracle_value)
        except (MemoryLimitExceeded, ModelContradiction):
            raise           # a limit the user set, or the model's own fault: not a backend's failure
        except DmlLowerError as exc:
            report.error = str(exc) + self._oracle_failed_too(exc)
            return None
        finally:
            report.seconds += time.perf_counter() - started

    def _oracle_failed_too(self, exc: DmlLowerError) -> str:
        """Where a lowered backend's ONNX region failed on nodes the oracle could not run on
        onnxruntime either (it evaluated them by another engine): said after the error."""
        if not isinstance(exc, RegionFailed):
            return ""
        region = set(exc.nodes)
        failed = [fb for fb in getattr(self.oracle, "fallbacks", []) if fb.node in region]
        if not failed:
            return ""
        engines = ", ".join(dict.fromkeys(fb.engine for fb in failed))
        return (f"; the oracle could not run {node_list([fb.node for fb in failed], 4)} on onnxruntime either "
                f"and evaluated {'it' if len(failed) == 1 else 'them'} by {engines} (the full report's oracle: lines say why)")

    def _oracle_value(self, name: str) -> np.ndarray:
        if name not in self.oracle.values:
            raise DmlLowerError(f"the {self.oracle.label} oracle keeps no intermediate value {name!r} "
                                "to feed a node the provider lacks; use the default hybrid oracle")
        return self.oracle.values[name]

    def _record(self, backend: BackendName, ran: BackendRun, index: int, feed_set: Mapping[str, np.ndarray],
                expected: "dict[str, np.ndarray]") -> None:
        report = self._reports[backend]
        if index == 0:
            report.values = {k: np.asarray(v) for k, v in ran.outputs.items()}
        self._fed[backend].update(ran.fed)
        if backend in self._flow:
            self._flow[backend] += ran.lowered_iterations
        if backend in self._run_time:
            self._run_time[backend].add(ran.run_time, index)
        if ran.regions:
            self._regions = {name: f"[{node_list(nodes)}] {engine}" for name, (nodes, engine) in ran.regions.items()}
        unread = self._unread(backend, ran)
        for name, want in expected.items():
            result = self.classify(name, backend, want, ran, feed_set, unread.get(name))
            result.iteration = index
            report.outputs.append(result)

    def _unread(self, backend: BackendName, ran: BackendRun) -> "dict[str, UnreadOutput]":
        """The DML EP's outputs of this run it never read back (dml_deviations.unread_outputs)."""
        if not backend.from_dml_ep:
            return {}
        from onnx_dml_lowering.runtime.dml_deviations import unread_outputs
        report = self._reports[backend]
        providers = None if report.node_providers is None else {
            **report.node_providers, **{node: "cut out" for node in report.unsupported_nodes}}
        return unread_outputs(self.compiled.model, ran.outputs, providers)

    # -- the status rules ---------------------------------------------------------------------
    def classify(self, name: str, backend: BackendName, want: np.ndarray, ran: BackendRun,
                 feeds: Mapping[str, np.ndarray], unread: "UnreadOutput | None" = None) -> OutputResult:
        """Output `name` of `backend` against the oracle's `want`, every status rule in order:
        NONDETERMINISTIC (a random node's), UNSUPPORTED (the backend did not produce it itself),
        MATCH / MISMATCH (compare.py, within the tolerances; a lowered node's output exactly),
        a MISMATCH that is a known one named DEVIATION, and an output the DML EP never read back
        (`unread`) a DEVIATION whatever it holds: its value is not DirectML's answer."""
        want = np.asarray(want)
        if name in self._randoms or name in ran.not_compared:
            status, detail = (("nondeterministic", f"computed from random node {self._randoms[name]}: not compared")
                              if name in self._randoms else ("unsupported", ran.not_compared[name]))
            result = OutputResult(name, backend.text, status, list(want.shape), None, str(want.dtype), None)
            result.detail = detail
            return result
        atol, rtol = self.tolerances.for_output(name, want.dtype)
        got = ran.outputs.get(name)
        result = compare(name, backend.text, want, got, atol, rtol, exact=self.tolerances.is_exact(name))
        if unread is not None and result.status in ("match", "mismatch"):
            from onnx_dml_lowering.runtime.dml_deviations import Held
            result.status, result.detail = "deviation", unread.describe(Held.of(want, got, result.status == "match"))
            return result
        if result.status != "mismatch":
            return result
        if result.exact and result.first_mismatch is not None:
            result.detail += f"; compared exactly: the output of lowered node {self.tolerances.exact[name]}"
        named = self._deviation(name, backend, want, got, feeds)
        if named:
            result.status, result.detail = "deviation", named
        return result

    def _deviation(self, name: str, backend: BackendName, want: np.ndarray, got: "np.ndarray | None",
                   feeds: Mapping[str, np.ndarray]) -> "str | None":
        """The named deviation a mismatching output is: onnxruntime's scalar NonZero, the DML EP's
        own (bit for bit its documented answer), or onnxruntime's reading of a node it deviates
        on (within the tolerances); None: a plain mismatch. A provider's results saved and loaded
        (saved:ort-cpu, saved:run-ort-cpu) are named as live."""
        if (backend.from_provider and name in self._scalar_nonzero and got is not None
                and want.shape[:1] == (0,) and np.shape(got) == (1,) + want.shape[1:]):
            return f"{SCALAR_NONZERO_DEVIATION} (node {self._scalar_nonzero[name]}; expected {list(want.shape)})"
        if got is None:
            return None
        atol, rtol = self.tolerances.for_output(name, np.asarray(got).dtype)
        if backend.from_dml_ep:
            from .dml_deviations import recognise      # the DML EP's table: read only for its outputs
            def within(want: np.ndarray, value: np.ndarray) -> bool:
                return compare(name, "", want, value, atol, rtol).status == "match"
            named = recognise(self.compiled.model, dict(feeds), name, got, within)   # a dict: a shallow copy
            if named:
                return named
        if self._reading is None or not backend.from_provider:
            return None
        # the expected output beside the oracle's values (a reference oracle keeps none by name)
        return self._reading.recognise(feeds, name, got, atol, rtol, self.tolerances.is_exact(name),
                                       {**self.oracle.values, name: want})

    # -- the report ---------------------------------------------------------------------------
    def report(self) -> CheckReport:
        """The report of the sets checked, built once: after sets() has ended (run whole here
        when it was never started)."""
        if self._sets == "not started":
            for _ in self.sets():
                pass
        if self._sets != "done":
            raise RuntimeError("CheckRun.report() while its feed sets are under way: finish sets() first")
        if self._report is None:
            self._report = self._build_report()
        return self._report

    def _build_report(self) -> CheckReport:
        compiled, about = self.compiled, self.about
        for name, values in self._fed.items():
            self._reports[name].fed_from_oracle = sorted(values)
        empty = self._nonzero_nodes and len(self._still_empty) == self._nonzero_nodes
        feeds = dict(about.feeds)
        if "iterations" in feeds:
            feeds["iterations"] = self._checked
        fallbacks = {b.text: tally.to_list() for b, tally in self._run_time.items() if tally.entries}
        return CheckReport(
            about.model_name, compiled.feature_level.name, checked_placement(compiled.placement, fallbacks), self._regions,
            list(self._reports.values()), self.oracle.to_dict(), self._checked, self._unavailable,
            expected=self._first_expected,
            control_flow_iterations={b.text: count for b, count in self._flow.items()},
            defaults={name: self.first[name] for name in self._defaulted},
            interrupted=self._interrupted, stopped=self._stopped,
            empty_nonzero=list(self._still_empty) if empty else [], dims=dict(about.dims),
            nonzero_never_ran=[n for n in self._still_empty if n in self._never_ran] if empty else [],
            fail_partial=about.fail_partial,
            feed_notes=dimension_notes(compiled.inputs + compiled.optional_inputs, self.first),
            feeds=feeds, declared_shapes=declared_shapes_differ(compiled.model.graph.output, self._first_expected),
            run_time_fallbacks=fallbacks)


def declared_shapes_differ(outputs: "Sequence[onnx.ValueInfoProto]", expected: "Mapping[str, object] | None"
                           ) -> "dict[str, dict]":
    """The graph outputs whose value on feed set #0 contradicts their declared shape: another rank,
    or another size where the model fixes one (a name or an unknown size fits any)."""
    differ: "dict[str, dict]" = {}
    for vi in outputs:
        tensor = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        value = (expected or {}).get(vi.name)
        if tensor is None or not tensor.HasField("shape") or not isinstance(value, np.ndarray):
            continue
        declared = declared_dims(tensor.shape)
        shape = list(value.shape)
        if len(declared) != len(shape) or any(isinstance(d, int) and d != s for d, s in zip(declared, shape)):
            differ[vi.name] = {"declared": declared, "oracle": shape}
    return differ


def check(compiled: CompiledView, feeds: Mapping[str, object], backends: "Sequence[BackendLike]", tolerances: Tolerances,
          options: "BackendOptions | None" = None, *, oracle: "str | OracleName | Oracle" = "hybrid",
          more_feeds: "Iterable[Mapping[str, object]] | None" = None, model_name: str = "",
          feed_label: "Callable[[int], str] | None" = None,
          fail_partial: bool = False) -> "tuple[dict, CheckReport]":
    """The whole CheckRun in one call: (feed set #0 as checked, the report). `feed_label(i)` names
    set #i (its seed) where a later set stops the run; `fail_partial`: a PARTIAL backend makes
    the report not ok."""
    run = CheckRun(compiled, feeds, backends, tolerances, options, oracle=oracle, more_feeds=more_feeds,
                   about=CheckAbout(model_name, feed_label, fail_partial))
    report = run.report()
    return run.first, report
