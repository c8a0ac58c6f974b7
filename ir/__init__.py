"""DirectML-level IR: data types, tensor descriptors, feature levels, operators, the graph.

Imports nothing from the other packages of this project, and nothing from onnx.
"""
from .dtypes import DataType
from .errors import DmlLowerError
from .feature_levels import ALL_LEVELS, DEFAULT_LEVEL, FeatureLevel, parse_level
from .graph import Buffer, Graph, View
from .printer import format_graph
from .serialize import graph_from_dict, graph_to_dict
from .operators import (ClearBuffer, ControlFlow, DiagonalMatrix, DiagonalMatrix1, Download, ElementWiseBitAnd,
                        ElementWiseBitOr,
                        ElementWiseIdentity, EmptyTensor, LowerAtRunTime, NonZeroCoordinates, OnnxRegion,
                        ReadCount, Step, Upload)
from .support import OPERATORS
from .tensor_desc import TensorDesc, min_size_bytes
from .verify import verify as verify_graph

__all__ = [
    "DataType", "DmlLowerError", "ALL_LEVELS", "DEFAULT_LEVEL", "FeatureLevel", "parse_level",
    "Buffer", "Graph", "View", "ClearBuffer", "ControlFlow", "DiagonalMatrix", "DiagonalMatrix1", "Download",
    "ElementWiseIdentity", "EmptyTensor", "LowerAtRunTime", "NonZeroCoordinates", "OnnxRegion", "ReadCount", "Step",
    "Upload", "ElementWiseBitAnd", "ElementWiseBitOr", "OPERATORS", "TensorDesc", "min_size_bytes",
    "verify_graph", "graph_to_dict", "graph_from_dict", "format_graph",
]
