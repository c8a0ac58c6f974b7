"""The bundled example models: committed files equal their builders, and each checks clean."""
import onnx
import pytest

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli.check import check_model
from onnx_dml_lowering.compiler.examples import BUILDERS, example_paths
from onnx_dml_lowering.runtime.feeds import random_feeds


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_committed_example_matches_builder(name):
    from onnx_dml_lowering.compiler.examples import HERE
    committed = onnx.load(HERE / f"{name}.onnx")
    assert committed.SerializeToString() == BUILDERS[name]().SerializeToString()


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.stem)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_example_checks_clean(path, seed):
    compiled = compile_model(path)
    _, reports = check_model(compiled, random_feeds(compiled.inputs, seed=seed), ["cpu"], 0.0, 0.0)
    assert all(r.ok for r in reports), [o.detail for r in reports for o in r.outputs]
