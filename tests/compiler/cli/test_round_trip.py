"""Commands declare their option groups (compiler/cli/command.py): every option of every command
belongs to a group, and each group writes its parsed value back as words that parse to the same
value (what the zoo forwards to each model's check and reduce prints as its repro line)."""
from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnx_dml_lowering.compiler.cli import build_parser
from onnx_dml_lowering.compiler.cli.command import COMMAND, DECLARED_BY, argv, line, parsed_command
from onnx_dml_lowering.compiler.cli.feeds import attach_signed_values
from onnx_dml_lowering.compiler.cli.program import COMMANDS

SPIN = "session.intra_op.allow_spinning=0"
# Argument vectors per command: together they give every option of the command (held below).
VECTORS = {
    "compile": [["m.onnx"], ["m.onnx", "-v", "--feature-level", "4_0", "--json", "o.json", "--model-explorer", "e.json",
                             "--dim", "n=3", "--dim", "m=0", "--memory-limit", "1GiB"]],
    "run": [["m.onnx"],
            ["m.onnx", "--seed", "7", "--dim", "n=4", "--dim", "b=1", "--zero-fraction", "0.25", "--zero-fraction", "x:1",
             "--val-range", "-1,1", "--val-range", "x:[0,5]", "--strict", "--feed-initializers", "--memory-limit", "1GiB",
             "--names-where-present", "-q", "--save-inputs", "i.npz", "--save-outputs", "o.npz", "--json", "r.json"],
            ["m.onnx", "--inputs", "f.npz", "--backend", "ort", "--providers", "cpu,dml", "--no-fallback",
             "--provider-model", "modified", "--fail-on-partial", "--provider-option", "device_type=CPU",
             "--ep-library", "X=/x.so", "--session-config", SPIN, "--graph-optimization-level", "BASIC",
             "--threads", "2", "--verbose", "--feature-level", "DML_FEATURE_LEVEL_5_1"],
            ["m.onnx", "--data-loader-script", "load.py:make", "--backends", "cpu,ort-cpu,dml"]],
    "check": [["m.onnx"],
              ["m.onnx", "m2.onnx", "--iterations", "3", "--seed", "2", "--backends", "cpu,ort-cpu", "--oracle", "reference",
               "--outputs", "a", "b", "--load-outputs", "s.npz", "--save-outputs", "o.npz", "--save-inputs", "i.npz",
               "-q", "--atol", "1e-3", "--atol", "y=0", "--rtol", "0.5", "--rtol", "y=1e-9", "--json", "r.json",
               "--markdown", "r.md", "--localize", "--model-explorer", "e.json", "--jobs", "2", "--junit", "j.xml",
               "--executor", "ray", "--ray-address", "10.0.0.1:6379"],
              ["m.onnx", "--outputs", "all", "--provider-option", "a=b", "--ep-library", "X=/x.so",
               "--no-fallback", "--provider-model", "modified", "--fail-on-partial", "--session-config", SPIN,
               "--graph-optimization-level", "disable", "--threads", "0", "--strict", "--memory-limit", "2GB", "-v",
               "--feature-level", "3_0", "--dim", "n=2", "--val-range", "0,1", "--zero-fraction", "0",
               "--feed-initializers", "--names-where-present"],
              ["m.onnx", "--data-loader-script", "d.py"],
              ["m.onnx", "--inputs", "f.npz", "--memory-limit", "1GB"]],     # --dim with --inputs: refused
    "capabilities": [[], ["--feature-level", "4_0", "--markdown"], ["--device", "--json", "d.json"]],
    "conformance export": [["suite"], ["suite", "--feature-level", "3_0", "--seeds", "5", "--ort-version", "1.24.4"]],
    "conformance run": [["suite"], ["suite", "--backends", "cpu,ort-cpu", "--filter", "test_eye*", "--provider-option",
                                    "a=b", "--ep-library", "X=/x.so", "--no-fallback", "--provider-model", "modified",
                                    "--fail-on-partial", "--threads", "0", "--session-config", SPIN,
                                    "--graph-optimization-level", "all", "--memory-limit", "512MiB"]],
    "optimize": [["m.onnx", "-o", "out.onnx"],
                 ["m.onnx", "-o", "out.onnx", "--feature-level", "4_0", "--min-bytes", "10", "--check", "--dim", "n=2",
                  "--sweep", "8,1,3,1", "-v", "--memory-limit", "2GB"],
                 ["m.onnx", "--output", "out.onnx", "--for", "dml", "--ort-version", "1.24.4", "--check", "--inputs",
                  "f.npz"]],
    "inspect": [["m.onnx"], ["m.onnx", "--feature-level", "6_0", "--json", "r.json", "--ep", "dml", "--device-lacks",
                             "int64", "--device-lacks", "double", "--verify", "--ort-version", "1.27.0", "--html",
                             "p.html", "--model-explorer", "e.json"]],
    "reduce": [["m.onnx", "-o", "min.onnx", "--backends", "cpu"],
               ["m.onnx", "-o", "min.onnx", "--backends", "ort-cpu", "--status", "error", "--oracle", "g.npz",
                "--atol", "1e-4", "--rtol", "out=0.25", "--seed", "3", "--session-config", SPIN,
                "--provider-option", "a=b", "--ep-library", "X=/x.so", "--no-fallback", "--provider-model", "modified",
                "--threads", "1", "--graph-optimization-level", "extended", "--inputs", "f.npz", "-v"],
               ["m.onnx", "-o", "min.onnx", "--backends", "dml", "--feature-level", "4_0", "--names-where-present",
                "--dim", "n=4",
                "--strict", "--zero-fraction", "0.5", "--val-range", "0,3", "--feed-initializers", "--memory-limit", "1GB"],
               ["m.onnx", "-o", "min.onnx", "--backends", "cpu", "--data-loader-script", "d.py:feeds"]],
    "view": [["m.onnx"], ["m.onnx", "--overlay", "a.json", "--overlay", "b.json", "--no-open", "--port", "8080"]],
    "demo": [[], ["--feature-level", "4_0", "--seed", "9"]],
}


def commands() -> "list[tuple[str, argparse.ArgumentParser]]":
    """Every command that runs (conformance's export and run, not conformance), with its parser."""
    found = []

    def walk(parser: argparse.ArgumentParser, path: "list[str]") -> None:
        choosers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for chooser in choosers:
            for name, child in chooser.choices.items():
                walk(child, path + [name])
        if not choosers and path:
            found.append((" ".join(path), parser))
    walk(build_parser(), [])
    return found


COMMAND_PARSERS = commands()


def parse(path: str, words: "list[str]"):
    return parsed_command(build_parser().parse_command(attach_signed_values([*path.split(), *words])))


def round_trip(path: str, words: "list[str]") -> None:
    parsed = parse(path, words)
    values = parsed.values()
    written = argv(parsed.command.tokens(values))
    again = parse(path, written)
    assert again.values() == values, (words, written)
    # as a person types them (reduce's repro line) they parse the same
    assert parse(path, line(parsed.command.tokens(values)).split()).values() == values


def test_every_command_has_vectors():
    assert sorted(VECTORS) == sorted(path for path, _ in COMMAND_PARSERS)
    assert len(COMMAND_PARSERS) == sum(1 + len(c.children) - bool(c.children) for c in COMMANDS)


@pytest.mark.parametrize("path, words", [(path, words) for path, vectors in VECTORS.items() for words in vectors],
                         ids=[f"{path}-{i}" for path, vectors in VECTORS.items() for i in range(len(vectors))])
def test_parse_then_write_back_gives_the_same_values(path, words):
    round_trip(path, words)


@pytest.mark.parametrize("path, parser", COMMAND_PARSERS, ids=[path for path, _ in COMMAND_PARSERS])
def test_every_option_belongs_to_a_group_and_is_exercised(path, parser):
    """No command declares an option itself, and the vectors above give every option (so an option
    added to a group without writing it back fails the round trip)."""
    record = getattr(parser, DECLARED_BY, {})
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    assert [a.dest for a in actions if not set(a.option_strings or [a.dest]) & set(record)] == []
    given_words = {word.partition("=")[0] for words in VECTORS[path] for word in words}
    missing = [a.option_strings for a in actions if a.option_strings and not set(a.option_strings) & given_words]
    assert missing == []
    assert isinstance(parser.get_default(COMMAND), type(parsed_command(parser.parse_args(VECTORS[path][0])).command))


def test_an_unwritten_option_fails_the_round_trip():
    """The round trip can fail: a group whose words leave out a value it parsed."""
    from onnx_dml_lowering.compiler.cli.groups import FeedArgs
    check = next(c for c in COMMANDS if c.name == "check")
    feeds = check.group(FeedArgs)
    original = type(feeds).tokens
    try:
        type(feeds).tokens = lambda self, value: [w for w in original(self, value) if w.option != "--seed"]
        with pytest.raises(AssertionError):
            round_trip("check", ["m.onnx", "--seed", "4"])
    finally:
        type(feeds).tokens = original


names = st.text(alphabet="abcxyz_", min_size=1, max_size=4)
numbers = st.floats(min_value=0, max_value=10, allow_nan=False, allow_infinity=False)


@st.composite
def check_vectors(draw) -> "list[str]":
    """check's model, feed, backend, oracle and tolerance options, as a user might type them."""
    words = ["m.onnx", "--seed", str(draw(st.integers(0, 2**31))), "--iterations", str(draw(st.integers(1, 5)))]
    for name, size in draw(st.dictionaries(names, st.integers(0, 64), max_size=3)).items():
        words += ["--dim", f"{name}={size}"]
    for name in draw(st.lists(st.one_of(st.just(""), names), max_size=3)):
        lo, hi = sorted(draw(st.lists(numbers, min_size=2, max_size=2)))
        words += ["--val-range", f"{name + ':' if name else ''}{lo!r},{hi!r}"]
    for name in draw(st.lists(names, max_size=2)):
        words += ["--zero-fraction", f"{name}:{draw(st.floats(0, 1))!r}"]
    words += ["--backends", ",".join(draw(st.lists(st.sampled_from(["cpu", "ort", "dml", "ort-cpu", "ort-dml"]),
                                                   min_size=1, max_size=3, unique=True)))]
    words += ["--oracle", draw(st.sampled_from(["hybrid", "reference", "ort-cpu", "golden.npz"]))]
    for option in ("--atol", "--rtol"):
        # each tolerance once (one given two values is refused: which one counts would be a guess)
        for name in draw(st.lists(st.one_of(st.just(""), names), max_size=3, unique=True)):
            words += [option, f"{name + '=' if name else ''}{draw(numbers)!r}"]
    for option in ("--strict", "--feed-initializers", "--no-fallback", "--fail-on-partial", "-v"):
        words += [option] if draw(st.booleans()) else []
    words += ["--memory-limit", draw(st.sampled_from(["1GiB", "512MiB", "3GB"]))] if draw(st.booleans()) else []
    return words


@settings(max_examples=60, deadline=None, derandomize=True)
@given(check_vectors())
def test_check_options_round_trip(words):
    round_trip("check", words)
