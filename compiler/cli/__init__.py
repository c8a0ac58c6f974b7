"""The dml-lower command line: one module per command, the option groups they share, and the
program (program.py) that builds the parser and runs a command. `onnx_dml_lowering.compiler.cli:entry`
is the console script."""
from .program import build_parser, entry, main

__all__ = ["build_parser", "entry", "main"]
