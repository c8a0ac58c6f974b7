"""check: run backends on the same feeds and compare each with ONNX semantics (onnx.reference).

Backends: "cpu" - the lowered graph on the numpy DirectML emulator; "ort" - the lowered graph
with each DirectML operator run by onnxruntime's CPU provider; "ort-cpu" / "ort-dml" - the
original model on onnxruntime's CPU / DirectML execution provider.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError

from .compare import BackendReport, compare
from .feeds import check_feeds
from .oracle import reference_outputs

BACKENDS = {
    "cpu": "lowered graph, DirectML operators on the numpy emulator",
    "ort": "lowered graph, DirectML operators on onnxruntime CPUExecutionProvider",
    "ort-cpu": "original model on onnxruntime CPUExecutionProvider",
    "ort-dml": "original model on onnxruntime DmlExecutionProvider",
}
_ORT_PROVIDERS = {"ort-cpu": ["cpu"], "ort-dml": ["dml"]}

SCALAR_NONZERO_DEVIATION = "known onnxruntime deviation: a scalar NonZero gives (1, nnz); ONNX says (0, nnz)"


@dataclass
class Tolerances:
    atol: float = 1e-6
    rtol: float = 1e-5
    per_output: "dict[str, tuple[float | None, float | None]]" = field(default_factory=dict)

    def for_output(self, name: str) -> "tuple[float, float]":
        atol, rtol = self.per_output.get(name, (None, None))
        return (self.atol if atol is None else atol, self.rtol if rtol is None else rtol)

    @staticmethod
    def parse(atols: "list[str] | None", rtols: "list[str] | None") -> "Tolerances":
        """From CLI values: a bare number sets the global value, NAME=NUMBER one output's."""
        tol = Tolerances()
        for values, index in ((atols or [], 0), (rtols or [], 1)):
            for text in values:
                name, _, number = text.rpartition("=")
                try:
                    value = float(number)
                except ValueError:
                    raise DmlLowerError(f"tolerance {text!r} is not NUMBER or OUTPUT=NUMBER") from None
                if value < 0:
                    raise DmlLowerError(f"tolerance {text!r} is negative")
                if name:
                    pair = list(tol.per_output.get(name, (None, None)))
                    pair[index] = value
                    tol.per_output[name] = tuple(pair)
                elif index == 0:
                    tol.atol = value
                else:
                    tol.rtol = value
        return tol


@dataclass
class CheckReport:
    model: str
    feature_level: str
    placement: list
    regions: "dict[str, str]"
    backends: "list[BackendReport]"

    @property
    def ok(self) -> bool:
        return all(b.ok for b in self.backends)

    def to_dict(self) -> dict:
        return {"model": self.model, "feature_level": self.feature_level, "ok": self.ok,
                "oracle": "onnx.reference",
                "placement": [p.to_dict() for p in self.placement],
                "onnx_regions": dict(self.regions),
                "backends": [{"backend": b.backend, "description": BACKENDS[b.backend], "ok": b.ok,
                              "error": b.error, "outputs": [o.to_dict() for o in b.outputs]}
                             for b in self.backends]}


def scalar_nonzero_outputs(compiled) -> "dict[str, str]":
    """Outputs produced directly by a NonZero over a 0-d input: node name by output name."""
    out = {}
    for node in compiled.model.graph.node:
        if node.op_type == "NonZero" and node.domain in ("", "ai.onnx"):
            info = compiled.types.get(node.input[0])
            if info is not None and info.shape == ():
                out[node.output[0]] = node.name
    return out


def _original_on_ort(compiled, feeds: Mapping[str, np.ndarray], providers: "list[str]") -> "dict[str, np.ndarray]":
    import onnx

    from onnx_dml_lowering.ir.errors import first_line

    from .ort_providers import MAX_IR_VERSION, make_session
    model = onnx.ModelProto()
    model.CopyFrom(compiled.model)
    model.ir_version = min(model.ir_version, MAX_IR_VERSION)
    try:
        session = make_session(model.SerializeToString(), providers)
    except Exception as exc:
        raise DmlLowerError(f"onnxruntime ({', '.join(providers)}) cannot load the model: "
                            f"{first_line(exc)}") from None
    try:
        results = session.run(compiled.output_names, dict(feeds))
    except Exception as exc:
        raise DmlLowerError(f"onnxruntime ({', '.join(providers)}) failed to run the model: "
                            f"{first_line(exc)}") from None
    return dict(zip(compiled.output_names, (np.asarray(r) for r in results)))


def validate_backends(backends: "list[str]") -> "dict[str, list[str]]":
    """Provider lists for the ORT backends; one line and no run when one is unknown or missing."""
    from .ort_providers import resolve
    if not backends:
        raise DmlLowerError("no backend to check; choose from " + ", ".join(BACKENDS))
    providers = {}
    for backend in backends:
        if backend not in BACKENDS:
            raise DmlLowerError(f"unknown check backend {backend!r}; choose from {', '.join(BACKENDS)}")
        if backend in _ORT_PROVIDERS:
            providers[backend] = resolve(_ORT_PROVIDERS[backend])
    return providers


def run_backend(compiled, backend: str, feeds: Mapping[str, np.ndarray], providers: "list[str] | None",
                strict: "bool | None", memory_limit=None) -> "dict[str, np.ndarray]":
    if backend == "cpu":
        return compiled.run(feeds, backend="cpu", strict=strict, memory_limit=memory_limit)
    if backend == "ort":
        return compiled.run(feeds, backend="ort", providers=["cpu"], strict=strict, memory_limit=memory_limit)
    return _original_on_ort(compiled, feeds, providers)


def check(compiled, feeds: Mapping[str, object], backends: "list[str]", tolerances: Tolerances,
          strict: "bool | None" = None, model_name: str = "",
          memory_limit: "int | str | None" = None) -> "tuple[dict, CheckReport]":
    """Every backend against onnx.reference on the same (validated) feeds."""
    providers = validate_backends(backends)
    if memory_limit is not None:
        from .memory import parse_size
        memory_limit = parse_size(memory_limit)        # a bad size is a usage error, before any run
    feeds = check_feeds(compiled.inputs, feeds, compiled.optional_inputs)
    expected = reference_outputs(compiled.model, feeds)
    deviations = scalar_nonzero_outputs(compiled)
    reports = []
    for backend in backends:
        report = BackendReport(backend)
        reports.append(report)
        try:
            actual = run_backend(compiled, backend, feeds, providers.get(backend), strict, memory_limit)
        except DmlLowerError as exc:
            if "memory limit" in str(exc):
                raise                               # a limit the user set: not a backend's failure
            report.error = str(exc)
            continue
        for name, want in expected.items():
            atol, rtol = tolerances.for_output(name)
            result = compare(name, backend, want, actual.get(name), atol, rtol)
            got = actual.get(name)
            if (result.status == "mismatch" and backend.startswith("ort-") and name in deviations
                    and got is not None and want.shape[:1] == (0,) and got.shape == (1,) + want.shape[1:]):
                result.status = "deviation"
                result.detail = f"{SCALAR_NONZERO_DEVIATION} (node {deviations[name]}; got {list(got.shape)})"
            report.outputs.append(result)
    regions = {}
    if "cpu" in backends:
        runner = compiled.session("cpu").regions
        for name, engine in runner.engines.items():
            regions[name] = f"[{', '.join(n.name for n in runner.regions[name])}] {engine}"
    return feeds, CheckReport(model_name, compiled.feature_level.name, compiled.placement, regions, reports)
