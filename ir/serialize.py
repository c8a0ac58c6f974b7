"""Lossless JSON-ready (de)serialisation of ir.Graph."""
from __future__ import annotations

from typing import Any

import dataclasses
import math

from .dtypes import DataType
from .errors import DmlLowerError
from .feature_levels import parse_level
from .graph import Buffer, Graph, View
from .operators import STEP_TYPES, Step
from .tensor_desc import TensorDesc


def _scalar_out(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    return value


def _scalar_in(value: Any) -> Any:
    if isinstance(value, dict) and "float" in value:
        return float(value["float"])
    return value


def desc_to_dict(desc: TensorDesc) -> dict:
    return {"data_type": desc.data_type.name, "sizes": list(desc.sizes),
            "strides": None if desc.strides is None else list(desc.strides),
            "flags": desc.flags, "total_size": desc.total_size, "alignment": desc.alignment}


def desc_from_dict(data: dict) -> TensorDesc:
    return TensorDesc(DataType[data["data_type"]], tuple(data["sizes"]),
                      None if data.get("strides") is None else tuple(data["strides"]),
                      data.get("flags", 0), data.get("total_size"), data.get("alignment", 0))


def step_to_dict(step: Step) -> dict:
    out = {"kind": step.kind}
    for f in dataclasses.fields(step):
        value = getattr(step, f.name)
        if isinstance(value, DataType):
            value = value.name
        elif f.name == "bodies":          # ControlFlow: (attribute, lowered graph) pairs
            value = [[name, graph_to_dict(body)] for name, body in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = _scalar_out(value)
    return out


def step_from_dict(data: dict) -> Step:
    kind = data.get("kind")
    if kind not in STEP_TYPES:
        raise DmlLowerError(f"unknown step kind {kind!r} in graph JSON")
    cls = STEP_TYPES[kind]
    kwargs = {}
    for f in dataclasses.fields(cls):
        value = _scalar_in(data[f.name])
        if f.type in ("DataType", DataType):       # written by name (step_to_dict), whatever the field
            value = DataType[value]
        elif f.name == "bodies":
            value = tuple((name, graph_from_dict(body)) for name, body in value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def graph_to_dict(graph: Graph) -> dict:
    return {
        "feature_level": graph.feature_level.name,
        "inputs": list(graph.inputs),
        "outputs": list(graph.outputs),
        "buffers": [{"name": b.name, "bytes": b.bytes, "symbols": list(b.symbols)}
                    for b in graph.buffers.values()],
        "views": [{"name": v.name, "buffer": v.buffer, "offset": v.offset, "desc": desc_to_dict(v.desc)}
                  for v in graph.views.values()],
        "steps": [step_to_dict(s) for s in graph.steps],
        "built_shapes": {name: {"shape": list(shape), "node": node}
                         for name, (shape, node) in graph.built_shapes.items()},
    }


def graph_from_dict(data: dict) -> Graph:
    try:
        graph = Graph(parse_level(data["feature_level"]))
        graph.inputs = list(data["inputs"])
        graph.outputs = list(data["outputs"])
        for b in data["buffers"]:
            graph.buffers[b["name"]] = Buffer(b["name"], b["bytes"], tuple(b.get("symbols", ())))
        for v in data["views"]:
            graph.views[v["name"]] = View(v["name"], v["buffer"], desc_from_dict(v["desc"]), v.get("offset", 0))
        graph.steps = [step_from_dict(s) for s in data["steps"]]
        graph.built_shapes = {name: (tuple(int(d) for d in b["shape"]), str(b["node"]))
                              for name, b in data.get("built_shapes", {}).items()}
    except (KeyError, TypeError) as exc:
        raise DmlLowerError(f"malformed graph JSON: missing or wrong field {exc}") from None
    return graph
