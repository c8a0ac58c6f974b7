"""Bit-exact comparison of outputs and the reference runner the properties share."""
from __future__ import annotations

import numpy as np
from onnx.reference import ReferenceEvaluator

_UINT_OF_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def reference(model, feeds) -> "dict[str, np.ndarray]":
    """onnx.reference on the original model: the ONNX-semantics oracle."""
    names = [o.name for o in model.graph.output]
    return {n: np.asarray(v) for n, v in zip(names, ReferenceEvaluator(model).run(None, feeds))}


def assert_bit_exact(got: np.ndarray, want: np.ndarray, name: str, nan_payloads: bool = False) -> None:
    """Same dtype, shape and bytes; for floats NaN positions must match (and, if asked, the
    NaN bit patterns too), every other element byte for byte (so -0.0 != +0.0)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape}, expected {want.shape}"
    if want.dtype.kind == "f" and not nan_payloads:
        got_nan, want_nan = np.isnan(got), np.isnan(want)
        assert np.array_equal(got_nan, want_nan), f"{name}: NaN positions differ\n got {got!r}\nwant {want!r}"
        bits = _UINT_OF_WIDTH[want.dtype.itemsize]
        same = (got.view(bits) == want.view(bits)) | want_nan
        assert same.all(), (f"{name}: bits differ at {np.argwhere(~same)[:5].tolist()}\n"
                            f" got {got!r}\nwant {want!r}")
        return
    equal = np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()
    assert equal, f"{name}: values differ\n got {got!r}\nwant {want!r}"


def assert_outputs_bit_exact(ours: dict, expected: dict, nan_payloads: bool = False) -> None:
    assert list(ours) == list(expected) or set(ours) == set(expected), (list(ours), list(expected))
    for name, want in expected.items():
        assert_bit_exact(ours[name], want, name, nan_payloads)
