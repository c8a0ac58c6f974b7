"""Every reader of a file the user names (the model, --inputs, --data-loader-script, --ep-library,
the models check is given) makes the one check, runtime.input_files.regular_file: a path that is missing,
too long, reached through a file, a directory or a FIFO is one line naming that file, exit 2,
never an internal error, never a blocked read (a FIFO is refused from its stat)."""
import os

import pytest

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.input_files import regular_file
from tests.cli_runner import cli
from tests.paths import REPO

EXAMPLE = REPO / "compiler" / "examples" / "exporter_idioms.onnx"
OTHER = REPO / "compiler" / "examples" / "masked_select.onnx"


def bad_path(tmp_path, kind: str, suffix: str):
    """A path of `kind` and the words its one line holds."""
    if kind == "missing":
        return tmp_path / f"absent{suffix}", "does not exist"
    if kind == "too long":              # the kernel refuses a name over 255 bytes: ENAMETOOLONG
        return tmp_path / ("a" * 300 + suffix), "cannot be read: File name too long"
    if kind == "through a file":        # ENOTDIR
        (tmp_path / "plain").write_text("x")
        return tmp_path / "plain" / f"x{suffix}", "cannot be read: Not a directory"
    if kind == "directory":
        (tmp_path / f"d{suffix}").mkdir()
        return tmp_path / f"d{suffix}", "is a directory, not"
    os.mkfifo(tmp_path / f"p{suffix}")
    return tmp_path / f"p{suffix}", "not a regular file (a FIFO, device or socket)"


READERS = {   # argv around the path, what the line names the file as
    "model": (lambda p: ["inspect", p], "model file"),
    "--inputs": (lambda p: ["run", EXAMPLE, "--inputs", p], "inputs file"),
    "--data-loader-script": (lambda p: ["check", EXAMPLE, "--data-loader-script", p], "data loader script"),
    "--ep-library": (lambda p: ["run", EXAMPLE, "--backends", "ort-cpu", "--ep-library", f"Mine={p}"], "--ep-library Mine: library file"),
}
KINDS = ["missing", "too long", "through a file", "directory", "fifo"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_of_a_named_file_says_the_same_one_line(reader, kind, tmp_path, capsys):
    argv, label = READERS[reader]
    path, words = bad_path(tmp_path, kind, {"--data-loader-script": ".py", "--ep-library": ".so"}.get(reader, ".onnx"))
    code, out, err = cli(argv(path), capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"dml-lower: error: {label} ") and words in err, err


@pytest.mark.parametrize("kind", ["missing", "too long", "through a file"])
def test_a_model_list_names_a_path_it_cannot_reach(kind, tmp_path, capsys):
    """check over several models (a zoo) looks at each path before it checks any."""
    path, words = bad_path(tmp_path, kind, ".onnx")
    code, out, err = cli(["check", path, OTHER, "-q"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"model {str(path)!r}" in err and words.removeprefix("cannot be read: ") in err, err


def test_the_check_notes_the_file_as_an_input_no_output_replaces(tmp_path):
    from onnx_dml_lowering.runtime import input_files
    path = tmp_path / "feeds.npz"
    path.write_bytes(b"x")
    input_files.forget_all()
    try:
        assert regular_file(path, "inputs file").st_size == 1
        assert input_files.refusal(os.stat(path)) is not None
        with pytest.raises(DmlLowerError, match="its path holds a NUL byte"):
            regular_file("a\0b", "model file")
    finally:
        input_files.forget_all()
