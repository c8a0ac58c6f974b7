"""Every writing option of every command against every kind of path (issue 35): a new name, a
regular file (its mode kept), a symlink to a file, a dangling link, a FIFO, a character device
(made here with /dev/null's and /dev/full's numbers, never the machine's /dev), a link to one;
refused in one line before any work: a directory, a socket, a block device, a link loop, a dangling
link into a missing folder. The (command, option) table is derived from the CLI's own parser, so a
new writing option is tested as soon as it exists."""
from __future__ import annotations

import argparse
import errno
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler.cli.program import build_parser
from tests.builders import graph_model
from tests.cli_runner import cli
from tests.compiler.test_explorer import needs_view

# Options that take a file the command reads; every other option whose value is a file writes it.
READS = {"--inputs", "--load-outputs", "--overlay"}
_FILE_METAVAR = re.compile(r"[A-Z_]+\.[a-z]+")


def _options(parser: argparse.ArgumentParser, command: "tuple[str, ...]"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, command + (name,))
        elif action.option_strings and isinstance(action.metavar, str) and _FILE_METAVAR.fullmatch(action.metavar):
            yield command, action.option_strings[0]


WRITING = sorted({row for row in _options(build_parser(), ()) if row[1] not in READS})


def test_the_table_holds_every_writing_option_known_today():
    """The derivation itself is checked: it finds at least the writers known when it was written."""
    assert {(("check",), "--json"), (("check",), "--markdown"), (("check",), "--junit"),
            (("check",), "--save-inputs"), (("check",), "--save-outputs"), (("run",), "--save-inputs"),
            (("run",), "--save-outputs"), (("run",), "--json"), (("compile",), "--json"),
            (("inspect",), "--json"), (("inspect",), "--html"), (("optimize",), "-o"),
            (("reduce",), "-o")} <= set(WRITING)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A scalar NonZero: onnxruntime's named DEVIATION, which reduce cuts down to one node."""
    path = tmp_path_factory.mktemp("model") / "m.onnx"
    onnx.save(graph_model([h.make_node("Relu", ["x"], ["r"], name="relu"),
                           h.make_node("ReduceSum", ["r"], ["s"], name="total", keepdims=0),
                           h.make_node("NonZero", ["s"], ["nz"], name="nz")],
                          [("x", T.FLOAT, [3, 4])], [("nz", T.INT64, [0, None])]), path)
    return path


# How each command runs; a command missing here fails every row of it (add how to run it).
COMMANDS = {
    ("compile",): [],
    ("run",): [],
    ("check",): ["-q"],
    ("inspect",): [],
    ("optimize",): [],
    ("reduce",): ["--backends", "ort-cpu", "--status", "DEVIATION"],
    ("capabilities",): ["--device"],
}
NO_MODEL = {("capabilities",)}          # commands that take no model file
# What an option needs beside it, and the rows the parser cannot tell apart (check over several
# models, the zoo, writes through its own code).
NEEDS = {"--junit": ["--jobs", "1"], "--html": ["--ep", "dml"]}
# Options that need an extra: their rows run where it is installed (make picture-check for [view]).
# (capabilities --device: the DirectML setup, make directml-check).
EXTRA = {"--model-explorer": [pytest.mark.view, needs_view], "capabilities": [pytest.mark.directml]}
ROWS = [pytest.param(c, o, NEEDS.get(o, []), marks=EXTRA.get(o, EXTRA.get(c[0], [])),
                     id=" ".join([*c, *NEEDS.get(o, []), o]))
        for c, o in WRITING] + [pytest.param(("check",), "--json", ["--jobs", "1"], id="check --jobs 1 --json")]


def _argv(command, option, extra, model, path) -> "list[str]":
    assert command in COMMANDS, f"{' '.join(command)} writes with {option}: say in COMMANDS how to run it"
    subject = [] if command in NO_MODEL else [model]
    return [*command, *subject, *COMMANDS[command], *extra, option, path]


def _one_line(code: int, err: str) -> str:
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err, err
    return err


class FifoReader:
    """Reads a FIFO on a thread, each writer's bytes in turn, until stopped."""

    def __init__(self, path: Path) -> None:
        self.path, self.chunks, self.stopping = path, [], False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stopping:
            with open(self.path, "rb") as fifo:          # waits for a writer
                self.chunks.append(fifo.read())

    def stop(self) -> bytes:
        self.stopping = True
        deadline = time.monotonic() + 10
        while self.thread.is_alive() and time.monotonic() < deadline:
            try:                # the reader waits in open: let it through
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
            # ENXIO: the reader is between one writer's end and its next open (a busy machine): again
            self.thread.join(0.05)
        return b"".join(self.chunks)


def _device(tmp_path: Path, name: str, kind: int, major: int, minor: int) -> Path:
    if os.geteuid() != 0:
        pytest.skip("making a device node (os.mknod) takes root")
    path = tmp_path / name
    try:
        os.mknod(path, kind | 0o666, os.makedev(major, minor))
        if stat.S_ISCHR(kind):
            os.close(os.open(path, os.O_WRONLY))
    except OSError as exc:
        pytest.skip(f"this machine does not let root make and open a device node: {exc}")
    return path


def _same_node(path: Path, before: os.stat_result) -> None:
    """Nothing that existed changed type, device numbers, owner or mode."""
    now = os.lstat(path)
    assert (stat.S_IFMT(now.st_mode), now.st_rdev, now.st_uid, now.st_gid, stat.S_IMODE(now.st_mode)) == \
        (stat.S_IFMT(before.st_mode), before.st_rdev, before.st_uid, before.st_gid, stat.S_IMODE(before.st_mode))


@pytest.mark.parametrize("command, option, extra", ROWS)
def test_writes_to_a_device_a_fifo_links_and_files(command, option, extra, model, tmp_path, capsys):
    null = _device(tmp_path, "null", stat.S_IFCHR, 1, 3)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "kept").write_bytes(b"previous")
    os.chmod(tmp_path / "kept", 0o640)
    (tmp_path / "target").write_bytes(b"previous")
    os.symlink("target", tmp_path / "link")
    os.symlink("created", tmp_path / "dangling")
    os.symlink("null", tmp_path / "to_null")
    nodes = {p: os.lstat(p) for p in (null, fifo, tmp_path / "kept", tmp_path / "link", tmp_path / "to_null")}
    for path in (null, tmp_path / "to_null", tmp_path / "kept", tmp_path / "link", tmp_path / "dangling",
                 tmp_path / "new"):
        code, out, err = cli(_argv(command, option, extra, model, path), capsys)
        assert code == 0 and err == "", (path, out, err)
    reader = FifoReader(fifo)
    code, out, err = cli(_argv(command, option, extra, model, fifo), capsys)
    assert code == 0 and err == "" and reader.stop(), out + err
    for path, before in nodes.items():
        _same_node(path, before)
    assert (tmp_path / "kept").read_bytes() != b"previous" and (tmp_path / "target").read_bytes() != b"previous"
    assert (tmp_path / "created").stat().st_size and (tmp_path / "new").stat().st_size
    assert os.readlink(tmp_path / "dangling") == "created"       # a link stays a link: its target is written
    # nothing beside the device, the FIFO or the links (no temporary, no sibling in their folder)
    assert not [n for n in os.listdir(tmp_path) if n.startswith((".", "null.", "fifo.", "to_null."))]


def _refused_paths(tmp_path: Path) -> "dict[str, tuple[Path, str]]":
    (tmp_path / "dir").mkdir()
    os.symlink("loop_b", tmp_path / "loop_a")
    os.symlink("loop_a", tmp_path / "loop_b")
    os.symlink("missing/out", tmp_path / "into_missing")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    sock.close()
    paths = {"directory": (tmp_path / "dir", "is a directory"), "socket": (tmp_path / "sock", "socket"),
             "link loop": (tmp_path / "loop_a", "ELOOP"),
             "dangling into a missing folder": (tmp_path / "into_missing", "does not exist")}
    if os.geteuid() == 0:
        paths["block device"] = (_device(tmp_path, "block", stat.S_IFBLK, 7, 0), "block device")
    return paths


@pytest.mark.parametrize("command, option, extra", ROWS)
def test_a_path_that_cannot_be_written_is_one_line_before_the_work(command, option, extra, model, tmp_path, capsys):
    for kind, (path, words) in _refused_paths(tmp_path).items():
        before = os.lstat(path)
        code, out, err = cli(_argv(command, option, extra, model, path), capsys)
        line = _one_line(code, err)
        assert out == "" and words in line and str(path) in line and option in line, (kind, line)
        _same_node(path, before)


@pytest.mark.parametrize("command, option, extra", ROWS)
def test_a_full_device_is_one_line_naming_enospc(command, option, extra, model, tmp_path, capsys):
    full = _device(tmp_path, "full", stat.S_IFCHR, 1, 7)
    before = os.lstat(full)
    code, out, err = cli(_argv(command, option, extra, model, full), capsys)
    line = _one_line(code, err)
    assert "No space left on device (ENOSPC)" in line and str(full) in line, line
    _same_node(full, before)
    assert sorted(os.listdir(tmp_path)) == ["full"]


def test_dev_stdout_is_this_process_stdout_in_place(model, tmp_path):
    """/dev/stdout (this process's descriptor 1) is written where it points: after what was printed
    to a pipe, and into a file `>` opened, which stays the same file."""
    argv = [sys.executable, "-m", "onnx_dml_lowering.compiler", "compile", str(model), "--json", "/dev/stdout"]
    piped = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stderr == "" and '"placement"' in piped.stdout, piped.stderr
    out = tmp_path / "out.txt"
    with open(out, "w") as sink:
        inode = os.fstat(sink.fileno()).st_ino
        done = subprocess.run(argv, stdout=sink, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert os.stat(out).st_ino == inode and out.read_text() == piped.stdout


def test_a_regular_file_keeps_its_owner_and_group(model, tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("giving a file to another owner (os.chown) takes root")
    path = tmp_path / "theirs.json"
    path.write_text("previous")
    os.chown(path, 1234, 5678)
    os.chmod(path, 0o604)
    code, out, err = cli(["compile", model, "--json", path], capsys)
    assert code == 0 and err == "", err
    info = os.stat(path)
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (1234, 5678, 0o604)
    assert path.read_text() != "previous"


def test_several_feed_sets_go_to_one_device_one_after_another(model, tmp_path, capsys):
    """A device has no folder of its own: set #1 and #2 go to it too, never beside it (no
    'null.1.npz' where /dev/null would be)."""
    null = _device(tmp_path, "null", stat.S_IFCHR, 1, 3)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    code, out, err = cli(["check", model, "-q", "--iterations", "3", "--save-inputs", null, "--save-outputs", fifo],
                         capsys)
    assert code == 0 and err == "", out + err
    assert f"wrote {null} (feed sets #0-#2, one after another)" in out.splitlines()
    assert reader.stop().count(b"PK\x05\x06") == 3          # three whole .npz archives came through the FIFO
    assert sorted(os.listdir(tmp_path)) == ["fifo", "null"]


def test_conformance_export_refuses_a_dir_that_is_a_device_or_fifo(tmp_path, capsys):
    null = _device(tmp_path, "null", stat.S_IFCHR, 1, 3)
    code, out, err = cli(["conformance", "export", null], capsys)
    assert "not a folder" in _one_line(code, err) and stat.S_ISCHR(os.lstat(null).st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, out, err = cli(["conformance", "export", fifo], capsys)
    assert "not a folder" in _one_line(code, err) and stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("command, option, extra", ROWS)
def test_a_name_ending_in_a_slash_is_a_folder_s_not_a_file_s(command, option, extra, model, tmp_path, capsys):
    path = f"{tmp_path / 'new'}/"
    code, out, err = cli(_argv(command, option, extra, model, path), capsys)
    assert out == "" and "ends with '/'" in _one_line(code, err)
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize("command, option, extra", ROWS)
def test_a_dash_is_refused_not_made_a_file_named_dash(command, option, extra, model, tmp_path, capsys, monkeypatch):
    """`--json -` means standard output to many tools: it is one line naming /dev/stdout, and no file
    named '-' appears in the working folder; a file named '-' given by its full path is written."""
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(_argv(command, option, extra, model, "-"), capsys)
    line = _one_line(code, err)
    assert out == "" and "/dev/stdout" in line and "full path" in line and option in line, line
    assert sorted(os.listdir(tmp_path)) == []
    code, out, err = cli(_argv(command, option, extra, model, tmp_path / "-"), capsys)
    assert code == 0 and err == "" and (tmp_path / "-").exists(), err


@pytest.mark.parametrize("command, option, extra", ROWS)
def test_every_file_written_is_said_on_one_line(command, option, extra, model, tmp_path, capsys):
    """Each file a command writes is said on stdout as `wrote PATH` (check's --json and --markdown
    and the zoo's reports were written without a word), the path shown on one line whatever it
    holds (an escape sequence or a line feed in it is shown escaped, never sent to the terminal)."""
    from onnx_dml_lowering.ir.display import display
    path = tmp_path / "new\x1b[2J\nname.out"
    code, out, err = cli(_argv(command, option, extra, model, path), capsys)
    assert code == 0 and err == "", out + err
    assert path.exists()
    assert f"wrote {display(path)}" in out and str(path) not in out and "\x1b" not in out, out


@pytest.mark.parametrize("command, option, extra", ROWS)
def test_dot_dot_after_a_link_is_the_link_targets_parent(command, option, extra, model, tmp_path, capsys):
    """'lnk/../out' is written where the system puts it, beside the link's target (the path was
    normalised as text, so it landed beside the link); 'missing/../out' names a folder the system
    cannot walk and is refused in one line, as `echo > missing/../out` fails."""
    (tmp_path / "real" / "deep").mkdir(parents=True)
    os.symlink("real/deep", tmp_path / "lnk")
    code, out, err = cli(_argv(command, option, extra, model, f"{tmp_path}/lnk/../out"), capsys)
    assert code == 0 and err == "", out + err
    assert (tmp_path / "real" / "out").stat().st_size and not (tmp_path / "out").exists()
    (tmp_path / "kept").write_bytes(b"previous")         # existing or not, the path cannot be walked
    for name in ("out2", "kept"):
        code, out, err = cli(_argv(command, option, extra, model, f"{tmp_path}/missing/../{name}"), capsys)
        line = _one_line(code, err)
        assert out == "" and f"folder '{tmp_path}/missing' does not exist" in line, line
    assert not (tmp_path / "out2").exists() and (tmp_path / "kept").read_bytes() == b"previous"
