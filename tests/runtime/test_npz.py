"""runtime.npz.load_npz, the one .npz reader (--inputs, --oracle F.npz, --load-outputs): an
archive that names an array twice, or an entry holding bytes past the data its header declares,
is one line naming the file and the entry (np.load reads the last of two, and ignores the rest)."""
from __future__ import annotations

import io
import struct
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.npz import load_npz
from onnx_dml_lowering.runtime.saved_outputs import load_golden
from tests.builders import graph_model
from tests.cli_runner import cli


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def _lying(shape: "tuple[int, ...]", data: bytes) -> bytes:
    """A .npy whose float32 header declares `shape`, followed by `data` whatever its length."""
    header = repr({"descr": "<f4", "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def _archive(path, entries, compression=zipfile.ZIP_STORED) -> str:
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return str(path)


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("what", ["inputs file", "oracle file", "outputs file"])
def test_an_array_named_twice_is_refused(what, tmp_path):
    with pytest.warns(UserWarning, match="Duplicate name"):
        path = _archive(tmp_path / "dup.npz", [("x.npy", _npy(X)), ("x.npy", _npy(X * 0))])
    assert np.load(path)["x"].max() == 0            # numpy's reading: the last, silently
    with pytest.raises(DmlLowerError, match=rf"^{what} '{path}' holds entry 'x' 2 times: which one counts would be "
                                            r"a guess"):
        load_npz(path, what)


@pytest.mark.parametrize("extra", [1, 904])
def test_bytes_past_the_declared_data_are_refused(extra, tmp_path):
    path = _archive(tmp_path / "long.npz", [("x.npy", _lying((2, 3, 4), X.tobytes() + b"\0" * extra))])
    np.testing.assert_array_equal(np.load(path)["x"], X)          # numpy's reading ignores them
    with pytest.raises(DmlLowerError, match=rf"^inputs file '{path}': entry 'x' holds {extra} bytes past the "
                                            r"float32 \[2, 3, 4\] data its header declares$"):
        load_npz(path)


def test_a_golden_file_goes_through_the_same_check(tmp_path):
    path = _archive(tmp_path / "g.npz", [("y.npy", _lying((3,), np.ones(3, np.float32).tobytes() + b"\0" * 8))])
    with pytest.raises(DmlLowerError, match=r"^oracle file .* entry 'y' holds 8 bytes past"):
        load_golden(path)


def test_a_deflated_tail_is_refused_without_inflating_it(tmp_path, monkeypatch):
    """16 MB of zeros past a 24-element header: one byte of the tail is read, not the tail."""
    tail = 16 << 20
    path = _archive(tmp_path / "bomb.npz", [("x.npy", _lying((2, 3, 4), b"\0" * tail))], zipfile.ZIP_DEFLATED)
    read, original = [], zipfile.ZipExtFile.read
    monkeypatch.setattr(zipfile.ZipExtFile, "read", lambda self, n=-1: read.append(n) or original(self, n))
    with pytest.raises(DmlLowerError, match=rf"holds {tail - 96} bytes past"):
        load_npz(path)
    assert -1 not in read and sum(read) < 4096, read


@pytest.mark.parametrize("array", [X, np.zeros((0, 4), np.float32), np.asfortranarray(X), np.array(["a", "bc"])])
def test_what_numpy_writes_is_read_back(array, tmp_path):
    path = str(tmp_path / "ok.npz")
    np.savez(path, x=array, y=X)
    got = load_npz(path)
    np.testing.assert_array_equal(got["x"].astype(array.dtype), array)
    np.testing.assert_array_equal(got["y"], X)


def test_run_refuses_the_archive_in_one_line(tmp_path, capsys):
    model = graph_model([h.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [2, 3, 4])], [("y", T.FLOAT, [2, 3, 4])])
    onnx.save(model, tmp_path / "m.onnx")
    path = _archive(tmp_path / "long.npz", [("x.npy", _lying((2, 3, 4), X.tobytes() + b"\0" * 4))])
    code, out, err = cli(["run", tmp_path / "m.onnx", "--inputs", path], capsys)
    assert code == 2 and out == "" and err == f"dml-lower: error: inputs file '{path}': entry 'x' holds 4 bytes past " \
                                               "the float32 [2, 3, 4] data its header declares\n"
