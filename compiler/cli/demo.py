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
    from ..examples import describe, example_paths
    level = parsed[FeatureLevelArgs] or DEFAULT_LEVEL
    seed = parsed[FeedArgs].seed
    failures = 0
    paths = example_paths()
    # A newcomer's first output: say what follows before the graphs do.
    print(f"demo: the {len(paths)} bundled example models (compiler/examples): each one's lowered DirectML graph "
          f"(as `dml-lower compile` prints it), then its `dml-lower check` on the cpu emulator, random feeds "
          f"of seed {seed}")
    for path in paths:
        print("=" * 78)
        compiled = compile_model(path, feature_level=level)
        print(f"{path.name}: {len(compiled.model.graph.node)} ONNX nodes, "
              f"{len(compiled.graph.dml_operators)} DirectML operators at feature level {compiled.feature_level}")
        print(f"  {describe(path)}")
        print(format_graph(compiled.graph, {vi.name for vi in compiled.model.graph.input}))
        _, report = check(compiled, random_feeds(compiled.inputs, seed=seed), ["cpu"], Tolerances(),
                          model_name=path.name)
        print(format_text(report))
        failures += not report.ok
    print("=" * 78)
    print("demo: every example matches ONNX semantics" if not failures
          else f"demo: {failures} example(s) MISMATCH")
    print("next: `dml-lower inspect MODEL.onnx` and `dml-lower check MODEL.onnx` on a model of yours "
          "(README.md: a ten-minute walk-through)")
    return 0 if not failures else 1
