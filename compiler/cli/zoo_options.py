"""check's zoo options (--jobs, --junit, --executor, --ray-address) and the per-model options a zoo
hands each model's check: the words of check's groups that apply to one model, from their parsed
values (command.Parsed), so an option added to one of those groups is forwarded with it."""
from __future__ import annotations

import argparse

from onnx_dml_lowering.ir import DmlLowerError

from ..zoo import Zoo
from .command import ArgGroup, Parsed, Word, argv, option_value
from .numbers import whole_number


class ZooArgs(ArgGroup[Zoo]):
    """The zoo's own options: not forwarded to the per-model checks."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--jobs", type=whole_number, metavar="N",
                  help="several models: check at most N at a time, each in its own process (default: 1)")
        self._add(parser, "--junit", metavar="OUT.xml",
                  help="write a JUnit XML report: one testcase per model x backend")
        self._add(parser, "--executor", choices=("local", "ray"),
                  help="where the per-model checks run: local processes or Ray tasks (default: local)")
        self._add(parser, "--ray-address", metavar="ADDR",
                  help="with --executor ray: the cluster to join (default: a local Ray instance, 2 CPUs)")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Zoo:
        return Zoo(jobs=args.jobs, junit=args.junit, executor=args.executor, ray_address=args.ray_address)

    def tokens(self, zoo: Zoo) -> "list[Word]":
        return [*option_value("--jobs", zoo.jobs), *option_value("--junit", zoo.junit),
                *option_value("--executor", zoo.executor), *option_value("--ray-address", zoo.ray_address)]


def one_model_only(option: str, what: str, why: str, instead: str = "") -> DmlLowerError:
    """The one line for an option a zoo check cannot take: `what` it does ("works on one model's
    graph"), `why` the check is a zoo (Zoo.why), and what to do (`instead`, then checking alone)."""
    alone = "check one model file alone" if not why.startswith("--") else f"check one model file without {why}"
    return DmlLowerError(f"{option} {what}, and this check is a zoo ({why}): {instead}{alone}")


def refuse_one_model_files(given: "list[tuple[str, str | None]]", why: str) -> None:
    """(option, value) of options that write one model's file: given to a zoo, one error line."""
    for option, path in given:
        if path:
            raise one_model_only(option, "writes one model's file", why, "use --json / --junit, or ")


def forwarded_options(parsed: Parsed, forwarded: "tuple[type[ArgGroup], ...]") -> "list[str]":
    """The words of the command's `forwarded` groups, the model paths left out, as each model's
    check takes them (--option=value: a value such as -1 cannot read as an option)."""
    words = [word for group in parsed.command.groups if type(group) in forwarded
             for word in group.tokens(parsed[type(group)]) if word.option]
    return argv(words)
