"""The models that make the installed onnxruntime die (docs/errors.md, tests/compiler/cli/test_crash.py).

    .venv/bin/python -m tests.models.crash.make_crash_models

stft_frame_length_0.onnx: STFT over a [1, 16, 1] signal with frame_step 1 and frame_length 0 (an
initializer). onnxruntime 1.2x / 1.3x divides by the frame length without checking it: a bare
InferenceSession's run dies of SIGFPE. ONNX leaves frame_length 0 meaningless, and onnx.reference
refuses it with an error naming the node.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from tests.builders import graph_model

HERE = Path(__file__).resolve().parent
STFT = HERE / "stft_frame_length_0.onnx"


def stft_model(frame_length: "int | None") -> onnx.ModelProto:
    """STFT over a [1, 16, 1] signal, frame_step 1; frame_length an initializer, or an input when None."""
    inits = {"step": np.array(1, np.int64)}
    inputs = [("x", T.FLOAT, [1, 16, 1])]
    if frame_length is None:
        inputs.append(("length", T.INT64, []))
    else:
        inits["length"] = np.array(frame_length, np.int64)
    node = h.make_node("STFT", ["x", "step", "", "length"], ["y"], name="stft")
    return graph_model([node], inputs, [("y", T.FLOAT, [1, "frames", "bins", 2])], initializers=inits, opset=18)


def main() -> None:
    onnx.save(stft_model(0), STFT)


if __name__ == "__main__":
    main()
