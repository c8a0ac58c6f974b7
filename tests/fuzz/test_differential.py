"""Differential properties: the lowered model equals onnx.reference on the original, bit for bit.

compile_model(model, feature_level=L).run(feeds) must give the same dtype, shape and bytes as
onnx.reference.ReferenceEvaluator(model) (tests/oracle.py's rule: NaN bit patterns and the sign
of zero included), at every feature level, whether
each node was lowered onto DirectML operators or declined and left to ONNX.

Each property runs once per group of feature levels with the same support tables
(strategies.LEVEL_GROUPS), with the examples of the hypothesis profile of tests/conftest.py
('ci' by default; HYPOTHESIS_PROFILE=thorough for thousands). A failure prints the Case: the
model in words, the feature level, and the feeds with their bit patterns.
"""
from __future__ import annotations

from hypothesis import event, given
from hypothesis import strategies as st

from tests.oracle import differential
from tests.fuzz.control_flow import control_flow_cases
from tests.fuzz.strategies import (Case, eyelike_cases, level_groups, levels_in, nonzero_cases,
                                   two_node_cases)

def check_against_reference(case: Case) -> None:
    compiled, ours, _ = differential(case.model, case.feeds, case.level, our_feeds=case.our_feeds(),
                                     nan_payloads=False)
    # Every NonZero / EyeLike node is accounted for in the placement report.
    placed = {name for entry in compiled.placement for name in entry.onnx_nodes}
    for node in case.model.graph.node:
        if node.op_type in ("NonZero", "EyeLike"):
            assert node.name in placed, f"{node.name} missing from the placement report"
    for entry in compiled.placement:          # coverage, shown by --hypothesis-show-statistics
        late = " at run time" if entry.note.startswith("sizes are bound") else ""
        event(f"{'+'.join(entry.onnx_nodes)} {entry.status}{late}")
    for name, value in ours.items():
        event(f"output {name} {'empty' if value.size == 0 else 'non-empty'}")


@level_groups
@given(data=st.data())
def test_nonzero_matches_onnx_reference(group: str, data) -> None:
    check_against_reference(data.draw(nonzero_cases(levels_in(group)), label="case"))


@level_groups
@given(data=st.data())
def test_eyelike_matches_onnx_reference(group: str, data) -> None:
    check_against_reference(data.draw(eyelike_cases(levels_in(group)), label="case"))


@level_groups
@given(data=st.data())
def test_two_node_models_match_onnx_reference(group: str, data) -> None:
    check_against_reference(data.draw(two_node_cases(levels_in(group)), label="case"))


@level_groups
@given(data=st.data())
def test_control_flow_models_match_onnx_reference(group: str, data) -> None:
    """NonZero / EyeLike inside If branches and Loop bodies (tests/fuzz/control_flow.py)."""
    case = data.draw(control_flow_cases(levels_in(group)), label="case")
    compiled, _, _ = differential(case.model, case.feeds, case.level, our_feeds=case.our_feeds(),
                                  nan_payloads=False)
    assert all("/" in n for entry in compiled.placement for n in entry.onnx_nodes
               if not n.startswith("initializer:"))
    for entry in compiled.placement:
        event(f"{entry.onnx_nodes[0].split('/')[0]} {entry.status}")
