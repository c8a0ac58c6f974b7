"""Google's Model Explorer: node-data overlays (`--model-explorer OUT.json` on inspect, compile and
check) and the model opened with them (`dml-lower view`). Both need the `[view]` extra
(ai-edge-model-explorer, model-explorer-onnx); without it, one line says how to install it.

The files are built with Model Explorer's own node-data builder (model_explorer.node_data_builder)
and read back with the loader its server uses for its dataclasses (dacite). Node data is keyed by
Model Explorer's node ids, which are what model-explorer-onnx's adapter makes of the file: its own
names for unnamed or repeated nodes, If bodies folded into the parent graph under
`<If>/<branch>/`. So the ids are taken from the adapter's own conversion of the file, matched to
this project's node identities through the values each node produces (unique in a valid model);
a node the adapter does not draw (a body below the first level) gets no entry, and says so.

Values are numbers (the builder's type): each data set's name says what its codes mean."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.lowering.onnx_graphs import graph_attributes, is_standard, prefixed_graphs
from onnx_dml_lowering.runtime.input_files import regular_file

if TYPE_CHECKING:
    from model_explorer.node_data_builder import ModelNodeData

VIEW_EXTRA = "pip install onnx-dml-lowering[view]"
GREEN, ORANGE, RED, BLUE, GREY, LIGHT_GREEN = "#2e9d5b", "#e08a1e", "#c62828", "#2f6fd0", "#9e9e9e", "#9ccc65"
LARGEST = 1.7e308          # the last threshold: every finite value at or under it is coloured


def require_view(what: str) -> None:
    """One line naming the extra when Model Explorer or its ONNX adapter is not installed."""
    try:
        import model_explorer.node_data_builder  # noqa: F401
        import model_explorer_onnx.main  # noqa: F401
    except ImportError:
        raise DmlLowerError(f"{what} needs Model Explorer and its ONNX adapter, which are not installed: "
                            f"{VIEW_EXTRA}") from None


@dataclass
class Overlay:
    """One node-data set: a value per node identity, and the colour of each range of values."""
    key: str                                   # the file's suffix: placement, lowering, error-cpu
    title: str                                 # the set's name in Model Explorer: what the values mean
    values: "dict[str, float]" = field(default_factory=dict)
    thresholds: "list[tuple[float, str]]" = field(default_factory=list)
    note: str = ""                             # printed when the file is written


def overlay_paths(out: str, overlays: "list[Overlay]") -> "list[str]":
    """The first set in OUT.json itself, each other beside it as OUT.<key>.json (the writer's
    sibling: OUT itself, one after another, where OUT is a device, a FIFO or a descriptor)."""
    from onnx_dml_lowering.runtime.output_target import sibling
    base = Path(out)
    return [out] + [sibling(out, str(base.with_name(f"{base.stem}.{o.key}{base.suffix or '.json'}")))
                    for o in overlays[1:]]


def _tags(node: Any) -> "list[str]":
    return [a.value for m in node.outputsMetadata for a in m.attrs if a.key == "__tensor_tag" and a.value != "None"]


def adapter_node_ids(model_path: str) -> "tuple[dict[str, tuple[str, str]], set[str]]":
    """This project's node identity -> (graph id, node id) as model-explorer-onnx shows the file;
    and every node identity the file holds (matched or not)."""
    from model_explorer_onnx.main import ONNXAdapter

    from .frontend import load_stored
    from .node_ids import identify_nodes
    try:
        graphs = ONNXAdapter().convert(str(model_path), {})["graphs"]
    except Exception as exc:  # the adapter's own failure, in one line
        raise DmlLowerError(f"{model_path}: Model Explorer's ONNX adapter cannot read it: "
                            f"{display(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}") from None
    by_tag: "dict[str, tuple[str, str]]" = {}
    for graph in graphs:
        for node in graph.nodes:
            if node.label not in ("Input", "Output", "Initializer", "InitializedInput", "(Phi)", "(Capture)"):
                for tag in _tags(node):
                    by_tag.setdefault(tag, (graph.id, node.id))
    model = load_stored(model_path)
    identify_nodes(model)
    ids: "dict[str, tuple[str, str]]" = {}
    walked: "set[str]" = set()
    # the prefix the adapter gives the values of an If body it folds into its parent, by body path
    embedded: "dict[str, str]" = {}
    for prefix, graph in prefixed_graphs(model.graph):
        for node in graph.node:
            _match(node, prefix, embedded.get(prefix, ""), by_tag, ids, walked, embedded)
    return ids, walked


def _match(node: onnx.NodeProto, prefix: str, embedded: str, by_tag: "dict[str, tuple[str, str]]",
           ids: "dict[str, tuple[str, str]]", walked: "set[str]", bodies: "dict[str, str]") -> None:
    """The node's Model Explorer id into `ids`; into `bodies`, its If bodies' `embedded` prefix."""
    path = prefix + node.name
    walked.add(path)
    if_node = node.op_type == "If" and is_standard(node)
    # the adapter gives an If's outputs to a (Phi) node after its folded branches and renames its own '<out>_if_'
    suffix = "_if_" if if_node else ""
    hit = next((by_tag[embedded + o + suffix] for o in node.output if o and embedded + o + suffix in by_tag), None)
    if hit:
        ids[path] = hit
    for attribute, _ in graph_attributes(node):
        bodies[f"{path}/{attribute}/"] = f"{hit[1]}/{attribute}/" if hit and if_node else ""


def node_data(overlay: Overlay, ids: "dict[str, tuple[str, str]]") -> "ModelNodeData":
    """The set in Model Explorer's own classes: one GraphNodeData per graph that has values."""
    from model_explorer.node_data_builder import GraphNodeData, ModelNodeData, NodeDataResult, ThresholdItem
    results: "dict[str, dict[str, NodeDataResult]]" = {}
    for path, value in overlay.values.items():
        if path in ids and math.isfinite(value):
            graph_id, node_id = ids[path]
            results.setdefault(graph_id, {})[node_id] = NodeDataResult(value=value)
    thresholds = [ThresholdItem(value=v, bgColor=c) for v, c in overlay.thresholds]
    return ModelNodeData(graphsData={g: GraphNodeData(results=r, name=overlay.title, thresholds=thresholds)
                                     for g, r in results.items()})


def load_node_data(path: str) -> "dict[str, Any]":
    """A node-data file read as Model Explorer reads its dataclasses (dacite, strict): a model's
    sets by graph id, or one graph's set. One line naming the file when it is not one."""
    import dacite
    from model_explorer.node_data_builder import GraphNodeData, ModelNodeData
    regular_file(path, f"--overlay {path!r}")     # a FIFO would block the read; an input no output replaces
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DmlLowerError(f"--overlay {path!r}: cannot read it as JSON: {display(exc)}") from None
    strict = dacite.Config(strict=True)
    try:
        if isinstance(data, dict) and "results" in data:
            return {"": dacite.from_dict(GraphNodeData, data, config=strict)}
        return dacite.from_dict(ModelNodeData, {"graphsData": data}, config=strict).graphsData
    except (dacite.DaciteError, TypeError, ValueError) as exc:
        raise DmlLowerError(f"--overlay {path!r}: not Model Explorer node data: {display(exc)}") from None


def write_overlays(model_path: str, out: str, overlays: "list[Overlay]") -> "list[str]":
    """Every set through the project's output writer; returns the lines to print."""
    from .output_files import write_text
    ids, in_file = adapter_node_ids(model_path)
    lines = []
    for overlay, path in zip(overlays, overlay_paths(out, overlays)):
        data = node_data(overlay, ids)
        shown = sum(len(g.results) for g in data.graphsData.values())
        write_text(path, "the Model Explorer node data", data.to_json_string(indent=1), lead=None)
        created = sum(1 for p in overlay.values if p not in in_file)
        undrawn = sum(1 for p in overlay.values if p in in_file and p not in ids)
        unbounded = sum(1 for v in overlay.values.values() if not math.isfinite(v))
        extra = f"; {created} not in the file (onnxruntime's level-1 optimisations made them)" if created else ""
        extra += f"; {undrawn} in bodies Model Explorer does not draw" if undrawn else ""
        extra += f"; {unbounded} non-finite not shown (node data is numbers)" if unbounded else ""
        lines.append(f"wrote {display(path)} (Model Explorer node data: {overlay.title}; {shown} nodes{extra})"
                     + (f" {overlay.note}" if overlay.note else ""))
    return lines


def free_port() -> int:
    """A port nothing listens on at 127.0.0.1 now (the server binds it a moment later)."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(model: str, overlays: "list[str]", open_browser: bool, port: int = 0) -> None:
    """Model Explorer's own local server (127.0.0.1 only) on `model`, with each overlay loaded;
    it runs until Ctrl-C. The model and every overlay are read first, so a bad one is one line."""
    require_view("dml-lower view")
    from model_explorer import config as explorer_config
    from model_explorer import server

    from .frontend import load_stored
    load_stored(model)                          # a file onnx reads, or one line saying why not
    for path in overlays:
        load_node_data(path)
    settings = explorer_config().add_model_from_path(str(Path(model).resolve()))
    for path in overlays:
        settings.add_node_data_from_path(str(Path(path).resolve()))
    # 8080 would make Model Explorer look for a free port itself; any other it takes as given
    server.start(host="127.0.0.1", port=port or free_port(), config=settings, extensions=["model_explorer_onnx"],
                 no_open_in_browser=not open_browser)
