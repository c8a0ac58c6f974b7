"""Shared helpers for differential tests: run a model through compile_model and onnx.reference."""
from __future__ import annotations

import numpy as np
from onnx.reference import ReferenceEvaluator

from onnx_dml_lowering.compiler import compile_model


def run_both(model, feeds, level="5_1"):
    compiled = compile_model(model, feature_level=level)
    ours = compiled.run(feeds, strict=True)
    expected = ReferenceEvaluator(model).run(None, feeds)
    names = [o.name for o in model.graph.output]
    return compiled, [ours[n] for n in names], [np.asarray(e) for e in expected]


def assert_same(ours, expected):
    for got, want in zip(ours, expected):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert got.shape == want.shape, (got.shape, want.shape)
        if want.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), "bits differ"
        else:
            np.testing.assert_array_equal(got, want)
