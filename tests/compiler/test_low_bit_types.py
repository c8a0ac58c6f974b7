"""int4, uint4, float4e2m1, every float8 and bfloat16 graph inputs end to end: random feeds and
.npz feeds (`check --save-inputs` read back by `--inputs`), through Cast into NonZero and EyeLike
and back into the type, on every backend, compared with onnx.reference; onnxruntime is asked
directly whether it has the kernels, and the report must say what it lacks."""
from __future__ import annotations

import ctypes
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.ir.dtypes import onnx_to_numpy
from onnx_dml_lowering.runtime.feeds import random_feeds, restore_dtype
from onnx_dml_lowering.runtime.npz import load_npz
from onnx_dml_lowering.runtime.ort_values import pack_4bit, run_session, unpack_4bit
from tests.builders import graph_model
from tests.oracle import assert_outputs_same, assert_same, reference

# ONNX type -> (ml_dtypes type, the first opset whose Cast takes it)
TYPES = {
    "int4": (T.INT4, ml_dtypes.int4, 21),
    "uint4": (T.UINT4, ml_dtypes.uint4, 21),
    "float4e2m1": (T.FLOAT4E2M1, ml_dtypes.float4_e2m1fn, 23),
    "float8e4m3fn": (T.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn, 19),
    "float8e4m3fnuz": (T.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz, 19),
    "float8e5m2": (T.FLOAT8E5M2, ml_dtypes.float8_e5m2, 19),
    "float8e5m2fnuz": (T.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz, 19),
    "float8e8m0": (T.FLOAT8E8M0, ml_dtypes.float8_e8m0fnu, 24),
    "bfloat16": (T.BFLOAT16, ml_dtypes.bfloat16, 13),
}


def low_bit_model(onnx_type: int, opset: int) -> onnx.ModelProto:
    """x (the type) -> Cast float -> NonZero, EyeLike; and Cast back to the type (an output of it)."""
    nodes = [h.make_node("Cast", ["x"], ["f"], name="cast", to=T.FLOAT),
             h.make_node("NonZero", ["f"], ["nz"], name="nz"),
             h.make_node("EyeLike", ["f"], ["eye"], name="eye", k=1),
             h.make_node("Cast", ["f"], ["back"], name="cast_back", to=onnx_type)]
    model = graph_model(nodes, [("x", onnx_type, ["n", 5])],
                        [("nz", T.INT64, 2), ("eye", T.FLOAT, ["n", 5]), ("back", onnx_type, ["n", 5])], opset=opset)
    model.ir_version = 10 if opset <= 21 else 11
    return model


def onnxruntime_lacks(model: onnx.ModelProto) -> "str | None":
    """onnxruntime's own answer: the error creating a CPU session, or None when it loads."""
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:
        return str(exc)
    return None


def by_backend(data: dict) -> "dict[str, dict]":
    return {b["backend"]: b for b in data["backends"]}


@pytest.mark.parametrize("name", sorted(TYPES))
def test_check_random_feeds_then_the_saved_npz(name, tmp_path, capsys):
    onnx_type, np_type, opset = TYPES[name]
    model = low_bit_model(onnx_type, opset)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    lacks = onnxruntime_lacks(model)
    saved = tmp_path / "feeds.npz"
    runs = [["--save-inputs", saved, "--seed", "5", "--dim", "n=7"], ["--inputs", saved]]
    for extra in runs:
        capsys.readouterr()
        # the modified copy, in which a node onnxruntime has no kernel for is cut out (the file
        # as shipped does not load there: test_provider_cut.py)
        code = main([str(a) for a in ["check", path, "--backends", "cpu,ort,ort-cpu", "--json",
                                      tmp_path / "r.json", "--provider-model", "modified", *extra]])
        out, err = capsys.readouterr()
        assert code == 0 and err == "", (out, err)
        data = json.loads((tmp_path / "r.json").read_text())
        backends = by_backend(data)
        for backend in ("cpu", "ort"):
            assert {o["status"] for o in backends[backend]["outputs"]} == {"match"}
        ort_cpu = backends["ort-cpu"]
        if lacks is None:
            assert {o["status"] for o in ort_cpu["outputs"]} == {"match"} and not ort_cpu["unsupported_nodes"]
        else:                                    # what onnxruntime lacks is named, never a match
            assert ort_cpu["unsupported_nodes"], lacks
            assert any(node in lacks for node in ort_cpu["unsupported_nodes"])
            cut = {o["output"]: o["status"] for o in ort_cpu["outputs"]}
            assert "unsupported" in cut.values() and "mismatch" not in cut.values()
            assert ort_cpu["status"] == "partial"
    # What the tool wrote reads back as the declared type, bit for bit, and is what it drew.
    compiled = compile_model(model)
    drawn = random_feeds(compiled.inputs, seed=5, dims={"n": 7})
    x = restore_dtype(load_npz(str(saved))["x"], np.dtype(np_type))
    assert_same(x, drawn["x"], "x")
    # The Python API on the same feeds against onnx.reference.
    assert_outputs_same(compiled.run({"x": x}), reference(model, {"x": x}))
    assert_outputs_same(compiled.run({"x": x}, backend="ort"), reference(model, {"x": x}))


@pytest.mark.parametrize("name", ["float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float8e8m0",
                                  "int4", "uint4", "float4e2m1", "bfloat16"])
def test_a_plain_numpy_savez_reads_back_too(name, tmp_path, rng):
    """np.savez writes float8e5m2 as '<f1' (which np.load refuses) and the rest as raw records."""
    onnx_type, np_type, opset = TYPES[name]
    model = low_bit_model(onnx_type, opset)
    x = (rng.standard_normal((4, 5)) * (rng.random((4, 5)) < 0.5)).astype(np.float32)
    x = (np.abs(x) + 0.5 if name == "float8e8m0" else x).astype(np_type)
    np.savez(tmp_path / "plain.npz", x=x)
    loaded = load_npz(str(tmp_path / "plain.npz"))
    compiled = compile_model(model)
    assert_outputs_same(compiled.run(loaded), reference(model, {"x": x}))


@pytest.mark.parametrize("name", ["int4", "uint4", "float4e2m1"])
@pytest.mark.parametrize("shape", [(0,), (1,), (5,), (2, 3), (3, 3), (2, 2, 2)])
def test_4bit_packing_is_onnx_s(name, shape, rng):
    """pack_4bit gives the bytes ONNX's own TensorProto holds; unpack_4bit inverts it."""
    _, np_type, _ = TYPES[name]
    x = rng.integers(-8, 8, shape).astype(np.float32).astype(np_type) if name != "uint4" else \
        rng.integers(0, 16, shape).astype(np.float32).astype(np_type)
    packed = pack_4bit(x)
    assert packed.tobytes() == numpy_helper.from_array(x).raw_data
    assert_same(unpack_4bit(packed, shape, x.dtype), x)


def _onnx_packed_ortvalue(x: np.ndarray, onnx_type: int):
    """An OrtValue holding the bytes onnx.numpy_helper packs (independent of pack_4bit)."""
    raw = numpy_helper.from_array(x).raw_data
    value = ort.OrtValue.ortvalue_from_shape_and_type(list(x.shape), onnx_type)
    if raw:
        ctypes.memmove(value.data_ptr(), raw, len(raw))
    return value


@pytest.mark.parametrize("name", ["int4", "uint4"])
@pytest.mark.parametrize("shape", [(7,), (2, 5), (3, 4)])
def test_run_session_feeds_and_reads_4bit_like_onnxruntime_itself(name, shape, rng):
    """Cast(x: 4-bit) -> float and Cast(float) -> 4-bit through run_session, against onnxruntime fed
    onnx's packing directly, and against onnx.reference."""
    onnx_type, np_type, opset = TYPES[name]
    nodes = [h.make_node("Cast", ["x"], ["f"], name="to_float", to=T.FLOAT),
             h.make_node("Cast", ["f"], ["y"], name="to_type", to=onnx_type)]
    model = graph_model(nodes, [("x", onnx_type, list(shape))],
                        [("f", T.FLOAT, list(shape)), ("y", onnx_type, list(shape))], opset=opset)
    model.ir_version = 10
    low, high = (-8, 8) if name == "int4" else (0, 16)
    x = rng.integers(low, high, shape).astype(np.float32).astype(np_type)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ours = dict(zip(["f", "y"], run_session(session, ["f", "y"], {"x": x})))
    direct = session.run_with_ort_values(["f", "y"], {"x": _onnx_packed_ortvalue(x, onnx_type)})
    assert_same(ours["f"], direct[0].numpy(), "f")
    raw = (ctypes.c_uint8 * ((x.size + 1) // 2)).from_address(direct[1].data_ptr())
    assert pack_4bit(ours["y"]).tobytes() == bytes(raw)
    assert_outputs_same(ours, reference(model, {"x": x}))
    assert ours["y"].dtype == np.dtype(np_type) and onnx_to_numpy(onnx_type) == np.dtype(np_type)


@pytest.mark.parametrize("name", sorted(TYPES))
def test_random_feeds_of_every_low_bit_type(name):
    """Seeded, of the declared type, with zeros where the type has one (float8e8m0 has none)."""
    onnx_type, np_type, _ = TYPES[name]
    vi = h.make_tensor_value_info("x", onnx_type, [6, 7])
    first = random_feeds([vi], seed=3)["x"]
    assert first.dtype == np.dtype(np_type) and first.shape == (6, 7)
    assert_same(random_feeds([vi], seed=3)["x"], first)
    as_float = first.astype(np.float32)
    if name == "float8e8m0":
        assert np.all(as_float > 0) and np.all(np.isfinite(as_float))
    else:
        assert 0 < np.count_nonzero(as_float) < as_float.size
        full = random_feeds([vi], seed=3, zero_fraction=0.0)["x"].astype(np.float32)
        assert np.count_nonzero(full) == full.size


def test_float8e8m0_value_range_outside_its_values_is_one_line():
    vi = h.make_tensor_value_info("x", T.FLOAT8E8M0, [2])
    with pytest.raises(Exception, match="float8e8m0"):
        random_feeds([vi], value_range=(-2.0, -1.0))
    with pytest.raises(Exception, match="float8e8m0"):
        random_feeds([vi], value_range=(2.5, 3.5))
    assert set(random_feeds([vi], value_range=(2.0, 4.0))["x"].astype(np.float32)) <= {2.0, 4.0}


def test_saved_low_bit_outputs_are_a_golden_file(tmp_path, capsys):
    """--save-outputs writes the int4 output 'back'; --oracle and --load-outputs read it back typed."""
    model = low_bit_model(T.INT4, 21)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    feeds, outputs = tmp_path / "f.npz", tmp_path / "o.npz"
    assert main(["check", str(path), "--save-inputs", str(feeds), "--save-outputs", str(outputs), "-q"]) == 0
    capsys.readouterr()
    code = main(["check", str(path), "--inputs", str(feeds), "--oracle", str(outputs),
                 "--load-outputs", str(outputs), "--json", str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert code == 0, (out, err)
    data = json.loads(Path(tmp_path / "r.json").read_text())
    statuses = {(b["backend"], o["output"]): o["status"] for b in data["backends"] for o in b["outputs"]}
    assert statuses[("saved:cpu", "back")] == "match" and statuses[("cpu", "back")] == "match"


def test_an_npz_bfloat16_fed_to_a_float_input_is_named_as_raw_records(tmp_path):
    """np.savez keeps bfloat16 as raw 2-byte records; fed to a float32 input the error says so."""
    from onnx_dml_lowering.ir import DmlLowerError
    from onnx_dml_lowering.runtime.feeds import check_feeds
    path = tmp_path / "bf.npz"
    np.savez(path, x=np.ones(3, ml_dtypes.bfloat16))
    with np.load(path) as data:
        raw = data["x"]
    with pytest.raises(DmlLowerError, match=r"^input 'x': expected float \(float32\), got raw 2-byte records "
                                            r"\(\|V2, how np.savez keeps an ml_dtypes array such as bfloat16\)$"):
        check_feeds([h.make_tensor_value_info("x", T.FLOAT, [3])], {"x": raw})


@pytest.mark.parametrize("name", ["INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2", "FLOAT6E2M3", "FLOAT6E3M2"])
def test_a_packed_type_takes_the_bytes_onnx_packs_it_in(name):
    """onnx packs sub-byte types (6-bit floats too: 8 elements in 6 bytes); the raw-data check
    counted a 6-bit float a byte, and refused onnx's own tensors as short."""
    from onnx_dml_lowering.runtime.weights import check_raw_data, data_bytes, mappable_dtype
    data_type = getattr(T, name)
    for count in (1, 7, 8, 9):
        tensor = numpy_helper.from_array(np.zeros(count, h.tensor_dtype_to_np_dtype(data_type)), "w")
        assert data_bytes(tensor) == len(tensor.raw_data), (name, count)
        check_raw_data(tensor, "model file 'm.onnx'")
    assert mappable_dtype(data_type) is None          # never mapped one element per byte
