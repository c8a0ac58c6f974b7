"""Run-time specialisation: one CompiledModel whose input sizes are bound at run time, run on
several feeds of different shapes in a row (each specialisation cached per input shape),
must give onnx.reference's answer every time, bit for bit."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from onnx_dml_lowering.compiler import compile_model
from tests.oracle import differential
from tests.fuzz.strategies import level_groups, levels_in, rerun_cases


@level_groups
@given(data=st.data())
def test_one_compiled_model_many_shapes(group: str, data) -> None:
    cases = data.draw(rerun_cases(levels_in(group)), label="cases")
    compiled = compile_model(cases[0].model, feature_level=cases[0].level)
    for case in cases + cases[:1]:          # and the first shape again, from the cache
        differential(case.model, case.feeds, compiled=compiled, our_feeds=case.our_feeds(), nan_payloads=False)
