"""reduce: cut a model that fails `check` down to a small sub-model that fails the same way.

Every step is a real `check` of a real sub-model on the one backend:

1. Bisect the prefixes of the shared schedule (lowering.schedule: a topological order that
   keeps one engine's nodes together, as partition and the oracle order them). Prefix k is the
   model of the first k nodes whose outputs are the values it hands to the rest; the shortest
   failing prefix ends where the failure first shows.
2. Keep only what the failing value depends on (the value alone if it fails alone), then bisect
   the head of that cone away: the cut nodes' values become graph inputs.
3. Drop the remaining nodes one by one (delta debugging) while the failure stays.

A sub-model's missing producers become graph inputs typed from shape inference (compiled.types)
and fed with the hybrid oracle's intermediate values (ONNX semantics), so a cut changes nothing
upstream of the failure: what is left fails on the same computation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.ir.printer import name_list
from onnx_dml_lowering.lowering.onnx_graphs import node_reads
from onnx_dml_lowering.lowering.schedule import engine_runs
from onnx_dml_lowering.runtime.backend_names import BackendLike, BackendName, as_backend_name
from onnx_dml_lowering.runtime.check import BackendOptions, check
from onnx_dml_lowering.runtime.oracle import OracleKind, OracleName, make_oracle, parse_oracle
from onnx_dml_lowering.runtime.tolerances import Tolerances
from onnx_dml_lowering.runtime.compare import BackendReport, OutputResult
from onnx_dml_lowering.runtime.weights import LAZY_MIN_BYTES, stored_bytes

from .compiled import CompiledModel, compile_model

STATUSES = ("mismatch", "deviation", "error", "unsupported")
NOUN = "outputs"


def error_signature(error: str) -> str:
    """A backend ERROR up to the names and numbers in it (quoted names, region numbers, sizes): a
    cut reproduces the ERROR when its backend fails with this same message about its own values,
    not when it fails some other way (a cut that cannot be fed is no repro)."""
    return re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "#", error)


def errored(outputs: Iterable[str], backend: str, error: str) -> "list[OutputResult]":
    """A backend ERROR as the outputs it left without a value: the search cuts by outputs."""
    return [OutputResult(name, backend, "error", [], None, "", None, detail=error) for name in outputs]


class NothingSmaller(DmlLowerError):
    """The whole model shows the failure but no sub-model rebuilt from its nodes does (not even
    all of them): nothing to write. The CLI says so and exits 1, as when nothing fails."""


@dataclass
class Reduction:
    """The minimal sub-model, the feeds that reproduce the failure on it, and how it was found."""
    model: onnx.ModelProto
    feeds: "dict[str, np.ndarray]"
    original: "list[OutputResult]"        # the failing outputs of the whole model
    failing: "list[OutputResult]"         # ... and of the minimal model
    nodes_before: int
    checks: int                           # sub-models checked on the way

    @property
    def nodes(self) -> "list[onnx.NodeProto]":
        return list(self.model.graph.node)


def scheduled_nodes(compiled: CompiledModel) -> "list[onnx.NodeProto]":
    """The model's nodes in the shared schedule, lowered nodes kept together as partition does."""
    lowered = {n for p in compiled.placement if p.status == "lowered" for n in p.onnx_nodes}
    runs = engine_runs(list(compiled.model.graph.node), lambda n: "dml" if n.name in lowered else "onnx")
    return [node for _, members in runs for node in members]


def sub_tolerances(tolerances: Tolerances, outputs: Iterable[str]) -> Tolerances:
    """The tolerances that apply to a sub-model: per-output ones only for the outputs it has."""
    kept = set(outputs)
    return Tolerances(tolerances.atol, tolerances.rtol,
                      {name: pair for name, pair in tolerances.per_output.items() if name in kept})


class Reducer:
    """Builds and checks sub-models of one compiled model (nodes are scheduled positions)."""

    def __init__(self, compiled: CompiledModel, values: Mapping[str, object], fed: Iterable[str],
                 backend: BackendName, status: str, tolerances: Tolerances, check_options: "BackendOptions | None" = None,
                 oracle: "str | OracleName" = "hybrid") -> None:
        self.compiled = compiled
        self.nodes = scheduled_nodes(compiled)
        self.values = values                      # the oracle's: graph feeds and every node output
        self.fed = set(fed)                       # initializers the feeds override are inputs
        self.backend = backend
        self.status = status
        self.tolerances = tolerances
        self.options = check_options
        self.oracle = oracle                      # what the sub-models are checked against
        self.signature = ""                       # status "error": the whole model's (error_signature)
        self.inits = {i.name: i for i in compiled.model.graph.initializer}
        self.graph_outputs = set(compiled.output_names)
        self.producer = {o: index for index, node in enumerate(self.nodes) for o in node.output if o}
        self.checks = 0
        self._seen: "dict[tuple, list[OutputResult]]" = {}
        self.why: "dict[tuple, str]" = {}         # why a sub-model does not reproduce, by key

    # -- sub-models --------------------------------------------------------------------------
    def _feedable(self, name: str) -> bool:
        info = self.compiled.types.get(name)
        value = self.values.get(name)
        return (info is not None and bool(info.onnx_type) and isinstance(value, np.ndarray)
                and value.dtype.kind != "O")

    def _input_info(self, name: str) -> onnx.ValueInfoProto:
        """Typed from shape inference; a dimension inference got wrong or left unranked takes
        the oracle value's size (the feed must pass the declared shape)."""
        info = self.compiled.types[name]
        value = np.asarray(self.values[name])       # an array (_feedable): no copy
        dims = list(value.shape)
        if info.shape is not None and len(info.shape) == value.ndim:
            dims = [d if not isinstance(d, int) or d == actual else actual for d, actual in zip(info.shape, value.shape)]
        return helper.make_tensor_value_info(name, info.onnx_type, dims)

    def _kind(self, name: str) -> str:
        """Why a value cannot cross a sub-model's boundary, in a few words."""
        info = self.compiled.types.get(name)
        if info is None or not info.onnx_type:
            return "no type is known for it"
        return "not a tensor" if not isinstance(self.values.get(name), np.ndarray) else "an object array"

    def _output_info(self, name: str) -> onnx.ValueInfoProto:
        # Rank only: the sub-model's own shape inference fills in what it knows.
        info = self.compiled.types[name]
        return helper.make_tensor_value_info(name, info.onnx_type, [None] * np.asarray(self.values[name]).ndim)

    def build(self, members: Iterable[int], outputs: Sequence[str]) -> "tuple[onnx.ModelProto, dict] | None":
        """The sub-model of these scheduled nodes with these outputs and its feeds; None when a
        value it needs cannot be a graph input (not a tensor, or no type known)."""
        nodes = [self.nodes[i] for i in sorted(set(members))]
        produced = {o for node in nodes for o in node.output if o}
        # once each: a node may read a name twice (Slice(x, one, e, axes, one)), a graph holds it once
        reads = [r for r in dict.fromkeys(r for node in nodes for r in node_reads(node)) if r not in produced]
        inputs, inits, feeds = [], [], {}
        for name in reads:
            if name in self.inits and name not in self.fed:
                inits.append(self.inits[name])
                continue
            if not self._feedable(name):
                self._refused = f"cannot take {display(name)} as an input ({self._kind(name)})"
                return None
            inputs.append(self._input_info(name))
            feeds[name] = self.values[name]
        unfit = [o for o in outputs if not self._feedable(o)]
        if not outputs or unfit:
            self._refused = (f"cannot give {display(unfit[0])} as an output ({self._kind(unfit[0])})" if unfit
                             else "has no output to compare")
            return None
        source = self.compiled.model
        graph = helper.make_graph(nodes, f"{source.graph.name or 'model'}_reduced", inputs,
                                  [self._output_info(o) for o in outputs], inits)
        model = helper.make_model(graph, opset_imports=list(source.opset_import), ir_version=source.ir_version)
        model.functions.extend(source.functions)
        return model, feeds

    def failures(self, members: Iterable[int], outputs: Sequence[str]) -> "list[OutputResult]":
        """The outputs of this sub-model that `check` gives the wanted status on the backend
        (empty: it does not reproduce, or it cannot be built or checked)."""
        key = (frozenset(members), tuple(outputs))
        if key not in self._seen:
            self._seen[key] = []
            self._refused = ""
            built = self.build(key[0], outputs)
            if built is not None:
                self.checks += 1
                self._seen[key] = self._check(*built)
            if not self._seen[key]:
                self.why[key] = self._refused
        return self._seen[key]

    def _check(self, model: onnx.ModelProto, feeds: dict) -> "list[OutputResult]":
        outputs = [o.name for o in model.graph.output]
        try:
            compiled = compile_model(model, feature_level=self.compiled.feature_level)
            _, report = check(compiled, feeds, [self.backend], sub_tolerances(self.tolerances, outputs),
                              self.options, oracle=self.oracle)
        except DmlLowerError as exc:
            self._refused = f"is refused ({exc})"   # a cut the tools refuse is not a repro
            return []
        results = [o for b in report.backends for o in b.outputs]
        errors = [b.error for b in report.backends if b.error]
        statuses = sorted({o.status.upper() for o in results})
        self._refused = (f"fails on {self.backend} ({errors[0]})" if errors else
                         f"checks {' / '.join(statuses) or 'nothing'} on {self.backend}")
        if self.status == "error":
            same = errors and error_signature(errors[0]) == self.signature
            return errored(outputs, self.backend.text, errors[0]) if same else []
        return [o for o in results if o.status == self.status]

    def whole_model_why(self) -> str:
        """Why the whole graph, rebuilt from its nodes, does not reproduce (after reduce() gave None)."""
        count = len(self.nodes)
        return self.why.get((frozenset(range(count)), tuple(self.frontier(count))), "")

    # -- the search --------------------------------------------------------------------------
    def frontier(self, k: int) -> "list[str]":
        """What prefix k hands on: tensors its nodes produce that a later node reads or the model
        outputs (a sequence cannot be an output the comparison reads, nor fed to a cut)."""
        later = set(self.graph_outputs)
        for node in self.nodes[k:]:
            later.update(node_reads(node))
        return [o for node in self.nodes[:k] for o in node.output if o and o in later and self._feedable(o)]

    def cone(self, members: Iterable[int], outputs: Sequence[str]) -> "list[int]":
        """The members the outputs depend on."""
        allowed = set(members)
        keep: "set[int]" = set()
        todo = [self.producer[o] for o in outputs if self.producer.get(o) in allowed]
        while todo:
            index = todo.pop()
            if index in keep:
                continue
            keep.add(index)
            todo += [self.producer[r] for r in node_reads(self.nodes[index]) if self.producer.get(r) in allowed]
        return sorted(keep)

    def reduce(self) -> "tuple[list[int], list[str]] | None":
        """(scheduled nodes, outputs) of a small failing sub-model; None when even the whole
        model rebuilt from its nodes does not fail."""
        count = len(self.nodes)
        if not self.failures(range(count), self.frontier(count)):
            return None
        # 1. Shortest failing prefix: prefix `low` does not fail (0: nothing), prefix `high` does.
        low, high = 0, count
        while high - low > 1:
            middle = (low + high) // 2
            if self.failures(range(middle), self.frontier(middle)):
                high = middle
            else:
                low = middle
        members, outputs = list(range(high)), self.frontier(high)
        # 2. The cone of the failing values: of the first alone if it fails alone, else of all.
        failing = [o.output for o in self.failures(members, outputs)]
        # An ERROR names no output: each alone, the prefix's last values first (where it began).
        alone = [[o] for o in reversed(failing)] if self.status == "error" else [[failing[0]]]
        for wanted in (*alone, failing):
            cone = self.cone(members, wanted)
            if self.failures(cone, wanted):
                members, outputs = cone, wanted
                break
        members = self._cut_head(members, outputs)
        # 3. One by one, until no single node can go.
        needed = {self.producer[o] for o in outputs if o in self.producer}
        changed = True
        while changed:
            changed = False
            for index in list(members):
                if index in needed or index not in members:
                    continue
                trial = self.cone([m for m in members if m != index], outputs)
                if self.failures(trial, outputs):
                    members, changed = trial, True
        return members, outputs

    def _cut_head(self, members: "list[int]", outputs: Sequence[str]) -> "list[int]":
        """The shortest failing suffix (in schedule order) that still holds the outputs' producers."""
        producers = [members.index(self.producer[o]) for o in outputs if self.producer.get(o) in members]
        if not producers:
            return members
        low, high = 0, min(producers) + 1     # members[low:] fails; members[high:] lacks a producer
        while high - low > 1:
            middle = (low + high) // 2
            if self.failures(members[middle:], outputs):
                low = middle
            else:
                high = middle
        return members[low:]


def sub_model_oracle(oracle: "str | OracleName") -> OracleName:
    """The oracle sub-models are checked against: the one asked for, but a golden-outputs file
    holds the whole model's outputs only, so its sub-models are checked against ONNX semantics
    (the hybrid oracle)."""
    name = parse_oracle(oracle)
    return OracleName(OracleKind.HYBRID) if name.kind is OracleKind.GOLDEN else name


def reduce_model(compiled: CompiledModel, feeds: Mapping[str, object], backend: BackendLike, status: str = "mismatch",
                 tolerances: "Tolerances | None" = None, check_options: "BackendOptions | None" = None,
                 oracle: "str | OracleName" = "hybrid") -> "tuple[BackendReport, Reduction | None]":
    """Check `compiled` on `backend` against `oracle` (hybrid, reference, ort-cpu or a golden
    FILE.npz, as check's); if outputs have `status` there, find a small sub-model that shows it
    too. The values fed to a cut always come from the hybrid oracle (ONNX semantics).
    Returns (the backend's report on the whole model, the Reduction or None)."""
    backend, oracle = as_backend_name(backend), parse_oracle(oracle)
    status = status.lower()
    if status not in STATUSES:
        raise DmlLowerError(f"--status {status.upper()}: reduce looks for {' or '.join(s.upper() for s in STATUSES)}")
    tolerances = tolerances or Tolerances()
    settings = check_options.settings if check_options is not None else None
    # The verdict is check's own, with its own oracle: an oracle that keeps every intermediate value
    # makes each one a region output, which stops onnxruntime fusing across it (a Conv kept apart
    # from its BatchNormalization rounds differently), so it could see a failure check does not.
    checked, report = check(compiled, feeds, [backend], tolerances, check_options, oracle=oracle)
    whole = report.backends[0]
    if status == "error":
        original = errored(compiled.output_names, backend.text, whole.error) if whole.error else []
    else:
        original = [o for o in whole.outputs if o.status == status]
    if not original:
        return whole, None
    values = make_oracle(compiled, settings=settings,
                         memory_limit=check_options.memory_limit if check_options is not None else None)
    values.keep.update(o for node in compiled.model.graph.node for o in node.output if o)   # every value, to feed cuts
    values.run(checked)
    reducer = Reducer(compiled, values.values, checked, backend, status, tolerances, check_options,
                      sub_model_oracle(oracle))
    reducer.signature = error_signature(whole.error)
    found = reducer.reduce()
    if found is None and oracle.kind is OracleKind.GOLDEN:
        raise DmlLowerError(f"the {status.upper()} on {backend} is against the golden outputs of {oracle}, but on this "
                            f"machine {backend} agrees with ONNX semantics (the hybrid oracle), which the sub-models "
                            "are checked against: nothing here reproduces it")
    if found is None and not any(o.output in reducer.producer for o in original):
        raise DmlLowerError(f"the {status.upper()} on {backend} is on a value no node computes "
                            f"({name_list([o.output for o in original], noun=NOUN)}: a graph input or initializer "
                            "passed through): nothing to reduce")
    if found is None:
        raise NothingSmaller(f"no smaller model reproduces the {status.upper()} on {backend} "
                             f"({name_list([o.output for o in original], noun=NOUN)}): the graph rebuilt from its "
                             f"{len(reducer.nodes)} nodes with the same inputs and weights "
                             f"{reducer.whole_model_why()}, so the model itself is the smallest repro")
    members, outputs = found
    built = reducer.build(members, outputs)
    assert built is not None                # reduce() returns only sets it built and checked
    model, sub_feeds = built
    return whole, Reduction(model, sub_feeds, original, reducer.failures(members, outputs),
                               len(reducer.nodes), reducer.checks)


def inputs_path(model_path: "str | Path") -> Path:
    """MIN.onnx -> MIN.inputs.npz (beside it; MIN itself when it is a device, FIFO or descriptor)."""
    from onnx_dml_lowering.runtime.output_target import sibling
    path = Path(model_path)
    beside = path.with_suffix(".inputs.npz") if path.suffix == ".onnx" else path.with_name(path.name + ".inputs.npz")
    return Path(sibling(str(path), str(beside)))       # a device (-o /dev/null) takes both


# Over this many initializer bytes a model goes to its file with external data (protobuf's 2 GB limit).
EXTERNAL_BYTES = 1 << 30


def save_reduction(reduction: Reduction, path: "str | Path") -> Path:
    """Write MIN.onnx and MIN.inputs.npz beside it; returns the .npz path."""
    path = Path(path)
    npz = inputs_path(path)
    from .optimize import save_model
    inits = reduction.model.graph.initializer
    # weights left in the input's files (memory-mapped) are copied, inline or to MIN.onnx.data
    external = ({t.name for t in inits if stored_bytes(t) >= LAZY_MIN_BYTES}
                if sum(map(stored_bytes, inits)) > EXTERNAL_BYTES else set())
    save_model(reduction.model, str(path), external, "reduced model")
    from onnx_dml_lowering.runtime.npz import save_npz     # raw records for bfloat16 / float8 / 4-bit
    save_npz(str(npz), reduction.feeds, "the reduced model's inputs")
    return npz
