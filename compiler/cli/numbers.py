"""The one reader of a whole-number option (--seed, --iterations, --jobs, --threads, --min-bytes,
--port, --seeds): ASCII digits with an optional '-', nothing else. argparse's `type=int` is
Python's int(), which also takes ' 3', '1_0' and '٣' (Arabic-Indic three), none of which a
person types as a count; --dim, --sweep and --memory-limit read theirs the same way."""
from __future__ import annotations

import argparse

from onnx_dml_lowering.ir.digits import ascii_digits
from onnx_dml_lowering.ir.display import display


def whole_number(text: str) -> int:
    """An argparse `type`: the value as an int, or argparse's one line naming the option (a
    negative number is read, so each option's own check can say why it must not be)."""
    digits = text[1:] if text.startswith("-") else text
    if not ascii_digits(digits):
        raise argparse.ArgumentTypeError(f"'{display(text)}' is not a whole number (ASCII digits, like 3)")
    return int(text)
