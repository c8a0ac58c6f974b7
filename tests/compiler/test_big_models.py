"""Models past 2 GB: compile, run, check (every backend and oracle), optimize and the Python API on
a model whose external data file is 2.4 GB (sparse: it costs no disk), with exact results computed
from the few non-zero weights; no onnxruntime session is handed the weight inside its proto."""
from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest

from onnx_dml_lowering.runtime.saved_outputs import split_metadata
from onnx_dml_lowering.compiler import compile_model
from tests.cli_runner import cli
from tests.big_models import WEIGHT_ELEMENTS, expected_outputs, write_big_model
from tests.runtime.test_ort_model import SessionSpy

X = np.array([0.5, -1.0, 2.0, 0.25, -3.0, 7.0], np.float32)


def _available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        return 0


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    if _available_bytes() < 4 << 30:
        pytest.skip("needs 4 GiB of available memory (the 2.4 GB weight is read once)")
    folder = tmp_path_factory.mktemp("big")
    path = write_big_model(folder)
    data = folder / "big.onnx.data"
    if data.stat().st_blocks * 512 > 1 << 26:        # this filesystem stores holes: do not fill the disk
        data.unlink()
        pytest.skip("the filesystem has no sparse files")
    np.savez(folder / "x.npz", x=X)
    yield path
    for file in folder.iterdir():
        file.unlink()
    folder.rmdir()


def assert_exact(actual: "dict[str, np.ndarray]", expected: "dict[str, np.ndarray]") -> None:
    assert set(actual) == set(expected)
    for name, value in expected.items():
        got = np.asarray(actual[name])
        assert got.dtype == value.dtype and got.shape == value.shape and np.array_equal(got, value), name


@pytest.mark.bigmodel
def test_the_model_is_past_2_gb(big):
    assert os.path.getsize(big.parent / "big.onnx.data") == WEIGHT_ELEMENTS * 4 > 2**31
    assert os.path.getsize(big) < 4096


@pytest.mark.bigmodel
def test_compile_and_run_on_the_command_line(big, tmp_path, capsys):
    code, out, err = cli(["compile", big, "--json", tmp_path / "c.json"], capsys)
    assert code == 0, err
    placement = {p["onnx_nodes"][0]: p["status"] for p in json.loads((tmp_path / "c.json").read_text())["placement"]}
    assert placement["nonzero"] == placement["eyelike"] == "lowered"
    for backend in ("cpu", "ort"):
        code, out, err = cli(["run", big, "--backend", backend, "--inputs", big.parent / "x.npz",
                              "--save-outputs", tmp_path / f"{backend}.npz"], capsys)
        assert code == 0, err
        saved, _ = split_metadata(dict(np.load(tmp_path / f"{backend}.npz")))    # minus the feeds' fingerprint
        assert_exact(saved, expected_outputs(X))


@pytest.mark.bigmodel
@pytest.mark.parametrize("oracle", ["hybrid", "ort-cpu", "reference"])
def test_check_every_backend_and_oracle(big, tmp_path, capsys, oracle, monkeypatch):
    spy = SessionSpy(monkeypatch)
    argv = ["check", big, "--backends", "cpu,ort,ort-cpu", "--inputs", big.parent / "x.npz",
            "--json", tmp_path / "r.json", "--save-outputs", tmp_path / "o.npz"]
    code, out, err = cli(argv + ([] if oracle == "hybrid" else ["--oracle", oracle]), capsys)
    assert code == 0, err + out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["ok"] and [b["backend"] for b in report["backends"]] == ["cpu", "ort", "ort-cpu"]
    assert {o["status"] for b in report["backends"] for o in b["outputs"]} == {"match"}
    saved = dict(np.load(tmp_path / "o.npz"))
    expected = expected_outputs(X)
    assert_exact({n: saved[n] for n in expected}, expected)                  # the oracle's
    for backend in ("cpu", "ort", "ort-cpu"):
        assert_exact({n: saved[f"{backend}:{n}"] for n in expected}, expected)
    # No session was handed the weight: every proto onnxruntime read is small.
    assert spy.models and max(m.ByteSize() for m in spy.models) < 1 << 16


@pytest.mark.bigmodel
def test_python_api(big):
    compiled = compile_model(str(big))
    assert compiled.model.ByteSize() < 1 << 16            # the weight stayed in its file
    assert_exact(compiled.run({"x": X}), expected_outputs(X))
    assert_exact(compiled.run({"x": X}, backend="ort", providers=["CPUExecutionProvider"]), expected_outputs(X))


@pytest.mark.bigmodel
def test_optimize_writes_a_big_model_that_still_runs(big, tmp_path, capsys):
    out = tmp_path / "opt.onnx"
    code, text, err = cli(["optimize", big, "-o", out], capsys)
    assert code == 0, err
    assert "nothing to rewrite" in text and (tmp_path / "opt.onnx.data").stat().st_size == WEIGHT_ELEMENTS * 4
    raw = onnx.load(str(out), load_external_data=False)
    assert [e.key for e in raw.graph.initializer[0].external_data] == ["location", "offset", "length"]
    assert_exact(compile_model(str(out)).run({"x": X}), expected_outputs(X))


def test_a_short_external_data_file_is_named(tmp_path, capsys):
    path = write_big_model(tmp_path / "short", elements=1 << 20)
    os.truncate(path.parent / "big.onnx.data", 1000)
    code, out, err = cli(["compile", path], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "big.onnx.data" in err and "holds 1000 bytes" in err and "'W'" in err


def test_an_in_memory_proto_past_the_limit_is_refused_in_one_line(monkeypatch):
    from onnx_dml_lowering.compiler import frontend
    from onnx_dml_lowering.ir import DmlLowerError
    from tests.builders import single_node_model
    model = single_node_model("NonZero", onnx.TensorProto.FLOAT, [3, 4], onnx.TensorProto.INT64)
    monkeypatch.setattr(frontend, "PROTO_LIMIT", model.ByteSize() - 1)      # stands for 2 GB
    with pytest.raises(DmlLowerError, match="passes protobuf's 2 GB limit: save it with its weights as external"):
        compile_model(model)


@pytest.mark.bigmodel
@pytest.mark.parametrize("as_input", [False, True], ids=["matrix", "matrix also an input"])
def test_check_of_a_big_matrix_stays_near_one_copy_of_it(big, tmp_path, as_input):
    """The weight as a 2.4 GB matrix (which the band idioms examine, flattened by a Reshape before
    its Gather), and that matrix also a graph input (a default the oracle and the lowered run both
    feed): a check process peaks near one copy of it. Before: the band search's full-size
    temporaries and onnx's data propagation (one shape entry per element of the flattened weight)
    took over 24 GB, and comparing the two sides' feeds read the mapped file twice (2x)."""
    import subprocess
    import sys
    path = write_big_model(tmp_path / "m", matrix=True, as_input=as_input)
    saved = tmp_path / "o.npz"
    np.savez(tmp_path / "x.npz", x=X)
    argv = [sys.executable, "-m", "onnx_dml_lowering.compiler", "check", str(path), "--backends", "cpu,ort",
            "--inputs", str(tmp_path / "x.npz"), "--save-outputs", str(saved), "-q"]
    # Measured from a small fresh process: a child forked from this test process (which may hold
    # the other big model's pages) would count them in its peak before its exec.
    runner = ("import os, subprocess, sys\n"
              "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
              "_, status, usage = os.wait4(p.pid, 0)\n"
              "sys.stderr.write(p.stderr.read().decode(errors='replace'))\n"
              "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n")
    done = subprocess.run([sys.executable, "-c", runner, *argv], capture_output=True, text=True)
    code, peak_kib = map(int, done.stdout.split())
    assert code == 0, done.stderr
    outputs = dict(np.load(saved))
    expected = expected_outputs(X)
    for prefix in ("", "cpu:", "ort:"):
        assert_exact({n: outputs[prefix + n] for n in expected}, expected)
    assert peak_kib * 1024 < 1.5 * WEIGHT_ELEMENTS * 4, peak_kib
    (tmp_path / "m" / "big.onnx.data").unlink()
