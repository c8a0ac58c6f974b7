"""onnxruntime execution providers: their names, which this onnxruntime offers, and the resolution
of a provider the user names to a ProviderSpec (a classic provider, a plugin library's device, or
the DML EP in onnxruntime.dll through ort_host off Windows)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.ort.libraries import ep_devices, register_ep_libraries

DML = "DmlExecutionProvider"

ALIASES = {"cpu": "CPUExecutionProvider", "dml": "DmlExecutionProvider",
           "directml": "DmlExecutionProvider", "cuda": "CUDAExecutionProvider",
           "openvino": "OpenVINOExecutionProvider"}

def provider_name(text: str) -> str:
    """The full provider name for cpu / dml / cuda / openvino / a full name (backend names such as
    ort-cpu are decoded by runtime.backends alone)."""
    text = text.strip()
    return ALIASES.get(text.lower(), text)


# Short names other tools give providers that are no prefix of onnxruntime's own (Polygraphy's trt).
_SHORT_NAMES = {"trt": "tensorrt"}


def backend_hint(spelt: str) -> str:
    """For a provider spelt in a backend ort-<provider> as Polygraphy does (ort-cuda, ort-trt,
    ort-openvino, ort-coreml; backend_names passes what follows ort-), ' (... is
    ort:<ProviderName>)' naming the provider onnxruntime calls so, from its own list of every
    provider it knows; else ''."""
    import onnxruntime as ort
    key = "".join(c for c in spelt.lower() if c.isalnum())
    key = _SHORT_NAMES.get(key, key)
    names = {name: name.lower().removesuffix("executionprovider") for name in ort.get_all_providers()}
    exact = [name for name, short in names.items() if short == key]
    found = exact or [name for name, short in names.items() if key and short.startswith(key)]
    return f" (onnxruntime's {spelt} provider is ort:{found[0]})" if len(found) == 1 else ""


def _offered() -> str:
    import onnxruntime as ort
    offered = list(ort.get_available_providers())
    for device in ep_devices():
        if device.ep_name not in offered:
            offered.append(device.ep_name)
    return f"this onnxruntime {ort.__version__} offers {', '.join(offered)}"


def unavailable(name: str) -> DmlLowerError:
    """The one line for a provider this onnxruntime cannot run."""
    import onnxruntime as ort
    if name == DML:
        return DmlLowerError(
            "DmlExecutionProvider is not available: it needs Windows and the 'directml' extra "
            "(pip install 'onnx-dml-lowering[directml]', which installs onnxruntime-directml); " + _offered())
    if name in ort.get_all_providers():
        return DmlLowerError(f"execution provider {name} is not available in this onnxruntime build "
                             f"(its own package or --ep-library NAME=PATH provides it); " + _offered())
    return DmlLowerError(f"execution provider {name!r} is unknown; " + _offered())


def resolve(providers: "list[str] | None") -> "list[str]":
    """Full provider names, each one installed here, or one line saying what is missing."""
    import onnxruntime as ort
    names = [provider_name(p) for p in (providers or ["cpu"]) if p.strip()]
    available = ort.get_available_providers()
    for name in names:
        if name not in available:
            raise unavailable(name) if name != DML else _dml_in_process()
    return names


def _dml_in_process() -> DmlLowerError:
    """DML asked of this process's onnxruntime (run --providers dml): off Windows, also the backends
    that reach the real DirectML here."""
    from onnx_dml_lowering.runtime.directml.home import routes_off_windows
    routes = routes_off_windows()
    return DmlLowerError(f"{unavailable(DML)}; {routes}") if routes else unavailable(DML)


def parse_provider_options(pairs: "list[str] | None") -> "dict[str, str]":
    """NAME=VALUE pairs (e.g. OpenVINO's device_type=CPU) as onnxruntime's provider options."""
    options: "dict[str, str]" = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DmlLowerError(f"provider option {pair!r} is not NAME=VALUE")
        options[key.strip()] = value.strip()
    return options


@dataclass
class ProviderSpec:
    """One execution provider to run a whole model on: classic (by name) or a plugin's device."""
    name: str
    options: "dict[str, str]" = field(default_factory=dict)
    device: Any = None                 # an OrtEpDevice for plugin providers, else None
    library: str = ""                  # the --ep-library registration name it came from
    host: Any = None                   # an OrtHost: the DML EP in onnxruntime.dll, off Windows

    @property
    def description(self) -> str:
        where = ""
        if self.device is not None:
            hw = self.device.device
            where = f" on {hw.type.name if hasattr(hw.type, 'name') else hw.type} device of {hw.vendor}"
            where += f" (library {self.library})" if self.library else ""
        if self.host is not None:
            from onnx_dml_lowering.runtime.directml.ort_dml import where as host_where
            where = f" ({host_where(self.host)})"
        opts = f" with {', '.join(f'{k}={v}' for k, v in self.options.items())}" if self.options else ""
        return f"{self.name}{where}{opts}"


def resolve_provider(spec: str, options: "list[str] | dict | None" = None,
                     ep_libraries: "list[str] | None" = None) -> ProviderSpec:
    """A provider name (+ provider options, + plugin libraries) -> a ProviderSpec.

    A provider built into this onnxruntime is used by name. One that only a library registered
    with --ep-library provides runs on that library's first device (get_ep_devices' order)."""
    import onnxruntime as ort
    libraries = register_ep_libraries(ep_libraries)
    name = provider_name(spec)
    opts = dict(options) if isinstance(options, dict) else parse_provider_options(options)
    if name in ort.get_available_providers() and not libraries:
        return ProviderSpec(name, opts)
    devices = [d for d in ep_devices() if d.ep_name == name]
    if devices:
        library = next((lib for lib in libraries), "")
        return ProviderSpec(name, opts, devices[0], library if libraries else "")
    if name in ort.get_available_providers():
        return ProviderSpec(name, opts)
    if libraries:
        listed = ", ".join(f"{d.ep_name} ({d.device.type.name})" for d in ep_devices()) or "none"
        raise DmlLowerError(f"execution provider library {', '.join(libraries)} offers no device for "
                            f"{name} on this machine; devices onnxruntime lists: {listed}")
    if name == DML:
        return _dml_host_spec(opts)
    raise unavailable(name)


def _dml_host_spec(options: "dict[str, str]") -> ProviderSpec:
    """The DML EP in onnxruntime.dll through ort_host (off Windows under Wine), where `make directml`
    set it up; else one line saying both ways to get it."""
    from onnx_dml_lowering.runtime.directml.home import DirectMLUnavailable, default_home
    from onnx_dml_lowering.runtime.directml.ort_dml import shared_host
    try:
        host = shared_host()
    except DirectMLUnavailable as exc:
        # no setup at all: the usual case, said without a path; a partial one: what is missing
        why = "run `make directml`" if not default_home().exists() else str(exc)
        raise DmlLowerError(f"{unavailable(DML)}; off Windows, ort-dml runs onnxruntime.dll's "
                            f"DirectML EP under Wine: {why}") from None
    unknown = {k: v for k, v in options.items() if (k, v) != ("device_id", "0")}
    if unknown:
        raise DmlLowerError(f"provider option {next(iter(unknown))}: ort_host runs the DirectML EP on device 0 with "
                            "no provider options")
    return ProviderSpec(DML, {}, host=host)
