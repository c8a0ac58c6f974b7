"""No output replaces a file the process read as input (runtime.input_files, the one writer)."""
from __future__ import annotations

import pytest

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime import input_files
from onnx_dml_lowering.runtime.output_file import write_text


@pytest.fixture(autouse=True)
def _fresh_registry():
    input_files.forget_all()
    yield
    input_files.forget_all()


def test_the_writer_refuses_a_file_read_as_input_and_leaves_it(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"the model")
    input_files.note_path(model, "model file 'm.onnx'")
    with pytest.raises(DmlLowerError, match="that is the model file 'm.onnx' this command reads"):
        write_text(model, "the JSON report", "{}")
    assert model.read_bytes() == b"the model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]       # no temporary behind


def test_a_link_to_the_input_is_the_input(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"the model")
    input_files.note_path(model, "model file 'm.onnx'")
    (tmp_path / "link.json").symlink_to(model)
    with pytest.raises(DmlLowerError, match="this command reads"):
        write_text(tmp_path / "link.json", "the JSON report", "{}")
    assert model.read_bytes() == b"the model"


def test_other_files_and_forgotten_inputs_are_written(tmp_path):
    model, report = tmp_path / "m.onnx", tmp_path / "r.json"
    model.write_bytes(b"the model")
    report.write_text("old")
    input_files.note_path(model, "model file 'm.onnx'")
    write_text(report, "the JSON report", "{}")                # a file nobody read: replaced
    assert report.read_text() == "{}"
    input_files.forget_all()                                    # optimize -o IN.onnx, once all is read
    write_text(model, "the optimized model", "new")
    assert model.read_text() == "new"
