"""The option groups (compiler/cli/groups.py): every shared option is declared by exactly one group
and by no command itself, on every subcommand; every command's --help reads as help.txt (the help
of main before the groups, changed only where an option changed on purpose: optimize's --sweep
and --dim, demo's --seed worded as every other --seed, --memory-limit on every command that runs a
model); --dim means one fixed size everywhere."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx_dml_lowering.compiler.cli import build_parser
from onnx_dml_lowering.compiler.cli.groups import DECLARED_BY, DimArgs, FeedArgs
from tests.builders import graph_model
from tests.cli_runner import cli

HELP = Path(__file__).parent / "help.txt"


def walk(parser: argparse.ArgumentParser, path: "list[str]"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk(child, path + [name])


PARSERS = list(walk(build_parser(), ["dml-lower"]))


def declarations() -> "dict[str, set[str]]":
    """Option string -> the groups that declared it, over every subcommand."""
    found: "dict[str, set[str]]" = {}
    for _, parser in PARSERS:
        for option, group in getattr(parser, DECLARED_BY, {}).items():
            found.setdefault(option, set()).add(group)
    return found


def declared_by_command(parser: argparse.ArgumentParser, grouped: "set[str]") -> "list[str]":
    """The grouped options this parser has that no group declared on it (a command's own copy)."""
    record = getattr(parser, DECLARED_BY, {})
    return [option for action in parser._actions for option in action.option_strings
            if option in grouped and option not in record]


SHARED = {"--feature-level", "--dim", "--backends", "--providers", "--inputs", "--seed", "--iterations",
          "--val-range", "--zero-fraction", "--data-loader-script", "--feed-initializers", "--memory-limit",
          "--strict", "--provider-option", "--ep-library", "--no-fallback", "--provider-model",
          "--fail-on-partial", "--session-config", "--graph-optimization-level", "--threads", "--atol",
          "--rtol", "--oracle"}


# Options two groups declare: one spelling, two meanings (each with why).
SPELLED_ALIKE = {"--markdown": "capabilities' flag (its tables as Markdown) and check's file (the report, F.md)"}


def test_each_shared_option_is_declared_by_one_group():
    found = declarations()
    assert SHARED <= set(found), sorted(SHARED - set(found))
    assert {option: groups for option, groups in found.items() if len(groups) != 1} == \
        {option: found[option] for option in SPELLED_ALIKE}
    assert all(len(found[option]) == 2 for option in SPELLED_ALIKE)


@pytest.mark.parametrize("path,parser", PARSERS, ids=[" ".join(p) for p, _ in PARSERS])
def test_no_command_declares_a_grouped_option_itself(path, parser):
    assert declared_by_command(parser, set(declarations())) == []


def test_a_command_declaring_a_grouped_option_itself_is_found():
    """The check above can fail: a parser that adds --dim by hand beside a group's --seed."""
    parser = argparse.ArgumentParser()
    FeedArgs().add_seed(parser)
    parser.add_argument("--dim", action="append")
    assert declared_by_command(parser, {"--seed", "--dim"}) == ["--dim"]


def test_every_help_reads_as_before(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")     # argparse wraps at the terminal's width
    text = "\n".join(f"$ {' '.join(path)} --help\n{parser.format_help()}"
                     for path, parser in walk(build_parser(), ["dml-lower"]))
    assert text == HELP.read_text()


# -- --dim NAME=SIZE: one fixed size, whatever the command ----------------------------------------

@pytest.mark.parametrize("texts, sizes", [
    (["n=4"], {"n": 4}),
    (["n=4", "n=4"], {"n": 4}),                 # the same size twice is the same request
    (["n=4", "m=0", "n=4"], {"n": 4, "m": 0}),
    ([], {}),
])
def test_dim_sizes(texts, sizes):
    assert DimArgs().parse(argparse.Namespace(dim=texts or None)) == sizes


def sym_model() -> onnx.ModelProto:
    return graph_model([onnx.helper.make_node("NonZero", ["x"], ["y"], name="nz")],
                       [("x", onnx.TensorProto.FLOAT, ["n", 4])], [("y", onnx.TensorProto.INT64, 2)])


@pytest.mark.parametrize("command", [
    ["compile"], ["run"], ["check"], ["reduce", "-o", "min.onnx", "--backends", "cpu"],
    ["optimize", "-o", "out.onnx", "--check"],
])
def test_a_dimension_given_two_sizes_is_one_error_line(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    onnx.save(sym_model(), "m.onnx")
    code, out, err = cli([command[0], "m.onnx", *command[1:], "--dim", "n=2", "--dim", "n=5"], capsys)
    assert (code, out) == (2, "")
    assert err == "dml-lower: error: --dim n: given two sizes, 2 and 5: give each dimension one size\n"
    assert not Path("out.onnx").exists() and not Path("min.onnx").exists()


def test_the_same_size_twice_runs_as_once(tmp_path, capsys):
    path = str(tmp_path / "m.onnx")
    onnx.save(sym_model(), path)
    once = cli(["run", path, "--dim", "n=5", "-q"], capsys)
    twice = cli(["run", path, "--dim", "n=5", "--dim", "n=5", "-q"], capsys)
    assert once == twice and once[0] == 0
    assert cli(["check", path, "--dim", "n=5", "--dim", "n=5", "--json", tmp_path / "r.json"], capsys)[0] == 0
    import json
    assert json.loads((tmp_path / "r.json").read_text())["dims"] == {"n": 5}


def test_dim_sizes_the_feeds_the_same_in_every_command(tmp_path, capsys):
    """run, check and reduce draw the same feeds at --dim n=6 (check --save-inputs, run
    --save-inputs): one meaning of --dim, one reader."""
    path = str(tmp_path / "m.onnx")
    onnx.save(sym_model(), path)
    assert cli(["run", path, "--dim", "n=6", "--seed", "3", "--save-inputs", tmp_path / "r.npz"], capsys)[0] == 0
    assert cli(["check", path, "--dim", "n=6", "--seed", "3", "--save-inputs", tmp_path / "c.npz"], capsys)[0] == 0
    ran, checked = np.load(tmp_path / "r.npz"), np.load(tmp_path / "c.npz")
    assert ran["x"].shape == (6, 4) and np.array_equal(ran["x"], checked["x"])


@pytest.mark.parametrize("command", [
    ["compile", "m.onnx"], ["run", "m.onnx"], ["check", "m.onnx"], ["reduce", "m.onnx", "-o", "min.onnx", "--backends", "cpu"],
    ["inspect", "m.onnx"], ["optimize", "m.onnx", "-o", "out.onnx"], ["capabilities"], ["demo"],
    ["conformance", "export", "suite"],
])
def test_a_bad_feature_level_is_one_line_before_any_output(command, tmp_path, capsys, monkeypatch):
    """--feature-level is read by one group, with parse_level's own message, in every command."""
    from onnx_dml_lowering.ir import DmlLowerError, parse_level
    monkeypatch.chdir(tmp_path)
    onnx.save(sym_model(), "m.onnx")
    with pytest.raises(DmlLowerError) as expected:
        parse_level("9_9")
    code, out, err = cli([*command, "--feature-level", "9_9"], capsys)
    assert (code, out, err) == (2, "", f"dml-lower: error: {expected.value}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


# -- --memory-limit: on every command that runs a model, so the runtime's "raise --memory-limit" is true

# The commands that run a model (the lowered graph, onnxruntime or both); no other takes the option.
RUNS_A_MODEL = {"dml-lower run", "dml-lower check", "dml-lower reduce", "dml-lower compile", "dml-lower optimize",
                "dml-lower conformance run"}
EYE_N = 200         # the EyeLike's run-time buffer: EYE_N^2 float32, far past 64 KiB; its feed is EYE_N floats


def test_every_command_that_runs_a_model_takes_the_feed_groups_memory_limit():
    taking = {" ".join(path): getattr(parser, DECLARED_BY, {}).get("--memory-limit") for path, parser in PARSERS}
    assert {path for path, group in taking.items() if group} == RUNS_A_MODEL
    assert {taking[path] for path in RUNS_A_MODEL} == {"FeedArgs"}


def eye_model() -> onnx.ModelProto:
    """x: float [n] -> EyeLike(ConstantOfShape([n, n])) -> ReduceSum: a run-time buffer of n*n floats
    behind a small feed and a scalar output."""
    from onnx import helper as h
    nodes = [h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("Concat", ["s", "s"], ["ss"], name="cat", axis=0),
             h.make_node("ConstantOfShape", ["ss"], ["c"], name="cos"),
             h.make_node("EyeLike", ["c"], ["e"], name="eye"),
             h.make_node("ReduceSum", ["e"], ["y"], name="sum", keepdims=0)]
    return graph_model(nodes, [("x", onnx.TensorProto.FLOAT, ["n"])], [("y", onnx.TensorProto.FLOAT, [])])


def eye_suite(folder: Path) -> None:
    """A one-case conformance suite of eye_model at n = EYE_N, its expected output from onnx.reference."""
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator
    model, x = eye_model(), np.zeros(EYE_N, np.float32)
    data = folder / "test_eye" / "test_data_set_0"
    data.mkdir(parents=True)
    onnx.save(model, str(folder / "test_eye" / "model.onnx"))
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    (y,) = ReferenceEvaluator(model).run(None, {"x": x})
    (data / "output_0.pb").write_bytes(numpy_helper.from_array(np.asarray(y), "y").SerializeToString())


DIM = ["--dim", f"n={EYE_N}"]
# (command, a limit too small for its run, its exit code within a large one); optimize --check's
# limit bounds its random feeds (onnxruntime allocates the rest), so its small limit is below those
MEMORY_RUNS = [(["run", "m.onnx", *DIM], "64KiB", 0), (["check", "m.onnx", *DIM], "64KiB", 0),
               (["reduce", "m.onnx", "-o", "min.onnx", "--backends", "cpu", *DIM], "64KiB", 1),    # 1: nothing fails
               (["compile", "m.onnx", *DIM], "64KiB", 0),
               (["optimize", "m.onnx", "-o", "out.onnx", "--check", *DIM], "2KiB", 0),
               (["conformance", "run", "suite", "--backends", "cpu"], "64KiB", 0)]


def in_tmp(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    onnx.save(eye_model(), "m.onnx")
    eye_suite(tmp_path / "suite")


@pytest.mark.parametrize("command, small, passes", MEMORY_RUNS, ids=[" ".join(c[:2]) for c, _, _ in MEMORY_RUNS])
def test_memory_limit_bounds_the_run_of_every_command(command, small, passes, tmp_path, capsys, monkeypatch):
    """Too small: MemoryLimitExceeded's one line naming that limit, exit 2, no output file; large:
    the command runs to its own verdict."""
    from onnx_dml_lowering.runtime.memory import format_size, parse_size
    in_tmp(tmp_path, monkeypatch)
    code, out, err = cli([*command, "--memory-limit", small], capsys)
    if command[0] == "compile":     # its steps are built before the run allocates: shown, and the stop said
        assert code == 0 and "the run at these sizes stopped: " in out and not err, err
        assert f"over the memory limit of {format_size(parse_size(small))}" in out, out
    else:
        assert code == 2 and err.startswith("dml-lower: error: ") and err.count("\n") == 1, err
        assert f"over the memory limit of {format_size(parse_size(small))}" in err, err
    assert not Path("out.onnx").exists() and not Path("min.onnx").exists()
    code, out, err = cli([*command, "--memory-limit", "64MiB"], capsys)
    assert code == passes, err


# The modules that read the default limit (runtime.memory.default_limit).
DEFAULT_LIMIT_READERS = ["runtime.memory", "runtime.session", "runtime.feeds", "runtime.npz", "runtime.control_flow",
                         "compiler.conformance.data_sets"]


@pytest.mark.parametrize("command, small, passes", MEMORY_RUNS, ids=[" ".join(c[:2]) for c, _, _ in MEMORY_RUNS])
def test_the_advice_to_raise_memory_limit_is_an_option_of_the_command(command, small, passes, tmp_path, capsys,
                                                                      monkeypatch):
    """Past the default limit the error says to raise --memory-limit: the command takes it, and
    the run it advises passes."""
    import importlib

    from onnx_dml_lowering.runtime.memory import parse_size
    for name in DEFAULT_LIMIT_READERS:           # each by the name it imported
        monkeypatch.setattr(importlib.import_module(f"onnx_dml_lowering.{name}"), "default_limit", lambda: parse_size(small))
    in_tmp(tmp_path, monkeypatch)
    code, out, err = cli(command, capsys)
    if command[0] == "compile":     # the steps shown, the stop said (test above)
        assert code == 0 and "raise --memory-limit" in out, out
    else:
        assert code == 2 and "raise --memory-limit" in err and err.count("\n") == 1, err
    assert cli([*command, "--memory-limit", "64MiB"], capsys)[0] == passes


@pytest.mark.parametrize("command", [c for c, _, _ in MEMORY_RUNS], ids=[" ".join(c[:2]) for c, _, _ in MEMORY_RUNS])
def test_a_bad_memory_limit_is_the_one_readers_line(command, tmp_path, capsys, monkeypatch):
    from onnx_dml_lowering.ir import DmlLowerError
    from onnx_dml_lowering.runtime.memory import parse_size
    in_tmp(tmp_path, monkeypatch)
    for bad in ("2Mo", "0"):
        with pytest.raises(DmlLowerError) as expected:
            parse_size(bad)
        assert cli([*command, "--memory-limit", bad], capsys) == (2, "", f"dml-lower: error: {expected.value}\n")
