"""The DirectML EP's activation fusion, as measured on the real onnxruntime-directml 1.24.4
(docs/directml-ep-on-linux.md, tests/runtime/directml/test_dml_fusion_real.py).

The DML EP fuses an activation into the node producing its input when that value has no other
reader: FUSES says which producers take which activations (Celu, HardSwish and PRelu are taken by
none; Sub, Mul and Div fuse nothing). Three things follow, each a named DML EP deviation:

- the producer's value, when it is also a graph output, comes back empty (an OrtValue holding
  nothing) though the run succeeds: `fused_output_risks` predicts it (inspect --ep dml);
- a Gemm without its C input fused with an activation makes a DmlFusedGemm that needs C: session
  creation fails;
- a MeanVarianceNormalization fused with an activation makes a node that refuses its own axes:
  session creation fails.
The last two are FAILURES of dml_deviations (`fusion_failures` finds them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import onnx

from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.lowering.onnx_graphs import is_standard, node_reads

from .ort_values import EMPTY_REASON

DML = "DmlExecutionProvider"          # (backend_names' DML_PROVIDER: that module imports this one's importers)

_ANY = frozenset({"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "HardSigmoid", "Softplus", "Selu", "Softsign",
                  "ThresholdedRelu"})
# producer op -> the activations the DML EP fuses into it (measured: each pair of this table and
# Celu, HardSwish, PRelu with each producer, and Sub, Mul, Div with each activation)
FUSES: "dict[str, frozenset[str]]" = {
    **dict.fromkeys(("Conv", "ConvTranspose", "BatchNormalization", "InstanceNormalization", "MatMul", "Gemm",
                     "MeanVarianceNormalization"), _ANY),
    **dict.fromkeys(("Add", "Sum"), frozenset({"Relu", "LeakyRelu"})),
}
# FAILURES keys of dml_deviations, and how onnxruntime's message at session creation names each
GEMM_WITHOUT_C = "gemm_without_c_fused"
MVN_FUSED = "mvn_fused"
FAILURE_TEXT = {
    GEMM_WITHOUT_C: "DML EP deviation: a Gemm without its C input, fused with the activation reading it, "
                    "fails at session creation (the DML EP's fused Gemm needs C)",
    MVN_FUSED: "DML EP deviation: a MeanVarianceNormalization fused with the activation reading it fails at "
               "session creation (the fused node refuses its axes)",
}
FAILURE_MARKS = {GEMM_WITHOUT_C: "DMLFUSEDGEMM", MVN_FUSED: "DMLFUSEDMEANVARIANCENORMALIZATION"}
# The NAMES key of dml_deviations for an output the fusion leaves empty, and its name
FUSED_OUTPUT_EMPTY = "fused_output_empty"
FUSED_OUTPUT_TEXT = ("DML EP deviation: a graph output read by one activation alone, which the DML EP fuses into "
                     "the output's producer, comes back empty (an OrtValue holding nothing)")


def fused_pairs(graph: onnx.GraphProto, providers: "Mapping[str, str] | None" = None
                ) -> "list[tuple[onnx.NodeProto, onnx.NodeProto]]":
    """(producer, activation) for each pair the DML EP fuses, in graph order: the activation is the
    only node reading the producer's (first) output, FUSES pairs them, and both run on the DML EP
    (`providers`: node name -> provider; None, or a node it does not name: the DML EP's)."""
    readers: "dict[str, list[onnx.NodeProto]]" = {}
    for node in graph.node:
        for name in node_reads(node):       # a body reading the value from outside counts
            readers.setdefault(name, []).append(node)
    on_dml = (lambda node: True) if providers is None else (lambda node: providers.get(node.name, DML) == DML)
    pairs = []
    for node in graph.node:
        takes = FUSES.get(node.op_type, frozenset()) if is_standard(node) and node.output else frozenset()
        users = readers.get(node.output[0], []) if takes else []
        if len(users) == 1 and users[0].op_type in takes and is_standard(users[0]) \
                and on_dml(node) and on_dml(users[0]):
            pairs.append((node, users[0]))
    return pairs


def fusion_failures(graph: onnx.GraphProto) -> "list[tuple[str, str, str]]":
    """(node, op type, FAILURES key) for each producer whose fusion makes a node the DML EP cannot create."""
    found = []
    for producer, _ in fused_pairs(graph):
        if producer.op_type == "Gemm" and (len(producer.input) < 3 or not producer.input[2]):
            found.append((producer.name, producer.op_type, GEMM_WITHOUT_C))
        elif producer.op_type == "MeanVarianceNormalization":
            found.append((producer.name, producer.op_type, MVN_FUSED))
    return found


@dataclass(frozen=True)
class FusedOutputRisk:
    """A graph output the DML EP will return empty: its producer's activation is fused into it."""
    output: str
    node: str
    op_type: str
    activation: str
    activation_op: str

    def describe(self) -> str:
        return (f"graph output '{display(self.output)}' ({self.op_type} node {display(self.node) or '(unnamed)'} on the DML "
                f"EP) comes back empty (an OrtValue holding nothing): the DML EP fuses {self.activation_op} node "
                f"{display(self.activation) or '(unnamed)'}, its only reader, into it and keeps no copy of the value, "
                "measured on onnxruntime-directml 1.24.4 (a named DML EP deviation)")

    def short(self) -> str:
        """In the words of a conformance difference ('output y: ...'), beside the deviation's name."""
        return (f"output {display(self.output)}: came back empty (the DML EP fused {self.activation_op} node "
                f"{display(self.activation)} into {self.op_type} node {display(self.node)})")

    def run_reason(self) -> str:
        """What check says of the output when the DML EP's run gave it empty."""
        return (f"DML EP deviation: the DML EP fused {self.activation_op} node {display(self.activation)}, its only "
                f"reader, into {self.op_type} node {display(self.node)} and kept no copy of the value: {EMPTY_REASON}")


def fused_output_risks(model: onnx.ModelProto, providers: "Mapping[str, str] | None") -> "list[FusedOutputRisk]":
    """The main graph's outputs a fused activation leaves empty, in output order."""
    outputs = {o.name for o in model.graph.output}
    by_output = {p.output[0]: (p, a) for p, a in fused_pairs(model.graph, providers) if p.output[0] in outputs}
    return [FusedOutputRisk(o.name, p.name, p.op_type, a.name, a.op_type)
            for o in model.graph.output if o.name in by_output for p, a in [by_output[o.name]]]


def fused_empty_outputs(model: onnx.ModelProto, outputs: "Mapping[str, object]",
                        providers: "Mapping[str, str] | None") -> "list[FusedOutputRisk]":
    """The predicted risks a run's `outputs` (name -> value, None where onnxruntime gave nothing)
    bear out: the fused outputs that came back empty."""
    return [risk for risk in fused_output_risks(model, providers) if outputs.get(risk.output) is None]
