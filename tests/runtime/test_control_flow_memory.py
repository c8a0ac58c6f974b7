"""--memory-limit bounds the scan outputs the host accumulates in control flow (issue 27): a Loop
or Scan whose stacked scan outputs (twice their size while stacking) would pass the limit is one
line naming the node, at the iteration it passes it; under the limit the result is np.stack's."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir.errors import MemoryLimitExceeded
from onnx_dml_lowering.runtime.control_flow import run_control_flow
from tests.builders import graph_model
from tests.cli_runner import cli

ELEMENTS = 1024          # float32 per iteration: 4 KiB


def _node(construct: str) -> onnx.NodeProto:
    if construct == "loop":
        return h.make_node("Loop", ["M", "", "s"], ["s_out", "scan"], name="big\x1bloop")
    return h.make_node("Scan", ["s", "xs"], ["s_out", "scan"], name="big\x1bscan", num_scan_inputs=1)


def _run(construct: str, trips: int, limit: int):
    def body(attribute, values):
        return ([np.array(True)] if construct == "loop" else []) + [values[-1 if construct == "scan" else 2],
                                                                   np.full(ELEMENTS, 1.0, np.float32)]
    state = np.zeros(1, np.float32)
    inputs = [np.array(trips, np.int64), None, state] if construct == "loop" else [state, np.zeros((trips, 1))]
    outputs = [(T.FLOAT, None)] * (3 if construct == "loop" else 2)
    return run_control_flow(construct, _node(construct), inputs, body, outputs, limit)


@pytest.mark.parametrize("construct", ["loop", "scan"])
@pytest.mark.parametrize("trips, limit", [(10, 1 << 20), (100, 1 << 20), (200, 1 << 20), (1, 4096), (1, 8192),
                                          (1000, 8 << 20)])
def test_scan_outputs_stay_within_the_limit(construct, trips, limit):
    per_iteration = ELEMENTS * 4
    if 2 * trips * per_iteration > limit:
        first_over = next(i for i in range(1, trips + 1) if 2 * i * per_iteration > limit)
        with pytest.raises(MemoryLimitExceeded) as info:       # a type check matches, not these words
            _run(construct, trips, limit)
        message = str(info.value)
        assert f"'big\\x1b{construct}'" in message and f"after {first_over} iterations" in message
        assert "raise --memory-limit" in message
    else:
        scan = _run(construct, trips, limit)[-1]
        assert np.array_equal(scan, np.stack([np.full(ELEMENTS, 1.0, np.float32)] * trips))


def test_a_lowered_loop_past_the_limit_is_one_line_naming_the_node(tmp_path, capsys):
    """The emulator runs this Loop on the host (its body holds a NonZero); 64 KiB a trip, so the 17th
    trip is the first whose stack, twice over, passes 2 MiB."""
    n = 16384
    body = h.make_graph(
        [h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("NonZero", ["x_in"], ["nz"]),
         h.make_node("Identity", ["x_in"], ["x_out"]), h.make_node("Identity", ["x_in"], ["scan"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("x_in", T.FLOAT, [n])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("x_out", T.FLOAT, [n]),
         h.make_tensor_value_info("scan", T.FLOAT, [n]), h.make_tensor_value_info("nz", T.INT64, [1, None])])
    model = graph_model([h.make_node("Loop", ["M", "", "x"], ["y", "ys", "nzs"], name="the\rloop", body=body)],
                        [("x", T.FLOAT, [n])], [("y", T.FLOAT, [n]), ("ys", T.FLOAT, [None, n])],
                        initializers={"M": np.array(1000, np.int64)}, opset=17)
    onnx.save(model, tmp_path / "m.onnx")
    code, out, err = cli(["run", tmp_path / "m.onnx", "--memory-limit", "2MiB", "--zero-fraction", "1"], capsys)
    assert code == 2 and err.count("\n") == 1, out + err
    assert "node 'the\\rloop' (Loop)" in err and "after 17 iterations" in err and "2.0 MiB" in err


def _eye_loop(trips: int) -> onnx.ModelProto:
    """A Loop of `trips` trips whose body's EyeLike (64 x 64 float32: 16 KiB a trip) is a scan
    output: the oracle runs it on the host, the body's EyeLike on the ONNX definitions."""
    body = h.make_graph(
        [h.make_node("Identity", ["c_in"], ["c_out"], name="cond"), h.make_node("EyeLike", ["x"], ["eye"], name="eye")],
        "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, [])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("eye", T.FLOAT, [64, 64])])
    return graph_model([h.make_node("Loop", ["M", ""], ["eyes"], name="eye\x1bloop", body=body)],
                       [("x", T.FLOAT, [64, 64])], [("eyes", T.FLOAT, [trips, 64, 64])],
                       initializers={"M": np.array(trips, np.int64)}, opset=17)


@pytest.mark.parametrize("oracle", ["hybrid", "reference"])
def test_the_oracle_s_own_control_flow_keeps_the_limit(oracle, tmp_path, capsys):
    """The oracle's host Loop is bounded as the lowered run's is (issue 35 item 8): with only ort-cpu
    checked (onnxruntime runs the shipped Loop itself) the oracle alone accumulates the scan output,
    and at 1 MiB its 33rd trip (2 x 33 x 16 KiB) passes the limit; at 4 MiB all 100 fit."""
    onnx.save(_eye_loop(100), tmp_path / "m.onnx")
    base = ["check", tmp_path / "m.onnx", "--backends", "ort-cpu", "--oracle", oracle, "-q"]
    code, out, err = cli([*base, "--memory-limit", "1MiB"], capsys)
    assert code == 2 and err.count("\n") == 1, out + err
    assert err.startswith("dml-lower: error: node 'eye\\x1bloop' (Loop): its scan outputs hold 528.0 KiB after 33 "
                          "iterations") and "over the memory limit of 1.0 MiB" in err, err
    code, out, err = cli([*base, "--memory-limit", "4MiB"], capsys)
    assert code == 0 and "match ONNX semantics" in out, out + err


def test_make_oracle_passes_the_limit_to_the_bodies_it_runs():
    from onnx_dml_lowering.compiler import compile_model
    from onnx_dml_lowering.runtime.check import make_oracle
    compiled = compile_model(_eye_loop(100))
    x = np.zeros((64, 64), np.float32)
    with pytest.raises(MemoryLimitExceeded, match="after 33 iterations"):
        make_oracle(compiled, memory_limit="1MiB").run({"x": x})
    assert make_oracle(compiled, memory_limit="4MiB").run({"x": x})["eyes"].shape == (100, 64, 64)
