"""dml-lower compile --dim: the run-time-sized steps of a dynamic model specialised at given sizes.

The specialisation is the runtime's own (GraphRunner._lower_at_run_time and its cache): the
compiled model runs once on the CPU emulator with all-zero feeds of the given sizes (zeros keep
index inputs in range), and each LowerAtRunTime step's cached fragment is reported. Zero feeds
only give the right sizes for steps whose sizes follow from the input shapes; a step whose input
shapes or shaping values depend on feed values (behind a NonZero count, computed from input
data, or out of a control-flow node) is found by a data-dependence walk over the ONNX graph and
reported as symbolic, never with the sizes one particular feed happened to give. The run is bounded
by the memory limit (--memory-limit) as any other: feeds past it stop the command with that one
line; a step whose run is past it is still reported specialised (its descriptors are built before
anything is allocated), and the steps after it 'not reached' with that line."""
from __future__ import annotations

import dataclasses
from typing import Iterable

import onnx

from onnx_dml_lowering.ir import DataType, DmlLowerError, Graph, LowerAtRunTime, TensorDesc, graph_to_dict
from onnx_dml_lowering.lowering import Declined
from onnx_dml_lowering.lowering.match import Match
from onnx_dml_lowering.lowering.onnx_graphs import is_standard, subgraph_reads

from .compiled import CompiledModel
from .partition import RUN_TIME_NOTE

# Output shapes that depend on input values whatever they are.
DATA_SHAPED = {"NonZero", "Unique", "Compress", "NonMaxSuppression", "If", "Loop", "Scan", "StringSplit",
               "SequenceAt", "SplitToSequence", "ConcatFromSequence", "SequenceConstruct"}
# Output values that are not a function of the inputs.
RANDOM = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"}
# Output shape from the inputs' shapes alone (their values never size the output).
SHAPE_FROM_SHAPES = set("""
Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift BitwiseAnd BitwiseNot BitwiseOr BitwiseXor Cast CastLike
Ceil Celu Clip Concat Conv ConvTranspose Cos Cosh CumSum DequantizeLinear Div Dropout Einsum Elu Equal Erf Exp
EyeLike Flatten Floor Gather GatherElements GatherND Gelu Gemm Greater GreaterOrEqual HardSigmoid HardSwish
Identity IsInf IsNaN LayerNormalization LeakyRelu Less LessOrEqual Log LogSoftmax MatMul Max Mean Min Mish Mod
Mul Neg Not Or PRelu Pow QuantizeLinear Reciprocal Relu Round ScatterElements ScatterND Selu Shrink Sigmoid Sign
Sin Sinh Softmax Softplus Softsign Sqrt Sub Sum Tan Tanh ThresholdedRelu Transpose Trilu Where Xor
BatchNormalization InstanceNormalization GroupNormalization RMSNormalization
""".split())
# Every input's value sizes the output (there is no data input first).
VALUES_SHAPE_ALL = {"ConstantOfShape", "Range"}


def data_dependence(graph: onnx.GraphProto, free: Iterable[str]) -> "tuple[set[str], set[str]]":
    """(values, shapes): the names whose value, resp. shape, may depend on the values fed to the
    `free` graph inputs. Conservative: an op not known to size its output from shapes alone is
    taken to be sized by every input but its first's value."""
    values, shapes = set(free), set()
    for node in graph.node:
        reads = [n for n in node.input if n] + subgraph_reads(node)
        known = is_standard(node)
        op = node.op_type
        if known and op in ("Shape", "Size"):
            value, shape = bool(reads) and reads[0] in shapes, False
        else:
            value = any(n in values or n in shapes for n in reads) or (known and op in RANDOM)
            if not known:
                shape = any(n in values or n in shapes for n in reads)
            elif op in DATA_SHAPED:
                shape = True
            elif op in SHAPE_FROM_SHAPES:
                shape = any(n in shapes for n in reads)
            elif op in VALUES_SHAPE_ALL:
                shape = any(n in values or n in shapes for n in reads)
            else:
                first = node.input[0] if node.input else ""
                shape = first in shapes or any(n in values or n in shapes for n in reads if n != first)
        for out in node.output:
            if out:
                if value:
                    values.add(out)
                if shape:
                    shapes.add(out)
    return values, shapes


def _dependence_reason(match: Match, values: "set[str]", shapes: "set[str]") -> "str | None":
    for t in match.inputs:
        if t.name in shapes:
            return f"the shape of its input {t.name!r} depends on feed values (e.g. a NonZero count)"
    for name in match.value_inputs:
        if name in values or name in shapes:
            return f"its sizing value {name!r} is computed from feed values"
    return None


def _dims_text(desc: TensorDesc) -> str:
    return "{" + ",".join(str(s) for s in desc.sizes) + "}"


def describe_operators(graph: Graph) -> "list[dict]":
    """Each DirectML operator of a fragment with its tensors' sizes, strides and total bytes, and
    its other descriptor fields (`attributes`: a DIAGONAL_MATRIX1's fill range and values, ...)."""
    out = []
    for step in graph.steps:
        if not step.is_dml_operator:
            continue
        tensors, attributes = {}, {}
        for field in dataclasses.fields(step):
            name = getattr(step, field.name)
            if not isinstance(name, str) or name not in graph.views:
                if name is not None:
                    attributes[field.name] = name.name if isinstance(name, DataType) else name
                continue
            view = graph.views[name]
            desc = view.desc
            tensors[field.name] = {
                "view": name, "data_type": desc.data_type.name, "sizes": list(desc.sizes),
                "strides": list(desc.effective_strides) if desc.is_bound else desc.strides,
                "total_size_in_bytes": desc.total_bytes if desc.is_bound else None,   # symbolic: None
                "buffer": view.buffer, "offset": view.offset}
        out.append({"operator": step.kind, "tensors": tensors, "attributes": attributes})
    return out


def specialise(compiled: CompiledModel, dims: "dict[str, int]", memory_limit: "int | str | None" = None) -> dict:
    """Run-time steps of the main graph specialised at `dims` (symbolic input dims not named: 3,
    as for random feeds); the JSON `compile --json` writes under "specialised". `memory_limit`
    (bytes or a size like "512MiB"; default: runtime.memory's) bounds the feeds (past it,
    MemoryLimitExceeded) and the run (past it, the steps not reached say so)."""
    from onnx_dml_lowering.runtime.feeds import zero_feeds
    from onnx_dml_lowering.runtime.memory import parse_size
    limit = None if memory_limit is None else parse_size(memory_limit)
    deferred = [s for s in compiled.graph.steps if isinstance(s, LowerAtRunTime)]
    # Defaults a feed may replace are as free as any input: never specialised at the stored value.
    free = [vi.name for vi in compiled.inputs + compiled.optional_inputs]
    values, shapes = data_dependence(compiled.model.graph, free)
    feeds = zero_feeds(compiled.inputs, dims=dims, memory_limit=limit)
    session = compiled.session("cpu")
    error = None
    if deferred:
        try:
            compiled.run(feeds, memory_limit=limit)
        except DmlLowerError as exc:   # the steps specialised before the failure are still reported
            error = str(exc)           # (past the memory limit too: a step is built before it runs)
    cache = session.main.specialised
    steps = []
    for step in deferred:
        match = compiled.partition.deferred[step.onnx_node]
        entry: "dict[str, object]" = {"node": step.onnx_node, "rule": step.rule}
        reason = _dependence_reason(match, values, shapes)
        found = [(key, built) for key, built in cache.items() if key[0] == step.onnx_node]
        if reason is not None:
            entry.update(status="symbolic", reason=reason)
        elif not found:
            entry.update(status="not reached", reason=error or "the run did not reach this step")
        else:
            key, _ = found[0]
            built = cache.own_graph(key, match)
            entry["input_shapes"] = {name: list(shape) for name, shape in key[1]}
            if isinstance(built, Declined):
                entry.update(status="declined", reason=built.reason)
            else:
                entry.update(status="specialised", operators=describe_operators(built),
                             graph=graph_to_dict(built))
        steps.append(entry)
    in_bodies = [p.onnx_nodes[0] for p in compiled.placement
                 if "graph_path" in p.extra and p.status == "lowered" and RUN_TIME_NOTE in p.note]
    # the run's end, said whatever the steps show: a one-step model past the memory limit is specialised
    return {"dims": dict(sorted(_input_dims(compiled, dims).items())), "steps": steps, "in_bodies": in_bodies,
            "run_stopped": error}


def _input_dims(compiled: CompiledModel, dims: "dict[str, int]") -> "dict[str, int]":
    names = {d.dim_param for vi in compiled.inputs for d in vi.type.tensor_type.shape.dim if d.dim_param}
    return {name: dims.get(name, 3) for name in names}


def format_specialised(spec: dict) -> str:
    dims = ", ".join(f"{k}={v}" for k, v in spec["dims"].items()) or "none"
    lines = [f"run-time steps specialised at {dims}:"]
    if not spec["steps"]:
        lines.append("  none: no lowered step of this model waits for its sizes until run time")
    for s in spec["steps"]:
        head = f"  {s['node']} (rule {s['rule']})"
        if s["status"] != "specialised":
            shapes = f" at input shapes {s['input_shapes']}" if "input_shapes" in s else ""
            lines.append(f"{head}{shapes}: {s['status']}: {s['reason']}")
            continue
        lines.append(f"{head} at input shapes {s['input_shapes']}:")
        for op in s["operators"]:
            lines.append(f"    DML_OPERATOR_{op['operator']}")
            for name, t in op["tensors"].items():
                strides = "{" + ",".join(str(x) for x in t["strides"]) + "}" if t["strides"] is not None else "packed"
                total = t["total_size_in_bytes"] if t["total_size_in_bytes"] is not None else "symbolic"
                lines.append(f"      {name}: {t['data_type']} Sizes {{{','.join(str(x) for x in t['sizes'])}}} "
                             f"Strides {strides} TotalTensorSizeInBytes {total}")
            # as the static listing (ir.printer) shows them: a data type by its name
            lines += [f"      {key}={value if isinstance(value, str) else repr(value)}"
                      for key, value in op["attributes"].items()]
    for node in spec["in_bodies"]:
        lines.append(f"  {node}: inside a control-flow body, specialised per branch / iteration when it runs")
    if spec.get("run_stopped"):
        lines.append(f"  the run at these sizes stopped: {spec['run_stopped']}")
    return "\n".join(lines)
