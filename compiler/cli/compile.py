"""dml-lower compile: the lowered graph, the placement report and, with --dim, the run-time
descriptors at those sizes (a run, bounded by --memory-limit)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..output_files import check_outputs, write_json
from .command import Command, Parsed
from .feeds import known_dims, memory_limit
from .groups import DimArgs, FeedArgs, ModelArgs
from .output_groups import ExplorerArgs, JsonArgs
from .reads import files_read

if TYPE_CHECKING:
    from ..compiled import CompiledModel


class Compile(Command):
    name, help = "compile", "lower and print the graph and the placement report"

    def __init__(self) -> None:
        super().__init__(ModelArgs(), JsonArgs("compile"), ExplorerArgs("compile"), DimArgs("compile"),
                         FeedArgs(only="memory-limit", use="compile"))

    def run(self, parsed: Parsed) -> int:
        return cmd_compile(parsed)


def format_placement(compiled: CompiledModel) -> str:
    from onnx_dml_lowering.runtime.report import format_placement as fmt
    return fmt(compiled.placement, compiled.feature_level)


def cmd_compile(parsed: Parsed) -> int:
    json_out, explorer_out = parsed[JsonArgs], parsed[ExplorerArgs]
    if explorer_out:
        from ..explorer import require_view
        require_view("--model-explorer")
    check_outputs(("--json", json_out), ("--model-explorer", explorer_out), reads=files_read(parsed))
    dims, feeds = parsed[DimArgs], parsed[FeedArgs]
    if feeds.memory_limit is not None and not dims:
        from onnx_dml_lowering.ir import DmlLowerError
        raise DmlLowerError("--memory-limit bounds the run --dim makes: add --dim")
    from onnx_dml_lowering.ir import format_graph

    from ..compiled import compile_model
    model = parsed[ModelArgs]
    compiled = compile_model(model.path, feature_level=model.feature_level)
    dims = known_dims(compiled, dims)       # a name no input dimension has: refused before any output
    # the run --dim makes, before any output too: past --memory-limit it is the one error line
    spec = None
    if parsed[DimArgs]:
        from ..specialise import specialise
        spec = specialise(compiled, dims, memory_limit(feeds))
    print(format_graph(compiled.graph, {vi.name for vi in compiled.model.graph.input}))
    print()
    print(format_placement(compiled))
    data = compiled.to_dict()
    if spec is not None:
        from ..specialise import format_specialised
        print()
        print(format_specialised(spec))
        data["specialised"] = spec
    if json_out:
        write_json(json_out, "the compile JSON", data, lead="\n")
    if explorer_out:
        from onnx_dml_lowering.ir.display import display

        from ..explorer import write_overlays
        from ..overlays import compiled_lowering
        print()
        for line in write_overlays(model.path, explorer_out, [compiled_lowering(compiled)]):
            print(display(line))
    return 0

