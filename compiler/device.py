"""capabilities --device: what the DirectML device here measures, asked of DirectML.dll itself
through the DirectML host (runtime/directml), beside what the setup recorded (setup.json)."""
from __future__ import annotations

from typing import Any

from onnx_dml_lowering.runtime.directml.dml_host import DmlHost
from onnx_dml_lowering.runtime.directml.home import find_home

KEYS = ("directml_version", "onnxruntime_version", "feature_level", "data_types", "d3d12", "self_test")


def device_facts() -> "dict[str, Any]":
    """The JSON of capabilities --device: KEYS, then `vulkan` (the Vulkan device under Wine's D3D12,
    as vulkaninfo named it at setup; {} on Windows or where it could not tell)."""
    home = find_home()
    with DmlHost(home) as host:
        caps = host.caps()
    facts = {key: caps.get(key) for key in KEYS}
    facts["onnxruntime_version"] = str(home.info.get("onnxruntime_directml", "unknown"))
    facts["vulkan"] = dict(home.info.get("vulkan") or {})
    return facts


def device_text(facts: "dict[str, Any]") -> str:
    types = facts["data_types"]
    supported = [name for name, ok in types.items() if ok]
    missing = [name for name, ok in types.items() if not ok]
    vulkan = facts.get("vulkan") or {}
    rows = [("DirectML.dll", facts["directml_version"]), ("onnxruntime.dll", facts["onnxruntime_version"]),
            ("feature level", facts["feature_level"]), ("D3D12 adapter", facts["d3d12"])]
    if vulkan:
        rows.append(("Vulkan device", f"{vulkan.get('deviceName', '?')}, {vulkan.get('driverInfo', '?')}"))
    rows += [("data types", " ".join(supported) or "none"),
             ("not supported", " ".join(missing) or "none"), ("self-test", facts["self_test"])]
    lines = ["DirectML device (asked of DirectML.dll through the DirectML host):"]
    lines += [f"  {label:<16} {value}" for label, value in rows]
    return "\n".join(lines) + "\n"
