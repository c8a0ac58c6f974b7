"""dml-lower demo: compile, run and check the bundled example models."""
from __future__ import annotations

from .groups import FeatureLevelArgs, FeedArgs

LEVEL, FEEDS = FeatureLevelArgs(), FeedArgs()


def add_demo_parser(sub) -> None:
    """The demo subcommand."""
    p = sub.add_parser("demo", help="compile, run and check the bundled example models")
    LEVEL.add(p)
    FEEDS.add_seed(p)
    p.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    from onnx_dml_lowering.runtime.check import Tolerances, check
    from onnx_dml_lowering.runtime.feeds import random_feeds
    from onnx_dml_lowering.runtime.report import format_text

    from onnx_dml_lowering.ir import format_graph

    from ..compiled import compile_model
    from ..examples import example_paths
    level = LEVEL.required(args)
    failures = 0
    for path in example_paths():
        print("=" * 78)
        compiled = compile_model(path, feature_level=level)
        print(f"{path.name}: {len(compiled.model.graph.node)} ONNX nodes, "
              f"{len(compiled.graph.dml_operators)} DirectML operators at feature level {compiled.feature_level}")
        print(format_graph(compiled.graph))
        _, report = check(compiled, random_feeds(compiled.inputs, seed=args.seed), ["cpu"], Tolerances(),
                          model_name=path.name)
        print(format_text(report))
        failures += not report.ok
    print("=" * 78)
    print("demo: every example matches ONNX semantics" if not failures
          else f"demo: {failures} example(s) MISMATCH")
    return 0 if not failures else 1
