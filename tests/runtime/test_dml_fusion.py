"""What runtime/dml_fusion.py predicts of the DML EP's activation fusion, offline, over the grid of
producers and activations the real EP was measured on (tests/runtime/directml/test_dml_fusion_real.py
holds the same grid against onnxruntime.dll 1.24.4)."""
from __future__ import annotations

import json

import onnx
import pytest

from onnx_dml_lowering.runtime.dml_deviations import failing_nodes, name_failure
from onnx_dml_lowering.runtime.dml_fusion import (FUSES, GEMM_WITHOUT_C, MVN_FUSED, fused_output_risks, fused_pairs,
                                                  fusion_failures)
from tests.cli_runner import cli
from tests.runtime.dml_fusion_models import ACTIVATIONS, PRODUCERS, fusion_model

FUSED = {(p, a) for p in PRODUCERS for a in ACTIVATIONS if a in FUSES.get(p, ())}


def test_the_table_is_the_measured_one():
    """Conv-like producers take ten activations, Add and Sum two, Sub / Mul / Div none; Celu, HardSwish
    and PRelu are fused into nothing."""
    assert len(FUSED) == 7 * 10 + 2 * 2
    assert not any(a in ("Celu", "HardSwish", "PRelu") or p in ("Sub", "Mul", "Div") for p, a in FUSED)


@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_an_output_the_fusion_drops_is_predicted(producer, activation):
    model = fusion_model(producer, activation)
    risks = fused_output_risks(model, None)
    assert [(r.output, r.node, r.activation) for r in risks] == ([("a", "p", "act")] if (producer, activation) in FUSED
                                                                  else [])
    # not an output, read twice, or its activation left to the CPU EP: nothing dropped
    assert fused_output_risks(fusion_model(producer, activation, a_output=False), None) == []
    assert fused_output_risks(fusion_model(producer, activation, second_reader=True), None) == []
    assert fused_output_risks(model, {"act": "CPUExecutionProvider"}) == []


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_the_fused_nodes_the_dml_ep_cannot_create(activation):
    fused = activation in FUSES["Gemm"]
    gemm = fusion_model("Gemm", activation, a_output=False, gemm_c=False)
    assert fusion_failures(gemm.graph) == ([("p", "Gemm", GEMM_WITHOUT_C)] if fused else [])
    assert fusion_failures(fusion_model("Gemm", activation, a_output=False).graph) == []       # with C
    mvn = fusion_model("MeanVarianceNormalization", activation, a_output=False)
    assert [f.key for f in failing_nodes(mvn)] == ([MVN_FUSED] if fused else [])
    assert fusion_failures(fusion_model("MeanVarianceNormalization", activation, second_reader=True).graph) == []


def test_onnxruntimes_message_at_creation_is_named():
    """The message onnxruntime.dll 1.24.4 gave (the directml test reads it again from the real EP)."""
    gemm = fusion_model("Gemm", "Relu", a_output=False, gemm_c=False)
    message = ("This is an invalid model. In Node, (\"fused op (#0 'p') + (#1 'act')\", DmlFusedGemm, "
               "\"com.microsoft.dml\", -1) : (\"x\": tensor(float),\"w\": tensor(float),) -> (\"y\": tensor(float),) , "
               "Error Node(fused op (#0 'p') + (#1 'act')) with schema(com.microsoft.dml::DmlFusedGemm:1) has input "
               "size 2 not in range [min=3, max=3].")
    assert name_failure(gemm, message, at_run=False) == (
        "DML EP deviation: a Gemm without its C input, fused with the activation reading it, fails at session "
        "creation (the DML EP's fused Gemm needs C) (node p)")
    assert name_failure(gemm, "some other failure", at_run=False) is None


def test_pairs_follow_graph_order_and_each_value_once():
    model = fusion_model("Conv", "Relu")
    assert [(p.name, a.name) for p, a in fused_pairs(model.graph)] == [("p", "act")]


def test_inspect_warns_of_both(tmp_path, capsys):
    onnx.save(fusion_model("Add", "Relu"), str(tmp_path / "add.onnx"))
    onnx.save(fusion_model("Gemm", "Sigmoid", a_output=False, gemm_c=False), str(tmp_path / "gemm.onnx"))
    code, text, err = cli(["inspect", tmp_path / "add.onnx", "--ep", "dml", "--json", tmp_path / "a.json"], capsys)
    assert code == 0, err
    assert ("warning: graph output 'a' (Add node p on the DML EP) comes back empty (an OrtValue holding nothing): the "
            "DML EP fuses Relu node act, its only reader, into it") in text
    assert any("comes back empty" in w for w in json.loads((tmp_path / "a.json").read_text())["ep_placement"]["warnings"])
    code, text, err = cli(["inspect", tmp_path / "gemm.onnx", "--ep", "dml"], capsys)
    assert code == 0, err
    assert "warning: p (Gemm): a Gemm without its C input, fused with the activation reading it, fails at session" in text
