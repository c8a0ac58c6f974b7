"""What the tests of the idioms new producers write share (issue 35): a Constant node, the placement
entries of a rule, and the check that one lowered with no run-time fallback."""
from functools import partial

import numpy as np
from onnx import helper as h
from onnx import TensorProto as T

from tests.builders import graph_model

make = partial(graph_model, opset=18)
MASK = "range_comparison_mask"


def const(name, value, onnx_type=T.INT64):
    array = np.asarray(value)
    return h.make_node("Constant", [], [name], name=f"c_{name}",
                       value=h.make_tensor(name, onnx_type, array.shape, array.reshape(-1).tolist()))


def entries(result, rule):
    return [p for p in result.compiled.placement if p.rule == rule]


def lowered(result, rule, covers=()):
    """The one placement entry of `rule`: lowered, covering `covers`, no run-time fallback."""
    (entry,) = entries(result, rule)
    assert entry.status == "lowered", entry.reason
    assert set(covers) <= set(entry.onnx_nodes), entry.onnx_nodes
    log = result.compiled.session().log
    assert log == [], log
    return entry
