"""DirectML-level IR: data types, tensor descriptors, feature levels, operators, the graph.

Imports nothing from the other packages of this project, and nothing from onnx. Names load on
first use (PEP 562), so `dml-lower --version` or an error path does not pay for numpy.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import DmlLowerError

_FROM = {
    "dtypes": ("DataType",),
    "feature_levels": ("ALL_LEVELS", "DEFAULT_LEVEL", "FeatureLevel", "parse_level"),
    "graph": ("Buffer", "Graph", "View"),
    "printer": ("format_graph",),
    "serialize": ("graph_from_dict", "graph_to_dict"),
    "operators": ("ClearBuffer", "ControlFlow", "DiagonalMatrix", "DiagonalMatrix1", "Download", "ElementWiseBitAnd",
                  "ElementWiseBitOr", "ElementWiseIdentity", "EmptyTensor", "LowerAtRunTime", "NonZeroCoordinates",
                  "OnnxRegion", "ReadCount", "Step", "Upload"),
    "support": ("OPERATORS",),
    "tensor_desc": ("TensorDesc", "min_size_bytes"),
    "verify": (("verify_graph", "verify"),),
}
_WHERE = {(n if isinstance(n, str) else n[0]): (module, n if isinstance(n, str) else n[1])
          for module, names in _FROM.items() for n in names}

# Written out (not derived from _WHERE) so static tools see the public names; tests/ir/test_exports.py
# keeps the two equal.
__all__ = [
    "DmlLowerError", "DataType", "ALL_LEVELS", "DEFAULT_LEVEL", "FeatureLevel", "parse_level", "Buffer", "Graph",
    "View", "format_graph", "graph_from_dict", "graph_to_dict", "ClearBuffer", "ControlFlow", "DiagonalMatrix",
    "DiagonalMatrix1", "Download", "ElementWiseBitAnd", "ElementWiseBitOr", "ElementWiseIdentity", "EmptyTensor",
    "LowerAtRunTime", "NonZeroCoordinates", "OnnxRegion", "ReadCount", "Step", "Upload", "OPERATORS", "TensorDesc",
    "min_size_bytes", "verify_graph",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _WHERE[name]
    value = getattr(import_module(f".{module}", __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> "list[str]":
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .dtypes import DataType
    from .feature_levels import ALL_LEVELS, DEFAULT_LEVEL, FeatureLevel, parse_level
    from .graph import Buffer, Graph, View
    from .operators import (ClearBuffer, ControlFlow, DiagonalMatrix, DiagonalMatrix1, Download, ElementWiseBitAnd,
                            ElementWiseBitOr, ElementWiseIdentity, EmptyTensor, LowerAtRunTime, NonZeroCoordinates,
                            OnnxRegion, ReadCount, Step, Upload)
    from .printer import format_graph
    from .serialize import graph_from_dict, graph_to_dict
    from .support import OPERATORS
    from .tensor_desc import TensorDesc, min_size_bytes
    from .verify import verify as verify_graph
