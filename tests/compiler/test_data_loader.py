"""compiler.data_loader: a data loader's code runs in its own copy of the process-wide state the
command reads (working directory, environment, umask, sys.path, signal handlers, numpy's error
handling and print options), kept from one call into it to the next; the command's own is back
after every call, whichever of the loader's calls changed it (loading, load_data(), a step of its
generator, a feed's __array__, its clean-up when the command stops taking sets)."""
from __future__ import annotations

import os
import signal
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler.data_loader import feed_sets

INPUTS = [h.make_tensor_value_info("x", T.FLOAT, [2])]


def _loader(tmp_path, body: str):
    path = tmp_path / "loader.py"
    path.write_text("import os, signal, sys\nimport numpy as np\n" + textwrap.dedent(body))
    return str(path)


def _state() -> tuple:
    return (os.getcwd(), dict(os.environ), _umask(), list(sys.path), signal.getsignal(signal.SIGINT),
            np.geterr(), np.get_printoptions())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Each changes one piece of state, from a different place in the loader's code.
CHANGES = {
    "chdir in load_data": "def load_data():\n    os.chdir({elsewhere!r})\n    yield {{'x': np.ones(2, np.float32)}}\n",
    "chdir at loading": "os.chdir({elsewhere!r})\ndef load_data():\n    return {{'x': np.ones(2, np.float32)}}\n",
    "chdir in __array__": "class A:\n    def __array__(self, dtype=None, copy=None):\n        os.chdir({elsewhere!r})\n"
                          "        return np.ones(2, np.float32)\ndef load_data():\n    return [{{'x': A()}}]\n",
    "environment": "def load_data():\n    os.environ['DML_LOWER_STRICT'] = '1'\n    os.environ.pop('HOME', None)\n"
                   "    yield {{'x': np.ones(2, np.float32)}}\n",
    "umask": "def load_data():\n    os.umask(0)\n    yield {{'x': np.ones(2, np.float32)}}\n",
    "sys.path": "def load_data():\n    sys.path.insert(0, {elsewhere!r})\n    yield {{'x': np.ones(2, np.float32)}}\n",
    "signal handler": "def load_data():\n    signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                      "    yield {{'x': np.ones(2, np.float32)}}\n",
    "numpy errors": "def load_data():\n    np.seterr(all='raise')\n    yield {{'x': np.ones(2, np.float32)}}\n",
    "numpy print options": "def load_data():\n    np.set_printoptions(precision=1, legacy='1.13')\n"
                           "    yield {{'x': np.ones(2, np.float32)}}\n",
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_the_command_gets_its_state_back_after_every_call(change, tmp_path, monkeypatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    before = _state()
    sets = feed_sets(_loader(tmp_path, CHANGES[change].format(elsewhere=str(elsewhere))), INPUTS)
    first = next(sets)
    assert _state() == before                   # between the loader's calls: the command's
    np.testing.assert_array_equal(first["x"], np.ones(2, np.float32))
    assert list(sets) == []
    assert _state() == before


def test_the_loader_keeps_its_own_state_from_call_to_call(tmp_path, monkeypatch) -> None:
    """A loader that changes to its data folder once reads from there at every later step, while
    the command's relative paths stay the command's."""
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        np.save(data / f"{i}.npy", np.full(2, i, np.float32))
    (tmp_path / "0.npy").write_bytes(b"not the loader's")      # the command's folder has one too
    body = """
    def load_data():
        os.chdir('data')
        os.environ['LOADER_SET'] = 'yes'
        for i in range(3):
            assert os.environ['LOADER_SET'] == 'yes'
            yield {'x': np.load(f'{i}.npy')}
    """
    monkeypatch.chdir(tmp_path)
    for index, feeds in enumerate(feed_sets(_loader(tmp_path, body), INPUTS)):
        assert os.getcwd() == str(tmp_path) and "LOADER_SET" not in os.environ
        np.testing.assert_array_equal(feeds["x"], np.full(2, index, np.float32))


def test_a_removed_working_directory_does_not_strand_either_side(tmp_path, monkeypatch) -> None:
    """The loader removes the folder it changed to: it is still where the loader is (a folder
    known by descriptor), and the command is back in its own, at every step."""
    body = f"""
    import shutil, tempfile
    def load_data():
        own = tempfile.mkdtemp(dir={str(tmp_path)!r})
        os.chdir(own)
        yield {{'x': np.ones(2, np.float32)}}
        shutil.rmtree(own)
        yield {{'x': np.full(2, 2, np.float32)}}
        yield {{'x': np.full(2, 3, np.float32)}}
    """
    monkeypatch.chdir(tmp_path)
    got = []
    for feeds in feed_sets(_loader(tmp_path, body), INPUTS):
        assert os.getcwd() == str(tmp_path)
        got.append(float(feeds["x"][0]))
    assert got == [1.0, 2.0, 3.0] and os.getcwd() == str(tmp_path)


def test_a_generator_closed_early_cleans_up_in_its_own_state(tmp_path, monkeypatch) -> None:
    """The command stops taking sets (check done with the first, or stopped): the loader's
    `finally` runs now, in its own state, not whenever the garbage collector gets to it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cleaned = tmp_path / "cleaned"
    body = f"""
    def load_data():
        try:
            for i in range(5):
                yield {{'x': np.full(2, i, np.float32)}}
        finally:
            os.chdir({str(elsewhere)!r})
            open({str(cleaned)!r}, 'w').close()
            raise RuntimeError('clean-up failed')       # no set is taken any more: dropped
    """
    monkeypatch.chdir(tmp_path)
    sets = feed_sets(_loader(tmp_path, body), INPUTS)
    next(sets)
    sets.close()
    assert cleaned.exists() and os.getcwd() == str(tmp_path)


def test_only_what_the_loader_changed_is_its_own(tmp_path, monkeypatch) -> None:
    """The command's own changes between the loader's calls (an environment variable it drops, as
    the DirectML host's hand-over is dropped once read) reach the loader and are not undone by it."""
    body = """
    def load_data():
        os.environ['LOADER_SET'] = 'yes'
        for i in range(2):
            yield {'x': np.full(2, float(os.environ.get('COMMAND_SET', '0')), np.float32)}
    """
    monkeypatch.setenv("COMMAND_SET", "1")
    sets = feed_sets(_loader(tmp_path, body), INPUTS)
    assert float(next(sets)["x"][0]) == 1.0
    monkeypatch.delenv("COMMAND_SET")
    assert float(next(sets)["x"][0]) == 0.0
    assert list(sets) == [] and "COMMAND_SET" not in os.environ and "LOADER_SET" not in os.environ
