"""One onnxruntime session per ONNX region, shared by the lowered run and the hybrid oracle
(runtime/region_sessions.py): shared exactly where the sub-models coincide, and every value the
same, bit for bit, as with the two sides building their own sessions."""
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.check import Tolerances, check, make_oracle
from onnx_dml_lowering.runtime.feeds import random_feeds
from onnx_dml_lowering.runtime.oracle import Oracle
from onnx_dml_lowering.runtime.region_sessions import SharedSessions, region_key

REAL = Path(__file__).parent.parent / "models" / "real"
FEED_DIMS = {"batch": 3, "sequence": 6, "height": 320, "width": 320}

pytestmark = [
    pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning"),
]


def feeds_for(compiled, seed=0):
    known = {d.dim_param for vi in compiled.inputs for d in vi.type.tensor_type.shape.dim if d.dim_param}
    return random_feeds(compiled.inputs, seed=seed, dims={k: v for k, v in FEED_DIMS.items() if k in known})


@pytest.mark.parametrize("name, regions", [
    ("bert.dynamo.onnx", 1),            # no idiom: one region, the whole model
    ("gpt2.dynamo.onnx", 2),            # a causal-mask idiom splits it in two
    ("llama.torchscript.onnx", 2),
])
def test_check_builds_each_region_session_once(name, regions):
    compiled = compile_model(str(REAL / name))
    feeds = feeds_for(compiled)
    _, report = check(compiled, feeds, ["cpu"], Tolerances(atol=1e-5, rtol=1e-4))
    assert report.ok
    # The oracle built each onnxruntime region; the lowered run found every one in the cache.
    assert len(compiled.shared_sessions) == regions
    assert compiled.shared_sessions.hits == regions

    # Bit for bit what the two sides give with their own sessions.
    alone = compile_model(str(REAL / name))
    alone._shared_sessions = _Unshared()
    lowered = alone.run(feeds)
    own_oracle = Oracle(alone.model, alone.types, "hybrid", make_oracle(alone).semantic, shared=None)
    expected = own_oracle.run(feeds)
    again = compiled.run(feeds)
    for out in compiled.output_names:
        np.testing.assert_array_equal(again[out], lowered[out])
        np.testing.assert_array_equal(report.expected[out], expected[out])
    assert len(alone.shared_sessions) == 0


class _Unshared(SharedSessions):
    """Builds every time and keeps nothing: each side has its own session, as before sharing."""

    def get(self, key, build):
        return build()


def test_different_sub_models_do_not_share():
    relu = helper.make_node("Relu", ["x"], ["y"], name="relu")
    cpu = ["CPUExecutionProvider"]
    base = region_key([relu], ["x"], [], ["y"], cpu, True)
    built = []
    cache = SharedSessions()
    cache.get(base, lambda: built.append(1) or "session")
    for key in (region_key([relu], ["x"], [], ["y"], cpu, False),             # other threads
                region_key([relu], ["x", "w"], [], ["y"], cpu, True),         # other inputs
                region_key([relu], ["x"], ["w"], ["y"], cpu, True),           # other initializers
                region_key([relu], ["x"], [], ["y", "z"], cpu, True),         # other outputs
                region_key([relu], ["x"], [], ["y"], ["DmlExecutionProvider"], True)):
        assert key != base
    assert cache.get(region_key([relu], ["x"], [], ["y"], cpu, True), lambda: "other") == "session"
    assert built == [1] and cache.hits == 1
