"""Every numeric option takes a negative value written after a space (`--atol -1e-9`) as its value,
so the option's own message refuses it, never argparse's "expected one argument"."""
from __future__ import annotations

import pytest
from onnx import TensorProto as T
from onnx import helper as h

from tests.cli_runner import cli_exits


@pytest.mark.parametrize("option, value, said", [
    ("--atol", "-1e-9", "a tolerance is 0 or more"), ("--rtol", "-1", "a tolerance is 0 or more"),
    ("--atol", "-.5", "a tolerance is 0 or more"), ("--seed", "-3", "--seed -3"),
    ("--iterations", "-2", "--iterations -2")])
def test_a_negative_number_after_a_space_reaches_the_option(tmp_path, capsys, option, value, said):
    model = h.make_model(h.make_graph([h.make_node("Neg", ["x"], ["y"], name="neg")], "g",
                                      [h.make_tensor_value_info("x", T.FLOAT, [2])],
                                      [h.make_tensor_value_info("y", T.FLOAT, [2])]),
                         opset_imports=[h.make_opsetid("", 21)], ir_version=10)
    path = tmp_path / "neg.onnx"
    path.write_bytes(model.SerializeToString())
    code, _, err = cli_exits(["check", path, "--backends", "cpu", option, value], capsys)
    assert code == 2 and said in err and "expected one argument" not in err, err
    assert err.count("\n") == 1
