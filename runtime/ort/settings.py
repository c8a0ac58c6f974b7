"""What the user asks of every onnxruntime session a command creates (SessionSettings), and the
SessionOptions built from them and from what this project needs of a session (session_options).
The user's text becomes SessionSettings where it enters: the CLI's SessionArgs group (its option
words live there only), or a caller of the Python API building one directly."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onnx_dml_lowering.ir import DmlLowerError

if TYPE_CHECKING:
    from onnx_dml_lowering.runtime.ort.providers import ProviderSpec

GRAPH_OPTIMIZATION_LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
                              "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}

FALLBACK_OPTION = "session.disable_cpu_ep_fallback"
RECORD_ASSIGNMENT_OPTION = "session.record_ep_graph_assignment_info"


class SessionSettingRejected(DmlLowerError):
    """onnxruntime refuses a session built with one config entry (key, value; key "" when it is the
    level or thread count it refuses): found before any real session by sessions.validate_settings,
    where a caller names the option it came from."""

    def __init__(self, key: str, value: str, reason: str) -> None:
        what = f"session config entry {key}={value}" if key else "the session options"
        super().__init__(f"onnxruntime rejects {what}: {reason}")
        self.key, self.value, self.reason = key, value, reason


@dataclass(frozen=True)
class SessionSettings:
    """What the user asked of every onnxruntime session a command creates (like onnx_test_runner
    -C): config entries, a graph optimization level and an intra-op thread count. None / empty
    keeps onnxruntime's (or our tiny-region) default. Frozen: sessions are cached by it."""
    config: "tuple[tuple[str, str], ...]" = ()
    optimization_level: "str | None" = None      # a GRAPH_OPTIMIZATION_LEVELS key
    threads: "int | None" = None

    def __post_init__(self) -> None:
        # every way in (the CLI, the Python API) passes here, before any session: a file
        # onnxruntime would write itself passes the one writer's checks
        from onnx_dml_lowering.ir.display import display
        from .config_keys import writes_files
        for key, value in self.config:
            if writes_files(key):
                raise DmlLowerError(f"session config entry {display(key)}={display(value)}: onnxruntime writes the "
                                    "file that key names itself, past the checks on what a command writes: not taken")

    @property
    def empty(self) -> bool:
        return not self.config and self.optimization_level is None and self.threads is None

    @property
    def keys(self) -> "set[str]":
        """The config keys the user set (theirs alone: our own entries give way)."""
        return {key for key, _ in self.config}

    def apply(self, options: Any) -> None:      # an onnxruntime.SessionOptions (untyped)
        """Set these on an onnxruntime SessionOptions (after our own entries: the user's win)."""
        import onnxruntime as ort
        if self.optimization_level is not None:
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                                       GRAPH_OPTIMIZATION_LEVELS[self.optimization_level])
        if self.threads is not None:
            options.intra_op_num_threads = self.threads
        for key, value in self.config:
            options.add_session_config_entry(key, value)


# Set by the console script, whose process this is: onnxruntime's default logger is quieted there
# (the Python API leaves it as its caller set it: the caller's own sessions log through it too).
QUIET_DEFAULT_LOGGER = [False]
_quieted: "list[bool]" = []


def _quiet_default_logger(ort: Any) -> None:
    """The default logger, once per process: onnxruntime's allocators and environment log through it
    whatever a session's own level (an allocation that overflows wrote coloured lines before the
    exception our one line says it with)."""
    if QUIET_DEFAULT_LOGGER[0] and not _quieted:
        ort.set_default_logger_severity(4)
        _quieted.append(True)


def session_options(provider: "ProviderSpec | None" = None, no_fallback: bool = False,
                    record_assignment: bool = True, dml: bool = False,
                    settings: "SessionSettings | None" = None) -> Any:   # onnxruntime.SessionOptions
    """onnxruntime's SessionOptions: ours (errors as our one line, not onnxruntime's log; `dml`:
    what DirectML requires; `no_fallback`; recording who ran each node), then the user's."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 4      # errors reach the user as our one line, not ORT's log
    _quiet_default_logger(ort)
    if dml:
        # DirectML requires memory patterns off and sequential execution.
        options.enable_mem_pattern = False
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # A key the user sets is theirs alone (onnxruntime logs a warning when an entry is overwritten).
    user = settings.keys if settings is not None else set()
    if no_fallback and FALLBACK_OPTION not in user:
        options.add_session_config_entry(FALLBACK_OPTION, "1")
    if record_assignment and RECORD_ASSIGNMENT_OPTION not in user:
        options.add_session_config_entry(RECORD_ASSIGNMENT_OPTION, "1")
    if settings is not None:
        settings.apply(options)
    if provider is not None and provider.device is not None:
        options.add_provider_for_devices([provider.device], dict(provider.options))
    return options


def as_written(settings: "SessionSettings | None" = None) -> SessionSettings:
    """`settings` (none: the defaults) with onnxruntime's graph optimizations off unless they ask
    for a level: a graph run as written. The optimizer swaps the branches of a Where of a Not, and
    a -0.0 from the first branch comes out +0.0 (optimize --check's two graphs, the ort backend's
    DIAGONAL_MATRIX1 stand-in)."""
    from dataclasses import replace
    settings = settings if settings is not None else SessionSettings()
    return settings if settings.optimization_level is not None else replace(settings, optimization_level="disable")
