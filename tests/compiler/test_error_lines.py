"""Real onnxruntime failures quoted in dml-lower's one-line errors: the message's end (what went
wrong) is kept, onnxruntime's source path and C++ signature are not (ir.errors.brief)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir.errors import first_line
from tests.builders import graph_model
from tests.cli_runner import cli


@pytest.fixture()
def bad_reshape(tmp_path):
    """A Reshape to {4, -1} that shape inference accepts ([n] input) and onnxruntime refuses at n=6."""
    model = graph_model([h.make_node("Reshape", ["x", "s"], ["y"], name="r")], [("x", T.FLOAT, ["n"])],
                        [("y", T.FLOAT, ["a", "b"])], {"s": np.array([4, -1], np.int64)})
    path = tmp_path / "reshape.onnx"
    onnx.save(model, path)
    return path


def _onnxruntime_message(path) -> str:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception) as caught:
        session.run(None, {"x": np.zeros(6, np.float32)})
    return str(caught.value)


def test_first_line_of_a_real_onnxruntime_failure(bad_reshape) -> None:
    raw = _onnxruntime_message(bad_reshape)
    line = first_line(RuntimeError(raw))
    assert "reshape_helper" not in line and "ReshapeHelper" not in line
    # what onnxruntime says after its source location survives whole, whatever its length
    assert line.endswith(raw.rsplit(" was false. ", 1)[-1].strip())
    assert line.startswith("[ONNXRuntimeError]")


@pytest.mark.parametrize("argv", [
    ["run", "--backends", "ort-cpu"],
    ["check", "--backends", "ort-cpu"],
    ["check", "--backends", "cpu", "--oracle", "ort-cpu"],
])
def test_cli_error_line_keeps_the_reason(bad_reshape, argv, capsys) -> None:
    code, out, err = cli([argv[0], bad_reshape, "--dim", "n=6", *argv[1:]], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("dml-lower: error: ")
    assert "/onnxruntime" not in err and "ReshapeHelper" not in err
    assert err.rstrip().endswith("Input shape:{6}, requested shape:{4,-1}")
