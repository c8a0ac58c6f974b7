"""The driver and front door: load + check + shape inference, lowering, partition, the CLI."""
from onnx_dml_lowering.ir import DmlLowerError

from .compiled import CompiledModel, compile_model

__all__ = ["CompiledModel", "compile_model", "DmlLowerError"]
