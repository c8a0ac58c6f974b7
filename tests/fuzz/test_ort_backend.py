"""The same lowered graph with each DirectML operator run by onnxruntime (backend="ort",
CPUExecutionProvider) equals onnx.reference bit for bit, or declines with one line saying that
onnxruntime has no kernel for the operator's type (NonZero on int8, EyeLike to uint8, ...).
Models: NonZero / EyeLike, the small multi-node models, and the exporter idioms."""
from __future__ import annotations

from hypothesis import event, given
from hypothesis import strategies as st

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import DmlLowerError
from tests.oracle import assert_outputs_same, reference
from tests.fuzz.idioms import idiom_cases
from tests.fuzz.strategies import Case, any_cases


@given(case=st.one_of(any_cases(), idiom_cases()))
def test_ort_backend_matches_onnx_reference(case: Case) -> None:
    compiled = compile_model(case.model, feature_level=case.level)
    try:
        ours = compiled.run(case.our_feeds(), backend="ort", providers=["CPUExecutionProvider"], strict=True)
    except DmlLowerError as exc:
        message = str(exc)
        assert "onnxruntime" in message and "cannot run it" in message, message
        assert "\n" not in message.strip(), message
        event(f"onnxruntime has no kernel: {message.split(':')[0]}")
        return
    assert_outputs_same(ours, reference(case.model, case.feeds), nan_payloads=False)
