"""TorchScript's nonzero(as_tuple=True) (issue 35): NonZero -> Transpose -> SplitToSequence ->
SequenceAt per axis, lowered like the Split + Squeeze form (nonzero_columns), by the ONNX spec's
reading of SplitToSequence (a split input keeps the axis whatever keepdims says); differential
against onnx.reference at several sizes, strict."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from tests.builders import tensor
from tests.lowering.producers import const, entries, lowered, make
from tests.lowering.test_nonzero import make_input
from tests.oracle import differential


# -- 1. TorchScript's nonzero(as_tuple=True): SplitToSequence -> SequenceAt ---------------------------

def sequence_model(rank, split="scalar", keepdims=0, squeeze=False, positions=None):
    """NonZero -> Transpose -> SplitToSequence(axis=1) -> SequenceAt per axis, as TorchScript's unbind
    writes it (split = scalar 1, keepdims=0); `split` None / "list" and keepdims 1 are the spec's other
    spellings of one column per chunk."""
    positions = list(range(rank)) if positions is None else positions
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz"),
             h.make_node("Transpose", ["nz"], ["t"], name="tr", perm=[1, 0])]
    inputs = ["t"]
    if split == "scalar":
        nodes.append(const("one", 1))
        inputs.append("one")
    elif split == "list":
        nodes.append(const("ones", [1] * rank))
        inputs.append("ones")
    nodes.append(h.make_node("SplitToSequence", inputs, ["seq"], name="unbind", axis=1, keepdims=keepdims))
    # By the spec a split input keeps the axis whatever keepdims says: each element is [nnz, 1].
    keep = split is not None or keepdims == 1
    outputs = []
    for i, p in enumerate(positions):
        nodes += [const(f"p{i}", p), h.make_node("SequenceAt", ["seq", f"p{i}"], [f"a{i}"], name=f"at{i}")]
        out = f"a{i}"
        if squeeze and keep:
            nodes += [const(f"ax{i}", [1]), h.make_node("Squeeze", [out, f"ax{i}"], [f"y{i}"], name=f"sq{i}")]
            out = f"y{i}"
        outputs.append(tensor(out, T.INT64, 2 if keep and not squeeze else 1))
    return make(nodes, [tensor("x", T.FLOAT, [None] * rank)], outputs)


@pytest.mark.parametrize("split,keepdims,squeeze", [("scalar", 0, False), ("scalar", 1, True), ("list", 0, False),
                                                    (None, 0, False), (None, 1, False), (None, 1, True)])
def test_split_to_sequence_columns(split, keepdims, squeeze):
    rng = np.random.default_rng(35)
    for shape in [(7,), (3, 4), (2, 3, 4), (1, 1), (0, 3), (2, 2, 2, 5)]:
        model = sequence_model(len(shape), split, keepdims, squeeze)
        for density in (0.0, 0.4, 1.0):
            x = (rng.random(shape) < density).astype(np.float32) * rng.standard_normal(shape).astype(np.float32)
            result = differential(model, {"x": x})
            entry = lowered(result, "nonzero_columns", {"nz", "tr", "unbind", "at0"})
            assert entry.dml_operators == ["NONZERO_COORDINATES"]


def test_split_to_sequence_negative_and_repeated_positions():
    model = sequence_model(3, positions=[-1, 0, 2, -3])
    x = make_input(T.FLOAT, (3, 4, 2), 0.5, np.random.default_rng(3))
    lowered(differential(model, {"x": x}), "nonzero_columns")


@pytest.mark.parametrize("kind", ["chunk-2", "axis-0", "other-reader"])
def test_split_to_sequence_near_misses_stay_onnx(kind):
    # keepdims=1: onnxruntime, which runs these, reads the spec's keepdims=0 with a split input otherwise
    model = sequence_model(4 if kind == "chunk-2" else 2, keepdims=1, positions=[0, 1])
    graph = model.graph
    if kind == "chunk-2":                    # chunks of two columns: no single column
        graph.node[2].CopyFrom(const("one", 2))
    elif kind == "axis-0":
        graph.node[3].attribute[0].i = 0
    else:                                    # the sequence read by something other than SequenceAt
        graph.node.append(h.make_node("SequenceLength", ["seq"], ["len"], name="len"))
        graph.output.append(tensor("len", T.INT64, []))
    x = np.ones((2, 3, 2, 2) if kind == "chunk-2" else (3, 4), np.float32)
    result = differential(model, {"x": x})
    assert entries(result, "nonzero_columns") == []
