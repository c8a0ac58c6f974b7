"""runtime/interrupt: a stop raises once while it unwinds, again once resumed; a later signal does not
rename it; and main() in-process (the API, the tests) leaves the signal handlers as it found them."""
from __future__ import annotations

import signal

import numpy as np
import pytest

from onnx_dml_lowering.runtime import interrupt


@pytest.fixture
def watched():
    undo = interrupt.watch_signals()
    yield
    undo()


def test_a_stop_raises_once_until_resumed(watched):
    with pytest.raises(interrupt.Terminated):
        interrupt._raise_stop(signal.SIGTERM, None)
    interrupt._raise_stop(signal.SIGINT, None)          # unwinding: nothing more, no traceback
    interrupt._stop_runs(signal.SIGINT)                 # the watcher thread's turn: not renamed
    assert interrupt.terminated()
    interrupt.resume()                                  # caught, and the work goes on
    with pytest.raises(KeyboardInterrupt) as raised:
        interrupt._raise_stop(signal.SIGINT, None)
    assert not isinstance(raised.value, interrupt.Terminated) and not interrupt.terminated()


def test_main_in_process_leaves_the_handlers_as_it_found_them(tmp_path, capsys):
    """A stopped command in-process (its loader raising KeyboardInterrupt) left SIGINT and SIGTERM
    ignored for the rest of the process and every child it started."""
    from onnx_dml_lowering.compiler.cli import main
    from onnx import TensorProto as T
    from onnx import helper as h
    import onnx
    from tests.builders import graph_model
    onnx.save(graph_model([h.make_node("NonZero", ["x"], ["y"], name="nz")], [("x", T.FLOAT, [3])],
                          [("y", T.INT64, [1, None])]), str(tmp_path / "m.onnx"))
    (tmp_path / "dl.py").write_text("def load_data():\n    raise KeyboardInterrupt\n")
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert main(["check", str(tmp_path / "m.onnx"), "--data-loader-script", str(tmp_path / "dl.py")]) == 130
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    np.savez(tmp_path / "in.npz", x=np.ones(3, np.float32))
    assert main(["check", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in.npz"), "-q"]) == 0
