"""Real jax2onnx exports (tests/models/jax2onnx/, written by its export_jax_models.py; the suite never
imports jax): the eyes and causal masks jax and flax write lower as one idiom each and equal
onnx.reference, strict, at several batch sizes and on random inputs."""
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx_dml_lowering.compiler import compile_model
from tests.oracle import differential

HERE = Path(__file__).parent.parent / "models" / "jax2onnx"
# model: (the rule that must lower it, the nodes it must cover, the feeds per call)
CASES = {
    "flax_causal_mask.static": ("range_comparison_mask", {"node_GreaterOrEqual_13", "node_Range_0", "node_Reshape_7"},
                                [{"in_0": np.zeros((2, 8), np.float32)}]),
    "flax_causal_mask.dynamic_batch": ("range_comparison_mask", {"node_GreaterOrEqual_23"},
                                       [{"in_0": np.zeros((b, 8), np.float32)} for b in (1, 2, 5)]),
    "jnp_identity": ("range_comparison_mask", {"node_Equal_11", "node_Cast_4", "node_Cast_9", "node_Add_10"},
                     [{"in_0": np.random.default_rng(s).standard_normal((3, 6)).astype(np.float32)} for s in (0, 1)]),
    "jnp_eye": ("eyelike_constant_of_shape", {"node_EyeLike_1"},
                [{"in_0": np.random.default_rng(2).standard_normal((5, 5)).astype(np.float32)}]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_jax_export_lowers_and_matches(name):
    rule, covered, calls = CASES[name]
    model = onnx.load(HERE / f"{name}.onnx")
    compiled = compile_model(model)
    (entry,) = [p for p in compiled.placement if p.rule == rule]
    assert entry.status == "lowered" and covered <= set(entry.onnx_nodes), entry
    for feeds in calls:
        differential(model, feeds, compiled=compiled)
    assert compiled.session().log == []


def test_every_jax_export_is_tested():
    assert {p.name[:-len(".onnx")] for p in HERE.glob("*.onnx")} == set(CASES)
