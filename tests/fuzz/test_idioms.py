"""The exporter idioms (lowering/nonzero_idioms.py, diagonal_idioms.py, mask_idioms.py, trilu.py) and their
near-misses: the compiled model equals onnx.reference bit for bit at every feature level, and
strict mode's poison never reaches an output."""
from __future__ import annotations

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.lowering.common import run_time_unit_reshape, unit_reshape_axis
from onnx_dml_lowering.lowering.match import Decline
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


@st.composite
def _reshapes(draw) -> "tuple[tuple[int, ...], tuple[int, ...], int, int]":
    """(shape, Reshape target, the index's axis, the axis asked for after): targets that add or remove
    unit axes, reorder or merge the larger ones, with or without a -1."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    axis = draw(st.integers(-len(shape), -1))
    larger = [d for d in shape if d != 1]
    kind = draw(st.sampled_from(["units", "units", "permute", "merge"]))
    if kind == "permute":
        larger = draw(st.permutations(larger))
    elif kind == "merge" and len(larger) > 1:
        larger = [larger[0] * larger[1]] + larger[2:]
    target = list(larger)
    for _ in range(draw(st.integers(0, 3))):
        target.insert(draw(st.integers(0, len(target))), 1)
    if not target:
        target = [1]
    if draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return shape, tuple(target), axis, draw(st.integers(-len(target), -1))


@given(_reshapes())
def test_a_reshape_taken_as_an_index_step_keeps_the_index(case) -> None:
    """Whatever run_time_unit_reshape accepts moves an index (arange along `axis`, the same along the
    other axes) to an index along `out_axis`; whatever unit_reshape_axis finds on the sizes (the axis
    larger than 1) run_time_unit_reshape accepts."""
    shape, target, axis, out_axis = case
    length = shape[axis]
    index = np.broadcast_to(np.arange(length).reshape((length,) + (1,) * (-axis - 1)), shape)
    try:
        got = run_time_unit_reshape(shape, target, axis, out_axis)
    except Decline:
        got = None
    if got is not None:
        moved = index.reshape(got)
        assert moved.shape[out_axis] == length
        want = np.broadcast_to(np.arange(length).reshape((length,) + (1,) * (-out_axis - 1)), got)
        assert np.array_equal(moved, want), (shape, target, axis, out_axis)
    found = unit_reshape_axis(shape, target, axis)
    if found is not None and length > 1:
        assert run_time_unit_reshape(shape, target, axis, found) is not None
