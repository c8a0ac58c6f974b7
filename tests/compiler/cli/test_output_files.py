"""Outputs are written safely (issue 27): checked before any work, never two options on one file,
written whole or not at all (the previous file intact), at the exact path asked for; in-place
optimize keeps the weights of every layout; .npz entries a zip cannot hold are one line."""
from __future__ import annotations

import errno
import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.runtime.npz import load_npz
from onnx_dml_lowering.runtime.weights import LAZY_MIN_BYTES
from tests.builders import graph_model
from tests.cli_runner import cli


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(graph_model([h.make_node("NonZero", ["x"], ["y"], name="nz")], [("x", T.FLOAT, [3, 4])],
                          [("y", T.INT64, [2, None])]), path)
    return path


# (command, options naming the same file F)
SAME_FILE = [
    (["check"], ["--json", "F", "--markdown", "F"]),
    (["check"], ["--save-inputs", "F", "--save-outputs", "F"]),
    (["check"], ["--json", "F", "--save-outputs", "./F"]),
    (["run"], ["--save-inputs", "F", "--json", "F"]),
    (["run"], ["--save-outputs", "F", "--save-inputs", "F"]),
    (["check", "--jobs", "1"], ["--json", "F", "--junit", "F"]),
]


@pytest.mark.parametrize("command, options", SAME_FILE)
def test_two_options_naming_one_file_are_refused_before_any_work(command, options, model, tmp_path, capsys,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "F").write_text("previous")
    code, out, err = cli([*command, model, *options], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "both write" in err, err
    assert (tmp_path / "F").read_text() == "previous"


# (command, output option): a folder that does not exist is refused before the model is even read
BEFORE_WORK = [(["inspect"], "--json"), (["optimize"], "-o"), (["compile"], "--json"), (["run"], "--json"),
               (["check"], "--markdown")]


@pytest.mark.parametrize("command, option", BEFORE_WORK)
def test_an_unwritable_output_is_refused_before_the_work(command, option, model, tmp_path, capsys):
    code, out, err = cli([*command, model, option, tmp_path / "missing" / "out"], capsys)
    assert code == 2 and out == "" and "does not exist" in err and err.count("\n") == 1, out + err


def _fail_after(monkeypatch, target, name, exc):
    """`target.name` writes part of its output, then raises `exc` (disk full, Ctrl-C)."""
    original = getattr(target, name)

    def broken(*args, **kwargs):
        original(*args, **kwargs)
        raise exc
    monkeypatch.setattr(target, name, broken)


@pytest.mark.parametrize("exc, code", [(OSError(errno.ENOSPC, "No space left on device"), 2),
                                       (KeyboardInterrupt(), 130)])
@pytest.mark.parametrize("option, where, name", [
    ("--save-inputs", np.lib.format, "write_array"),
    ("--json", "json", "dumps_partial"),
])
def test_a_failed_write_leaves_the_previous_file_and_no_temporary(exc, code, option, where, name, model, tmp_path,
                                                                  capsys, monkeypatch):
    target = tmp_path / "out"
    target.write_bytes(b"previous")
    if where == "json":           # the text writer's own write: half the report, then the failure
        import io
        original = io.TextIOWrapper.write

        def partial(self, text):
            original(self, text[:len(text) // 2])
            raise exc
        monkeypatch.setattr("onnx_dml_lowering.runtime.output_file.open",
                            lambda *a, **k: _Wrapped(open(*a, **k), partial), raising=False)
    else:
        _fail_after(monkeypatch, where, name, exc)
    got, out, err = cli(["check", model, option, target], capsys)
    assert got == code, out + err
    assert target.read_bytes() == b"previous"
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "out"]
    if code == 2:
        assert "No space left on device" in err and err.count("\n") == 1


class _Wrapped:
    """A file whose write is replaced (the context manager protocol kept)."""

    def __init__(self, file, write) -> None:
        self.file, self._write = file, write

    def write(self, text):
        return self._write(self.file, text)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


@pytest.mark.parametrize("command", [["run"], ["check"]])
def test_the_exact_path_asked_for_is_written(command, model, tmp_path, capsys):
    code, out, err = cli([*command, model, "--save-outputs", tmp_path / "full", "--save-inputs", tmp_path / "in"],
                         capsys)
    assert code == 0, out + err
    assert sorted(os.listdir(tmp_path)) == ["full", "in", "m.onnx"]
    assert set(load_npz(str(tmp_path / "in"))) == {"x"}


def test_an_input_name_a_zip_cannot_hold_is_one_line(tmp_path, capsys):
    name = "n" * 100_000
    onnx.save(graph_model([h.make_node("NonZero", [name], ["y"], name="nz")], [(name, T.FLOAT, [2])],
                          [("y", T.INT64, [1, None])]), tmp_path / "m.onnx")
    code, out, err = cli(["run", tmp_path / "m.onnx", "--save-inputs", tmp_path / "in.npz"], capsys)
    assert code == 2 and err.count("\n") == 1 and "100000 bytes" in err and "65531" in err, err[:300]
    assert not (tmp_path / "in.npz").exists() and len(err) < 500


def test_a_string_output_is_saved(tmp_path, capsys):
    model = graph_model([h.make_node("Cast", ["x"], ["s"], name="cast", to=T.STRING),
                         h.make_node("NonZero", ["x"], ["y"], name="nz")],
                        [("x", T.FLOAT, [3])], [("s", T.STRING, [3]), ("y", T.INT64, [1, None])], opset=13)
    onnx.save(model, tmp_path / "m.onnx")
    np.savez(tmp_path / "f.npz", x=np.array([0, 1.5, 2], np.float32))
    code, out, err = cli(["run", tmp_path / "m.onnx", "--backends", "ort-cpu", "--inputs", tmp_path / "f.npz",
                          "--save-outputs", tmp_path / "o.npz"], capsys)
    assert code == 0, out + err
    expected = ort.InferenceSession(str(tmp_path / "m.onnx")).run(["s"], {"x": np.array([0, 1.5, 2], np.float32)})[0]
    assert load_npz(str(tmp_path / "o.npz"))["s"].tolist() == list(expected)
    # read back as golden outputs and as saved outputs: strings compare as strings, no MISMATCH
    for option in ("--oracle", "--load-outputs"):
        code, out, err = cli(["check", tmp_path / "m.onnx", "--inputs", tmp_path / "f.npz", option,
                              tmp_path / "o.npz", "-q"], capsys)
        assert code == 0 and "MISMATCH" not in out, out + err


@pytest.mark.parametrize("layout", ["inline", "external"])
def test_in_place_optimize_keeps_every_weight(layout, tmp_path, capsys):
    """A large weight (read lazily: mapped from the .onnx itself or its .data) beside a band the
    rewrite replaces; the outputs of the model rewritten in place are those of the original."""
    rng = np.random.default_rng(0)
    big = rng.standard_normal(LAZY_MIN_BYTES // 4 + 1024).astype(np.float32)
    band = np.triu(np.ones((64, 64), np.float32))
    model = graph_model([h.make_node("Mul", ["x", "w"], ["y"], name="mul"),
                         h.make_node("Add", ["b", "b"], ["z"], name="add")],
                        [("x", T.FLOAT, [big.size])], [("y", T.FLOAT, [big.size]), ("z", T.FLOAT, [64, 64])],
                        initializers=[numpy_helper.from_array(big, "w"), numpy_helper.from_array(band, "b")], opset=14)
    path = tmp_path / "m.onnx"
    if layout == "external":
        onnx.save_model(model, str(path), save_as_external_data=True, location="m.onnx.data", size_threshold=1024)
    else:
        onnx.save_model(model, str(path))
    feeds = {"x": rng.standard_normal(big.size).astype(np.float32)}
    before = ort.InferenceSession(str(path)).run(None, feeds)
    code, out, err = cli(["optimize", path, "-o", path, "--check"], capsys)
    assert code == 0 and "bit-identical" in out, out + err
    assert "Trilu" in out                                # the band was rewritten: the file did change
    after = ort.InferenceSession(str(path)).run(None, feeds)
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    assert sorted(os.listdir(tmp_path)) == sorted(["m.onnx"] + (["m.onnx.data"] if layout == "external" else []))


@pytest.mark.parametrize("in_place", [True, False])
def test_optimize_through_a_link_elsewhere_writes_the_data_beside_its_target(in_place, tmp_path, capsys):
    """`-o` a link in another folder: the model lands at the link's target and its external data
    beside it, where the model's relative location is read from (the data went beside the link,
    and the model at the target named a file its folder did not hold)."""
    band = np.triu(np.ones((64, 64), np.float32))
    big = np.arange(LAZY_MIN_BYTES // 4 + 1024, dtype=np.float32)
    model = graph_model([h.make_node("Mul", ["x", "w"], ["y"], name="mul"),
                         h.make_node("Add", ["b", "b"], ["z"], name="add")],
                        [("x", T.FLOAT, [big.size])], [("y", T.FLOAT, [big.size]), ("z", T.FLOAT, [64, 64])],
                        initializers=[numpy_helper.from_array(big, "w"), numpy_helper.from_array(band, "b")], opset=14)
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    source = tmp_path / "real" / "in.onnx"
    onnx.save_model(model, str(source), save_as_external_data=True, location="in.onnx.data", size_threshold=1024)
    target = source if in_place else tmp_path / "real" / "new.onnx"
    link = tmp_path / "links" / "out.onnx"
    link.symlink_to(os.path.relpath(target, link.parent))
    feeds = {"x": np.ones(big.size, np.float32)}
    before = ort.InferenceSession(str(source)).run(None, feeds)
    code, out, err = cli(["optimize", source, "-o", link], capsys)
    assert code == 0, out + err
    assert f"(external data {target.name}.data beside {target}, where the link leads)" in out
    assert os.listdir(tmp_path / "links") == ["out.onnx"] and link.is_symlink()
    after = ort.InferenceSession(str(target)).run(None, feeds)           # loads by its own name
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    assert sorted(os.listdir(tmp_path / "real")) == sorted({"in.onnx", "in.onnx.data", target.name, f"{target.name}.data"})


# (command, output option): an output naming the file the command reads as its model
OUTPUT_IS_THE_MODEL = [(["check"], "--json"), (["check"], "--markdown"), (["check"], "--save-outputs"),
                       (["check", "--jobs", "1"], "--json"), (["run"], "--json"), (["run"], "--save-inputs"),
                       (["compile"], "--json"), (["inspect"], "--json"), (["reduce", "--backends", "cpu"], "-o")]


@pytest.mark.parametrize("command, option", OUTPUT_IS_THE_MODEL)
@pytest.mark.parametrize("named", ["path", "symlink", "hard link"])
def test_an_output_naming_the_model_is_refused_and_the_model_kept(command, option, named, model, tmp_path, capsys):
    """`check m.onnx --json m.onnx` would replace the model with a report: one line before any work,
    whichever name of the file the output gives."""
    before = model.read_bytes()
    target = model
    if named == "symlink":
        target = tmp_path / "report.json"
        target.symlink_to(model)
    elif named == "hard link":
        target = tmp_path / "again.onnx"
        os.link(model, target)
    code, out, err = cli([*command, model, option, target], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, out + err
    assert "model file" in err and "this command reads" in err, err
    assert model.read_bytes() == before


# (command and options before the model's path, options after it): the output names the inputs
# file, in.npz (reduce writes MIN.inputs.npz beside -o MIN.onnx: in.onnx's is in.inputs.npz)
OUTPUT_IS_THE_INPUTS = [
    (["check"], ["--save-outputs", "{feeds}"]), (["check", "--jobs", "1"], ["--json", "{feeds}"]),
    (["run"], ["--json", "{feeds}"]), (["run"], ["--save-inputs", "{feeds}"]),
    (["optimize", "--check"], ["-o", "{feeds}"]),
    (["reduce", "--backends", "ort-cpu"], ["-o", "{tmp}/in.onnx"]),
]


@pytest.mark.parametrize("command, options", OUTPUT_IS_THE_INPUTS)
def test_an_output_naming_the_inputs_file_is_refused_before_any_work(command, options, model, tmp_path, capsys):
    """Every command that takes --inputs refuses an output naming it in one line, with nothing
    printed or written before (reduce wrote its minimal model, optimize --check ran its check,
    before refusing)."""
    feeds = tmp_path / ("in.inputs.npz" if command[0] == "reduce" else "in.npz")
    np.savez(feeds, x=np.ones((3, 4), np.float32))
    before = feeds.read_bytes()
    argv = [*command, model, "--inputs", feeds, *[o.format(feeds=feeds, tmp=tmp_path) for o in options]]
    code, out, err = cli(argv, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "the inputs file" in err, out + err
    assert "this command reads" in err and feeds.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([model.name, feeds.name]), list(tmp_path.iterdir())


@pytest.mark.parametrize("option", ["--load-outputs", "--oracle"])
def test_an_output_naming_a_saved_outputs_file_is_refused(option, model, tmp_path, capsys):
    """check reads saved outputs (--load-outputs, a golden --oracle): a report over them is refused."""
    saved = tmp_path / "saved.npz"
    assert cli(["check", model, "-q", "--save-outputs", saved], capsys)[0] == 0
    before = saved.read_bytes()
    code, out, err = cli(["check", model, option, saved, "--json", saved], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "this command reads" in err, out + err
    assert saved.read_bytes() == before


def test_an_output_naming_the_data_loader_script_is_refused(model, tmp_path, capsys):
    """The script is read by the one check of every named file (input_files.regular_file), so it
    is an input: a report written over it would destroy the user's code."""
    script = tmp_path / "feeds.py"
    script.write_text("import numpy as np\n\ndef load_data():\n    yield {'x': np.ones((3, 4), np.float32)}\n")
    before = script.read_bytes()
    code, out, err = cli(["check", model, "--data-loader-script", script, "--json", script], capsys)
    assert code == 2 and err.count("\n") == 1 and "data loader script" in err, out + err
    assert script.read_bytes() == before


def _external_model(tmp_path):
    """A model whose weight lives in m.data (large enough to be read lazily from it)."""
    weight = np.arange(LAZY_MIN_BYTES // 4 + 256, dtype=np.float32)
    model = graph_model([h.make_node("Mul", ["x", "w"], ["s"], name="mul"), h.make_node("NonZero", ["s"], ["y"], name="nz")],
                        [("x", T.FLOAT, [weight.size])], [("y", T.INT64, [1, None])],
                        initializers=[numpy_helper.from_array(weight, "w")], opset=14)
    path = tmp_path / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="m.data", size_threshold=0)
    return path, tmp_path / "m.data"


@pytest.mark.parametrize("command", [["check", "-q", "--json"], ["check", "--markdown"], ["optimize", "-o"],
                                     ["compile", "--json"], ["run", "--save-outputs"], ["inspect", "--json"],
                                     ["check", "--jobs", "1", "--junit"]])
@pytest.mark.parametrize("named", ["path", "symlink", "descriptor"])
def test_an_output_naming_the_external_data_is_refused_before_any_work(command, named, tmp_path, capsys):
    """The model's external data is read as much as the model: an output naming it, by any name, is
    refused in one line with nothing printed before it (check printed its verdict first), nothing
    written and no temporary left behind."""
    path, data = _external_model(tmp_path)
    before = data.read_bytes()
    fd = os.open(data, os.O_RDWR) if named == "descriptor" else None
    target = {"path": str(data), "descriptor": f"/dev/fd/{fd}"}.get(named, str(tmp_path / "link.data"))
    if named == "symlink":
        (tmp_path / "link.data").symlink_to(data)
    try:
        code, out, err = cli([command[0], path, *command[1:], target], capsys)
    finally:
        if fd is not None:
            os.close(fd)
    assert (code, out) == (2, "") and err.count("\n") == 1, out + err
    assert "external data file" in err and "this command reads" in err, err
    assert data.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == sorted(["m.data", "m.onnx"] + (["link.data"] if named == "symlink" else []))


def test_the_writer_still_refuses_external_data_found_only_when_read(tmp_path, capsys, monkeypatch):
    """The writer is the last guard: with the up-front look at the model's external data out of the
    way, the external data the loader read is still never replaced."""
    from onnx_dml_lowering.compiler import output_files
    monkeypatch.setattr(output_files, "_note_external_data", lambda models, outputs: None)
    path, data = _external_model(tmp_path)
    before = data.read_bytes()
    code, out, err = cli(["check", path, "-q", "--json", data], capsys)
    assert code == 2 and err.count("\n") == 1 and "external data file" in err and "this command reads" in err, err
    assert data.read_bytes() == before


# every name of descriptor {fd} (open on the model, read and write): /dev/fd/N, /proc/self/fd/N, a
# symbolic link to /dev/fd/N
DESCRIPTOR_ROUTES = ["/dev/fd/{fd}", "/proc/self/fd/{fd}", "link"]
# (command, output option): each writing option the trial named, and more
DESCRIPTOR_OUTPUTS = [(["check", "-q"], "--json"), (["check"], "--markdown"), (["check", "-q"], "--save-outputs"),
                      (["run", "-q"], "--save-outputs"), (["optimize"], "-o"), (["run", "-q"], "--json"),
                      (["compile"], "--json"), (["reduce", "--backends", "cpu"], "-o")]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="no /proc descriptor links (not Linux)")
@pytest.mark.parametrize("route", DESCRIPTOR_ROUTES)
@pytest.mark.parametrize("command, option", DESCRIPTOR_OUTPUTS)
def test_an_output_through_a_descriptor_open_on_the_model_is_refused(command, option, route, model, tmp_path, capsys):
    """`check m.onnx --json /dev/fd/3 3<>m.onnx` wrote the report into the model (the descriptor's
    path skipped the check by device and inode): refused before any work, the model intact."""
    before = model.read_bytes()
    fd = os.open(model, os.O_RDWR)
    try:
        target = route.format(fd=fd)
        if route == "link":
            target = str(tmp_path / "out.json")
            os.symlink(f"/dev/fd/{fd}", target)
        code, out, err = cli([*command, model, option, target], capsys)
    finally:
        os.close(fd)
    assert (code, out) == (2, "") and err.count("\n") == 1, out + err
    assert "model file" in err and "this command reads" in err, err
    assert model.read_bytes() == before


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="no /proc descriptor links (not Linux)")
def test_a_descriptor_open_on_another_file_is_still_written(model, tmp_path, capsys):
    """Only a descriptor open on an input is refused: one open on any other file takes the report."""
    other = tmp_path / "report.json"
    other.write_bytes(b"")
    fd = os.open(other, os.O_WRONLY)
    try:
        code, out, err = cli(["check", model, "-q", "--json", f"/dev/fd/{fd}"], capsys)
    finally:
        os.close(fd)
    assert code == 0, out + err
    assert json.loads(other.read_text())["ok"] is True


# (command, output option) of every command that takes --ep-library
EP_LIBRARY_OUTPUTS = [(["check", "-q"], "--json"), (["check"], "--markdown"), (["run", "-q"], "--json"),
                      (["run", "-q"], "--save-outputs"), (["reduce"], "-o")]


@pytest.mark.parametrize("command, option", EP_LIBRARY_OUTPUTS)
def test_an_output_naming_an_ep_library_is_refused_before_any_work(command, option, model, tmp_path, capsys):
    """`check --ep-library Foo=ep.so --json ep.so` printed its verdict, then refused: the libraries a
    command loads are in the one list of files it reads (cli/reads.files_read)."""
    library = tmp_path / "ep.so"
    library.write_bytes(b"\x7fELF not a real library")
    before = library.read_bytes()
    code, out, err = cli([*command, model, "--backends", "ort-cpu", "--ep-library", f"Foo={library}", option, library],
                         capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1, out + err
    assert "--ep-library Foo library file" in err and "this command reads" in err, err
    assert library.read_bytes() == before


@pytest.mark.parametrize("option", ["--json", "--junit"])
def test_a_zoo_report_over_a_model_its_folder_holds_is_refused(option, model, tmp_path, capsys):
    """The models a zoo folder holds are read as much as one given by name: a report written over
    one of them would have destroyed it (rc 0, 'wrote zoo/m.onnx')."""
    before = model.read_bytes()
    code, out, err = cli(["check", tmp_path, option, model], capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1 and "model file" in err and "this command reads" in err
    assert model.read_bytes() == before
