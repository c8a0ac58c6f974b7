"""One-node RoiAlign models for the DML EP's RoiAlign deviations (runtime/dml_deviations.py): the
ROI sizes, modes and opsets the real EP was measured on."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

# [x1, y1, x2, y2] in input pixels; at spatial_scale 0.5 the small one is 0.95 x 2.3 feature pixels
ROIS = {"small": [[4.2, 3.3, 6.1, 7.9]], "big": [[1.0, 2.0, 14.0, 12.0]],
        "mixed": [[4.2, 3.3, 6.1, 7.9], [1.0, 2.0, 14.0, 12.0], [0.0, 0.0, 19.0, 19.0]]}


def roi_align(opset: int, transform: "str | None", rois: str, mode: str = "avg", sampling_ratio: int = 2,
              scale: float = 0.5) -> onnx.ModelProto:
    """x [1, 4, 10, 10] -> RoiAlign (7 x 7) over the named ROIs (initializers) -> y."""
    attrs = dict(output_height=7, output_width=7, sampling_ratio=sampling_ratio, spatial_scale=scale, mode=mode)
    if transform is not None:
        attrs["coordinate_transformation_mode"] = transform
    boxes = np.array(ROIS[rois], np.float32)
    graph = h.make_graph([h.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="roialign", **attrs)], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 10, 10])],
                         [h.make_tensor_value_info("y", T.FLOAT, [len(boxes), 4, 7, 7])],
                         [numpy_helper.from_array(boxes, "rois"),
                          numpy_helper.from_array(np.zeros(len(boxes), np.int64), "bi")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)


def feeds(seed: int = 0) -> "dict[str, np.ndarray]":
    return {"x": np.random.default_rng(seed).standard_normal((1, 4, 10, 10)).astype(np.float32)}
