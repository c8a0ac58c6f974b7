"""A one-layer decoder in Optimum's merged form, built without torch: an If on `use_cache_branch`
whose branches (with past / without) define the same value names, with the Shape / Gather / Concat
/ Range causal-mask computations through which onnx's data propagation collided on them. Inputs as
Optimum declares them: attention_mask shares input_ids's `sequence_length`, although with a past
it holds past + new positions."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from tests.builders import IR_VERSION

HIDDEN, HEAD, VOCAB = 8, 4, 16


def _branch(with_past: bool, opset: int) -> onnx.GraphProto:
    consts = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64), "axis0": np.array([0], np.int64),
              "axis1": np.array([1], np.int64), "last": np.array([-1], np.int64),
              "minus_inf": np.array(-1e9, np.float32)}
    nodes = [
        h.make_node("Gather", ["embed", "input_ids"], ["hidden"], axis=0),
        h.make_node("Shape", ["input_ids"], ["ids_shape"]),
        h.make_node("Gather", ["ids_shape", "zero"], ["batch"], axis=0),
        h.make_node("Gather", ["ids_shape", "one"], ["seq"], axis=0),
    ]
    if with_past:
        nodes += [h.make_node("Shape", ["past_key_values.0.key"], ["past_shape"]),
                  h.make_node("Gather", ["past_shape", "one"], ["past_len"], axis=0)]
    else:
        nodes.append(h.make_node("Identity", ["zero"], ["past_len"]))
    nodes += [
        h.make_node("Add", ["seq", "past_len"], ["total"]),
        h.make_node("Range", ["past_len", "total", "one"], ["rows"]),
        h.make_node("Unsqueeze", ["rows", "last"], ["rows_col"]),
        h.make_node("Range", ["zero", "total", "one"], ["cols"]),
        h.make_node("LessOrEqual", ["cols", "rows_col"], ["causal"]),
        h.make_node("Cast", ["attention_mask"], ["padding"], to=T.BOOL),
        h.make_node("Unsqueeze", ["padding", "axis1"], ["padding3"]),
        h.make_node("And", ["causal", "padding3"], ["mask"]),
        h.make_node("MatMul", ["hidden", "wq"], ["q"]),
        h.make_node("MatMul", ["hidden", "wk"], ["k"]),
    ]
    nodes.append(h.make_node("Concat", ["past_key_values.0.key", "k"], ["present"], axis=1) if with_past
                 else h.make_node("Identity", ["k"], ["present"]))
    nodes += [
        h.make_node("Transpose", ["present"], ["present_t"], perm=[0, 2, 1]),
        h.make_node("MatMul", ["q", "present_t"], ["scores"]),
        h.make_node("Where", ["mask", "scores", "minus_inf"], ["masked"]),
        h.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        h.make_node("MatMul", ["probs", "present"], ["context"]),
        h.make_node("MatMul", ["context", "wo"], ["projected"]),
        h.make_node("Unsqueeze", ["batch", "axis0"], ["batch1"]),
        h.make_node("Unsqueeze", ["seq", "axis0"], ["seq1"]),
        h.make_node("Concat", ["batch1", "seq1", "last"], ["logits_shape"], axis=0),
        h.make_node("Reshape", ["projected", "logits_shape"], ["logits"]),
    ]
    if opset < 13:
        raise ValueError("Unsqueeze takes its axes as an input from opset 13")
    outputs = [h.make_tensor_value_info("logits", T.FLOAT, [None, None, None]),
               h.make_tensor_value_info("present", T.FLOAT, [None, None, None])]
    return h.make_graph(nodes, "with_past" if with_past else "without_past", [], outputs,
                        [numpy_helper.from_array(v, k) for k, v in consts.items()])


def merged_decoder(opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    weights = {"embed": rng.standard_normal((VOCAB, HIDDEN)), "wq": rng.standard_normal((HIDDEN, HEAD)),
               "wk": rng.standard_normal((HIDDEN, HEAD)), "wo": rng.standard_normal((HEAD, HIDDEN))}
    node = h.make_node("If", ["use_cache_branch"], ["logits", "present.0.key"], name="optimum::if",
                       then_branch=_branch(True, opset), else_branch=_branch(False, opset))
    graph = h.make_graph(
        [node], "merged_decoder",
        [h.make_tensor_value_info("input_ids", T.INT64, ["batch_size", "sequence_length"]),
         h.make_tensor_value_info("attention_mask", T.INT64, ["batch_size", "sequence_length"]),
         h.make_tensor_value_info("past_key_values.0.key", T.FLOAT, ["batch_size", "past_sequence_length", HEAD]),
         h.make_tensor_value_info("use_cache_branch", T.BOOL, [1])],
        [h.make_tensor_value_info("logits", T.FLOAT, ["batch_size", "sequence_length", HIDDEN]),
         h.make_tensor_value_info("present.0.key", T.FLOAT, ["batch_size", None, HEAD])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION)


def decoder_feeds(use_cache: bool, batch: int = 2, new: int = 3, past: int = 4, seed: int = 0) -> "dict[str, np.ndarray]":
    """Feeds as Optimum gives them: with the cache, attention_mask spans past + new positions (a
    padded first position in one row); without, the past input is a dummy of one position."""
    rng = np.random.default_rng(seed)
    past = past if use_cache else 1
    total = past + new if use_cache else new
    mask = np.ones((batch, total), np.int64)
    mask[0, 0] = 0
    return {"input_ids": rng.integers(0, VOCAB, (batch, new)).astype(np.int64), "attention_mask": mask,
            "past_key_values.0.key": rng.standard_normal((batch, past, HEAD)).astype(np.float32),
            "use_cache_branch": np.array([use_cache])}
