"""The exporter idioms (lowering/nonzero_idioms.py, lowering/diagonal_idioms.py) and their
near-misses: the compiled model equals onnx.reference bit for bit at every feature level, and
strict mode's poison never reaches an output."""
from __future__ import annotations

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from onnx_dml_lowering.compiler import compile_model
from tests.fuzz.compare import assert_outputs_bit_exact, reference
from tests.fuzz.idioms import diagonal_idiom_cases, nonzero_idiom_cases
from tests.fuzz.strategies import LEVEL_GROUPS, Case, levels_in

level_groups = pytest.mark.parametrize("group", list(LEVEL_GROUPS))


def check(case: Case) -> None:
    compiled = compile_model(case.model, feature_level=case.level)
    ours = compiled.run(case.our_feeds(), strict=True)
    assert_outputs_bit_exact(ours, reference(case.model, case.feeds))
    clean = compile_model(case.model, feature_level=case.level).run(case.our_feeds(), strict=False)
    assert_outputs_bit_exact(clean, ours, nan_payloads=True)
    for entry in compiled.placement:          # coverage, shown by --hypothesis-show-statistics
        event(f"{entry.rule} {entry.status}")


@level_groups
@given(data=st.data())
def test_nonzero_idioms_match_onnx_reference(group: str, data) -> None:
    check(data.draw(nonzero_idiom_cases(levels_in(group)), label="case"))


@level_groups
@given(data=st.data())
def test_diagonal_idioms_match_onnx_reference(group: str, data) -> None:
    check(data.draw(diagonal_idiom_cases(levels_in(group)), label="case"))
