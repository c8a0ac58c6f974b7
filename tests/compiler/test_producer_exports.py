"""Real exports of the producers issue 35 tried (tests/models/jax2onnx/ and tests/models/paddle2onnx/,
each written by the export script there; the suite never imports jax or paddle): the eyes and causal
masks jax, flax and paddle write lower as one idiom each and equal onnx.reference, strict, at several
sizes and on random inputs."""
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx_dml_lowering.compiler import compile_model
from tests.oracle import differential

MODELS = Path(__file__).parent.parent / "models"
RNG = np.random.default_rng(35)


def scores(b, s):
    return {"scores": RNG.standard_normal((b, s, s)).astype(np.float32)}


# model: (the rule that must lower it, the nodes it must cover, the feeds per call)
CASES = {
    # paddle.tril(paddle.ones([s, s])): Expand(1.0) -> Identity -> Trilu
    "paddle2onnx/causal_scores": ("trilu_constant_fill", {"Trilu.0", "Expand.0", "Identity.7"},
                                  [scores(b, s) for b, s in ((1, 1), (2, 5), (3, 8))]),
    "jax2onnx/flax_causal_mask.static": ("range_comparison_mask", {"node_GreaterOrEqual_13", "node_Range_0", "node_Reshape_7"},
                                [{"in_0": np.zeros((2, 8), np.float32)}]),
    "jax2onnx/flax_causal_mask.dynamic_batch": ("range_comparison_mask", {"node_GreaterOrEqual_23"},
                                       [{"in_0": np.zeros((b, 8), np.float32)} for b in (1, 2, 5)]),
    "jax2onnx/jnp_identity": ("range_comparison_mask", {"node_Equal_11", "node_Cast_4", "node_Cast_9", "node_Add_10"},
                     [{"in_0": np.random.default_rng(s).standard_normal((3, 6)).astype(np.float32)} for s in (0, 1)]),
    "jax2onnx/jnp_eye": ("eyelike_constant_of_shape", {"node_EyeLike_1"},
                [{"in_0": np.random.default_rng(2).standard_normal((5, 5)).astype(np.float32)}]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_jax_export_lowers_and_matches(name):
    rule, covered, calls = CASES[name]
    model = onnx.load(MODELS / f"{name}.onnx")
    compiled = compile_model(model)
    (entry,) = [p for p in compiled.placement if p.rule == rule]
    assert entry.status == "lowered" and covered <= set(entry.onnx_nodes), entry
    for feeds in calls:
        differential(model, feeds, compiled=compiled)
    assert compiled.session().log == []


def test_every_producer_export_is_tested():
    found = {f"{p.parent.name}/{p.name[:-len('.onnx')]}" for folder in ("jax2onnx", "paddle2onnx")
             for p in (MODELS / folder).glob("*.onnx")}
    assert found == set(CASES)
