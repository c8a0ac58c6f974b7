"""capabilities prints the same tables validation enforces; docs/capabilities.md is current."""
from pathlib import Path

from onnx_dml_lowering.compiler.capabilities import capabilities_text
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.ir import parse_level
from onnx_dml_lowering.ir.support import OPERATORS

DOC = Path(__file__).parent.parent.parent / "docs" / "capabilities.md"


def test_generated_copy_is_current():
    assert DOC.read_text() == capabilities_text(markdown=True)


def test_every_operator_and_row_is_listed():
    text = capabilities_text()
    for op in OPERATORS.values():
        assert f"{op.name} (introduced in {op.introduced})" in text
        for row in op.rows:
            for tensor, support in row.tensors.items():
                assert f"{tensor:24s} {support.describe()}" in text


def test_one_level(capsys):
    assert main(["capabilities", "--feature-level", "2_1"]) == 0
    out = capsys.readouterr().out
    assert "NONZERO_COORDINATES (introduced in 3_0)\n  not available at feature level 2_1" in out
    assert "OutputTensor             4 dims" in out
    row = OPERATORS["DIAGONAL_MATRIX"].row(parse_level("2_1"))
    assert row.tensors["OutputTensor"].describe() in out


def test_unknown_level_is_exit_2(capsys):
    assert main(["capabilities", "--feature-level", "9_9"]) == 2
    assert "unknown feature level" in capsys.readouterr().err
