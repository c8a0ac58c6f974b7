"""dml-lower inspect: what a model holds and which of its anchors would lower at a level.

The summary (IR version, opsets, interface, initializer bytes, node counts) is read from the
file as it is, control-flow bodies included; what would lower is compile_model's own placement,
not a second derivation, so inspect and compile never disagree."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.ir.dtypes import onnx_type_name
from onnx_dml_lowering.lowering.onnx_graphs import is_standard, iter_nodes, node_paths, prefixed_graphs
from onnx_dml_lowering.lowering.owned_ops import owned
from onnx_dml_lowering.runtime.inline_weights import in_model_file
from onnx_dml_lowering.runtime.weights import data_bytes

from .compiled import CompiledModel, compile_model
from .frontend import load_stored
from .partition import Placement

# The owned operators are always listed, lowered or not; other idiom anchors (Equal, Less,
# Constant, ...) are listed when an idiom's pattern found them, as the placement does.


def _op_key(node: onnx.NodeProto) -> str:
    return node.op_type if is_standard(node) else f"{node.domain}:{node.op_type}"


def count_ops(graph: "onnx.GraphProto | onnx.FunctionProto", counts: "Counter | None" = None) -> Counter:
    """Nodes by op type (custom domains as DOMAIN:OP), every If / Loop / Scan body included."""
    counts = Counter() if counts is None else counts
    counts.update(_op_key(node) for node in iter_nodes(graph))
    return counts


def _value(vi: onnx.ValueInfoProto) -> dict:
    kind = vi.type.WhichOneof("value")
    if kind != "tensor_type":
        return {"name": vi.name, "type": kind or "unknown", "shape": None}
    tensor = vi.type.tensor_type
    shape = None
    if tensor.HasField("shape"):
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim]
    return {"name": vi.name, "type": onnx_type_name(tensor.elem_type) if tensor.elem_type else "unknown",
            "shape": shape}


def _tensor_bytes(tensor: onnx.TensorProto) -> int:
    if tensor.data_type == onnx.TensorProto.STRING:
        return sum(len(s) for s in tensor.string_data)
    return data_bytes(tensor) or 0


def initializer_bytes(model: onnx.ModelProto, file_name: str = "") -> dict:
    """Initializers (bodies' included) by where their data lives: in the file (`file_name`: large
    inline ones that parse_without_weights pointed at their bytes in it) or external."""
    out = {"inline": {"count": 0, "bytes": 0}, "external": {"count": 0, "bytes": 0}}
    for _, graph in prefixed_graphs(model.graph):
        for init in graph.initializer:
            where = "external" if (init.data_location == onnx.TensorProto.EXTERNAL
                                   and not in_model_file(init, file_name)) else "inline"
            out[where]["count"] += 1
            out[where]["bytes"] += _tensor_bytes(init)
    return out


def _shape_text(shape: "list | None") -> str:
    if shape is None:
        return "unknown rank"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def anchors(compiled: CompiledModel) -> "list[dict]":
    """Every placement entry (one per idiom anchor the partition found, lowered or declined) and
    every NonZero / EyeLike / Trilu node the placement does not anchor, with why."""
    nodes = dict(node_paths(compiled.model.graph))
    covered: "dict[str, tuple[str, Placement]]" = {}
    out = []
    for p in compiled.placement:
        anchor = p.onnx_nodes[0]
        for member in p.onnx_nodes[1:]:
            covered.setdefault(member, (anchor, p))
        node = nodes.get(anchor)
        op_type = _op_key(node) if node is not None else ("initializer" if p.initializer else "unknown")
        out.append({"node": anchor, "op_type": op_type, "rule": p.rule, "lowers": p.status == "lowered",
                    "reason": p.reason, "nodes": list(p.onnx_nodes), "dml_operators": list(p.dml_operators),
                    "note": p.note})
    listed = {a["node"] for a in out}
    for path, node in nodes.items():
        if path in listed or not owned(node.op_type, node.domain):
            continue
        if path in covered:
            anchor, p = covered[path]
            out.append({"node": path, "op_type": node.op_type, "rule": p.rule, "lowers": p.status == "lowered",
                        "reason": p.reason or f"part of the {p.rule} match anchored at {anchor}",
                        "nodes": [path], "dml_operators": [], "note": f"covered by the match anchored at {anchor}"})
        else:
            out.append({"node": path, "op_type": node.op_type, "rule": None, "lowers": False,
                        "reason": "no rule's pattern takes this node (left to ONNX)", "nodes": [path],
                        "dml_operators": [], "note": ""})
    return out


def inspect_model(path: str, feature_level: str = "5_1", ep: "str | None" = None,
                  device_lacks: "tuple[str, ...]" = ()) -> dict:
    """The inspect report as plain data (the JSON `dml-lower inspect --json` writes); with
    ep="dml" also the DML EP's predicted placement (ep/placement.py)."""
    return _inspect(path, feature_level, ep, device_lacks)[0]


def _inspect(path: str, feature_level: str, ep: "str | None", device_lacks: "tuple[str, ...]",
             verify: bool = False, table: "tuple[str, str] | None" = None) -> "tuple[dict, onnx.ModelProto | None]":
    """The report, and with ep="dml" the graph the placement was predicted on (for the picture)."""
    raw = _load_raw(path)
    if ep != "dml":         # nothing reads the file's proto after the report: the compile takes it over
        report, functions = _summary_first(path, raw, feature_level)
        compiled = compile_model(path, feature_level=feature_level, stored=raw, take_stored=True)
        del raw             # the compile's input, now unused: freed before the partition
        return _with_anchors(report, functions, compiled), None
    compiled = compile_model(path, feature_level=feature_level, stored=raw)
    report = _with_anchors(*_summary(path, raw), compiled)
    # the default table reads the installed DML EP's version (onnxruntime's import): only with --ep dml
    version, chosen = table if table is not None else _ort_version(None)
    if verify:
        from .ep.verify import verify_placement
        report["ep_placement"], graph = verify_placement(path, tuple(device_lacks), raw, version, chosen)
    else:
        from .ep.placement import placement_for_file
        report["ep_placement"], graph = placement_for_file(path, tuple(device_lacks), raw, None, version, chosen)
    return report, graph


def _summary(path: str, raw: onnx.ModelProto) -> "tuple[dict, dict | None]":
    """What the report reads of the file as stored: its head (up to the node counts), and the
    node counts of its functions (None without any)."""
    defaults = {i.name for i in raw.graph.initializer}
    inputs = [dict(_value(vi), default=vi.name in defaults) for vi in raw.graph.input]
    report = {
        "model": str(path),
        "ir_version": raw.ir_version,
        "producer": " ".join(p for p in (raw.producer_name, raw.producer_version) if p),
        "opsets": {o.domain or "ai.onnx": o.version for o in raw.opset_import},
        "inputs": inputs,
        "outputs": [_value(vo) for vo in raw.graph.output],
        "initializers": initializer_bytes(raw, Path(path).name),
        "op_counts": dict(sorted(count_ops(raw.graph).items())),
    }
    functions = {f"{f.domain}:{f.name}": dict(sorted(count_ops(f).items())) for f in raw.functions}
    return report, (functions or None)


def _summary_first(path: str, raw: onnx.ModelProto, feature_level: str) -> "tuple[dict, dict | None]":
    """_summary before the compile has checked the model: should it fail on a model the compile
    refuses, the compile's one line comes first, as it did when the summary followed it."""
    try:
        return _summary(path, raw)
    except Exception:
        compile_model(path, feature_level=feature_level, stored=raw)
        raise


def _with_anchors(report: dict, functions: "dict | None", compiled: CompiledModel) -> dict:
    """`report` completed by the compile: its level, its anchors (the partition), then the functions'
    node counts, in the order the JSON has always had."""
    report["feature_level"] = compiled.feature_level.name
    report["anchors"] = anchors(compiled)
    if functions is not None:
        report["function_op_counts"] = functions
    return report


def _load_raw(path: str) -> onnx.ModelProto:
    """The file as stored: external data is left where it is (only its size is reported)."""
    return load_stored(path)      # large inline weights point at their bytes in the file


def format_inspect(report: dict) -> str:
    lines = [f"{report['model']}: IR version {report['ir_version']}"
             + (f", produced by {report['producer']}" if report["producer"] else "")]
    lines.append("opsets: " + ", ".join(f"{d} {v}" for d, v in report["opsets"].items()))
    lines.append("inputs:")
    for v in report["inputs"]:
        lines.append(f"  {v['name']}: {v['type']} {_shape_text(v['shape'])}"
                     + ("  (initializer default; a feed may override it)" if v["default"] else ""))
    lines.append("outputs:")
    for v in report["outputs"]:
        lines.append(f"  {v['name']}: {v['type']} {_shape_text(v['shape'])}")
    inits = report["initializers"]
    lines.append(f"initializers: {inits['inline']['count']} inline ({inits['inline']['bytes']} bytes), "
                 f"{inits['external']['count']} external ({inits['external']['bytes']} bytes)")
    counts = report["op_counts"]
    lines.append(f"nodes: {sum(counts.values())} (control-flow bodies included)")
    lines.append("  " + ", ".join(f"{op} {n}" for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))
    for function, fcounts in report.get("function_op_counts", {}).items():
        lines.append(f"  function {function}: " + ", ".join(f"{op} {n}" for op, n in fcounts.items()))
    lines.append(f"anchors at feature level {report['feature_level']}:")
    if not report["anchors"]:
        lines.append("  none: no NonZero, EyeLike or Trilu node, and no idiom pattern matched")
    for a in report["anchors"]:
        if a["lowers"]:
            ops = " + ".join(a["dml_operators"]) or "no DirectML operator"
            text = f"  {a['node']} ({a['op_type']}): lowers by rule {a['rule']} -> {ops}"
            if len(a["nodes"]) > 1:
                text += f"  (covers {', '.join(a['nodes'][1:])})"
            if a["note"]:
                text += f"  [{a['note']}]"
        else:
            text = f"  {a['node']} ({a['op_type']}): stays on ONNX" + (f", rule {a['rule']}" if a["rule"] else "") \
                + f": {a['reason']}"
        lines.append(text)
    if "ep_placement" in report:
        from .ep.placement import format_placement
        lines.extend(format_placement(report["ep_placement"]))
        if "verified" in report["ep_placement"]:
            from .ep.verify import format_verified
            lines.extend(format_verified(report["ep_placement"]))
    # each entry is one line: its names (a model's, untrusted) displayed, so none can split it
    return "\n".join(map(display, lines))


def inspect_command(path: str, feature_level: str, ep: "str | None" = None, device_lacks: "tuple[str, ...]" = (),
                    verify: bool = False, ort_version: "str | None" = None,
                    out: "tuple[str | None, str | None, str | None]" = (None, None, None)) -> int:
    """dml-lower inspect: the report printed, and written to `out`: (--json, --html, --model-explorer)."""
    from .output_files import check_outputs, write_json, write_text
    json_out, html_out, explorer_out = out
    if html_out and ep != "dml":
        raise DmlLowerError("--html draws the DML EP placement: add --ep dml")
    if device_lacks and ep != "dml":
        raise DmlLowerError("--device-lacks is an assumption of the DML EP placement: add --ep dml")
    if verify and ep != "dml":
        raise DmlLowerError("--verify checks the DML EP placement on the real EP: add --ep dml")
    if ort_version and ep != "dml":
        raise DmlLowerError("--ort-version names the DML EP registration table the placement models: add --ep dml")
    table = _ort_version(ort_version) if ep == "dml" else None
    if explorer_out:
        from .explorer import require_view
        require_view("--model-explorer")
    check_outputs(("--json", json_out), ("--html", html_out), ("--model-explorer", explorer_out),   # before the work
                  reads=(("model file", path),))
    report, graph = _inspect(path, feature_level, ep, device_lacks, verify, table)
    print(format_inspect(report))
    if json_out:
        write_json(json_out, "the inspect JSON", report, lead="\n")
    if html_out:
        from .ep.picture import render
        assert graph is not None            # --html needs --ep dml, whose placement has its graph
        write_text(html_out, "the placement picture", render(report, graph, str(path)), lead="\n")
    if explorer_out:
        _write_explorer(path, explorer_out, report)
    return 0


def _write_explorer(model: str, out: str, report: dict) -> None:
    from .explorer import write_overlays
    from .overlays import lowering_overlay, placement_overlay
    overlays = [lowering_overlay([(a["nodes"], a["lowers"], a["rule"]) for a in report["anchors"]],
                                 report["feature_level"])]
    if "ep_placement" in report:
        overlays.insert(0, placement_overlay(report["ep_placement"]))
    print()
    for line in write_overlays(model, out, overlays):
        print(display(line))


def _ort_version(version: "str | None") -> "tuple[str, str]":
    """--ort-version: (the onnxruntime whose DML registration table the prediction models, why that
    one), chosen as every DML EP prediction chooses it (registry.choose_table)."""
    from .ep.registry import choose_table
    choice = choose_table(version)
    return choice.version, choice.why
