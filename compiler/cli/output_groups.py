"""The option groups of what a command writes, declared once for every command that takes them:
--json, -q, --save-inputs / --save-outputs, --model-explorer and -o. The help says what the
command writes there (keyed by the command, as groups.py's variants are)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from .command import ArgGroup, Parsed, Word, flag, option_value

JSON_HELP = {
    "compile": "write placement and graph as JSON here",
    "run": "write per backend its outputs (dtype, shape, first values), the feeds and the initializer defaults used",
    "check": "write the report as JSON here",
    "capabilities": "with --device: write the device facts as JSON here",
    "inspect": "write the report as JSON here",
}


class JsonArgs(ArgGroup["str | None"]):
    """--json F.json: the command's report as JSON."""

    def __init__(self, use: str) -> None:
        self.use = use

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--json", metavar="F.json", help=JSON_HELP[self.use])

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> "str | None":
        return args.json

    def tokens(self, path: "str | None") -> "list[Word]":
        return option_value("--json", path)


QUIET_HELP = {
    "run": "print one line per backend: its outputs' dtypes and shapes",
    "check": "print only the lines that are not MATCH (and UNAVAILABLE backends) and the verdict",
}


class QuietArgs(ArgGroup[bool]):
    """-q / --quiet: the command's short output."""

    def __init__(self, use: str) -> None:
        self.use = use

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "-q", "--quiet", action="store_true", help=QUIET_HELP[self.use])

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> bool:
        return bool(args.quiet)

    def tokens(self, quiet: bool) -> "list[Word]":
        return flag("--quiet", quiet)


@dataclass(frozen=True)
class Saved:
    """Where the feeds (--save-inputs) and the outputs (--save-outputs) go, if anywhere."""
    inputs: "str | None" = None
    outputs: "str | None" = None

    def options(self, sets: "int | None") -> "list[tuple[str, str | None]]":
        """(option, path) of every file the saves write, for output_files.check_outputs: with
        `sets` feed sets known (--iterations), set #i's F.i.npz beside F.npz too, so another
        output naming one is refused before the run; the first SET_FILES_CHECKED of them (a data
        loader's unknown count, or more sets: the writer refuses such a file when it comes)."""
        from onnx_dml_lowering.runtime.output_target import set_path
        pairs: "list[tuple[str, str | None]]" = [("--save-outputs", self.outputs), ("--save-inputs", self.inputs)]
        for option, path in list(pairs):
            if path:
                pairs += [(f"{option} (feed set #{i})", set_path(path, i))
                          for i in range(1, min(sets or 1, SET_FILES_CHECKED))]
        return pairs


SET_FILES_CHECKED = 256


SAVE_HELP = {
    ("run", "inputs"): "write the feeds used to this .npz (replay with --inputs); several sets: F.npz, F.1.npz, ...",
    ("run", "outputs"): "write the outputs to this .npz (one backend); several feed sets: F.npz, F.1.npz, ...",
    ("check", "inputs"): "write the feeds used to this .npz (replay with --inputs); several feed sets: set #i to "
                         "F.i.npz beside F.npz (set #0)",
    ("check", "outputs"): "write the oracle's outputs (OUTPUT) and each backend's (BACKEND:OUTPUT); several feed "
                          "sets: set #i to F.i.npz beside F.npz (set #0)",
}


class SaveArgs(ArgGroup[Saved]):
    """--save-inputs / --save-outputs of run and check, each placed where the command's --help
    lists it (add_inputs, add_outputs)."""

    def __init__(self, use: str) -> None:
        self.use = use

    def add(self, parser: argparse.ArgumentParser) -> None:
        self.add_inputs(parser)
        self.add_outputs(parser)

    def add_inputs(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--save-inputs", metavar="F.npz", help=SAVE_HELP[self.use, "inputs"])

    def add_outputs(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--save-outputs", metavar="F.npz", help=SAVE_HELP[self.use, "outputs"])

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Saved:
        return Saved(inputs=args.save_inputs, outputs=args.save_outputs)

    def tokens(self, saved: Saved) -> "list[Word]":
        return option_value("--save-inputs", saved.inputs) + option_value("--save-outputs", saved.outputs)


EXPLORER_HELP = {
    "compile": "also write the lowering as Model Explorer node data here (open with dml-lower view; extra [view])",
    "check": "also write Model Explorer node data: the lowering here, each backend's largest error per node "
             "beside it as F.error-BACKEND.json (open with dml-lower view; extra [view])",
    "inspect": "also write Model Explorer node data here: the lowering, and with --ep dml the predicted placement "
               "beside it as F.placement.json (open with dml-lower view; extra [view])",
}


class ExplorerArgs(ArgGroup["str | None"]):
    """--model-explorer F.json: node data for Google's Model Explorer (dml-lower view)."""

    def __init__(self, use: str) -> None:
        self.use = use

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--model-explorer", metavar="F.json", help=EXPLORER_HELP[self.use])

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> "str | None":
        return args.model_explorer

    def tokens(self, path: "str | None") -> "list[Word]":
        return option_value("--model-explorer", path)


OUTPUT_HELP = {
    "reduce": ("MIN.onnx", "where to write the minimal model; its inputs go beside it (MIN.inputs.npz)"),
    "optimize": ("OUT.onnx", "where to write the optimized .onnx"),
}


class OutputArgs(ArgGroup[str]):
    """-o / --output, the model file the command writes (required)."""

    def __init__(self, use: str) -> None:
        self.use = use

    def add(self, parser: argparse.ArgumentParser) -> None:
        metavar, text = OUTPUT_HELP[self.use]
        self._add(parser, "-o", "--output", required=True, metavar=metavar, help=text)

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> str:
        return str(args.output)

    def tokens(self, path: str) -> "list[Word]":
        return [Word("--output", (path,))]
