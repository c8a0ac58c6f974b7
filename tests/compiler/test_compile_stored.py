"""compile_model(path, stored=load_stored(path)): inspect reads the file once for its report and
its compile. The compile is the one compile_model(path) makes, bit for bit, and the stored proto
the report reads is left as it was read."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.frontend import load_stored
from onnx_dml_lowering.compiler.inspection import inspect_model
from onnx_dml_lowering.ir import DmlLowerError
from tests.builders import graph_model
from tests.paths import REAL


def _same_compile(path: str) -> None:
    stored = load_stored(path)
    before = stored.SerializeToString()
    got, expected = compile_model(path, stored=stored), compile_model(path)
    assert got.to_json() == expected.to_json()
    assert got.model.SerializeToString() == expected.model.SerializeToString()
    assert got.source == expected.source == path
    assert stored.SerializeToString() == before          # the report's proto is untouched


def _same_compile_taken(path: str) -> None:
    """take_stored: the compile takes the stored proto over (inspect without --ep, its report read
    first) and is still the one compile_model(path) makes."""
    got, expected = compile_model(path, stored=load_stored(path), take_stored=True), compile_model(path)
    assert got.to_json() == expected.to_json()
    assert got.model.SerializeToString() == expected.model.SerializeToString()
    assert got.source == expected.source == path


@pytest.mark.parametrize("name", ["ssdlite320_mobilenet_v3.torchscript", "llama.dynamo", "mixtral.torchscript"])
def test_a_real_export_compiles_the_same_from_its_stored_proto(name):
    _same_compile(str(REAL / f"{name}.onnx"))
    _same_compile_taken(str(REAL / f"{name}.onnx"))


def _external_model(tmp_path) -> str:
    model = graph_model([h.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
                         h.make_node("NonZero", ["y"], ["nz"], name="nz")],
                        [("x", T.FLOAT, [2, 64])], [("nz", T.INT64, 2)])
    w = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    model.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, location="ext.data", size_threshold=0)
    return str(path)


def test_external_data_is_resolved_on_the_copy(tmp_path):
    path = _external_model(tmp_path)
    _same_compile(path)
    _same_compile_taken(path)
    report = inspect_model(path)
    assert report["initializers"]["external"]["count"] == 1      # still read as stored


def test_a_short_external_file_is_the_same_one_line(tmp_path):
    path = _external_model(tmp_path)
    (tmp_path / "ext.data").write_bytes(b"\0" * 10)
    with pytest.raises(DmlLowerError) as plain:
        compile_model(path)
    with pytest.raises(DmlLowerError) as from_stored:
        compile_model(path, stored=load_stored(path))
    with pytest.raises(DmlLowerError) as taken:
        compile_model(path, stored=load_stored(path), take_stored=True)
    assert str(from_stored.value) == str(taken.value) == str(plain.value)
    assert "\n" not in str(plain.value)
