"""Models exported by torch 2.13 (dynamo and TorchScript exporters), committed under
tests/models/, checked on every backend that runs here at shapes other than the export shapes."""
from pathlib import Path

import numpy as np
import onnx
import pytest

from compiler import compile_model
from runtime.check import Tolerances, check
from runtime.feeds import random_feeds

MODELS = sorted((Path(__file__).parent.parent / "models").glob("*.onnx"))
SIZES = {"small": 1, "medium": 6, "large": 11}


def symbols(model: onnx.ModelProto) -> "list[str]":
    return sorted({d.dim_param for vi in model.graph.input for d in vi.type.tensor_type.shape.dim if d.dim_param})


def test_exported_models_are_present():
    names = {p.name for p in MODELS}
    for expected in ("nonzero.dynamo.onnx", "nonzero.torchscript.onnx", "argwhere.dynamo.onnx",
                     "masked_select.torchscript.onnx", "where_cond.dynamo.onnx", "nonzero_tuple.torchscript.onnx",
                     "eye.dynamo.onnx", "eye.torchscript.onnx", "mlp_sparse.dynamo.onnx"):
        assert expected in names


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
@pytest.mark.parametrize("size", sorted(SIZES))
def test_exported_model_matches_onnx_on_every_backend(path, size):
    compiled = compile_model(path)
    # Distinct sizes per symbol, none equal to the export-time shapes (3..5 for most of them).
    dims = {name: SIZES[size] + 2 * index for index, name in enumerate(symbols(compiled.model))}
    assert dims, "exported with dynamic shapes"
    for seed in (0, 1):
        feeds = random_feeds(compiled.inputs, seed=seed, dims=dims)
        _, report = check(compiled, feeds, ["cpu", "ort", "ort-cpu"], Tolerances(1e-5, 1e-4))
        details = [(o.backend, o.output, o.detail) for b in report.backends for o in b.outputs if o.status != "match"]
        assert report.ok, ([b.error for b in report.backends], details)


EXPECTED_IDIOMS = {"nonzero": "nonzero_transpose", "argwhere": "nonzero_transpose",
                   "masked_select": "nonzero_transpose", "mlp_sparse": "nonzero_transpose",
                   "nonzero_tuple": "nonzero_columns", "where_cond": "nonzero_columns"}


@pytest.mark.parametrize("path", [p for p in MODELS if p.name.split(".")[0] in EXPECTED_IDIOMS],
                         ids=lambda p: p.stem)
def test_exported_nonzero_idiom_is_lowered(path):
    """What exporters wrap around NonZero is lowered as one idiom, visible in compile --json."""
    compiled = compile_model(path)
    placed = [p.to_dict() for p in compiled.placement]
    expected = EXPECTED_IDIOMS[path.name.split(".")[0]]
    assert [p["rule"] for p in placed] == [expected] and placed[0]["status"] == "lowered", placed
    assert placed[0]["dml_operators"] == ["NONZERO_COORDINATES"]


def test_specialisation_is_cached_per_input_shape():
    compiled = compile_model(MODELS[0].parent / "eye.torchscript.onnx")
    session = compiled.session("cpu")
    for n, m in ((2, 3), (4, 4), (2, 3)):
        compiled.run({"x0": np.ones((n, m), np.float32)})
    keys = [key for key in session.specialised]
    assert len(keys) == 2 and {k[1][0][1] for k in keys} == {(2, 3), (4, 4)}
