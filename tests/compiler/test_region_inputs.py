"""An ONNX region lists each value it reads once, in first-read order, and runs as before."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import OnnxRegion


def model(first: "list[str]"):
    x = h.make_tensor_value_info("x", TP.FLOAT, [4, 4])
    z = h.make_tensor_value_info("z", TP.FLOAT, [4, 4])
    nodes = [h.make_node("Mul", first, ["m"], name="mul"), h.make_node("Add", ["m", "z"], ["a"], name="add"),
             h.make_node("NonZero", ["a"], ["y"], name="nz")]
    g = h.make_graph(nodes, "g", [x, z], [h.make_tensor_value_info("y", TP.INT64, [2, None])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("first,reads", [(["x", "x"], ("x", "z")), (["z", "x"], ("z", "x")), (["x", "z"], ("x", "z"))])
def test_region_reads_each_value_once(first, reads):
    m = model(first)
    compiled = compile_model(m)
    (region,) = [s for s in compiled.graph.steps if isinstance(s, OnnxRegion)]
    assert region.inputs == reads
    rng = np.random.default_rng(0)
    feeds = {n: (rng.standard_normal((4, 4)) * (rng.random((4, 4)) < 0.5)).astype(np.float32) for n in ("x", "z")}
    expected = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.array_equal(compiled.run(feeds, strict=True)["y"], expected)
