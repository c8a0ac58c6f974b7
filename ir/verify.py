"""Graph verifier: descriptors, view extents, operator support at the graph's level, and order."""
from __future__ import annotations

from .errors import DmlLowerError
from .graph import BINDING_ALIGNMENT, Graph
from .operators import (ClearBuffer, ControlFlow, Download, EmptyTensor, LowerAtRunTime, OnnxRegion, ReadCount,
                        Upload)


def validate_view_extent(graph: Graph, view_name: str, env: "dict[str, int]", validated: bool = False) -> None:
    """A view's declared TotalTensorSizeInBytes must fit inside its buffer from its offset.
    `validated`: the bound descriptor was already validated (a descriptor without symbols binds
    to itself), so it is not validated again."""
    view = graph.views[view_name]
    desc = view.desc.bind(env)
    buffer = graph.buffers[view.buffer]
    size = buffer.size(env)
    if not validated:
        desc.validate(f"view {view.name} over buffer {buffer.name}")
    if view.offset + desc.total_bytes > size:
        raise DmlLowerError(
            f"view {view.name}: offset {view.offset} + TotalTensorSizeInBytes {desc.total_bytes} "
            f"exceeds buffer {buffer.name} of {size} bytes")


def verify(graph: Graph) -> None:
    """Raise DmlLowerError at the first broken rule, naming the view, buffer or step."""
    # Views bound to a DirectML operator need 16-byte aligned bindings; host copies only need
    # element alignment.
    bound = {name for step in graph.steps if step.is_dml_operator for name in step.reads() + step.writes()}
    for view in graph.views.values():
        if view.buffer not in graph.buffers:
            raise DmlLowerError(f"view {view.name}: unknown buffer {view.buffer!r}")
        view.desc.validate(f"view {view.name} over buffer {view.buffer}")
        if view.offset < 0:
            raise DmlLowerError(f"view {view.name}: negative byte offset {view.offset} into buffer {view.buffer}")
        align = max(BINDING_ALIGNMENT if view.name in bound else view.desc.data_type.size, view.desc.alignment)
        if view.offset % align:
            raise DmlLowerError(f"view {view.name}: byte offset {view.offset} is not a multiple of {align}")
        buffer = graph.buffers[view.buffer]
        if view.desc.is_bound and not buffer.symbols:
            validate_view_extent(graph, view.name, {}, validated=True)    # validated just above

    tensors = set(graph.inputs)
    written: set = set()
    symbols: set = set()
    descs = graph.descs()
    for index, step in enumerate(graph.steps):
        where = f"step {index} ({step.kind})"
        for name in step.reads() + step.writes():
            if name not in graph.views:
                raise DmlLowerError(f"{where}: unknown view {name!r}")
            missing = [s for s in graph.views[name].desc.symbols if s not in symbols]
            missing += [s for s in graph.buffers[graph.views[name].buffer].symbols if s not in symbols]
            if missing:
                raise DmlLowerError(f"{where}: view {name} uses symbol {missing[0]!r} before it is read back")
        for name in step.reads():
            if graph.views[name].buffer not in written:
                raise DmlLowerError(f"{where}: reads view {name} of buffer "
                                    f"{graph.views[name].buffer} before anything wrote it")
        if isinstance(step, Upload) and step.tensor not in tensors:
            raise DmlLowerError(f"{where}: uploads {step.tensor!r}, which no earlier step produced")
        if isinstance(step, ClearBuffer):
            if step.buffer not in graph.buffers:
                raise DmlLowerError(f"{where}: unknown buffer {step.buffer!r}")
            written.add(step.buffer)
        if isinstance(step, ControlFlow):
            absent = [t for t in step.inputs + step.captures if t and t not in tensors]
            if absent:
                raise DmlLowerError(f"{where}: needs {absent[0]!r} before it is produced")
            for name, body in step.bodies:
                try:
                    verify(body)
                except DmlLowerError as exc:
                    raise DmlLowerError(f"{where} {step.onnx_node}/{name}: {exc}") from None
            tensors.update(step.outputs)
        if isinstance(step, (OnnxRegion, LowerAtRunTime)):
            absent = [t for t in step.inputs if t and t not in tensors]
            if absent:
                raise DmlLowerError(f"{where}: needs {absent[0]!r} before it is produced")
            tensors.update(step.outputs)
        if step.is_dml_operator:
            step.validate(descs, graph.feature_level)
        for name in step.writes():
            written.add(graph.views[name].buffer)
        if isinstance(step, ReadCount):
            desc = graph.views[step.view].desc
            if desc.data_type.name != "UINT32" or any(s != 1 for s in desc.sizes):
                raise DmlLowerError(f"{where}: readback view {step.view} must be a UINT32 scalar")
            symbols.add(step.symbol)
        if isinstance(step, (Download, EmptyTensor)):
            tensors.add(step.tensor)
    for name in graph.outputs:
        if name not in tensors:
            raise DmlLowerError(f"graph output {name!r} is never produced")
