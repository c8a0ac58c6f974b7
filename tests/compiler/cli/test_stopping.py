"""Every run can be stopped and leaves nothing behind (issue 27), with signals sent to real
processes: Ctrl-C inside onnxruntime's run of a long Loop, SIGTERM to a zoo and its children."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from tests.builders import graph_model

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")


def long_loop(trips: "int | None") -> onnx.ModelProto:
    """A Loop onnxruntime runs for as long as the trip count M says (x <- x + sin(x) over 4096
    floats); M an initializer of `trips`, or a graph input when None."""
    body = h.make_graph(
        [h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Sin", ["x_in"], ["s"]),
         h.make_node("Add", ["s", "x_in"], ["x_out"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("x_in", T.FLOAT, [4096])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("x_out", T.FLOAT, [4096])])
    inputs = [("x", T.FLOAT, [4096])] + ([("M", T.INT64, [])] if trips is None else [])
    inits = {"M": onnx.numpy_helper.to_array(h.make_tensor("M", T.INT64, [], [trips]))} if trips else {}
    return graph_model([h.make_node("Loop", ["M", "", "x"], ["y"], name="loop", body=body)], inputs,
                       [("y", T.FLOAT, [4096])], initializers=inits, opset=17)


def _start(args, tmp_path: Path, **env) -> subprocess.Popen:
    # SIGINT as a terminal delivers it (a shell's background job would have it ignored)
    return subprocess.Popen([sys.executable, "-m", "onnx_dml_lowering.compiler", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, **env},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(condition, seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "the run never got under way"
        time.sleep(0.1)


def _stop(proc: subprocess.Popen, signum: int) -> "tuple[int, str, str, float]":
    start = time.monotonic()
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the signal did not stop the run within 60 s")
    return proc.returncode, out, err, time.monotonic() - start


LOADER = """
import numpy as np
from pathlib import Path

def load_data():
    yield {"x": np.ones(4096, np.float32), "M": np.array(1, np.int64)}
    Path("started").write_text("")         # the second set: onnxruntime's long run is next
    yield {"x": np.ones(4096, np.float32), "M": np.array(10**12, np.int64)}
"""


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("command", [["run", "--backends", "ort-cpu"],
                                     ["check", "--backends", "ort-cpu", "--json", "r.json"]])
def test_ctrl_c_stops_onnxruntime_inside_a_long_loop(command, signum, code, tmp_path):
    onnx.save(long_loop(None), tmp_path / "loop.onnx")
    (tmp_path / "loader.py").write_text(LOADER)
    proc = _start([command[0], "loop.onnx", *command[1:], "--data-loader-script", "loader.py"], tmp_path)
    _wait_for(lambda: (tmp_path / "started").exists())
    time.sleep(1.0)                           # well inside session.run by now
    got, out, err, seconds = _stop(proc, signum)
    assert got == code and seconds < 30, (got, out, err)
    assert "Traceback" not in err
    if command[0] == "check":                 # the set checked before Ctrl-C is reported, and says so
        document = json.loads((tmp_path / "r.json").read_text())
        assert document["interrupted"] is True and document["iterations"] == 1
        assert "the report covers the 1 feed set checked before" in err     # a data loader's count is unknown


def _children(pid: int) -> "list[int]":
    """The processes `pid` started, from any of its threads (Linux /proc)."""
    found = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:                 # the process just ended
        return found
    for task in tasks:
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:             # a thread that just ended
            pass
    return found


def _model_checks(pid: int) -> "list[int]":
    """The per-model check processes of the zoo `dml-lower` process `pid` (the console script runs
    its command in a supervised child, compiler/cli/supervisor.py: the zoo is that child)."""
    return [grandchild for child in _children(pid) for grandchild in _children(child)]


def test_sigterm_to_a_zoo_ends_its_checks_and_removes_their_folders(tmp_path):
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    for name in ("a", "b"):
        onnx.save(long_loop(10**12), zoo / f"{name}.onnx")
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = _start(["check", zoo, "--jobs", "2", "--backends", "ort-cpu", "--json", "z.json"], tmp_path,
                  TMPDIR=str(temp))
    folders = lambda: [p for p in temp.iterdir() if p.name.startswith("dml-lower-zoo-")]   # noqa: E731
    _wait_for(lambda: len(folders()) == 2 and len(_model_checks(proc.pid)) == 2)
    children = _model_checks(proc.pid) + [p for c in _model_checks(proc.pid) for p in _children(c)]
    time.sleep(2.0)
    code, out, err, seconds = _stop(proc, signal.SIGTERM)
    assert code == 143 and seconds < 30, (code, out, err)
    assert folders() == []
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    document = json.loads((tmp_path / "z.json").read_text())
    assert document["interrupted"] is True and document["models_requested"] == 2


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_sent_twice_is_one_line(signum, code, tmp_path):
    """`timeout` signals the process and its group, so the command's process gets SIGTERM twice: the
    second, arriving while the first ends the command, raised again and escaped as a traceback.
    Sent here in bursts at the moments the command ends, from a data loader that never returns."""
    onnx.save(long_loop(None), tmp_path / "loop.onnx")
    (tmp_path / "loader.py").write_text("import time\nfrom pathlib import Path\ndef load_data():\n"
                                        "    Path('started').write_text('')\n    while True:\n        time.sleep(0.01)\n")
    for pause in (0.0, 0.001, 0.01):
        (tmp_path / "started").unlink(missing_ok=True)
        proc = _start(["check", "loop.onnx", "--data-loader-script", "loader.py"], tmp_path)
        _wait_for(lambda: (tmp_path / "started").exists())
        for _ in range(4):
            proc.send_signal(signum)
            time.sleep(pause)
        got, out, err, _ = _stop(proc, signum)
        assert got == code and "Traceback" not in err and len(err.splitlines()) == 1, (pause, got, err)


SLEEPING_LOADER = """
import os, time
import numpy as np
def load_data():
    with open("child.pid", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(20)
    yield {"x": np.ones(4096, np.float32)}
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_sigkill_of_the_pid_started_ends_the_command_it_supervises(tmp_path):
    """`kill -9` of the console script's pid (what a CI runner's timeout or a job runner sends to the
    pid it started, not to the group) ended only the supervisor: its child ran on, printed its
    report and wrote its files afterwards. The child dies with it now, writing nothing."""
    onnx.save(long_loop(3), tmp_path / "loop.onnx")
    (tmp_path / "loader.py").write_text(SLEEPING_LOADER)
    proc = subprocess.Popen([sys.executable, "-m", "onnx_dml_lowering.compiler", "check", "loop.onnx",
                             "--data-loader-script", "loader.py", "--json", "r.json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, start_new_session=True)
    _wait_for(lambda: (tmp_path / "child.pid").exists() and (tmp_path / "child.pid").read_text())
    child = int((tmp_path / "child.pid").read_text())
    assert child != proc.pid and child in _children(proc.pid)
    proc.kill()
    proc.wait(timeout=10)               # the supervisor (its child holds the pipes: no communicate)
    _wait_for(lambda: not Path(f"/proc/{child}").exists() or
              Path(f"/proc/{child}/stat").read_text().split(") ")[1].startswith("Z"), seconds=10)
    time.sleep(25)                      # past the loader's sleep: a child still running would write r.json
    assert not (tmp_path / "r.json").exists()
    proc.stdout.close()
    proc.stderr.close()
