"""An input ONNX defines as one value (Trilu's k) holding several is no model onnxruntime or
onnx.reference runs: one line naming the node, never a verdict on its first value (the oracle
and the lowering read k[0] and every backend MATCHed)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from tests.builders import graph_model
from tests.cli_runner import cli


def trilu(k_value: "np.ndarray | None", k_input: "list | None" = None, fill: bool = False) -> onnx.ModelProto:
    """Trilu(x, k) with k an initializer (k_value) or a graph input of shape k_input; `fill`: over
    ConstantOfShape(Shape(x)) (the constant-fill idiom) instead of x."""
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("ConstantOfShape", ["s"], ["c"], name="fill", value=h.make_tensor("v", T.FLOAT, [1], [2.0]))
             ] if fill else []
    nodes.append(h.make_node("Trilu", ["c" if fill else "x", "k"], ["y"], name="tri", upper=1))
    inputs = [("x", T.FLOAT, [4, 5])] + ([("k", T.INT64, k_input)] if k_input is not None else [])
    inits = {"k": k_value} if k_value is not None else {}
    return graph_model(nodes, inputs, [("y", T.FLOAT, [4, 5])], inits, opset=14)


@pytest.mark.parametrize("model, feeds", [
    (trilu(np.array([1, 2], np.int64)), {}),
    (trilu(np.array([1, 2], np.int64), fill=True), {}),
    (trilu(None, k_input=[2]), {"k": np.array([1, 2], np.int64)}),
    (trilu(None, k_input=["n"]), {"k": np.array([0, 3, 1], np.int64)}),
])
@pytest.mark.parametrize("backends", ["cpu", "cpu,ort", "ort-cpu"])
def test_a_trilu_k_of_several_values_is_one_line(model, feeds, backends, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    args = ["check", path, "--backends", backends, "-q"]
    if feeds:
        np.savez(tmp_path / "in.npz", x=np.ones((4, 5), np.float32), **feeds)
        args += ["--inputs", tmp_path / "in.npz"]
    code, out, err = cli(args, capsys)
    assert code == 2 and "MATCH" not in out, out + err
    assert err.count("\n") == 1 and "node 'tri' (Trilu)" in err and "input k holds" in err, err


def test_a_k_of_one_value_in_a_1d_tensor_is_still_checked(tmp_path, capsys):
    """k of shape [1] (onnxruntime and onnx.reference read it) is a Trilu like any other."""
    path = tmp_path / "m.onnx"
    onnx.save(trilu(np.array([2], np.int64)), str(path))
    code, out, err = cli(["check", path, "--backends", "cpu,ort,ort-cpu", "-q"], capsys)
    assert code == 0 and "all outputs match" in out, out + err
