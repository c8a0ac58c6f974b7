"""The no-anchor fast path of partition (one ONNX region, no graph view, matching or scheduling)
gives exactly what the full passes give: same placement, same composed graph, same regions, on
the real and example models and on built models where it applies."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.partition import Partition, lowers_no_node, partition
from onnx_dml_lowering.ir import graph_to_dict

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILES = sorted(p for pattern in ("tests/models/**/*.onnx", "benchmarks/models/*.onnx",
                                       "compiler/examples/*.onnx") for p in ROOT.glob(pattern))


def _snapshot(part: Partition) -> str:
    return json.dumps({"placement": [p.to_dict() for p in part.placement], "graph": graph_to_dict(part.graph),
                       "regions": {k: [n.name for n in v] for k, v in part.regions.items()},
                       "deferred": sorted(part.deferred), "generated": sorted(part.generated),
                       "fallbacks": sorted(part.fallbacks)}, sort_keys=True, default=str)


def _chain(ops: "list[str]", *, identity_init: bool, mid_output: bool, anchor: "str | None" = None) -> onnx.ModelProto:
    """x -> ops... -> y over 4x4 floats, reading a scalar initializer; optionally a 4x4 identity
    initializer (a generator replaces it), an intermediate graph output and one anchor node."""
    nodes, cur, outputs = [], "x", []
    inits = [numpy_helper.from_array(np.array(1.0, np.float32), "one")]
    if identity_init:
        inits.append(numpy_helper.from_array(np.eye(4, dtype=np.float32), "eye4"))
        nodes.append(h.make_node("Add", ["x", "eye4"], ["xe"], name="add_eye"))
        cur = "xe"
    for i, op in enumerate(ops):
        ins = [cur, "one"] if op in ("Add", "Mul") else [cur]
        nodes.append(h.make_node(op, ins, [f"v{i}"], name=f"n{i}"))
        cur = f"v{i}"
        if mid_output and i == len(ops) // 2:
            outputs.append(h.make_tensor_value_info(cur, T.FLOAT, [4, 4]))
    if anchor:
        nodes.append(h.make_node(anchor, [cur], ["a"], name="anchor"))
        nodes.append(h.make_node("Add", [cur, "a"], ["after"], name="after"))
        cur = "after"
    outputs.append(h.make_tensor_value_info(cur, T.FLOAT, [4, 4]))
    graph = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [4, 4])], outputs, inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


BUILT = [
    ("empty chain", _chain([], identity_init=False, mid_output=False), True),
    ("one node", _chain(["Relu"], identity_init=False, mid_output=False), True),
    ("chain", _chain(["Add", "Relu", "Neg", "Abs", "Mul"] * 20, identity_init=False, mid_output=False), True),
    ("chain, mid output", _chain(["Add", "Relu", "Neg"] * 10, identity_init=False, mid_output=True), True),
    ("chain, generated initializer", _chain(["Add", "Relu"] * 5, identity_init=True, mid_output=True), True),
    ("chain with EyeLike", _chain(["Add", "Relu"] * 5, identity_init=False, mid_output=True, anchor="EyeLike"), False),
]


@pytest.mark.parametrize("name,model,fast", BUILT, ids=[b[0] for b in BUILT])
@pytest.mark.parametrize("level", ["5.0", "6.4"])
def test_fast_path_equals_full_passes_on_built_models(name: str, model: onnx.ModelProto, fast: bool, level: str) -> None:
    compiled = compile_model(model, level)
    assert lowers_no_node(list(compiled.model.graph.node)) is fast
    full = partition(compiled.model, compiled.feature_level, fast=False)
    assert _snapshot(compiled.partition) == _snapshot(full)
    if fast:
        onnx_regions = [s for s in graph_to_dict(compiled.graph)["steps"] if s.get("kind") == "ONNX_REGION"]
        assert len(onnx_regions) == (1 if compiled.model.graph.node else 0)


@pytest.mark.parametrize("path", MODEL_FILES, ids=[str(p.relative_to(ROOT)) for p in MODEL_FILES])
def test_compile_unchanged_on_real_models(path: Path) -> None:
    """compile --json of every stored model: the path compile_model takes (fast where it applies)
    against the full passes on the same checked, inferred model."""
    compiled = compile_model(path)
    full = partition(compiled.model, compiled.feature_level, fast=False)
    assert _snapshot(compiled.partition) == _snapshot(full)
    assert compiled.to_json() == json.dumps({"feature_level": compiled.feature_level.name,
                                             "placement": [p.to_dict() for p in full.placement],
                                             "graph": graph_to_dict(full.graph)}, indent=1)
