"""onnxruntime's Loop hands out its iteration-count buffer when a body output is the count input
itself (every scan row reads the last count, a loop-carried value one past it). The oracle and the
lowered run's regions give it a copy (runtime/ort_workarounds.py), so the ONNX answer is what
check compares against; an ort-* backend, which runs the model as it is, shows the deviation as
the MISMATCH it is. Found by a new-user trial."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.check import Tolerances, check
from onnx_dml_lowering.runtime.ort_workarounds import loops_as_onnx_defines
from tests.builders import graph_model

V = h.make_tensor_value_info


def counter_loop(carried: bool, lowered: bool) -> onnx.ModelProto:
    """Loop(M) whose body hands out its count `i`: as a scan output, or as the carried value; with
    a NonZero in the body too when `lowered` (the host then runs the Loop on the cpu backend)."""
    nodes = [h.make_node("Identity", ["c"], ["co"], name="cond")]
    outputs = [V("co", T.BOOL, [])]
    if lowered:
        nodes.append(h.make_node("NonZero", ["x"], ["nz"], name="nz"))
        outputs.append(V("nz", T.INT64, [1, None]))
    inputs = [V("i", T.INT64, []), V("c", T.BOOL, [])] + ([V("v", T.INT64, [])] if carried else [])
    body = h.make_graph(nodes, "body", inputs, ([outputs[0], V("i", T.INT64, [])] + outputs[1:]))
    loop_in = ["M", "c0"] + (["v0"] if carried else [])
    loop_out = (["v_out"] if carried else ["rows"]) + (["nz_rows"] if lowered else [])
    graph_outputs = [("v_out", T.INT64, []) if carried else ("rows", T.INT64, [None])]
    graph_outputs += [("nz_rows", T.INT64, 3)] if lowered else []
    graph_inputs = [("M", T.INT64, []), ("c0", T.BOOL, []), ("x", T.FLOAT, [4])] + ([("v0", T.INT64, [])] if carried else [])
    return graph_model([h.make_node("Loop", loop_in, loop_out, name="loop", body=body)], graph_inputs, graph_outputs)


def feeds(carried: bool, trips: int) -> dict:
    out = {"M": np.array(trips, np.int64), "c0": np.array(True), "x": np.array([0, 2, 0, 1], np.float32)}
    return {**out, "v0": np.array(7, np.int64)} if carried else out


@pytest.mark.parametrize("lowered", [False, True])
@pytest.mark.parametrize("carried", [False, True])
@pytest.mark.parametrize("trips", [1, 3, 5])
def test_the_oracle_counts_as_onnx_does(carried, lowered, trips):
    model = counter_loop(carried, lowered)
    want = np.array(trips - 1 if carried else np.arange(trips), np.int64)     # ONNX: i = 0 .. M-1
    name = "v_out" if carried else "rows"
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert not np.array_equal(session.run([name], feeds(carried, trips))[0], want)     # the deviation
    compiled = compile_model(model)
    _, report = check(compiled, feeds(carried, trips), ["cpu", "ort", "ort-cpu"], Tolerances())
    assert np.array_equal(report.expected[name], want)
    status = {(o.backend, o.output): o.status for b in report.backends for o in b.outputs}
    assert status[("cpu", name)] == status[("ort", name)] == "match"
    assert status[("ort-cpu", name)] == "mismatch"
    assert np.array_equal(compiled.run(feeds(carried, trips))[name], want)


def test_nested_loops_are_copied_and_the_originals_left_alone():
    inner = counter_loop(False, False).graph.node[0]
    then = h.make_graph([inner], "then", [], [V("rows", T.INT64, [None])])
    outer = h.make_node("If", ["flag"], ["rows_out"], name="if", then_branch=then, else_branch=then)
    before = outer.SerializeToString()
    (copied,) = loops_as_onnx_defines([outer])
    assert outer.SerializeToString() == before and copied is not outer
    body = copied.attribute[0].g.node[0].attribute[0].g
    assert body.output[1].name != "i" and body.node[-1].op_type == "Identity" and body.node[-1].input == ["i"]
    plain = [h.make_node("Relu", ["a"], ["b"]), counter_loop(False, False).graph.node[0]]
    plain[1].attribute[0].g.output[1].name = "co"          # a body output that is not the count
    assert loops_as_onnx_defines(plain) is plain


@pytest.mark.parametrize("trips", [0, 1, 5])
def test_a_for_loop_runs_m_trips_in_onnx_regions_too(trips):
    """Loop(M, "") whose body cond turns false after the first trip, nothing lowered inside (so the
    lowered run hands it to onnxruntime as a region): ONNX ignores that cond and runs M trips."""
    body = h.make_graph([h.make_node("Less", ["i", "one"], ["co"]), h.make_node("Add", ["v", "i"], ["v2"])], "body",
                        [V("i", T.INT64, []), V("c", T.BOOL, []), V("v", T.INT64, [])],
                        [V("co", T.BOOL, []), V("v2", T.INT64, [])],
                        [onnx.numpy_helper.from_array(np.array(1, np.int64), "one")])
    model = graph_model([h.make_node("Loop", ["M", "", "v0"], ["vf"], name="loop", body=body),
                         h.make_node("EyeLike", ["e"], ["eye"], name="eye")],
                        [("M", T.INT64, []), ("v0", T.INT64, []), ("e", T.FLOAT, [2, 2])],
                        [("vf", T.INT64, []), ("eye", T.FLOAT, [2, 2])])
    feeds = {"M": np.array(trips, np.int64), "v0": np.array(100, np.int64), "e": np.zeros((2, 2), np.float32)}
    want = 100 + sum(range(trips))
    compiled = compile_model(model)
    assert [p.rule for p in compiled.placement if p.status == "lowered"] == ["eyelike"]
    _, report = check(compiled, feeds, ["cpu", "ort-cpu"], Tolerances())
    assert int(report.expected["vf"]) == want == int(compiled.run(feeds)["vf"])
    status = {(o.backend, o.output): o.status for b in report.backends for o in b.outputs}
    assert status[("cpu", "vf")] == "match"
    assert status[("ort-cpu", "vf")] == ("mismatch" if trips > 2 else "match")


def test_the_rewrite_takes_no_name_the_model_has():
    """The names the rewrite makes are new to the whole sub-model, outer values and other bodies
    included (onnxruntime refuses a name made twice); the model's own 'cond_ignored' stays its own."""
    body = h.make_graph([h.make_node("Less", ["i", "one"], ["co"]), h.make_node("Add", ["v", "i"], ["v2"])], "body",
                        [V("i", T.INT64, []), V("c", T.BOOL, []), V("v", T.INT64, [])],
                        [V("co", T.BOOL, []), V("v2", T.INT64, [])],
                        [onnx.numpy_helper.from_array(np.array(1, np.int64), "one")])
    nodes = [h.make_node("Identity", ["v0"], ["cond_ignored"], name="outer"),
             h.make_node("Identity", ["v0"], ["i_copy_1"], name="outer2"),
             h.make_node("Loop", ["M", "", "cond_ignored"], ["vf"], name="loop", body=body),
             h.make_node("Add", ["vf", "i_copy_1"], ["y"], name="add")]
    model = graph_model(nodes, [("M", T.INT64, []), ("v0", T.INT64, [])], [("y", T.INT64, [])])
    feeds = {"M": np.array(4, np.int64), "v0": np.array(10, np.int64)}
    compiled = compile_model(model)
    _, report = check(compiled, feeds, ["cpu"], Tolerances())
    assert int(report.expected["y"]) == 10 + (0 + 1 + 2 + 3) + 10 and report.ok
    rewritten = loops_as_onnx_defines(list(model.graph.node))
    made = [o for n in rewritten[2].attribute[0].g.node for o in n.output]
    assert "cond_ignored" not in made and len(set(made)) == len(made)
