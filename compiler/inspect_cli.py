"""dml-lower inspect: what a model holds and what would lower (the report is inspect_cmd.py)."""
from __future__ import annotations



def add_inspect_parser(sub) -> None:
    """The inspect subcommand."""
    p = sub.add_parser("inspect", help="summarise a model and say which anchors would lower at a level")
    p.add_argument("model", help="path to an .onnx model")
    p.add_argument("--feature-level", default="5_1", metavar="L", help="DirectML feature level, 1_0 .. 6_4")
    p.add_argument("--json", metavar="F.json", help="write the report as JSON here")
    p.set_defaults(func=cmd_inspect)


def cmd_inspect(args) -> int:
    from .inspect_cmd import cmd_inspect as run
    return run(args)
