"""The emulator hands its main graph only the initializers it reads by name (session.host_reads);
compile reads an initializer into an array only when something asks for it
(model_facts.InitializerArrays). Both are pinned against the old way, every initializer read and
fed, on real exports and on models whose lowered nodes read initializers themselves."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.feeds import random_feeds
from tests.builders import graph_model
from tests.paths import REAL

REAL_MODELS = ["ssdlite320_mobilenet_v3.torchscript", "mask_rcnn_mobilenet_v3.torchscript", "gpt2.dynamo",
               "mixtral.torchscript", "mistral_sliding.dynamo"]


def _both_ways(model: "str | onnx.ModelProto", feeds: "dict | None" = None) -> "tuple[dict, dict, object]":
    """The cpu backend's outputs fed only what the graph reads, and fed every initializer (as before)."""
    lean, full = compile_model(model), compile_model(model)
    feeds = random_feeds(lean.inputs, seed=7) if feeds is None else feeds
    got = lean.run(feeds)
    session = full.session()
    session._read = list(full.initializers)          # every initializer, as the emulator fed them before
    return got, full.run(feeds), lean


def _same(got: dict, expected: dict) -> None:
    assert list(got) == list(expected)
    for name, value in expected.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        assert got[name].tobytes() == value.tobytes(), name


@pytest.mark.parametrize("name", REAL_MODELS)
def test_real_exports_give_the_same_bits_fed_only_what_they_read(name):
    got, expected, lean = _both_ways(str(REAL / f"{name}.onnx"))
    _same(got, expected)
    # the regions embedded their weights from the model: no copy of them was made
    read = lean.initializers._arrays
    overridable = {vi.name for vi in lean.optional_inputs}
    assert len(read) < len(lean.initializers) or not lean.initializers
    assert set(read) <= overridable | set(lean.session()._read)


def _nonzero_of_initializers() -> onnx.ModelProto:
    """NonZero (lowered) of an initializer, NonZero of an initializer-that-is-an-input (a default a
    feed overrides), an Add of a weight in an ONNX region, and an initializer as a graph output."""
    model = graph_model([h.make_node("NonZero", ["w"], ["nz_w"], name="nz_w"),
                         h.make_node("NonZero", ["d"], ["nz_d"], name="nz_d"),
                         h.make_node("Add", ["x", "b"], ["y"], name="add")],
                        [("x", T.FLOAT, [2, 3])],
                        [("nz_w", T.INT64, 2), ("nz_d", T.INT64, 2), ("y", T.FLOAT, 2), ("b", T.FLOAT, 2)])
    w = np.array([[0, 1, 2], [3, 0, 0]], np.float32)
    d = np.array([[1, 0], [0, 1]], np.float32)
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    model.graph.initializer.extend([onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(d, "d"),
                                    onnx.numpy_helper.from_array(b, "b")])
    model.graph.input.append(h.make_tensor_value_info("d", T.FLOAT, [None, None]))
    return model


@pytest.mark.parametrize("fed", [False, True])
def test_lowered_nodes_read_their_initializers_and_defaults(fed):
    model = _nonzero_of_initializers()
    x = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
    feeds = {"x": x, **({"d": np.array([[0, 0, 1]], np.float32)} if fed else {})}
    got, expected, lean = _both_ways(model, feeds)
    _same(got, expected)
    assert [p.status for p in lean.placement if p.onnx_nodes in (["nz_w"], ["nz_d"])] == ["lowered", "lowered"]
    np.testing.assert_array_equal(got["nz_w"], np.array(np.nonzero([[0, 1, 2], [3, 0, 0]])))
    np.testing.assert_array_equal(got["nz_d"], np.array(np.nonzero(feeds.get("d", np.eye(2)))))
    np.testing.assert_array_equal(got["b"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert set(lean.session()._read) == {"w", "d", "b"}


def test_an_initializer_becomes_an_array_only_when_asked_for():
    compiled = compile_model(_nonzero_of_initializers())
    assert compiled.initializers._arrays == {}
    assert sorted(compiled.initializers) == ["b", "d", "w"] and "w" in compiled.initializers
    first = compiled.initializers["w"]
    assert compiled.initializers["w"] is first         # read once, then kept
    assert list(compiled.initializers._arrays) == ["w"]
    np.testing.assert_array_equal(first, np.array([[0, 1, 2], [3, 0, 0]], np.float32))
