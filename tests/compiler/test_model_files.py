"""A model file cannot reach outside its folder: one loader (runtime.weights.resolve_external behind
frontend.load_model) for every external tensor and every command.

Each row builds, in its own tmp_path folder, a model whose external data escapes the folder (../,
an absolute path, a file or folder symlinked to outside), is not a regular file, or whose offset,
length or raw data disagree with the tensor; and model paths that are not regular files. Every
row is run through compile, run, check, inspect, optimize, reduce, a zoo check, conformance run
and the Python API: each refuses it in the one line the row names (exit 2 where it is one model).
Rows come in two sizes: a weight of 1 MiB or more stays in its file (memory-mapped), a smaller
one is read into the proto; both paths go through the same checks."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.frontend import load_model
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.weights import LAZY_MIN_BYTES
from tests.builders import IR_VERSION, graph_model
from tests.cli_runner import cli

LARGE = LAZY_MIN_BYTES // 4 + 16          # float32 elements: a weight left in its file
SMALL = 64                                # read into the proto


def weight_model(n: int, entries: "dict[str, str]", name: str = "w") -> onnx.ModelProto:
    """y = x + w, w: float [n] stored externally with exactly these external_data entries."""
    w = T()
    w.name, w.data_type, w.data_location = name, T.FLOAT, T.EXTERNAL
    w.dims.append(n)
    for key, value in entries.items():
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = h.make_graph([h.make_node("Add", ["x", name], ["y"], name="add")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [n])], [h.make_tensor_value_info("y", T.FLOAT, [n])],
                         [w])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=IR_VERSION)


def write_weights(path: Path, n: int, extra: int = 0) -> None:
    """n float32 values 1000, 1001, ... (a recognisable secret) and `extra` more bytes."""
    path.write_bytes((np.arange(n, dtype=np.float32) + 1000).tobytes() + b"\x07" * extra)


# Each builder gets the model's folder (the parent folder is free for "outside" files) and writes
# folder/model.onnx.

def escaping(location: str, n: int):
    def build(folder: Path) -> None:
        write_weights(folder.parent / "secret.bin", n)
        loc = location.replace("@", str(folder.parent))
        onnx.save(weight_model(n, {"location": loc}), folder / "model.onnx")
    return build


def symlinked_file(n: int):
    def build(folder: Path) -> None:
        write_weights(folder.parent / "secret.bin", n)
        os.symlink(folder.parent / "secret.bin", folder / "w.bin")
        onnx.save(weight_model(n, {"location": "w.bin"}), folder / "model.onnx")
    return build


def symlinked_folder(n: int):
    def build(folder: Path) -> None:
        outside = folder.parent / "outside"
        outside.mkdir()
        write_weights(outside / "w.bin", n)
        os.symlink(outside, folder / "weights")
        onnx.save(weight_model(n, {"location": "weights/w.bin"}), folder / "model.onnx")
    return build


def inside_symlink(n: int):
    """A symlink whose target is inside the folder is fine: the control row (it must run)."""
    def build(folder: Path) -> None:
        (folder / "data").mkdir()
        write_weights(folder / "data" / "w.bin", n)
        os.symlink("data/w.bin", folder / "w.bin")
        onnx.save(weight_model(n, {"location": "w.bin"}), folder / "model.onnx")
    return build


def fifo_data(n: int):
    def build(folder: Path) -> None:
        os.mkfifo(folder / "w.bin")
        onnx.save(weight_model(n, {"location": "w.bin"}), folder / "model.onnx")
    return build


def entries(n: int, extra: int = 0, **given: str):
    def build(folder: Path) -> None:
        write_weights(folder / "w.bin", n, extra)
        onnx.save(weight_model(n, {"location": "w.bin", **given}), folder / "model.onnx")
    return build


def raw_data(n: int, nbytes: int):
    """An inline initializer whose raw data is `nbytes` long for dims [n]."""
    def build(folder: Path) -> None:
        model = weight_model(n, {})
        w = model.graph.initializer[0]
        del w.external_data[:]
        w.data_location = T.DEFAULT
        w.raw_data = bytes(nbytes)
        onnx.save(model, folder / "model.onnx")
    return build


def model_fifo(folder: Path) -> None:
    os.mkfifo(folder / "model.onnx")


def in_subgraph(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same y = x + w with w the value of a Constant inside an If's branches (an attribute tensor)."""
    w = model.graph.initializer[0]
    body = h.make_graph([h.make_node("Constant", [], ["w"], name="const", value=w),
                         h.make_node("Add", ["x", "w"], ["yb"], name="add")], "body", [], [model.graph.output[0]])
    body.output[0].name = "yb"
    graph = h.make_graph([h.make_node("If", ["c"], ["y"], name="if", then_branch=body, else_branch=body)], "g",
                         [h.make_tensor_value_info("c", T.BOOL, []), model.graph.input[0]], [model.graph.output[0]])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=IR_VERSION)


def hostile_location(location: bytes, where: str, n: int = SMALL):
    """A location the OS cannot take as a path (issue 35): NUL, over-long, not UTF-8; in the main
    graph's initializer or in an attribute tensor of a subgraph (both If branches)."""
    def build(folder: Path) -> None:
        write_weights(folder / "w.bin", n)
        try:
            text, patch = location.decode("utf-8"), None
        except UnicodeDecodeError:      # protobuf sets only UTF-8 text: patched into the bytes, same length
            text, patch = "@" * len(location), location
        model = weight_model(n, {"location": text})
        data = (in_subgraph(model) if where == "subgraph" else model).SerializeToString()
        (folder / "model.onnx").write_bytes(data.replace(text.encode(), patch) if patch else data)
    return build


HOSTILE = {"nul": (b"w\x00.bin", "NUL byte"), "not-utf8": (b"\xff\xfew.bin", "not UTF-8"),
           "long-name": (b"n" * 300, "a name of 300 bytes, over the 255"),
           "long-path": (b"/".join([b"d" * 200] * 30), "over the 4095 bytes a path can hold")}

# name: (builder, substrings of the one line)
ROWS = {}
for where in ("main", "subgraph"):
    for kind, (location, says) in HOSTILE.items():
        ROWS[f"location-{kind}-{where}"] = (hostile_location(location, where), ["'w'", "location", says])
for size, n in (("large", LARGE), ("small", SMALL)):
    ROWS.update({
        f"dotdot-{size}": (escaping("../secret.bin", n), ["'w'", "'../secret.bin'", "outside the model's folder"]),
        f"absolute-{size}": (escaping("@/secret.bin", n), ["'w'", "absolute path", "secret.bin"]),
        f"symlinked-file-{size}": (symlinked_file(n), ["'w'", "'w.bin'", "secret.bin", "outside the model's folder"]),
        f"symlinked-folder-{size}": (symlinked_folder(n), ["'w'", "weights/w.bin", "outside the model's folder"]),
        f"fifo-data-{size}": (fifo_data(n), ["'w'", "w.bin", "not a regular file"]),
        f"negative-offset-{size}": (entries(n, offset="-4"), ["'w'", "w.bin", "offset '-4'"]),
        f"fraction-offset-{size}": (entries(n, offset="1.5"), ["'w'", "w.bin", "offset '1.5'"]),
        f"text-length-{size}": (entries(n, length="ten"), ["'w'", "w.bin", "length 'ten'"]),
        f"wrong-length-{size}": (entries(n, length="12"), ["'w'", "w.bin", "length 12", f"take {4 * n} bytes"]),
        f"offset-past-end-{size}": (entries(n, offset="8"), ["'w'", "w.bin", f"holds {4 * n} bytes",
                                                              f"offset 8 + length {4 * n}"]),
        f"no-length-file-longer-{size}": (entries(n, extra=4), ["'w'", "w.bin", "no length", f"{4 * n + 4} bytes",
                                                                f"take {4 * n} bytes"]),
    })
ROWS.update({
    "raw-data-longer": (raw_data(SMALL, 4 * SMALL + 4), ["'w'", f"{4 * SMALL + 4} bytes of raw data",
                                                         f"take {4 * SMALL} bytes"]),
    "raw-data-shorter": (raw_data(SMALL, 4 * SMALL - 4), ["'w'", f"{4 * SMALL - 4} bytes of raw data"]),
    "model-is-fifo": (model_fifo, ["model.onnx", "not a regular file"]),
})


@contextmanager
def never_blocked(folder: Path, seconds: float = 20.0):
    """If something opens a FIFO of `folder` for reading (a regression), a writer appears after
    `seconds` and closes at once: the reader sees end of file and the row fails instead of hanging."""
    done = threading.Event()

    def unblock():
        if done.wait(seconds):
            return
        for fifo in folder.rglob("*"):
            if fifo.is_fifo():
                os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def one_line(code: int, out: str, err: str, substrings: "list[str]") -> str:
    assert code == 2, f"exit {code}: {out}{err}"
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for text in substrings:
        assert text in lines[0], f"{text!r} not in {lines[0]!r}"
    return lines[0]


def built(row: str, tmp_path: Path) -> Path:
    folder = tmp_path / "case"
    folder.mkdir()
    ROWS[row][0](folder)
    return folder


COMMANDS = {
    "compile": lambda m, t: ["compile", m],
    "run": lambda m, t: ["run", m],
    "check": lambda m, t: ["check", m, "--backends", "cpu,ort-cpu"],
    "inspect": lambda m, t: ["inspect", m],
    "optimize": lambda m, t: ["optimize", m, "-o", t / "out.onnx"],
    "reduce": lambda m, t: ["reduce", m, "-o", t / "min.onnx", "--backends", "cpu"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("row", sorted(ROWS))
def test_every_command_refuses_the_model_in_one_line(row, command, tmp_path, capsys):
    folder = built(row, tmp_path)
    with never_blocked(folder):
        code, out, err = cli(COMMANDS[command](folder / "model.onnx", tmp_path), capsys)
    one_line(code, out, err, ROWS[row][1])
    assert "1000." not in out            # nothing of the secret's values was printed
    assert not (tmp_path / "out.onnx.data").exists() and not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("row", sorted(ROWS))
def test_the_python_api_raises_the_same_line(row, tmp_path, capsys):
    folder = built(row, tmp_path)
    with never_blocked(folder):
        code, out, err = cli(["compile", folder / "model.onnx"], capsys)
        with pytest.raises(DmlLowerError) as info:
            compile_model(str(folder / "model.onnx"))
    assert err.strip() == f"dml-lower: error: {info.value}"
    assert all(text in str(info.value) for text in ROWS[row][1]), info.value


@pytest.mark.parametrize("row", sorted(ROWS))
def test_conformance_run_refuses_a_case_folder_holding_it(row, tmp_path, capsys):
    folder = built(row, tmp_path)
    with never_blocked(folder):
        code, out, err = cli(["conformance", "run", tmp_path, "--backends", "cpu"], capsys)
    one_line(code, out, err, ROWS[row][1])


@pytest.mark.parametrize("row", ["dotdot-large", "symlinked-folder-small", "model-is-fifo", "fifo-data-small"])
def test_a_zoo_reports_the_line_for_that_model(row, tmp_path, capsys):
    folder = built(row, tmp_path)
    good = tmp_path / "good"
    good.mkdir()
    entries(SMALL)(good)
    with never_blocked(folder):
        # By name (a FIFO is not found by the directory walk, which lists regular files).
        code, out, err = cli(["check", folder / "model.onnx", good / "model.onnx", "--backends", "cpu"], capsys)
    assert code == 2, out + err
    line = next(text for text in out.splitlines() if text.startswith(f"{folder / 'model.onnx'}: exit-2: "))
    for text in ROWS[row][1]:
        assert text in line, line
    # The other model still ran.
    assert not any(text.startswith(str(good / "model.onnx")) and "exit-2" in text for text in out.splitlines()), out


@pytest.mark.parametrize("n", [LARGE, SMALL])
def test_a_symlink_that_stays_inside_is_read(n, tmp_path, capsys, rng):
    """The control: the resolved path decides, not the symlink; the values are the file's."""
    folder = built_with(inside_symlink(n), tmp_path)
    x = rng.standard_normal(n).astype(np.float32)
    outputs = compile_model(str(folder / "model.onnx")).run({"x": x})
    np.testing.assert_array_equal(outputs["y"], x + (np.arange(n, dtype=np.float32) + 1000))


@pytest.mark.parametrize("n", [LARGE, SMALL])
def test_a_tensor_without_length_ending_at_its_file_s_end_is_read(n, tmp_path, rng):
    folder = built_with(entries(n, offset="0"), tmp_path)
    x = rng.standard_normal(n).astype(np.float32)
    outputs = compile_model(str(folder / "model.onnx")).run({"x": x})
    np.testing.assert_array_equal(outputs["y"], x + (np.arange(n, dtype=np.float32) + 1000))


def built_with(build, tmp_path: Path) -> Path:
    folder = tmp_path / "case"
    folder.mkdir()
    build(folder)
    return folder


def sparse_constant_model(location: str) -> onnx.ModelProto:
    """y = x + c, c a Constant whose sparse_value keeps its values in external file `location`."""
    values = T()
    values.name, values.data_type, values.data_location = "sv", T.FLOAT, T.EXTERNAL
    values.dims.append(SMALL)
    entry = values.external_data.add()
    entry.key, entry.value = "location", location
    sparse = h.make_sparse_tensor(values, h.make_tensor("si", T.INT64, [SMALL], list(range(SMALL))), [SMALL])
    nodes = [h.make_node("Constant", [], ["c"], name="const", sparse_value=sparse),
             h.make_node("Add", ["x", "c"], ["y"], name="add")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [SMALL])],
                         [h.make_tensor_value_info("y", T.FLOAT, [SMALL])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=IR_VERSION)


@pytest.mark.parametrize("inside", [False, True])
def test_a_sparse_tensor_s_external_values_go_through_the_same_loader(inside, tmp_path, rng):
    folder = tmp_path / "case"
    folder.mkdir()
    write_weights((folder if inside else tmp_path) / "sv.bin", SMALL)
    onnx.save(sparse_constant_model("sv.bin" if inside else "../sv.bin"), folder / "model.onnx")
    if not inside:
        with pytest.raises(DmlLowerError, match="tensor 'sv'.*outside the model's folder"):
            compile_model(str(folder / "model.onnx"))
        return
    x = rng.standard_normal(SMALL).astype(np.float32)
    outputs = compile_model(str(folder / "model.onnx")).run({"x": x})
    np.testing.assert_array_equal(outputs["y"], x + (np.arange(SMALL, dtype=np.float32) + 1000))


def test_a_negative_dimension_is_one_line(tmp_path):
    folder = built_with(raw_data(SMALL, 4 * SMALL), tmp_path)
    model = onnx.load(folder / "model.onnx")
    model.graph.initializer[0].dims[0] = -SMALL
    onnx.save(model, folder / "model.onnx")
    with pytest.raises(DmlLowerError, match=rf"tensor 'w' has a negative dimension in its shape \[-{SMALL}\]"):
        compile_model(str(folder / "model.onnx"))


# -- models without a folder -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["bytes", "proto"])
def test_a_model_without_a_folder_cannot_name_external_data(kind, tmp_path, monkeypatch):
    """onnx's numpy_helper would read the location relative to the working directory."""
    write_weights(tmp_path / "w.bin", SMALL)
    monkeypatch.chdir(tmp_path)
    model = weight_model(SMALL, {"location": "w.bin"})
    with pytest.raises(DmlLowerError, match=r"tensor 'w' keeps its data in external file 'w.bin'.*without a folder"):
        compile_model(model.SerializeToString() if kind == "bytes" else model)


def test_a_basepath_in_the_file_is_never_trusted(tmp_path):
    """onnx may write a basepath entry; the loader finds data from the model's folder only."""
    write_weights(tmp_path / "secret.bin", LARGE)
    folder = tmp_path / "case"
    folder.mkdir()
    model = weight_model(LARGE, {"location": "secret.bin", "basepath": str(tmp_path)})
    onnx.save(model, folder / "model.onnx")
    with pytest.raises(DmlLowerError, match="does not exist"):
        load_model(str(folder / "model.onnx"))
    with pytest.raises(DmlLowerError, match="without a folder"):
        load_model(model.SerializeToString())


@pytest.mark.parametrize("source", ["file", "bytes"])
def test_the_loader_walks_the_model_s_tensors_once(source, tmp_path, monkeypatch):
    """resolve_external and no_external collect every tensor once (basepaths are dropped from the
    same list): on a model of thousands of nodes a walk costs tens of milliseconds."""
    from onnx_dml_lowering.runtime import weights
    folder = built_with(entries(LARGE), tmp_path)
    walks = []
    walk = weights.all_tensors
    monkeypatch.setattr(weights, "all_tensors", lambda proto: walks.append(1) or walk(proto))
    if source == "file":
        load_model(str(folder / "model.onnx"))
    else:
        model = graph_model([h.make_node("Add", ["x", "w"], ["y"])], [("x", T.FLOAT, [4])], [("y", T.FLOAT, [4])],
                            {"w": np.ones(4, np.float32)})
        load_model(model.SerializeToString())
    assert len(walks) == 1


def test_a_loaded_model_passed_again_reads_its_weights(tmp_path, rng):
    """A ModelProto load_model returned keeps its large weights in their (checked) files."""
    folder = built_with(entries(LARGE), tmp_path)
    proto = load_model(str(folder / "model.onnx"))
    x = rng.standard_normal(LARGE).astype(np.float32)
    np.testing.assert_array_equal(compile_model(proto).run({"x": x})["y"],
                                  x + (np.arange(LARGE, dtype=np.float32) + 1000))


# -- model paths that are not regular files, in a process of their own ------------------------------

def _limited():
    """A child that reads a device until memory runs out fails fast instead of filling the host."""
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


@pytest.mark.parametrize("command", ["compile", "run", "inspect", "optimize"])
def test_a_device_is_refused_from_its_stat(command, tmp_path):
    argv = COMMANDS[command]("/dev/urandom", tmp_path)
    env = dict(os.environ)
    env.pop("DML_LOWER_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", *map(str, argv)], env=env,
                          capture_output=True, text=True, timeout=120, preexec_fn=_limited)
    one_line(proc.returncode, proc.stdout, proc.stderr, ["'/dev/urandom'", "not a regular file"])


@pytest.mark.parametrize("offset", ["+0", " 0", "0 ", "00"])
def test_an_offset_spelt_as_onnx_and_onnxruntime_read_it_is_read(offset, tmp_path, rng):
    """onnx reads offset and length with int(), onnxruntime with a stream's >>: both take a leading '+' and
    spaces; such a file loads on both, so here too (a leading '+' was refused while ' 0' was taken)."""
    n = SMALL
    folder = built_with(entries(n, offset=offset), tmp_path)
    x = rng.standard_normal(n).astype(np.float32)
    onnx.load(str(folder / "model.onnx"))       # onnx's own loader takes it
    outputs = compile_model(str(folder / "model.onnx")).run({"x": x})
    np.testing.assert_array_equal(outputs["y"], x + (np.arange(n, dtype=np.float32) + 1000))
