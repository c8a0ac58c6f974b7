"""The one way tests run dml-lower in-process: main() on the arguments, with what it printed."""
from __future__ import annotations

from onnx_dml_lowering.compiler.cli import main


def cli(argv, capsys) -> "tuple[int, str, str]":
    """(exit code, stdout, stderr) of `dml-lower ARGV`, earlier captured output dropped."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err
