"""lazy_oracle: the hybrid oracle of a backend run outside check (run, conformance run), made and
evaluated only when a value is first asked for (a node a provider has no kernel for, cut out). A
run that asks for none imports none of the oracle's modules either (runtime/oracle.py and its
region engine, ~10 ms of a provider-only `run`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

if TYPE_CHECKING:
    import numpy as np

    from onnx_dml_lowering.runtime.compiled_view import CompiledView
    from onnx_dml_lowering.runtime.oracle import Oracle
    from onnx_dml_lowering.runtime.ort.settings import SessionSettings


def lazy_oracle(compiled: CompiledView, feeds: Mapping[str, np.ndarray], needs: "set[str]",
                settings: "SessionSettings | None" = None, memory_limit: "int | str | None" = None
                ) -> Callable[[str], np.ndarray]:
    """oracle_value for a backend run outside check (run, conformance run): the hybrid oracle,
    evaluated on `feeds` the first time a value is asked for (a cut node's), never otherwise."""
    made: "list[Oracle]" = []

    def value(name: str) -> np.ndarray:
        if not made:
            from onnx_dml_lowering.runtime.oracle import make_oracle
            made.append(make_oracle(compiled, settings=settings, memory_limit=memory_limit))
            made[0].keep.update(needs)
            made[0].run(feeds)
        return made[0].values[name]
    return value
