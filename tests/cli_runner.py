"""The one way tests run dml-lower in-process: main() on the arguments, with what it printed."""
from __future__ import annotations

from onnx_dml_lowering.compiler.cli import main


def cli(argv, capsys) -> "tuple[int, str, str]":
    """(exit code, stdout, stderr) of `dml-lower ARGV`, earlier captured output dropped; argparse's
    exits (a usage error, --help) count as exit codes, as they do for the console script."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return code, out, err
