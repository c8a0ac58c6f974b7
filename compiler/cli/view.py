"""dml-lower view: the model in Google's Model Explorer, with node-data overlays (compiler/explorer.py)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from .command import ArgGroup, Command, Parsed, Word, each, flag, option_value
from .groups import ModelArgs
from .numbers import whole_number


@dataclass(frozen=True)
class Viewed:
    """The overlays and how the server shows them."""
    overlays: "tuple[str, ...]" = ()
    open_browser: bool = True
    port: int = 0


class ViewArgs(ArgGroup[Viewed]):
    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--overlay", action="append", default=[], metavar="F.json",
                  help="Model Explorer node data to load with it, as --model-explorer writes (repeatable)")
        self._add(parser, "--no-open", action="store_true",
                  help="do not open a browser: print the address (a server on 127.0.0.1) and wait for Ctrl-C")
        self._add(parser, "--port", type=whole_number, default=0, metavar="N",
                  help="the server's port on 127.0.0.1 (default: a free one)")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Viewed:
        from onnx_dml_lowering.ir import DmlLowerError
        if not 0 <= args.port <= 65535:
            raise DmlLowerError(f"--port {args.port}: a port is 1..65535 (0: a free one)")
        return Viewed(overlays=tuple(args.overlay), open_browser=not args.no_open, port=args.port)

    def tokens(self, viewed: Viewed) -> "list[Word]":
        return [*each("--overlay", viewed.overlays), *flag("--no-open", not viewed.open_browser),
                *option_value("--port", viewed.port, 0)]


class View(Command):
    name, help = "view", "open the model in Google's Model Explorer with overlays (extra [view])"

    def __init__(self) -> None:
        super().__init__(ModelArgs(verbose=False, level=False), ViewArgs())

    def run(self, parsed: Parsed) -> int:
        from ..explorer import serve
        viewed = parsed[ViewArgs]
        serve(parsed[ModelArgs].path, list(viewed.overlays), open_browser=viewed.open_browser, port=viewed.port)
        return 0
