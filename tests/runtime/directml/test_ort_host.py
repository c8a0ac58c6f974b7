"""ort_host.exe: onnxruntime.dll's DirectML EP in a long-lived host, compared with the CPU onnxruntime
installed beside the project (seeded feeds), its typed failures, its placement log, its lifetime."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.directml.ort_host import (OrtHost, RunFailed, SessionCreationFailed, SessionRequest,
                                                         host_path)
from onnx_dml_lowering.runtime.directml.placement_log import node_providers, parse
from onnx_dml_lowering.runtime.directml.wine import RUN_ENV

directml = pytest.mark.directml


@pytest.fixture(scope="module")
def host():
    with OrtHost() as running:
        yield running


def model(nodes, inputs, outputs, initializers=(), opset=14):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def cpu(proto, feeds):
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def mixed_model():
    """Relu and NonZero the DML EP takes, Unique it does not (CPU)."""
    return model([helper.make_node("Relu", ["x"], ["r"], name="relu0"),
                  helper.make_node("Unique", ["r"], ["y"], name="uniq", sorted=1),
                  helper.make_node("NonZero", ["x"], ["z"], name="nz")],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                  helper.make_tensor_value_info("z", TensorProto.INT64, None)], opset=13)


def test_wine_paths_are_under_z():
    if sys.platform == "win32":
        pytest.skip("paths are Windows paths already")
    assert host_path("/tmp/a b/m.onnx") == "Z:\\tmp\\a b\\m.onnx"


def test_placement_log_lists_and_whole_graphs():
    log = "\n".join(["1|onnxruntime|Initializing session.", "0|onnxruntime|Node placements",
                     "0|onnxruntime| Node(s) placed on [DmlExecutionProvider]. Number of nodes: 2",
                     "0|onnxruntime|  Relu (relu (0))", "0|onnxruntime|  MemcpyToHost (Memcpy)",
                     "0|onnxruntime| Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1",
                     "0|onnxruntime|  Unique ()", "2|onnxruntime|Some nodes were not assigned"])
    placements = parse(log)
    assert placements.nodes == {"relu (0)": "DmlExecutionProvider", "Memcpy": "DmlExecutionProvider",
                                "": "CPUExecutionProvider"}
    assert placements.copies == 1
    whole = "0|onnxruntime|Node placements\n0|onnxruntime| All nodes placed on [DmlExecutionProvider]. Number of nodes: 2"
    assert node_providers(whole, ["a", "b"]) == {"a": "DmlExecutionProvider", "b": "DmlExecutionProvider"}
    assert node_providers(whole, None) is None
    assert node_providers("1|onnxruntime|nothing", ["a"]) is None


@directml
def test_hello_and_version(host):
    assert host.version() == "1.24.4"
    assert host.process.hello.startswith("ok onnxruntime 1.24.4")


@directml
def test_mixed_model_equals_cpu_and_names_each_provider(host, tmp_path):
    proto = mixed_model()
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}
    optimized = tmp_path / "opt.onnx"
    session = host.create_session(proto.SerializeToString(),
                                  SessionRequest(optimization_level="basic", optimized_model_path=str(optimized)))
    got = session.run(None, feeds)
    for a, b in zip(got, cpu(proto, feeds)):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    assert node_providers(session.log, None) == {"relu0": "DmlExecutionProvider", "nz": "DmlExecutionProvider",
                                                 "Memcpy": "DmlExecutionProvider", "uniq": "CPUExecutionProvider"}
    # the optimised model is the partitioned graph: the copy onnxruntime inserted included
    assert sorted(n.name for n in onnx.load(optimized).graph.node) == ["Memcpy", "nz", "relu0", "uniq"]
    session.release()


@directml
@pytest.mark.parametrize("dtype,op", [(np.float16, "Mul"), (np.int64, "Add"), (np.bool_, "Xor"), (np.uint8, "Add")])
def test_types_round_trip_against_cpu(host, dtype, op):
    rng = np.random.default_rng(1)
    onnx_type = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    proto = model([helper.make_node(op, ["a", "b"], ["c"], name="n")],
                  [helper.make_tensor_value_info(n, onnx_type, [3, 4]) for n in "ab"],
                  [helper.make_tensor_value_info("c", onnx_type, [3, 4])])
    if dtype == np.int64:       # 64-bit overflow wraps on both
        feeds = {n: rng.integers(2**61, 2**63 - 1, (3, 4), dtype=np.int64) for n in "ab"}
    elif dtype == np.bool_:
        feeds = {n: rng.integers(0, 2, (3, 4)).astype(bool) for n in "ab"}
    else:       # small integers: exact products, so float16 rounding (lavapipe's) does not enter
        feeds = {n: rng.integers(-8, 8, (3, 4)).astype(dtype) for n in "ab"}
    got = host.create_session(proto.SerializeToString()).run(["c"], feeds)[0]
    want = cpu(proto, feeds)[0]
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@directml
def test_a_model_with_external_data_loads_from_its_path(host, tmp_path):
    weight = np.arange(12, dtype=np.float32).reshape(3, 4)
    proto = model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
                  [onnx.numpy_helper.from_array(weight, "w")])
    folder = tmp_path / "with space"
    folder.mkdir()
    onnx.save(proto, folder / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    x = np.ones((3, 4), np.float32)
    (y,) = host.create_session(folder / "m.onnx").run(None, {"x": x})
    np.testing.assert_array_equal(y, x + weight)


@directml
def test_failures_are_typed_and_carry_onnxruntimes_message(host):
    proto = mixed_model()
    with pytest.raises(SessionCreationFailed, match="[Pp]rotobuf|parse|ModelProto|Load model"):
        host.create_session(b"not a model")
    session = host.create_session(proto.SerializeToString())
    with pytest.raises(RunFailed, match="x"):
        session.run(None, {"x": np.zeros((4, 4), np.float32)})      # the model says [2, 3]
    with pytest.raises(DmlLowerError, match="string"):
        session.run(None, {"x": np.array([["a"]])})
    # the host serves the next request after a failure
    assert session.run(None, {"x": np.ones((2, 3), np.float32)})[1].shape == (2, 6)


def _host_processes(run_id: str) -> "list[int]":
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as stream:
                if f"{RUN_ENV}={run_id}".encode() in stream.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue
    return found


@directml
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Wine's processes exist on Linux only")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_no_wine_process_outlives_its_parent(how):
    script = textwrap.dedent("""
        import sys
        from onnx_dml_lowering.runtime.directml.ort_host import OrtHost
        host = OrtHost()
        host.version()
        print(host.process.run_id, flush=True)
        sys.stdin.read()
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    run_id = parent.stdout.readline().strip()
    assert run_id and _host_processes(run_id), "the host did not start"
    parent.send_signal(how)
    parent.wait(30)
    deadline = time.monotonic() + 20
    while _host_processes(run_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _host_processes(run_id) == []
