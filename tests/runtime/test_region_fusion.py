"""Region sessions optimise their weights as onnxruntime optimises the shipped file: a region's
weights left in the user's files (load_model's lazy ones: external data, or large inline raw_data
left in the .onnx) reach onnxruntime as external initializers pointing into those files, and its
fed values carry their rank, so Conv+BatchNormalization fuses and MatMul weights pre-pack as in
onnxruntime's own run. Bound as graph inputs they were left unfused, and `check --backends ort-cpu`
said MISMATCH on rounding alone (Mask R-CNN R50-FPN: rel 2e-4)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.runtime.weights import LAZY_MIN_BYTES, is_lazy
from tests.builders import graph_model


def conv_bn(rng) -> "tuple[list, dict, list]":
    """Conv + BatchNormalization + Relu: onnxruntime folds the normalisation into the Conv's
    weights only when they are initializers."""
    w = rng.standard_normal((128, 256, 3, 3)).astype(np.float32)
    weights = {"w": w, "scale": rng.standard_normal(128).astype(np.float32),
               "bias": rng.standard_normal(128).astype(np.float32),
               "mean": rng.standard_normal(128).astype(np.float32),
               "var": (rng.random(128) + 0.5).astype(np.float32)}
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"], name="bn"),
             h.make_node("Relu", ["b"], ["y"], name="relu")]
    return nodes, weights, [1, 256, 12, 12]


def matmul_add(rng) -> "tuple[list, dict, list]":
    """MatMul + Add + Relu: onnxruntime makes a Gemm of MatMul + Add only when it knows the input's
    rank (a region's fed value declared without one was left unfused)."""
    weights = {"w": rng.standard_normal((512, 600)).astype(np.float32),
               "bias": rng.standard_normal(600).astype(np.float32)}
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             h.make_node("Add", ["m", "bias"], ["a"], name="add"),
             h.make_node("Relu", ["a"], ["y"], name="relu")]
    return nodes, weights, [37, 512]


def shared_bias(rng) -> "tuple[list, dict, list]":
    """A Conv whose bias is an Identity of an initializer (how exporters write shared weights), in a
    region after the lowered NonZero while the Identity runs in the first one: onnxruntime folds
    the Identity on the shipped file and uses its NCHWc Conv, which needs a constant bias."""
    weights = {"w": rng.standard_normal((256, 256, 3, 3)).astype(np.float32) / 48,
               "bias_source": rng.standard_normal(256).astype(np.float32)}
    nodes = [h.make_node("Identity", ["bias_source"], ["bias"], name="shared"),
             h.make_node("Relu", ["x"], ["r"], name="relu_in"),
             h.make_node("NonZero", ["r"], ["nz0"], name="nz0"),
             h.make_node("Size", ["nz0"], ["count"], name="count"),
             h.make_node("Cast", ["count"], ["scale"], name="scale", to=T.FLOAT),
             h.make_node("Mul", ["x", "scale"], ["scaled"], name="scaled"),
             h.make_node("Conv", ["scaled", "w", "bias"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["y"], name="relu")]
    return nodes, weights, [1, 256, 14, 14]


def fused_model(kind, seed: int) -> "tuple[onnx.ModelProto, dict]":
    """The fusion, then a NonZero that is lowered: the fusion sits in an onnxruntime region whose
    weight (past LAZY_MIN_BYTES) stays in its file."""
    rng = np.random.default_rng(seed)
    nodes, weights, shape = kind(rng)
    assert weights["w"].nbytes >= LAZY_MIN_BYTES
    model = graph_model(nodes + [h.make_node("NonZero", ["y"], ["nz"], name="nz")], [("x", T.FLOAT, shape)],
                        [("y", T.FLOAT, len(shape)), ("nz", T.INT64, 2)], weights)
    return model, {"x": rng.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("layout", ["inline", "external"])
@pytest.mark.parametrize("kind", [conv_bn, matmul_add, shared_bias])
@pytest.mark.parametrize("seed", [0, 1])
def test_check_with_ort_cpu_matches_onnxruntime_bit_for_bit(tmp_path, capsys, layout, kind, seed):
    model, feeds = fused_model(kind, seed)
    path = tmp_path / "m.onnx"
    if layout == "external":
        onnx.save(model, path, save_as_external_data=True, location="m.data", size_threshold=1 << 16)
    else:
        onnx.save(model, path)
    assert [is_lazy(t) for t in compile_model(str(path)).model.graph.initializer][0]
    np.savez(tmp_path / "in.npz", **feeds)
    plain = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in plain.get_outputs()], plain.run(None, feeds)))

    code = main(["check", str(path), "--inputs", str(tmp_path / "in.npz"), "--backends", "cpu,ort,ort-cpu",
                 "--save-outputs", str(tmp_path / "out.npz")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "MISMATCH" not in out
    saved = dict(np.load(tmp_path / "out.npz"))
    for name, value in expected.items():
        for key in (name, f"cpu:{name}", f"ort:{name}", f"ort-cpu:{name}"):
            assert saved[key].dtype == value.dtype and np.array_equal(saved[key], value), key


@pytest.mark.parametrize("unaligned_loads", [True, False])
def test_weights_reach_onnxruntime_as_external_data_in_the_users_file(tmp_path, monkeypatch, unaligned_loads):
    """ort_model points a lazy weight at its bytes in the .onnx file itself (offset and length of its
    raw_data); on a machine that cannot load misaligned data, a weight lying misaligned is fed an
    aligned copy instead (onnxruntime would use its map as it lies)."""
    from onnx_dml_lowering.runtime import weights
    from onnx_dml_lowering.runtime.ort.model import ort_model
    model, _ = fused_model(matmul_add, 0)
    path = tmp_path / "m.onnx"
    for pad in range(4):              # the doc string (before the graph) moves the weight's bytes
        model.doc_string = "-" * pad
        onnx.save(model, path)
        loaded = compile_model(str(path)).model
        (lazy,) = [t for t in loaded.graph.initializer if is_lazy(t)]
        offset = weights.external_path(lazy)[1]
        if offset % 4:
            break
    assert offset % 4, "no padding put the weight at a misaligned offset"
    monkeypatch.setattr(weights, "UNALIGNED_LOADS", unaligned_loads)
    prepared = ort_model(loaded)
    proto = onnx.ModelProto()
    proto.ParseFromString(prepared.data)
    external = {t.name: {e.key: e.value for e in t.external_data} for t in proto.graph.initializer
                if t.data_location == T.EXTERNAL}
    if unaligned_loads:
        assert external == {"w": {"location": "m.onnx", "offset": str(offset), "length": str(512 * 600 * 4)}}
        assert prepared.folder == str(tmp_path.resolve()) and prepared.weights == {}
        assert path.read_bytes()[offset:offset + 512 * 600 * 4] == model.graph.initializer[0].raw_data
    else:
        assert external == {} and list(prepared.weights) == ["w"] and prepared.added == {"w"}
        assert np.array_equal(prepared.weights["w"], onnx.numpy_helper.to_array(model.graph.initializer[0]))
        assert prepared.weights["w"].ctypes.data % 4 == 0

