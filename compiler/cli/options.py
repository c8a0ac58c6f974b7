"""What every dml-lower command shares: the argument parser class (one-line usage errors, defaults
in --help) and the options of other tools users type by habit."""
from __future__ import annotations

from typing import Any, NoReturn

import argparse


class HelpFormatter(argparse.HelpFormatter):
    """Every option with a default says it, as '(default: X)', unless its help already does
    (a default that is not a plain value, 'default: random'). None and False are not defaults
    worth saying (the option is off / unset)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or any(default is off for off in (None, False, argparse.SUPPRESS))
                or not action.option_strings
                or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
            return text
        return f"{text} (default: {default})"


class Parser(argparse.ArgumentParser):
    """Usage errors are one line, `dml-lower: error: ...` exit 2, from every (sub)command, pointing
    at its --help instead of printing usage; every --help shows the defaults (HelpFormatter)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_command(self, argv: "list[str]") -> argparse.Namespace:
        """parse_args, but an option no parser knows is reported by the (sub)command it was typed
        to, so the line points at that command's --help ('dml-lower check --help'), not the top's."""
        args, extras = self.parse_known_args(argv)
        if extras:
            self._chosen(args).error(f"unrecognized arguments: {' '.join(extras)}")
        return args

    def _chosen(self, args: argparse.Namespace) -> argparse.ArgumentParser:
        """The deepest subparser `args` went through (dml-lower -> conformance -> run)."""
        parser: argparse.ArgumentParser = self
        while True:
            chooser = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            name = getattr(args, chooser.dest, None) if chooser is not None else None
            if chooser is None or name is None or name not in chooser.choices:
                return parser
            parser = chooser.choices[name]

    def error(self, message: str) -> NoReturn:
        from onnx_dml_lowering.ir.display import display   # the message quotes what was typed
        if message.startswith("unrecognized arguments: "):
            for token in message.split()[2:]:
                if token.partition("=")[0] in FOREIGN_OPTIONS:
                    self.exit(2, f"dml-lower: error: {FOREIGN_OPTIONS[token.partition('=')[0]]}\n")
        self.exit(2, f"dml-lower: error: {display(message)} (see '{self.prog} --help')\n")


# Options of other tools (Polygraphy) users type by habit: what to use here, in one line.
FOREIGN_OPTIONS = {
    "--input-shapes": "--input-shapes is Polygraphy's option: here each symbolic input dimension takes its size "
                      "from --dim NAME=SIZE (repeatable; e.g. --dim batch=1 --dim seq=128)",
}
