"""Errors a user can cause: exit code 2, exactly one stderr line naming what is wrong, no traceback.

Each row builds its own bad input in tmp_path, runs `compiler.cli.main(argv)` in process (stderr
captured at the file-descriptor level, so onnxruntime's C++ log lines count too), and checks the
one line names the file / node / input / limit. A few rows run the real process
(`python -m compiler`) to prove the exit status. The same errors from the Python API raise the
project's own `ir.DmlLowerError` with a message naming the input or node.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering import compiler
from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.ir import DmlLowerError
from tests.builders import graph_model, single_node_model
from tests.cli_runner import cli_exits

REPO = Path(compiler.__file__).resolve().parent.parent


# -- models and files the rows use ------------------------------------------------------------

def nonzero_model() -> onnx.ModelProto:
    """x: float [3, 4] -> NonZero (node 'nonzero') -> y."""
    return single_node_model("NonZero", T.FLOAT, [3, 4], T.INT64)


def save(model: onnx.ModelProto, path: Path) -> str:
    onnx.save(model, str(path))
    return str(path)


def good_model(tmp: Path) -> str:
    return save(nonzero_model(), tmp / "good.onnx")


def no_output_model(tmp: Path) -> str:
    """The NonZero model with its graph outputs taken away: onnxruntime runs it, nothing comes out."""
    model = nonzero_model()
    del model.graph.output[:]
    return save(model, tmp / "no_output.onnx")


def write_bytes(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def checker_failing_model() -> onnx.ModelProto:
    """The node reads 'nope', which nothing defines: the ONNX checker rejects it."""
    model = nonzero_model()
    model.graph.node[0].input[0] = "nope"
    return model


def eyelike_3d_model() -> onnx.ModelProto:
    return single_node_model("EyeLike", T.FLOAT, [2, 3, 4], T.FLOAT, [2, 3, 4])


def nonzero_opset8_model() -> onnx.ModelProto:
    return single_node_model("NonZero", T.FLOAT, [3, 4], T.INT64, opset=8)


def eyelike_opset8_model() -> onnx.ModelProto:
    return single_node_model("EyeLike", T.FLOAT, [3, 4], T.FLOAT, [3, 4], opset=8)


def eyelike_runtime_rank_model() -> onnx.ModelProto:
    """EyeLike (node 'eye') of Reshape(x, s): its input's rank is only known at run time."""
    return graph_model(
        [h.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
         h.make_node("EyeLike", ["r"], ["y"], name="eye")],
        [("x", T.FLOAT, ["n"]), ("s", T.INT64, ["k"])], [("y", T.FLOAT, 2)])


def symbolic_nonzero(tmp: Path) -> str:
    """x: float [n, 4] -> NonZero: --dim n sizes the random feed."""
    return save(single_node_model("NonZero", T.FLOAT, ["n", 4], T.INT64), tmp / "sym.onnx")


def sequence_input_model(tmp: Path) -> str:
    """A graph input of type sequence(tensor(float)) beside x."""
    nodes = [h.make_node("Constant", [], ["i"], name="zero", value_int=0),
             h.make_node("SequenceAt", ["seq", "i"], ["a"], name="at"),
             h.make_node("NonZero", ["a"], ["y"], name="nz")]
    model = graph_model(nodes, [h.make_tensor_sequence_value_info("seq", T.FLOAT, [3])], [("y", T.INT64, 2)])
    return save(model, tmp / "seq.onnx")


def npz(path: Path, **arrays) -> str:
    np.savez(str(path), **arrays)
    return str(path)


def x_ok() -> np.ndarray:
    return np.ones((3, 4), np.float32)


# -- the table ---------------------------------------------------------------------------------
# id -> (argv builder taking tmp_path, substrings the one stderr line must contain)

def _truncated(tmp: Path) -> "list[str]":
    data = nonzero_model().SerializeToString()
    return ["compile", write_bytes(tmp / "truncated.onnx", data[: len(data) // 2])]


def _directory(tmp: Path) -> "list[str]":
    (tmp / "a_dir.onnx").mkdir()
    return ["compile", str(tmp / "a_dir.onnx")]


ROWS = {
    "missing-model": (lambda t: ["compile", str(t / "nothere.onnx")], ["nothere.onnx", "does not exist"]),
    "model-is-directory": (_directory, ["a_dir.onnx", "directory"]),
    "empty-model": (lambda t: ["compile", write_bytes(t / "empty.onnx", b"")], ["empty.onnx", "empty"]),
    "truncated-model": (_truncated, ["truncated.onnx", "not an ONNX model"]),
    "text-file": (lambda t: ["compile", write_bytes(t / "notes.onnx", b"hello world\nthis is not onnx\n")],
                  ["notes.onnx", "not an ONNX model"]),
    "random-bytes": (lambda t: ["compile", write_bytes(t / "noise.onnx", np.random.default_rng(0).bytes(256))],
                     ["noise.onnx", "not an ONNX model"]),
    "png-header": (lambda t: ["compile", write_bytes(t / "image.onnx", b"\x89PNG\r\n\x1a\n" + bytes(64))],
                   ["image.onnx", "not an ONNX model"]),
    "onnx-checker": (lambda t: ["compile", save(checker_failing_model(), t / "bad.onnx")],
                     ["bad.onnx", "ONNX checker", "'nope'"]),
    "eyelike-not-2d": (lambda t: ["compile", save(eyelike_3d_model(), t / "eye3.onnx")],
                       ["eye3.onnx", "EyeLike", "2-dimensional"]),
    "nonzero-opset-8": (lambda t: ["compile", save(nonzero_opset8_model(), t / "nz8.onnx")],
                        ["nz8.onnx", "NonZero", "8"]),
    "eyelike-opset-8": (lambda t: ["compile", save(eyelike_opset8_model(), t / "eye8.onnx")],
                        ["EyeLike", "8"]),
    "feature-level-7_0": (lambda t: ["compile", good_model(t), "--feature-level", "7_0"],
                          ["feature level", "7_0"]),
    "feature-level-abc": (lambda t: ["compile", good_model(t), "--feature-level", "abc"],
                          ["feature level", "abc"]),
    "run-feature-level-abc": (lambda t: ["run", good_model(t), "--feature-level", "abc"],
                              ["feature level", "abc"]),
    "feeds-missing-input": (lambda t: ["run", good_model(t), "--inputs", npz(t / "f.npz")],
                            ["'x'", "missing"]),
    "feeds-extra-name": (lambda t: ["run", good_model(t), "--inputs",
                                    npz(t / "f.npz", x=x_ok(), zeta=np.ones(2))], ["'zeta'"]),
    "feeds-wrong-dtype": (lambda t: ["run", good_model(t), "--inputs",
                                     npz(t / "f.npz", x=np.ones((3, 4), np.float64))], ["'x'", "float64"]),
    "feeds-wrong-rank": (lambda t: ["run", good_model(t), "--inputs",
                                    npz(t / "f.npz", x=np.ones((3, 4, 1), np.float32))], ["'x'", "rank"]),
    "feeds-wrong-static-dim": (lambda t: ["run", good_model(t), "--inputs",
                                          npz(t / "f.npz", x=np.ones((3, 5), np.float32))], ["'x'", "dimension"]),
    "check-feeds-wrong-dtype": (lambda t: ["check", good_model(t), "--inputs",
                                           npz(t / "f.npz", x=np.ones((3, 4), np.int32))], ["'x'", "int32"]),
    "check-feeds-wrong-static-dim": (lambda t: ["check", good_model(t), "--inputs",
                                                npz(t / "f.npz", x=np.ones((2, 4), np.float32))],
                                     ["'x'", "dimension"]),
    "inputs-text-file": (lambda t: ["run", good_model(t), "--inputs", write_bytes(t / "feeds.txt", b"x = 1\n")],
                         ["feeds.txt"]),
    "inputs-npy-file": (lambda t: ["run", good_model(t), "--inputs",
                                   (np.save(str(t / "feeds.npy"), x_ok()), str(t / "feeds.npy"))[1]],
                        ["feeds.npy"]),
    "inputs-missing-file": (lambda t: ["run", good_model(t), "--inputs", str(t / "absent.npz")],
                            ["absent.npz", "does not exist"]),
    "check-unknown-backend": (lambda t: ["check", good_model(t), "--backends", "cpu,gpu"], ["'gpu'"]),
    "dim-past-memory": (lambda t: ["run", symbolic_nonzero(t), "--dim", "n=10000000000"],
                        ["input 'x' of shape [10000000000, 4]", "160,000,000,000 bytes", "memory limit"]),
    "inputs-over-memory-limit": (lambda t: ["run", symbolic_nonzero(t), "--memory-limit", "1KiB", "--inputs",
                                            npz(t / "big.npz", x=np.ones((1000, 4), np.float32))],
                                 ["big.npz", "'x'", "[1000, 4]", "memory limit of 1.0 KiB"]),
    "sequence-input": (lambda t: ["run", sequence_input_model(t)],
                       ["input 'seq': type sequence(tensor(float)) is not supported: only tensor inputs can be fed"]),
    "npz-with-objects": (lambda t: ["run", good_model(t), "--inputs",
                                    npz(t / "o.npz", x=np.array([{}, 1], dtype=object))],
                         ["o.npz", "not a plain array (Python objects)"]),
    "nan-tolerance": (lambda t: ["check", good_model(t), "--atol", "nan"], ["--atol 'nan'", "not a finite number"]),
    "run-unknown-backend": (lambda t: ["run", good_model(t), "--backend", "gpu"], ["'gpu'"]),
    # past onnxruntime's int32 it was an internal error; below it, bad_alloc or a machine of threads
    "threads-past-int32": (lambda t: ["check", good_model(t), "--threads", "2147483648"], ["--threads", "at most 1,024"]),
    # it said "all outputs match ONNX semantics", exit 0, having compared nothing
    "no-graph-output": (lambda t: ["check", no_output_model(t)], ["the model has no graph output: nothing to compare"]),
    # str.isdigit takes '²', which int() refuses: it was an internal error
    "dim-superscript-digit": (lambda t: ["run", good_model(t), "--dim", "n=\u00b2"], ["--dim", "NAME=SIZE"]),
    "threads-many": (lambda t: ["run", good_model(t), "--backend", "ort", "--threads", "100000"], ["at most 1,024"]),
}

# User errors the brief's list does not name but the contract covers (bad usage -> 2, one line;
# never a silent "all match" when nothing was compared).
EXTRA_ROWS = {
    "save-outputs-into-missing-dir": (lambda t: ["run", good_model(t), "--save-outputs",
                                                 str(t / "no" / "such" / "dir" / "out.npz")], ["out.npz"]),
    "compile-json-into-missing-dir": (lambda t: ["compile", good_model(t), "--json",
                                                 str(t / "no" / "such" / "dir" / "out.json")], ["out.json"]),
    "negative-seed": (lambda t: ["run", good_model(t), "--seed", "-1"], ["seed"]),
    "demo-negative-seed": (lambda t: ["demo", "--seed", "-5"], ["--seed -5", "non-negative"]),
    "negative-seed-with-inputs": (lambda t: ["run", good_model(t), "--inputs", str(t / "absent.npz"), "--seed", "-1"],
                                  ["--seed -1", "non-negative"]),
    "check-empty-backends": (lambda t: ["check", good_model(t), "--backends", ","], ["backend"]),
    "check-markdown-into-missing-dir": (lambda t: ["check", good_model(t), "--markdown", str(t / "no" / "r.md")],
                                        ["--markdown", "r.md", "cannot write there", "does not exist"]),
    "check-provider-option-unused": (lambda t: ["check", good_model(t), "--backends", "cpu", "--provider-option",
                                                "x=1"], ["--provider-option x=1", "no requested backend uses it"]),
    "check-load-outputs-other-feeds": (lambda t: saved_outputs(t) + ["--seed", "1"],
                                       ["--load-outputs", "saved.npz", "saved from other feeds"]),
    "external-data-file-too-short": (lambda t: ["compile", external_model(t, truncate=1000)],
                                     ["w.data", "'w'", "holds 1000 bytes"]),
    "external-data-location-twice": (lambda t: ["inspect", external_model(t, twice="location")],
                                     ["'w'", "entry 'location' 2 times"]),
    "external-data-offset-twice": (lambda t: ["check", external_model(t, twice="offset")],
                                   ["'w'", "entry 'offset' 2 times"]),
    "external-data-length-wrong": (lambda t: ["compile", external_model(t, length=12)],
                                   ["'w'", "length 12", "4194304 bytes"]),
}


def overflowing_model(tmp: Path) -> str:
    """Expand to [2^31, 2^31]: onnxruntime's allocator overflows (its default logger wrote coloured
    lines to stderr before the exception)."""
    model = graph_model([h.make_node("Expand", ["x", "shape"], ["y"], name="expand")], [("x", T.FLOAT, [1])],
                        [("y", T.FLOAT, [None, None])], {"shape": np.array([2**31, 2**31], np.int64)})
    return save(model, tmp / "overflow.onnx")


def saved_outputs(tmp: Path) -> "list[str]":
    """A check command loading outputs saved from seed 0's feeds."""
    model, saved = good_model(tmp), str(tmp / "saved.npz")
    assert main(["check", model, "--save-outputs", saved, "-q"]) == 0
    return ["check", model, "--load-outputs", saved]


def external_model(tmp: Path, truncate: "int | None" = None, length: "int | None" = None, twice: str = "") -> str:
    """MatMul by a 1024x1024 float32 weight stored in w.data, the file cut or the length entry wrong."""
    model = graph_model([h.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [("x", T.FLOAT, [2, 1024])],
                        [("y", T.FLOAT, [2, 1024])], {"w": np.ones((1024, 1024), np.float32)})
    path = tmp / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="w.data", size_threshold=0)
    if truncate is not None:
        os.truncate(tmp / "w.data", truncate)
    if twice:                           # an entry named again, with another value
        raw = onnx.load(str(path), load_external_data=False)
        entry = raw.graph.initializer[0].external_data.add()
        entry.key, entry.value = twice, {"location": "other.data", "offset": "0", "length": "4"}[twice]
        onnx.save(raw, str(path))
    if length is not None:
        raw = onnx.load(str(path), load_external_data=False)
        entry = next(e for e in raw.graph.initializer[0].external_data if e.key == "length")
        entry.value = str(length)
        onnx.save(raw, str(path))
    return str(path)


def run_in_process(argv: "list[str]", capfd) -> "tuple[int, str, str]":
    capfd.readouterr()                      # drop anything earlier setup wrote
    code = main(argv)
    out, err = capfd.readouterr()
    return code, out, err


def assert_one_error_line(code: int, out: str, err: str, substrings: "list[str]") -> None:
    assert code == 2, f"exit code {code}, stderr: {err!r}"
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1, f"stderr is not one line: {err!r}"
    line = lines[0]
    assert "internal error" not in line
    for text in substrings:
        assert text in line, f"{text!r} not in {line!r}"


@pytest.mark.parametrize("row", sorted(ROWS))
def test_cli_user_error(row, tmp_path, capfd):
    build, substrings = ROWS[row]
    argv = build(tmp_path)
    code, out, err = run_in_process(argv, capfd)
    assert_one_error_line(code, out, err, substrings)


@pytest.mark.parametrize("row", sorted(EXTRA_ROWS))
def test_cli_other_user_error(row, tmp_path, capfd):
    build, substrings = EXTRA_ROWS[row]
    argv = build(tmp_path)
    code, out, err = run_in_process(argv, capfd)
    assert_one_error_line(code, out, err, substrings)


@pytest.mark.parametrize("command", ["check", "run", "compile", "inspect", "optimize", "reduce"])
def test_every_command_names_the_model_file_the_checker_refuses(command, tmp_path, capfd):
    """One loader, one checker: whichever command reads it, the line names the file and the node."""
    path = save(checker_failing_model(), tmp_path / "refused.onnx")
    extra = {"optimize": ["-o", str(tmp_path / "o.onnx")],
             "reduce": ["-o", str(tmp_path / "o.onnx"), "--backends", "cpu"]}.get(command, [])
    code, out, err = run_in_process([command, path, *extra], capfd)
    assert_one_error_line(code, out, err, [f"model file {path!r} fails the ONNX checker", "'nope'", "nonzero"])


def test_cli_checker_error_names_the_node(tmp_path, capfd):
    """The checker's complaint is about node 'nonzero'; the one line must say which node."""
    code, out, err = run_in_process(["compile", save(checker_failing_model(), tmp_path / "bad.onnx")], capfd)
    assert_one_error_line(code, out, err, ["'nope'"])
    assert "nonzero" in err, f"the node name is lost: {err!r}"


# -- the real process ----------------------------------------------------------------------------

def eyelike_runtime_rank_row(tmp: Path) -> "list[str]":
    model = save(eyelike_runtime_rank_model(), tmp / "eye_dyn.onnx")
    feeds = npz(tmp / "eye_dyn.npz", x=np.ones(24, np.float32), s=np.array([2, 3, 4], np.int64))
    return ["run", model, "--inputs", feeds]


SUBPROCESS_ROWS = {
    "missing-model": (ROWS["missing-model"][0], ["nothere.onnx", "does not exist"]),
    "eyelike-not-2d": (ROWS["eyelike-not-2d"][0], ["EyeLike", "2-dimensional"]),
    "feeds-wrong-dtype": (ROWS["feeds-wrong-dtype"][0], ["'x'", "float64"]),
    "check-unknown-backend": (ROWS["check-unknown-backend"][0], ["'gpu'"]),
    # Rank 3 only shows when the graph runs: the rule declines, the ONNX fallback fails.
    "eyelike-rank-3-at-run-time": (eyelike_runtime_rank_row, ["EyeLike", "eye"]),
}


@pytest.mark.parametrize("row", sorted(SUBPROCESS_ROWS))
def test_process_exits_2(row, tmp_path):
    build, substrings = SUBPROCESS_ROWS[row]
    argv = build(tmp_path)
    env = dict(os.environ, DML_LOWER_STRICT="1")
    env.pop("DML_LOWER_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, substrings)


# -- the Python API ------------------------------------------------------------------------------

MODEL_ROWS = {
    "missing-model": (lambda t: str(t / "nothere.onnx"), ["nothere.onnx", "does not exist"]),
    "model-is-directory": (lambda t: _directory(t)[1], ["a_dir.onnx", "directory"]),
    "empty-model": (lambda t: write_bytes(t / "empty.onnx", b""), ["empty"]),
    "empty-bytes": (lambda t: b"", ["empty"]),
    "truncated-model": (lambda t: _truncated(t)[1], ["truncated.onnx", "not an ONNX model"]),
    "garbage-bytes": (lambda t: b"hello world\nthis is not onnx\n", ["not an ONNX model"]),
    "png-header": (lambda t: write_bytes(t / "image.onnx", b"\x89PNG\r\n\x1a\n" + bytes(64)),
                   ["not an ONNX model"]),
    "onnx-checker": (lambda t: checker_failing_model(), ["ONNX checker", "'nope'"]),
    "eyelike-not-2d": (lambda t: eyelike_3d_model(), ["EyeLike", "2-dimensional"]),
    "nonzero-opset-8": (lambda t: nonzero_opset8_model(), ["NonZero", "8"]),
    "eyelike-opset-8": (lambda t: eyelike_opset8_model(), ["EyeLike", "8"]),
}


@pytest.mark.parametrize("row", sorted(MODEL_ROWS))
def test_api_compile_model_error(row, tmp_path):
    build, substrings = MODEL_ROWS[row]
    with pytest.raises(DmlLowerError) as info:
        compile_model(build(tmp_path))
    message = str(info.value)
    assert "\n" not in message
    for text in substrings:
        assert text in message, f"{text!r} not in {message!r}"


@pytest.mark.parametrize("level", ["7_0", "abc", "", 0x7000])
def test_api_unknown_feature_level(level):
    with pytest.raises(DmlLowerError, match="feature level"):
        compile_model(nonzero_model(), feature_level=level)


FEED_ROWS = {
    "missing-input": ({}, ["'x'", "missing"]),
    "extra-name": ({"x": np.ones((3, 4), np.float32), "zeta": np.ones(2)}, ["'zeta'"]),
    "wrong-dtype": ({"x": np.ones((3, 4), np.float64)}, ["'x'", "float64"]),
    "wrong-dtype-bool": ({"x": np.ones((3, 4), np.bool_)}, ["'x'", "bool"]),
    "wrong-rank": ({"x": np.ones((3, 4, 1), np.float32)}, ["'x'", "rank"]),
    "wrong-rank-scalar": ({"x": np.float32(1.0)}, ["'x'", "rank"]),
    "wrong-static-dim": ({"x": np.ones((3, 5), np.float32)}, ["'x'", "dimension"]),
    "not-a-mapping": ([np.ones((3, 4), np.float32)], ["mapping"]),
}


@pytest.mark.parametrize("row", sorted(FEED_ROWS))
def test_api_run_feed_error(row):
    feeds, substrings = FEED_ROWS[row]
    compiled = compile_model(nonzero_model())
    with pytest.raises(DmlLowerError) as info:
        compiled.run(feeds)
    message = str(info.value)
    assert "\n" not in message
    for text in substrings:
        assert text in message, f"{text!r} not in {message!r}"


def test_api_unknown_backend():
    compiled = compile_model(nonzero_model())
    with pytest.raises(DmlLowerError, match="'gpu'"):
        compiled.run({"x": x_ok()}, backend="gpu")


def test_api_eyelike_rank_only_known_at_run_time():
    """Declined at run time (rank 3): still one DmlLowerError naming the node, never a wrong answer."""
    compiled = compile_model(eyelike_runtime_rank_model())
    feeds = {"x": np.ones(24, np.float32), "s": np.array([2, 3, 4], np.int64)}
    with pytest.raises(DmlLowerError) as info:
        compiled.run(feeds)
    assert "eye" in str(info.value) and "EyeLike" in str(info.value)


@pytest.mark.parametrize("argv", [["conformance", "run", "dml", "--filter", "test_trilu_*"],
                                  ["check", "compiler/examples/masked_select.onnx"],
                                  ["run", "compiler/examples/masked_select.onnx"],
                                  ["reduce", "compiler/examples/masked_select.onnx", "-o", "never.onnx"]])
@pytest.mark.parametrize("given", ["", " "])
def test_no_backend_named_is_one_line(argv, given, capsys):
    """--backends '' named nothing: conformance run then ran nothing and exited 0."""
    code, out, err = cli_exits([*argv, "--backends", given], capsys)
    assert (code, out) == (2, "")
    if not given:           # refused as every option's empty value is
        assert "--backends" in err and "an empty value names nothing" in err and err.count("\n") == 1
        return
    assert err == (f"dml-lower: error: --backends {given!r}: no backend named; choose from cpu, ort, dml, ort-cpu, "
                   "ort-dml, ort:<ProviderName>\n")


@pytest.mark.parametrize("value", ["abc", "\u00b2", "-1", "1.5"])
def test_a_bad_wine_setting_is_a_usage_error_before_any_run(value, tmp_path, capfd, monkeypatch):
    """DML_LOWER_WINESERVER_PERSIST is read when a DirectML host starts: a bad one was a [dml] ERROR
    (exit 1) after the other backends ran; it is the user's setting, refused with the backends."""
    monkeypatch.setenv("DML_LOWER_WINESERVER_PERSIST", value)
    code = main(["check", good_model(tmp_path), "--backends", "cpu,dml"])
    out, err = capfd.readouterr()
    assert code == 2 and out == "" and err.startswith("dml-lower: error: DML_LOWER_WINESERVER_PERSIST=")
    assert main(["check", good_model(tmp_path), "--backends", "cpu", "-q"]) == 0     # not read without DirectML


@pytest.mark.parametrize("command", [["check", "-q"], ["run", "--backends", "ort-cpu"]])
def test_onnxruntime_default_logger_says_nothing_in_the_console_script(command, tmp_path):
    """An allocation onnxruntime's allocator sees overflow: its default logger wrote two or three
    coloured lines before our one line. The console script's process is the command's and quiets
    it (the Python API leaves onnxruntime's default logger to its caller)."""
    import subprocess
    import sys
    path = overflowing_model(tmp_path)
    code = "import sys; from onnx_dml_lowering.compiler.cli import entry; sys.argv[0] = 'dml-lower'; entry()"
    done = subprocess.run([sys.executable, "-c", code, command[0], path, *command[1:]], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("dml-lower: error: ") and "expand" in done.stderr and "\x1b" not in done.stderr
