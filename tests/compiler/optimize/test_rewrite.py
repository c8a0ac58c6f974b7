"""dml-lower optimize: stored bands and the torch.eye idiom become generators, bit-identical on
onnxruntime CPU; the file shrinks; names, opsets, metadata and external data are kept."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnx_ir
import pytest
from hypothesis import given
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.runtime.model_facts import graph_inputs
from onnx_dml_lowering.compiler.optimize import GenerateBands, bit_identical, optimize_model  # as README shows it
from onnx_dml_lowering.ir import parse_level
from tests import paths
from tests.optimize_models import band_array, bands, stored_model

MODELS = sorted(paths.MODELS.glob("*.onnx"))


def optimized(model: onnx.ModelProto, **kw):
    out, rewrites, declined = optimize_model(model, **kw)
    problems = bit_identical(model.SerializeToString(), out.SerializeToString(), graph_inputs(model))
    assert problems == []
    return out, rewrites, declined


def ops(model: onnx.ModelProto) -> "list[str]":
    return [n.op_type for n in model.graph.node]


NEG_ZERO = -0.0
KINDS = [  # shape, begin, end, value, dtype, inverted, generator ops
    ((16, 16), 0, 1, 1, np.float32, False, ["ConstantOfShape", "EyeLike"]),
    ((16, 24), 2, 3, 1, np.int64, False, ["ConstantOfShape", "EyeLike"]),
    ((16, 16), 0, 1, 3, np.float32, False, ["ConstantOfShape", "Trilu", "Trilu"]),
    ((2, 3, 16, 16), -100, 1, True, np.bool_, False, ["ConstantOfShape", "Trilu"]),
    ((32, 32), 1, 100, -1e9, np.float32, False, ["ConstantOfShape", "Trilu"]),
    ((16, 16), -2, 3, 7, np.int32, True, ["ConstantOfShape", "Trilu", "Trilu", "Add"]),
    ((48, 48), -2, 3, True, np.bool_, True, ["ConstantOfShape", "Trilu", "Trilu", "Or"]),
    ((64, 64), -100, 1, 1, np.uint8, False, ["ConstantOfShape", "Trilu", "Cast"]),
    ((4, 32, 32), 0, 1, -5, np.int8, False, ["ConstantOfShape", "Trilu", "Trilu", "Cast"]),
    ((32, 32), 1, 100, -3.5, ml_dtypes.bfloat16, False, ["ConstantOfShape", "Trilu", "Cast"]),
    ((32, 32), -1, 2, NEG_ZERO, np.float16, False, ["ConstantOfShape", "Trilu", "Trilu"]),
    ((16, 16), 0, 1, NEG_ZERO, np.float32, False, ["ConstantOfShape", "Trilu", "Trilu"]),
    ((16, 16), 0, 1, np.inf, np.float64, False, ["ConstantOfShape", "Trilu", "Trilu"]),
    ((32, 32), -100, 1, 65535, np.uint32, False, ["ConstantOfShape", "Trilu", "Cast"]),
]


@pytest.mark.parametrize("as_constant", [False, True])
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{np.dtype(k[4]).name}-{k[1]}-{k[2]}-{k[5]}")
def test_every_band_kind_is_generated_bit_identically(kind, as_constant) -> None:
    shape, begin, end, value, dtype, inverted, generator = kind
    model = stored_model(band_array(shape, begin, end, value, dtype, inverted), as_constant)
    out, rewrites, _ = optimized(model)
    assert len(rewrites) == 1 and rewrites[0].bytes_saved > 0
    assert ops(out) == generator + ["Identity"]
    assert out.ByteSize() < model.ByteSize()
    assert not out.graph.initializer or all(len(t.dims) <= 1 for t in out.graph.initializer)


@pytest.mark.parametrize("array, reason", [
    (band_array((16, 16), -2, 3, NEG_ZERO, np.float32, inverted=True), None),    # -0.0 + +0.0 would be +0.0
    (band_array((16, 16), 0, 1, 2**63, np.uint64), "uint64"),
    (np.tril(np.arange(256, dtype=np.float32).reshape(16, 16)), None),         # not one value
    (band_array((16, 16), 0, 1, np.nan, np.float32), None),
    (band_array((3, 3), 0, 1, 1, np.float32), "is not smaller than the"),       # generator is not smaller
])
def test_what_is_not_generated_exactly_or_smaller_stays(array, reason) -> None:
    model = stored_model(array)
    out, rewrites, declined = optimized(model)
    assert rewrites == [] and ops(out) == ["Identity"]
    assert out.graph.initializer[0] == model.graph.initializer[0]
    if reason:
        assert any(reason in line for line in declined)


def test_opset_too_old_for_trilu_is_declined_but_eyelike_fits() -> None:
    triangle = stored_model(band_array((16, 16), -100, 1, 1, np.float32), opset=13)
    _, rewrites, declined = optimized(triangle)
    assert rewrites == [] and "needs opset 14 (model: 13)" in declined[0]
    eye = stored_model(band_array((16, 16), 0, 1, 1, np.float32), opset=13)
    out, rewrites, _ = optimized(eye)
    assert len(rewrites) == 1 and out.opset_import[0].version == 13


def test_feature_level_keeps_bands_this_project_cannot_lower_there() -> None:
    model = stored_model(band_array((16, 16), -100, 1, 1, np.float32))
    _, rewrites, declined = optimize_model(model, level=parse_level("2_0"))
    assert rewrites == [] and "DIAGONAL_MATRIX1" in declined[0]
    assert len(optimize_model(model, level=parse_level("5_1"))[1]) == 1


def test_min_bytes_and_overridable_initializers_are_left_alone() -> None:
    model = stored_model(band_array((16, 16), 0, 1, 1, np.float32))
    _, rewrites, declined = optimize_model(model, min_bytes=16 * 16 * 4 + 1)
    assert rewrites == [] and declined == ["initializer c (float [16, 16]): kept, 1024 bytes, under --min-bytes 1025"]
    model.graph.input.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [16, 16]))
    assert optimize_model(model)[1] == []


def eye_ranges_model(n: int, m: int, to: "int | None", limit_type=np.int64) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.array(v, limit_type), name) for name, v in
             (("zero", 0), ("one", 1), ("n", n), ("m", m))] + [numpy_helper.from_array(np.array([-1]), "axes")]
    nodes = [helper.make_node("Range", ["zero", "n", "one"], ["rows"], name="range_rows"),
             helper.make_node("Range", ["zero", "m", "one"], ["cols"], name="range_cols"),
             helper.make_node("Unsqueeze", ["rows", "axes"], ["column"], name="unsqueeze"),
             helper.make_node("Equal", ["column", "cols"], ["eq"], name="equal")]
    out, out_type = "eq", TensorProto.BOOL
    if to is not None:
        nodes.append(helper.make_node("Cast", ["eq"], ["eye"], name="cast", to=to))
        out, out_type = "eye", to
    nodes.append(helper.make_node("Identity", [out], ["y"], name="out"))
    graph = helper.make_graph(nodes, "eye", [], [helper.make_tensor_value_info("y", out_type, [n, m])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("n, m, to, generator", [
    (5, 7, TensorProto.FLOAT, ["ConstantOfShape", "EyeLike"]),
    (6, 6, TensorProto.INT64, ["ConstantOfShape", "EyeLike"]),
    (4, 9, None, ["ConstantOfShape", "Trilu", "Trilu"]),
    (8, 3, TensorProto.UINT8, ["ConstantOfShape", "Trilu", "Trilu", "Cast"]),
])
def test_torch_eye_ranges_become_fewer_nodes(n, m, to, generator) -> None:
    model = eye_ranges_model(n, m, to)
    out, rewrites, _ = optimized(model)
    assert len(rewrites) == 1 and rewrites[0].nodes_delta < 0
    assert ops(out) == generator + ["Identity"]
    assert [o.name for o in out.graph.output] == ["y"]


def test_unnamed_nodes_stay_unnamed() -> None:
    model = eye_ranges_model(5, 7, TensorProto.FLOAT)
    for node in model.graph.node:
        node.name = ""
    out, rewrites, _ = optimized(model)
    assert len(rewrites) == 1 and out.graph.node[-1].name == ""


def test_float_ranges_past_exact_integers_stay() -> None:
    model = eye_ranges_model(2**11 + 2, 3, TensorProto.FLOAT, limit_type=np.float16)
    assert optimize_model(model)[1] == []


@given(case=bands())
def test_optimize_is_idempotent_and_bit_identical(case) -> None:
    array, as_constant = case
    model = stored_model(array, as_constant)
    once, _, _ = optimized(model)
    twice, rewrites, _ = optimize_model(once)
    assert rewrites == [] and twice == once


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_exported_models_stay_bit_identical(path) -> None:
    model = onnx.load(str(path))
    out, rewrites, _ = optimized(model)
    assert [i.name for i in out.graph.input] == [i.name for i in model.graph.input]
    assert [o.name for o in out.graph.output] == [o.name for o in model.graph.output]
    if path.name.startswith("mlp_sparse"):     # its torch.eye, folded to a stored 8x8 identity
        assert [r.generator for r in rewrites] == ["ConstantOfShape + EyeLike"]


def test_cli_keeps_metadata_opsets_names_and_external_data(tmp_path, capsys) -> None:
    model = stored_model(band_array((1, 1, 128, 128), -200, 1, True, np.bool_))
    model.graph.initializer.append(numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(64, 64), "w"))
    model.graph.node.append(helper.make_node("Identity", ["w"], ["z"], name="w_out"))
    model.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [64, 64]))
    model.opset_import.append(helper.make_opsetid("com.example", 3))
    model.metadata_props.add(key="author", value="tests")
    model.producer_name, model.doc_string = "pytest", "a stored causal mask"
    source = tmp_path / "in.onnx"
    onnx.save_model(model, str(source), save_as_external_data=True, location="in.data", size_threshold=0)
    target = tmp_path / "out.onnx"
    assert main(["optimize", str(source), "-o", str(target), "--check"]) == 0
    text = capsys.readouterr().out
    assert "initializer c (bool [1, 1, 128, 128]) -> ConstantOfShape + Trilu:" in text
    assert "bit-identical on onnxruntime CPU" in text
    raw = onnx.load(str(target), load_external_data=False)
    assert {t.name for t in raw.graph.initializer if t.data_location == TensorProto.EXTERNAL} == {"w"}
    assert (tmp_path / "out.onnx.data").is_file()
    loaded = onnx.load(str(target))
    assert [(o.domain, o.version) for o in loaded.opset_import] == [("", 17), ("com.example", 3)]
    assert [(p.key, p.value) for p in loaded.metadata_props] == [("author", "tests")]
    assert (loaded.producer_name, loaded.doc_string) == ("pytest", "a stored causal mask")
    assert [o.name for o in loaded.graph.output] == ["y", "z"]
    inferred = onnx.shape_inference.infer_shapes(loaded, strict_mode=True)
    assert [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim] == [1, 1, 128, 128]


def test_cli_nothing_to_rewrite_and_errors(tmp_path, capsys) -> None:
    source = tmp_path / "plain.onnx"
    onnx.save(stored_model(np.ones((4, 4), np.float32)), str(source))
    assert main(["optimize", str(source), "-o", str(tmp_path / "o.onnx")]) == 0
    assert "nothing to rewrite" in capsys.readouterr().out
    assert main(["optimize", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "o.onnx")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["optimize", str(source), "-o", str(tmp_path / "o.onnx"), "--min-bytes", "-1"]) == 2
    assert main(["optimize", str(source), "-o", str(tmp_path / "no" / "o.onnx")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_pass_composes_in_onnx_ir_pass_manager() -> None:
    model = onnx_ir.serde.deserialize_model(stored_model(band_array((32, 32), 1, 100, -1e9, np.float32)))
    result = onnx_ir.passes.PassManager([GenerateBands(), onnx_ir.passes.PassManager([GenerateBands()])])(model)
    assert result.modified
    proto = onnx_ir.serde.serialize_model(result.model)
    assert ops(proto) == ["ConstantOfShape", "Trilu", "Identity"]
    again = GenerateBands()(result.model)
    assert not again.modified


def test_pass_reads_external_weights_from_the_folder_onnx_ir_loaded(tmp_path) -> None:
    """A model saved with its stored band in external data, loaded by onnx_ir.load: the pass reads
    the band from the model's folder (it refused with 'pass the model file's path', which a pass
    cannot), rewrites it, and the result holds its weights in memory, bit-identical to the file's."""
    stored = stored_model(band_array((32, 32), 1, 100, -1e9, np.float32))
    stored.graph.initializer.append(onnx.numpy_helper.from_array(np.arange(4096, dtype=np.float32), "kept"))
    stored.graph.node.append(onnx.helper.make_node("Identity", ["kept"], ["kept_out"], name="keep"))
    stored.graph.output.append(onnx.helper.make_tensor_value_info("kept_out", onnx.TensorProto.FLOAT, [4096]))
    path = tmp_path / "m.onnx"
    onnx.save_model(stored, str(path), save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    result = onnx_ir.passes.PassManager([GenerateBands()])(onnx_ir.load(str(path)))
    assert result.modified
    proto = onnx_ir.serde.serialize_model(result.model)
    assert "Trilu" in ops(proto)
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in proto.graph.initializer)
    original = onnx.load(str(path))                     # the file's own weights, loaded by onnx
    assert bit_identical(original.SerializeToString(), proto.SerializeToString(), graph_inputs(original)) == []
