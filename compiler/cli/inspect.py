"""dml-lower inspect: what a model holds and what would lower (the report is compiler/inspection.py)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from .command import ArgGroup, Command, Parsed, Word, each, flag, option_value
from .groups import ModelArgs, OrtVersionArgs
from .output_groups import ExplorerArgs, JsonArgs


@dataclass(frozen=True)
class EpQuery:
    """--ep dml and what it assumes of the device (--device-lacks), checks on the real EP
    (--verify), models (--ort-version) and draws (--html)."""
    ep: "str | None" = None
    device_lacks: "tuple[str, ...]" = ()
    verify: bool = False
    ort_version: "str | None" = None
    html: "str | None" = None


class EpArgs(ArgGroup[EpQuery]):
    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--ep", choices=["dml"], help="also predict which nodes onnxruntime's DirectML EP runs and "
                  "which fall back to the CPU, why, and the copies between them (the table of --ort-version)")
        self._add(parser, "--device-lacks", action="append", default=[], metavar="TYPE",
                  choices=["int64", "uint64", "double", "float16"],
                  help="with --ep dml: assume the GPU lacks this data type (repeatable; default: it has all)")
        self._add(parser, "--verify", action="store_true",
                  help="with --ep dml: also run the model on the real DML EP (onnxruntime.dll; under Wine off Windows, "
                  "make directml) and show its provider beside the predicted one for every node")
        OrtVersionArgs("the placement and --verify", "with --ep dml").add(parser)
        self._add(parser, "--html", metavar="F.html",
                  help="with --ep dml: also draw the placement as a self-contained HTML/SVG page here")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> EpQuery:
        return EpQuery(ep=args.ep, device_lacks=tuple(args.device_lacks), verify=args.verify,
                       ort_version=args.ort_version, html=args.html)

    def tokens(self, query: EpQuery) -> "list[Word]":
        return [*option_value("--ep", query.ep), *each("--device-lacks", query.device_lacks),
                *flag("--verify", query.verify), *option_value("--ort-version", query.ort_version),
                *option_value("--html", query.html)]


class Inspect(Command):
    name, help = "inspect", "summarise a model and say which anchors would lower at a level"

    def __init__(self) -> None:
        super().__init__(ModelArgs(verbose=False), JsonArgs("inspect"), EpArgs(), ExplorerArgs("inspect"))

    def run(self, parsed: Parsed) -> int:
        from ..inspection import inspect_command
        model, query = parsed[ModelArgs], parsed[EpArgs]
        return inspect_command(model.path, str(model.feature_level), query.ep, query.device_lacks, query.verify,
                               query.ort_version, (parsed[JsonArgs], query.html, parsed[ExplorerArgs]))
