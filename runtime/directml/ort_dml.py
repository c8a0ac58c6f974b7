"""The `ort-dml` backend where onnxruntime-directml cannot be imported (Linux): the shipped model on
onnxruntime.dll's DirectML EP in ort_host, one host per process (per command, per zoo worker).

A session here always asks onnxruntime to write its optimised model into a temporary folder: the
node names of that graph complete the VERBOSE log's placement (a graph one provider took whole is
one line without its nodes), and onnxruntime then keeps the DML EP from fusing the nodes it took
into DmlFusedNode partitions, so every provider it names is a node of the model's. Each node runs on
the same DML kernel either way; only the partition fusion (a performance pass) is off."""
from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import onnx

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.lowering.onnx_graphs import all_nodes
from onnx_dml_lowering.runtime.dml_deviations import name_failure

from .home import on_windows
from .ort_host import OrtHost, OrtHostError, OrtHostSession, SessionRequest
from .placement_log import node_providers as logged_providers

PROVIDER = "DmlExecutionProvider"
# onnxruntime writes the weights of the optimised model apart (a model past 2 GB cannot be one file)
_WEIGHTS_OPTIONS = (("session.optimized_model_external_initializers_file_name", "weights.bin"),
                    ("session.optimized_model_external_initializers_min_size_in_bytes", "1024"))
_EXTERNAL_FOLDER = "session.model_external_initializers_file_folder_path"

_shared: "list[OrtHost]" = []


def shared_host() -> OrtHost:
    """The process's ort_host (started on first request, closed at exit); DirectMLUnavailable
    naming `make directml` where the setup is absent."""
    if not _shared:
        _shared.append(OrtHost())
        atexit.register(_shared[0].close)
    return _shared[0]


def where(host: OrtHost) -> str:
    """How a report names the provider's runtime: onnxruntime.dll's version, and Wine."""
    return f"onnxruntime.dll {host.version()} in ort_host{'' if on_windows() else ' under Wine'}"


@dataclass
class HostOptions:
    """What the user asked of the session (ProviderSpec and SessionSettings, as plain values)."""
    optimization_level: "str | None" = None
    threads: "int | None" = None
    config: "list[tuple[str, str]]" = field(default_factory=list)
    no_fallback: bool = False
    weights_folder: "str | None" = None       # where the external initializers of model bytes lie
    fed_weights: "dict[str, np.ndarray]" = field(default_factory=dict)   # weights bound as inputs


class DmlEpSession:
    """A host session over the shipped model, answering as the provider backend asks an
    InferenceSession; `node_providers()` from onnxruntime's own log."""

    def __init__(self, session: OrtHostSession, assignment: "dict[str, str] | None", model: "onnx.ModelProto | None",
                 fed: "dict[str, np.ndarray]") -> None:
        self.session, self.assignment, self.model, self.fed = session, assignment, model, fed
        # the host keeps a session until told: on lavapipe each holds its device heaps (hundreds of
        # MB), so a conformance run of 340 cases grew one host past 20 GB. Released once dropped.
        weakref.finalize(self, _release, session).atexit = False

    def get_inputs(self) -> list:
        return [i for i in self.session.get_inputs() if i.name not in self.fed]

    def get_outputs(self) -> list:
        return self.session.get_outputs()

    def get_overridable_initializers(self) -> list:
        return []

    def node_providers(self) -> "dict[str, str] | None":
        return self.assignment

    def run(self, outputs: "Sequence[str] | None", feeds: Mapping[str, np.ndarray]) -> "list[np.ndarray | None]":
        """None for an output onnxruntime left empty, as the Python binding gives it."""
        try:
            return self.session.run(outputs, {**self.fed, **dict(feeds)})
        except OrtHostError as exc:
            raise DmlLowerError(explain(self.model, exc.message, at_run=True)) from None


def _release(session: OrtHostSession) -> None:
    try:
        session.release()
    except (DmlLowerError, OSError):
        pass        # the host is gone (closed or died): its sessions went with it


# The DML EP's failure prefix: its build machine's source path, an address, a caller, a throw count
# and a thread id (which change from run to run); the HRESULT and its text after it are the message.
_DML_FRAME = re.compile(r"[A-Za-z]:\\\S*?\(\d+\)\\\S+?!\w+: \(caller: \w+\) Exception\(\d+\) tid\(\w+\) ")


def explain(model: "onnx.ModelProto | None", message: str, at_run: bool) -> str:
    """onnxruntime's message in one line without the DML EP's frame, led by the named DML EP
    deviation it is, if it is one."""
    text = _DML_FRAME.sub("", " ".join(message.replace("\r", " ").split()))
    named = name_failure(model, text, at_run)
    return f"{named} (onnxruntime: {text})" if named else text


def create(host: OrtHost, source: "bytes | str", options: HostOptions, model: "onnx.ModelProto | None") -> DmlEpSession:
    """A session over the model bytes or path on the DML EP; a failure is one DmlLowerError line
    (onnxruntime's message, the deviation named where it is one)."""
    folder = tempfile.mkdtemp(prefix="dml-lower-ortdml-")
    try:
        optimized = os.path.join(folder, "optimized.onnx")
        config = list(options.config)
        user = {key for key, _ in config}
        config += [(k, v) for k, v in _WEIGHTS_OPTIONS if k not in user]
        if options.no_fallback and "session.disable_cpu_ep_fallback" not in user:
            config.append(("session.disable_cpu_ep_fallback", "1"))
        if options.weights_folder is not None:
            from .ort_host import host_path
            config.append((_EXTERNAL_FOLDER, host_path(options.weights_folder)))
        request = SessionRequest(options.optimization_level, options.threads, config, optimized)
        try:
            session = host.create_session(source, request)
        except OrtHostError as exc:
            raise DmlLowerError(explain(model, exc.message, at_run=False)) from None
        return DmlEpSession(session, logged_providers(session.log, _node_names(optimized)), model,
                            dict(options.fed_weights))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _node_names(path: str) -> "list[str] | None":
    """Every node name of the optimised model onnxruntime wrote (subgraphs included), or None."""
    try:
        written = onnx.load(path, load_external_data=False)
    except Exception:      # noqa: BLE001 - not written (onnxruntime refused to serialise): no names
        return None
    return [node.name for _, node in all_nodes(written)]
