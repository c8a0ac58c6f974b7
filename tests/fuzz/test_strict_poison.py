"""Emulator self-check: strict mode's poison (0xCD in fresh buffers, 0xBAADF00D in the undefined
coordinate rows) never reaches an output. The same model and feeds run with strict=True and
strict=False must give bit-identical outputs, NaN payloads included, at every feature level."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from onnx_dml_lowering.compiler import compile_model
from tests.oracle import assert_outputs_same
from tests.fuzz.strategies import any_cases, level_groups, levels_in


@level_groups
@given(data=st.data())
def test_strict_poison_never_reaches_an_output(group: str, data) -> None:
    case = data.draw(any_cases(levels_in(group)), label="case")
    compiled = compile_model(case.model, feature_level=case.level)
    poisoned = compiled.run(case.our_feeds(), strict=True)
    clean = compile_model(case.model, feature_level=case.level).run(case.our_feeds(), strict=False)
    assert_outputs_same(poisoned, clean)
    # Running again on the cached session (specialisations, region sessions) changes nothing,
    # and the feeds were not written to.
    again = compiled.run(case.our_feeds(), strict=True)
    assert_outputs_same(again, poisoned)
