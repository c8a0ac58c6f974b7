"""Conformance suites: the NonZero / EyeLike / idiom grids as onnx_test_runner case folders
(DIR/<case>/model.onnx + test_data_set_N/input_K.pb, output_K.pb), expected outputs from
onnx.reference, a manifest of the deviations each provider here was seen to have, and a runner
that checks a folder on any backend (our emulator or an onnxruntime provider)."""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.ir.printer import name_list
from onnx_dml_lowering.ir.errors import MemoryLimitExceeded
from onnx_dml_lowering.runtime.input_files import named_stat
from onnx_dml_lowering.runtime.ort.providers import resolve_provider
from onnx_dml_lowering.runtime.backend_names import CHOICES, BackendLike, as_backend_name, provider_backend
from onnx_dml_lowering.runtime.backends import BackendOptions, make_backends
from onnx_dml_lowering.runtime.oracle_on_demand import lazy_oracle
from onnx_dml_lowering.runtime.compare import BackendReport, OutputResult, value_text
from onnx_dml_lowering.runtime.dml_deviations import FAILURES, NAMES, describe, dml_outputs, failing_nodes, unread_outputs
from onnx_dml_lowering.runtime.dml_fusion import FUSED_OUTPUT_EMPTY, fused_empty_outputs, fused_output_risks
from onnx_dml_lowering.runtime.feeds import check_feeds, with_defaults
from onnx_dml_lowering.runtime.ort_messages import ProviderError
from onnx_dml_lowering.runtime.output_file import write_bytes, write_text

from ..compiled import compile_model
from ..frontend import load_model, read_regular_file
from .cases import Case, all_cases
from .data_sets import Budget, read_case
from .discovery import MANIFEST, MODEL, case_names, not_a_manifest, read_manifest
from .staging import check_target, is_staging, staged_suite
from ..ep.placement import CPU as CPU_PROVIDER
from ..ep.placement import DML as DML_PROVIDER
from ..ep.placement import NONE, REMOVED, predict_placement
from ..ep.registry import TableChoice, choose_table

STATUSES = ("pass", "partial", "deviation", "unsupported", "fail")
# Providers that cannot run a model on their own (Azure only calls remote endpoints).
_NOT_PROBED = ("AzureExecutionProvider",)

README = """\
DirectML conformance suite for ONNX NonZero / EyeLike and the idioms around them
(exported by dml-lower conformance export, feature level {level}, {count} cases, {seeds} data sets each).

Each folder is one onnx_test_runner case: model.onnx and test_data_set_N/input_K.pb / output_K.pb.
The expected outputs are ONNX semantics (onnx.reference), not any provider's results.

On Windows, with onnxruntime's onnx_test_runner built with DirectML (--use_dml):

    onnx_test_runner -e dml DIR
    onnx_test_runner -e dml -C "session.disable_cpu_ep_fallback|1" DIR

The second form forbids the silent hand-over of a node to the CPU provider: a NonZero or EyeLike
that DirectML does not take then fails to load instead of passing on the CPU.

{manifest} lists, per provider and case, the deviations from ONNX semantics seen when the suite
was exported (each was run, none is assumed): a different output shape (onnxruntime's scalar
NonZero gives (1, nnz), ONNX says (0, nnz)), a missing kernel ("unsupported"), or other values.
A failure that is not listed there is a new one. Where DirectML was not available at export, the
DmlExecutionProvider entry is predicted from the DML EP's source (named deviations, missing
kernels), and each case's dml_ep_placement is the provider predicted for each of its nodes by
{table}:
    dml-lower conformance run DIR --backends ort-dml
checks both (a node onnxruntime ran elsewhere than predicted fails the case).
The same folder runs on Linux with
    dml-lower conformance run DIR --backends cpu,ort-cpu,ort:<ProviderName>
"""


def _write_tensor(path: str, array: np.ndarray, name: str) -> None:
    write_bytes(path, "a conformance tensor", numpy_helper.from_array(np.asarray(array), name).SerializeToString())


def _reference(model: onnx.ModelProto, feeds: "dict[str, np.ndarray]") -> "list[np.ndarray]":
    from onnx.reference import ReferenceEvaluator
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]


@dataclass
class Outcome:
    status: str                     # one of STATUSES
    detail: str = ""
    fallbacks: "list[str]" = field(default_factory=list)
    summary: str = ""               # the detail in a few words where it has them ('no kernel for EyeLike(22)')
    contradicts: str = ""           # what the manifest predicted for this provider and case, when it did otherwise


def _compare(expected: "list[np.ndarray]", actual: "list[np.ndarray | None]", names: "list[str]") -> str:
    """'' when every output equals ONNX's exactly (NaN meets NaN), else the first difference."""
    for name, want, got in zip(names, expected, actual):
        got = np.asarray(got)
        if got.shape != want.shape:
            return f"output {name}: shape {list(got.shape)}, ONNX says {list(want.shape)}"
        if got.dtype != want.dtype:
            return f"output {name}: dtype {got.dtype}, ONNX says {want.dtype}"
        if not np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"):
            bad = np.flatnonzero((got != want) & ~((got != got) & (want != want)) if want.dtype.kind in "fc"
                                 else got != want)
            index = np.unravel_index(int(bad[0]), want.shape) if want.ndim else ()
            return (f"output {name}: {bad.size} of {want.size} values differ; first at "
                    f"{[int(i) for i in index]}: {value_text(got[index])}, ONNX says {value_text(want[index])}")
    return ""


# numpy's reprs of one element (np.float32(1.0), np.True_), which manifests written before values
# were shown as runtime.compare.value_text shows them hold: read as that text, they still match
_NUMPY_REPR = re.compile(r"np\.(?:[a-z]+[0-9]*\(([^()]*)\)|(True|False)_)")


def _as_written_now(detail: str) -> str:
    """A manifest's deviation detail in _compare's words (an older export's numpy reprs unwrapped)."""
    return _NUMPY_REPR.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), detail)


def _unread(model: onnx.ModelProto, names: "list[str]", actual: "list[np.ndarray | None]",
            providers: "dict[str, str] | None") -> str:
    """'' unless an empty output of the DML EP's left the run's other DML outputs never read back
    (dml_deviations.unread_outputs): then the line naming them, whatever they hold (it does not
    depend on the unwritten memory, so a prediction and a run say the same line)."""
    unread = unread_outputs(model, dict(zip(names, actual)), providers)
    if not unread:
        return ""
    first = next(iter(unread.values()))
    return first.short() + (f"; so are {name_list(list(unread)[1:], 4)}" if len(unread) > 1 else "")


def _dml_only(model: onnx.ModelProto, names: "list[str]", actual: "list[np.ndarray | None]",
              providers: "dict[str, str] | None") -> str:
    """The DML EP's named deviations a run shows whatever the values: outputs never read back
    (_unread), or an output its activation fusion gave back empty; '' when neither."""
    fused = fused_empty_outputs(model, dict(zip(names, actual)), providers)
    return _unread(model, names, actual, providers) or (fused[0].short() if fused else "")


def _no_kernel(error: "DmlLowerError | None") -> "ProviderError | None":
    """The error when it says the provider lacks an implementation (runtime.ort_messages read it)."""
    return error if isinstance(error, ProviderError) and error.not_implemented else None


class CaseRunner:
    """Runs the suite's cases on one --backends entry, through runtime.backends as check runs it:
    'cpu' / 'ort' (our lowered graph) or an onnxruntime provider running the case's model file as
    shipped. (Not a runtime.backends.Backend, nor onnx's Backend: it runs a conformance case.)"""

    def __init__(self, spec: BackendLike, feature_level: str = "5_1", options: "BackendOptions | None" = None) -> None:
        self.name = as_backend_name(spec)
        self.spec, self.feature_level = self.name.text, feature_level
        self.options = options or BackendOptions()
        self.assignment: "dict[str, str] | None" = None     # who ran each node in the last run
        parsed = self.name
        if parsed.is_saved:
            raise DmlLowerError(f"conformance backend {spec!r}: saved outputs are not a backend here; "
                                f"choose from {CHOICES}")
        # an unknown or absent provider is one line before any case runs
        self.provider = (resolve_provider(parsed.provider, self.options.provider_options, self.options.ep_libraries)
                         if parsed.is_provider else None)

    @property
    def deviation_key(self) -> str:
        return self.provider.name if self.provider is not None else self.spec

    def run(self, model: "str | onnx.ModelProto",
            data_sets: "list[dict[str, np.ndarray]]"
            ) -> "tuple[list[list[np.ndarray | None]] | None, DmlLowerError | None, list[str], str]":
        """(outputs per data set, error, placement notes, what it did not run itself: '' or the PARTIAL text)."""
        try:
            compiled = compile_model(model, feature_level=self.feature_level)
            runners, _ = make_backends(compiled, [self.name], self.options)
            prepared = runners[0].prepare()
        except DmlLowerError as exc:
            return None, exc, [], ""
        self.assignment = prepared.node_providers
        names = compiled.output_names
        report = BackendReport(self.name, partial=dict(prepared.partial))
        runs = []
        try:
            for feeds in data_sets:
                full, _ = with_defaults(check_feeds(compiled.inputs, feeds, compiled.optional_inputs),
                                        compiled.optional_inputs, compiled.initializers)
                oracle_value = lazy_oracle(compiled, full, prepared.needs, self.options.settings,
                                           self.options.memory_limit)
                done = runners[0].run(full, oracle_value)
                report.outputs += [OutputResult(n, self.spec, "unsupported", [], None, "", None)
                                   for n in done.not_compared]
                runs.append([done.outputs.get(n) for n in names])
        except MemoryLimitExceeded:
            raise           # the limit the user set (--memory-limit), not the case failing: check stops too
        except DmlLowerError as exc:
            return None, exc, prepared.placement_notes, ""
        return runs, None, prepared.placement_notes, report.partial_why() if report.is_partial else ""


def judge(backend: CaseRunner, case_name: str, model: onnx.ModelProto, data_sets: "list[dict[str, np.ndarray]]",
          expected: "list[list[np.ndarray]]", known: "dict | None",
          dml_placement: "dict[str, str] | None" = None, path: "str | None" = None) -> Outcome:
    """pass / deviation (listed in the manifest for this provider and case, and seen again; a
    predicted DML EP deviation is said by its name) / unsupported (no kernel) / fail; partial:
    every output as ONNX says, but the backend did not run the whole model itself (a node run by
    another provider, cut out, or an output not its own). On the DML EP, a node that ran on another
    provider than `dml_placement` predicts is a failure too. `path`: the case's model file, which a
    provider backend runs as shipped. On the DML EP, an outcome other than the deviation or missing
    kernel the manifest predicted is said (`contradicts`), whatever the status."""
    entry = (known or {}).get(backend.deviation_key, {})
    known = entry.get("cases", {}).get(case_name)
    try:
        outcome = _judge(backend, model, data_sets, expected, known, dml_placement, path)
    except MemoryLimitExceeded as exc:          # which case of the suite went past the limit
        raise MemoryLimitExceeded(f"conformance case '{display(case_name)}' on {backend.spec}: {exc}") from None
    if backend.deviation_key == DML_PROVIDER and known and known.get("status") in ("deviation", "unsupported") \
            and outcome.status != known["status"]:
        said = known.get("named") or _as_written_now(known.get("detail", ""))
        table = f" for onnxruntime {entry['onnxruntime']}" if entry.get("onnxruntime") else ""
        outcome.contradicts = (f"the manifest predicted {known['status']} ({said}){table}; the DML EP here: "
                               f"{outcome.status}")
    return outcome


def _judge(backend: CaseRunner, model: onnx.ModelProto, data_sets: "list[dict[str, np.ndarray]]",
           expected: "list[list[np.ndarray]]", known: "dict | None",
           dml_placement: "dict[str, str] | None", path: "str | None") -> Outcome:
    names = [o.name for o in model.graph.output]
    outputs, error, notes, partial = backend.run(path or model, data_sets)
    if outputs is None:
        missing = _no_kernel(error)
        if missing is not None or (known and known["status"] == "unsupported"):
            operator = missing.failure.operator if missing is not None and missing.failure is not None else ""
            return Outcome("unsupported", str(error), notes, f"no kernel for {operator}" if operator else "")
        return Outcome("fail", str(error), notes)
    outcome = Outcome("pass", "", notes)
    dml = backend.deviation_key == DML_PROVIDER
    for index, (got, want) in enumerate(zip(outputs, expected)):
        diff = (dml and _dml_only(model, names, got, backend.assignment)) or _compare(want, got, names)
        if diff:
            detail = f"test_data_set_{index}: {diff}"
            if known and known["status"] == "deviation" and _as_written_now(known["detail"]) == detail:
                named = known.get("named")
                outcome = Outcome("deviation", f"{named}: {detail}" if named else detail, notes)
                break
            return Outcome("fail", detail, notes)
    if backend.deviation_key == DML_PROVIDER and dml_placement and backend.assignment is not None:
        differences = placement_differences(dml_placement, backend.assignment)
        if differences:
            return Outcome("fail", "placement differs from the prediction: " + "; ".join(differences), notes)
    if outcome.status == "pass" and partial:
        return Outcome("partial", partial, notes)
    return outcome


def placement_differences(predicted: "dict[str, str]", ran: "dict[str, str]") -> "list[str]":
    """Nodes onnxruntime ran on another provider than predicted (a node the session no longer has,
    folded or fused by its optimisations, is not compared)."""
    return [f"{node} predicted on {want}, ran on {ran[node]}" for node, want in predicted.items()
            if want in (DML_PROVIDER, CPU_PROVIDER) and node in ran and ran[node] != want]


def probe_providers() -> "list[str]":
    import onnxruntime as ort
    return [p for p in ort.get_available_providers() if p not in _NOT_PROBED]


def export(directory: str, feature_level: str = "5_1", seeds: int = 2, ort_version: "str | None" = None) -> "dict":
    """Write the suite; returns the manifest. The same arguments write the same bytes. The DML EP
    predictions model the registration table of `ort_version` (--ort-version; by default the
    installed DML EP's: registry.choose_table), which the manifest names (dml_ep_table). The suite is
    written whole in a temporary folder and moved into place (staging.py): a failure leaves nothing."""
    if seeds < 1:
        raise DmlLowerError(f"--seeds must be at least 1, got {seeds}")
    table = choose_table(ort_version)
    from onnx_dml_lowering.ir import parse_level
    level = parse_level(feature_level).name
    if not directory:
        raise DmlLowerError("conformance directory '': cannot write there: an empty path names no folder (a "
                            "variable that was never set?)")
    if directory == "-":            # standard output to many tools: never a folder named '-' made in silence
        raise DmlLowerError("conformance directory '-': cannot write there: '-' stands for no stream here (the suite "
                            "is a folder of files): for a folder named '-' give its full path")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise DmlLowerError(f"conformance directory {directory!r} is not a folder (a file, device, FIFO or socket)")
    check_target(directory)         # a missing parent folder: refused, never made
    if os.path.isdir(directory) and not os.path.lexists(os.path.join(directory, MANIFEST)) and \
            any(not is_staging(entry) for entry in os.listdir(directory)):     # a killed export's folder: ignored
        raise DmlLowerError(f"conformance directory {directory!r} is not empty and holds no {MANIFEST}")
    if os.path.lexists(os.path.join(directory, MANIFEST)):
        _exported_cases(os.path.join(directory, MANIFEST))      # another tool's manifest: refused, nothing touched
    with staged_suite(directory, _remove_earlier_export) as build:
        return _export_to(build, level, table, seeds)


def _export_to(directory: str, level: str, table: TableChoice, seeds: int) -> dict:
    """The suite written in `directory` (export's temporary folder); its manifest."""
    import onnxruntime as ort
    cases = all_cases(seeds)
    probes = [CaseRunner(provider_backend(name)) for name in probe_providers()]
    manifest: dict = {"feature_level": level, "seeds": seeds, "opset": {c.name: c.model.opset_import[0].version for c in cases},
                      "cases": {}, "providers": {}, "dml_ep_table": table.to_json()}
    for backend in probes:
        manifest["providers"][backend.deviation_key] = {                # a probe's is its provider's name
            "onnxruntime": ort.__version__, "verified": "each case run at export", "cases": {}}
    if DML_PROVIDER not in manifest["providers"]:
        manifest["providers"][DML_PROVIDER] = {
            "onnxruntime": table.version, "cases": {},
            "verified": ("predicted, not run: the DML EP's placement from its registration table and its "
                         "deviations from its source (DML_EP_PLACEMENT.md); conformance run on Windows checks both")}
    for case in cases:
        _write_case(directory, case, (level, table), manifest, probes)
    write_text(os.path.join(directory, "README.txt"), "the conformance README",
               README.format(level=level, count=len(cases), seeds=seeds, manifest=MANIFEST, table=table.describe()))
    write_text(os.path.join(directory, MANIFEST), "the conformance manifest",
               json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def _remove_earlier_export(directory: str) -> None:
    """An earlier export in `directory` goes first: a case or data set this export does not write
    would otherwise be run as if it were part of it. Only an export of this tool's is removed, and
    only what it wrote: the cases its manifest lists (each case's model.onnx and data sets' .pb
    files; a folder left empty goes too), its README.txt and the manifest. A manifest.json of
    anything else (a model zoo's, a web app's) is refused, and no file is touched."""
    if not os.path.isdir(directory):
        return
    path = os.path.join(directory, MANIFEST)
    if not os.path.lexists(path):      # an empty folder (one holding anything else was refused)
        return
    cases = _exported_cases(path)
    for name in cases:
        _remove_case(os.path.join(directory, name))
    for name in (MANIFEST, "README.txt"):
        path = os.path.join(directory, name)
        if os.path.islink(path) or os.path.isfile(path):     # a link itself: the new ones land in the folder
            os.unlink(path)


def _exported_cases(path: str) -> "list[str]":
    """The case folders the conformance manifest at `path` lists; DmlLowerError when the file is not
    one (discovery.not_a_manifest)."""
    refused = (f"conformance directory '{display(os.path.dirname(path))}' holds a {MANIFEST} that is not a "
               "conformance manifest of dml-lower")
    try:
        manifest = json.loads(read_regular_file(Path(path), f"conformance manifest {path!r}"))
    except ValueError:
        raise DmlLowerError(f"{refused} (not JSON): export into an empty folder") from None
    why = not_a_manifest(manifest)
    if why is not None:
        raise DmlLowerError(f"{refused} ({why}): nothing there is removed or replaced; export into an empty folder")
    return list(manifest["cases"])


def _remove_case(folder: str) -> None:
    """The files an export wrote in one case folder, then the folders they leave empty. A link at
    any of those names goes itself (never what it points to): left, the new export's files would
    be written through it, outside the folder."""
    if os.path.islink(folder):
        os.unlink(folder)
        return
    if not os.path.isdir(folder):
        return
    written = [os.path.join(folder, "model.onnx")]
    sets = [os.path.join(folder, d) for d in sorted(os.listdir(folder)) if d.startswith("test_data_set_")]
    for data in sets:
        if os.path.islink(data):
            written.append(data)
        elif os.path.isdir(data):
            written += [os.path.join(data, f) for f in os.listdir(data)
                        if f.endswith(".pb") and f.startswith(("input_", "output_"))]
    for file in written:
        if os.path.islink(file) or os.path.isfile(file):
            os.unlink(file)
    for data in sets + [folder]:
        if os.path.isdir(data) and not os.path.islink(data) and not os.listdir(data):
            os.rmdir(data)


def _write_case(directory: str, case: Case, at: "tuple[str, TableChoice]", manifest: dict,
                probes: "list[CaseRunner]") -> None:
    """The case's folder and its manifest entries, `at` a feature level and a DML EP table."""
    level, table = at
    folder = os.path.join(directory, case.name)
    os.makedirs(folder, exist_ok=True)
    write_bytes(os.path.join(folder, "model.onnx"), "a conformance model", case.model.SerializeToString(deterministic=True))
    inputs = [i.name for i in case.model.graph.input]
    outputs = [o.name for o in case.model.graph.output]
    expected = []
    for n, feeds in enumerate(case.data_sets):
        data = os.path.join(folder, f"test_data_set_{n}")
        os.makedirs(data, exist_ok=True)
        results = _reference(case.model, feeds)
        expected.append(results)
        for k, name in enumerate(inputs):
            _write_tensor(os.path.join(data, f"input_{k}.pb"), feeds[name], name)
        for k, (name, value) in enumerate(zip(outputs, results)):
            _write_tensor(os.path.join(data, f"output_{k}.pb"), value, name)
    compiled = compile_model(case.model, feature_level=level)
    manifest["cases"][case.name] = {
        "what": case.what,
        "placement": [f"{', '.join(p.onnx_nodes)}: {p.status} by {p.rule or '-'}"
                      + (f" -> {' + '.join(p.dml_operators)}" if p.dml_operators else "")
                      + (f" ({p.reason})" if p.reason else "") for p in compiled.placement]}
    _predict_dml(case, expected, manifest, table.version, probed=any(b.deviation_key == DML_PROVIDER for b in probes))
    for backend in probes:
        outcome = judge(backend, case.name, case.model, case.data_sets, expected, None)
        entry = manifest["providers"][backend.deviation_key]["cases"]
        if outcome.status == "fail":                  # seen here: listed as this provider's deviation
            entry[case.name] = {"status": "deviation", "detail": outcome.detail}
        elif outcome.status == "unsupported":
            entry[case.name] = {"status": "unsupported", "detail": outcome.detail}
        if outcome.fallbacks:
            entry.setdefault(case.name, {"status": "pass", "detail": ""})["placement"] = outcome.fallbacks


def _predict_dml(case: Case, expected: list, manifest: dict, version: str, probed: bool) -> None:
    """The case's placement expectation on the DML EP (every node's provider, as onnxruntime
    `version`'s registration table places it) and, where the DML EP is not here to be run, the
    deviation or missing kernel its source predicts."""
    placement = predict_placement(case.model, None, ort_version=version)
    providers = {n["node"]: n["provider"] for n in placement["nodes"] if n["provider"] != REMOVED}
    manifest["cases"][case.name]["dml_ep_placement"] = providers
    if probed:
        return
    entry = manifest["providers"][DML_PROVIDER]["cases"]
    missing = [f"{node} ({n['op_type']}): {n['reason']}" for n in placement["nodes"]
               for node in [n["node"]] if n["provider"] == NONE]
    if missing:
        entry[case.name] = {"status": "unsupported", "detail": f"predicted: no kernel for {missing[0]}"}
        return
    failing = [f for f in failing_nodes(case.model) if providers.get(f.node) == DML_PROVIDER]
    if failing:     # the DML EP claims the node and fails on it: the run gives no output
        entry[case.name] = {"status": "unsupported", "detail": f"predicted: {failing[0].describe()}",
                            "named": FAILURES[failing[0].key]}
        return
    fused = fused_output_risks(case.model, providers)
    if fused:       # every set: the output comes back empty whatever the feeds
        entry[case.name] = {"status": "deviation", "detail": f"test_data_set_0: {fused[0].short()}",
                            "named": NAMES[FUSED_OUTPUT_EMPTY]}
        return
    names = [o.name for o in case.model.graph.output]
    for index, (feeds, want) in enumerate(zip(case.data_sets, expected)):
        # a node left to the CPU EP gets the CPU EP's answer (a scalar NonZero deviates there too)
        outputs, fired = dml_outputs(case.model, feeds, providers)
        got: "list[np.ndarray | None]" = [outputs[n] for n in names]
        unread = _unread(case.model, names, got, providers)
        diff = unread or _compare(want, got, names)
        if diff:
            entry[case.name] = {"status": "deviation", "detail": f"test_data_set_{index}: {diff}",
                                "named": NAMES["empty_output_readback"] if unread else describe(fired)}
            return


def load(directory: str, pattern: "str | None" = None, memory_limit: "int | str | None" = None
         ) -> "tuple[dict, list[tuple[str, onnx.ModelProto, list, list]]]":
    """(manifest or {}, [(case, model, data sets, expected outputs)]) from a suite folder;
    `pattern`: only the cases whose folder name matches this fnmatch glob; `memory_limit`: what all
    their test data may take (data_sets.read_case reads and checks it; default: runtime.memory's).
    Which folders are cases, and which cannot be run (one line naming them): discovery.py."""
    budget = Budget.of(memory_limit)
    if not stat.S_ISDIR(named_stat(directory, f"conformance directory {directory!r}").st_mode):
        raise DmlLowerError(f"conformance directory {directory!r} is not a folder (a file, device, FIFO or "
                            "socket): give the folder conformance export wrote")
    manifest = read_manifest(directory)
    cases = []
    for name in case_names(directory, list(manifest.get("cases", {})), pattern):
        folder = os.path.join(directory, name)
        model = load_model(os.path.join(folder, MODEL))
        sets, expected = read_case(folder, model, budget)
        if not sets:        # nothing to compare is no pass
            raise DmlLowerError(f"conformance case '{display(name)}' in '{display(directory)}' holds no "
                                "test_data_set_0: nothing to compare")
        cases.append((name, model, sets, expected))
    if not cases and pattern is not None:
        raise DmlLowerError(f"--filter {pattern!r} matches no case of conformance directory {directory!r}")
    if not cases:
        raise DmlLowerError(f"conformance directory {directory!r} holds no case (DIR/<case>/model.onnx)")
    return manifest, cases


def run(directory: str, backends: "Sequence[BackendLike]", options: "BackendOptions | None" = None,
        pattern: "str | None" = None) -> "dict[str, dict[str, list[tuple[str, Outcome]]]]":
    """{backend: {status: [(case, outcome)]}} for every case of the folder (those matching the
    fnmatch glob `pattern`, if given); `options` are the backends' (runtime.backends)."""
    manifest, cases = load(directory, pattern, (options or BackendOptions()).memory_limit)
    level = manifest.get("feature_level", "5_1")
    runners = [CaseRunner(b, level, options) for b in backends]
    results: dict = {}
    for backend in runners:
        by_status: dict = {s: [] for s in STATUSES}
        for name, model, sets, expected in cases:
            outcome = judge(backend, name, model, sets, expected, manifest.get("providers"),
                            manifest.get("cases", {}).get(name, {}).get("dml_ep_placement"),
                            os.path.join(directory, name, "model.onnx"))
            by_status[outcome.status].append((name, outcome))
        results[backend.spec] = by_status
    return results


def format_results(results: dict) -> "list[str]":
    lines = []
    for backend, by_status in results.items():
        counts = ", ".join(f"{len(by_status[s])} {s}" for s in STATUSES)
        lines.append(f"[{backend}] {counts}")
        for status in ("fail", "partial", "deviation", "unsupported"):
            for name, outcome in by_status[status]:
                lines.append(f"  {status.upper()} {name}: {outcome.summary or outcome.detail}")
        for status in STATUSES:
            for name, outcome in by_status[status]:
                for note in outcome.fallbacks:
                    lines.append(f"  PLACEMENT {name}: {note}")
                if outcome.contradicts:
                    lines.append(f"  PREDICTION {name}: {outcome.contradicts}")
    return lines
