"""Initializers that are also graph inputs (IR < 4 models, keep_initializers_as_inputs exports): unfed,
the initializer is the default; fed, the feed wins, shape included, on every backend and oracle.
The oracle here is onnx.reference on the same graph with x a plain input fed what should be used."""
from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.runtime.check import Tolerances, check
from tests.builders import graph_model
from tests.oracle import assert_outputs_same, reference

DEFAULT = np.array([[1, 0, 2, 0], [0, 0, 3, 0], [4, 0, 0, 5]], np.float32)
OUTPUTS = [("eye", T.FLOAT, ["a", "b"]), ("nz", T.INT64, [2, None]), ("tri", T.FLOAT, ["a", "b"]),
           ("relu", T.FLOAT, ["a", "b"])]


def _nodes():
    return [h.make_node("EyeLike", ["x"], ["eye"], k=1), h.make_node("NonZero", ["x"], ["nz"]),
            h.make_node("Trilu", ["x"], ["tri"], upper=0), h.make_node("Relu", ["x"], ["relu"])]


def with_default(ir_version: int):
    model = graph_model(_nodes(), [("x", T.FLOAT, ["a", "b"])], OUTPUTS, opset=14)
    model.graph.initializer.append(numpy_helper.from_array(DEFAULT, "x"))
    model.ir_version = ir_version
    return model


def plain():
    return graph_model(_nodes(), [("x", T.FLOAT, ["a", "b"])], OUTPUTS, opset=14)


FEEDS = {
    "unfed": None,
    "same shape": np.arange(12, dtype=np.float32).reshape(3, 4) % 3,
    "other shape": (np.arange(10, dtype=np.float32).reshape(2, 5) % 4),
    "wide": np.ones((2, 7), np.float32),
}


@pytest.mark.parametrize("ir_version", [3, 8])
@pytest.mark.parametrize("feed", list(FEEDS))
def test_feed_wins_default_otherwise(ir_version: int, feed: str) -> None:
    value = FEEDS[feed]
    feeds = {} if value is None else {"x": value}
    expected = reference(plain(), {"x": DEFAULT if value is None else value})
    compiled = compile_model(with_default(ir_version))
    for backend in ("cpu", "ort"):
        assert_outputs_same(compiled.run(feeds, backend=backend), expected)
    for oracle in ("hybrid", "reference", "ort-cpu"):
        _, report = check(compiled, feeds, ["cpu", "ort", "ort-cpu"], Tolerances(), oracle=oracle)
        statuses = {(o.backend, o.output): o.status for b in report.backends for o in b.outputs}
        # ort-cpu runs the file as shipped: below IR version 4 onnxruntime takes the initializer as
        # a constant (no input x), so a feed cannot override it there: a MISMATCH, as it is
        if ir_version < 4 and value is not None:
            shipped = {k: v for k, v in statuses.items() if k[0] == "ort-cpu"}
            assert "mismatch" in shipped.values(), shipped
            assert_outputs_same(report.backends[2].values, reference(plain(), {"x": DEFAULT}))
            statuses = {k: v for k, v in statuses.items() if k[0] != "ort-cpu"}
        assert set(statuses.values()) == {"match"}, statuses
        assert_outputs_same(report.expected, expected)
        assert list(report.defaults) == (["x"] if value is None else [])


def test_cli_says_which_defaults_were_used(tmp_path, capsys) -> None:
    import onnx
    path = tmp_path / "m.onnx"
    onnx.save(with_default(3), str(path))
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "inputs not fed, their initializer used as the default: x (float32 [3x4])" in out
    report = tmp_path / "r.json"
    assert main(["check", str(path), "--backends", "cpu,ort-cpu", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "initializer used as the default: x (float32 [3x4])" in out
    assert json.loads(report.read_text())["initializer_defaults"] == {"x": {"dtype": "float32", "shape": [3, 4]}}


def test_feed_initializers_draws_random_values_at_the_given_dims(tmp_path, capsys) -> None:
    import onnx
    path = tmp_path / "m.onnx"
    onnx.save(with_default(8), str(path))
    saved = tmp_path / "feeds.npz"
    assert main(["check", str(path), "--feed-initializers", "--dim", "a=2", "--dim", "b=6", "--backends",
                 "cpu,ort,ort-cpu", "--save-inputs", str(saved), "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "initializer used as the default" not in out and "MISMATCH" not in out
    with np.load(saved) as data:
        x = data["x"]
    assert x.shape == (2, 6) and not np.array_equal(x[:2, :4], DEFAULT[:2])
    compiled = compile_model(with_default(8))
    # atol 0: values equal (onnxruntime's Relu keeps -0.0 where onnx.reference gives +0.0)
    assert_outputs_same(compiled.run({"x": x}), reference(plain(), {"x": x}), atol=0.0)
