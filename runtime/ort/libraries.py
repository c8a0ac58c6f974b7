"""Plugin execution provider libraries (onnxruntime >= 1.22): registered once per process by name,
and the devices their providers offer."""
from __future__ import annotations

from onnx_dml_lowering.ir import DmlLowerError

# Plugin provider libraries registered in this process: registration name -> path. onnxruntime
# refuses a second registration under one name, and registration is process-wide.
_REGISTERED_LIBRARIES: "dict[str, str]" = {}


def ep_devices() -> list:
    """The OrtEpDevices onnxruntime lists (none before 1.22)."""
    import onnxruntime as ort
    get = getattr(ort, "get_ep_devices", None)         # onnxruntime >= 1.22
    return list(get()) if get is not None else []


def register_ep_libraries(specs: "list[str] | None") -> "dict[str, str]":
    """Register plugin provider libraries given as NAME=PATH (onnxruntime >= 1.22)."""
    import os

    import onnxruntime as ort

    from onnx_dml_lowering.ir.errors import first_line
    from onnx_dml_lowering.runtime.input_files import regular_file
    registered = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise DmlLowerError(f"--ep-library {spec!r} is not NAME=PATH")
        if not hasattr(ort, "register_execution_provider_library"):
            raise DmlLowerError(f"--ep-library {name}: onnxruntime {ort.__version__} has no plugin "
                                "providers (they need onnxruntime >= 1.22)")
        regular_file(path, f"--ep-library {name}: library file {path!r}", "a shared library")
        path = os.path.abspath(path)
        if _REGISTERED_LIBRARIES.get(name) not in (None, path):
            raise DmlLowerError(f"--ep-library {name}: already registered from {_REGISTERED_LIBRARIES[name]!r}")
        if name not in _REGISTERED_LIBRARIES:
            try:
                ort.register_execution_provider_library(name, path)
            except Exception as exc:
                raise DmlLowerError(f"--ep-library {name}: onnxruntime cannot load {path!r}: "
                                    f"{first_line(exc)}") from None
            _REGISTERED_LIBRARIES[name] = path
        registered[name] = path
    return registered
