"""dml-lower demo: compile, run and check the bundled example models."""
from __future__ import annotations

from .command import Command, Parsed
from .groups import FeatureLevelArgs, FeedArgs


class Demo(Command):
    name, help = "demo", "compile, run and check the bundled example models"

    def __init__(self) -> None:
        super().__init__(FeatureLevelArgs(), FeedArgs(only="seed"))

    def run(self, parsed: Parsed) -> int:
        return cmd_demo(parsed)


def cmd_demo(parsed: Parsed) -> int:
    from onnx_dml_lowering.runtime.check import Tolerances, check
    from onnx_dml_lowering.runtime.feeds import random_feeds
    from onnx_dml_lowering.runtime.report import format_text

    from onnx_dml_lowering.ir import DEFAULT_LEVEL, format_graph

    from ..compiled import compile_model
    from ..examples import example_paths
    level = parsed[FeatureLevelArgs] or DEFAULT_LEVEL
    seed = parsed[FeedArgs].seed
    failures = 0
    for path in example_paths():
        print("=" * 78)
        compiled = compile_model(path, feature_level=level)
        print(f"{path.name}: {len(compiled.model.graph.node)} ONNX nodes, "
              f"{len(compiled.graph.dml_operators)} DirectML operators at feature level {compiled.feature_level}")
        print(format_graph(compiled.graph))
        _, report = check(compiled, random_feeds(compiled.inputs, seed=seed), ["cpu"], Tolerances(),
                          model_name=path.name)
        print(format_text(report))
        failures += not report.ok
    print("=" * 78)
    print("demo: every example matches ONNX semantics" if not failures
          else f"demo: {failures} example(s) MISMATCH")
    return 0 if not failures else 1
