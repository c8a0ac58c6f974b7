"""CompiledModel is the LoweredView runtime reads (make typecheck holds the types; compiled.py's
_what_runtime_reads), and runtime's own ModelView reads a model as compile_model does: the same
inputs, defaults, outputs, initializers and value types, so a runtime test may use either."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.runtime.compiled_view import ModelView
from tests.runtime.test_compiled_view import nonzero_then_relu
from tests.runtime.test_oracle import initializer_output_model

MODELS = {"nonzero_then_relu": nonzero_then_relu,
          **{path.rsplit("/", 1)[-1]: (lambda path=path: onnx.load(path)) for path in map(str, example_paths())}}


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_model_view_reads_a_model_as_compile_model_does(make):
    compiled, view = compile_model(make()), ModelView(make())
    assert [vi.name for vi in view.inputs] == [vi.name for vi in compiled.inputs]
    assert [vi.name for vi in view.optional_inputs] == [vi.name for vi in compiled.optional_inputs]
    assert view.output_names == compiled.output_names
    # the compiled model's initializers leave out those its lowering generates
    assert set(compiled.initializers) <= set(view.initializers)
    assert set(view.initializers) - set(compiled.initializers) <= set(compiled.partition.generated)
    shared = set(view.types) & set(compiled.types)
    assert shared and {n: view.types[n] for n in shared} == {n: compiled.types[n] for n in shared}


def test_the_lowered_run_gives_a_graph_output_that_is_an_initializer():
    """The lowered run's half of tests/runtime/test_oracle.py::test_a_graph_output_that_is_an_initializer."""
    w = np.array([1.5, -2.0], np.float32)
    assert np.array_equal(compile_model(initializer_output_model(w)).run({"x": np.zeros((3, 3), np.float32)})["w"], w)
