"""The one ONNX-semantics oracle and the one comparison rule of the test suite.

Oracle: `reference(model, feeds)` runs onnx.reference.ReferenceEvaluator on the original model
(a ModelProto or a path), fed native-byte-order C-ordered copies (the evaluator assumes them),
and returns {output name: ndarray}.

Comparison (`assert_same`, `assert_outputs_same`): same output names, dtype and shape first, then
the bytes: integers and bool exactly, floats bit for bit, so -0.0 differs from +0.0 and a NaN
equals only a NaN with the same bit pattern (sign and payload).

Why bytes: the lowering is meant to be bit-faithful. Before this module the suite had four rules:
tests/lowering/oracle.py compared bytes, the fuzz properties NaN positions plus the other bits
(bytes only between two runs of ours), the CLI and feed tests np.testing.assert_array_equal (which
lets -0.0 == +0.0 and any NaN == any NaN), onnx's node cases assert_allclose. Bytes are the
strictest, and every test passes under them except one relaxation, taken by name where needed:

- `nan_payloads=False`: NaN must still meet NaN and every other element must match bit for bit,
  but a NaN's payload and sign are free. Only the fuzz properties take it, against the oracle:
  onnx.reference computes some ops with numpy arithmetic (Expand is `data * ones`), which quiets
  a signalling NaN, where DirectML and onnxruntime copy it unchanged.
- `atol` / `rtol` (NaN must meet NaN): only onnx's own node cases, which carry their tolerances.

`differential(model, feeds, level)` is the differential test in one call: compile at a feature
level, run strict (poisoned memory), compare every output with the oracle.
"""
from __future__ import annotations

import os
from typing import NamedTuple, Optional, Union

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from onnx_dml_lowering.compiler import CompiledModel, compile_model


def native(array) -> np.ndarray:
    """The same values, native byte order, C order: what the oracle is given."""
    array = np.asarray(array)
    return array.astype(array.dtype.newbyteorder("="), order="C", copy=True)   # keeps 0-d arrays 0-d


def reference(model: "Union[onnx.ModelProto, str, os.PathLike]", feeds) -> "dict[str, np.ndarray]":
    """onnx.reference on the original model: the ONNX-semantics oracle, keyed by output name."""
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model))
    results = ReferenceEvaluator(model).run(None, {k: native(v) for k, v in dict(feeds).items()})
    return {o.name: np.asarray(v) for o, v in zip(model.graph.output, results)}


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.reshape(-1).view(np.uint8)


def assert_same(got, want, name: str = "", nan_payloads: bool = True, atol: Optional[float] = None,
                rtol: Optional[float] = None) -> None:
    """dtype, shape, then bytes (the module's rule); the relaxations as the module says."""
    got, want = np.asarray(got), np.asarray(want)
    label = f"{name}: " if name else ""
    assert got.dtype == want.dtype, f"{label}dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"{label}shape {got.shape}, expected {want.shape}"
    if atol is not None or rtol is not None:
        np.testing.assert_allclose(got, want, rtol=rtol or 0.0, atol=atol or 0.0, equal_nan=True, err_msg=name)
        return
    if want.dtype.kind == "f" and not nan_payloads:
        got_nan, want_nan = np.isnan(got), np.isnan(want)
        assert np.array_equal(got_nan, want_nan), f"{label}NaN positions differ\n got {got!r}\nwant {want!r}"
        got, want = np.where(got_nan, want, got), want          # NaN meets NaN: compare the rest
    if np.array_equal(_bits(got), _bits(want)):
        return
    if want.dtype.kind == "f":
        bits = np.dtype(f"u{want.dtype.itemsize}")
        where = np.argwhere(np.ascontiguousarray(got).view(bits) != np.ascontiguousarray(want).view(bits))
        raise AssertionError(f"{label}bits differ at {where[:5].tolist()}\n got {got!r}\nwant {want!r}")
    raise AssertionError(f"{label}values differ\n got {got!r}\nwant {want!r}")


def assert_outputs_same(ours: dict, expected: dict, nan_payloads: bool = True, atol: Optional[float] = None,
                        rtol: Optional[float] = None) -> None:
    """The same output names, and every output the same by assert_same."""
    assert sorted(ours) == sorted(expected), (list(ours), list(expected))
    for name, want in expected.items():
        assert_same(ours[name], want, name, nan_payloads, atol, rtol)


class Differential(NamedTuple):
    compiled: CompiledModel
    outputs: "dict[str, np.ndarray]"          # ours, keyed by output name
    expected: "dict[str, np.ndarray]"         # the oracle's

    @property
    def entry(self):
        """The one placement entry (fails unless exactly one NonZero / EyeLike placement)."""
        (entry,) = self.compiled.placement
        return entry

    def output(self, index: int = 0) -> np.ndarray:
        """Our output by graph position."""
        return list(self.outputs.values())[index]


def differential(model: onnx.ModelProto, feeds, level="5_1", compiled: Optional[CompiledModel] = None,
                 our_feeds=None, nan_payloads: bool = True) -> Differential:
    """Compile `model` at `level` (or reuse `compiled`), run it strict on `our_feeds` (default:
    `feeds`), and assert every output equals onnx.reference's on `feeds` by this module's rule."""
    compiled = compiled or compile_model(model, feature_level=level)
    ours = compiled.run(feeds if our_feeds is None else our_feeds, strict=True)
    expected = reference(model, feeds)
    assert_outputs_same(ours, expected, nan_payloads)
    return Differential(compiled, {name: ours[name] for name in expected}, expected)
