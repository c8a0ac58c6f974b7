"""`dml-lower optimize` at its edges: invalid input is refused before anything is written, the
sizes it prints are the files' (also when -o is the input), --check runs on the user's feeds or
sizes, and onnxruntime's own log lines stay off stderr."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.model_facts import graph_inputs
from onnx_dml_lowering.compiler.optimize import bit_identical
from onnx_dml_lowering.ir import DmlLowerError
from tests.optimize_models import band_array, stored_model

WROTE = re.compile(r"^wrote (.*?)(?: \(external data (.*)\))?: (\d+) -> (\d+) bytes \((\d+) bytes saved\), "
                   r"(\d+) -> (\d+) nodes$", re.M)


def banded(extra_nodes=(), extra_inputs=(), extra_outputs=(), extra_inits=()) -> onnx.ModelProto:
    """A stored 64x64 causal mask (something optimize rewrites) beside the nodes given."""
    model = stored_model(band_array((64, 64), -100, 1, 1, np.float32))
    model.graph.node.extend(extra_nodes)
    model.graph.input.extend(extra_inputs)
    model.graph.output.extend(extra_outputs)
    model.graph.initializer.extend(extra_inits)
    return model


def vi(name: str, onnx_type: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, onnx_type, shape)


INVALID = {
    "undefined input": banded([helper.make_node("Relu", ["nope"], ["r"], name="relu")], [],
                              [vi("r", TensorProto.FLOAT, [2])]),
    "unknown op": banded([helper.make_node("NoSuchOp", ["x"], ["r"], name="mystery")], [vi("x", TensorProto.FLOAT, [2])],
                         [vi("r", TensorProto.FLOAT, [2])]),
    "type mismatch": banded([helper.make_node("Add", ["x", "i"], ["r"], name="add")],
                            [vi("x", TensorProto.FLOAT, [2]), vi("i", TensorProto.INT64, [2])],
                            [vi("r", TensorProto.FLOAT, [2])]),
    "EyeLike of 3-D": banded([helper.make_node("EyeLike", ["x"], ["r"], name="eyelike")],
                             [vi("x", TensorProto.FLOAT, [2, 2, 2])], [vi("r", TensorProto.FLOAT, [2, 2])]),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_model_is_refused_in_one_line_and_nothing_is_written(case, tmp_path, capsys) -> None:
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(INVALID[case], str(source))
    with pytest.raises(DmlLowerError) as expected:       # what every other command says of it
        compile_model(str(source))
    assert main(["optimize", str(source), "-o", str(target), "--check"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"dml-lower: error: {expected.value}\n"
    assert not target.exists()
    before = source.read_bytes()
    assert main(["optimize", str(source), "-o", str(source)]) == 2       # in place: the input stays
    assert source.read_bytes() == before


def files_bytes(model_path: Path) -> int:
    """The model file and every external data file it names, measured here."""
    raw = onnx.load(str(model_path), load_external_data=False)
    files = {e.value for t in raw.graph.initializer if t.data_location == TensorProto.EXTERNAL
             for e in t.external_data if e.key == "location"}
    return os.path.getsize(model_path) + sum(os.path.getsize(model_path.parent / f) for f in files)


def _with_external_weights(location: str, model_name: str = "in.onnx") -> None:
    """banded() beside a 32x32 weight kept in the external file `location`, saved as `model_name` in
    the working folder."""
    model = banded()
    model.graph.initializer.append(numpy_helper.from_array(np.ones((32, 32), np.float32), "w"))
    model.graph.node.append(helper.make_node("Identity", ["w"], ["z"], name="w_out"))
    model.graph.output.append(vi("z", TensorProto.FLOAT, [32, 32]))
    onnx.save_model(model, model_name, save_as_external_data=True, location=location, size_threshold=0)


@pytest.mark.parametrize("case", ["the input's data file", "a directory", "the input model"])
def test_an_output_whose_data_file_cannot_be_written_is_refused_before_anything(case, tmp_path, capsys,
                                                                               monkeypatch) -> None:
    """`-o out.onnx` writes its external data to out.onnx.data; where that is the input's data file
    (in.onnx would read another layout's bytes), a directory, or the model read itself, the refusal
    is one line before any work (nothing printed before it: it came after the rewrite's lines), the
    data file named once, spelled as given (it was absolute in one place, relative in the other),
    and every file as it was."""
    monkeypatch.chdir(tmp_path)
    model = "out.onnx.data" if case == "the input model" else "in.onnx"
    _with_external_weights("out.onnx.data" if case == "the input's data file" else "w.bin", model)
    if case == "a directory":
        os.mkdir("out.onnx.data")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert main(["optimize", model, "-o", "out.onnx", "--check"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, (out, err)
    assert err.startswith("dml-lower: error: -o 'out.onnx': its external data 'out.onnx.data': "), err
    assert str(tmp_path) not in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("external, in_place, rewrites", [
    (None, True, True),
    (None, False, True),
    ("in.onnx.data", True, True),       # the external data file is rewritten under the same name
    ("weights.bin", True, True),        # ... or a new one is written beside it
    ("weights.bin", False, True),
    (None, True, False),                # nothing to rewrite
])
def test_printed_sizes_are_the_files_before_and_after(external, in_place, rewrites, tmp_path, capsys) -> None:
    model = banded() if rewrites else stored_model(np.ones((4, 4), np.float32))
    weights = numpy_helper.from_array(np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32), "w")
    model.graph.initializer.append(weights)
    model.graph.node.append(helper.make_node("Identity", ["w"], ["z"], name="w_out"))
    model.graph.output.append(vi("z", TensorProto.FLOAT, [32, 32]))
    source = tmp_path / "in.onnx"
    if external:
        onnx.save_model(model, str(source), save_as_external_data=True, location=external, size_threshold=0)
    else:
        onnx.save_model(model, str(source))
    target = source if in_place else tmp_path / "out.onnx"
    before = files_bytes(source)
    assert main(["optimize", str(source), "-o", str(target), "--check"]) == 0
    text = capsys.readouterr().out
    after = files_bytes(target)
    (line,) = WROTE.findall(text)
    assert line[0] == str(target)
    assert (int(line[2]), int(line[3]), int(line[4])) == (before, after, before - after)
    assert (after < before) == rewrites
    assert "check: bit-identical on onnxruntime CPU" in text
    loaded = onnx.load(str(target))
    assert any(np.array_equal(numpy_helper.to_array(t), numpy_helper.to_array(weights)) for t in loaded.graph.initializer)


def reshape_model() -> onnx.ModelProto:
    """z = Reshape(x, [2, -1]): runs only where x has an even length n, as an MoE export runs only on
    feeds that route to every expert; beside it a stored mask optimize rewrites."""
    return banded([helper.make_node("Reshape", ["x", "pair"], ["r"], name="pairs")], [vi("x", TensorProto.FLOAT, ["n"])],
                  [vi("r", TensorProto.FLOAT, [2, "half"])], [numpy_helper.from_array(np.array([2, -1], np.int64), "pair")])


@pytest.mark.parametrize("feeds, dims, code, says", [
    (None, [], 2, "cannot run the model on seed 0, dimensions 1: "),      # random feeds at 1, 3, 8: odd n
    ({"x": np.arange(6, dtype=np.float32)}, [], 0, "check: bit-identical on onnxruntime CPU"),
    ({"x": np.arange(5, dtype=np.float32)}, [], 2, "cannot run the model on the --inputs feeds: "),
    (None, ["n=4"], 0, "check: bit-identical on onnxruntime CPU"),
    (None, ["n=3"], 2, "cannot run the model on seed 0, n=3: "),
    (None, ["k=4"], 2, "--dim k: no input dimension has that name (symbolic input dimensions: n)"),
    ({"x": np.arange(6, dtype=np.float64)}, [], 2, "input 'x': expected float (float32), got float64"),
    ({"x": np.arange(6, dtype=np.float32), "extra": np.zeros(1)}, [], 2, "feed 'extra' is not an input"),
], ids=lambda v: str(v)[:40])
def test_check_runs_on_the_feeds_or_sizes_given(feeds, dims, code, says, tmp_path, capfd) -> None:
    source, target = tmp_path / "moe.onnx", tmp_path / "out.onnx"
    onnx.save(reshape_model(), str(source))
    args = ["optimize", str(source), "-o", str(target), "--check"] + [a for d in dims for a in ("--dim", d)]
    if feeds is not None:
        np.savez(tmp_path / "feeds.npz", **feeds)
        args += ["--inputs", str(tmp_path / "feeds.npz")]
    assert main(args) == code
    out, err = capfd.readouterr()          # file descriptors: onnxruntime logs from C++
    if code == 0:
        assert says in out and err == ""
    else:                                   # one line, onnxruntime's own error log line not beside it
        assert err.startswith("dml-lower: error: ") and says in err and err.count("\n") == 1
    assert target.exists() == (code == 0)       # checked first, written after: a refused check writes nothing


@pytest.mark.parametrize("target", [[], ["--for", "dml"]], ids=["generators", "for-dml"])
def test_an_output_the_check_refuses_is_not_written(target, tmp_path, capfd) -> None:
    """optimize [--for dml] --check checks the rewritten model before it writes it (issue 35): a
    check that fails leaves the path as it was, a file there untouched."""
    source, out = tmp_path / "moe.onnx", tmp_path / "out.onnx"
    onnx.save(reshape_model(), str(source))
    out.write_bytes(b"previous")
    assert main(["optimize", str(source), "-o", str(out), *target, "--check", "--dim", "n=3"]) == 2
    _, err = capfd.readouterr()
    assert "cannot run the model on seed 0, n=3" in err and err.count("\n") == 1
    assert out.read_bytes() == b"previous" and sorted(os.listdir(tmp_path)) == ["moe.onnx", "out.onnx"]
    assert main(["optimize", str(source), "-o", str(out), *target, "--check", "--dim", "n=4"]) == 0
    assert "check: bit-identical" in capfd.readouterr().out and onnx.load(str(out)).graph.node


@pytest.mark.parametrize("args, says", [
    (["--inputs", "feeds.npz"], "--inputs gives the feeds of --check: add --check"),
    (["--dim", "n=4"], "--dim gives the feeds of --check: add --check"),
    (["--check", "--dim", "n=4", "--inputs", "feeds.npz"], "--dim sizes the random feeds: it does not combine with --inputs"),
    (["--check", "--inputs", "missing.npz"], "inputs file 'missing.npz' does not exist"),
    (["--check", "--dim", "n=four"], "--dim 'n=four': expected NAME=SIZE with a non-negative integer size"),
    (["--check", "--dim", "n=2", "--dim", "n=4"], "--dim n: given two sizes, 2 and 4: give each dimension one size"),
    (["--check", "--dim", "n=2,4"], "--dim 'n=2,4': --dim fixes one size; to check n at several sizes write "
                                    "--sweep 2,4 (the sizes every dimension --dim does not fix takes in turn)"),
    (["--sweep", "2,4"], "--sweep gives the feeds of --check: add --check"),
    (["--check", "--sweep", "2,4", "--inputs", "feeds.npz"],
     "--sweep sizes the random feeds: it does not combine with --inputs"),
    (["--check", "--sweep", "2,x"], "--sweep '2,x': expected SIZE[,SIZE...] of non-negative integers"),
    (["--memory-limit", "1GiB"], "--memory-limit bounds the feeds of --check: add --check"),
    (["--check", "--memory-limit", "2Mo"], "memory limit '2Mo' is not a size like 512MiB, 2GB or 1000000"),
])
def test_feed_options_out_of_place_are_refused_before_writing(args, says, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    onnx.save(reshape_model(), "moe.onnx")
    np.savez("feeds.npz", x=np.arange(6, dtype=np.float32))
    assert main(["optimize", "moe.onnx", "-o", "out.onnx"] + args) == 2
    assert capsys.readouterr().err == f"dml-lower: error: {says}\n"
    assert not Path("out.onnx").exists()


@pytest.mark.parametrize("options, code, says", [
    (["--sweep", "2,4,8"], 0, "check: bit-identical on onnxruntime CPU"),       # even n only: runs
    (["--sweep", "2,5"], 2, "cannot run the model on seed 0, dimensions 5: "),   # the sizes given, in order
    (["--sweep", "4", "--dim", "n=6"], 0, "check: bit-identical on onnxruntime CPU"),   # --dim fixes n
    ([], 2, "cannot run the model on seed 0, dimensions 1: "),                  # the default sweep 1, 3, 8
])
def test_check_sweeps_the_sizes_given(options, code, says, tmp_path, capfd) -> None:
    """optimize --check --sweep SIZES: every dimension --dim leaves free takes each size in turn."""
    source, target = tmp_path / "moe.onnx", tmp_path / "out.onnx"
    onnx.save(reshape_model(), str(source))
    assert main(["optimize", str(source), "-o", str(target), "--check", *options]) == code
    out, err = capfd.readouterr()
    assert says in (out if code == 0 else err)


def test_bit_identical_compares_on_the_feeds_given() -> None:
    """Identity and Abs agree on non-negative feeds only: the feeds given are the ones compared."""
    def model(op: str) -> bytes:
        graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [vi("x", TensorProto.FLOAT, ["n"])],
                                  [vi("y", TensorProto.FLOAT, ["n"])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    inputs = graph_inputs(onnx.load_from_string(model("Abs")))
    positive = {"x": np.random.default_rng(0).uniform(0, 5, 7).astype(np.float32)}
    assert bit_identical(model("Identity"), model("Abs"), inputs, feeds=positive) == []
    assert bit_identical(model("Identity"), model("Abs"), inputs, feeds={"x": -positive["x"]}) != []
    assert bit_identical(model("Identity"), model("Abs"), inputs, dims={"n": 5}) != []


@pytest.mark.parametrize("feeds", ["random", "file"])
def test_check_feeds_are_bounded_by_memory_limit(feeds, tmp_path, capfd) -> None:
    """optimize --check --memory-limit bounds its feeds as run's does: over it, MemoryLimitExceeded's
    one line (naming that limit and the option to raise), nothing written; within it, the check runs."""
    from onnx_dml_lowering.runtime.memory import format_size
    source, target = tmp_path / "moe.onnx", tmp_path / "out.onnx"
    onnx.save(reshape_model(), str(source))
    x = np.arange(4000, dtype=np.float32)
    np.savez(tmp_path / "feeds.npz", x=x)
    given = ["--inputs", str(tmp_path / "feeds.npz")] if feeds == "file" else ["--dim", f"n={x.size}"]
    # the file's array, or the random feed and numpy's draws (runtime.feeds.DRAW_BYTES_PER_ELEMENT)
    small = x.nbytes - 1
    assert main(["optimize", str(source), "-o", str(target), "--check", *given, "--memory-limit", str(small)]) == 2
    err = capfd.readouterr().err
    assert err.startswith("dml-lower: error: ") and err.count("\n") == 1, err
    assert f"over the memory limit of {format_size(small)}" in err and "raise --memory-limit" in err
    assert not target.exists()
    assert main(["optimize", str(source), "-o", str(target), "--check", *given, "--memory-limit", "64MiB"]) == 0
    assert "check: bit-identical on onnxruntime CPU" in capfd.readouterr().out and target.exists()


def test_bit_identical_draws_its_feeds_within_the_memory_limit() -> None:
    from onnx_dml_lowering.ir.errors import MemoryLimitExceeded
    from onnx_dml_lowering.runtime.feeds import DRAW_BYTES_PER_ELEMENT
    graph = helper.make_graph([helper.make_node("Abs", ["x"], ["y"])], "g", [vi("x", TensorProto.FLOAT, ["n"])],
                              [vi("y", TensorProto.FLOAT, ["n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    inputs = graph_inputs(onnx.load_from_string(model))
    need = 100 * (4 + DRAW_BYTES_PER_ELEMENT)           # a float32 feed of 100 and numpy's draws
    assert bit_identical(model, model, inputs, dims={"n": 100}, memory_limit=need) == []
    with pytest.raises(MemoryLimitExceeded, match="over the memory limit of"):
        bit_identical(model, model, inputs, dims={"n": 100}, memory_limit=need - 1)
    with pytest.raises(MemoryLimitExceeded):        # the sweep's largest size, 8, past a limit 3 fits
        bit_identical(model, model, inputs, sizes=(1, 3, 8), memory_limit=f"{3 * (4 + DRAW_BYTES_PER_ELEMENT)}")


def test_onnxruntime_log_lines_stay_off_stderr(tmp_path, capfd) -> None:
    model = banded(extra_inits=[numpy_helper.from_array(np.ones(3, np.float32), "unused")])
    source = tmp_path / "in.onnx"
    onnx.save(model, str(source))
    capfd.readouterr()
    ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])      # default options: it warns
    assert "Removing initializer 'unused'" in capfd.readouterr().err
    assert main(["optimize", str(source), "-o", str(tmp_path / "out.onnx"), "--check"]) == 0
    out, err = capfd.readouterr()
    assert "check: bit-identical on onnxruntime CPU" in out and err == ""


def test_a_rewrites_saved_bytes_count_a_weight_left_in_the_file(tmp_path, capsys):
    """A stored 512x512 bool mask (256 KiB: loaded as a reference into the file, its message a
    hundred bytes) replaced by a generator: the rewrite's line counts the mask's data, about what
    the file loses."""
    mask = numpy_helper.from_array(np.tril(np.ones((512, 512), bool)), "mask")
    graph = helper.make_graph([helper.make_node("Where", ["mask", "x", "y0"], ["y"])], "g",
                              [vi("x", TensorProto.FLOAT, [512, 512])], [vi("y", TensorProto.FLOAT, [512, 512])],
                              [mask, numpy_helper.from_array(np.array(0, np.float32), "y0")])
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(source))
    assert main(["optimize", str(source), "-o", str(target)]) == 0
    text = capsys.readouterr().out
    (saved,) = (int(n) for n in re.findall(r"^initializer mask .*: (\d+) bytes saved", text, re.M))
    (line,) = WROTE.findall(text)
    assert abs(saved - int(line[4])) < 1024 and saved > 256 * 1024 - 1024


def test_external_data_to_a_stream_names_no_file(tmp_path, capsys, monkeypatch) -> None:
    """-o /dev/null with external data: the data goes after the model to the same device, and the
    line says so (it said 'external data null.data', a file that is never made)."""
    monkeypatch.chdir(tmp_path)
    model = banded()
    model.graph.initializer.append(numpy_helper.from_array(np.ones((32, 32), np.float32), "w"))
    model.graph.node.append(helper.make_node("Identity", ["w"], ["z"], name="w_out"))
    model.graph.output.append(vi("z", TensorProto.FLOAT, [32, 32]))
    onnx.save_model(model, str(tmp_path / "in.onnx"), save_as_external_data=True, location="in.onnx.data",
                    size_threshold=0)
    assert main(["optimize", str(tmp_path / "in.onnx"), "-o", "/dev/null"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("wrote /dev/null (and after it, to the same stream, the 4096 bytes of external data it "
                           "names null.data: no such file is made): "), line
    assert sorted(os.listdir(tmp_path)) == ["in.onnx", "in.onnx.data"]


def test_a_stream_holds_the_model_then_its_external_data(tmp_path, capsys) -> None:
    """-o /dev/fd/N with external data: the stream holds what the line says, in its order: the model
    proto, then the data bytes it counts (it held the data first). The model less those bytes parses
    and names the data at offset 0 of `stream.data`."""
    weights = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    model = banded()
    model.graph.initializer.append(numpy_helper.from_array(weights, "w"))
    model.graph.node.append(helper.make_node("Identity", ["w"], ["z"], name="w_out"))
    model.graph.output.append(vi("z", TensorProto.FLOAT, [32, 32]))
    onnx.save_model(model, str(tmp_path / "in.onnx"), save_as_external_data=True, location="in.onnx.data",
                    size_threshold=0)
    fd = os.open(tmp_path / "stream", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        assert main(["optimize", str(tmp_path / "in.onnx"), "-o", f"/dev/fd/{fd}"]) == 0
    finally:
        os.close(fd)
    line = capsys.readouterr().out.splitlines()[-1]
    (data_bytes,) = (int(n) for n in re.findall(r"the (\d+) bytes of external data it names", line))
    stream = (tmp_path / "stream").read_bytes()
    head, tail = stream[:len(stream) - data_bytes], stream[len(stream) - data_bytes:]
    written = onnx.load_model_from_string(head)
    (stored,) = [t for t in written.graph.initializer if t.name == "w"]
    where = {e.key: e.value for e in stored.external_data}
    assert where["location"].endswith(".data") and int(where["offset"]) == 0
    assert tail[:weights.nbytes] == weights.tobytes()


def _inspect_count(path: Path, capsys) -> int:
    """The node count inspect prints for the file (control-flow bodies included)."""
    assert main(["inspect", str(path)]) == 0
    (count,) = re.findall(r"^nodes: (\d+) \(control-flow bodies included\)$", capsys.readouterr().out, re.M)
    return int(count)


def _cast_in_if() -> onnx.ModelProto:
    """An unnamed Cast to bool in the main graph and one in an If branch (both rewritten by --for dml)."""
    then = helper.make_graph([helper.make_node("Cast", ["xf"], ["tb"], to=TensorProto.BOOL)], "then", [],
                             [vi("tb", TensorProto.BOOL, ["a", "b"])])
    other = helper.make_graph([helper.make_node("IsNaN", ["xf"], ["eb"])], "else", [],
                              [vi("eb", TensorProto.BOOL, ["a", "b"])])
    graph = helper.make_graph([helper.make_node("Cast", ["xf"], ["xb"], to=TensorProto.BOOL),
                               helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
                              [vi("xf", TensorProto.FLOAT, ["a", "b"]), vi("c", TensorProto.BOOL, [])],
                              [vi("xb", TensorProto.BOOL, ["a", "b"]), vi("y", TensorProto.BOOL, ["a", "b"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _stored_in_if() -> onnx.ModelProto:
    """banded()'s stored mask (the generator rewrite) beside an If whose branches hold a node each."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", TensorProto.FLOAT, [2])])
    return banded([helper.make_node("If", ["cond"], ["z"], then_branch=then, else_branch=other)],
                  [vi("x", TensorProto.FLOAT, [2]), vi("cond", TensorProto.BOOL, [])], [vi("z", TensorProto.FLOAT, [2])])


@pytest.mark.parametrize("build, options", [(_cast_in_if, ["--for", "dml"]), (_stored_in_if, [])],
                         ids=["for_dml", "generators"])
def test_node_counts_are_inspects(build, options, tmp_path, capsys) -> None:
    """The `wrote` line counts nodes as inspect does, control-flow bodies included, and says so (a
    Cast rewritten inside an If branch was `1 -> 1 nodes`)."""
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(build(), str(source))
    assert main(["optimize", str(source), "-o", str(target), *options]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    counts = f"{_inspect_count(source, capsys)} -> {_inspect_count(target, capsys)} nodes"
    assert line.endswith(f", {counts} (control-flow bodies included)"), line


def _unnamed_eye() -> onnx.ModelProto:
    """The static torch.eye Range / Unsqueeze / Equal / Cast idiom, every node unnamed."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), name) for name, v in
             (("zero", 0), ("one", 1), ("n", 5), ("m", 7), ("axes", [-1]))]
    nodes = [helper.make_node("Range", ["zero", "n", "one"], ["rows"]),
             helper.make_node("Range", ["zero", "m", "one"], ["cols"]),
             helper.make_node("Unsqueeze", ["rows", "axes"], ["column"]),
             helper.make_node("Equal", ["column", "cols"], ["eq"]),
             helper.make_node("Cast", ["eq"], ["eye"], to=TensorProto.FLOAT),
             helper.make_node("Identity", ["eye"], ["y"])]
    graph = helper.make_graph(nodes, "eye", [], [vi("y", TensorProto.FLOAT, [5, 7])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _unnamed_constant() -> onnx.ModelProto:
    model = stored_model(band_array((24, 24), 0, 1, 1, np.float16), as_constant=True)
    model.graph.node[0].ClearField("name")
    return model


def _all_nodes(model: onnx.ModelProto) -> "list[onnx.NodeProto]":
    from onnx_dml_lowering.lowering.onnx_graphs import all_nodes
    return [node for _, node in all_nodes(model)]


def _identities(model: onnx.ModelProto) -> "set[str]":
    """The internal identities compiler.node_ids gives the model's unnamed nodes: in no file."""
    from onnx_dml_lowering.compiler.node_ids import identify_nodes
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return set(identify_nodes(copy))


@pytest.mark.parametrize("build, options", [(_unnamed_constant, []), (_unnamed_eye, []), (_cast_in_if, ["--for", "dml"])],
                         ids=["constant", "torch_eye", "for_dml"])
def test_the_text_names_nodes_as_the_files_hold_them(build, options, tmp_path, capsys) -> None:
    """An unnamed node is `unnamed <Op> writing <output>`, an unnamed node of that operator writing
    that output in the file; a node optimize makes is shown by the name the file gives it (or as
    unnamed, when it is): never `Constant_0` / `Cast_0_equal`, identities in neither file."""
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    model = build()
    onnx.save(model, str(source))
    assert main(["optimize", str(source), "-o", str(target), *options]) == 0
    text = capsys.readouterr().out
    written = onnx.load(str(target))
    unnamed = re.findall(r"unnamed (\w+) writing ([\w.]+)", text)
    assert unnamed
    files = {(n.op_type, n.output[0]) for m in (model, written) for n in _all_nodes(m) if not n.name and n.output}
    assert set(unnamed) <= files
    assert not any(re.search(rf"\b{re.escape(identity)}", text) for identity in _identities(model))
    created = re.findall(r"(?:\(| \+ )(\w+) ([\w./]+?)(?= \+ |\))", text)      # `Op name` of a node made
    names = {(n.op_type, n.name) for n in _all_nodes(written) if n.name}
    assert {(op, name.rsplit("/", 1)[-1]) for op, name in created if op != "unnamed"} <= names
