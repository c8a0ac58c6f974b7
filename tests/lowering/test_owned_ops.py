"""lowering/owned_ops.py: the one list of the ONNX operators this project owns, and the three
places that used to keep a copy of it (the oracle, provider validation, inspect) reading it."""
import pytest
from onnx import helper as h

from onnx_dml_lowering.lowering import IDIOMS
from onnx_dml_lowering.lowering.owned_ops import OWNED_OPS, owned
from onnx_dml_lowering.runtime.oracle import holds_semantic_op
from onnx_dml_lowering.runtime.ort.assignment import placement_findings


def test_owned_ops_are_the_ops_lowered_by_a_node_of_their_own():
    """The anchors of the one-node idioms (priority 0: the single-node rules and Trilu's)."""
    assert OWNED_OPS == {idiom.anchor for idioms in IDIOMS.values() for idiom in idioms if idiom.priority == 0}


CASES = [(op, domain, op in OWNED_OPS and domain in ("", "ai.onnx"))
         for op in sorted(OWNED_OPS | {"Equal", "Relu"}) for domain in ("", "ai.onnx", "com.example")]


@pytest.mark.parametrize("op, domain, expected", CASES)
def test_the_oracle_and_provider_validation_own_the_same_ops(op, domain, expected):
    node = h.make_node(op, ["x"], ["y"], name="n", domain=domain)
    assert owned(op, domain) is expected
    assert holds_semantic_op(node) is expected
    model = h.make_model(h.make_graph([node], "g", [], []))
    assert [f.node for f in placement_findings(model, {}, "CPUExecutionProvider")] == (["n"] if expected else [])


def test_an_owned_op_in_a_body_makes_its_control_flow_node_semantic():
    branch = h.make_graph([h.make_node("EyeLike", ["x"], ["y"])], "b", [], [])
    node = h.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)
    assert holds_semantic_op(node)
