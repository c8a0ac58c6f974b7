"""runtime.interpreter's dispatch table and the DmlKernels protocol: every IR step type has a
handler, both kernel sets implement every operator with the protocol's signature, and the
interpreter runs each operator on the kernel set it is given."""
import dataclasses
import inspect
from typing import ClassVar

import numpy as np
import pytest
from onnx import TensorProto as TP

from onnx_dml_lowering.ir import (DataType, DiagonalMatrix, DiagonalMatrix1, DmlLowerError, Download,
                                  ElementWiseBitAnd, ElementWiseBitOr, ElementWiseIdentity, Graph,
                                  NonZeroCoordinates, Step, TensorDesc, Upload, parse_level, verify_graph)
from onnx_dml_lowering.ir.operators import STEP_TYPES
from onnx_dml_lowering.runtime import kernels
from onnx_dml_lowering.runtime.interpreter import STEP_HANDLERS, Interpreter, execute
from onnx_dml_lowering.runtime.kernel_set import DmlKernels
from onnx_dml_lowering.runtime.ort_operators import OrtOperators

PROTOCOL_METHODS = sorted(name for name, member in vars(DmlKernels).items()
                          if callable(member) and not name.startswith("_"))


def test_every_ir_step_type_has_exactly_one_handler():
    assert set(STEP_HANDLERS) == set(STEP_TYPES.values())
    assert all(inspect.isfunction(handler) for handler in STEP_HANDLERS.values())


def test_a_step_without_a_handler_is_an_error_naming_it():
    @dataclasses.dataclass(frozen=True)
    class Unknown(Step):
        kind: ClassVar[str] = "UNKNOWN_STEP"

    g = Graph(parse_level("5_1"))
    g.add(Unknown())
    with pytest.raises(DmlLowerError, match="no kernel for step UNKNOWN_STEP"):
        execute(g, {})


def test_the_protocol_declares_one_method_per_dml_operator():
    kernels_named = sorted(cls.kernel for cls in STEP_TYPES.values() if cls.is_dml_operator)
    assert kernels_named == PROTOCOL_METHODS and len(kernels_named) >= 6


def test_every_operator_step_names_its_kernel_and_passes_every_argument():
    """An operator's handler is derived from its class (kernel, kernel_args) unless it needs more:
    then kernel_args are the leading arguments and the handler adds the rest."""
    for cls in (c for c in STEP_TYPES.values() if c.is_dml_operator):
        assert cls.kernel in PROTOCOL_METHODS, cls.kind
        params = list(inspect.signature(getattr(DmlKernels, cls.kernel)).parameters)[1:]
        fields = {f.name for f in dataclasses.fields(cls)}
        assert set(cls.kernel_args) <= fields and len(cls.kernel_args) <= len(params), cls.kind
        if STEP_HANDLERS[cls] is Interpreter.operator:
            assert len(cls.kernel_args) == len(params), cls.kind


@pytest.mark.parametrize("kernel_set", [kernels, OrtOperators(["cpu"])], ids=["numpy", "onnxruntime"])
def test_both_kernel_sets_implement_the_protocol_with_its_signatures(kernel_set):
    assert isinstance(kernel_set, DmlKernels)
    for name in PROTOCOL_METHODS:
        declared = list(inspect.signature(getattr(DmlKernels, name)).parameters)[1:]   # without self
        assert list(inspect.signature(getattr(kernel_set, name)).parameters) == declared, name


def test_an_incomplete_kernel_set_is_not_a_dml_kernel_set():
    class NoBitAnd:
        nonzero_coordinates = diagonal_matrix = diagonal_matrix1 = identity = bit_or = staticmethod(print)

    assert not isinstance(NoBitAnd(), DmlKernels)


def every_operator_graph():
    """Each DirectML operator once, on float32 / uint32 views of 3 x 4."""
    g = Graph(parse_level("5_1"))
    g.inputs += ["x", "w"]

    def view(name, dtype, sizes):
        g.add_buffer(name, int(np.prod(sizes)) * 4)
        g.add_view(name + ".v", name, TensorDesc(dtype, sizes))
        return name + ".v"

    x, w = view("x", DataType.FLOAT32, (3, 4)), view("w", DataType.UINT32, (3, 4))
    eye, band, copy = (view(n, DataType.FLOAT32, (3, 4)) for n in ("eye", "band", "copy"))
    ored, anded = view("or", DataType.UINT32, (3, 4)), view("and", DataType.UINT32, (3, 4))
    count, coords = view("count", DataType.UINT32, (1, 1)), view("coords", DataType.UINT32, (12, 2))
    g.add(Upload("x", x))
    g.add(Upload("w", w))
    g.add(DiagonalMatrix(eye, 1, 2.5))
    g.add(DiagonalMatrix1(x, band, DataType.FLOAT32, -7.0, -1, 1))
    g.add(ElementWiseIdentity(band, copy))
    g.add(ElementWiseBitOr(w, w, ored))
    g.add(ElementWiseBitAnd(ored, w, anded))
    g.add(NonZeroCoordinates(copy, count, coords))
    outputs = {eye: "eye", copy: "copy", anded: "anded", count: "count"}
    for v, name in outputs.items():
        onnx_type = TP.FLOAT if v in (eye, copy) else TP.UINT32
        g.add(Download(v, name, onnx_type, (1, 1) if v == count else (3, 4)))
        g.outputs.append(name)
    verify_graph(g)
    return g


class Recording:
    """The numpy kernels, recording which operator ran."""

    def __init__(self) -> None:
        self.calls: "list[str]" = []

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(kernels, name)


def test_the_interpreter_runs_each_operator_on_the_kernel_set_it_is_given(rng):
    g = every_operator_graph()
    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32),
             "w": rng.integers(0, 2**32, (3, 4), dtype=np.uint32)}
    recording = Recording()
    got = Interpreter(g, strict=True, kernels=recording).run(feeds)
    assert sorted(recording.calls) == PROTOCOL_METHODS
    ours = execute(g, feeds, strict=True)
    theirs = execute(g, feeds, strict=True, kernels=OrtOperators(["cpu"]))
    x_minus_y = np.arange(4)[None, :] - np.arange(3)[:, None]
    band = np.where((x_minus_y >= -1) & (x_minus_y < 1), np.float32(-7.0), feeds["x"])
    assert np.array_equal(ours["eye"], 2.5 * np.eye(3, 4, 1, dtype=np.float32))
    assert np.array_equal(ours["copy"], band) and np.array_equal(ours["anded"], feeds["w"])
    assert ours["count"].item() == np.count_nonzero(band)
    for name in ours:
        assert np.array_equal(got[name], ours[name]) and np.array_equal(theirs[name], ours[name]), name
