"""Writes the jax2onnx exports in this folder: the idioms jax / flax write for eyes and causal masks.

Run by hand in a separate venv (jax2onnx 0.17.1 with jax 0.10.2 and flax 0.12.8, from PyPI); the
.onnx files it writes are committed so that the test suite never needs jax:

    python -m venv /tmp/j2o && /tmp/j2o/bin/pip install jax2onnx==0.17.1
    /tmp/j2o/bin/python tests/models/jax2onnx/export_jax_models.py
"""
from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import onnx
from flax import nnx
from jax2onnx import to_onnx

HERE = Path(__file__).parent


def causal_mask(x):
    """flax.nnx's causal mask: Range -> Reshape[1, S] -> Expand[B, S] -> Reshape[B, S, 1] >= Reshape[B, 1, S]."""
    return nnx.make_causal_mask(x)


def identity_matmul(x):
    """jnp.identity: Range -> Unsqueeze -> Expand -> Cast(int32) -> Add(0) -> Equal -> Cast."""
    return x @ jnp.identity(6, dtype=x.dtype)


def eye_add(x):
    """jnp.eye(n) of a static n: written as EyeLike over ConstantOfShape by this jax2onnx."""
    return x + jnp.eye(x.shape[0], dtype=x.dtype)


MODELS = {
    "flax_causal_mask.dynamic_batch": (causal_mask, [("B", 8)]),
    "flax_causal_mask.static": (causal_mask, [(2, 8)]),
    "jnp_identity": (identity_matmul, [(3, 6)]),
    "jnp_eye": (eye_add, [(5, 5)]),
}


if __name__ == "__main__":
    for name, (fn, shapes) in MODELS.items():
        model = to_onnx(fn, shapes)
        onnx.checker.check_model(model)
        onnx.save(model, HERE / f"{name}.onnx")
        print(name, [n.op_type for n in model.graph.node])
