"""Writes the paddle2onnx exports in this folder: the causal mask paddle writes as
Expand(1.0) -> Identity -> Trilu.

Run by hand in a separate venv (paddlepaddle 3.3.1 and paddle2onnx 2.1.0 from PyPI; paddle2onnx also
imports packaging, which it does not declare); the .onnx files it writes are committed so that the
test suite never needs paddle:

    python -m venv /tmp/pd && /tmp/pd/bin/pip install paddlepaddle==3.3.1 paddle2onnx==2.1.0 packaging
    /tmp/pd/bin/python tests/models/paddle2onnx/export_paddle_models.py
"""
from __future__ import annotations

from pathlib import Path

import onnx
import paddle
import paddle2onnx

HERE = Path(__file__).parent


class CausalScores(paddle.nn.Layer):
    """scores * tril(ones(S, S)): a decoder's causal mask over scores [B, S, S]."""

    def forward(self, scores):
        s = paddle.shape(scores)[-1]
        mask = paddle.tril(paddle.ones([s, s], dtype="float32"))
        return scores * mask


if __name__ == "__main__":
    print("paddle", paddle.__version__, "paddle2onnx", paddle2onnx.__version__)
    layer = CausalScores()
    layer.eval()
    spec = [paddle.static.InputSpec([None, None, None], "float32", "scores")]
    paddle.onnx.export(layer, str(HERE / "causal_scores"), input_spec=spec, opset_version=17)
    model = onnx.load(HERE / "causal_scores.onnx")
    print([n.op_type for n in model.graph.node])
