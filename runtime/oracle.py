"""The ONNX-semantics oracle: onnx.reference on the original model."""
from __future__ import annotations

from typing import Mapping

import numpy as np
import onnx

from onnx_dml_lowering.ir import DmlLowerError


def reference_outputs(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
    from onnx.reference import ReferenceEvaluator
    try:
        evaluator = ReferenceEvaluator(model)
        results = evaluator.run(None, dict(feeds))
    except Exception as exc:
        line = " ".join(str(exc).split())[:300]
        raise DmlLowerError(f"onnx.reference cannot evaluate the model: {type(exc).__name__}: {line}") from None
    return {o.name: np.asarray(v) for o, v in zip(model.graph.output, results)}
