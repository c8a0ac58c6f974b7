"""Which values check leaves uncompared as random (runtime/nondeterminism.random_values): every value
computed from a random node, at any distance, and nothing else; seeded graphs against the
definition written out here."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnx_dml_lowering.runtime.nondeterminism import random_values


def _random_graph(seed: int) -> "tuple[onnx.ModelProto, dict[str, str]]":
    """A chain-and-branch graph of Add / Relu / random nodes, and what the definition taints."""
    rng = np.random.default_rng(seed)
    values, nodes, tainted = ["x"], [], {}
    for index in range(int(rng.integers(1, 12))):
        out = f"v{index}"
        if rng.random() < 0.25:
            node = helper.make_node("RandomUniformLike", [values[int(rng.integers(len(values)))]], [out],
                                    name=f"rand{index}", seed=float(index))
            tainted[out] = node.name
        else:
            reads = [values[int(i)] for i in rng.integers(len(values), size=2)]
            node = helper.make_node("Add", reads, [out], name=f"add{index}")
            source = next((tainted[r] for r in reads if r in tainted), None)
            if source is not None:
                tainted[out] = source
        nodes.append(node)
        values.append(out)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info(values[-1], TensorProto.FLOAT, [2])
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y])), tainted


@pytest.mark.parametrize("seed", range(40))
def test_taint_is_every_value_computed_from_a_random_node(seed: int) -> None:
    model, tainted = _random_graph(seed)
    assert random_values(model) == tainted


def test_dropout_is_random_only_in_training_mode() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])
    for training, expected in ((False, {}), (True, {"d": "drop", "z": "drop"})):
        flag = helper.make_tensor("t", TensorProto.BOOL, [], [training])
        nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                 helper.make_node("Dropout", ["r", "", "t"], ["d"], name="drop"),
                 helper.make_node("Relu", ["d"], ["z"], name="relu2")]
        model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [flag]))
        assert random_values(model) == expected
