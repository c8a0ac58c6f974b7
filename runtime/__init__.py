"""Execution of compiled models: the CPU emulator, ONNX regions, the oracle and comparisons."""
