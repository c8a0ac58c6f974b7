"""One-node probe models for measuring a DirectML EP registration table (measure_registrations.py):
for an operator, a since-version and a type per type constraint, a node with those types whose
model resolves in onnxruntime, so the real EP's placement log says whether a kernel takes it."""
from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import helper

from onnx_dml_lowering.runtime.ort_messages import failed_after_placement, parse_provider_failure
from onnx_dml_lowering.runtime.onnx_inference import infer_shapes

from .registry import DML_TYPES, exact_schema

# The element types probed, in the order a baseline is picked (DirectML has a tensor type for each).
PROBED_TYPES = ("float", "float16", "int32", "int64", "uint8", "int8", "uint16", "int16", "uint32", "uint64",
                "double", "bool", "int4", "uint4")
assert set(PROBED_TYPES) == DML_TYPES

_ELEM = {name: getattr(onnx.TensorProto, name.upper()) for name in PROBED_TYPES}
_ELEM["float"], _ELEM["bool"] = onnx.TensorProto.FLOAT, onnx.TensorProto.BOOL

# Attributes whose value sets a constraint's type (the output-only constraints: Cast's T2, EyeLike's T2)
_TYPE_ATTRIBUTES = ("to", "dtype", "output_dtype", "value")

# Required attributes: a value that makes a valid node, by name (then by kind)
_REQUIRED = {"kernel_shape": [1, 1], "perm": [0], "axes": [0], "shape": [1], "value": 0.0, "blocksize": 1,
             "body": None, "then_branch": None, "else_branch": None, "mode": "constant", "num_heads": 1,
             "scale": 1.0, "bias": 0.0, "stash_type": 1, "axis": 0}
_BY_KIND: "dict[int, object]" = {onnx.AttributeProto.INT: 1, onnx.AttributeProto.INTS: [1], onnx.AttributeProto.FLOAT: 1.0,
            onnx.AttributeProto.FLOATS: [1.0], onnx.AttributeProto.STRING: "", onnx.AttributeProto.STRINGS: [""]}


# What a CPU-only session says after the model loaded and was partitioned: no CPU kernel, a CPU
# kernel that refused its attributes, the CPU-only float16 casts, a function body inlined for want
# of a kernel; a session with the DML EP gets past none of these points differently.
NO_CPU_KERNEL = "no CPU kernel"

@dataclass(frozen=True)
class Probe:
    """A node to place: op, domain, since-version and the type asked for each constraint."""
    domain: str
    op: str
    since_version: int
    types: "tuple[tuple[str, str], ...]"      # (constraint, type), sorted

    @property
    def key(self) -> "tuple[str, str, int]":
        return (self.domain, self.op, self.since_version)


def constraint_types(op: str, domain: str, since_version: int) -> "dict[str, tuple[str, ...]]":
    """The probed types each tensor type constraint of the schema allows."""
    s = exact_schema(op, domain, since_version)
    if s is None:
        return {}
    out = {}
    for param, allowed_strs in s.constraints.items():
        allowed = {t[len("tensor("):-1] for t in allowed_strs if t.startswith("tensor(")}
        out[param] = tuple(t for t in PROBED_TYPES if t in allowed)
    return out


def _attribute(name: str, kind: int, types: "dict[str, str]") -> "onnx.AttributeProto | None":
    if name in _TYPE_ATTRIBUTES and kind != onnx.AttributeProto.TENSOR:
        wanted = next(iter(types.values()), "float")
        if kind == onnx.AttributeProto.STRING:      # Cast-1 names its type
            return helper.make_attribute(name, onnx.TensorProto.DataType.Name(_ELEM[wanted]))
        return helper.make_attribute(name, _ELEM[wanted])
    value = _REQUIRED.get(name, _BY_KIND.get(kind))
    if value is None:
        return None
    if kind == onnx.AttributeProto.TENSOR:        # ConstantOfShape's value: its type is the output's
        element = _ELEM[next(iter(types.values()), "float")]
        return helper.make_attribute(name, helper.make_tensor(name, element, [1], [0]))
    if kind in (onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS) and not isinstance(value, list):
        value = [value]
    if kind in (onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT) and isinstance(value, list):
        value = value[0]
    if kind == onnx.AttributeProto.INT and not isinstance(value, int):
        return None
    return helper.make_attribute(name, value)


def _formal_type(type_str: str, types: "dict[str, str]") -> "str | None":
    if type_str in types:
        return types[type_str]
    if type_str.startswith("tensor("):
        return type_str[len("tensor("):-1]
    return None


def probe_node(probe: Probe, name: str) -> "tuple[onnx.NodeProto, list[onnx.ValueInfoProto], list[str]] | None":
    """The node (inputs typed, rank unknown) with its graph inputs and output names, or None when
    the schema cannot be probed by one node (a graph attribute, a sequence argument)."""
    s = exact_schema(probe.op, probe.domain, probe.since_version)
    if s is None:
        return None
    types = dict(probe.types)
    # an optional input is given where a required input does not set its constraint's type
    bound_by_single = {type_str for type_str, option in s.inputs if option != "Optional"}
    inputs: "list[str]" = []
    graph_inputs = []
    contrib = probe.domain != "ai.onnx"      # their inference often reads optional inputs: give every one
    for i, (type_str, option) in enumerate(s.inputs):
        if option == "Optional" and type_str in bound_by_single and not contrib:
            inputs.append("")
            continue
        element = _formal_type(type_str, types)
        if element not in _ELEM:
            return None
        inputs.append(f"{name}_i{i}")
        graph_inputs.append(helper.make_tensor_value_info(inputs[-1], _ELEM[element], None))
    while inputs and inputs[-1] == "":
        inputs.pop()
    bound_by_output = {type_str for type_str, option in s.outputs if option != "Optional"}
    outputs = [f"{name}_o{i}" for i, (type_str, option) in enumerate(s.outputs)
               if option != "Optional" or type_str not in bound_by_single | bound_by_output]
    output_only = {c: t for c, t in types.items() if c not in {type_str for type_str, _ in s.inputs}}
    attributes = []
    for attr_name, (required, kind) in s.attributes.items():
        if required or (attr_name in _TYPE_ATTRIBUTES and output_only):
            made = _attribute(attr_name, kind, output_only)
            if made is None:
                return None
            attributes.append(made)
    node = helper.make_node(probe.op, inputs, outputs, name=name, domain="" if probe.domain == "ai.onnx"
                            else probe.domain)
    node.attribute.extend(attributes)
    return node, graph_inputs, outputs


def probe_model(probes: "list[tuple[str, Probe]]", opsets: "dict[str, int]") -> onnx.ModelProto:
    """One model holding every (name, probe) node side by side, at those opsets (domain -> version);
    output types are left to onnxruntime's inference."""
    nodes, inputs, outputs = [], [], []
    for name, probe in probes:
        made = probe_node(probe, name)
        assert made is not None, name
        nodes.append(made[0])
        inputs += made[1]
        outputs += [onnx.ValueInfoProto(name=o) for o in made[2]]
    graph = helper.make_graph(nodes, "probes", inputs, outputs)
    imports = [helper.make_opsetid("" if d == "ai.onnx" else d, v) for d, v in sorted(opsets.items())]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    try:        # output types where onnx infers them (onnxruntime's contrib ops: left to onnxruntime)
        inferred = {vi.name: vi.type for vi in infer_shapes(model).graph.value_info}
    except Exception:     # noqa: BLE001 - onnxruntime infers what onnx cannot
        inferred = {}
    for output in model.graph.output:
        if output.name in inferred:
            output.type.CopyFrom(inferred[output.name])
    return model


def valid_alone(probe: Probe, opsets: "dict[str, int]") -> "str | None":
    """None when the probe's one-node model loads in the onnxruntime installed here and its CPU EP
    takes the node; NO_CPU_KERNEL when it loads and the CPU EP has no kernel for it (so a session
    fails unless the DML EP claims it); else why it does not load."""
    import onnxruntime as ort
    if probe_node(probe, "n") is None:
        return "not probed by one node (a graph attribute or a sequence argument)"
    model = probe_model([("n", probe)], opsets)
    wrong = _wrong_output_types(probe, model)
    if wrong:
        return wrong
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as exc:       # noqa: BLE001 - onnxruntime's load failures have no common type
        failure = parse_provider_failure(exc)
        if failure is not None and failure.status == "NOT_IMPLEMENTED":
            return NO_CPU_KERNEL
        if failed_after_placement(exc):
            return None            # loaded and placed; which provider takes it is the real EP's to say
        return " ".join(str(exc).split())[:200]
    return None


def _wrong_output_types(probe: Probe, model: onnx.ModelProto) -> "str | None":
    """Why the node's outputs, as onnx infers them, are not of the probe's types (None: they are,
    or onnx cannot say): a probe whose output type its inputs and attributes do not set."""
    s = exact_schema(probe.op, probe.domain, probe.since_version)
    types = dict(probe.types)
    if s is None or probe.domain != "ai.onnx":
        return None
    by_name = {o.name: o.type.tensor_type.elem_type for o in model.graph.output if o.type.HasField("tensor_type")}
    for i, (type_str, _) in enumerate(s.outputs):
        got = by_name.get(f"n_o{i}")
        if type_str in types and got and got != _ELEM[types[type_str]]:
            return f"output {i} is {onnx.TensorProto.DataType.Name(got).lower()}, not the probe's {types[type_str]}"
    return None
