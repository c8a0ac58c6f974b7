"""dml-lower compile: the lowered graph, the placement report and, with --dim, the run-time
descriptors at those sizes."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..output_files import check_outputs, write_json
from .feeds import known_dims
from .groups import DimArgs, ModelArgs

if TYPE_CHECKING:
    from ..compiled import CompiledModel

MODEL, DIMS = ModelArgs(), DimArgs("compile")


def add_compile_parser(sub) -> None:
    """The compile subcommand."""
    p = sub.add_parser("compile", help="lower and print the graph and the placement report")
    MODEL.add(p)
    p.add_argument("--json", metavar="F.json", help="write placement and graph as JSON here")
    p.add_argument("--model-explorer", metavar="F.json",
                   help="also write the lowering as Model Explorer node data here (open with dml-lower view; "
                        "extra [view])")
    DIMS.add(p)
    p.set_defaults(func=cmd_compile)


def format_placement(compiled: CompiledModel) -> str:
    from onnx_dml_lowering.runtime.report import format_placement as fmt
    return fmt(compiled.placement, compiled.feature_level)


def cmd_compile(args) -> int:
    if args.model_explorer:
        from ..explorer import require_view
        require_view("--model-explorer")
    check_outputs(("--json", args.json), ("--model-explorer", args.model_explorer))
    dims = DIMS.parse(args)
    from onnx_dml_lowering.ir import format_graph

    from ..compiled import compile_model
    model = MODEL.parse(args)
    compiled = compile_model(model.path, feature_level=model.feature_level)
    dims = known_dims(compiled, dims)       # a name no input dimension has: refused before any output
    print(format_graph(compiled.graph))
    print()
    print(format_placement(compiled))
    data = compiled.to_dict()
    if args.dim:
        data["specialised"] = _specialised(compiled, dims)
    if args.json:
        write_json(args.json, "the compile JSON", data)
        print(f"\nwrote {args.json}")
    if args.model_explorer:
        from onnx_dml_lowering.ir.display import display

        from ..explorer import write_overlays
        from ..overlays import compiled_lowering
        print()
        for line in write_overlays(model.path, args.model_explorer, [compiled_lowering(compiled)]):
            print(display(line))
    return 0


def _specialised(compiled: CompiledModel, dims: "dict[str, int]") -> dict:
    """compile --dim: the run-time steps specialised at those sizes, printed and returned for --json."""
    from ..specialise import format_specialised, specialise
    spec = specialise(compiled, dims)
    print()
    print(format_specialised(spec))
    return spec
