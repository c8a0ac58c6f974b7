"""The DirectML host on the real DirectML.dll: its self-test, its device facts, its answers to
what the device refuses and to malformed requests (never a wrong value)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from onnx_dml_lowering.ir import DataType, TensorDesc
from onnx_dml_lowering.runtime.directml.dml_host import (E_INVALIDARG, DirectMLCallFailed, DirectMLRefused,
                                                         HostRefused)

pytestmark = pytest.mark.directml
T = DataType


def test_the_host_passed_its_known_answer_self_test(dml_host):
    assert dml_host.hello.startswith("ok DirectML ")
    assert dml_host.caps()["self_test"] == "passed"


def test_caps_names_the_device(dml_host):
    caps = dml_host.caps()
    assert set(caps) == {"directml_version", "feature_level", "data_types", "d3d12", "self_test"}
    assert caps["directml_version"].count(".") == 3 and caps["feature_level"].count("_") == 1
    assert set(caps["data_types"]) == {t.name for t in T if t != T.UNKNOWN}
    assert caps["data_types"]["FLOAT32"] is True


def test_a_descriptor_the_device_refuses_is_refused_with_its_hresult_and_stage(dml_host):
    x = TensorDesc(T.INT64, (2, 3))
    count, coords = TensorDesc(T.UINT32, (1,)), TensorDesc(T.UINT32, (6, 2))
    with pytest.raises(DirectMLRefused) as caught:
        dml_host.execute("NONZERO_COORDINATES", [x, count, coords], b"", [bytes(48), bytes(4), bytes(48)])
    error = caught.value
    assert error.hresult == E_INVALIDARG and error.stage == "CreateOperator"
    assert str(error) == ("DirectML NONZERO_COORDINATES INT64{2,3}, UINT32{1}, UINT32{6,2}: CreateOperator failed "
                          "with HRESULT 0x80070057 (E_INVALIDARG)")
    # the host goes on: the next operator runs
    out = TensorDesc(T.FLOAT32, (2, 2))
    result = dml_host.execute("DIAGONAL_MATRIX", [out], struct.pack("<if", 0, 1.0), [bytes(16)])
    assert np.frombuffer(result.outputs[0], np.float32).tolist() == [1, 0, 0, 1]


def test_a_malformed_request_is_refused_in_one_line(dml_host):
    # a buffer shorter than its TotalTensorSizeInBytes never reaches the host
    with pytest.raises(Exception, match=r"a buffer of 8 bytes for 16"):
        dml_host.execute("DIAGONAL_MATRIX", [TensorDesc(T.FLOAT32, (2, 2))], struct.pack("<if", 0, 1.0), [bytes(8)])
    # fields of the wrong length reach it and come back refused, naming why
    with pytest.raises(HostRefused, match="wrong operator field bytes"):
        dml_host.execute("DIAGONAL_MATRIX", [TensorDesc(T.FLOAT32, (2, 2))], b"\0" * 4, [bytes(16)])
    assert not isinstance(HostRefused("x"), DirectMLCallFailed)


def test_compiled_operators_are_cached_by_descriptor(dml_host):
    out = TensorDesc(T.UINT16, (3, 7))
    fields = struct.pack("<if", -2, 3.0)
    first = dml_host.execute("DIAGONAL_MATRIX", [out], fields, [bytes(out.total_bytes)])
    second = dml_host.execute("DIAGONAL_MATRIX", [out], fields, [bytes(out.total_bytes)])
    other = dml_host.execute("DIAGONAL_MATRIX", [out], struct.pack("<if", -1, 3.0), [bytes(out.total_bytes)])
    assert second.cached and not other.cached and first.outputs == second.outputs != other.outputs
