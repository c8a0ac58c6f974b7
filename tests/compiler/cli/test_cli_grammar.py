"""One grammar: `run --backends` like check (the original model on a provider too), run's -q /
--json / --save-inputs, every --help showing defaults and telling metavars, every usage error
one `dml-lower: error:` line with exit 2, and Ctrl-C during run exiting 130 with one line."""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler.cli import build_parser, main
from tests.cli_runner import cli
from onnx_dml_lowering.runtime.feeds import random_feeds
from tests.builders import graph_model, single_node_model


def nonzero_path(tmp_path: Path) -> str:
    path = tmp_path / "nz.onnx"
    onnx.save(single_node_model("NonZero", T.FLOAT, [3, 4], T.INT64), str(path))
    return str(path)


# -- run --backends -----------------------------------------------------------------------------

def expected_nonzero(path: str, seed: int = 0) -> np.ndarray:
    model = onnx.load(path)
    feeds = random_feeds(list(model.graph.input), seed=seed)
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@pytest.mark.parametrize("spelling", [["--backends", "cpu,ort,ort-cpu"], ["--backend", "cpu,ort,ort-cpu"]])
def test_run_several_backends_json_and_save_inputs(spelling, tmp_path, capsys):
    path = nonzero_path(tmp_path)
    code, out, err = cli(["run", path, *spelling, "--json", tmp_path / "r.json",
                          "--save-inputs", tmp_path / "in.npz"], capsys)
    assert code == 0, err
    for backend in ("cpu", "ort"):
        assert f"on backend {backend} (feature level 5_1)\n" in out
    assert "on backend ort-cpu\n" in out           # the file as shipped: no DirectML feature level
    data = json.loads((tmp_path / "r.json").read_text())
    assert [b["backend"] for b in data["backends"]] == ["cpu", "ort", "ort-cpu"]
    expected = expected_nonzero(path)
    saved = np.load(tmp_path / "in.npz")
    np.testing.assert_array_equal(saved["x"], random_feeds(list(onnx.load(path).graph.input), seed=0)["x"])
    for record in data["backends"]:
        y = record["outputs"]["y"]
        assert (y["dtype"], y["shape"]) == ("int64", list(expected.shape))
        assert y["preview"] == expected.reshape(-1)[:8].tolist()
        assert record["feeds"]["x"]["shape"] == [3, 4] and record["initializer_defaults"] == {}


def test_run_quiet_one_line_per_backend(tmp_path, capsys):
    path = nonzero_path(tmp_path)
    code, out, _ = cli(["run", path, "--backends", "cpu,ort-cpu", "-q"], capsys)
    shape = list(expected_nonzero(path).shape)
    assert code == 0
    assert out.splitlines() == [f"cpu: 1 output(s): y int64 {shape}", f"ort-cpu: 1 output(s): y int64 {shape}"]


def test_run_unavailable_provider_is_one_line_and_the_rest_run(tmp_path, capsys):
    if "DmlExecutionProvider" in ort.get_available_providers():
        pytest.skip("DirectML is available here")
    code, out, _ = cli(["run", nonzero_path(tmp_path), "--backends", "cpu,ort-dml", "-q"], capsys)
    assert code == 0
    assert out.splitlines()[0].startswith("ort-dml: UNAVAILABLE: ") and out.splitlines()[1].startswith("cpu: ")


def test_run_original_node_without_kernel_is_named(tmp_path, capsys):
    """EyeLike from bool has no CPUExecutionProvider kernel. The file as shipped: that backend's
    ERROR with onnxruntime's message, the other backend still runs, exit 1. The modified copy: its
    output is marked not run, a line names the node, the backend is PARTIAL (exit 1 only with
    --fail-on-partial)."""
    path = tmp_path / "eye.onnx"
    model = single_node_model("EyeLike", T.BOOL, [3, 3], T.BOOL)
    onnx.save(model, str(path))
    node = model.graph.node[0].name
    code, out, err = cli(["run", path, "--backends", "ort-cpu,cpu"], capsys)
    assert code == 1 and err == ""
    feeds, rest = out.split("\n", 1)
    assert feeds.startswith("feeds: ")
    assert rest.startswith("ort-cpu: ERROR onnxruntime (CPUExecutionProvider) cannot load the model: ")
    assert f"Could not find an implementation for EyeLike(9) node with name '{node}'" in out
    assert "on backend cpu " in out
    code, out, err = cli(["run", path, "--backends", "ort-cpu,cpu", "--provider-model", "modified"], capsys)
    assert code == 0, err
    assert f"node {node}: no kernel on CPUExecutionProvider: cut out" in out
    assert f"  y: not run (node {node} has no kernel on CPUExecutionProvider" in out
    assert f"PARTIAL: node {node} not run on it; output y not computed by it" in out
    assert "on backend cpu " in out
    code, _, _ = cli(["run", path, "--backends", "ort-cpu", "--provider-model", "modified", "--fail-on-partial"],
                     capsys)
    assert code == 1


def test_run_quiet_names_nodes_computed_by_onnx_semantics(tmp_path, capsys):
    """A bool EyeLike read by another node: onnxruntime's CPU provider has no kernel, so ONNX
    semantics give its value; -q says so on the backend's line too."""
    path = tmp_path / "eye_not.onnx"
    model = graph_model([h.make_node("EyeLike", ["x"], ["e"], name="eye"), h.make_node("Not", ["e"], ["y"], name="not")],
                        [("x", T.BOOL, [3, 3])], [("y", T.BOOL, [3, 3])])
    onnx.save(model, str(path))
    code, out, err = cli(["run", path, "--backends", "ort-cpu,cpu", "-q", "--provider-model", "modified"], capsys)
    assert code == 0, err
    assert out.splitlines() == ["ort-cpu: 1 output(s): y bool [3, 3]; PARTIAL: node eye not run on it",
                                "cpu: 1 output(s): y bool [3, 3]"]
    code, out, err = cli(["run", path, "--backends", "ort-cpu", "--provider-model", "modified"], capsys)
    assert "e computed by ONNX semantics for the nodes reading them" in out


# -- every --help --------------------------------------------------------------------------------

def all_parsers() -> "list[tuple[str, argparse.ArgumentParser]]":
    found = []

    def walk(name, parser):
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(f"{name} {sub}", child)
    walk("dml-lower", build_parser())
    return found


PARSERS = all_parsers()
METAVAR = re.compile(r"[A-Z][A-Z_]*|\{[a-z,-]+\}")
ALLOWED_METAVARS = {"F.json", "F.npz", "F.md", "F.html", "OUT.xml", "OUT.onnx", "MIN.onnx", "KEY=VALUE", "NAME=SIZE", "NAME=VALUE", "NAME=PATH",
                    "[NAME:]F", "[NAME:]LO,HI", "FILE.py[:FUNC]", "[OUTPUT=]A", "[OUTPUT=]R", "B[,B...]",
                    "P[,P...]", "K=V"}


def test_every_subcommand_is_walked():
    names = {name for name, _ in PARSERS}
    assert {"dml-lower run", "dml-lower check", "dml-lower optimize", "dml-lower conformance export",
            "dml-lower conformance run", "dml-lower capabilities", "dml-lower demo", "dml-lower inspect",
            "dml-lower compile"} <= names


@pytest.mark.parametrize("name,parser", PARSERS, ids=[n for n, _ in PARSERS])
def test_help_shows_defaults_and_metavars(name, parser):
    text = "".join(parser.format_help().split())     # wrapping may break at '-': compare without spaces
    assert type(parser).__name__ == "Parser"     # cli.options.Parser: one-line usage errors
    for action in parser._actions:
        if not action.option_strings or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        if action.help == argparse.SUPPRESS:
            assert action.option_strings == ["--names-where-present"], action.option_strings    # the zoo's, internal
            continue
        help_text = " ".join(parser._get_formatter()._get_help_string(action).split())
        assert "".join(help_text.split()) in text, (name, action.option_strings)
        if not any(action.default is off for off in (None, False, argparse.SUPPRESS)):   # 0 is a default
            assert "default: " in help_text, (name, action.option_strings, help_text)
            if not isinstance(action.default, (list, tuple)) and f"default: {action.default}" not in help_text:
                assert "(default: " in help_text      # a described default, e.g. 'every level'
        if action.nargs != 0:
            metavar = parser._get_formatter()._metavar_formatter(action, action.dest.upper())(1)[0]
            assert metavar in ALLOWED_METAVARS or METAVAR.fullmatch(metavar), (name, action.option_strings, metavar)


# -- every usage error ---------------------------------------------------------------------------

BAD = [
    [],
    ["nosuchcommand"],
    ["--nosuch"],
    ["compile"],
    ["compile", "m.onnx", "--nosuch"],
    ["run"],
    ["run", "m.onnx", "--seed", "x"],
    ["run", "m.onnx", "--backends"],
    ["check", "m.onnx", "--iterations", "many"],
    ["check"],
    ["optimize", "m.onnx"],
    ["optimize", "m.onnx", "-o", "o.onnx", "--min-bytes", "x"],
    ["conformance"],
    ["conformance", "export"],
    ["conformance", "export", "d", "--seeds", "two"],
    ["conformance", "run"],
    ["conformance", "run", "d", "--nosuch"],
    ["capabilities", "--nosuch"],
    ["demo", "--seed", "x"],
    ["inspect"],
    ["inspect", "m.onnx", "--json"],
]


@pytest.mark.parametrize("argv", BAD, ids=[" ".join(a) or "(none)" for a in BAD])
def test_usage_error_is_one_line_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    _, err = capsys.readouterr()
    assert exc.value.code == 2
    assert len(err.splitlines()) == 1 and err.startswith("dml-lower: error: "), err


@pytest.mark.parametrize("argv,message", [
    (["--backends", "cpu,gpu"], "unknown backend 'gpu'; choose from cpu, ort, dml, ort-cpu, ort-dml, ort:<ProviderName>"),
    (["--providers", "cpu"], "--providers applies to the ort backend only"),
    (["--backends", "cpu,ort", "--save-outputs", "o.npz"], "--save-outputs saves one backend's outputs"),
    # a name given twice would be run and reported twice under one name; an empty one is a typo
    (["--backends", "cpu,ort,cpu"], "--backends 'cpu,ort,cpu' names 'cpu' twice"),
    (["--backends", "cpu,,ort"], "--backends 'cpu,,ort': an empty name between its commas"),
    (["--backends", "cpu,"], "--backends 'cpu,': an empty name between its commas"),
])
def test_run_backend_usage_errors(argv, message, tmp_path, capsys):
    code, _, err = cli(["run", nonzero_path(tmp_path), *argv], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("dml-lower: error: ") and message in err


def test_run_ctrl_c_exits_130_with_one_line(tmp_path):
    """A data loader that is interrupted after the first feed set: the real process exits 130
    with one stderr line (the first set's outputs printed before)."""
    script = tmp_path / "loader.py"
    script.write_text("import numpy as np\n"
                      "def load_data():\n"
                      "    yield {'x': np.ones((3, 4), np.float32)}\n"
                      "    raise KeyboardInterrupt\n")
    proc = subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", "run", nonzero_path(tmp_path),
                           "--data-loader-script", str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130
    assert proc.stderr.splitlines() == ["dml-lower: interrupted"]
    assert "y: int64 [2, 12]" in proc.stdout


def _commands(parser: argparse.ArgumentParser, prefix: "list[str]"):
    """Every (sub)command path with its parser: ['check'], ['conformance', 'run'], ..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, prefix + [name])
            return
    yield prefix, parser


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in _commands(build_parser(), [])])
def test_an_unknown_option_points_at_the_command_it_was_typed_to(path, capsys):
    """`dml-lower check M --bogus`: one line naming the option, pointing at `dml-lower check --help`
    (the command's own options), not the top-level help."""
    parser = dict((" ".join(p), q) for p, q in _commands(build_parser(), []))[path]
    positionals = [a for a in parser._actions if not a.option_strings and a.nargs not in ("?", "*")]
    required = [a.option_strings[0] for a in parser._actions if a.option_strings and a.required]
    argv = path.split() + ["x.onnx"] * len(positionals) + [w for o in required for w in (o, "y.onnx")]
    argv += ["--no-such-option"]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    _, err = capsys.readouterr()
    assert exit_.value.code == 2
    assert err == f"dml-lower: error: unrecognized arguments: --no-such-option (see 'dml-lower {path} --help')\n"
