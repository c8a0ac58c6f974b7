"""--data-loader-script's FILE.py[:FUNC], read apart from compiler.data_loader (which imports
numpy and onnx), so the command line can name the script it reads before importing them."""
from __future__ import annotations

import re
from pathlib import Path

DEFAULT_FUNCTION = "load_data"


def parse_spec(spec: str) -> "tuple[Path, str]":
    """FILE.py[:FUNC] -> (path, function); a colon not followed by an identifier belongs to the
    path (C:\\data\\feeds.py)."""
    path, sep, function = spec.rpartition(":")
    if sep and path and re.fullmatch(r"[A-Za-z_]\w*", function):
        return Path(path), function
    return Path(spec), DEFAULT_FUNCTION
