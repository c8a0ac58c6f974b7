"""Which provider ran each node of a session (onnxruntime's graph assignment info, or ort_host's
log), and the findings on the operators this project owns that ran elsewhere or were folded away."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onnx_dml_lowering.ir.display import name_list
from onnx_dml_lowering.lowering.onnx_graphs import node_reads
from onnx_dml_lowering.lowering.owned_ops import owned
from onnx_dml_lowering.runtime.ort.settings import RECORD_ASSIGNMENT_OPTION

if TYPE_CHECKING:
    import onnx


# session: an onnxruntime.InferenceSession (untyped), a WeightedSession or ort_host's DmlEpSession
def node_providers(session: Any) -> "dict[str, str] | None":
    """{node name: provider name} for every node onnxruntime kept after its optimizations,
    or None when this onnxruntime cannot report it (before 1.24, or recording was off)."""
    own = getattr(session, "node_providers", None)       # ort_host's session: from onnxruntime's log
    if callable(own):
        return own()
    get = getattr(session, "get_provider_graph_assignment_info", None)
    if get is None:
        return None
    try:
        if session.get_session_options().get_session_config_entry(RECORD_ASSIGNMENT_OPTION) != "1":
            return None
        subgraphs = get()
    except Exception:
        return None
    assignment = {}
    for sub in subgraphs:
        for index, node in enumerate(sub.get_nodes()):
            try:
                name = node.name
            except UnicodeDecodeError:      # a shipped file's name need not be UTF-8; onnxruntime keeps it
                name = f"<node #{index} of the {sub.ep_name} subgraph: its name is not UTF-8>"
            assignment[name] = sub.ep_name
    return assignment


@dataclass(frozen=True)
class PlacementFinding:
    node: str
    op_type: str
    provider: "str | None"          # None: absent from onnxruntime's optimized graph
    constant: bool = False          # its inputs depend on no graph input (constant folding can remove it)

    def describe(self, requested: str) -> str:
        return describe_findings([self], requested)[0]


def describe_findings(findings: "list[PlacementFinding]", requested: str) -> "list[str]":
    """One line per kind of finding (op type, where it ran or why it did not), its nodes listed
    through ir.printer.name_list: ninety fused nodes are one bounded line, not ninety."""
    groups: "dict[tuple, list[str]]" = {}
    for f in findings:
        groups.setdefault((f.op_type, f.provider, f.constant), []).append(f.node)
    lines = []
    for (op_type, provider, constant), nodes in groups.items():
        one = len(nodes) == 1
        what = f"{op_type} node{'' if one else 's'} {name_list(nodes, 4)}"
        if provider is None and constant:
            lines.append(f"{what}: removed by onnxruntime's constant folding (no provider ran {'it' if one else 'them'})")
        elif provider is None:
            lines.append(f"{what}: not in onnxruntime's optimized graph under {'its name' if one else 'their names'} "
                         f"(a graph optimization fused or replaced {'it' if one else 'them'}; no provider ran "
                         f"{'it as this node' if one else 'them as these nodes'})")
        else:
            lines.append(f"{what}: fell back to {provider} (requested {requested})")
    return lines


def _input_dependent(model: "onnx.ModelProto") -> "set[str]":
    """Values that depend on a graph input (so constant folding cannot compute them)."""
    inits = {i.name for i in model.graph.initializer}
    live = {i.name for i in model.graph.input if i.name not in inits}
    for node in model.graph.node:
        if any(r in live for r in node_reads(node)):
            live.update(o for o in node.output if o)
    return live


def placement_findings(model: "onnx.ModelProto", assignment: "dict[str, str]", requested: str) -> "list[PlacementFinding]":
    """The nodes of `model` whose operator this project owns (lowering.owned_ops) that ran on another
    provider than `requested`, or that are absent from the assignment (constant folding removed them)."""
    findings = []
    live = None
    for node in model.graph.node:
        if not owned(node.op_type, node.domain):
            continue
        ran_on = assignment.get(node.name)
        if ran_on is None or ran_on != requested:
            if live is None:
                live = _input_dependent(model)
            constant = not any(r in live for r in node.input if r)
            findings.append(PlacementFinding(node.name, node.op_type, ran_on, constant))
    return findings
