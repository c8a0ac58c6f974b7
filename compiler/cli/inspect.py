"""dml-lower inspect: what a model holds and what would lower (the report is compiler/inspection.py)."""
from __future__ import annotations

from .groups import ModelArgs

MODEL = ModelArgs(verbose=False)


def add_inspect_parser(sub) -> None:
    """The inspect subcommand."""
    p = sub.add_parser("inspect", help="summarise a model and say which anchors would lower at a level")
    MODEL.add(p)
    p.add_argument("--json", metavar="F.json", help="write the report as JSON here")
    p.add_argument("--ep", choices=["dml"], help="also predict which nodes onnxruntime's DirectML EP runs and "
                   "which fall back to the CPU, why, and the copies between them (the table of --ort-version)")
    p.add_argument("--device-lacks", action="append", default=[], metavar="TYPE",
                   choices=["int64", "uint64", "double", "float16"],
                   help="with --ep dml: assume the GPU lacks this data type (repeatable; default: it has all)")
    p.add_argument("--verify", action="store_true",
                   help="with --ep dml: also run the model on the real DML EP (onnxruntime.dll; under Wine off Windows, "
                   "make directml) and show its provider beside the predicted one for every node")
    p.add_argument("--ort-version", metavar="V",
                   help="with --ep dml: the onnxruntime whose DML registration table is modelled: 1.24.4 (measured) "
                   "or 1.27.0 (default: the installed DML EP's where its table is held, else 1.27.0)")
    p.add_argument("--html", metavar="F.html",
                   help="with --ep dml: also draw the placement as a self-contained HTML/SVG page here")
    p.add_argument("--model-explorer", metavar="F.json",
                   help="also write Model Explorer node data here: the lowering, and with --ep dml the predicted "
                        "placement beside it as F.placement.json (open with dml-lower view; extra [view])")
    p.set_defaults(func=cmd_inspect)


def cmd_inspect(args) -> int:
    from ..inspection import cmd_inspect as run
    return run(args)
