"""The DirectML host's own guards, on the real DirectML.dll: a start-up self-test that does not get
its known answer refuses every operator (driven by the host's test hook DML_LOWER_TEST_CANARY_VALUE,
which makes it expect a wrong value), and a descriptor the device refuses at CreateOperator is one
UNSUPPORTED line naming the operator and its descriptors, never a value."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.runtime.check import BackendOptions, Tolerances, check
from onnx_dml_lowering.runtime.directml import dml_host as dml_host_module
from onnx_dml_lowering.runtime.directml.dml_host import DirectMLRefused, DmlHost, HostRefused
from onnx_dml_lowering.runtime.directml.home import find_home
from onnx_dml_lowering.runtime.directml.kernels import DirectMLKernels
from onnx_dml_lowering.runtime.feeds import random_feeds

pytestmark = pytest.mark.directml
HOOK = "DML_LOWER_TEST_CANARY_VALUE"
WRONG = "failed: DIAGONAL_MATRIX canary gave 2.5 at element 1, not 1"


def test_a_wrong_canary_answer_makes_the_host_refuse_everything(monkeypatch):
    monkeypatch.setenv(HOOK, "1")
    with DmlHost(find_home()) as host:
        assert host.hello.startswith(WRONG), host.hello      # an "ok" here: dml_host.exe predates the hook
        assert host.caps()["self_test"] == host.hello        # the facts are still said
        with pytest.raises(HostRefused, match="refuses to run operators: its self-test failed: DIAGONAL_MATRIX"):
            DirectMLKernels(host).diagonal_matrix(np.zeros((2, 2), np.float32), 0, 1.0)


def test_a_wrong_canary_answer_is_the_dml_backends_one_error_line_and_nothing_runs(monkeypatch):
    monkeypatch.setenv(HOOK, "1")
    monkeypatch.setattr(dml_host_module, "_local", threading.local())   # a host of this test's own
    sent = []
    real_execute = DmlHost.execute

    def counting(self, *args, **kwargs):
        sent.append(args[0])
        return real_execute(self, *args, **kwargs)
    monkeypatch.setattr(DmlHost, "execute", counting)
    path = example_paths()[0]
    compiled = compile_model(str(path))
    report = check(compiled, random_feeds(compiled.inputs, seed=7), ["cpu", "dml"], Tolerances(), BackendOptions())[1]
    cpu, dml = report.backends
    assert cpu.status == "ok" and dml.status == "error" and not dml.values
    assert "self-test failed: DIAGONAL_MATRIX canary gave 2.5 at element 1, not 1" in dml.error
    assert "\n" not in dml.error
    host = dml_host_module.shared_host()
    assert len(sent) == 1 and host.process.requests == 0    # the first operator was refused before it was sent
    host.close()


def test_int64_nonzero_coordinates_is_refused_in_one_unsupported_line(dml_host):
    x = np.array([[0, 2**40, 3], [0, 0, -1]], np.int64)
    count, coords = np.zeros(1, np.uint32), np.zeros((6, 2), np.uint32)
    with pytest.raises(DirectMLRefused) as caught:
        DirectMLKernels(dml_host).nonzero_coordinates(x, count, coords, strict=False)
    assert str(caught.value) == ("DirectML NONZERO_COORDINATES INT64{2,3} total=48, UINT32{1} total=4, UINT32{6,2} "
                                 "total=48: CreateOperator failed with HRESULT 0x80070057 (E_INVALIDARG)")
    assert count.tolist() == [0] and not coords.any()       # nothing written back
