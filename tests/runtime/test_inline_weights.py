"""Inline weights left in the .onnx file (runtime.inline_weights): the loaded proto holds no large
initializer's bytes, every value read back equals onnx's own parse of the file, and whatever the
scan does not expect falls back to the ordinary parse."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.frontend import load_model
from onnx_dml_lowering.compiler.optimize import save_model
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.inline_weights import parse_without_weights
from onnx_dml_lowering.runtime import weights
from onnx_dml_lowering.runtime.weights import LAZY_MIN_BYTES, is_lazy, tensor_array

BIG = LAZY_MIN_BYTES // 4 + 3            # float32 elements just past the threshold (odd: misaligned offsets)


def _weights(seed: int = 0) -> "list[TensorProto]":
    """One initializer per case: (name, array, lazy after loading?)."""
    rng = np.random.default_rng(seed)
    return [
        numpy_helper.from_array(rng.standard_normal((BIG,)).astype(np.float32).reshape(1, BIG), "w_f32"),
        numpy_helper.from_array(rng.standard_normal((1024, 513)).astype(np.float16), "w_f16"),
        numpy_helper.from_array(rng.integers(-128, 127, (LAZY_MIN_BYTES + 1,), dtype=np.int8), "w_i8"),
        numpy_helper.from_array(rng.integers(0, 9, (3, LAZY_MIN_BYTES // 24 + 1), dtype=np.int64), "w_i64"),
        numpy_helper.from_array(rng.random((2, LAZY_MIN_BYTES // 2 + 5)) < 0.5, "w_bool"),
        # 1-D integers stay inline: shape inference's data propagation reads their values
        numpy_helper.from_array(np.arange(LAZY_MIN_BYTES // 8 + 1, dtype=np.int64), "w_i64_flat"),
        # below the threshold
        numpy_helper.from_array(np.ones((4, 4), np.float32), "w_small"),
        # typed-field storage (float_data), not raw_data: stays
        helper.make_tensor("w_typed", TensorProto.FLOAT, [BIG], np.ones(BIG, np.float32).tolist()),
    ]


EXPECTED_LAZY = {"w_f32", "w_f16", "w_i8", "w_i64", "w_bool"}


def _model(weights: "list[TensorProto]") -> onnx.ModelProto:
    """Every weight reduced to a scalar sum-like output, so the model is valid and reads them all."""
    nodes, outputs = [], []
    for t in weights:
        nodes.append(helper.make_node("Shape", [t.name], [t.name + "_shape"]))
        outputs.append(helper.make_tensor_value_info(t.name + "_shape", TensorProto.INT64, [len(t.dims)]))
    graph = helper.make_graph(nodes, "g", [], outputs, initializer=weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_large_inline_initializers_stay_in_the_file(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(_weights()), path)
    loaded = load_model(path)
    assert {t.name for t in loaded.graph.initializer if is_lazy(t)} == EXPECTED_LAZY
    assert loaded.ByteSize() < 4 * LAZY_MIN_BYTES          # the weights' bytes are not in the proto
    reference = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    for tensor in loaded.graph.initializer:
        array = tensor_array(tensor)
        want = reference[tensor.name]
        assert array.dtype == want.dtype and array.shape == want.shape
        assert array.tobytes() == want.tobytes(), tensor.name
        for_ort = tensor_array(tensor, aligned=True)        # what onnxruntime is given
        assert for_ort.tobytes() == want.tobytes(), tensor.name
        assert for_ort.flags.aligned or weights.UNALIGNED_LOADS, tensor.name


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field."""
    out = bytearray([number << 3 | 2])
    length = len(payload)
    while True:
        out.append((length & 0x7F) | (0x80 if length > 0x7F else 0))
        length >>= 7
        if not length:
            return bytes(out) + payload


def _part(message_type, **fields) -> bytes:
    """A message holding only `fields`, serialised: concatenated parts parse as their merge."""
    return message_type(**fields).SerializeToString()


@settings(max_examples=25, deadline=None)
@given(st.permutations(range(3)), st.permutations(range(3)), st.permutations(range(3)))
def test_any_field_order_reads_the_same(tmp_path_factory, model_order, graph_order, tensor_order):
    """Protobuf writers may put fields in any order: the scan finds the weight wherever it lies."""
    weight = np.random.default_rng(1).standard_normal((3, BIG // 3 + 1)).astype(np.float32)
    tensor = [_part(TensorProto, dims=list(weight.shape)), _part(TensorProto, data_type=TensorProto.FLOAT, name="w"),
              _part(TensorProto, raw_data=weight.tobytes())]
    graph = [_part(onnx.GraphProto, node=[helper.make_node("ReduceSum", ["w"], ["y"], keepdims=0)], name="g"),
             _part(onnx.GraphProto, output=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [])]),
             _field(5, b"".join(tensor[i] for i in tensor_order))]
    model = [_part(onnx.ModelProto, ir_version=8), _part(onnx.ModelProto, opset_import=[helper.make_opsetid("", 11)]),
             _field(7, b"".join(graph[i] for i in graph_order))]
    path = tmp_path_factory.mktemp("order") / "m.onnx"
    path.write_bytes(b"".join(model[i] for i in model_order))
    loaded = parse_without_weights(str(path))
    assert loaded is not None
    (lazy,) = loaded.graph.initializer
    assert lazy.data_location == TensorProto.EXTERNAL and not lazy.raw_data and list(lazy.dims) == list(weight.shape)
    resolved = load_model(path)
    assert tensor_array(resolved.graph.initializer[0]).tobytes() == weight.tobytes()
    # onnxruntime folds an inline initializer's ReduceSum at session creation and sums a weight
    # that is an input at run time: the order of the float additions may differ
    np.testing.assert_allclose(compile_model(str(path)).run({})["y"], compile_model(onnx.load(path)).run({})["y"],
                               rtol=1e-5)


def _matmul_model(seed: int = 0) -> onnx.ModelProto:
    """y = NonZero(x @ W > 0) and an EyeLike of the product: the lowered ops after a large weight."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((515, 513)).astype(np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["p"]),
             helper.make_node("Greater", ["p", "zero"], ["pos"]),
             helper.make_node("NonZero", ["pos"], ["nz"]),
             helper.make_node("Slice", ["p", "st", "en", "ax"], ["sq"]),
             helper.make_node("EyeLike", ["sq"], ["eye"], k=1)]
    inits = [w, numpy_helper.from_array(np.zeros((), np.float32), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "st"),
             numpy_helper.from_array(np.array([4], np.int64), "en"),
             numpy_helper.from_array(np.array([1], np.int64), "ax")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 515])],
                              [helper.make_tensor_value_info("nz", TensorProto.INT64, [2, None]),
                               helper.make_tensor_value_info("eye", TensorProto.FLOAT, [4, 4])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_model_with_inline_weights_runs_as_from_memory(tmp_path):
    model = _matmul_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    from_file = compile_model(str(path))
    assert is_lazy(next(t for t in from_file.model.graph.initializer if t.name == "W"))
    from_proto = compile_model(model)
    x = np.random.default_rng(3).standard_normal((4, 515)).astype(np.float32)
    for backend in ("cpu", "ort"):
        got = from_file.run({"x": x}, backend=backend)
        want = from_proto.run({"x": x}, backend=backend)
        for name in ("nz", "eye"):
            np.testing.assert_array_equal(got[name], want[name])


def test_writers_keep_inline_weights_inline(tmp_path):
    model = _matmul_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    loaded = load_model(path)
    out = tmp_path / "out.onnx"
    assert save_model(loaded, str(out), set()).location is None
    assert not (tmp_path / "out.onnx.data").exists()
    written = onnx.load(out, load_external_data=False)
    assert all(t.data_location == TensorProto.DEFAULT for t in written.graph.initializer)
    for a, b in zip(written.graph.initializer, model.graph.initializer):
        assert numpy_helper.to_array(a).tobytes() == numpy_helper.to_array(b).tobytes()


def test_a_truncated_file_is_named_by_the_ordinary_parse(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_matmul_model(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert parse_without_weights(str(path)) is None
    with pytest.raises(DmlLowerError, match="not an ONNX model"):
        load_model(path)


@pytest.mark.parametrize("unaligned_loads", [True, False])
def test_misaligned_weights_reach_onnxruntime_with_the_same_results(tmp_path, monkeypatch, unaligned_loads):
    """A weight at a misaligned offset of the file, handed to onnxruntime as its map (where the
    machine loads misaligned data) or as an aligned copy: the same bits out as from memory."""
    monkeypatch.setattr(weights, "UNALIGNED_LOADS", unaligned_loads)
    weights._MAPS.clear()
    model = _matmul_model(5)
    path = tmp_path / "m.onnx"
    for pad in range(4):                  # the producer name's length moves every byte after it
        model.producer_name = "x" * pad
        onnx.save(model, path)
        compiled = compile_model(str(path))
        w = next(t for t in compiled.model.graph.initializer if t.name == "W")
        if weights.external_path(w)[1] % 4:
            break
    assert weights.external_path(w)[1] % 4, "no misaligned layout found"
    x = np.random.default_rng(6).standard_normal((4, 515)).astype(np.float32)
    got, want = compiled.run({"x": x}, backend="ort"), compile_model(model).run({"x": x}, backend="ort")
    for name in ("nz", "eye"):
        np.testing.assert_array_equal(got[name], want[name])
    weights._MAPS.clear()



def test_a_detectors_sub_megabyte_weights_stay_in_the_file():
    """SSDlite320's export keeps its 2.4 MB of weights in a hundred-odd tensors, none of 1 MiB: each
    of 4 KiB or more stays in the file, so the proto that the checker, shape inference and the
    region sessions copy holds none of their bytes, and each value reads back as onnx parses it."""
    path = Path(__file__).parent.parent / "models" / "real" / "ssdlite320_mobilenet_v3.torchscript.onnx"
    loaded = load_model(path)
    reference = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    lazy = [t for t in loaded.graph.initializer if is_lazy(t)]
    assert len(lazy) > 50 and all(weights.stored_bytes(t) < 1 << 20 for t in lazy)
    assert loaded.ByteSize() < path.stat().st_size // 4
    for tensor in lazy:
        assert tensor_array(tensor).tobytes() == reference[tensor.name].tobytes(), tensor.name


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc/self/maps")
def test_small_weights_are_read_not_mapped(tmp_path):
    """A weight under MAP_MIN_BYTES is read when its value is asked for, so a file of many small
    weights cannot pass the kernel's limit on maps per process; a large one is mapped."""
    rng = np.random.default_rng(3)
    small = [numpy_helper.from_array(rng.standard_normal((LAZY_MIN_BYTES // 4 + i,)).astype(np.float32).reshape(1, -1),
                                     f"s{i}") for i in range(200)]
    large = numpy_helper.from_array(rng.standard_normal((1, weights.MAP_MIN_BYTES // 4 + 1)).astype(np.float32), "big")
    path = tmp_path / "many.onnx"
    onnx.save(_model([*small, large]), path)
    loaded = load_model(path)
    assert all(is_lazy(t) for t in loaded.graph.initializer)
    values = [tensor_array(t) for t in loaded.graph.initializer[:200]]
    real = os.path.realpath(path)                                   # /proc names the real path
    assert real not in Path("/proc/self/maps").read_text()
    for tensor, value in zip(small, values):
        assert value.tobytes() == numpy_helper.to_array(tensor).tobytes()
    mapped = tensor_array(loaded.graph.initializer[200])
    assert real in Path("/proc/self/maps").read_text() and mapped.tobytes() == large.raw_data


def _mapped_kib(path: Path) -> "int | None":
    """Resident KiB of this process's maps of `path` (/proc/self/smaps), None when none maps it."""
    total, inside, found = 0, False, False
    real = os.path.realpath(path)
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if "-" in line.split(" ", 1)[0] and len(line.split()) >= 5:        # a map's header line
            inside = line.endswith(real)
            found = found or inside
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total if found else None


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads Linux's /proc/self/smaps")
def test_the_scan_keeps_a_window_of_the_file_mapped(tmp_path, monkeypatch):
    """The scan reads a few bytes between weights, and each read maps the page (or page-cache
    folio) around it: the pages it has passed are unmapped as it goes, so its resident set is a
    window of the file, not most of it (Whisper-small: 404 of 924 MB before)."""
    from onnx_dml_lowering.runtime import inline_weights
    rng = np.random.default_rng(5)
    many = [numpy_helper.from_array(rng.standard_normal((1, 32 * 1024 + i)).astype(np.float32), f"w{i}")
            for i in range(256)]                                   # 128 KiB apart: 32 MiB in all
    path = tmp_path / "spread.onnx"
    onnx.save(_model(many), path)
    monkeypatch.setattr(inline_weights._Unmapper, "_STEP", 1 << 20)
    resident: "list[int]" = []
    scan = inline_weights._graph_without

    def measured(*args, **kwargs):
        result = scan(*args, **kwargs)
        resident.append(_mapped_kib(path))                         # the map is still open here
        return result
    monkeypatch.setattr(inline_weights, "_graph_without", measured)
    loaded = load_model(path)
    assert sum(is_lazy(t) for t in loaded.graph.initializer) == 256
    # KiB: the 1 MiB window, the folio it ends in and the one at the file's end (2 MiB each at most)
    assert resident and resident[0] is not None and resident[0] < 6 * 1024, resident


@pytest.mark.parametrize("many", [False, True])
def test_onnxruntime_gets_many_small_weights_inline(tmp_path, monkeypatch, many):
    """onnxruntime maps each external initializer on its own, once per session: past SMALL_MAPS_MAX
    of them, a weight under MAP_MIN_BYTES reaches it inline (its bytes read from the file); below,
    by reference like a large one, which always does."""
    from onnx_dml_lowering.runtime.ort import model as ort_module
    from onnx_dml_lowering.runtime.ort.model import ort_model
    if many:
        monkeypatch.setattr(ort_module, "SMALL_MAPS_MAX", 0)
    rng = np.random.default_rng(7)
    small = numpy_helper.from_array(rng.standard_normal((1, LAZY_MIN_BYTES // 4 + 5)).astype(np.float32), "small")
    large = numpy_helper.from_array(rng.standard_normal((1, weights.MAP_MIN_BYTES // 4 + 1)).astype(np.float32), "big")
    path = tmp_path / "two.onnx"
    onnx.save(_model([small, large]), path)
    loaded = load_model(path)
    assert all(is_lazy(t) for t in loaded.graph.initializer)
    given = onnx.ModelProto()
    given.ParseFromString(ort_model(loaded).data)
    by_name = {t.name: t for t in given.graph.initializer}
    if many:
        assert by_name["small"].data_location == TensorProto.DEFAULT
        assert by_name["small"].raw_data == small.raw_data
    else:
        assert by_name["small"].data_location == TensorProto.EXTERNAL and not by_name["small"].raw_data
    assert by_name["big"].data_location == TensorProto.EXTERNAL and not by_name["big"].raw_data
