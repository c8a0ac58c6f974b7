"""Sequence values (runtime/sequences.py) carried alike by every oracle kind and backend: a sequence
whose tensors differ in shape is one line naming it (never an internal error, never a node blamed),
an empty one has the element type the model declares, and onnx.reference's broadcast failure is
said as one, not as "Issues with types"."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.check import Tolerances, check, make_oracle
from onnx_dml_lowering.runtime.sequences import RaggedSequence, as_array, element_dtype


def model(nodes, inputs, outputs):
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs), opset_imports=[h.make_opsetid("", 21)],
                        ir_version=10)


def ragged():
    """sq = [x, Concat(x, x)]: tensors of shapes [3] and [6]."""
    nodes = [h.make_node("Concat", ["x", "x"], ["xx"], axis=0, name="cat"),
             h.make_node("SequenceConstruct", ["x", "xx"], ["sq"], name="sc")]
    return model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [3])],
                 [h.make_tensor_sequence_value_info("sq", T.FLOAT, None)])


def empty_sequence(elem):
    nodes = [h.make_node("SequenceEmpty", [], ["se"], dtype=elem, name="se_n"), h.make_node("Neg", ["x"], ["y"], name="neg")]
    return model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [3])],
                 [h.make_tensor_sequence_value_info("se", elem, None), h.make_tensor_value_info("y", T.FLOAT, [3])])


FEEDS = {"x": np.array([1, 2, 3], np.float32)}


@pytest.mark.parametrize("kind", ["hybrid", "reference", "ort-cpu"])
def test_a_ragged_sequence_is_one_line_naming_it_on_every_oracle(kind):
    oracle = make_oracle(compile_model(ragged()), kind)
    with pytest.raises(RaggedSequence) as caught:
        oracle.run(FEEDS)
    message = str(caught.value)
    assert "'sq'" in message and "[3], [6]" in message and "\n" not in message
    assert "cannot evaluate" not in message         # both engines evaluated it: no node blamed


@pytest.mark.parametrize("elem", [T.FLOAT, T.INT64, T.FLOAT16])
def test_an_empty_sequence_has_its_declared_element_type_on_every_side(elem):
    want = np.dtype(h.tensor_dtype_to_np_dtype(elem))
    compiled = compile_model(empty_sequence(elem))
    for kind in ("hybrid", "reference", "ort-cpu"):
        assert make_oracle(compiled, kind).run(FEEDS)["se"].dtype == want, kind
    _, report = check(compiled, FEEDS, ["cpu", "ort", "ort-cpu"], Tolerances())
    for backend in report.backends:
        se = next(o for o in backend.outputs if o.output == "se")
        assert se.status == "match" and se.expected_dtype == str(want), (backend.backend, se)


def test_as_array_stacks_equal_tensors_and_spells_both_type_forms():
    stacked = as_array([np.ones(2, np.float32), np.zeros(2, np.float32)], "s")
    assert stacked.shape == (2, 2) and stacked.dtype == np.float32
    assert element_dtype("seq(tensor(int64))") == element_dtype("sequence(tensor(int64))") == np.int64
    assert element_dtype("tensor(float)") is None


def test_a_broadcast_onnx_reference_refuses_is_said_as_one():
    bad = model([h.make_node("Add", ["a", "b"], ["y"], name="add_node")],
                [h.make_tensor_value_info("a", T.FLOAT, ["n"]), h.make_tensor_value_info("b", T.FLOAT, ["m"])],
                [h.make_tensor_value_info("y", T.FLOAT, ["k"])])
    oracle = make_oracle(compile_model(bad), "reference")
    with pytest.raises(DmlLowerError) as caught:
        oracle.run({"a": np.ones(3, np.float32), "b": np.ones(4, np.float32)})
    message = str(caught.value)
    assert "node 'add_node' (Add)" in message and "broadcast" in message and "Issues with types" not in message


@pytest.mark.parametrize("node", [h.make_node("LpNormalization", ["x"], ["y"], p=3, name="lp"),
                                  h.make_node("Celu", ["x"], ["y"], alpha=0.0, name="celu")])
def test_onnx_reference_warnings_stay_off_stderr(node, recwarn, capfd):
    """LpNormalization p=3 (onnxruntime refuses it: the hybrid oracle falls back to onnx.reference)
    and Celu alpha=0 make onnx.reference's numpy warn; neither reaches the user."""
    import warnings
    warnings.simplefilter("always")
    compiled = compile_model(model([node], [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 2, 2])],
                                   [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 2, 2])]))
    feeds = {"x": np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 4, 2, 2)}
    for kind in ("hybrid", "reference"):
        make_oracle(compiled, kind).run(feeds)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    assert "RuntimeWarning" not in capfd.readouterr().err
