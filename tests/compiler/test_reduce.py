"""dml-lower reduce: real failures in padded models cut down to a handful of nodes, and the
minimal model written with its inputs reproduces the same status under `check`.

Failures are real: onnxruntime CPU's NonZero of a scalar (shape [1, n] where ONNX says [0, n])
read through Shape deep in a model, and one numpy emulator kernel broken in process
(runtime.kernels.diagonal_matrix writing the wrong diagonal of non-square outputs).
"""
from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.runtime.npz import load_npz as _load_npz
from onnx_dml_lowering.compiler.reduce import inputs_path, reduce_model
from onnx_dml_lowering.runtime import kernels
from onnx_dml_lowering.runtime.check import Tolerances, check
from onnx_dml_lowering.runtime.feeds import random_feeds
from tests.builders import graph_model


def pad_chain(i: int, source: str) -> "list[onnx.NodeProto]":
    """Four nodes unrelated to any failure: source -> Abs -> Add c -> Sqrt -> Mul c -> p{i}."""
    return [h.make_node("Abs", [source], [f"pa{i}"], name=f"pad_abs{i}"),
            h.make_node("Add", [f"pa{i}", f"c{i}"], [f"pb{i}"], name=f"pad_add{i}"),
            h.make_node("Sqrt", [f"pb{i}"], [f"pc{i}"], name=f"pad_sqrt{i}"),
            h.make_node("Mul", [f"pc{i}", f"c{i}"], [f"p{i}"], name=f"pad_mul{i}")]


def padded(core: "list[onnx.NodeProto]", last: str, pads: int, source: str = "w") -> "list[onnx.NodeProto]":
    """Pad chains before, among and after `core`; y = last + p0 + ... (so the failure is deep)."""
    chains = [pad_chain(i, source) for i in range(pads)]
    half = len(core) // 2
    nodes = [n for c in chains[: pads // 2] for n in c] + core[:half]
    nodes += [n for c in chains[pads // 2:] for n in c] + core[half:]
    total = last
    for i in range(pads):
        nodes.append(h.make_node("Add", [total, f"p{i}"], [f"sum{i}"], name=f"join{i}"))
        total = f"sum{i}"
    nodes.append(h.make_node("Identity", [total], ["y"], name="out"))
    return nodes


def pad_constants(pads: int) -> dict:
    return {f"c{i}": np.array(1.0 + i / 4, np.float32) for i in range(pads)}


def scalar_nonzero_deep_model(pads: int = 6) -> onnx.ModelProto:
    """x [n, 5], w [n, 5]: a float chain from x times Cast(Gather(Shape(NonZero(ReduceSum(x))), 0)),
    then summed with pad chains over w: ~40 nodes, the scalar NonZero's row count decides y."""
    core = [h.make_node("Tanh", ["x"], ["t0"], name="tanh"),
            h.make_node("Mul", ["t0", "two"], ["t1"], name="double"),
            h.make_node("Add", ["t1", "one"], ["t2"], name="shift"),
            h.make_node("Sigmoid", ["t2"], ["t3"], name="squash"),
            h.make_node("ReduceSum", ["x"], ["s"], name="total", keepdims=0),
            h.make_node("NonZero", ["s"], ["nz"], name="scalar_nonzero"),
            h.make_node("Shape", ["nz"], ["nz_shape"], name="nz_shape"),
            h.make_node("Gather", ["nz_shape", "zero"], ["rows"], name="rows", axis=0),
            h.make_node("Cast", ["rows"], ["rows_f"], name="rows_float", to=T.FLOAT),
            h.make_node("Mul", ["t3", "rows_f"], ["scaled"], name="scale")]
    inits = {"two": np.array(2.0, np.float32), "one": np.array(1.0, np.float32),
             "zero": np.array(0, np.int64), **pad_constants(pads)}
    return graph_model(padded(core, "scaled", pads),
                       [("x", T.FLOAT, ["n", 5]), ("w", T.FLOAT, ["n", 5])],
                       [("y", T.FLOAT, ["n", 5]), ("p0", T.FLOAT, ["n", 5])], inits)


def eyelike_deep_model(pads: int = 6) -> onnx.ModelProto:
    """x [n, 5]: y = EyeLike(Relu(x), k=1) * x + square EyeLike(v [4, 4]) summed in + pad chains."""
    core = [h.make_node("Relu", ["x"], ["r"], name="relu"),
            h.make_node("EyeLike", ["r"], ["band"], name="eye_wide", k=1),
            h.make_node("Mul", ["band", "x"], ["masked"], name="mask"),
            h.make_node("EyeLike", ["v"], ["square"], name="eye_square"),
            h.make_node("ReduceSum", ["square"], ["trace"], name="trace", keepdims=0),
            h.make_node("Add", ["masked", "trace"], ["core"], name="add_trace")]
    return graph_model(padded(core, "core", pads, source="x"),
                       [("x", T.FLOAT, ["n", 5]), ("v", T.FLOAT, [4, 4])],
                       [("y", T.FLOAT, ["n", 5]), ("square", T.FLOAT, [4, 4])], pad_constants(pads))


def scalar_nonzero_output_model(pads: int = 4) -> onnx.ModelProto:
    """The scalar NonZero is a graph output (onnxruntime's deviation, named), beside pad chains."""
    core = [h.make_node("ReduceSum", ["x"], ["s"], name="total", keepdims=0),
            h.make_node("NonZero", ["s"], ["nz"], name="scalar_nonzero")]
    return graph_model(padded(core, "w", pads),
                       [("x", T.FLOAT, [3, 4]), ("w", T.FLOAT, [3, 4])],
                       [("y", T.FLOAT, [3, 4]), ("nz", T.INT64, [0, None])], pad_constants(pads))


def broken_diagonal_matrix(out, offset, value):
    """DIAGONAL_MATRIX writing the diagonal one to the right on non-square outputs."""
    ORIGINAL_DIAGONAL_MATRIX(out, offset + (out.shape[-2] != out.shape[-1]), value)


ORIGINAL_DIAGONAL_MATRIX = kernels.diagonal_matrix


def save(model: onnx.ModelProto, path: Path) -> str:
    onnx.save(model, str(path))
    return str(path)


def run(argv: "list[str]", capfd) -> "tuple[int, str, str]":
    capfd.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:               # argparse's usage errors
        code = exc.code
    out, err = capfd.readouterr()
    return code, out, err


def statuses(model_path: str, npz: str, backend: str) -> "dict[str, str]":
    """check MIN.onnx --inputs MIN.inputs.npz --backends B, as the Python API runs it."""
    _, report = check(compile_model(model_path), _load_npz(npz), [backend], Tolerances())
    return {o.output: o.status for b in report.backends for o in b.outputs}


def test_scalar_nonzero_mismatch_deep_in_a_model_is_cut_to_nonzero_and_shape(tmp_path, capfd):
    model = save(scalar_nonzero_deep_model(), tmp_path / "deep.onnx")
    assert len(onnx.load(model).graph.node) >= 30
    code, out, _ = run(["check", model, "--backends", "ort-cpu", "--dim", "n=4"], capfd)
    assert code == 1 and "[ort-cpu] y: MISMATCH" in out        # the failure, deep in the model

    minimal = tmp_path / "min.onnx"
    code, out, err = run(["reduce", model, "-o", str(minimal), "--backends", "ort-cpu", "--dim", "n=4"], capfd)
    assert code == 0, err
    reduced = onnx.load(str(minimal))
    ops = [n.op_type for n in reduced.graph.node]
    assert len(ops) <= 5 and "NonZero" in ops, ops
    npz = inputs_path(minimal)
    assert npz == tmp_path / "min.inputs.npz" and npz.is_file()
    assert f"-> {len(ops)} node" in out
    # The failing line printed is the one check gives on the files as written.
    found = statuses(str(minimal), str(npz), "ort-cpu")
    assert "mismatch" in found.values(), found
    failing = [name for name, status in found.items() if status == "mismatch"]
    assert any(f"[ort-cpu] {name}: MISMATCH" in out for name in failing)
    # The cut value fed to the NonZero is the ReduceSum of the original feed (the oracle's).
    feeds = _load_npz(str(npz))
    x = random_feeds(compile_model(model).inputs, seed=0, dims={"n": 4})["x"]
    assert set(feeds) == {"s"} and feeds["s"].shape == ()
    np.testing.assert_allclose(feeds["s"], x.sum(dtype=np.float64), rtol=1e-5)
    # The command line agrees: the minimal model fails check the same way (exit 1, MISMATCH).
    code, out, _ = run(["check", str(minimal), "--inputs", str(npz), "--backends", "ort-cpu"], capfd)
    assert code == 1 and f"[ort-cpu] {failing[0]}: MISMATCH" in out
    # The lowered graph computes ONNX semantics: nothing to reduce on cpu, one line, exit 1.
    code, out, _ = run(["reduce", model, "-o", str(tmp_path / "none.onnx"), "--backends", "cpu",
                        "--dim", "n=4"], capfd)
    assert code == 1 and out.strip().count("\n") == 0 and "no MISMATCH on cpu" in out
    assert not (tmp_path / "none.onnx").exists()


def test_reduce_model_api_returns_the_original_and_minimal_failures():
    compiled = compile_model(scalar_nonzero_deep_model(pads=3))
    feeds = random_feeds(compiled.inputs, seed=2, dims={"n": 3})
    whole, reduction = reduce_model(compiled, feeds, "ort-cpu")
    assert [o.status for o in whole.outputs] == ["mismatch", "match"]
    assert [o.output for o in reduction.original] == ["y"]
    assert reduction.nodes_before == len(compiled.model.graph.node)
    assert [n.op_type for n in reduction.nodes] == ["NonZero", "Shape"]
    assert [o.status for o in reduction.failing] == ["mismatch"]
    assert reduction.checks >= 3


def test_a_broken_emulator_kernel_is_found_on_cpu(tmp_path, capfd, monkeypatch):
    model = save(eyelike_deep_model(), tmp_path / "eyes.onnx")
    code, out, _ = run(["check", model, "--backends", "cpu", "--dim", "n=3"], capfd)
    assert code == 0, out                                       # the real kernel is right
    monkeypatch.setattr(kernels, "diagonal_matrix", broken_diagonal_matrix)
    code, out, _ = run(["check", model, "--backends", "cpu", "--dim", "n=3"], capfd)
    assert code == 1 and "[cpu] y: MISMATCH" in out and "[cpu] square: MATCH" in out

    minimal = tmp_path / "eye_min.onnx"
    code, out, err = run(["reduce", model, "-o", str(minimal), "--backends", "cpu", "--dim", "n=3"], capfd)
    assert code == 0, err
    reduced = onnx.load(str(minimal))
    names = [n.name for n in reduced.graph.node]
    assert "eye_wide" in names and "eye_square" not in names and len(names) <= 3, names
    # The cut input keeps the symbolic dimension shape inference gave it.
    inputs = {vi.name: vi for vi in reduced.graph.input}
    if "r" in inputs:
        dims = inputs["r"].type.tensor_type.shape.dim
        assert [d.dim_param or d.dim_value for d in dims] == ["n", 5]
    npz = str(inputs_path(minimal))
    assert "mismatch" in statuses(str(minimal), npz, "cpu").values()
    code, out, _ = run(["check", str(minimal), "--inputs", npz, "--backends", "cpu"], capfd)
    assert code == 1 and "MISMATCH" in out
    # With the kernel repaired the minimal model passes: the repro isolates the kernel.
    monkeypatch.setattr(kernels, "diagonal_matrix", ORIGINAL_DIAGONAL_MATRIX)
    assert set(statuses(str(minimal), npz, "cpu").values()) == {"match"}


def test_status_deviation_cuts_to_the_scalar_nonzero(tmp_path, capfd):
    model = save(scalar_nonzero_output_model(), tmp_path / "dev.onnx")
    minimal = tmp_path / "dev_min.onnx"
    feeds = tmp_path / "feeds.npz"
    code, _, _ = run(["check", model, "--backends", "ort-cpu", "--seed", "3", "--save-inputs", str(feeds)], capfd)
    assert code == 0
    code, out, err = run(["reduce", model, "-o", str(minimal), "--backends", "ort-cpu",
                          "--status", "deviation", "--inputs", str(feeds)], capfd)
    assert code == 0, err
    x = _load_npz(str(feeds))["x"]
    np.testing.assert_allclose(_load_npz(str(inputs_path(minimal)))["s"], x.sum(dtype=np.float64), rtol=1e-5)
    reduced = onnx.load(str(minimal))
    assert [n.op_type for n in reduced.graph.node] == ["NonZero"]
    assert [o.name for o in reduced.graph.output] == ["nz"]
    assert statuses(str(minimal), str(inputs_path(minimal)), "ort-cpu") == {"nz": "deviation"}
    assert "[ort-cpu] nz: DEVIATION" in out
    # A deviation is not a mismatch: reducing for the default status finds nothing, one line.
    code, out, err = run(["reduce", model, "-o", str(tmp_path / "m.onnx"), "--backends", "ort-cpu",
                          "--seed", "3"], capfd)
    assert (code, err) == (1, "") and out.strip() == (
        f"reduce: no MISMATCH on ort-cpu in {model}: nothing to reduce")


def _missing_output(t: Path) -> "list[str]":
    return ["reduce", save(scalar_nonzero_output_model(), t / "m.onnx"), "--backends", "cpu"]


def _args(t: Path, *more: str) -> "list[str]":
    return ["reduce", save(scalar_nonzero_output_model(), t / "m.onnx"), "-o", str(t / "min.onnx"), *more]


USAGE_ERRORS = {
    "missing-o": (_missing_output, ["-o"]),
    "missing-backends": (lambda t: _args(t), ["--backends"]),
    "unknown-backend": (lambda t: _args(t, "--backends", "gpu"), ["'gpu'"]),
    "two-backends": (lambda t: _args(t, "--backends", "cpu,ort-cpu"), ["one backend"]),
    "unknown-status": (lambda t: _args(t, "--backends", "cpu", "--status", "MATCH"), ["--status", "MATCH"]),
    "missing-model": (lambda t: ["reduce", str(t / "absent.onnx"), "-o", str(t / "min.onnx"), "--backends", "cpu"],
                      ["absent.onnx", "does not exist"]),
    "not-a-model": (lambda t: ["reduce", (t / "notes.onnx").write_text("hello") and str(t / "notes.onnx"),
                               "-o", str(t / "min.onnx"), "--backends", "cpu"], ["notes.onnx", "not an ONNX model"]),
    "missing-inputs": (lambda t: _args(t, "--backends", "cpu", "--inputs", str(t / "absent.npz")),
                       ["absent.npz", "does not exist"]),
    "output-dir-missing": (lambda t: ["reduce", save(scalar_nonzero_output_model(), t / "m.onnx"), "-o",
                                      str(t / "no" / "min.onnx"), "--backends", "cpu"], ["-o", "does not exist"]),
    "output-is-the-model": (lambda t: ["reduce", save(scalar_nonzero_output_model(), t / "m.onnx"), "-o",
                                       str(t / "m.onnx"), "--backends", "cpu"], ["m.onnx", "model file", "reads"]),
    "bad-tolerance": (lambda t: _args(t, "--backends", "cpu", "--atol", "y=abc"), ["y=abc"]),
}


@pytest.mark.parametrize("row", sorted(USAGE_ERRORS))
def test_usage_errors_are_one_line_and_exit_2(row, tmp_path, capfd):
    build, substrings = USAGE_ERRORS[row]
    code, out, err = run(build(tmp_path), capfd)
    assert code == 2, (code, out, err)
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for text in substrings:
        assert text in lines[0], lines[0]
    assert not (tmp_path / "min.onnx").exists()


REPO = Path(__file__).resolve().parent.parent.parent
STORED = Path("tests") / "models" / "reduce" / "scalar_nonzero_deep.onnx"


def test_stored_example_is_the_builders_model():
    assert onnx.load(str(REPO / STORED)) == scalar_nonzero_deep_model()
    # docs/commands/reduce.md's --status ERROR example (written by int16_trilu_model, below)
    assert onnx.load(str(REPO / STORED.parent / "int16_trilu_deep.onnx")) == int16_trilu_model()


def test_readme_reduce_output_is_current(tmp_path, capfd, monkeypatch):
    """README's reduce run, re-run where its relative paths hold (the model copied, MIN.onnx
    written into tmp_path): the same text."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```\n\$ dml-lower (reduce [^\n]+)\n(.*?)```", text, re.S)
    assert block, "README shows a reduce run"
    (tmp_path / STORED.parent).mkdir(parents=True)
    shutil.copy(REPO / STORED, tmp_path / STORED)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(shlex.split(block.group(1)), capfd)
    assert code == 0
    assert out == block.group(2)


def _golden(model: Path, tmp_path: Path, capfd) -> "tuple[Path, Path]":
    """Golden outputs and their inputs, as `check --save-outputs` writes them on another machine."""
    golden, inputs = tmp_path / "golden.npz", tmp_path / "in.npz"
    code, _, err = run(["check", model, "--dim", "n=4", "--save-outputs", golden, "--save-inputs", inputs], capfd)
    assert code == 0, err
    return golden, inputs


def test_a_mismatch_against_golden_outputs_is_reduced(tmp_path, capfd):
    """reduce --oracle GOLDEN.npz: the whole model's MISMATCH is the one against the golden file; the
    sub-models are checked against ONNX semantics. It reduces to what the hybrid oracle reduces to."""
    model = save(scalar_nonzero_deep_model(), tmp_path / "deep.onnx")
    golden, inputs = _golden(model, tmp_path, capfd)
    plain, with_golden = tmp_path / "plain.onnx", tmp_path / "golden_min.onnx"
    assert run(["reduce", model, "-o", plain, "--backends", "ort-cpu", "--inputs", inputs], capfd)[0] == 0
    code, out, err = run(["reduce", model, "-o", with_golden, "--backends", "ort-cpu", "--inputs", inputs,
                          "--oracle", golden], capfd)
    assert code == 0, err
    assert onnx.load(str(with_golden)).graph.node == onnx.load(str(plain)).graph.node
    assert f"check {with_golden} --inputs " in out and "--oracle" not in out     # its repro: ONNX semantics
    # a golden file that disagrees with ONNX semantics here: one line saying why nothing reproduces it
    with np.load(golden) as data:
        entries = dict(data)
    entries["y"] = entries["y"] + 1
    np.savez(golden, **entries)
    code, out, err = run(["reduce", model, "-o", tmp_path / "x.onnx", "--backends", "cpu", "--inputs", inputs,
                          "--oracle", golden], capfd)
    assert code == 2 and err.count("\n") == 1 and "agrees with ONNX semantics" in err and str(golden) in err


@pytest.mark.parametrize("options, rerun", [
    (["--oracle", "reference"], "--oracle reference"),
    (["--threads", "1", "--graph-optimization-level", "disable"], "--graph-optimization-level disable --threads 1"),
    (["--session-config", "session.intra_op.allow_spinning=0"], "--session-config session.intra_op.allow_spinning=0"),
])
def test_oracle_and_session_options_reach_every_check_and_the_repro(options, rerun, tmp_path, capfd):
    model = save(scalar_nonzero_deep_model(), tmp_path / "deep.onnx")
    minimal = tmp_path / "min.onnx"
    code, out, err = run(["reduce", model, "-o", minimal, "--backends", "ort-cpu", "--dim", "n=4", *options], capfd)
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith(f"check {minimal} "))
    assert line.endswith(f"{rerun}:")
    code, out, _ = run(shlex.split(line[:-1]), capfd)       # the printed repro, run as printed
    assert code == 1 and ": MISMATCH (" in out


def test_a_session_setting_onnxruntime_rejects_is_one_line(tmp_path, capfd):
    model = save(scalar_nonzero_deep_model(), tmp_path / "deep.onnx")
    code, _, err = run(["reduce", model, "-o", tmp_path / "m.onnx", "--backends", "ort-cpu", "--dim", "n=4",
                        "--session-config", "session.intra_op_thread_affinities=zz"], capfd)
    assert code == 2 and err.count("\n") == 1 and "onnxruntime rejects --session-config session.intra_op_thread_affinities=zz" in err


def test_reduce_shares_checks_option_declarations():
    """The options reduce takes from check are declared once (cli/groups.py), not copied."""
    from onnx_dml_lowering.compiler.cli import build_parser
    parsers = build_parser()._subparsers._group_actions[0].choices
    shared = ["--oracle", "--session-config", "--graph-optimization-level", "--threads", "--atol", "--rtol",
              "--provider-option", "--ep-library", "--no-fallback", "--val-range", "--zero-fraction", "--dim"]
    def table(parser):
        return {a.option_strings[-1]: (a.help, a.metavar, a.default, type(a)) for a in parser._actions if a.option_strings}
    check, reduce = table(parsers["check"]), table(parsers["reduce"])
    assert {option: reduce[option] for option in shared} == {option: check[option] for option in shared}


def conv_bn_model(channels: int = 256) -> onnx.ModelProto:
    """Conv + BatchNormalization with a 2.4 MB weight: onnxruntime fuses the two on the file as
    shipped; whether a sub-model rebuilt from the nodes gets the same fusion depends on how its
    weights reach onnxruntime, so the whole model can fail where no sub-model does."""
    rng = np.random.default_rng(0)
    inits = {"W": (rng.standard_normal((channels, channels, 3, 3)) * 0.05).astype(np.float32),
             "s": rng.uniform(0.5, 2, channels).astype(np.float32), "b": rng.standard_normal(channels).astype(np.float32),
             "m": (rng.standard_normal(channels) * 0.1).astype(np.float32),
             "v": rng.uniform(0.5, 2, channels).astype(np.float32)}
    nodes = [h.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], name="bn")]
    return graph_model(nodes, [("x", T.FLOAT, [1, channels, 8, 8])], [("y", T.FLOAT, [1, channels, 8, 8])], inits)


def test_a_failure_no_sub_model_reproduces_is_said_as_such(tmp_path, capfd):
    """The whole model's MISMATCH (fused Conv + BatchNormalization against the unfused oracle, at
    atol 0 / rtol 0) either reduces to a repro that reproduces, or reduce says in one line that no
    smaller model reproduces it and why the rebuilt graph did not (exit 1): never that the failing
    value is one no node computes (it was said of Mask R-CNN's boxes)."""
    model = save(conv_bn_model(), tmp_path / "convbn.onnx")
    code, out, err = run(["reduce", model, "-o", tmp_path / "min.onnx", "--backends", "ort-cpu",
                          "--atol", "0", "--rtol", "0"], capfd)
    assert "no node computes" not in out + err and err == "", err
    if code == 1:
        lines = out.splitlines()
        assert len(lines) == 1 and (lines[0].startswith("reduce: no smaller model reproduces the MISMATCH on ort-cpu (y): "
                                                        "the graph rebuilt from its 2 nodes with the same inputs and weights ")
                                    or lines[0].startswith("reduce: no MISMATCH on ort-cpu")), out
    else:
        assert code == 0 and ": MISMATCH (" in out


def int16_trilu_model(pads: int = 4, trilu_output: bool = False) -> onnx.ModelProto:
    """x [n, 5] -> Tanh * 10 -> Cast(int16) -> Trilu -> Cast(float) + x, deep among pad chains:
    onnxruntime's CPU provider has no int16 Trilu kernel, so the file as shipped is a backend ERROR
    (with --provider-model modified the node is cut: its value UNSUPPORTED where it is an output)."""
    core = [h.make_node("Tanh", ["x"], ["a"], name="tanh"),
            h.make_node("Mul", ["a", "ten"], ["b"], name="scale"),
            h.make_node("Cast", ["b"], ["i"], name="to_int16", to=T.INT16),
            h.make_node("Trilu", ["i"], ["t"], name="lower", upper=0),
            h.make_node("Cast", ["t"], ["f"], name="to_float", to=T.FLOAT),
            h.make_node("Add", ["f", "x"], ["core"], name="add")]
    outputs = [("y", T.FLOAT, ["n", 5])] + ([("t", T.INT16, ["n", 5])] if trilu_output else [])
    return graph_model(padded(core, "core", pads, source="x"), [("x", T.FLOAT, ["n", 5])], outputs,
                       {"ten": np.array(10.0, np.float32), **pad_constants(pads)}, opset=17)


@pytest.mark.parametrize("status, extra", [("ERROR", []), ("UNSUPPORTED", ["--provider-model", "modified"])])
def test_a_backend_error_or_unsupported_node_is_cut_down_like_a_mismatch(status, extra, tmp_path, capfd):
    model = save(int16_trilu_model(trilu_output=status == "UNSUPPORTED"), tmp_path / "m.onnx")
    assert len(onnx.load(model).graph.node) >= 20
    minimal = tmp_path / "min.onnx"
    code, out, err = run(["reduce", model, "-o", minimal, "--backends", "ort-cpu", "--dim", "n=4", "--status", status,
                          *extra], capfd)
    assert code == 0 and err == "", out + err
    assert [n.op_type for n in onnx.load(str(minimal)).graph.node] == ["Trilu"], out
    # The files as written fail check the same way, as the user re-runs the line reduce printed
    # (it dropped --provider-model modified, so its check said ERROR where reduce found UNSUPPORTED).
    import shlex
    (repro,) = [line for line in out.splitlines() if line.startswith("check ") and line.endswith(":")]
    assert repro == f"check {minimal} --inputs {inputs_path(minimal)} --backends ort-cpu{''.join(' ' + e for e in extra)}:"
    code, out, _ = run(shlex.split(repro[:-1]), capfd)
    said = ("[ort-cpu] ERROR onnxruntime (CPUExecutionProvider) cannot load the model: " if status == "ERROR"
            else "[ort-cpu] t: UNSUPPORTED")
    assert said in out and "Trilu" in out, out
    # The other status is not there: nothing to reduce, exit 1, nothing written.
    other = "UNSUPPORTED" if status == "ERROR" else "ERROR"
    code, out, _ = run(["reduce", model, "-o", tmp_path / "none.onnx", "--backends", "ort-cpu", "--dim", "n=4",
                        "--status", other, *extra], capfd)
    assert code == 1 and f"no {other} on ort-cpu" in out and not (tmp_path / "none.onnx").exists()
    # the file as shipped failed to load: the way to another status is said
    hint = "; --provider-model modified runs it with the nodes it cannot load cut out, where another status shows"
    assert (hint in out) == (not extra), out


def test_an_error_reproduces_only_as_the_same_message():
    """error_signature: the same message about other names, regions and sizes is the same ERROR;
    another message is not (a cut that fails some other way is no repro)."""
    from onnx_dml_lowering.compiler.reduce import error_signature
    one = "ONNX region onnx_region_2 cannot run: Invalid rank for input: 'a/b' Got: 3 Expected: 4"
    assert error_signature(one) == error_signature("ONNX region onnx_region_0 cannot run: Invalid rank for input: "
                                                   "'c' Got: 2 Expected: 5")
    assert error_signature(one) != error_signature("ONNX region onnx_region_2 cannot run: Invalid shape for input: "
                                                   "'a/b' Got: 3 Expected: 4")


def test_a_node_reading_one_initializer_twice_is_reduced(tmp_path, capfd):
    """A node may read a name twice (dynamo's Slice(x, one, e, axes, one)); each sub-model
    declares it once (it was declared twice, the checker refused every cut, and reduce said the
    whole model was the smallest repro)."""
    model = scalar_nonzero_deep_model()
    shift = next(n for n in model.graph.node if n.name == "shift")
    shift.input[1] = "one_sq"
    model.graph.node.insert(0, h.make_node("Mul", ["one", "one"], ["one_sq"], name="square_one"))
    path = save(model, tmp_path / "twice.onnx")
    minimal = tmp_path / "min.onnx"
    code, out, err = run(["reduce", path, "-o", str(minimal), "--backends", "ort-cpu", "--dim", "n=4"], capfd)
    assert code == 0, out + err
    ops = [n.op_type for n in onnx.load(str(minimal)).graph.node]
    assert len(ops) <= 5 and "NonZero" in ops, ops
