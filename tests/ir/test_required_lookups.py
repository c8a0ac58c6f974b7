"""The raising forms of the IR's optional lookups (what a rule calls once its check has passed):
the same answer where the optional form has one, one DmlLowerError line where it has None."""
from __future__ import annotations

import pytest

from onnx_dml_lowering.ir import ALL_LEVELS, DmlLowerError
from onnx_dml_lowering.ir.dtypes import dml_type, from_onnx
from onnx_dml_lowering.ir.support import OPERATORS


@pytest.mark.parametrize("op", list(OPERATORS.values()), ids=lambda op: op.name)
@pytest.mark.parametrize("level", ALL_LEVELS, ids=str)
def test_at_is_row_where_the_operator_exists(op, level):
    row = op.row(level)
    if row is not None:
        assert op.at(level) is row
    else:
        with pytest.raises(DmlLowerError, match=rf"^{op.name} is not available at feature level {level} "
                                                rf"\(introduced in {op.introduced}\)$"):
            op.at(level)


@pytest.mark.parametrize("onnx_type", range(0, 27))
def test_dml_type_is_from_onnx_or_one_line(onnx_type):
    if from_onnx(onnx_type) is not None:
        assert dml_type(onnx_type) is from_onnx(onnx_type)
    else:
        with pytest.raises(DmlLowerError, match="has no DirectML equivalent$"):
            dml_type(onnx_type)
