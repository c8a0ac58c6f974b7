"""The DirectML operators executed by onnxruntime: each IR operator runs as the minimal ONNX
sub-graph that an execution provider maps onto that DirectML operator, so the provider's
kernels are validated operator by operator against the numpy emulator.

NONZERO_COORDINATES <- NonZero (then transposed into the {M, N} UINT32 layout); on a type the
                       provider's NonZero lacks (uint32 word planes of 64-bit inputs, int8, ...)
                       Cast to int64 + NonZero: exact, zero stays zero
DIAGONAL_MATRIX     <- EyeLike (ScatterND of the Value onto zeros when Value != 1); on a type the
                       provider's EyeLike lacks (uint8, ...) EyeLike on int32 / float + Cast
DIAGONAL_MATRIX1    <- Trilu band masks + Where
ELEMENT_WISE_IDENTITY <- Identity
ELEMENT_WISE_BIT_OR / BIT_AND <- BitwiseOr / BitwiseAnd
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, TypeVar, cast

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.dtypes import numpy_to_onnx
from onnx_dml_lowering.ir.errors import first_line

from . import kernels as numpy_kernels
from . import ort_crash
from .kernels import POISON_WORD, scalar_for
from .interrupt import stoppable_run
from .ort_messages import parse_provider_failure
from onnx_dml_lowering.runtime.ort.providers import resolve
from onnx_dml_lowering.runtime.ort.sessions import make_session
from onnx_dml_lowering.runtime.ort.settings import SessionSettings, as_written


# NonZero on these element types runs on an exact widening where the provider has no kernel.
_NONZERO_VIA: "dict[int, int]" = {T.INT8: T.INT64, T.INT16: T.INT64, T.UINT16: T.INT64, T.UINT32: T.INT64}


class NoKernel(Exception):
    """The provider has no kernel for this operator and type (onnxruntime's NOT_IMPLEMENTED)."""


_Method = TypeVar("_Method", bound=Callable[..., None])


def _or_numpy(method: _Method) -> _Method:
    """Run the stand-in; where the provider has no kernel, the numpy kernel computes the result and
    the operator is recorded in `fallbacks`, so the outputs that depend on it are not counted as
    validated on the provider (check reports them UNSUPPORTED)."""
    @functools.wraps(method)
    def run(self: OrtOperators, *args: Any, **kwargs: Any) -> None:
        try:
            return method(self, *args, **kwargs)
        except NoKernel as exc:
            self.fallbacks.append(str(exc))
            return getattr(numpy_kernels, method.__name__)(*args, **kwargs)
    return cast(_Method, run)        # the same signature: run passes every argument through


class OrtOperators:
    """The DmlKernels set (runtime.kernel_set) backed by onnxruntime: Interpreter(kernels=...)."""

    def __init__(self, providers: "list[str] | None" = None, settings: "SessionSettings | None" = None) -> None:
        self.providers = resolve(providers)
        # the user's onnxruntime session settings (--threads ...); a stand-in's graph runs as written
        # unless a level is asked for: the optimizer rewrites Where(Not(band), base, value) into
        # Where(band, value, base), and a -0.0 Value then comes out +0.0 (DirectML keeps it)
        self.settings = as_written(settings)
        self._sessions: "dict[tuple, Any]" = {}       # onnxruntime sessions (untyped)
        self._no_kernel: "dict[tuple, str]" = {}
        self.fallbacks: "list[str]" = []      # operators the provider has no kernel for, as they ran

    def _run(self, key: tuple, build: "Callable[[], onnx.ModelProto]", feeds: "dict[str, np.ndarray]",
             what: str) -> "list[np.ndarray]":
        if key in self._no_kernel:
            raise NoKernel(self._no_kernel[key])
        if key not in self._sessions:
            model = build()
            try:
                self._sessions[key] = make_session(model, self.providers, settings=self.settings,
                                                   label=f"the stand-in of {what}")
            except Exception as exc:
                reason = f"{what}: onnxruntime ({', '.join(self.providers)}) cannot run it: {first_line(exc)}"
                failure = parse_provider_failure(exc)
                if failure is not None and failure.not_implemented:
                    self._no_kernel[key] = reason
                    raise NoKernel(reason) from None
                raise DmlLowerError(reason) from None
        try:
            with stoppable_run() as options:
                ort_crash.running(self._sessions[key])
                try:
                    return self._sessions[key].run(None, feeds, options)
                finally:
                    ort_crash.idle()
        except Exception as exc:
            raise DmlLowerError(f"{what}: onnxruntime failed: {first_line(exc)}") from None

    @staticmethod
    def _model(nodes: "list[onnx.NodeProto]", inputs: "list[onnx.ValueInfoProto]",
               outputs: "list[onnx.ValueInfoProto]", initializers: "Iterable[onnx.TensorProto]" = (),
               opset: int = 14) -> onnx.ModelProto:
        graph = helper.make_graph(nodes, "dml_operator", inputs, outputs, list(initializers))
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)

    @_or_numpy
    def nonzero_coordinates(self, x: np.ndarray, count: np.ndarray, coords: np.ndarray, strict: bool) -> None:
        data = np.ascontiguousarray(x)
        elem = numpy_to_onnx(data.dtype)
        rank = data.ndim

        def build(via: "int | None" = None) -> onnx.ModelProto:
            nodes = [helper.make_node("NonZero", ["wide" if via else "x"], ["y"])]
            if via:     # an exact widening keeps which elements are zero (and NaN non-zero)
                nodes.insert(0, helper.make_node("Cast", ["x"], ["wide"], to=via))
            return self._model(nodes, [helper.make_tensor_value_info("x", elem, [None] * rank)],
                               [helper.make_tensor_value_info("y", T.INT64, [rank, None])], opset=13)

        try:
            (result,) = self._run(("NonZero", elem, rank), build, {"x": data},
                                  f"NONZERO_COORDINATES on {data.dtype} via NonZero")
        except NoKernel:
            via = _NONZERO_VIA.get(elem)
            if via is None:
                raise
            # onnxruntime CPU has no NonZero for int8 / int16 / uint16 / uint32 (the 64-bit inputs'
            # combined word plane is uint32): run it on the exact widening instead.
            (result,) = self._run(("NonZero", elem, rank, via), functools.partial(build, via), {"x": data},
                                  f"NONZERO_COORDINATES on {data.dtype} via Cast to "
                                  f"{helper.tensor_dtype_to_np_dtype(via)} + NonZero")
        n = coords.shape[-1]
        table = coords[(0,) * (coords.ndim - 2)]
        nnz = result.shape[1]
        table[:nnz, :] = result[rank - n:, :].T.astype(np.uint32)
        if strict:
            table[nnz:, :] = POISON_WORD
        count[...] = nnz

    @_or_numpy
    def diagonal_matrix(self, out: np.ndarray, offset: int, value: float) -> None:
        height, width = out.shape[-2:]
        elem = numpy_to_onnx(out.dtype)
        if float(value) == 1.0:
            def build(via: "int | None" = None) -> onnx.ModelProto:
                nodes = [helper.make_node("EyeLike", ["shape_of"], ["made" if via else "eye"], k=int(offset),
                                          dtype=via or elem)]
                if via:     # 0 and 1 are exact in every type: the Cast changes no value
                    nodes.append(helper.make_node("Cast", ["made"], ["eye"], to=elem))
                return self._model(nodes, [helper.make_tensor_value_info("shape_of", T.FLOAT, [None, None])],
                                   [helper.make_tensor_value_info("eye", elem, [None, None])])

            feeds = {"shape_of": np.zeros((height, width), np.float32)}
            try:
                (eye,) = self._run(("EyeLike", elem, int(offset)), build, feeds,
                                   f"DIAGONAL_MATRIX on {out.dtype} via EyeLike")
            except NoKernel:
                # onnxruntime CPU's EyeLike lacks the 8 / 16-bit types and uint32: made in a
                # type it has, then Cast.
                via = T.FLOAT if out.dtype.kind == "f" else T.INT32
                (eye,) = self._run(("EyeLike", elem, int(offset), via), functools.partial(build, via), feeds,
                                   f"DIAGONAL_MATRIX on {out.dtype} via EyeLike on "
                                   f"{helper.tensor_dtype_to_np_dtype(via)} + Cast")
            out[...] = eye
            return
        # Another Value is scattered onto the diagonal, not multiplied in (inf * 0 is NaN) nor
        # selected with Where (onnxruntime's Where turns -0.0 into +0.0).
        rows = np.arange(max(0, -offset), max(0, min(height, width - offset)), dtype=np.int64)
        indices = np.stack([rows, rows + offset], axis=1)
        typed = scalar_for(out.dtype, value)

        def scatter_model() -> onnx.ModelProto:
            return self._model([helper.make_node("ScatterND", ["zeros", "indices", "updates"], ["y"])],
                               [helper.make_tensor_value_info("zeros", elem, [None, None]),
                                helper.make_tensor_value_info("indices", T.INT64, [None, 2]),
                                helper.make_tensor_value_info("updates", elem, [None])],
                               [helper.make_tensor_value_info("y", elem, [None, None])], opset=13)

        (eye,) = self._run(("ScatterND", elem), scatter_model,
                           {"zeros": np.zeros((height, width), out.dtype), "indices": indices,
                            "updates": np.full(rows.size, typed, out.dtype)},
                           f"DIAGONAL_MATRIX with Value {value!r} on {out.dtype} via ScatterND")
        out[...] = eye

    @_or_numpy
    def diagonal_matrix1(self, source: "np.ndarray | None", out: np.ndarray, value: object, begin: int,
                         end: int) -> None:
        elem = numpy_to_onnx(out.dtype)
        inverted = end < begin
        low, high = (end, begin) if inverted else (begin, end)
        nodes = [
            helper.make_node("Trilu", ["ones", "k_low"], ["upper"], upper=1),
            helper.make_node("Trilu", ["ones", "k_high"], ["lower"], upper=0),
            helper.make_node("And", ["upper", "lower"], ["band"]),
        ]
        # The Value goes through Where's second (false) branch: onnxruntime's optimizer (were the
        # graph not run as written) swaps the branches of a Where of a Not, and a -0.0 from the
        # first branch came out +0.0.
        keep = "band" if inverted else "outside"
        if not inverted:
            nodes.append(helper.make_node("Not", ["band"], ["outside"]))
        nodes.append(helper.make_node("Where", [keep, "base", "value"], ["y"]))
        inits = [helper.make_tensor("k_low", T.INT64, [], [low]),
                 helper.make_tensor("k_high", T.INT64, [], [high - 1])]

        def build() -> onnx.ModelProto:
            return self._model(nodes, [helper.make_tensor_value_info("ones", T.BOOL, [None, None]),
                                       helper.make_tensor_value_info("value", elem, []),
                                       helper.make_tensor_value_info("base", elem, [None] * out.ndim)],
                               [helper.make_tensor_value_info("y", elem, [None] * out.ndim)], inits)

        height, width = out.shape[-2:]
        base = np.ascontiguousarray(source) if source is not None else np.zeros(out.shape, out.dtype)
        (result,) = self._run(("Trilu", elem, begin, end), build,
                              {"ones": np.ones((height, width), np.bool_),
                               "value": np.array(value, dtype=out.dtype), "base": base},
                              f"DIAGONAL_MATRIX1 on {out.dtype} via Trilu")
        out[...] = result

    @_or_numpy
    def identity(self, source: np.ndarray, out: np.ndarray,
                 release: "Callable[[int], None] | None" = None) -> None:
        # release is not called: onnxruntime copies the whole tensor in one call.
        data = np.ascontiguousarray(source)
        elem = numpy_to_onnx(data.dtype)

        def build() -> onnx.ModelProto:
            return self._model([helper.make_node("Identity", ["x"], ["y"])],
                               [helper.make_tensor_value_info("x", elem, [None] * data.ndim)],
                               [helper.make_tensor_value_info("y", elem, [None] * data.ndim)])

        (result,) = self._run(("Identity", elem, data.ndim), build, {"x": data},
                              f"ELEMENT_WISE_IDENTITY on {data.dtype} via Identity")
        out[...] = result

    def _bitwise(self, op: str, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        left, right = np.ascontiguousarray(a), np.ascontiguousarray(b)
        elem = numpy_to_onnx(left.dtype)

        def build() -> onnx.ModelProto:
            return self._model([helper.make_node(op, ["a", "b"], ["y"])],
                               [helper.make_tensor_value_info("a", elem, [None] * left.ndim),
                                helper.make_tensor_value_info("b", elem, [None] * left.ndim)],
                               [helper.make_tensor_value_info("y", elem, [None] * left.ndim)], opset=18)

        (result,) = self._run((op, elem, left.ndim), build, {"a": left, "b": right},
                              f"ELEMENT_WISE_{'BIT_OR' if op == 'BitwiseOr' else 'BIT_AND'} on {left.dtype} via {op}")
        out[...] = result

    @_or_numpy
    def bit_or(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._bitwise("BitwiseOr", a, b, out)

    @_or_numpy
    def bit_and(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self._bitwise("BitwiseAnd", a, b, out)
