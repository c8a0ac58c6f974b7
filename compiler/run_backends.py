"""`dml-lower run --backends ...`: each backend's outputs on one feed set, and run's JSON record.

The backends are runtime.backends' (the ones check runs): cpu / ort run the lowered graph; a
provider backend runs the model as shipped, or with provider_model "modified" a copy in which a
node the provider has no kernel for is cut out and its value computed by ONNX semantics (the
hybrid oracle, evaluated only when such a value is read). A backend that ran part of the model
is PARTIAL, said as check says it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import brief
from onnx_dml_lowering.runtime.backend_names import BackendLike, BackendName, as_backend_name
from onnx_dml_lowering.runtime.backends import BackendOptions, Prepared, make_backends, schedule_reuse
from onnx_dml_lowering.runtime.oracle_on_demand import lazy_oracle
from onnx_dml_lowering.runtime.feeds import check_feeds, with_defaults


if TYPE_CHECKING:
    from .compiled import CompiledModel

@dataclass
class RunResult:
    """One backend's outputs on one feed set, and what it did not run itself."""
    backend: str
    outputs: "dict[str, np.ndarray]" = field(default_factory=dict)
    not_run: "dict[str, str]" = field(default_factory=dict)     # output -> why the backend did not produce it
    unvalidated: "dict[str, str]" = field(default_factory=dict) # output it gave but did not compute itself -> why
    notes: "list[str]" = field(default_factory=list)             # one line each
    partial: "dict[str, str]" = field(default_factory=dict)      # node -> why the backend did not run it
    ran: str = ""                                                # what a provider backend ran
    error: str = ""                                              # the backend failed: ERROR

    @property
    def status(self) -> str:
        """error | partial | ok, as check says them (run compares nothing, so never mismatch)."""
        if self.error:
            return "error"
        return "partial" if self.partial or self.not_run or self.unvalidated else "ok"

    def partial_text(self) -> str:
        from onnx_dml_lowering.runtime.compare import partial_clause     # check's wording, loaded when said
        return partial_clause(list(self.partial), [*self.not_run, *self.unvalidated], "not computed by it")


class RunBackends:
    """The backends of one `run`, planned and prepared once (an unknown backend is a usage error;
    one this machine lacks is one UNAVAILABLE line while the rest run; one that cannot load the
    model is its ERROR, as in check) and run on each feed set."""

    def __init__(self, compiled: CompiledModel, backends: "Sequence[BackendLike]", options: "BackendOptions | None" = None) -> None:
        self.compiled = compiled
        self.options = options or BackendOptions()
        self.runners, self.unavailable = make_backends(compiled, backends, self.options)
        self.backends = [b.name for b in self.runners]
        self.prepared: "dict[BackendName, Prepared]" = {}
        self.errors: "dict[BackendName, str]" = {}
        for runner in self.runners:
            try:
                self.prepared[runner.name] = runner.prepare()
            except DmlLowerError as exc:
                self.errors[runner.name] = str(exc)
        # a lowered backend takes a region run of the one before it on the same bytes (region_cache.py)
        schedule_reuse(compiled, None, [r for r in self.runners if r.name not in self.errors])

    def run(self, backend: BackendLike, feeds: "dict[str, np.ndarray]") -> RunResult:
        backend = as_backend_name(backend)
        if backend in self.errors:
            return RunResult(backend.text, error=self.errors[backend])
        runner = next(r for r in self.runners if r.name == backend)
        prepared = self.prepared[backend]
        compiled = self.compiled
        full, _ = with_defaults(check_feeds(compiled.inputs, feeds, compiled.optional_inputs),
                                compiled.optional_inputs, compiled.initializers)
        # A failure while running (the feeds do not suit the model, a limit) ends the command with
        # its one line, as before any backend existed; only loading the model is a backend's ERROR.
        oracle_value = lazy_oracle(compiled, full, prepared.needs, self.options.settings, self.options.memory_limit)
        done = runner.run(full, oracle_value)
        result = RunResult(backend.text, {n: done.outputs[n] for n in compiled.output_names if n in done.outputs},
                           {n: why for n, why in done.not_compared.items() if n not in done.outputs},
                           partial=dict(prepared.partial), ran=prepared.ran if backend.is_provider else "")
        unvalidated = {n: why for n, why in done.not_compared.items() if n in done.outputs}
        for name, why in unvalidated.items():    # produced, but not by the backend's own kernels
            result.notes.append(f"{name}: {why}")
        for node, why in prepared.partial.items():
            result.notes.append(f"node {node}: {brief(why.splitlines()[0] if why else why, 160)}")
        if done.fed:
            result.notes.append(f"{', '.join(done.fed)} computed by ONNX semantics for the nodes reading them")
        result.unvalidated = unvalidated
        return result


def preview(value: np.ndarray, count: int = 8) -> "list":
    """The first `count` elements, as JSON numbers / booleans / strings (a non-finite float stays a
    float: the --json writer encodes it as every --json does, "NaN" / "Infinity" / "-Infinity")."""
    flat = np.asarray(value).reshape(-1)[:count]
    if flat.dtype.kind in "biuf":
        return flat.tolist()
    return [str(v) for v in flat.tolist()]


def run_record(run: RunResult, feeds: "dict[str, np.ndarray]", defaults: "dict[str, np.ndarray]") -> dict:
    """One backend's entry of `run --json`."""
    def described(value: object) -> dict:
        value = np.asarray(value)
        return {"dtype": str(value.dtype), "shape": list(value.shape), "preview": preview(value)}
    return {"backend": run.backend, "status": run.status, "error": run.error, "ran": run.ran,
            "partial": dict(run.partial),
            "outputs": {name: described(value) for name, value in run.outputs.items()},
            "not_run": dict(run.not_run), "unvalidated": dict(run.unvalidated),
            "notes": list(run.notes),
            "feeds": {name: described(value) for name, value in feeds.items()},
            "initializer_defaults": {name: described(value) for name, value in defaults.items()}}
