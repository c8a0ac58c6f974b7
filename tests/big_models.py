"""A model whose external data passes 2 GB, written sparse (a hole in the file costs no disk).

One float32 weight of WEIGHT_ELEMENTS elements, zero except at NONZERO (offset -> value), feeds:

    g   = Gather(W, PICK)              the few picked values (known: NONZERO or 0)
    nz  = NonZero(g)                   where they are non-zero
    s   = Add(g, x)                    x: the graph input, float32 [len(PICK)]
    eye = EyeLike(Reshape(g, [2, 3]), k=1)
    top = ReduceMax(W)                 reads every byte of the weight

Used by tests/compiler/test_big_models.py and benchmarks/bigmodel_bench.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

WEIGHT_ELEMENTS = 600_000_000                  # 2.4 GB of float32
NONZERO = {7: 1.5, 123_456_789: -2.25, 599_999_999: 3.0}
PICK = np.array([7, 8, 123_456_789, 0, 599_999_999, 42], np.int64)


def write_big_model(folder: Path, ir_version: int = 10, elements: int = WEIGHT_ELEMENTS, matrix: bool = False,
                    as_input: bool = False) -> Path:
    """big.onnx and its sparse big.onnx.data in `folder`; returns the model path. `matrix`: the
    weight is stored as a [elements / 1000, 1000] matrix (an initializer every band idiom examines)
    and flattened by a Reshape; `as_input`: it is also a graph input (a default a feed overrides)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "big.onnx.data"
    with open(data, "wb") as f:
        for offset, value in NONZERO.items():
            f.seek(offset * 4)
            f.write(np.float32(value).tobytes())
        f.truncate(elements * 4)
    dims = [elements // 1000, 1000] if matrix else [elements]
    weight = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=dims)
    weight.data_location = TensorProto.EXTERNAL
    for key, text in (("location", data.name), ("offset", "0"), ("length", str(elements * 4))):
        weight.external_data.add(key=key, value=text)
    count = len(PICK)
    flat = "W"
    nodes = []
    if matrix:
        flat = "W_flat"
        nodes.append(helper.make_node("Reshape", ["W", "flat_shape"], [flat], name="flatten"))
    nodes += [
        helper.make_node("Gather", [flat, "pick"], ["g"], name="gather"),
        helper.make_node("NonZero", ["g"], ["nz"], name="nonzero"),
        helper.make_node("Add", ["g", "x"], ["s"], name="add"),
        helper.make_node("Reshape", ["g", "shape23"], ["g23"], name="reshape"),
        helper.make_node("EyeLike", ["g23"], ["eye"], name="eyelike", k=1),
        helper.make_node("ReduceMax", [flat], ["top"], name="reducemax", keepdims=0),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [count])]
    if as_input:
        inputs.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, dims))
    graph = helper.make_graph(
        nodes, "big", inputs,
        [helper.make_tensor_value_info("nz", TensorProto.INT64, [1, None]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [count]),
         helper.make_tensor_value_info("eye", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("top", TensorProto.FLOAT, [])],
        [weight, numpy_helper.from_array(PICK, "pick"), numpy_helper.from_array(np.array([2, 3], np.int64), "shape23"),
         numpy_helper.from_array(np.array([-1], np.int64), "flat_shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=ir_version)
    path = folder / "big.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def expected_outputs(x: np.ndarray) -> "dict[str, np.ndarray]":
    """The outputs computed from NONZERO alone (the rest of the weight is zero)."""
    picked = np.array([NONZERO.get(int(i), 0.0) for i in PICK], np.float32)
    return {"nz": np.stack([np.flatnonzero(picked)]).astype(np.int64),
            "s": picked + x.astype(np.float32),
            "eye": np.eye(2, 3, k=1, dtype=np.float32),
            "top": np.float32(max(0.0, *NONZERO.values()))}
