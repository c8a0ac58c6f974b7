"""onnxruntime execution providers: names, availability, and the session settings each needs."""
from __future__ import annotations

from onnx_dml_lowering.ir import DmlLowerError

# The newest IR version onnxruntime 1.2x/1.3x reads; models handed to it never need more.
MAX_IR_VERSION = 10

ALIASES = {"cpu": "CPUExecutionProvider", "dml": "DmlExecutionProvider",
           "directml": "DmlExecutionProvider", "cuda": "CUDAExecutionProvider"}


def resolve(providers: "list[str] | None") -> "list[str]":
    """Full provider names, each one installed here, or one line saying what is missing."""
    import onnxruntime as ort
    names = [ALIASES.get(p.strip().lower(), p.strip()) for p in (providers or ["cpu"]) if p.strip()]
    available = ort.get_available_providers()
    for name in names:
        if name not in available:
            if name == "DmlExecutionProvider":
                raise DmlLowerError(
                    "DmlExecutionProvider is not available: it needs Windows and the 'directml' extra "
                    "(pip install 'onnx-dml-lowering[directml]', which installs onnxruntime-directml); "
                    f"this onnxruntime offers {', '.join(available)}")
            raise DmlLowerError(f"execution provider {name} is not available here; "
                                f"this onnxruntime offers {', '.join(available)}")
    return names


def make_session(model_bytes: bytes, providers: "list[str]", device_id: int = 0):
    """An InferenceSession with the settings the providers require.

    DirectML requires memory patterns off and sequential execution, and takes a device id.
    """
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 4      # errors reach the user as our one line, not ORT's log
    provider_list: list = []
    for name in providers:
        if name == "DmlExecutionProvider":
            options.enable_mem_pattern = False
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            provider_list.append((name, {"device_id": str(device_id)}))
        else:
            provider_list.append(name)
    return ort.InferenceSession(model_bytes, options, providers=provider_list)
