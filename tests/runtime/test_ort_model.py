"""The one way a ModelProto reaches onnxruntime (ort.model.ort_model): ir_version capped at
MAX_IR_VERSION for every session check and run build, weights kept in external files (never inside
the proto), big inline initializers moved out when the proto would pass 2 GB."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.ort.model import MAX_IR_VERSION
from tests.cli_runner import cli
from tests.builders import graph_model
from tests.oracle import reference


class SessionSpy:
    """Wraps onnxruntime.InferenceSession (real sessions) and records the proto each one got."""

    def __init__(self, monkeypatch) -> None:
        self.models: "list[onnx.ModelProto]" = []
        self.files: "list[onnx.ModelProto]" = []      # sessions given a path: a provider backend's shipped file
        real = ort.InferenceSession

        def spy(model, *args, **kwargs):
            proto = onnx.ModelProto()
            proto.ParseFromString(model if isinstance(model, bytes) else Path(model).read_bytes())
            (self.models if isinstance(model, bytes) else self.files).append(proto)
            return real(model, *args, **kwargs)

        monkeypatch.setattr(ort, "InferenceSession", spy)


def _eye_model(ir_version: int) -> onnx.ModelProto:
    model = graph_model([h.make_node("Relu", ["x"], ["r"], name="relu"),
                         h.make_node("NonZero", ["r"], ["nz"], name="nz"),
                         h.make_node("EyeLike", ["r"], ["eye"], name="eye", k=1)],
                        [("x", T.FLOAT, [3, 4])], [("nz", T.INT64, 2), ("eye", T.FLOAT, 2)])
    model.ir_version = ir_version
    return model


@pytest.mark.parametrize("oracle", ["hybrid", "ort-cpu"])
def test_every_session_gets_a_capped_ir_version(tmp_path, capsys, monkeypatch, oracle):
    model = _eye_model(onnx.IR_VERSION)
    assert model.ir_version > MAX_IR_VERSION
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    spy = SessionSpy(monkeypatch)
    code, out, err = cli(["check", path, "--backends", "cpu,ort,ort-cpu", "--json", tmp_path / "r.json",
                          "--oracle", oracle, "--save-inputs", tmp_path / "in.npz"], capsys)
    assert code == 0, err + out
    # The model, its ONNX regions and oracle regions carry its ir_version capped; the one-operator
    # models of the ort backend carry their own (8). ort-cpu runs the file as shipped, as it is.
    assert {m.ir_version for m in spy.models if m.graph.name != "dml_operator"} == {MAX_IR_VERSION}
    assert max(m.ir_version for m in spy.models) == MAX_IR_VERSION
    assert [m.ir_version for m in spy.files] == [onnx.IR_VERSION]
    feeds = dict(np.load(tmp_path / "in.npz"))
    expected = reference(model, feeds)
    for backend in ("cpu", "ort"):
        got = compile_model(model).run(feeds, backend=backend)
        for name, value in expected.items():
            assert np.array_equal(got[name], value), (backend, name)
    assert max(m.ir_version for m in spy.models) == MAX_IR_VERSION


@pytest.mark.parametrize("overridable", [False, True])
def test_weights_in_external_files_stay_there_and_are_fed_in_place(tmp_path, capsys, monkeypatch, overridable):
    from onnx_dml_lowering.runtime.weights import is_lazy
    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 512)).astype(np.float32)          # 1 MiB: left in its file
    w[:, ::3] = 0
    model = graph_model([h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                         h.make_node("NonZero", ["m"], ["nz"], name="nz")],
                        [("x", T.FLOAT, [2, 512])], [("m", T.FLOAT, [2, 512]), ("nz", T.INT64, 2)], {"w": w})
    if overridable:
        model.graph.input.append(h.make_tensor_value_info("w", T.FLOAT, [512, 512]))
    path = tmp_path / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, location="m.data", size_threshold=0)
    compiled = compile_model(str(path))
    assert [is_lazy(t) for t in compiled.model.graph.initializer] == [True]
    x = rng.standard_normal((2, 512)).astype(np.float32)
    feeds = {"x": x, "w": np.eye(512, dtype=np.float32)} if overridable else {"x": x}
    spy = SessionSpy(monkeypatch)
    np.savez(tmp_path / "in.npz", **feeds)
    # every session gets the weight as an initializer whose external data is the user's file
    # (tests/runtime/test_region_fusion.py: bit for bit onnxruntime's own run)
    code, out, err = cli(["check", path, "--backends", "cpu,ort,ort-cpu", "--oracle", "ort-cpu",
                          "--inputs", tmp_path / "in.npz", "--rtol", "1e-3"], capsys)
    assert code == 0, err + out
    assert spy.models and max(m.ByteSize() for m in spy.models) < 1 << 16
    weighted = [t for m in spy.models for t in m.graph.initializer if t.name == "w"]
    assert weighted and all(t.data_location == T.EXTERNAL and t.external_data[0].value == "m.data"
                            for t in weighted)
    assert [m.ByteSize() < 1 << 16 for m in spy.files] == [True]      # the shipped file: weights outside
    expected = reference(onnx.load(str(path)), feeds)
    for backend in ("cpu", "ort"):
        got = compiled.run(feeds, backend=backend)
        assert np.array_equal(got["nz"], expected["nz"]) and np.allclose(got["m"], expected["m"], atol=1e-4)


@pytest.mark.parametrize("near_limit", [False, True])
def test_a_big_inline_weight_moves_out_only_when_the_proto_comes_near_the_limit(monkeypatch, near_limit):
    from onnx_dml_lowering.runtime import weights
    from onnx_dml_lowering.runtime.ort.model import ort_model
    rng = np.random.default_rng(3)
    big, small = rng.standard_normal((512, 512)).astype(np.float32), rng.standard_normal((4, 512)).astype(np.float32)
    model = graph_model([h.make_node("MatMul", ["x", "big"], ["y"], name="mm"),
                         h.make_node("MatMul", ["small", "y"], ["z"], name="mm2")],
                        [("x", T.FLOAT, [512, 512])], [("z", T.FLOAT, [4, 512])])
    model.graph.initializer.extend([onnx.numpy_helper.from_array(big, "big"),
                                    onnx.numpy_helper.from_array(small, "small")])
    model.ir_version = onnx.IR_VERSION           # past MAX_IR_VERSION: the copying path
    size = model.ByteSize()
    # protobuf's limit stands at the proto's own size, or far above it
    monkeypatch.setattr(weights, "PROTO_LIMIT", size + (1 << 24) - 1 if near_limit else 1 << 40)
    got = ort_model(model)
    # only the weight of 1 MiB or more moves out, and only near the limit; the small one stays inline
    assert set(got.weights) == ({"big"} if near_limit else set())
    assert got.added == set(got.weights)
    np.testing.assert_array_equal(got.weights.get("big", big), big)
    sent = onnx.ModelProto()
    sent.ParseFromString(got.data)
    assert [t.name for t in sent.graph.initializer] == (["small"] if near_limit else ["big", "small"])
    x = rng.standard_normal((512, 512)).astype(np.float32)
    session = ort.InferenceSession(got.data, providers=["CPUExecutionProvider"])
    out = session.run(None, {"x": x, **got.weights})[0]
    np.testing.assert_allclose(out, small @ (x @ big), rtol=1e-4, atol=1e-3)
