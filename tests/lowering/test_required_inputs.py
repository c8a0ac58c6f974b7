"""NodeInfo.input and dims_at: the required forms of an optional input and of dims_for."""
from __future__ import annotations

import pytest

from onnx_dml_lowering.ir import ALL_LEVELS, DmlLowerError
from onnx_dml_lowering.ir.support import OPERATORS
from onnx_dml_lowering.lowering.common import dims_at, dims_for
from onnx_dml_lowering.lowering.node import NodeInfo, TensorInfo

X, K = TensorInfo("x", 1, (2, 3)), TensorInfo("k", 7, ())


@pytest.mark.parametrize("inputs, index, expected", [
    ((X, K), 0, X), ((X, K), 1, K), ((X, K), -1, K), ((X, None), 0, X),
    ((X, None), 1, None), ((X,), 1, None), ((), 0, None), ((X,), -2, None),
])
def test_input_is_the_present_input_or_one_line(inputs, index, expected):
    node = NodeInfo("tri", "Trilu", 14, inputs, (TensorInfo("y", 1, (2, 3)),))
    if expected is not None:
        assert node.input(index) is expected
    else:
        with pytest.raises(DmlLowerError, match=rf"^node 'tri' \(Trilu\): input {index} is missing$"):
            node.input(index)


@pytest.mark.parametrize("op", list(OPERATORS.values()), ids=lambda op: op.name)
@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
@pytest.mark.parametrize("rank", [0, 1, 2, 4, 5, 8, 9])
def test_dims_at_is_dims_for_or_one_line(op, level, rank):
    row = op.row(level)
    tensor = next(iter(row.tensors)) if row is not None else "OutputTensor"
    dims = dims_for(op, level, tensor, rank)
    if dims is not None:
        assert dims_at(op, level, tensor, rank) == dims
    else:
        with pytest.raises(DmlLowerError, match=f"^rank {rank} does not fit {op.name}'s {tensor} at feature level"):
            dims_at(op, level, tensor, rank)
