"""Where run / check get their feeds: per-input --val-range / --zero-fraction beside the global
forms (signed values included), and --data-loader-script (Polygraphy's convention), each feed set
one iteration, compared with onnx.reference computed here; every mistake is one line (exit 2)."""
import json
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from tests.cli_runner import cli
from tests.builders import graph_model
from tests.oracle import reference


@pytest.fixture
def model(tmp_path):
    """x, y float and k int32 (all [3, 4]); NonZero of x + y, and k passed through."""
    nodes = [h.make_node("Add", ["x", "y"], ["s"], name="add"),
             h.make_node("NonZero", ["s"], ["coords"], name="nz"),
             h.make_node("Identity", ["k"], ["k_out"], name="ident")]
    proto = graph_model(nodes, [("x", T.FLOAT, [3, 4]), ("y", T.FLOAT, [3, 4]), ("k", T.INT32, [3, 4])],
                        [("coords", T.INT64, [2, None]), ("k_out", T.INT32, [3, 4])])
    path = tmp_path / "model.onnx"
    onnx.save(proto, str(path))
    return path


def saved_inputs(model, options, tmp_path, capsys) -> "dict[str, np.ndarray]":
    inputs = tmp_path / "in.npz"
    code, out, err = cli(["check", model, *options, "--save-inputs", inputs], capsys)
    assert code == 0, err
    with np.load(inputs) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("options", [["--val-range", "-1,1"], ["--val-range=-1,1"], ["--val-range", "-1.0,-0.25"],
                                     ["--val-range", "-5,5", "--val-range", "-1,1"]])
def test_signed_global_range(options, model, tmp_path, capsys):
    lo, hi = (float(v) for v in options[-1].split("=")[-1].split(","))
    feeds = saved_inputs(model, options + ["--zero-fraction", "0"], tmp_path, capsys)
    for name in ("x", "y"):
        assert np.all((feeds[name] >= lo) & (feeds[name] <= hi)) and np.any(feeds[name] < 0)


@pytest.mark.parametrize("options, ranges", [
    (["--val-range", "x:-1,1"], {"x": (-1, 1)}),
    (["--val-range", "10,20", "--val-range", "x:-1,1"], {"x": (-1, 1), "y": (10, 20), "k": (10, 20)}),
    (["--val-range", "x:-1,1", "--val-range", "10,20"], {"x": (-1, 1), "y": (10, 20)}),   # per input wins, in any order
    (["--val-range", "k:-3,-1", "--val-range", "y:5,6"], {"k": (-3, -1), "y": (5, 6)}),
    (["--val-range", "x:0,1", "--val-range", "x:-2,-1"], {"x": (-2, -1)}),               # the last one counts
])
def test_per_input_range_wins_over_global(options, ranges, model, tmp_path, capsys):
    feeds = saved_inputs(model, options + ["--zero-fraction", "0"], tmp_path, capsys)
    for name, (lo, hi) in ranges.items():
        assert np.all((feeds[name] >= lo) & (feeds[name] <= hi)), (name, feeds[name])
    if "k" in ranges and ranges["k"] == (-3, -1):
        assert set(np.unique(feeds["k"])) == {-3, -2, -1}          # integers: both ends inclusive


@pytest.mark.parametrize("options, zeros", [
    (["--zero-fraction", "x:1"], {"x": 12}),
    (["--zero-fraction", "0", "--zero-fraction", "x:1"], {"x": 12, "y": 0, "k": 0}),
    (["--zero-fraction", "y:0", "--zero-fraction", "1"], {"x": 12, "y": 0, "k": 12}),
])
def test_per_input_zero_fraction(options, zeros, model, tmp_path, capsys):
    feeds = saved_inputs(model, options, tmp_path, capsys)
    for name, count in zeros.items():
        assert np.count_nonzero(feeds[name] == 0) == count, name


def test_run_takes_the_per_input_forms(model, tmp_path, capsys):
    out_npz = tmp_path / "out.npz"
    code, _, err = cli(["run", model, "--val-range", "k:-5,-5", "--zero-fraction", "k:0", "--save-outputs", out_npz],
                       capsys)
    assert code == 0, err
    with np.load(out_npz) as data:
        assert np.all(data["k_out"] == -5)


@pytest.mark.parametrize("options, message", [
    (["--val-range", "z:-1,1"], "--val-range names input 'z': the model has no input of that name (inputs: x, y, k)"),
    (["--zero-fraction", "q:0.5"], "--zero-fraction names input 'q': the model has no input of that name (inputs: x, y, k)"),
    (["--val-range", "x:1"], "--val-range 'x:1': expected [NAME:]LO,HI (two numbers)"),
    (["--val-range", ":1,2"], "--val-range ':1,2': the input name before ':' is empty"),
    (["--zero-fraction", "x:lots"], "--zero-fraction 'x:lots': expected [NAME:]F (a number from 0 to 1)"),
    (["--zero-fraction", "x:2"], "--zero-fraction 'x:2': F must be between 0 and 1"),
    (["--zero-fraction", "-0.5"], "--zero-fraction '-0.5': F must be between 0 and 1"),
    (["--val-range", "x:2,1"], "--val-range 'x:2,1': LO is above HI"),
    (["--val-range", "k:0.2,0.8"], "value range 0.2,0.8 of input 'k' holds no int32 value"),
    (["--val-range", "x:nan,1"], "--val-range 'x:nan,1': LO and HI must be finite numbers"),
    (["--val-range", "-inf,inf"], "--val-range '-inf,inf': LO and HI must be finite numbers"),
    (["--val-range", "k:-inf,0"], "--val-range 'k:-inf,0': LO and HI must be finite numbers"),
    (["--val-range", "x:-1e308,1e308"], "--val-range 'x:-1e308,1e308': HI - LO is past the largest double; "
                                        "give a narrower range"),
])
@pytest.mark.parametrize("command", ["run", "check"])
def test_value_option_errors_are_one_line(command, options, message, model, capsys):
    code, out, err = cli([command, model, *options], capsys)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"dml-lower: error: {message}"]


@pytest.mark.parametrize("command", ["run", "check"])
def test_zero_fraction_on_a_model_with_a_scalar_input(command, tmp_path, capsys):
    """Trilu's run-time k is a 0-d input: a global --zero-fraction draws it too; check matches."""
    nodes = [h.make_node("Trilu", ["x", "k"], ["y"], name="tri"), h.make_node("NonZero", ["s"], ["nz"], name="nz")]
    proto = graph_model(nodes, [("x", T.FLOAT, ["b", "r", "c"]), ("k", T.INT64, []), ("s", T.FLOAT, [])],
                        [("y", T.FLOAT, ["b", "r", "c"]), ("nz", T.INT64, [0, None])], opset=17)
    path = tmp_path / "trilu_k.onnx"
    onnx.save(proto, str(path))
    for fraction in ("0.5", "1", "k:0.3"):
        code, out, err = cli([command, path, "--zero-fraction", fraction, "--val-range", "k:-4,4"], capsys)
        assert code == 0 and err == "", err
    code, out, err = cli(["check", path, "--zero-fraction", "1", "--iterations", "3"], capsys)
    assert code == 0 and "verdict: all outputs match" in out, out + err


# -- --data-loader-script ------------------------------------------------------------------------

FEEDS = """
import numpy as np

def feed(seed):
    rng = np.random.default_rng(seed)
    return {"x": (rng.random((3, 4)) < 0.4).astype(np.float32) * rng.standard_normal((3, 4)).astype(np.float32),
            "y": np.zeros((3, 4), np.float32), "k": np.full((3, 4), seed, np.int32)}
"""


def script(tmp_path, body: str, name="loader.py"):
    path = tmp_path / name
    path.write_text(FEEDS + textwrap.dedent(body))
    return path


def script_feeds(seeds):
    namespace: dict = {}
    exec(FEEDS, namespace)
    return [namespace["feed"](s) for s in seeds]


@pytest.mark.parametrize("body, spec_suffix, seeds", [
    ("def load_data():\n    for s in (1, 2, 3):\n        yield feed(s)\n", "", [1, 2, 3]),
    ("def load_data():\n    return [feed(7), feed(8)]\n", "", [7, 8]),
    ("def make():\n    return feed(4)\n", ":make", [4]),                    # one dict: one iteration
])
def test_check_checks_every_feed_set(body, spec_suffix, seeds, model, tmp_path, capsys):
    loader = script(tmp_path, body)
    report = tmp_path / "r.json"
    code, out, err = cli(["check", model, "--data-loader-script", f"{loader}{spec_suffix}", "--json", report], capsys)
    assert code == 0, err
    data = json.loads(report.read_text())
    assert data["iterations"] == len(seeds)
    outputs = data["backends"][0]["outputs"]
    for iteration, feeds in enumerate(script_feeds(seeds)):
        expected = reference(model, feeds)
        got = {o["output"]: o for o in outputs if o["iteration"] == iteration}
        assert set(got) == set(expected)
        for name, value in expected.items():
            assert got[name]["status"] == "match" and got[name]["expected_shape"] == list(value.shape)


def test_run_runs_every_feed_set(model, tmp_path, capsys):
    loader = script(tmp_path, "def load_data():\n    yield feed(5)\n    yield feed(6)\n")
    out_npz = tmp_path / "out.npz"
    code, out, err = cli(["run", model, "--data-loader-script", loader, "--save-outputs", out_npz], capsys)
    assert code == 0, err
    assert "(iteration #0 of" in out and "(iteration #1 of" in out and "#2" not in out
    first = reference(model, script_feeds([5])[0])
    with np.load(out_npz) as saved:
        for name, value in first.items():
            np.testing.assert_array_equal(saved[name], value)


@pytest.mark.parametrize("body, spec_suffix, message", [
    ("import no_such_module_here\n", "", "failed to load: ModuleNotFoundError: No module named 'no_such_module_here'"),
    ("x = 1 / 0\n", "", "failed to load: ZeroDivisionError: division by zero (line {first_line})"),
    ("def load_data(:\n", "", "failed to load: SyntaxError"),
    ("def other():\n    return feed(1)\n", "",
     "has no function 'load_data' (its functions: feed, other; choose one with FILE.py:FUNC)"),
    ("def load_data():\n    raise RuntimeError('no data today')\n", "", "load_data() raised RuntimeError: no data today"),
    ("def load_data():\n    yield feed(1)\n    raise ValueError('broke')\n", "",
     "iteration #1: load_data() raised ValueError: broke"),
    ("def load_data():\n    yield feed(1)\n    yield [1, 2]\n", "",
     "iteration #1: load_data() gave a list, not a dict of input name to array"),
    ("def load_data():\n    return None\n", "", "load_data() returned NoneType, not feed dicts"),
    ("def load_data():\n    return []\n", "", "load_data() gave no feed sets"),
    ("def load_data():\n    f = feed(1)\n    f['w'] = f.pop('x')\n    yield f\n", "",
     "iteration #0: feed 'w' is not an input of the model (inputs: x, y, k)"),
    ("def load_data():\n    f = feed(1)\n    del f['k']\n    yield f\n", "", "iteration #0: input 'k' is missing from the feeds"),
    ("def load_data():\n    f = feed(1)\n    f['x'] = f['x'].astype('float64')\n    yield f\n", "",
     "iteration #0: input 'x': expected float (float32), got float64"),
    ("load_data = 3\n", "", "'load_data' is a int, not a function"),
    ("def load_data():\n    yield feed(1)\n    f = feed(2)\n    f['x'] = f['x'].astype('float64')\n    yield f\n", "",
     "iteration #1: input 'x': expected float (float32), got float64"),
    ("def load_data():\n    raise GeneratorExit\n", "", "load_data() raised GeneratorExit"),   # a BaseException
    ("class Bad:\n    def __array__(self, *a, **k):\n        raise RuntimeError('nope')\n"
     "def load_data():\n    f = feed(1)\n    f['x'] = Bad()\n    yield f\n", "",
     "iteration #0: its feeds could not be read: RuntimeError: nope"),
    # descriptors 0-2 closed or replaced by the script: given back, and one line
    ("import os\ndef load_data():\n    os.close(1)\n    yield feed(1)\n", "",
     "iteration #0: load_data() closed or replaced the command's standard output (descriptor 1)"),
    ("import os\nos.close(2)\ndef load_data():\n    yield feed(1)\n", "",
     "loading, closed or replaced the command's standard error (descriptor 2)"),
    ("import os\ndef load_data():\n    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n    return [feed(1)]\n", "",
     "load_data() closed or replaced the command's standard output (descriptor 1)"),
    ("import io, sys\ndef load_data():\n    sys.stdout = io.StringIO()\n    return [feed(1)]\n", "",
     "load_data() closed or replaced the command's standard output (descriptor 1)"),      # the report swallowed
])
@pytest.mark.parametrize("command", ["run", "check"])
def test_script_errors_are_one_line_naming_the_script(command, body, spec_suffix, message, model, tmp_path, capsys):
    loader = script(tmp_path, body)
    message = message.format(first_line=FEEDS.count("\n") + 1)   # the body's first line in the script
    code, out, err = cli([command, model, "--data-loader-script", f"{loader}{spec_suffix}"], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    # check stops at a later set that cannot be drawn as at one the oracle cannot evaluate: the
    # report of the sets before it is printed, and the error names the set
    later = command == "check" and "iteration #1" in message
    prefix = "dml-lower: error: feed set #1: " if later else "dml-lower: error: "
    assert lines[0].startswith(f"{prefix}data loader script '{loader}'") and message in lines[0], lines[0]
    if later:
        assert lines[0].endswith("(the report covers feed set #0)") and "verdict: all outputs match" in out


@pytest.mark.parametrize("command", ["run", "check"])
def test_script_without_a_python_name_is_one_line(command, model, tmp_path, capsys):
    # importlib has no loader for a .txt name: said as such, not as the script's own failure
    loader = script(tmp_path, "def load_data():\n    yield feed(1)\n", name="loader.txt")
    code, out, err = cli([command, model, "--data-loader-script", loader], capsys)
    assert code == 2
    assert err.strip().splitlines() == [f"dml-lower: error: data loader script '{loader}' is not Python source "
                                        "by its name: call it FILE.py"]


@pytest.mark.parametrize("extra, message", [
    (["--iterations", "2"], "--data-loader-script gives the feed sets (one iteration each): "
                            "it does not combine with --iterations"),
    (["--inputs", "feeds.npz"], "--data-loader-script gives the feeds: it does not combine with --inputs"),
    (["--val-range", "x:0,1"], "--val-range shapes random feeds: it does not apply to --data-loader-script"),
    (["--zero-fraction", "0"], "--zero-fraction shapes random feeds: it does not apply to --data-loader-script"),
])
def test_script_does_not_combine(extra, message, model, tmp_path, capsys):
    loader = script(tmp_path, "def load_data():\n    yield feed(1)\n")
    code, _, err = cli(["check", model, "--data-loader-script", loader, *extra], capsys)
    assert code == 2 and err.strip().splitlines() == [f"dml-lower: error: {message}"]


def test_missing_script_is_one_line(model, tmp_path, capsys):
    code, _, err = cli(["check", model, "--data-loader-script", tmp_path / "nope.py:load"], capsys)
    assert code == 2 and err.strip() == f"dml-lower: error: data loader script '{tmp_path / 'nope.py'}' does not exist"


@pytest.mark.parametrize("command", ["run", "check", "reduce"])
@pytest.mark.parametrize("extra", [["--dim", "n=7"], ["--val-range", "0,1"], ["--zero-fraction", "x:0.5"]])
def test_inputs_file_does_not_take_random_feed_options(command, extra, model, tmp_path, capsys):
    """--inputs gives every size and value: --dim, --val-range and --zero-fraction beside it were
    ignored without a word (the run went on at the file's sizes); each is one line, before any work."""
    np.savez(tmp_path / "feeds.npz", x=np.ones((2, 3), np.float32))
    needs = ["-o", tmp_path / "min.onnx", "--backends", "ort-cpu"] if command == "reduce" else []
    code, out, err = cli([command, model, "--inputs", tmp_path / "feeds.npz", *needs, *extra], capsys)
    assert (code, out) == (2, "") and not (tmp_path / "min.onnx").exists()
    assert err == (f"dml-lower: error: {extra[0]} shapes random feeds: it does not apply to --inputs (the file gives "
                   "every size and value)\n")


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_loader_changing_directory_changes_no_file_the_command_reads_or_writes(command, model, tmp_path,
                                                                                   capsys, monkeypatch):
    """The loader changes to a folder holding another model.onnx and the report names: the command
    still runs its own model.onnx on every backend (the shipped file on ort-cpu included) and writes
    the files it was asked for, where it was asked; the loader reads its data from its folder."""
    other = tmp_path / "other"
    other.mkdir()
    nodes = [h.make_node("Sub", ["x", "y"], ["s"], name="sub"), h.make_node("NonZero", ["s"], ["coords"], name="nz"),
             h.make_node("Neg", ["k"], ["k_out"], name="neg")]
    onnx.save(graph_model(nodes, [("x", T.FLOAT, [3, 4]), ("y", T.FLOAT, [3, 4]), ("k", T.INT32, [3, 4])],
                          [("coords", T.INT64, [2, None]), ("k_out", T.INT32, [3, 4])]), str(other / "model.onnx"))
    for name in ("r.json", "r.md", "in.npz", "in.1.npz"):
        (other / name).write_text("precious")
    np.save(other / "seed.npy", np.array(3))
    loader = script(tmp_path, f"""
        import os
        def load_data():
            os.chdir({str(other)!r})
            for i in range(2):
                f = feed(int(np.load('seed.npy')) + i)
                f['y'] = np.ones((3, 4), np.float32)            # x + y and x - y differ everywhere
                yield f
        """)
    monkeypatch.chdir(tmp_path)
    options = ["--backends", "cpu,ort-cpu", "--markdown", "r.md"] if command == "check" else ["--backend", "ort"]
    code, out, err = cli([command, "model.onnx", "--data-loader-script", loader.name, *options, "--json", "r.json",
                          "--save-inputs", "in.npz"], capsys)
    assert code == 0 and "MISMATCH" not in out, out + err
    assert all((other / name).read_text() == "precious" for name in ("r.json", "r.md", "in.npz", "in.1.npz"))
    written = ["r.json", "in.npz", "in.1.npz"] + (["r.md"] if command == "check" else [])
    assert all((tmp_path / name).is_file() for name in written)
    for index, seed in enumerate((3, 4)):
        with np.load(tmp_path / ("in.npz" if index == 0 else "in.1.npz")) as saved:
            np.testing.assert_array_equal(saved["k"], np.full((3, 4), seed, np.int32))
    if command == "run":            # the outputs of this folder's model.onnx, not of the loader's folder's
        records = json.loads((tmp_path / "r.json").read_text())["backends"]
        for index, record in enumerate(records):
            with np.load(tmp_path / ("in.npz" if index == 0 else "in.1.npz")) as saved:
                expected = reference(model, {k: saved[k] for k in saved.files})
            assert record["outputs"]["coords"]["shape"] == list(expected["coords"].shape)
            assert record["outputs"]["k_out"]["preview"] == expected["k_out"].reshape(-1)[:8].tolist()
