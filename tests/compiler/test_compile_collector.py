"""compile_model pauses Python's cyclic garbage collector while it builds (everything it allocates
stays alive until it returns) and leaves it as the caller had it, on success and on error; so does
the partition, computed when first asked for (CompiledModel.partition)."""
import gc

import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import partition as partition_module
from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import DmlLowerError


def nonzero_model(valid: bool = True):
    node = h.make_node("NonZero", ["x"], ["y"], name="nz")
    out_type = T.INT64 if valid else T.FLOAT           # NonZero gives int64: strict inference refuses float
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                         [h.make_tensor_value_info("y", out_type, [2, None])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


@pytest.fixture
def collector_state():
    enabled = gc.isenabled()
    yield
    gc.enable() if enabled else gc.disable()


@pytest.mark.parametrize("caller_enabled", [True, False])
def test_the_collector_is_paused_during_compile_and_restored_after(monkeypatch, collector_state, caller_enabled):
    seen = []
    real = partition_module.partition

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)
    monkeypatch.setattr(partition_module, "partition", spy)
    gc.enable() if caller_enabled else gc.disable()
    compiled = compile_model(nonzero_model())
    assert seen == [] and gc.isenabled() == caller_enabled       # nothing asked for the partition yet
    assert [p.status for p in compiled.partition.placement] == ["lowered"]
    assert [p.status for p in compiled.placement] == ["lowered"]
    assert seen == [False] and gc.isenabled() == caller_enabled  # computed once, the collector paused


@pytest.mark.parametrize("caller_enabled", [True, False])
def test_the_collector_is_restored_when_compile_fails(collector_state, caller_enabled):
    gc.enable() if caller_enabled else gc.disable()
    with pytest.raises(DmlLowerError, match="shape inference"):
        compile_model(nonzero_model(valid=False))
    assert gc.isenabled() == caller_enabled
