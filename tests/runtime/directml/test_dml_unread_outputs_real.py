"""On the real onnxruntime.dll 1.24.4 DirectML EP (check --backends ort-dml): an empty NonZero
output beside Relu's leaves Relu's output never read back (ExecutionProviderImpl::CopyTensors ends
the batch at the empty pair), and check names that deviation; with a coordinate found both outputs
are read back and MATCH. The model is the conformance suite's case (compiler/conformance/cases.py)."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from onnx_dml_lowering.compiler.conformance.cases import empty_output_case
from tests.cli_runner import cli

pytestmark = pytest.mark.directml


def test_an_empty_nonzero_leaves_relu_unread_and_check_names_it(capsys, tmp_path):
    case = empty_output_case(2)
    onnx.save(case.model, str(tmp_path / "m.onnx"))
    statuses = []
    for index, feeds in enumerate(case.data_sets):         # set 0: b all false; set 1: one true element
        np.savez(tmp_path / f"in{index}.npz", **feeds)
        code, out, err = cli(["check", tmp_path / "m.onnx", "--backends", "ort-dml", "--inputs",
                              tmp_path / f"in{index}.npz", "--json", tmp_path / f"r{index}.json"], capsys)
        assert code == 0, out + err
        report = json.loads((tmp_path / f"r{index}.json").read_text())
        (dml,) = [b for b in report["backends"] if b["backend"] == "ort-dml"]
        assert dml["node_providers"] == {"relu": "DmlExecutionProvider", "nonzero": "DmlExecutionProvider"}
        statuses.append({o["output"]: (o["status"], o["detail"]) for o in dml["outputs"]})
    y, nz = statuses[0]["y"], statuses[0]["nz"]
    assert y[0] == "deviation" and nz[0] == "match"
    assert y[1].startswith("DML EP deviation: the empty output 'nz' (int64 [2x0]) ended onnxruntime's batched "
                           "read-back of the DML EP's outputs (ExecutionProviderImpl::CopyTensors), so 'y' holds")
    assert [status for status, _ in statuses[1].values()] == ["match", "match"]
