"""A readable text form of ir.Graph."""
from __future__ import annotations

import dataclasses
from typing import Collection

from .display import display, name_list  # noqa: F401  (name_list offered here as ever)
from .dtypes import DataType, onnx_type_name
from .graph import Graph
from .operators import (ClearBuffer, ControlFlow, Download, EmptyTensor, LowerAtRunTime, OnnxRegion, ReadCount,
                        Step, Upload)


def _view(graph: Graph, name: str) -> str:
    view = graph.views[name]
    at = f"{view.buffer}+{view.offset}" if view.offset else view.buffer
    return f"{name}:{view.desc.describe()} @{at}"


def format_step(graph: Graph, step: Step) -> str:
    """One step, each of its lines through ir.display: names are a model's, and a line feed or an
    ESC in one must not split or drive the listing."""
    if isinstance(step, ControlFlow):
        captured = f"; captures {', '.join(step.captures)}" if step.captures else ""
        text = display(f"{step.construct:<8} {step.onnx_node} ({', '.join(n or '-' for n in step.inputs)}{captured}) "
                       f"-> ({', '.join(step.outputs)})")
        for name, body in step.bodies:
            text += f"\n      {display(name)}:\n" + "\n".join("      " + line for line in format_graph(body).split("\n"))
        return text
    if isinstance(step, (Upload, Download, ClearBuffer, ReadCount, EmptyTensor, OnnxRegion, LowerAtRunTime)):
        return display(_one_line(graph, step))
    parts = []
    for f in dataclasses.fields(step):
        value = getattr(step, f.name)
        if value is None:
            continue
        if f.name in step.reads() or f.name in step.writes() or value in graph.views:
            parts.append(f"{f.name}={_view(graph, value)}")
        elif isinstance(value, DataType):
            parts.append(f"{f.name}={value.name}")
        else:
            parts.append(f"{f.name}={value!r}")
    return f"DML_OPERATOR_{step.kind}\n      " + "\n      ".join(map(display, parts))


def _one_line(graph: Graph, step: Step) -> str:
    if isinstance(step, Upload):
        return f"upload   {step.tensor} -> {_view(graph, step.view)}"
    if isinstance(step, Download):
        shape = "x".join(str(s) for s in step.shape) or "scalar"
        return f"download {_view(graph, step.view)} -> {step.tensor} ({onnx_type_name(step.onnx_type)} [{shape}])"
    if isinstance(step, ClearBuffer):
        return f"clear    {step.buffer} = {step.value:#x} per 32-bit word"
    if isinstance(step, ReadCount):
        return f"readback {step.symbol} = {_view(graph, step.view)}   (host sync: shape depends on it)"
    if isinstance(step, EmptyTensor):
        shape = "x".join(str(s) for s in step.shape)
        return f"empty    {step.tensor} ({onnx_type_name(step.onnx_type)} [{shape}]): no DirectML work"
    if isinstance(step, OnnxRegion):
        return (f"onnx     {step.name} [{name_list(step.onnx_nodes)}] "
                f"({name_list(step.inputs, noun='values')}) -> ({name_list(step.outputs, noun='values')})")
    if isinstance(step, LowerAtRunTime):
        return (f"lower    {step.onnx_node} by rule {step.rule} when its sizes are known at run time "
                f"({', '.join(step.inputs)}) -> ({', '.join(step.outputs)})")
    raise TypeError(f"not a one-line step: {type(step).__name__}")


def format_graph(graph: Graph, model_inputs: "Collection[str] | None" = None) -> str:
    """The graph as `compile` lists it. `model_inputs`: the model's graph inputs, so the host
    tensors that are its initializers (the weights the ONNX regions read) are listed apart."""
    inputs, weights = graph.inputs, []
    if model_inputs is not None:
        inputs = [name for name in graph.inputs if name in model_inputs]
        weights = [name for name in graph.inputs if name not in model_inputs]
    lines = [display(f"graph (DML_FEATURE_LEVEL_{graph.feature_level.name}) "
                     f"inputs: {name_list(inputs, noun='inputs') or '-'}  "
                     + (f"initializers: {name_list(weights, noun='initializers')}  " if weights else "")
                     + f"outputs: {name_list(graph.outputs, noun='outputs') or '-'}")]
    for buffer in graph.buffers.values():
        lines.append(display(f"  buffer {buffer.name}: {buffer.describe()}"))
    used = {name for step in graph.steps for name in step.reads() + step.writes()}
    for name in graph.views:
        if name not in used:
            lines.append(display(f"  view   {_view(graph, name)}   (no step uses it)"))
    for index, step in enumerate(graph.steps):
        lines.append(f"  {index:3d}  {format_step(graph, step)}")
    return "\n".join(lines)
