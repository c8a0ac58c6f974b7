"""The one way tests run dml-lower in-process: main() on the arguments, with what it printed."""
from __future__ import annotations

from onnx_dml_lowering.compiler.cli import main


def cli(argv, capsys) -> "tuple[int, str, str]":
    """(exit code, stdout, stderr) of `dml-lower ARGV`, earlier captured output dropped. argparse's
    exits (a usage error, --help) raise SystemExit, as from main()."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cli_exits(argv, capsys) -> "tuple[int, str, str]":
    """cli(), with argparse's exits counted as exit codes too, as the console script's are."""
    try:
        return cli(argv, capsys)
    except SystemExit as exc:
        out, err = capsys.readouterr()
        return exc.code if isinstance(exc.code, int) else 2, out, err
