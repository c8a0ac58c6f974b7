"""runtime/compiled_view.py: ModelView, the runtime's own CompiledView of a model nothing of which
is lowered. check, the oracle and the provider backends run on it with no compiler in the process
(tests/compiler/test_compiled_view.py holds its facts to compile_model's)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.check import Tolerances, check, make_oracle
from onnx_dml_lowering.runtime.compiled_view import ModelView
from tests.builders import graph_model
from tests.oracle import reference

SEED = 7


def nonzero_then_relu():
    """x -> NonZero -> Cast(float) -> Relu -> y; a default-carrying input b added to x."""
    nodes = [h.make_node("Add", ["x", "b"], ["s"], name="add"),
             h.make_node("NonZero", ["s"], ["nz"], name="nz"),
             h.make_node("Cast", ["nz"], ["f"], name="cast", to=T.FLOAT),
             h.make_node("Relu", ["f"], ["y"], name="relu")]
    model = graph_model(nodes, [("x", T.FLOAT, [3, 4]), ("b", T.FLOAT, [3, 4])], [("y", T.FLOAT, [None, None])])
    model.graph.initializer.append(h.make_tensor("b", T.FLOAT, [3, 4], [0.0] * 12))
    return model


def feeds():
    rng = np.random.default_rng(SEED)
    return {"x": (rng.random((3, 4)) > 0.5).astype(np.float32)}


def test_model_view_reads_what_check_needs():
    view = ModelView(nonzero_then_relu())
    assert [vi.name for vi in view.inputs] == ["x"] and [vi.name for vi in view.optional_inputs] == ["b"]
    assert view.output_names == ["y"] and list(view.initializers) == ["b"]
    # shape inference ran: the intermediate values are typed
    assert view.types["nz"].onnx_type == T.INT64 and view.types["f"].onnx_type == T.FLOAT
    assert view.placement == [] and not view.partition.generated and not view.partition.bodies
    assert view.shared_sessions is view.shared_sessions
    assert view.source is not view.model and not view.source.graph.value_info     # run as given


def test_check_on_a_provider_backend_needs_no_compiler():
    model = nonzero_then_relu()
    x = feeds()
    _, report = check(ModelView(model), x, ["ort-cpu"], Tolerances())
    (backend,) = report.backends
    assert report.ok and [(o.output, o.status) for o in backend.outputs] == [("y", "match")]
    assert backend.ran == "the ModelProto as given (serialised unmodified)"
    want = reference(model, {**x, "b": np.zeros((3, 4), np.float32)})
    np.testing.assert_array_equal(report.expected["y"], want["y"])


@pytest.mark.parametrize("kind", ["hybrid", "reference", "ort-cpu"])
def test_the_oracles_run_on_a_model_view(kind):
    model = nonzero_then_relu()
    x = {**feeds(), "b": np.ones((3, 4), np.float32)}
    got = make_oracle(ModelView(model), kind).run(x)
    np.testing.assert_array_equal(got["y"], reference(model, x)["y"])


@pytest.mark.parametrize("backend", ["cpu", "ort"])
def test_a_lowered_backend_refuses_a_model_view_in_one_line(backend):
    with pytest.raises(DmlLowerError) as caught:
        check(ModelView(nonzero_then_relu()), feeds(), [backend], Tolerances())
    assert str(caught.value) == (f"backend {backend!r} runs the lowered graph, and this model is a runtime "
                                 "ModelView (nothing lowered): compile_model gives the compiled model it runs")


def test_a_model_shape_inference_refuses_is_one_line():
    bad = graph_model([h.make_node("Add", ["x", "y"], ["z"], name="add")],
                      [("x", T.FLOAT, [3]), ("y", T.FLOAT, [4])], [("z", T.FLOAT, None)])
    with pytest.raises(DmlLowerError) as caught:
        ModelView(bad)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("model 'test': onnx shape inference refuses it: ")


def test_nodes_must_be_named_once():
    unnamed = graph_model([h.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [3])], [("y", T.FLOAT, [3])])
    with pytest.raises(DmlLowerError, match="^model 'test': a Relu node has no name; a ModelView reads nodes by name"):
        ModelView(unnamed)
    twice = graph_model([h.make_node("Relu", ["x"], ["r"], name="n"), h.make_node("Neg", ["r"], ["y"], name="n")],
                        [("x", T.FLOAT, [3])], [("y", T.FLOAT, [3])])
    with pytest.raises(DmlLowerError, match="^model 'test': node 'n' is named twice"):
        ModelView(twice)
