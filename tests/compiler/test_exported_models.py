"""Models exported by torch 2.13 (dynamo and TorchScript exporters), committed under
tests/models/, checked on every backend that runs here at shapes other than the export shapes."""
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.check import Tolerances, check
from onnx_dml_lowering.runtime.feeds import random_feeds

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


# Every committed model, and the idioms its compile --json must show lowered.
EXPECTED_IDIOMS = {
    "nonzero": ["nonzero_transpose"], "argwhere": ["nonzero_transpose"],
    "masked_select": ["nonzero_transpose"],
    "nonzero_tuple": ["nonzero_columns"], "where_cond": ["nonzero_columns"],
    "eye.dynamo": ["eye_from_ranges"], "eye_square.dynamo": ["eye_from_ranges"],
    "eye.torchscript": ["eyelike_constant_of_shape"], "eye_square.torchscript": ["eyelike_constant_of_shape"],
    # torch.eye(8) is folded to a constant: an initializer (dynamo) or a Constant node (TorchScript).
    "mlp_sparse": ["constant_diagonal", "nonzero_transpose"],
    # (i - j >= 0) & (i - j < 3) on one Sub, as both exporters write it
    "sliding_window": ["range_comparison_mask"],
}


def expected_idioms(path):
    stem = path.name[:-len(".onnx")]
    return EXPECTED_IDIOMS.get(stem, EXPECTED_IDIOMS.get(stem.split(".")[0]))


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_exported_idioms_are_lowered(path, tmp_path, capsys):
    """What exporters wrap around NonZero / EyeLike is lowered as one idiom each, in compile --json."""
    from onnx_dml_lowering.compiler.cli import main
    out = tmp_path / "c.json"
    assert main(["compile", str(path), "--json", str(out)]) == 0
    placed = json.loads(out.read_text())["placement"]
    assert sorted(p["rule"] for p in placed) == sorted(expected_idioms(path)), placed
    assert all(p["status"] == "lowered" and len(p["dml_operators"]) == 1 for p in placed), placed
    for p in placed:
        if p["rule"] == "constant_diagonal":
            assert p["initializer_bytes_saved"] == 8 * 8 * 4


def test_specialisation_is_cached_per_input_shape():
    compiled = compile_model(MODELS[0].parent / "eye.torchscript.onnx")
    session = compiled.session("cpu")
    for n, m in ((2, 3), (4, 4), (2, 3)):
        compiled.run({"x0": np.ones((n, m), np.float32)})
    # Keyed by input shapes and by the values of shape inputs (here the ConstantOfShape shape).
    assert len(session.specialised) == 2
