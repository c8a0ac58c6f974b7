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


def _descriptor_routes(tmp_path, fd: int) -> "list[str]":
    """Every name of descriptor `fd` of this process: /dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N and
    a symbolic link to /dev/fd/N (the magic /proc links lead to the open file, not to a path)."""
    import os
    link = tmp_path / f"to_fd{fd}"
    link.symlink_to(f"/dev/fd/{fd}")
    return [f"/dev/fd/{fd}", f"/proc/self/fd/{fd}", f"/proc/{os.getpid()}/fd/{fd}", str(link)]


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/fd"), reason="no /proc descriptor links (not Linux)")
def test_a_descriptor_open_on_the_input_is_the_input(tmp_path):
    """`--json /dev/fd/3` of `3<>model.onnx` wrote the report into the model through the descriptor:
    the file a descriptor is open on is checked like any other name of it, and nothing is written."""
    import os
    model = tmp_path / "m.onnx"
    model.write_bytes(b"the model")
    input_files.note_path(model, "model file 'm.onnx'")
    fd = os.open(model, os.O_RDWR)
    try:
        for route in _descriptor_routes(tmp_path, fd):
            with pytest.raises(DmlLowerError, match="model file 'm.onnx' this command reads"):
                write_text(route, "the JSON report", "{}")
    finally:
        os.close(fd)
    assert model.read_bytes() == b"the model"


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/fd"), reason="no /proc descriptor links (not Linux)")
def test_a_descriptor_open_on_another_file_is_written_in_place(tmp_path):
    """The refusal is of the inputs only: a descriptor open on a file nobody read is written."""
    import os
    model, other = tmp_path / "m.onnx", tmp_path / "other.txt"
    model.write_bytes(b"the model")
    other.write_bytes(b"")
    input_files.note_path(model, "model file 'm.onnx'")
    fd = os.open(other, os.O_WRONLY)
    try:
        write_text(f"/dev/fd/{fd}", "the JSON report", "{}")
    finally:
        os.close(fd)
    assert other.read_text() == "{}" and model.read_bytes() == b"the model"


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/fd"), reason="no /proc descriptor links (not Linux)")
def test_another_process_s_descriptor_on_the_input_is_the_input(tmp_path):
    """/proc/PID/fd/N of another process (the shell that ran `3<>m.onnx`, a supervising parent) leads
    to the same open file: refused, whatever its link's text says."""
    import os
    import subprocess
    import sys
    model = tmp_path / "m.onnx"
    model.write_bytes(b"the model")
    input_files.note_path(model, "model file 'm.onnx'")
    fd = os.open(model, os.O_RDWR)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(fd,))
    try:
        with pytest.raises(DmlLowerError, match="model file 'm.onnx' this command reads"):
            write_text(f"/proc/{holder.pid}/fd/{fd}", "the JSON report", "{}")
    finally:
        holder.kill()
        holder.wait()
        os.close(fd)
    assert model.read_bytes() == b"the model"
