"""The placement report names what runs, at every feature level: every DirectML operator it names
exists at that level (ir.support's tables), a lowering built at compile time names exactly the
operators its fragment holds, and one specialised at run time builds only operators it named (a
rule whose operator the level lacks declines at compile time, with the reason, instead of being
reported lowered while its ONNX fallback does the work).

Fixtures: every idiom, mask, Trilu and control-flow model of the conformance suite, the bundled
examples, the exported models of tests/models, and Trilu(ConstantOfShape(Shape(x))) (issue #26)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.conformance.cases import (control_flow_cases, idiom_cases, mask_cases,
                                                          trilu_cases)
from onnx_dml_lowering.compiler.partition import RUN_TIME_NOTE, Partition
from onnx_dml_lowering.ir import Graph
from onnx_dml_lowering.ir.feature_levels import ALL_LEVELS
from onnx_dml_lowering.ir.support import OPERATORS
from onnx_dml_lowering.runtime.feeds import random_feeds
from tests.builders import graph_model
from tests.oracle import assert_outputs_same, reference

MODELS = Path(__file__).parent.parent / "models"


def trilu_of_shape_fill() -> onnx.ModelProto:
    """Trilu(ConstantOfShape(Shape(x))): the causal mask a scripted export builds from x's shape."""
    fill = h.make_node("ConstantOfShape", ["s"], ["c"], name="fill",
                       value=numpy_helper.from_array(np.array([1.0], np.float32)))
    return graph_model([h.make_node("Shape", ["x"], ["s"], name="shape"), fill,
                        h.make_node("Trilu", ["c"], ["y"], name="trilu", upper=0)],
                       [("x", T.FLOAT, ["a", "b"])], [("y", T.FLOAT, 2)], opset=14)


def fixtures() -> "dict[str, tuple[onnx.ModelProto, dict | None]]":
    """name -> (model, feeds; None: random feeds at seed 0)."""
    out: "dict[str, tuple[onnx.ModelProto, dict | None]]" = {
        "trilu_of_shape_fill": (trilu_of_shape_fill(), {"x": np.zeros((3, 5), np.float32)})}
    cases = idiom_cases(1) + mask_cases(1) + control_flow_cases(1)
    cases += [c for c in trilu_cases(1) if c.name.startswith("test_trilu_float")]
    for case in cases:
        out[case.name] = (case.model, case.data_sets[0])
    from onnx_dml_lowering.compiler import examples
    for path in sorted(examples.HERE.glob("*.onnx")) + sorted(MODELS.glob("*.onnx")):
        out[f"{path.parent.name}/{path.stem}"] = (onnx.load(str(path)), None)
    return out


FIXTURES = fixtures()


def specialised_in(runner, cache: "dict | None" = None) -> "dict[str, list]":
    """Anchor -> the fragments (or Declined) its run-time specialisations built in this runner."""
    built: "dict[str, list]" = {}
    for key, result in (runner.specialised if runner is not None else {}).items():
        built.setdefault(key[0], []).append(result)
    return built


def assert_placement_runs(partition: Partition, level, runner) -> None:
    """One graph (main or body): the named operators exist; static entries hold exactly the
    graph's operators; run-time ones built only what they named. Bodies recursively."""
    static = Counter()
    built = specialised_in(runner)
    for entry in partition.placement:
        for op in entry.dml_operators:
            assert OPERATORS[op].row(level) is not None, (level, entry)
        if entry.status != "lowered" or "graph_path" in entry.extra:
            continue                    # an entry of a body: checked with that body's partition
        if RUN_TIME_NOTE in entry.note:
            for result in built.get(entry.onnx_nodes[0], []):
                assert isinstance(result, Graph), (level, entry, result)
                assert set(result.dml_operators) <= set(entry.dml_operators), (level, entry, result.dml_operators)
        else:
            static.update(entry.dml_operators)
    assert Counter(partition.graph.dml_operators) == static, (level, partition.placement)
    for node, bodies in partition.bodies.items():
        for attribute, body in bodies.items():
            ran = runner._bodies.get((node, attribute)) if runner is not None else None
            assert_placement_runs(body.partition, level, ran)


@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_placement_names_what_runs(name: str, level) -> None:
    model, feeds = FIXTURES[name]
    compiled = compile_model(model, feature_level=level)
    if feeds is None:
        feeds = random_feeds(compiled.inputs, seed=0)
    outputs = compiled.run(feeds, strict=True)
    assert_placement_runs(compiled.partition, level, compiled.session("cpu").main)
    if name == "trilu_of_shape_fill":
        assert_outputs_same(outputs, reference(model, feeds))
