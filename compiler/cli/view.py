"""dml-lower view: the model in Google's Model Explorer, with node-data overlays (compiler/explorer.py)."""
from __future__ import annotations


def add_view_parser(sub) -> None:
    """The view subcommand."""
    p = sub.add_parser("view", help="open the model in Google's Model Explorer with overlays (extra [view])")
    p.add_argument("model", help="path to an .onnx model")
    p.add_argument("--overlay", action="append", default=[], metavar="F.json",
                   help="Model Explorer node data to load with it, as --model-explorer writes (repeatable)")
    p.add_argument("--no-open", action="store_true",
                   help="do not open a browser: print the address (a server on 127.0.0.1) and wait for Ctrl-C")
    p.add_argument("--port", type=int, default=0, metavar="N",
                   help="the server's port on 127.0.0.1 (default: a free one)")
    p.set_defaults(func=cmd_view)


def cmd_view(args) -> int:
    from onnx_dml_lowering.ir import DmlLowerError

    from ..explorer import serve
    if not 0 <= args.port <= 65535:
        raise DmlLowerError(f"--port {args.port}: a port is 1..65535 (0: a free one)")
    serve(args.model, args.overlay, open_browser=not args.no_open, port=args.port)
    return 0
