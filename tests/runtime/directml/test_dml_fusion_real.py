"""The DML EP's activation fusion on the real onnxruntime.dll 1.24.4 (ort_host), against what
runtime/dml_fusion.py predicts, over the whole grid of tests/runtime/dml_fusion_models.py:
twelve producers by thirteen activations, the producer's value a graph output too. Where the table
says the pair fuses, that output comes back empty and the activation's is right; elsewhere both
come back. A Gemm without C and a MeanVarianceNormalization fail at session creation exactly where
they fuse, and name_failure names onnxruntime's message. One host for the module."""
from __future__ import annotations

import numpy as np
import pytest

from onnx_dml_lowering.runtime.directml.ort_host import OrtHost, SessionCreationFailed
from onnx_dml_lowering.runtime.dml_deviations import failing_nodes, name_failure
from onnx_dml_lowering.runtime.dml_fusion import fused_output_risks
from tests.runtime.dml_fusion_models import ACTIVATIONS, PRODUCERS, feeds, fusion_model

pytestmark = pytest.mark.directml


@pytest.fixture(scope="module")
def host():
    with OrtHost() as running:
        yield running


def _run(host: OrtHost, model) -> "list | str":
    """The outputs (None where onnxruntime left one empty), or the creation failure's message."""
    try:
        session = host.create_session(model.SerializeToString())
    except SessionCreationFailed as exc:
        return str(exc)
    try:
        return session.run(None, feeds(model))
    finally:
        session.release()


@pytest.mark.parametrize("producer", PRODUCERS)
def test_an_output_comes_back_empty_exactly_where_predicted(host, producer):
    wrong = []
    for activation in ACTIVATIONS:
        model = fusion_model(producer, activation)
        predicted = bool(fused_output_risks(model, None))
        failure = [f.key for f in failing_nodes(model)]
        got = _run(host, model)
        if isinstance(got, str):
            if not failure or name_failure(model, got, at_run=False) is None:
                wrong.append((activation, "creation failed", got[:120]))
            continue
        a, y = got
        if failure or (a is None) != predicted or y is None:
            wrong.append((activation, "empty" if a is None else "came back", "predicted empty" if predicted else ""))
    assert wrong == []


@pytest.mark.parametrize("producer", ["Gemm", "MeanVarianceNormalization"])
def test_the_fused_nodes_it_cannot_create_fail_where_predicted(host, producer):
    wrong = []
    for activation in ACTIVATIONS:
        model = fusion_model(producer, activation, a_output=False, gemm_c=False)
        predicted = [f.key for f in failing_nodes(model)]
        got = _run(host, model)
        named = name_failure(model, got, at_run=False) if isinstance(got, str) else None
        if bool(predicted) != isinstance(got, str) or (predicted and named is None):
            wrong.append((activation, predicted, got if isinstance(got, str) else "ran"))
    assert wrong == []


def test_a_second_reader_keeps_the_value():
    with OrtHost() as host:
        for producer in ("Add", "Conv", "MatMul"):
            model = fusion_model(producer, "Relu", second_reader=True)
            assert fused_output_risks(model, None) == []
            a, y, z = _run(host, model)
            assert a is not None and np.array_equal(z, -a) and np.array_equal(y, np.maximum(a, 0))


def test_the_dml_suite_fusion_cases_do_what_the_manifest_predicts(capsys):
    """The committed dml/ suite's three fusion cases on the real EP: the Conv output empty (the
    predicted deviation, by its line), the Gemm and the normalization unsupported, named; nothing
    contradicts the manifest. The other providers pass them bit for bit."""
    from tests.cli_runner import cli
    from tests.paths import REPO
    code, out, err = cli(["conformance", "run", REPO / "dml", "--backends", "ort-dml,ort-cpu,cpu",
                          "--filter", "test_dml_fusion_*"], capsys)
    assert code == 0 and err == "", out + err
    lines = out.splitlines()
    assert "[ort-dml] 0 pass, 0 partial, 1 deviation, 2 unsupported, 0 fail" in lines
    assert "[ort-cpu] 3 pass, 0 partial, 0 deviation, 0 unsupported, 0 fail" in lines
    assert "[cpu] 3 pass, 0 partial, 0 deviation, 0 unsupported, 0 fail" in lines
    assert "  DEVIATION test_dml_fusion_conv_output_relu: DML EP deviation: a graph output read by one activation " \
           "alone, which the DML EP fuses into the output's producer, comes back empty (an OrtValue holding " \
           "nothing): test_data_set_0: output c: came back empty (the DML EP fused Relu node relu into Conv node " \
           "conv)" in lines
    assert "PREDICTION" not in out and "PLACEMENT" not in out
