"""The level-1 optimisations a DML EP prediction starts from are run by the onnxruntime installed
here; where that is not the release whose registration table is modelled, the nodes its fusions and
eliminations removed or created are said to depend on the release (1.32's level 1 fuses a Not
into the Where reading it at opset 18; the real onnxruntime.dll 1.24.4 keeps the Not, as a new
user's torch export showed: --verify agreed on every node, the prediction listed the Not removed)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler.ep.level1 import Level1, level1_model
from onnx_dml_lowering.compiler.ep.placement import REMOVED, predict_with_graph


def _not_where() -> onnx.ModelProto:
    nodes = [h.make_node("Not", ["c"], ["n"], name="not"), h.make_node("Where", ["n", "a", "b"], ["y"], name="where")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("c", T.BOOL, [4]), h.make_tensor_value_info("a", T.FLOAT, [4]),
                                      h.make_tensor_value_info("b", T.FLOAT, [4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [4])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=8)


def _warned(report: dict) -> "list[str]":
    return [w for w in report["warnings"] if "whose fusions may differ" in w]


def test_a_fusion_by_another_release_is_said_to_depend_on_it():
    here = Level1(level1_model, f"onnxruntime {ort.__version__} installed here")
    report, _ = predict_with_graph(_not_where(), None, level1=here, ort_version="1.24.4")
    removed = {n["node"] for n in report["nodes"] if n["provider"] == REMOVED}
    assert removed == {"not"}                  # the premise: level 1 here fuses the Not into the Where
    assert _warned(report) == [f"not: removed, fused or created by the level-1 optimisations of onnxruntime "
                               f"{ort.__version__}, whose fusions may differ from onnxruntime 1.24.4's: that release "
                               "may keep the stored nodes (--verify runs its own)"]


def _folded_shape_chain() -> onnx.ModelProto:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape over a static shape, and an Identity: every
    release folds the chain and drops the Identity."""
    from onnx import numpy_helper as nh
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("Gather", ["s", "i0"], ["g"], name="gather", axis=0),
             h.make_node("Unsqueeze", ["g", "ax"], ["u"], name="unsq"),
             h.make_node("Concat", ["u", "m1"], ["shp"], name="concat", axis=0),
             h.make_node("Reshape", ["x", "shp"], ["r"], name="reshape"),
             h.make_node("Identity", ["r"], ["r2"], name="ident"),
             h.make_node("Relu", ["r2"], ["y"], name="relu")]
    inits = [nh.from_array(np.array(0, np.int64), "i0"), nh.from_array(np.array([0], np.int64), "ax"),
             nh.from_array(np.array([-1], np.int64), "m1")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2, 12])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_constant_folding_is_no_release_question():
    """The folded chain's nodes are removed (their readers went with them) and the Identity is
    eliminated: nothing a release decides, so no warning (it fired on such chains of torch exports)."""
    here = Level1(level1_model, f"onnxruntime {ort.__version__} installed here")
    report, _ = predict_with_graph(_folded_shape_chain(), None, level1=here, ort_version="1.24.4")
    removed = {n["node"] for n in report["nodes"] if n["provider"] == REMOVED}
    assert {"shape", "gather", "unsq", "ident"} <= removed             # the premise: level 1 folded them
    assert _warned(report) == []


def test_the_same_release_or_no_fusion_says_nothing():
    same = Level1(level1_model, "onnxruntime.dll 1.24.4")        # as --verify names the real EP's level 1
    report, _ = predict_with_graph(_not_where(), None, level1=same, ort_version="1.24.4")
    assert _warned(report) == []
    plain = _not_where()
    plain.graph.node[1].input[0] = "c"
    del plain.graph.node[0]
    here = Level1(level1_model, f"onnxruntime {ort.__version__} installed here")
    report, _ = predict_with_graph(plain, None, level1=here, ort_version="1.24.4")
    assert _warned(report) == []


@pytest.mark.directml
def test_the_real_release_keeps_the_not(tmp_path, capsys):
    """onnxruntime.dll 1.24.4's own level 1 (--verify) keeps the Not on the DML EP, and the
    prediction from that level 1 agrees with the real EP on both nodes, without the warning."""
    from tests.cli_runner import cli
    onnx.save(_not_where(), tmp_path / "m.onnx")
    code, out, err = cli(["inspect", tmp_path / "m.onnx", "--ep", "dml", "--verify"], capsys)
    assert (code, err) == (0, ""), out + err
    assert "  DmlExecutionProvider: 2 nodes: Not 1, Where 1" in out and "whose fusions are not" not in out
    assert "level 1 by the same onnxruntime): 2 of 2 nodes agree on placement" in out
