"""Every onnxruntime session of the project is created here (create_session): region and oracle
sessions (make_session), a whole model on a provider under test (make_provider_session, in this
process or in ort_host off Windows). What DmlExecutionProvider needs of a session (a device id,
memory patterns off, sequential execution) is said once, in _providers_argument."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.ort.model import EXTERNAL_FOLDER_OPTION, WeightedSession, ort_model
from onnx_dml_lowering.runtime.ort.providers import DML, ProviderSpec
from onnx_dml_lowering.runtime.ort.settings import SessionSettingRejected, SessionSettings, session_options
from onnx_dml_lowering.runtime.ort_messages import (ProviderLoadError, kernel_refusal, parse_provider_failure,
                                                   provider_message)

# Sessions and SessionOptions are onnxruntime's, which has no type information: they are Any here
# (a session may also be a WeightedSession or ort_host's DmlEpSession, which act as one).

if TYPE_CHECKING:
    import onnx


def _providers_argument(providers: "Iterable[tuple[str, dict[str, str] | None]]",
                        device_id: int = 0) -> "tuple[list, bool]":
    """onnxruntime's `providers` argument for (name, options or None) pairs, and whether the DML EP
    is among them (its sessions need memory patterns off and sequential execution): the DML EP
    always gets a device id (`device_id` unless its options name one)."""
    listed: list = []
    dml = False
    for name, options in providers:
        if name == DML:
            dml = True
            listed.append((name, {"device_id": str(device_id), **(options or {})}))
        else:
            listed.append(name if options is None else (name, dict(options)))
    return listed, dml


def create_session(model: "onnx.ModelProto | str | bytes", options: Any, label: "str | None" = None,
                   on: "list[str] | None" = None, **kwargs: Any) -> Any:
    """An InferenceSession over `model` (a ModelProto through ort_model, or a file path). Every
    session of the project is created here: a crash inside onnxruntime is said as a crash in
    `label` (default: the sub-model's region) on `on` (default: the providers asked for), see
    ort_crash."""
    import onnxruntime as ort

    from onnx_dml_lowering.runtime import ort_crash
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


def validate_settings(settings: SessionSettings) -> SessionSettings:
    """`settings`, once a one-node session per config entry has been created with them, so an entry
    onnxruntime rejects is one SessionSettingRejected naming it before any real session (some
    callers fall back to onnx.reference on failure)."""
    import contextlib
    import io

    from onnx_dml_lowering.ir.errors import first_line
    data = _probe_model()
    for key, value in settings.config or (("", ""),):
        one = SessionSettings(((key, value),) if key else (), settings.optimization_level, settings.threads)
        options = session_options(record_assignment=False, settings=one)
        try:
            # onnxruntime prints an "EP Error" banner before its own retry: not for the user
            with contextlib.redirect_stdout(io.StringIO()):
                create_session(data, options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            # first_line: without its C++ source location and expression
            raise SessionSettingRejected(key, value if key else "", first_line(exc)) from None
    return settings


def _probe_model() -> bytes:
    """One Identity over a float [1]: the cheapest session onnxruntime creates."""
    import onnx
    from onnx import helper
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


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


def make_session(model: "onnx.ModelProto | str | bytes", providers: "list[str]", device_id: int = 0,
                 tiny: bool = False, settings: "SessionSettings | None" = None, label: "str | None" = None) -> Any:
    """An InferenceSession over a ModelProto (or a model path) with the settings the providers require.

    `tiny`: the graph's work is small (a region over small tensors): one intra-op thread, as
    a thread pool costs more to create (~50 ms) than it saves, and no spinning. Larger graphs keep
    onnxruntime's defaults (its spinning pool is what the warm run is measured against).
    `settings` (the user's) are applied last: an explicit thread count or config entry wins.
    `label`: what the session is, as a crash inside onnxruntime says it (default: its region).
    """
    provider_list, dml = _providers_argument(((name, None) for name in providers), device_id)
    options = session_options(dml=dml, record_assignment=False)
    user = settings.keys if settings is not None else set()
    if providers == ["CPUExecutionProvider"] and SHARED_ARENA_OPTION not in user and shared_cpu_arena():
        options.add_session_config_entry(SHARED_ARENA_OPTION, "1")
    if tiny:
        options.intra_op_num_threads = 1
        if "session.intra_op.allow_spinning" not in user:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if settings is not None:
        settings.apply(options)       # after tiny's: an explicit --threads wins
    return create_session(model, options, label, providers=provider_list)


# onnxruntime's run option: at the end of the run, the CPU arena hands back to the system each of
# its extensions that holds nothing (an output of the run still held keeps its extension)
SHRINK_RUN_OPTION = ("memory.enable_memory_arena_shrinkage", "cpu:0")


def may_share_arena(provider: ProviderSpec, settings: "SessionSettings | None" = None) -> bool:
    """Whether a session on `provider` may allocate from the shared CPU arena: onnxruntime's CPU
    provider in this process only, whose outputs are that allocator's memory. Another provider (the
    DML EP, a plugin's device) hands its outputs back through allocators of its own, and ort_host's
    session lives in another process. A user's own SHARED_ARENA_OPTION wins."""
    user = settings.keys if settings is not None else set()
    return (provider.name == "CPUExecutionProvider" and provider.host is None and provider.device is None
            and SHARED_ARENA_OPTION not in user and shared_cpu_arena())


def shrink_shared_arena() -> None:
    """Hands the shared CPU arena's extensions that hold nothing back to the system. The arena has
    no call of its own for it: a one-node session on it runs with SHRINK_RUN_OPTION."""
    import numpy as np
    import onnxruntime as ort
    if not shared_cpu_arena():
        return
    options = session_options(record_assignment=False)
    options.add_session_config_entry(SHARED_ARENA_OPTION, "1")
    options.intra_op_num_threads = 1        # no thread pool for one Identity
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = create_session(_probe_model(), options, "the shared arena's shrink", providers=["CPUExecutionProvider"])
    run = ort.RunOptions()
    run.add_run_config_entry(*SHRINK_RUN_OPTION)
    session.run(None, {"x": np.zeros(1, np.float32)}, run)


def make_provider_session(model: "onnx.ModelProto | str | bytes", provider: ProviderSpec, no_fallback: bool = False,
                          settings: "SessionSettings | None" = None,
                          checked: "onnx.ModelProto | None" = None, shared_arena: bool = False) -> Any:
    """A session running the whole model (a ModelProto) on `provider`, recording who ran each node.

    no_fallback sets session.disable_cpu_ep_fallback: a node the provider cannot take makes
    session creation fail instead of quietly running on CPUExecutionProvider. `shared_arena`: the
    session allocates from the region sessions' arena where may_share_arena says it may (the
    caller runs it once and releases it before any region session exists: check's one feed set)."""
    # The CPU provider has nothing to fall back from (onnxruntime rejects the combination).
    no_fallback = no_fallback and provider.name != "CPUExecutionProvider"
    if provider.host is not None:
        return _host_session(model, provider, no_fallback, settings, checked)
    import contextlib
    import io
    provider_list, dml = _providers_argument([(provider.name, provider.options)])
    options = session_options(provider, no_fallback, dml=dml, settings=settings)
    if shared_arena and may_share_arena(provider, settings):
        options.add_session_config_entry(SHARED_ARENA_OPTION, "1")
    try:
        # onnxruntime prints an "EP Error" banner before its own retry: the failure is our one line
        with contextlib.redirect_stdout(io.StringIO()):
            shipped = "the model as shipped"
            if provider.device is not None:
                return create_session(model, options, shipped, [provider.description])
            return create_session(model, options, shipped, providers=provider_list)
    except DmlLowerError:
        raise
    except Exception as exc:
        shipped_proto = checked if checked is not None else model if not isinstance(model, (str, bytes)) else None
        raise _load_error(provider, no_fallback, exc, shipped_proto) from None


def _load_error(provider: ProviderSpec, no_fallback: bool, exc: Exception,
                model: "onnx.ModelProto | None" = None) -> ProviderLoadError:
    fallback = " with CPU fallback disabled" if no_fallback else ""
    failure = parse_provider_failure(exc)
    # a kernel constructor's refusal names no node: the model's nodes of its operator do
    reason = (kernel_refusal(failure, model.graph.node) if model is not None else None) or provider_message(exc)
    return ProviderLoadError(f"onnxruntime ({provider.description}{fallback}) cannot load the model: {reason}",
                             provider.name, reason, failure)


def _host_session(model: "onnx.ModelProto | str | bytes", provider: ProviderSpec, no_fallback: bool,
                  settings: "SessionSettings | None", checked: "onnx.ModelProto | None") -> Any:
    """The session in ort_host over `model` (a path, bytes, or a ModelProto through ort_model, its
    weights as external initializers in their own files); `checked` names a failing node's deviation."""
    import onnx

    from onnx_dml_lowering.runtime.directml.ort_dml import HostOptions, create
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
        raise _load_error(provider, no_fallback, exc) from None
