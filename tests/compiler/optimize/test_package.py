"""The optimize package's public API (what README and the CLI import) loads from the package, and
onnx-ir, slow to import, only when GenerateBands is asked for: `dml-lower optimize` and `reduce`
never pay for it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from onnx_dml_lowering.compiler import optimize

PROBE = """
import sys
import onnx_dml_lowering.compiler.optimize as optimize
before = "onnx_ir" in sys.modules
from onnx_dml_lowering.compiler.optimize import bit_identical, external_initializers, optimize_model, save_model
from onnx_dml_lowering.compiler.optimize import GenerateBands
print(before, "onnx_ir" in sys.modules, GenerateBands.__module__)
"""


def test_generate_bands_loads_onnx_ir_on_first_use() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "onnx_dml_lowering.compiler.optimize.passes"]


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = optimize.nothing
