"""An oracle's name (--oracle, the Python API's oracle=): its kind, or a golden file, and the one
reader of that text. Kept apart from runtime.oracle, which imports numpy, onnx and onnxruntime,
so the command line can tell a golden file it reads (compiler/cli/reads.py) before any of them
is imported (the DirectML host starts first, runtime.directml.dml_host.start_early)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from onnx_dml_lowering.ir import DmlLowerError


class OracleKind(enum.Enum):
    HYBRID = "hybrid"
    REFERENCE = "reference"
    ORT_CPU = "ort-cpu"
    GOLDEN = "golden"        # outputs saved elsewhere (a FILE.npz): never spelt so by the user


ORACLE_KINDS = tuple(k.value for k in OracleKind if k is not OracleKind.GOLDEN)


@dataclass(frozen=True)
class OracleName:
    """--oracle parsed (parse_oracle): a kind, and a golden oracle's file."""
    kind: OracleKind
    path: str = ""

    @property
    def text(self) -> str:
        return self.path if self.kind is OracleKind.GOLDEN else self.kind.value

    def __str__(self) -> str:
        return self.text


def parse_oracle(text: "str | OracleName") -> OracleName:
    """The one reader of an oracle's name (--oracle, the Python API's oracle=)."""
    if isinstance(text, OracleName):
        return text
    kind = next((k for k in OracleKind if k.value == text and k is not OracleKind.GOLDEN), None)
    if kind is not None:
        return OracleName(kind)
    if text.endswith(".npz"):
        return OracleName(OracleKind.GOLDEN, text)
    raise DmlLowerError(f"unknown oracle {text!r}; choose from {', '.join(ORACLE_KINDS)} "
                        "or a golden-outputs FILE.npz")
