"""node_reads: a node's inputs and what its bodies capture from outside, looking into attributes
only where a body can be (may_hold_bodies: the standard control-flow operators, any other domain)."""
from __future__ import annotations

import onnx
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.lowering.onnx_graphs import STANDARD_WITH_BODIES, may_hold_bodies, node_reads


def body_reading(outer: str) -> onnx.GraphProto:
    return h.make_graph([h.make_node("Add", ["a", outer], ["b"])], "body",
                        [h.make_tensor_value_info("a", T.FLOAT, [1])], [h.make_tensor_value_info("b", T.FLOAT, [1])])


def test_standard_control_flow_and_other_domains_are_looked_into():
    loop = h.make_node("Loop", ["m", "", "v"], ["out"], body=body_reading("captured"))
    custom = h.make_node("MyLoop", ["v"], ["out"], domain="com.example", body=body_reading("captured"))
    assert may_hold_bodies(loop) and may_hold_bodies(custom)
    assert node_reads(loop) == ["m", "v", "captured"]
    assert node_reads(custom) == ["v", "captured"]


def test_a_custom_domain_node_without_attributes_and_standard_ops_are_not():
    assert not may_hold_bodies(h.make_node("MyOp", ["x"], ["y"], domain="com.example"))
    conv = h.make_node("Conv", ["x", "w", ""], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    assert not may_hold_bodies(conv) and node_reads(conv) == ["x", "w"]


def test_the_standard_list_is_every_schema_with_a_graph_attribute():
    """Every standard schema with a GRAPH / GRAPHS attribute is in the list, and only those."""
    with_graphs = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")
                   and any(a.type in (onnx.defs.OpSchema.AttrType.GRAPH, onnx.defs.OpSchema.AttrType.GRAPHS)
                           for a in s.attributes.values())}
    assert with_graphs == set(STANDARD_WITH_BODIES)
