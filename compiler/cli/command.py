"""Commands and their option groups, after Polygraphy's Tool and argument groups. A command is a
class that lists the groups it takes (and, where its --help interleaves them, the order their
options appear in); `add_command` builds its subparser from them and `Parsed` reads them into
typed values, each group once, by the group's type. A group that needs another's value asks
`parsed` for it by type, never the namespace. Every group renders its value back as command-line
words (`tokens`): the zoo forwards them to each model's check, reduce prints its repro line with
them, and tests/compiler/cli/test_round_trip.py holds parse -> tokens -> parse to the same values."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Generic, Iterable, Sequence, TypeVar

T = TypeVar("T")

# A parser's record of which group declared each of its option strings (test_groups.py reads it).
DECLARED_BY = "dml_lower_declared_by"
# Where the parsed namespace holds the Command chosen (the subparsers' own dest holds its name).
COMMAND = "dml_lower_command"


@dataclass(frozen=True)
class Word:
    """One option as typed: `--strict`, `--seed 3`, `--outputs a b`; a positional has no option."""
    option: str
    values: "tuple[str, ...]" = ()


def argv(words: "Iterable[Word]", joined: bool = True) -> "list[str]":
    """The words as an argument vector. `joined` writes a one-value option as --option=value, so a
    value such as -1 cannot read as an option (what a program passes on); else --option value."""
    out: "list[str]" = []
    for word in words:
        if not word.option:
            out += word.values
        elif joined and len(word.values) == 1:
            out.append(f"{word.option}={word.values[0]}")
        else:
            out += [word.option, *word.values]
    return out


def line(words: "Iterable[Word]") -> str:
    """The words as a person types them (reduce's repro line)."""
    return " ".join(argv(words, joined=False))


def flag(option: str, on: bool) -> "list[Word]":
    return [Word(option)] if on else []


def option_value(option: str, given: Any, default: Any = None) -> "list[Word]":
    """One --option VALUE, left out at its default (None: not given)."""
    return [] if given is None or given == default else [Word(option, (str(given),))]


def each(option: str, given: "Iterable[Any] | None") -> "list[Word]":
    """A repeatable option, once per value in order."""
    return [Word(option, (str(item),)) for item in given or ()]


def _given(read: "Callable[[str], Any] | None") -> "Callable[[str], Any]":
    """An option's reader that refuses an empty value first: no option takes one, and a path ''
    would name the working folder (Path('') is Path('.')): `--inputs "$UNSET"` fed random values and
    `check ""` checked every model below the working folder."""
    def value(text: str) -> Any:
        if text == "":
            raise argparse.ArgumentTypeError("an empty value names nothing (a variable that was never set?)")
        return text if read is None else read(text)
    value.__name__ = getattr(read, "__name__", "value")      # argparse names a failed reader by it
    return value


class ArgGroup(Generic[T]):
    """A group of options: declared on a parser by add (or its add_... placements, recording the
    group), read once into a T by parse, written back as words by tokens."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        raise NotImplementedError(type(self).__name__)

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> T:
        raise NotImplementedError(type(self).__name__)

    def tokens(self, value: T) -> "list[Word]":
        raise NotImplementedError(type(self).__name__)

    def _add(self, parser: argparse.ArgumentParser, *names: str, **kwargs: Any) -> argparse.Action:
        if kwargs.get("action") in (None, "store", "append", "extend"):
            kwargs["type"] = _given(kwargs.get("type"))
        action = parser.add_argument(*names, **kwargs)
        record = parser.__dict__.setdefault(DECLARED_BY, {})
        for name in action.option_strings or [action.dest]:
            record[name] = type(self).__name__
        return action


class Command:
    """One subcommand: its name, its one-line help, the groups it takes and what it runs.
    `layout` is the order the groups' options take in --help (default: each group's add, in
    order); a command with `children` (conformance) only chooses between them."""
    name: ClassVar[str]
    help: ClassVar[str]
    dest: ClassVar[str] = "action"          # a parent's: where argparse records the child chosen

    def __init__(self, *groups: ArgGroup, children: "Sequence[Command]" = ()) -> None:
        self.groups, self.children = groups, children

    def layout(self) -> "Sequence[Callable[[argparse.ArgumentParser], None]]":
        return [group.add for group in self.groups]

    def run(self, parsed: Parsed) -> int:
        raise NotImplementedError(self.name)

    def group(self, kind: "type[ArgGroup[T]]") -> "ArgGroup[T] | None":
        return next((g for g in self.groups if isinstance(g, kind)), None)

    def tokens(self, values: "dict[type, Any]") -> "list[Word]":
        """The words of every group with a value here, in the command's group order."""
        return [word for group in self.groups if type(group) in values
                for word in group.tokens(values[type(group)])]


def add_command(sub: Any, command: Command, parser_class: type) -> argparse.ArgumentParser:
    """The one place a subparser is built: from the command's groups, in its layout's order."""
    parser = sub.add_parser(command.name, help=command.help)
    if command.children:
        choose = parser.add_subparsers(dest=command.dest, required=True, parser_class=parser_class)
        for child in command.children:
            add_command(choose, child, parser_class)
        return parser
    for place in command.layout():
        place(parser)
    parser.set_defaults(**{COMMAND: command})
    return parser


def parsed_command(args: argparse.Namespace) -> "Parsed":
    """The command a namespace chose, with its values to parse."""
    return Parsed(getattr(args, COMMAND), args)


class Parsed:
    """One command line's values, by group type: the one place groups are parsed. Each group is
    parsed once, when the command (or another group) first asks for it, so a usage error is
    reported where the command reaches that group (a zoo's per-model options in each model's
    check) and a group another reads is parsed before it."""

    def __init__(self, command: Command, args: argparse.Namespace) -> None:
        self.command, self.args = command, args
        self._values: "dict[type, Any]" = {}

    def __getitem__(self, kind: "type[ArgGroup[T]]") -> T:
        group = self.command.group(kind)
        if group is None:
            raise KeyError(f"{self.command.name} takes no {kind.__name__}")
        if kind not in self._values:
            self._values[kind] = group.parse(self.args, self)
        return self._values[kind]

    def get(self, kind: "type[ArgGroup[T]]") -> "T | None":
        """The group's value, None when the command does not take it."""
        return self[kind] if self.command.group(kind) is not None else None

    def values(self) -> "dict[type, Any]":
        """Every group's value, in the command's order (the round-trip test, the zoo)."""
        return {type(group): self[type(group)] for group in self.command.groups}
