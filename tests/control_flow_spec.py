"""A plain Python / numpy evaluation of ONNX graphs holding If / Loop / Scan, written from the
operator specification's wording, for the oracle's control-flow tests (tests/runtime/
test_oracle_control_flow.py): the expected values, independent of the project's host loop
(runtime/control_flow.py), of onnx.reference (whose Loop concatenates scan outputs and runs an
empty-condition Loop zero times) and of onnxruntime.

Only the few operators those tests' bodies use are defined; anything else raises KeyError."""
from __future__ import annotations

from typing import Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _unsqueeze(x, axes):
    for axis in sorted(int(a) for a in axes):
        x = np.expand_dims(x, axis)
    return x


# op type -> f(inputs, attributes) -> outputs, for the operators the tests' bodies use
_OPS = {
    "Identity": lambda v, a: [v[0]],
    "Add": lambda v, a: [v[0] + v[1]],
    "Less": lambda v, a: [np.less(v[0], v[1])],
    "Relu": lambda v, a: [np.maximum(v[0], np.zeros((), v[0].dtype))],
    "Cast": lambda v, a: [v[0].astype(helper.tensor_dtype_to_np_dtype(a["to"]))],
    "NonZero": lambda v, a: [np.array(np.nonzero(v[0]), np.int64).reshape(v[0].ndim, -1)],
    "Shape": lambda v, a: [np.array(v[0].shape, np.int64)],
    "Unsqueeze": lambda v, a: [_unsqueeze(v[0], v[1])],
    "EyeLike": lambda v, a: [np.eye(*v[0].shape, k=a.get("k", 0), dtype=v[0].dtype)],
    "ReduceSum": lambda v, a: [np.sum(v[0], axis=None, keepdims=bool(a.get("keepdims", 1))).astype(v[0].dtype)],
}


def evaluate(graph: onnx.GraphProto, values: "Mapping[str, np.ndarray]") -> "list[np.ndarray]":
    """The graph's outputs, in order, from `values` (its inputs and every outer value it reads)."""
    env = dict(values)
    env.update((t.name, numpy_helper.to_array(t)) for t in graph.initializer)
    for node in graph.node:
        inputs = [env[name] if name else None for name in node.input]
        attrs = _attrs(node)
        if node.op_type == "If":
            outputs = evaluate(attrs["then_branch"] if bool(inputs[0]) else attrs["else_branch"], env)
        elif node.op_type == "Loop":
            outputs = _loop(attrs["body"], inputs, env)
        elif node.op_type == "Scan":
            outputs = _scan(attrs, inputs, env)
        else:
            outputs = _OPS[node.op_type](inputs, attrs)
        env.update((name, np.asarray(value)) for name, value in zip(node.output, outputs) if name)
    return [env[o.name] for o in graph.output]


def _loop(body: onnx.GraphProto, inputs: list, outer: dict) -> "list[np.ndarray]":
    """Loop: `for (i = 0; i < M && cond; ++i)`; an absent M has no bound; an absent cond input makes
    the body's cond output ignored; scan outputs stacked on a new first axis."""
    trip = None if len(inputs) < 1 or inputs[0] is None else int(inputs[0])
    given_cond = len(inputs) > 1 and inputs[1] is not None
    assert trip is not None or given_cond, "a Loop without M or cond runs forever by the spec"
    cond = bool(inputs[1]) if given_cond else True
    carried = list(inputs[2:])
    stacks: "list[list[np.ndarray]]" = [[] for _ in range(len(body.output) - 1 - len(carried))]
    i = 0
    while (trip is None or i < trip) and cond:
        feeds = dict(outer)
        feeds.update(zip([vi.name for vi in body.input], [np.array(i, np.int64), np.array(cond)] + carried))
        results = evaluate(body, feeds)
        if given_cond:       # neither M nor cond (an endless loop in the spec's words) is not evaluated
            cond = bool(results[0])
        carried = results[1:1 + len(carried)]
        for stack, value in zip(stacks, results[1 + len(carried):]):
            stack.append(value)
        i += 1
    return carried + [np.stack(s) if s else _empty(body.output[1 + len(carried) + k], 0)
                      for k, s in enumerate(stacks)]


def _empty(vi: onnx.ValueInfoProto, axis: int) -> np.ndarray:
    dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    dims.insert(axis, 0)
    return np.zeros(dims, helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))


def _scan(attrs: dict, inputs: list, outer: dict) -> "list[np.ndarray]":
    """Scan-9+: states threaded through; each scan input sliced along its axis (backward when its
    direction is 1); each scan output's values stacked along its axis (reversed when 1)."""
    body, count = attrs["body"], attrs["num_scan_inputs"]
    states, sequences = list(inputs[:len(inputs) - count]), inputs[len(inputs) - count:]
    in_axes = [a % s.ndim for a, s in zip(attrs.get("scan_input_axes", [0] * count), sequences)]
    in_dirs = attrs.get("scan_input_directions", [0] * count)
    length = sequences[0].shape[in_axes[0]]
    outs = len(body.output) - len(states)
    stacks: "list[list[np.ndarray]]" = [[] for _ in range(outs)]
    for t in range(length):
        slices = [np.take(s, length - 1 - t if d else t, axis=a) for s, a, d in zip(sequences, in_axes, in_dirs)]
        feeds = dict(outer)
        feeds.update(zip([vi.name for vi in body.input], states + slices))
        results = evaluate(body, feeds)
        states = results[:len(states)]
        for stack, value in zip(stacks, results[len(states):]):
            stack.append(value)
    out_axes = attrs.get("scan_output_axes", [0] * outs)
    out_dirs = attrs.get("scan_output_directions", [0] * outs)
    finals = []
    for stack, axis, direction in zip(stacks, out_axes, out_dirs):
        values = stack[::-1] if direction else stack
        finals.append(np.stack(values, axis=axis % (values[0].ndim + 1)))
    return states + finals


def spec_outputs(model: onnx.ModelProto, feeds: "Mapping[str, np.ndarray]") -> "dict[str, np.ndarray]":
    """The model's outputs by name, as ONNX defines them."""
    return dict(zip([o.name for o in model.graph.output], evaluate(model.graph, feeds)))
