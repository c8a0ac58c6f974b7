"""Detection-shaped graphs of real size for the placement picture (tests/compiler/ep/test_picture.py,
make picture-check): generated here, deterministically, with tiny channel counts so the files stay
small while the node counts are those of Mask R-CNN (`mask_rcnn_shaped`) and SSDlite
(`ssdlite_shaped`), with what makes their placement: long DirectML stretches, shape arithmetic the
CPU preference takes (Resize / Reshape sizes, no copy), NonMaxSuppression on the CPU between DML
nodes (copies both ways), RoiAlign on DML again, and a mask threshold through NonZero (lowered by
this project, cutting the fused DML graph).

    python -m tests.picture_models OUT_DIR   writes both models (and one of ~10^4 nodes)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

C = 4          # channels everywhere: the node count is the point, not the weights


class Builder:
    def __init__(self, seed: int) -> None:
        self.nodes: "list[onnx.NodeProto]" = []
        self.inits: "list[onnx.TensorProto]" = []
        self.outputs: "list[onnx.ValueInfoProto]" = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def op(self, op_type: str, inputs: "list[str]", stem: str = "", outputs: int = 1, **attrs) -> "list[str]":
        name = self.name(stem or op_type.lower())
        outs = [f"{name}_out{k}" for k in range(outputs)]
        self.nodes.append(h.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs

    def one(self, op_type: str, inputs: "list[str]", stem: str = "", **attrs) -> str:
        return self.op(op_type, inputs, stem, **attrs)[0]

    def const(self, value, dtype=np.float32) -> str:
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def conv(self, x: str, cin: int = C, cout: int = C, k: int = 3, group: int = 1, stem: str = "conv") -> str:
        w = self.const(self.rng.standard_normal((cout, cin // group, k, k)) * 0.1)
        return self.one("Conv", [x, w], stem, pads=[k // 2] * 4, group=group)

    def output(self, value: str, elem: int, rank: int) -> None:
        self.outputs.append(h.make_tensor_value_info(value, elem, [None] * rank))

    def model(self, name: str) -> onnx.ModelProto:
        x = h.make_tensor_value_info("image", T.FLOAT, [1, C, "height", "width"])
        graph = h.make_graph(self.nodes, name, [x], self.outputs, self.inits)
        return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def residual(b: Builder, x: str, stem: str) -> str:
    y = b.one("Relu", [b.conv(x, stem=stem)], stem)
    return b.one("Relu", [b.one("Add", [b.conv(y, stem=stem), x], stem)], stem)


def upsample_to(b: Builder, x: str, like: str) -> str:
    """Resize x to like's spatial size: the size is shape arithmetic the CPU preference takes, read
    by Resize as a CPU input (no copy)."""
    shape = b.one("Shape", [like], "fpn_shape")
    hw = b.one("Slice", [shape, b.const([2], np.int64), b.const([4], np.int64)], "fpn_size")
    sizes = b.one("Concat", [b.const([1, C], np.int64), hw], "fpn_sizes", axis=0)
    return b.one("Resize", [x, "", "", sizes], "fpn_resize", mode="nearest")


def nms(b: Builder, boxes: str, scores: str, stem: str) -> "tuple[str, str]":
    """NonMaxSuppression on the CPU (boxes and scores copied to the host), its box indices and
    batch indices read back on DML (copied back)."""
    keep = b.one("NonMaxSuppression", [boxes, scores, b.const([16], np.int64), b.const([0.5]), b.const([0.1])],
                 f"{stem}_nms")
    index, batch = (b.one("Squeeze", [b.one("Gather", [keep, b.const([k], np.int64)], stem, axis=1),
                                      b.const([1], np.int64)], stem) for k in (2, 0))
    return b.one("Gather", [b.one("Squeeze", [boxes, b.const([0], np.int64)], stem), index], stem, axis=0), batch


def proposals(b: Builder, features: "list[str]", stem: str) -> "tuple[str, str]":
    """Per level objectness and boxes on DML, concatenated, then one NonMaxSuppression."""
    scores, boxes = [], []
    for feature in features:
        y = b.one("Relu", [b.conv(feature, stem=stem)], stem)
        scores.append(b.one("Reshape", [b.one("Sigmoid", [b.conv(y, cout=1, stem=stem)], stem),
                                        b.const([1, 1, -1], np.int64)], stem))
        # the anchor grid's size is shape arithmetic on the CPU, cast to float and read on DML (a copy)
        size = b.one("Cast", [b.one("Gather", [b.one("Shape", [feature], f"{stem}_anchor"), b.const(2, np.int64)],
                                    f"{stem}_anchor", axis=0)], f"{stem}_anchor", to=T.FLOAT)
        deltas = b.one("Mul", [b.conv(y, cout=4, stem=stem), size], f"{stem}_anchor")
        boxes.append(b.one("Transpose", [b.one("Reshape", [deltas, b.const([1, 4, -1], np.int64)], stem)], stem,
                           perm=[0, 2, 1]))
    return nms(b, b.one("Concat", boxes, stem, axis=1), b.one("Concat", scores, stem, axis=2), stem)


def roi_head(b: Builder, features: "list[str]", rois: str, batch: str, depth: int, stem: str) -> "list[str]":
    """RoiAlign on every level and a convolution stack on DML."""
    out = []
    for feature in features:
        y = b.one("RoiAlign", [feature, rois, batch], f"{stem}_roialign", output_height=7, output_width=7)
        for _ in range(depth):
            y = b.one("Relu", [b.conv(y, stem=stem)], stem)
        out.append(y)
    return out


def rescored(b: Builder, heads: "list[str]", rois: str, stem: str) -> "tuple[str, str]":
    """Class scores from the box head, the boxes moved by it, and a second NonMaxSuppression."""
    y = b.one("Sum", heads, stem)
    score = b.one("Reshape", [b.one("ReduceMax", [b.one("Sigmoid", [y], stem)], stem, axes=[1, 2, 3], keepdims=0),
                              b.const([1, 1, -1], np.int64)], stem)
    shift = b.one("ReduceMean", [y], stem, axes=[1, 2, 3], keepdims=1)
    boxes = b.one("Unsqueeze", [b.one("Add", [rois, b.one("Reshape", [shift, b.const([-1, 1], np.int64)], stem)],
                                      stem), b.const([0], np.int64)], stem)
    return nms(b, boxes, score, stem)


def masks(b: Builder, heads: "list[str]", stem: str) -> None:
    """The mask threshold through NonZero (lowered by this project) on every level's mask head."""
    for y in heads:
        mask = b.one("Greater", [b.one("Sigmoid", [y], stem), b.const(0.5)], f"{stem}_mask")
        b.output(b.one("Transpose", [b.one("NonZero", [mask], f"{stem}_nonzero")], stem), T.INT64, 2)


def detections(b: Builder, features: "list[str]", depth: int) -> None:
    """RPN, box head, mask head: three stages that each end in a NonMaxSuppression on the CPU."""
    rois, batch = proposals(b, features, "rpn")
    rois, batch = rescored(b, roi_head(b, features, rois, batch, depth, "box_head"), rois, "box_head")
    masks(b, roi_head(b, features, rois, batch, depth, "mask_head"), "mask_head")


def mask_rcnn_shaped(levels: int = 5, blocks: int = 80, head_depth: int = 30, seed: int = 0) -> onnx.ModelProto:
    """A ResNet-like backbone, an FPN whose top-down sizes are shape arithmetic, an RPN, a box
    head and a mask head, each stage ending in NonMaxSuppression (~3,000 nodes by default)."""
    b = Builder(seed)
    x, features = "image", []
    for level in range(levels):
        for _ in range(blocks):
            x = residual(b, x, f"backbone{level}")
        features.append(x)
        x = b.one("MaxPool", [x], f"down{level}", kernel_shape=[2, 2], strides=[2, 2])
    top = b.conv(features[-1], k=1, stem="lateral")
    pyramid = [top]
    for feature in reversed(features[:-1]):
        top = b.one("Add", [b.conv(feature, k=1, stem="lateral"), upsample_to(b, top, feature)], "fpn")
        pyramid.append(top)
    detections(b, [b.conv(f, stem="fpn_out") for f in pyramid], head_depth)
    return b.model("mask_rcnn_shaped")


def ssdlite_shaped(levels: int = 6, blocks: int = 100, head_depth: int = 20, seed: int = 1) -> onnx.ModelProto:
    """MobileNet-like depthwise blocks (Conv group, Clip, Conv, Add), per level a class head whose
    reshape size is shape arithmetic, then proposals, a box head and masks (~3,000 nodes by default)."""
    b = Builder(seed)
    x, features = "image", []
    for level in range(levels):
        for _ in range(blocks):
            y = b.one("Clip", [b.conv(x, group=C, stem=f"dw{level}"), b.const(0.0), b.const(6.0)], f"dw{level}")
            x = b.one("Add", [b.conv(y, k=1, stem=f"pw{level}"), x], f"block{level}")
        shape = b.one("Shape", [x], f"head{level}_shape")
        batch = b.one("Gather", [shape, b.const([0], np.int64)], f"head{level}_size", axis=0)
        size = b.one("Concat", [batch, b.const([C, -1], np.int64)], f"head{level}_size", axis=0)
        b.output(b.one("Softmax", [b.one("Reshape", [b.conv(x, stem=f"cls{level}"), size], f"head{level}")],
                       f"head{level}", axis=1), T.FLOAT, 3)
        features.append(x)
        x = b.one("MaxPool", [x], f"down{level}", kernel_shape=[2, 2], strides=[2, 2])
    detections(b, features, head_depth)
    return b.model("ssdlite_shaped")


def main(out: str) -> None:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, model in (("mask_rcnn_shaped", mask_rcnn_shaped()), ("ssdlite_shaped", ssdlite_shaped()),
                        ("mask_rcnn_10k", mask_rcnn_shaped(levels=8, blocks=300, head_depth=60))):
        onnx.checker.check_model(model)
        onnx.save(model, str(folder / f"{name}.onnx"))
        print(f"{name}: {len(model.graph.node)} nodes")


if __name__ == "__main__":
    main(sys.argv[1])
