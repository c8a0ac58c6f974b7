"""ONNX-region sessions: one intra-op thread and no spinning for small regions, defaults otherwise; the results do not change."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.ort.sessions import TINY_ELEMENTS, few_elements


def relu_nonzero(side: int):
    x = h.make_tensor_value_info("x", TP.FLOAT, [side, side])
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("NonZero", ["r"], ["y"], name="nz")]
    graph = h.make_graph(nodes, "g", [x], [h.make_tensor_value_info("y", TP.INT64, [2, None])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("side,threads", [(8, 1), (512, 1), (513, 0)])
def test_region_threads_follow_the_region_size(side, threads):
    model = relu_nonzero(side)
    x = np.random.default_rng(side).standard_normal((side, side)).astype(np.float32)
    compiled = compile_model(model)
    got = compiled.run({"x": x}, strict=True)["y"]
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    regions = compiled.session().regions
    (session,) = regions.engine.sessions()
    options = session.get_session_options()
    assert options.intra_op_num_threads == threads          # 0: onnxruntime's default pool
    if threads == 1:                  # no pool to spin; larger regions keep onnxruntime's defaults
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    else:
        with pytest.raises(RuntimeError, match="does not have configuration"):
            options.get_session_config_entry("session.intra_op.allow_spinning")


@pytest.mark.parametrize("dims,fed,tiny", [([], 0, True), ([[512, 512]], 0, True), ([[512, 512]], 1, False),
                                           ([[2, 3]], TINY_ELEMENTS - 6, True), ([[2, 3]], TINY_ELEMENTS - 5, False)])
def test_few_elements_counts_initializers_and_fed_inputs(dims, fed, tiny):
    tensors = [h.make_tensor(f"t{i}", TP.FLOAT, d, np.zeros(int(np.prod(d))).tolist()) for i, d in enumerate(dims)]
    assert few_elements(tensors, fed) is tiny
