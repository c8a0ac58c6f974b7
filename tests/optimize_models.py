"""Models holding a stored constant, for the optimize tests and fuzzer."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import helper, numpy_helper


def stored_model(array: np.ndarray, as_constant: bool = False, opset: int = 17) -> onnx.ModelProto:
    """y = Identity(c), c an initializer (or a Constant node) holding `array`."""
    onnx_type = helper.np_dtype_to_tensor_dtype(array.dtype)
    tensor = numpy_helper.from_array(array, "c")
    nodes = [helper.make_node("Identity", ["c"], ["y"], name="out")]
    if as_constant:
        nodes.insert(0, helper.make_node("Constant", [], ["c"], name="const", value=tensor))
    graph = helper.make_graph(nodes, "stored", [], [helper.make_tensor_value_info("y", onnx_type, array.shape)],
                              [] if as_constant else [tensor])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def band_array(shape: "tuple[int, ...]", begin: int, end: int, value, dtype, inverted: bool = False) -> np.ndarray:
    rows, cols = shape[-2:]
    diagonal = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    on = (diagonal >= begin) & (diagonal < end)
    if inverted:
        on = ~on
    out = np.zeros(shape, dtype=dtype)
    out[..., on] = np.asarray(value).astype(dtype)
    return out


@st.composite
def bands(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64, np.float16, np.int32, np.int64, np.bool_, np.uint8,
                                  np.int8, np.int16, np.uint16, np.uint32, ml_dtypes.bfloat16]))
    rows, cols = draw(st.integers(2, 24)), draw(st.integers(2, 24))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    begin = draw(st.integers(-rows - 1, cols))
    end = draw(st.integers(begin + 1, cols + 2))
    if np.dtype(dtype) == np.bool_:
        value = True
    elif np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        value = draw(st.integers(int(info.min), int(info.max)).filter(bool))
    else:
        value = draw(st.sampled_from([1.0, 3.0, -1e9, -0.0, 0.5, np.inf, -np.inf, 1e-40, 2.0**-14]))
    inverted = draw(st.booleans())
    return band_array(tuple(batch) + (rows, cols), begin, end, value, dtype, inverted), draw(st.booleans())
