"""If / Loop / Scan run on the host, as ONNX defines them, around a body runner.

`run_body(attribute, values)` runs one body (then_branch / else_branch / body) on its formal
inputs in order and returns its outputs in order; the caller supplies captured outer values.
Where onnx.reference and onnxruntime differ, this follows the ONNX spec and its shape
inference: a Loop's scan outputs are stacked on a new leading axis (onnx.reference's
`np.vstack` concatenates them instead, which differs for scalars and rank >= 2 values); a Loop
given M and no condition input runs M trips, ignoring the body's condition output (a for loop in
the spec's words; onnx.reference runs none, onnxruntime stops when that output turns false); with
neither M nor a condition input, which the spec makes an endless loop, it stops when the body's
condition output turns false, as onnxruntime does."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import onnx
from onnx import helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import MemoryLimitExceeded
from onnx_dml_lowering.ir.dtypes import onnx_to_numpy
from onnx_dml_lowering.lowering.onnx_graphs import is_standard
from .memory import default_limit, format_size

# The standard control-flow operators the host runs, by the construct name run_control_flow takes.
CONSTRUCTS = {"If": "if", "Loop": "loop", "Scan": "scan"}

BodyRunner = Callable[[str, "list[np.ndarray]"], "list[np.ndarray]"]
# (onnx type, shape or None) of each body output: what an empty stack of scan outputs looks like
OutputTypes = Sequence["tuple[int, tuple | None]"]


def host_construct(node: onnx.NodeProto, opset: int) -> "str | None":
    """"if" / "loop" / "scan" for a control-flow node the host can run, else None. Scan-8 (with a
    batch axis) is not one."""
    if not is_standard(node) or node.op_type not in CONSTRUCTS:
        return None
    if node.op_type == "Scan" and opset < 9:
        return None
    return CONSTRUCTS[node.op_type]


def _scalar(value: np.ndarray, what: str, node: onnx.NodeProto) -> Any:
    array = np.asarray(value)
    if array.size != 1:
        raise DmlLowerError(f"node {node.name}: {what} must hold one element, got shape {list(array.shape)}")
    return array.reshape(-1)[0]


def _attributes(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _empty_stack(info: "tuple[int, tuple | None]", axis: int = 0) -> np.ndarray:
    """Zero slices of a scan output: its static per-iteration dims where known (0 elsewhere)."""
    onnx_type, shape = info
    dims = [d if isinstance(d, int) else 0 for d in (shape or ())]
    dims.insert(axis if axis >= 0 else len(dims) + 1 + axis, 0)
    return np.zeros(dims, onnx_to_numpy(onnx_type) if onnx_type else np.float32)


def run_if(node: onnx.NodeProto, inputs: "list", run_body: BodyRunner) -> "list[np.ndarray]":
    cond = bool(_scalar(inputs[0], "the If condition", node))
    return run_body("then_branch" if cond else "else_branch", [])


class _ScanStacks:
    """The per-iteration values of a Loop's / Scan's scan outputs, as the host accumulates them,
    bounded by the memory limit: a loop of many iterations would otherwise grow them until the
    process dies. Stacking them at the end takes as much again, so twice their size must fit."""

    def __init__(self, node: onnx.NodeProto, count: int, limit: int) -> None:
        self.node, self.limit = node, limit
        self.lists: "list[list[np.ndarray]]" = [[] for _ in range(count)]
        self.bytes = 0

    def add(self, values: "Sequence[np.ndarray]", iteration: int) -> None:
        for stack, value in zip(self.lists, values):
            value = np.asarray(value)
            stack.append(value)
            self.bytes += value.nbytes
        if 2 * self.bytes > self.limit:
            raise MemoryLimitExceeded(
                f"node {self.node.name!r} ({self.node.op_type}): its scan outputs hold {format_size(self.bytes)} "
                f"after {iteration + 1} iterations and stacking them takes as much again, over the memory limit "
                f"of {format_size(self.limit)} (raise --memory-limit)")


def run_loop(node: onnx.NodeProto, inputs: "list", run_body: BodyRunner,
             outputs: OutputTypes, memory_limit: int) -> "list[np.ndarray]":
    trip, cond = (list(inputs) + [None, None])[:2]
    carried = list(inputs[2:])
    limit = None if trip is None else int(_scalar(trip, "the Loop trip count M", node))
    keep_going = True if cond is None else bool(_scalar(cond, "the Loop condition", node))
    stacks = _ScanStacks(node, len(outputs) - 1 - len(carried), memory_limit)
    scans = stacks.lists
    iteration = 0
    while keep_going and (limit is None or iteration < limit):
        results = run_body("body", [np.array(iteration, np.int64), np.array(keep_going, np.bool_)] + carried)
        keep_going = bool(_scalar(results[0], "the Loop body's condition output", node))
        if cond is None and limit is not None:
            keep_going = True               # M and no cond: a for loop, the body's cond is ignored
        carried = list(results[1:1 + len(carried)])
        stacks.add(results[1 + len(carried):], iteration)
        iteration += 1
    stacked = [_stacked(stack, node, len(carried) + k) if stack else _empty_stack(outputs[1 + len(carried) + k])
               for k, stack in enumerate(scans)]
    return carried + stacked


def run_scan(node: onnx.NodeProto, inputs: "list", run_body: BodyRunner,
             outputs: OutputTypes, limit: int) -> "list[np.ndarray]":
    attrs = _attributes(node)
    count = attrs["num_scan_inputs"]
    states, sequences = list(inputs[:len(inputs) - count]), [np.asarray(x) for x in inputs[len(inputs) - count:]]
    in_axes = [a % max(x.ndim, 1) for a, x in zip(attrs.get("scan_input_axes") or [0] * count, sequences)]
    in_dirs = attrs.get("scan_input_directions") or [0] * count
    lengths = {x.shape[a] for x, a in zip(sequences, in_axes)}
    if len(lengths) != 1:
        raise DmlLowerError(f"node {node.name}: scan inputs differ in sequence length ({sorted(lengths)})")
    length = lengths.pop()
    n_out = len(outputs) - len(states)
    out_axes = list(attrs.get("scan_output_axes") or [0] * n_out)
    out_dirs = attrs.get("scan_output_directions") or [0] * n_out
    stacks = _ScanStacks(node, n_out, limit)
    scans = stacks.lists
    for t in range(length):
        slices = [np.take(x, length - 1 - t if d else t, axis=a) for x, a, d in zip(sequences, in_axes, in_dirs)]
        results = run_body("body", states + slices)
        states = list(results[:len(states)])
        stacks.add(results[len(states):], t)
    finals = []
    for k, stack in enumerate(scans):
        if not stack:
            finals.append(_empty_stack(outputs[len(states) + k], out_axes[k]))
            continue
        if out_dirs[k]:
            stack = stack[::-1]
        finals.append(_stacked(stack, node, len(states) + k, axis=out_axes[k] % (stack[0].ndim + 1)))
    return states + finals


def _stacked(values: "list[np.ndarray]", node: onnx.NodeProto, index: int, axis: int = 0) -> np.ndarray:
    """A scan output's per-iteration values stacked; one line when their shapes differ (a NonZero's
    count changing between iterations, say), which ONNX cannot stack. `index`: the node output."""
    shapes = list(dict.fromkeys(v.shape for v in values))
    if len(shapes) > 1:
        name = node.output[index] if index < len(node.output) else f"#{index}"
        raise DmlLowerError(f"node {node.name}: {node.op_type} scan output {name!r} has shape {list(shapes[0])} in one "
                            f"iteration and {list(shapes[1])} in another; ONNX stacks a scan output's values, so they "
                            "must have one shape")
    return np.stack(values, axis=axis)


def run_control_flow(construct: str, node: onnx.NodeProto, inputs: "list", run_body: BodyRunner,
                     outputs: OutputTypes, memory_limit: "int | None" = None) -> "list[np.ndarray]":
    """The node's outputs, in order: If's branch outputs; Loop's final carried values then its
    scan outputs; Scan's final states then its scan outputs. The scan outputs the host accumulates
    stay within `memory_limit` (bytes; default: three quarters of physical memory)."""
    limit = default_limit() if memory_limit is None else memory_limit
    if construct == "if":
        return run_if(node, inputs, run_body)
    if construct == "loop":
        return run_loop(node, inputs, run_body, outputs, limit)
    if construct == "scan":
        return run_scan(node, inputs, run_body, outputs, limit)
    raise DmlLowerError(f"node {node.name}: control flow {construct!r} is not run by the host")
