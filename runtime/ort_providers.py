"""onnxruntime execution providers: names, availability, the session settings each needs, plugin
provider libraries, and which provider ran each node (onnxruntime's graph assignment info)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.printer import name_list

from .ort_messages import ProviderLoadError, parse_provider_failure, provider_message

if TYPE_CHECKING:
    import numpy as np
    import onnx

# The newest IR version onnxruntime 1.2x/1.3x reads; models handed to it never need more.
MAX_IR_VERSION = 10


def ort_ir_version(ir_version: int) -> int:
    """The IR version a model is handed to onnxruntime with: at most what it reads, and at least 4,
    since below 4 onnxruntime treats an initializer that is also a graph input as a constant where
    ONNX makes it a default that a feed overrides."""
    return max(4, min(ir_version, MAX_IR_VERSION))

ALIASES = {"cpu": "CPUExecutionProvider", "dml": "DmlExecutionProvider",
           "directml": "DmlExecutionProvider", "cuda": "CUDAExecutionProvider",
           "openvino": "OpenVINOExecutionProvider"}

FALLBACK_OPTION = "session.disable_cpu_ep_fallback"
RECORD_ASSIGNMENT_OPTION = "session.record_ep_graph_assignment_info"

# Plugin provider libraries registered in this process: registration name -> path. onnxruntime
# refuses a second registration under one name, and registration is process-wide.
_REGISTERED_LIBRARIES: "dict[str, str]" = {}


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
    for device in _ep_devices():
        if device.ep_name not in offered:
            offered.append(device.ep_name)
    return f"this onnxruntime {ort.__version__} offers {', '.join(offered)}"


def _ep_devices() -> list:
    import onnxruntime as ort
    get = getattr(ort, "get_ep_devices", None)         # onnxruntime >= 1.22
    return list(get()) if get is not None else []


def unavailable(name: str) -> DmlLowerError:
    """The one line for a provider this onnxruntime cannot run."""
    import onnxruntime as ort
    if name == "DmlExecutionProvider":
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
            raise unavailable(name)
    return names


def parse_provider_options(pairs: "list[str] | None") -> "dict[str, str]":
    """NAME=VALUE pairs (e.g. OpenVINO's device_type=CPU) as onnxruntime's provider options."""
    options: "dict[str, str]" = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DmlLowerError(f"provider option {pair!r} is not NAME=VALUE")
        options[key.strip()] = value.strip()
    return options


def register_ep_libraries(specs: "list[str] | None") -> "dict[str, str]":
    """Register plugin provider libraries given as NAME=PATH (onnxruntime >= 1.22)."""
    import os

    import onnxruntime as ort

    from onnx_dml_lowering.ir.errors import first_line
    registered = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise DmlLowerError(f"--ep-library {spec!r} is not NAME=PATH")
        if not hasattr(ort, "register_execution_provider_library"):
            raise DmlLowerError(f"--ep-library {name}: onnxruntime {ort.__version__} has no plugin "
                                "providers (they need onnxruntime >= 1.22)")
        if not os.path.isfile(path):
            raise DmlLowerError(f"--ep-library {name}: library file {path!r} does not exist")
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
            from .directml.ort_dml import where as host_where
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
    devices = [d for d in _ep_devices() if d.ep_name == name]
    if devices:
        library = next((lib for lib in libraries), "")
        return ProviderSpec(name, opts, devices[0], library if libraries else "")
    if name in ort.get_available_providers():
        return ProviderSpec(name, opts)
    if libraries:
        listed = ", ".join(f"{d.ep_name} ({d.device.type.name})" for d in _ep_devices()) or "none"
        raise DmlLowerError(f"execution provider library {', '.join(libraries)} offers no device for "
                            f"{name} on this machine; devices onnxruntime lists: {listed}")
    if name == "DmlExecutionProvider":
        return _dml_host_spec(opts)
    raise unavailable(name)


def _dml_host_spec(options: "dict[str, str]") -> ProviderSpec:
    """The DML EP in onnxruntime.dll through ort_host (off Windows under Wine), where `make directml`
    set it up; else one line saying both ways to get it."""
    from .directml.home import DirectMLUnavailable, default_home
    from .directml.ort_dml import shared_host
    try:
        host = shared_host()
    except DirectMLUnavailable as exc:
        # no setup at all: the usual case, said without a path; a partial one: what is missing
        why = "run `make directml`" if not default_home().exists() else str(exc)
        raise DmlLowerError(f"{unavailable('DmlExecutionProvider')}; off Windows, ort-dml runs onnxruntime.dll's "
                            f"DirectML EP under Wine: {why}") from None
    unknown = {k: v for k, v in options.items() if (k, v) != ("device_id", "0")}
    if unknown:
        raise DmlLowerError(f"provider option {next(iter(unknown))}: ort_host runs the DirectML EP on device 0 with "
                            "no provider options")
    return ProviderSpec("DmlExecutionProvider", {}, host=host)


GRAPH_OPTIMIZATION_LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
                              "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}


@dataclass(frozen=True)
class SessionSettings:
    """What the user asked of every onnxruntime session a command creates (like onnx_test_runner
    -C): config entries, a graph optimization level and an intra-op thread count. None / empty
    keeps onnxruntime's (or our tiny-region) default. Frozen: sessions are cached by it."""
    config: "tuple[tuple[str, str], ...]" = ()
    optimization_level: "str | None" = None      # a GRAPH_OPTIMIZATION_LEVELS key
    threads: "int | None" = None

    @property
    def empty(self) -> bool:
        return not self.config and self.optimization_level is None and self.threads is None

    def apply(self, options) -> None:
        """Set these on an onnxruntime SessionOptions (after our own entries: the user's win)."""
        import onnxruntime as ort
        if self.optimization_level is not None:
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                                       GRAPH_OPTIMIZATION_LEVELS[self.optimization_level])
        if self.threads is not None:
            options.intra_op_num_threads = self.threads
        for key, value in self.config:
            options.add_session_config_entry(key, value)

    def validate(self) -> "SessionSettings":
        """Create a one-node session per config entry so an entry onnxruntime rejects is one line
        naming it, before any real session (some callers fall back to onnx.reference on failure)."""
        import contextlib
        import io

        import onnx
        from onnx import helper

        from onnx_dml_lowering.ir.errors import first_line
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                                  [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
        probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        data = probe.SerializeToString()
        for key, value in self.config or (("", ""),):
            one = SessionSettings(((key, value),) if key else (), self.optimization_level, self.threads)
            options = session_options(record_assignment=False, settings=one)
            try:
                # onnxruntime prints an "EP Error" banner before its own retry: not for the user
                with contextlib.redirect_stdout(io.StringIO()):
                    _session(data, options, providers=["CPUExecutionProvider"])
            except Exception as exc:
                what = f"--session-config {key}={value}" if key else "the session options"
                reason = first_line(exc)          # without its C++ source location and expression
                if key == "session.disable_cpu_ep_fallback":      # every command has CPU sessions too
                    reason += " (for the provider under test, --no-fallback sets it on its sessions alone)"
                raise DmlLowerError(f"onnxruntime rejects {what}: {reason}") from None
        return self


def parse_session_settings(config: "list[str] | None" = None, optimization_level: "str | None" = None,
                           threads: "str | int | None" = None) -> SessionSettings:
    """--session-config KEY=VALUE..., --graph-optimization-level, --threads -> SessionSettings
    (validated against onnxruntime), or one line naming the bad value."""
    pairs = []
    for pair in config or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DmlLowerError(f"--session-config {pair!r} is not KEY=VALUE")
        pairs.append((key.strip(), value.strip()))
    level = None
    if optimization_level is not None:
        level = optimization_level.strip().lower()
        if level not in GRAPH_OPTIMIZATION_LEVELS:
            raise DmlLowerError(f"--graph-optimization-level {optimization_level!r} is unknown; choose from "
                                f"{', '.join(GRAPH_OPTIMIZATION_LEVELS)}")
    count = None
    if threads is not None:
        try:
            count = int(str(threads).strip())
        except ValueError:
            count = -1
        if count < 0:
            raise DmlLowerError(f"--threads {threads!r} is not a non-negative integer (0: onnxruntime's default)")
    settings = SessionSettings(tuple(pairs), level, count)
    return settings if settings.empty else settings.validate()


def session_options(provider: "ProviderSpec | None" = None, no_fallback: bool = False,
                    record_assignment: bool = True, dml: bool = False,
                    settings: "SessionSettings | None" = None):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 4      # errors reach the user as our one line, not ORT's log
    if dml:
        # DirectML requires memory patterns off and sequential execution.
        options.enable_mem_pattern = False
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # A key the user sets is theirs alone (onnxruntime logs a warning when an entry is overwritten).
    user = {key for key, _ in settings.config} if settings is not None else set()
    if no_fallback and FALLBACK_OPTION not in user:
        options.add_session_config_entry(FALLBACK_OPTION, "1")
    if record_assignment and RECORD_ASSIGNMENT_OPTION not in user:
        options.add_session_config_entry(RECORD_ASSIGNMENT_OPTION, "1")
    if settings is not None:
        settings.apply(options)
    if provider is not None and provider.device is not None:
        options.add_provider_for_devices([provider.device], dict(provider.options))
    return options


# Initializers kept inline but above this size leave the proto when it would not serialise: when
# it comes within _PROTO_HEADROOM of protobuf's limit (weights.PROTO_LIMIT), room for the graph
# inputs the copy gains.
_INLINE_MOVE_BYTES = 1 << 20
_PROTO_HEADROOM = 1 << 24


@dataclass
class OrtModel:
    """What onnxruntime reads for one model: small proto bytes whose weights still in their files
    are external initializers relative to `folder` (onnxruntime maps them itself), and the big
    inline initializers that became graph inputs with the arrays bound to them."""
    data: bytes
    weights: "dict[str, np.ndarray]"
    added: "set[str]"              # weights that were not graph inputs of the model (callers never feed them)
    folder: "str | None" = None    # where the external initializers' locations point from


# The session config entry telling onnxruntime where a model given as bytes keeps its external data.
EXTERNAL_FOLDER_OPTION = "session.model_external_initializers_file_folder_path"


def ort_model(model) -> OrtModel:
    """The one way a ModelProto reaches onnxruntime: a copy with ir_version capped at
    MAX_IR_VERSION whose initializers still in their files (load_model's lazy ones: external data,
    or inline weights left in the .onnx file) stay initializers with external data pointing into
    those same files, relative to one folder that the session is told (EXTERNAL_FOLDER_OPTION).

    Why external initializers: onnxruntime then treats them as it treats the shipped file's own
    (Conv+BatchNormalization fusion, constant folding, pre-packing), so a region computes what the
    whole model computes in onnxruntime, bit for bit (bound as graph inputs they were unfused, 2e-4
    apart on Mask R-CNN); and onnxruntime maps the files itself on CPU instead of reading them
    (SessionOptions.add_external_initializers copies them: +400 MB on Mask R-CNN).

    Big inline initializers of a proto that would pass 2 GB (a ModelProto made in memory, no file
    to point at) become graph inputs bound to their arrays by WeightedSession; so do lazy ones at
    an offset misaligned for their type on a machine that cannot load misaligned data (onnxruntime
    would use the map as it lies; tensor_array gives an aligned copy)."""
    import os

    import onnx
    from onnx import helper

    from .weights import (PROTO_LIMIT, UNALIGNED_LOADS, copy_without, data_bytes, external_path, is_lazy,
                          mappable_dtype, tensor_array)
    if model.ir_version == ort_ir_version(model.ir_version) and not any(map(is_lazy, model.graph.initializer)):
        # The common case: nothing to move or change, so no copy (the ByteSize walk and the copy of
        # every node cost as much as serialising the model again).
        data = _serialised_below_limit(model)
        if data is not None:
            return OrtModel(data, {}, set())
        oversized = True
    else:
        oversized = model.ByteSize() > PROTO_LIMIT - _PROTO_HEADROOM

    def fed(tensor) -> bool:
        if is_lazy(tensor):
            offset, dtype = external_path(tensor)[1], mappable_dtype(tensor.data_type)
            # a lazy tensor's type is mappable (the loader leaves only those in their files)
            return not UNALIGNED_LOADS and dtype is not None and offset % dtype.alignment != 0
        return (oversized and tensor.data_location != onnx.TensorProto.EXTERNAL
                and tensor.ByteSize() >= _INLINE_MOVE_BYTES and tensor.data_type != onnx.TensorProto.STRING)

    proto = copy_without(model, "graph")
    proto.graph.CopyFrom(copy_without(model.graph, "initializer"))
    proto.ir_version = ort_ir_version(proto.ir_version)
    mapped = [t for t in model.graph.initializer if is_lazy(t) and not fed(t)]
    files = {t.name: external_path(t) for t in mapped}
    folder = os.path.commonpath([os.path.dirname(path) for path, _ in files.values()]) if files else None
    inputs = {vi.name for vi in proto.graph.input}
    weights, added = {}, set()
    for tensor in model.graph.initializer:
        if tensor.name in files:
            path, offset = files[tensor.name]
            external = proto.graph.initializer.add()
            external.CopyFrom(copy_without(tensor, "external_data"))
            for key, value in (("location", os.path.relpath(path, folder)), ("offset", str(offset)),
                               ("length", str(data_bytes(tensor)))):
                entry = external.external_data.add()
                entry.key, entry.value = key, value
        elif fed(tensor):
            if tensor.name not in inputs:
                proto.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
                added.add(tensor.name)
            weights[tensor.name] = tensor_array(tensor, aligned=True)
        else:
            proto.graph.initializer.add().CopyFrom(tensor)
    return OrtModel(proto.SerializeToString(), weights, added, folder)


def _serialised_below_limit(model) -> "bytes | None":
    """The model's bytes, or None when they would reach the protobuf limit (or protobuf refuses)."""
    from .weights import PROTO_LIMIT
    try:
        data = model.SerializeToString()
    except Exception:            # upb refuses a message past 2 GB (ValueError or EncodeError)
        return None
    return data if len(data) <= PROTO_LIMIT - _PROTO_HEADROOM else None


class WeightedSession:
    """An onnxruntime session whose weight inputs are always fed their arrays unless a feed names
    them: callers see only the model's own inputs (a weight that is also a graph input is one)."""

    def __init__(self, session, weights: "dict[str, np.ndarray]", added: "set[str]") -> None:
        from .ort_values import to_ort_value
        self.session = session
        self.weights = weights
        self.added = added
        self._values = {name: to_ort_value(array) for name, array in weights.items()}   # CPU: no copy

    def __getattr__(self, name: str):
        return getattr(self.session, name)

    def get_inputs(self) -> list:
        return [i for i in self.session.get_inputs() if i.name not in self.added]

    def run(self, outputs, feeds, *args, **kwargs):
        return self.session.run(outputs, {**self.weights, **dict(feeds)}, *args, **kwargs)

    def run_with_ort_values(self, outputs, feeds, *args, **kwargs):
        return self.session.run_with_ort_values(outputs, {**self._values, **dict(feeds)}, *args, **kwargs)


def _session(model, options, label: "str | None" = None, on: "list[str] | None" = None, **kwargs):
    """An InferenceSession over `model` (a ModelProto through ort_model, or a file path). Every
    session of the project is created here: a crash inside onnxruntime is said as a crash in
    `label` (default: the sub-model's region) on `on` (default: the providers asked for), see
    ort_crash."""
    import onnxruntime as ort

    from . import ort_crash
    where = ort_crash.where(model, on or kwargs.get("providers", ()), label) if ort_crash.armed() else None
    if isinstance(model, (str, bytes)):
        with ort_crash.loading(where):
            session = ort.InferenceSession(model, options, **kwargs)
    else:
        prepared = ort_model(model)
        if prepared.folder is not None:
            # set last: the weights' locations are relative to this folder, whatever else was asked
            options.add_session_config_entry(EXTERNAL_FOLDER_OPTION, prepared.folder)
        with ort_crash.loading(where):
            session = ort.InferenceSession(prepared.data, options, **kwargs)
        if prepared.weights:
            session = WeightedSession(session, prepared.weights, prepared.added)
    ort_crash.remember(session, where)
    return session


# A graph whose tensors hold at most this many elements runs on one intra-op thread.
TINY_ELEMENTS = 1 << 18


def few_elements(tensors: "Iterable[onnx.TensorProto]", elements: int = 0) -> bool:
    """`elements` plus the tensors' elements are at most TINY_ELEMENTS (a session's work is small)."""
    for tensor in tensors:
        count = 1
        for d in tensor.dims:
            count *= d
        elements += count
    return elements <= TINY_ELEMENTS


SHARED_ARENA_OPTION = "session.use_env_allocators"
_shared_arena: "list[bool]" = []


def shared_cpu_arena() -> bool:
    """One CPU memory arena for every region session of the process, registered with onnxruntime's
    environment once. Each session's own arena keeps the peak of its activations for good, so a
    model cut into regions held the sum of their peaks (Mask R-CNN R50, 7 regions: 1.21 GB against
    0.77 GB with one shared arena, onnxruntime's own run 0.80 GB; the same time). False where this
    onnxruntime cannot register one."""
    if not _shared_arena:
        import onnxruntime as ort
        try:
            info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
            ort.create_and_register_allocator(info, ort.OrtArenaCfg(0, -1, -1, -1))
            _shared_arena.append(True)
        except Exception:  # an onnxruntime without the API, or one registered already by the host program
            _shared_arena.append(False)
    return _shared_arena[0]


def make_session(model, providers: "list[str]", device_id: int = 0, tiny: bool = False,
                 settings: "SessionSettings | None" = None, label: "str | None" = None):
    """An InferenceSession over a ModelProto (or a model path) with the settings the providers require.

    DirectML requires memory patterns off and sequential execution, and takes a device id.
    `tiny`: the graph's work is small (a region over small tensors): one intra-op thread, as
    a thread pool costs more to create (~50 ms) than it saves, and no spinning. Larger graphs keep
    onnxruntime's defaults (its spinning pool is what the warm run is measured against).
    `settings` (the user's) are applied last: an explicit thread count or config entry wins.
    `label`: what the session is, as a crash inside onnxruntime says it (default: its region).
    """
    options = session_options(dml="DmlExecutionProvider" in providers, record_assignment=False)
    user = {key for key, _ in settings.config} if settings is not None else set()
    if providers == ["CPUExecutionProvider"] and SHARED_ARENA_OPTION not in user and shared_cpu_arena():
        options.add_session_config_entry(SHARED_ARENA_OPTION, "1")
    if tiny:
        options.intra_op_num_threads = 1
        if not (settings and any(k == "session.intra_op.allow_spinning" for k, _ in settings.config)):
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if settings is not None:
        settings.apply(options)       # after tiny's: an explicit --threads wins
    provider_list: list = []
    for name in providers:
        if name == "DmlExecutionProvider":
            provider_list.append((name, {"device_id": str(device_id)}))
        else:
            provider_list.append(name)
    return _session(model, options, label, providers=provider_list)


def make_provider_session(model, provider: ProviderSpec, no_fallback: bool = False,
                          settings: "SessionSettings | None" = None, checked: "onnx.ModelProto | None" = None):
    """A session running the whole model (a ModelProto) on `provider`, recording who ran each node.

    no_fallback sets session.disable_cpu_ep_fallback: a node the provider cannot take makes
    session creation fail instead of quietly running on CPUExecutionProvider."""
    dml = provider.name == "DmlExecutionProvider"
    # The CPU provider has nothing to fall back from (onnxruntime rejects the combination).
    no_fallback = no_fallback and provider.name != "CPUExecutionProvider"
    if provider.host is not None:
        return _host_session(model, provider, no_fallback, settings, checked)
    import contextlib
    import io
    options = session_options(provider, no_fallback, dml=dml, settings=settings)
    try:
        # onnxruntime prints an "EP Error" banner before its own retry: the failure is our one line
        with contextlib.redirect_stdout(io.StringIO()):
            shipped = "the model as shipped"
            if provider.device is not None:
                return _session(model, options, shipped, [provider.description])
            provider_options = dict(provider.options)
            if dml:
                provider_options.setdefault("device_id", "0")
            return _session(model, options, shipped, providers=[(provider.name, provider_options)])
    except DmlLowerError:
        raise
    except Exception as exc:
        fallback = " with CPU fallback disabled" if no_fallback else ""
        reason = provider_message(exc)
        raise ProviderLoadError(f"onnxruntime ({provider.description}{fallback}) cannot load the model: {reason}",
                                provider.name, reason, parse_provider_failure(exc)) from None


def _host_session(model, provider: ProviderSpec, no_fallback: bool, settings: "SessionSettings | None",
                  checked: "onnx.ModelProto | None"):
    """The session in ort_host over `model` (a path, bytes, or a ModelProto through ort_model, its
    weights as external initializers in their own files); `checked` names a failing node's deviation."""
    import onnx

    from .directml.ort_dml import HostOptions, create
    options = HostOptions(no_fallback=no_fallback)
    if settings is not None:
        options.optimization_level, options.threads = settings.optimization_level, settings.threads
        options.config = list(settings.config)
    if isinstance(model, onnx.ModelProto):
        prepared = ort_model(model)
        source: "bytes | str" = prepared.data
        options.weights_folder, options.fed_weights = prepared.folder, dict(prepared.weights)
        checked = checked if checked is not None else model
    else:
        source = model
    try:
        return create(provider.host, source, options, checked)
    except DmlLowerError as exc:
        fallback = " with CPU fallback disabled" if no_fallback else ""
        reason = provider_message(exc)
        raise ProviderLoadError(f"onnxruntime ({provider.description}{fallback}) cannot load the model: {reason}",
                                provider.name, reason, parse_provider_failure(exc)) from None


def node_providers(session) -> "dict[str, str] | None":
    """{node name: provider name} for every node onnxruntime kept after its optimizations,
    or None when this onnxruntime cannot report it (before 1.24, or recording was off)."""
    own = getattr(session, "node_providers", None)       # ort_host's session: from onnxruntime's log
    if callable(own):
        return own()
    get = getattr(session, "get_provider_graph_assignment_info", None)
    if get is None:
        return None
    try:
        if session.get_session_options().get_session_config_entry(RECORD_ASSIGNMENT_OPTION) != "1":
            return None
        subgraphs = get()
    except Exception:
        return None
    assignment = {}
    for sub in subgraphs:
        for index, node in enumerate(sub.get_nodes()):
            try:
                name = node.name
            except UnicodeDecodeError:      # a shipped file's name need not be UTF-8; onnxruntime keeps it
                name = f"<node #{index} of the {sub.ep_name} subgraph: its name is not UTF-8>"
            assignment[name] = sub.ep_name
    return assignment


@dataclass(frozen=True)
class PlacementFinding:
    node: str
    op_type: str
    provider: "str | None"          # None: absent from onnxruntime's optimized graph
    constant: bool = False          # its inputs depend on no graph input (constant folding can remove it)

    def describe(self, requested: str) -> str:
        return describe_findings([self], requested)[0]


def describe_findings(findings: "list[PlacementFinding]", requested: str) -> "list[str]":
    """One line per kind of finding (op type, where it ran or why it did not), its nodes listed
    through ir.printer.name_list: ninety fused nodes are one bounded line, not ninety."""
    groups: "dict[tuple, list[str]]" = {}
    for f in findings:
        groups.setdefault((f.op_type, f.provider, f.constant), []).append(f.node)
    lines = []
    for (op_type, provider, constant), nodes in groups.items():
        one = len(nodes) == 1
        what = f"{op_type} node{'' if one else 's'} {name_list(nodes, 4)}"
        if provider is None and constant:
            lines.append(f"{what}: removed by onnxruntime's constant folding (no provider ran {'it' if one else 'them'})")
        elif provider is None:
            lines.append(f"{what}: not in onnxruntime's optimized graph under {'its name' if one else 'their names'} "
                         f"(a graph optimization fused or replaced {'it' if one else 'them'}; no provider ran "
                         f"{'it as this node' if one else 'them as these nodes'})")
        else:
            lines.append(f"{what}: fell back to {provider} (requested {requested})")
    return lines


def _input_dependent(model) -> "set[str]":
    """Values that depend on a graph input (so constant folding cannot compute them)."""
    from onnx_dml_lowering.lowering.onnx_graphs import node_reads
    inits = {i.name for i in model.graph.initializer}
    live = {i.name for i in model.graph.input if i.name not in inits}
    for node in model.graph.node:
        if any(r in live for r in node_reads(node)):
            live.update(o for o in node.output if o)
    return live


def placement_findings(model, assignment: "dict[str, str]", requested: str) -> "list[PlacementFinding]":
    """The nodes of `model` whose operator this project owns (lowering.owned_ops) that ran on another
    provider than `requested`, or that are absent from the assignment (constant folding removed them)."""
    from onnx_dml_lowering.lowering.owned_ops import owned
    findings = []
    live = None
    for node in model.graph.node:
        if not owned(node.op_type, node.domain):
            continue
        ran_on = assignment.get(node.name)
        if ran_on is None or ran_on != requested:
            if live is None:
                live = _input_dependent(model)
            constant = not any(r in live for r in node.input if r)
            findings.append(PlacementFinding(node.name, node.op_type, ran_on, constant))
    return findings
