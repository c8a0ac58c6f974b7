"""Whole numbers typed by a user or an environment variable: ASCII digits only."""
from __future__ import annotations


def ascii_digits(text: str) -> bool:
    """A non-empty run of ASCII digits: str.isdigit also takes '²', which int() refuses, and int()
    takes ' 3', '3_0' and '-3', which a size, port or descriptor is not."""
    return text.isascii() and text.isdigit()
