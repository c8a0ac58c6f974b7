"""Declared shapes are never trusted at run time (issue #26 item 4): a value whose model-declared
shape (value_info, hence what a static lowering was built for) differs from the shape it has when
the model runs is refused in one line naming the value, the shape it has and the one declared
(the project's error: exit 2 from run and check, never a wrong answer with exit 0, never a
backend ERROR). A declaration that agrees with the values changes nothing: the answers are
onnx.reference's."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.check import Tolerances, check
from tests.builders import graph_model
from tests.oracle import assert_outputs_same, reference

X = (np.arange(12, dtype=np.float32) % 3).reshape(12)
S = np.array([3, 4], np.int64)                     # what Reshape makes of x: r is [3, 4]

# consumer -> (nodes reading r, outputs); every one lowered statically when r's shape is declared
CONSUMERS = {
    "nonzero": ([h.make_node("NonZero", ["r"], ["y"], name="nonzero")], [("y", T.INT64, [2, None])]),
    "eyelike": ([h.make_node("EyeLike", ["r"], ["y"], name="eye", k=1)], [("y", T.FLOAT, 2)]),
    "trilu": ([h.make_node("Trilu", ["r"], ["y"], name="trilu", upper=0)], [("y", T.FLOAT, 2)]),
    "nonzero_transpose": ([h.make_node("NonZero", ["r"], ["nz"], name="nonzero"),
                           h.make_node("Transpose", ["nz"], ["y"], name="transpose", perm=[1, 0])],
                          [("y", T.INT64, [None, 2])]),
}
# declared shape of r -> what is wrong with it
DECLARED = {
    "same count, rows and columns swapped": [4, 3],
    "same count, other split": [2, 6],
    "same count, other rank": [12, 1],
    "other count": [3, 3],
}


def model(consumer: str, declared: "list[int] | None") -> onnx.ModelProto:
    """r = Reshape(x, s), s a graph input (so onnx cannot infer r); r declared `declared` in value_info."""
    nodes, outputs = CONSUMERS[consumer]
    out = graph_model([h.make_node("Reshape", ["x", "s"], ["r"], name="reshape")] + nodes,
                      [("x", T.FLOAT, [12]), ("s", T.INT64, [2])], outputs, opset=14)
    if declared is not None:
        out.graph.value_info.append(h.make_tensor_value_info("r", T.FLOAT, declared))
    return out


FEEDS = {"x": X, "s": S}


@pytest.mark.parametrize("declared", sorted(DECLARED))
@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
def test_contradicting_declaration_is_refused(consumer: str, declared: str) -> None:
    compiled = compile_model(model(consumer, DECLARED[declared]))
    assert any(p.status == "lowered" and "run time" not in p.note for p in compiled.placement), compiled.placement
    for backend in ("cpu", "ort"):
        with pytest.raises(DmlLowerError) as info:
            compiled.run(FEEDS, backend=backend)
        message = str(info.value)
        assert "'r'" in message and "[3, 4]" in message and str(DECLARED[declared]) in message, message
    with pytest.raises(DmlLowerError, match="'r'"):      # the model's fault: no backend ERROR in a report
        check(compiled, FEEDS, ["cpu", "ort-cpu"], Tolerances())


@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
@pytest.mark.parametrize("declared", [[3, 4], None], ids=["agrees", "undeclared"])
def test_true_or_no_declaration_answers_as_onnx(consumer: str, declared) -> None:
    built = model(consumer, declared)
    got = compile_model(built).run(FEEDS, strict=True)
    assert_outputs_same(got, reference(built, FEEDS))


@pytest.mark.parametrize("command", ["run", "check"])
def test_cli_exits_2_with_one_line(command: str, tmp_path, capfd) -> None:
    path, feeds = tmp_path / "m.onnx", tmp_path / "f.npz"
    onnx.save(model("nonzero", [4, 3]), str(path))
    np.savez(feeds, **FEEDS)
    assert main([command, str(path), "--inputs", str(feeds)]) == 2
    out, err = capfd.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "value 'r' has shape [3, 4]" in lines[0] and "[4, 3]" in lines[0], err
    assert "Traceback" not in err and "MISMATCH" not in out and "ERROR" not in out


def test_loop_body_declaration_is_checked_per_iteration() -> None:
    """A Loop whose carried value is declared [2, 2] in its body but grows each trip: the lowered
    body's NonZero is refused at the trip where the value stops matching."""
    body = h.make_graph(
        [h.make_node("Concat", ["acc", "acc"], ["grown"], name="grow", axis=0),
         h.make_node("NonZero", ["grown"], ["nz"], name="body_nonzero"),
         h.make_node("Identity", ["cond"], ["cond_out"], name="keep")],
        "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond", T.BOOL, []),
                 h.make_tensor_value_info("acc", T.FLOAT, [1, 2])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("grown", T.FLOAT, [2, 2])],
        value_info=[h.make_tensor_value_info("grown", T.FLOAT, [2, 2])])
    built = graph_model([h.make_node("Loop", ["m", "go", "a"], ["y"], name="loop", body=body)],
                        [("m", T.INT64, []), ("go", T.BOOL, []), ("a", T.FLOAT, [1, 2])],
                        [("y", T.FLOAT, [None, 2])], opset=13)
    compiled = compile_model(built)
    feeds = {"m": np.array(1, np.int64), "go": np.array(True), "a": np.ones((1, 2), np.float32)}
    assert_outputs_same(compiled.run(feeds), reference(built, feeds))      # one trip: [2, 2] as declared
    feeds["m"] = np.array(2, np.int64)
    with pytest.raises(DmlLowerError, match="'grown' has shape \\[4, 2\\]"):
        compiled.run(feeds)
