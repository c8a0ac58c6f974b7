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


def contrib_model(then_relu: bool = False):
    """com.microsoft's FusedMatMul (what onnxruntime's transformer optimizer writes) feeding a NonZero:
    onnx's shape inference knows no com.microsoft schema, so the NonZero's input has no type."""
    nodes = [h.make_node("FusedMatMul", ["a", "b"], ["c"], domain="com.microsoft", name="fmm", alpha=2.0, transB=1),
             h.make_node("NonZero", ["c"], ["y"], name="nz")]
    if then_relu:           # c read by another node as well
        nodes.append(h.make_node("Relu", ["c"], ["r"], name="relu"))
    outputs = [h.make_tensor_value_info("y", TP.INT64, [2, None])]
    outputs += [h.make_tensor_value_info("r", TP.FLOAT, [3, 5])] if then_relu else []
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("a", TP.FLOAT, [3, 4]),
                                  h.make_tensor_value_info("b", TP.FLOAT, [5, 4])], outputs)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)], ir_version=8)


@pytest.mark.parametrize("then_relu", [False, True])
def test_a_custom_domain_value_of_unknown_type_runs_and_says_why_it_stays_onnx(then_relu):
    """The region that computes it runs on onnxruntime (which types an output from its producer),
    the oracle and every backend agree with onnxruntime, and the placement names the unknown type,
    not a 'type 0'."""
    from onnx_dml_lowering.runtime.check import Tolerances, check
    m = contrib_model(then_relu)
    compiled = compile_model(m)
    (entry,) = compiled.placement
    assert entry.status == "onnx" and "input type is unknown before the run" in entry.reason, entry.reason
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((3, 4)).astype(np.float32), "b": rng.standard_normal((5, 4)).astype(np.float32)}
    feeds["a"][0] = 0                               # a row of zeros: some coordinates, not all
    expected = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.array_equal(compiled.run(feeds, strict=True)["y"], expected)
    _, report = check(compiled, feeds, ["cpu", "ort", "ort-cpu"], Tolerances())
    assert len(report.backends[0].outputs) == 1 + then_relu
    assert report.ok and all(o.status == "match" for b in report.backends for o in b.outputs), report.to_dict()
