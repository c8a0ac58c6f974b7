"""`inspect --ep dml --verify`: the predicted placement checked node by node against onnxruntime.dll's
real DirectML EP (ort_host; under Wine off Windows).

So that a disagreement is a prediction error and not a version gap, the real onnxruntime.dll writes
the level-1 optimised model (ORT_ENABLE_BASIC, CPU EP) the prediction starts from; its nodes are
named by identity and that very graph is then given to the DML EP with the optimisations off, so
both sides partition the same nodes under the same names. The DML session is run once with seeded
random feeds (as check would) so that a node the EP claims and cannot run shows too."""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field

import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.printer import name_list
from onnx_dml_lowering.lowering.onnx_graphs import node_paths, prefixed_graphs
from onnx_dml_lowering.runtime.dml_deviations import name_failure
from onnx_dml_lowering.runtime.directml.ort_dml import HostOptions, create, shared_host
from onnx_dml_lowering.runtime.directml.ort_host import OrtHost, OrtHostError, SessionRequest
from onnx_dml_lowering.runtime.feeds import random_feeds
from onnx_dml_lowering.runtime.ort_messages import FailureKind, parse_provider_failure

from .level1 import Level1
from .placement import CPU, DML, NONE, UNKNOWABLE, placement_for_file
from .registry import choose_table

# onnxruntime's own copy nodes: predicted apart (copies), not nodes of the model
_INSERTED = ("MemcpyToHost", "MemcpyFromHost")


@dataclass
class _Workspace:
    """The temporary folder the real onnxruntime writes the level-1 model (and its weights) into."""
    folder: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="dml-lower-verify-"))

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _host_level1(host: OrtHost, path: str, work: _Workspace) -> Level1:
    """Level 1 by onnxruntime.dll itself: a CPU-EP session at ORT_ENABLE_BASIC over the file (its
    external data from its own folder) writing the optimised model, weights apart."""
    def optimise(model: onnx.ModelProto, model_dir: "str | None") -> "tuple[onnx.ModelProto | None, str]":
        out = work.path("level1.onnx")
        config = [("session.optimized_model_external_initializers_file_name", "weights.bin"),
                  ("session.optimized_model_external_initializers_min_size_in_bytes", "1024")]
        try:
            host.create_session(os.path.abspath(path), SessionRequest("basic", None, config, out, dml=False)).release()
        except OrtHostError as exc:
            if not os.path.isfile(out):
                return None, " ".join(exc.message.split())
        written = onnx.load(out, load_external_data=False)
        _drop_repeated_initializers(written)
        return written, ""
    return Level1(optimise, f"onnxruntime.dll {host.version()} installed here (the DML EP's own, in ort_host)")


def _drop_repeated_initializers(model: onnx.ModelProto) -> int:
    """onnxruntime.dll 1.24.4 writes some If-body initializers twice, byte for byte the same (seen
    in SSDlite's and Mask R-CNN's level-1 models), and then refuses the file it wrote ("initializer
    name is not unique"): the second copy goes, so the very graph predicted on is the one the
    real EP partitions. Copies that differ are kept (the load then fails and verify says so)."""
    dropped = 0
    for _, graph in prefixed_graphs(model.graph):
        first: "dict[str, bytes]" = {}
        keep = []
        for init in graph.initializer:
            data = init.SerializeToString()
            if first.get(init.name) == data:
                dropped += 1
                continue
            first.setdefault(init.name, data)
            keep.append(init)
        if len(keep) != len(graph.initializer):
            del graph.initializer[:]
            graph.initializer.extend(keep)
    return dropped


def verify_placement(path: str, device_lacks: "tuple[str, ...]", raw: onnx.ModelProto, ort_version: "str | None" = None,
                     chosen: str = "") -> "tuple[dict, onnx.ModelProto]":
    """The ep_placement report with `verified` {onnxruntime, agree, differ}, and the graph predicted on
    (with the registration table of `ort_version`; None: as the commands choose it)."""
    if ort_version is None:
        table = choose_table(None)
        ort_version, chosen = table.version, chosen or table.why
    host = shared_host()
    work = _Workspace()
    try:
        report, graph = placement_for_file(path, device_lacks, raw, _host_level1(host, path, work), ort_version,
                                           chosen)
        if host.version() != ort_version:
            report["warnings"].append(f"verification: the prediction models onnxruntime {ort_version}'s registration "
                                      f"table and the real DML EP is onnxruntime.dll {host.version()}'s: a difference "
                                      "may be the versions' (--ort-version)")
        identified = work.path("identified.onnx")      # beside weights.bin, which it refers to
        onnx.save(_named_by_path(graph), identified)
        actual, failure = _real_placement(host, identified, graph, "disable")
        if failure.startswith(_LOAD_FAILURE):
            # onnxruntime cannot read back the level-1 model it wrote (seen: a subgraph initializer
            # written twice): the real EP then partitions the file itself at level 1, names as they come
            report["warnings"].append(f"verification: the level-1 model onnxruntime.dll wrote does not load back "
                                      f"({failure.removeprefix(_LOAD_FAILURE)[:200]}); the real DML EP partitioned "
                                      "the file itself at level 1 (nodes it created are compared by the names it gave)")
            actual, failure = _real_placement(host, os.path.abspath(path), graph, "basic")
    finally:
        work.close()
    report["warnings"] = [_verified_instead(failure) if w == UNKNOWABLE else w for w in report["warnings"]]
    report["verified"] = _compare(report, actual, host.version())
    report["verified"]["failure"] = _failure(failure, graph, report["nodes"])
    if failure:
        report["warnings"].append(f"verification: the real DML EP failed: {failure}")
    return report, graph


def _verified_instead(failure: str) -> str:
    """The prediction's "not knowable" warning once the real EP has run: the DirectML.dll loaded,
    its kernels created (or not) and the device's type support are now this machine's, which is
    not every user's GPU."""
    device = "this machine's GPU" if os.name == "nt" else "Mesa's lavapipe under Wine, on the CPU"
    settled = ("its session was created and run" if not failure else
               "its session creation failed, below" if failure.startswith("session creation") else
               "its session was created; its first run failed, below")
    return (f"verified on {device}: the DirectML.dll loaded, kernel creation and the device's data-type support "
            f"are that device's ({settled}); another GPU's type support may differ, and session options that "
            "change constant folding (free dimension overrides) are not modelled")


def _failure(failure: str, graph: onnx.ModelProto, nodes: "list[dict]") -> "dict | None":
    """The real EP's failure beside the prediction (its `nodes` entries): where (session creation
    or the first run), whether the prediction named it (a FAILURES deviation of a node it warned
    about, or a node it put on no provider) and `said`, its words for it; None when the real EP ran."""
    if not failure:
        return None
    stage = "session creation" if failure.startswith("session creation") else "first run"
    deviation = name_failure(graph, failure, at_run=stage == "first run")
    said = deviation or (_unplaced(failure, nodes) if stage == "session creation" else None)
    return {"stage": stage, "predicted": said is not None, "deviation": deviation, "said": said}


# onnxruntime's wordings for a node no provider took (its kernel lookup, its copy pass)
_UNPLACED = (FailureKind.NOT_PLACED, FailureKind.NO_KERNEL, FailureKind.NOT_IMPLEMENTED)


def _unplaced(failure: str, nodes: "list[dict]") -> "str | None":
    """What the prediction said of a session that failed for want of a provider: the node the real
    EP's message names, predicted on no provider; where the message names no node of the report
    (none at all, or one onnxruntime made), the nodes it put on none. None: the message is no such
    failure, names a node the prediction placed, or the prediction placed every node."""
    found = parse_provider_failure(failure)
    if found is None or found.kind not in _UNPLACED:
        return None
    unplaced = [n for n in nodes if n["provider"] == NONE]
    if found.node in {n["node"] for n in nodes}:
        unplaced = [n for n in unplaced if n["node"] == found.node]
    if not unplaced:
        return None
    names = name_list([f"{n['node']} ({n['op_type']}{_since(n)})" for n in unplaced], 4)
    return f"{names} {'has' if len(unplaced) == 1 else 'have'} no provider, so onnxruntime cannot create the session"


def _since(entry: dict) -> str:
    return f"-{entry['since_version']}" if entry.get("since_version") is not None else ""


_LOAD_FAILURE = "session creation: Load model from "


def _named_by_path(graph: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose every node is named by its path, as the report names it (a body node
    `loop/body/add`): onnxruntime's placement log names a body's nodes by their own names, which
    two bodies may share, so the log then names each node once and as the report does."""
    named = onnx.ModelProto()
    named.CopyFrom(graph)
    for path, node in list(node_paths(named.graph)):
        node.name = path
    return named



def _real_placement(host: OrtHost, model_path: str, graph: onnx.ModelProto, level: str
                    ) -> "tuple[dict[str, str], str]":
    """({node: provider} of the real DML EP over the model at `model_path`, its failure or '')."""
    try:
        session = create(host, model_path, HostOptions(optimization_level=level), graph)
    except DmlLowerError as exc:
        return {}, f"session creation: {exc}"
    actual = session.node_providers() or {}
    try:
        inputs = [vi for vi in graph.graph.input if vi.name not in {t.name for t in graph.graph.initializer}]
        session.run(None, random_feeds(inputs, seed=0))
    except DmlLowerError as exc:
        return actual, f"the first run (seeded random feeds): {exc}"
    finally:
        session.session.release()
    return actual, ""


def _compare(report: dict, actual: "dict[str, str]", version: str) -> dict:
    """agree / differ over the nodes both sides partition (removed nodes were never partitioned);
    nothing is compared when the real EP named no placement (its session failed: a warning says so)."""
    agree, differ = 0, []
    if not actual:
        return {"onnxruntime": version, "agree": 0, "differ": []}
    for entry in report["nodes"]:
        if entry["provider"] not in (DML, CPU, "none"):
            continue
        real = actual.get(entry["node"], "absent")
        if real == entry["provider"]:
            agree += 1
        else:
            differ.append({"node": entry["node"], "op_type": entry["op_type"], "predicted": entry["provider"],
                           "actual": real})
    return {"onnxruntime": version, "agree": agree, "differ": differ}


def format_verified(report: dict) -> "list[str]":
    """The lines inspect prints for `verified`."""
    v = report["verified"]
    reasons = {n["node"]: n.get("reason", "") for n in report["nodes"]}
    total = v["agree"] + len(v["differ"])
    failed = _failure_clause(v.get("failure"))
    if total == 0:
        return [f"verified on the real DML EP (onnxruntime.dll {v['onnxruntime']}): nothing compared, its session "
                f"named no placement{failed or ' (the verification warning above says why)'}"]
    # without level 1 (its CPU-only pass refused the model) the EP partitioned the model as stored too
    level1 = "on the model as stored, level 1 refused (above)" if report.get("assumptions", {}).get("level1_refused") \
        else "level 1 by the same onnxruntime"
    lines = [f"verified on the real DML EP (onnxruntime.dll {v['onnxruntime']}, {level1}): "
             f"{v['agree']} of {total} nodes agree on placement{failed}"]
    for d in v["differ"]:
        why = reasons.get(d["node"]) or "its kernel and types match"
        actual = "absent from its partitioned graph" if d["actual"] == "absent" else f"placed on {d['actual']}"
        lines.append(f"  differs: {d['node']} ({d['op_type']}): predicted {d['predicted']} ({why}); "
                     f"onnxruntime {actual}")
    return lines


def _failure_clause(failure: "dict | None") -> str:
    """'; its first run failed as the prediction said: ...' or '... which the prediction did NOT name'
    beside the verified line."""
    if not failure:
        return ""
    if failure["predicted"]:
        return f"; its {failure['stage']} failed as the prediction said: {failure['said']}"
    return (f"; its {failure['stage']} failed, which the prediction did NOT name (the verification warning "
            "above says how)")
