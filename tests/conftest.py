"""Shared test setup: strict (poison) emulation everywhere, seeded randomness, model builders."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import settings
from onnx import helper as h

os.environ.setdefault("DML_LOWER_STRICT", "1")

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("thorough", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def single_node_model(op_type: str, in_type: int, in_shape, out_type: int, out_shape=None,
                      opset: int = 13, **attrs):
    """A one-node model x -> op -> y with the given types (out_shape None: unknown dims)."""
    x = h.make_tensor_value_info("x", in_type, list(in_shape) if in_shape is not None else None)
    if out_shape is None:
        out_shape = [None, None]
    y = h.make_tensor_value_info("y", out_type, list(out_shape))
    node = h.make_node(op_type, ["x"], ["y"], name=op_type.lower(), **attrs)
    graph = h.make_graph([node], f"{op_type}_test", [x], [y])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)
