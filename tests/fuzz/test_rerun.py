"""Run-time specialisation: one CompiledModel whose input sizes are bound at run time, run on
several feeds of different shapes in a row (each specialisation cached per input shape),
must give onnx.reference's answer every time, bit for bit."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnx_dml_lowering.compiler import compile_model
from tests.fuzz.compare import assert_outputs_bit_exact, reference
from tests.fuzz.strategies import LEVEL_GROUPS, levels_in, rerun_cases


@pytest.mark.parametrize("group", list(LEVEL_GROUPS))
@given(data=st.data())
def test_one_compiled_model_many_shapes(group: str, data) -> None:
    cases = data.draw(rerun_cases(levels_in(group)), label="cases")
    compiled = compile_model(cases[0].model, feature_level=cases[0].level)
    for case in cases + cases[:1]:          # and the first shape again, from the cache
        ours = compiled.run(case.our_feeds(), strict=True)
        assert_outputs_bit_exact(ours, reference(case.model, case.feeds))
