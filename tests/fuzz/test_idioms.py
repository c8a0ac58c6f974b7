"""The exporter idioms (lowering/nonzero_idioms.py, diagonal_idioms.py, mask_idioms.py, trilu.py) and their
near-misses: the compiled model equals onnx.reference bit for bit at every feature level, and
strict mode's poison never reaches an output."""
from __future__ import annotations

from hypothesis import event, given
from hypothesis import strategies as st

from onnx_dml_lowering.compiler import compile_model
from tests.oracle import assert_outputs_same, differential
from tests.fuzz.idioms import diagonal_idiom_cases, mask_idiom_cases, nonzero_idiom_cases
from tests.fuzz.strategies import Case, level_groups, levels_in

def check(case: Case) -> None:
    compiled, ours, _ = differential(case.model, case.feeds, case.level, our_feeds=case.our_feeds(),
                                     nan_payloads=False)
    clean = compile_model(case.model, feature_level=case.level).run(case.our_feeds(), strict=False)
    assert_outputs_same(clean, ours)
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


@level_groups
@given(data=st.data())
def test_mask_idioms_match_onnx_reference(group: str, data) -> None:
    check(data.draw(mask_idiom_cases(levels_in(group)), label="case"))
