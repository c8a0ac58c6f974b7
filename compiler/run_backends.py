"""`dml-lower run --backends ...`: each backend's outputs on one feed set, and run's JSON record.

cpu / ort run the lowered graph (as ever); ort-cpu / ort-dml / ort:<ProviderName> run the ORIGINAL
model on that onnxruntime provider (runtime.check.OriginalOnProvider). A node that provider has no
kernel for is cut out as `check` does: the outputs it produces are marked "not run on the provider",
and a value it produces that another node reads is computed by ONNX semantics (the hybrid oracle),
so the rest of the model still runs on the provider.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from onnx_dml_lowering.runtime.check import OriginalOnProvider, make_oracle, plan_backends
from onnx_dml_lowering.runtime.feeds import check_feeds, with_defaults


@dataclass
class BackendRun:
    """One backend's outputs on one feed set, and what it could not run."""
    backend: str
    outputs: "dict[str, np.ndarray]" = field(default_factory=dict)
    not_run: "dict[str, str]" = field(default_factory=dict)     # output -> why the provider did not run it
    notes: "list[str]" = field(default_factory=list)             # one line each
    by_semantics: "list[str]" = field(default_factory=list)      # nodes without a kernel whose values ONNX semantics gave


class RunBackends:
    """The backends of one `run`, planned once (an unknown backend is a usage error; one this
    machine lacks is one UNAVAILABLE line while the rest run) and run on each feed set."""

    def __init__(self, compiled, backends: "list[str]", providers: "list[str] | None" = None,
                 provider_options: "list[str] | None" = None, ep_libraries: "list[str] | None" = None,
                 no_fallback: bool = False, strict: "bool | None" = None, memory_limit=None,
                 session_settings=None) -> None:
        specs, self.unavailable = plan_backends(backends, provider_options, ep_libraries)
        self.compiled = compiled
        self.backends = [b for b in backends if b not in self.unavailable]
        self.providers = providers
        self.strict = strict
        self.memory_limit = memory_limit
        self.settings = session_settings         # --session-config / --threads / --graph-optimization-level
        self.originals = {b: OriginalOnProvider(compiled, specs[b], no_fallback, session_settings)
                          for b in self.backends if b in specs}

    def run(self, backend: str, feeds: "dict[str, np.ndarray]") -> BackendRun:
        if backend in self.originals:
            return self._original(backend, feeds)
        compiled = self.compiled
        providers = self.providers if backend == "ort" else None
        outputs = compiled.run(feeds, backend=backend, providers=providers, strict=self.strict,
                               memory_limit=self.memory_limit, session_settings=self.settings)
        unvalidated = compiled.session(backend, providers, self.settings).unvalidated_outputs
        return BackendRun(backend, dict(outputs), {n: unvalidated[n] for n in outputs if n in unvalidated})

    def _original(self, backend: str, feeds: "dict[str, np.ndarray]") -> BackendRun:
        compiled = self.compiled
        original = self.originals[backend]
        full, _ = with_defaults(check_feeds(compiled.inputs, feeds, compiled.optional_inputs),
                                compiled.optional_inputs, compiled.initializers)
        oracle = []                     # computed once, only when a cut node's value is read

        def oracle_value(name: str) -> np.ndarray:
            if not oracle:
                oracle.append(make_oracle(compiled, settings=self.settings))
                oracle[0].run(full)
            return oracle[0].values[name]

        outputs = original.run(full, oracle_value)
        result = BackendRun(backend, {n: outputs[n] for n in compiled.output_names if n in outputs})
        provider = original.provider.name
        for name in compiled.output_names:
            if name in original.cut_outputs:
                result.not_run[name] = f"node {original.cut_outputs[name]} has no {provider} kernel"
        for node, reason in original.unsupported.items():
            fed = sorted(v for v, n in original.cut_outputs.items() if n == node and v in original.fed)
            line = f"node {node}: no {provider} kernel, not run ({reason.splitlines()[0][:160]})"
            if fed:
                line += f"; {', '.join(fed)} computed by ONNX semantics for the nodes reading it"
                result.by_semantics.append(node)
            result.notes.append(line)
        return result


def preview(value: np.ndarray, count: int = 8) -> "list":
    """The first `count` elements, as JSON numbers / booleans / strings (a non-finite float stays a
    float: the --json writer encodes it as every --json does, "NaN" / "Infinity" / "-Infinity")."""
    flat = np.asarray(value).reshape(-1)[:count]
    if flat.dtype.kind in "biuf":
        return flat.tolist()
    return [str(v) for v in flat.tolist()]


def run_record(run: BackendRun, feeds: "dict[str, np.ndarray]", defaults: "dict[str, np.ndarray]") -> dict:
    """One backend's entry of `run --json`."""
    def described(value) -> dict:
        value = np.asarray(value)
        return {"dtype": str(value.dtype), "shape": list(value.shape), "preview": preview(value)}
    return {"backend": run.backend,
            "outputs": {name: described(value) for name, value in run.outputs.items()},
            "not_run": dict(run.not_run),
            "notes": list(run.notes),
            "feeds": {name: described(value) for name, value in feeds.items()},
            "initializer_defaults": {name: described(value) for name, value in defaults.items()}}
