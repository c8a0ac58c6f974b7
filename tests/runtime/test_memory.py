"""--memory-limit: the buffers a run needs are summed before allocating and refused in one line."""
import numpy as np
import pytest
from onnx import TensorProto as T

from onnx_dml_lowering.compiler import DmlLowerError, compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.examples import example_paths
from hypothesis import given
from hypothesis import strategies as st

from onnx_dml_lowering.runtime.memory import buffer_bytes, default_limit, format_size, parse_size
from tests.builders import single_node_model


@pytest.mark.parametrize("text,size", [("512MiB", 512 * 2**20), ("2GB", 2 * 10**9), ("1.5GiB", 3 * 2**29),
                                       ("1000000", 10**6), ("64 KiB", 65536), ("10mb", 10**7), (4096, 4096)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "abc", "5x", "-1MiB", "0", "1.2.3GB"])
def test_parse_size_rejects(text):
    with pytest.raises(DmlLowerError, match="memory limit"):
        parse_size(text)


@given(st.integers(0, 2**100))
def test_a_size_is_shown_in_the_largest_unit_it_fills(size):
    """Under 1024 of its unit (up to YiB), within the rounding of one decimal, and read back by
    --memory-limit where that takes the unit (up to TiB)."""
    number, unit = format_size(size).split()
    if unit == "bytes":
        assert int(number) == size < 1024
        return
    scale = 2 ** (10 * ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB").index(unit) + 10)
    assert 1 <= float(number) <= 1024 or unit == "YiB"
    assert abs(float(number) * scale - size) <= 0.05 * scale
    if unit in ("KiB", "MiB", "GiB", "TiB"):
        assert abs(parse_size(format_size(size)) - size) <= 0.05 * scale


def test_default_limit_is_most_of_physical_memory():
    import os
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert physical // 2 < default_limit() < physical


def test_worst_case_counts_every_element():
    """The crop buffer sized by the read-back count is bounded by M (every element non-zero)."""
    compiled = compile_model(single_node_model("NonZero", T.FLOAT, (30, 40), T.INT64))
    sizes = buffer_bytes(compiled.graph)
    m, rank = 30 * 40, 2
    assert sizes["nonzero.coords"] == 8 * rank * m
    assert sizes["nonzero.result"] == 8 * rank * m
    assert sizes["nonzero.in"] == 4 * m


def test_limit_just_above_and_below():
    compiled = compile_model(single_node_model("NonZero", T.FLOAT, (30, 40), T.INT64))
    need = sum(buffer_bytes(compiled.graph).values())
    x = np.ones((30, 40), np.float32)
    assert compiled.run({"x": x}, memory_limit=need)["y"].shape == (2, 1200)
    with pytest.raises(DmlLowerError, match=r"node nonzero, buffer nonzero\.(coords|result)"):
        compiled.run({"x": x}, memory_limit=need - 1)


def test_run_time_specialisation_is_checked_too():
    compiled = compile_model(single_node_model("NonZero", T.FLOAT, ("n", "m"), T.INT64))
    with pytest.raises(DmlLowerError, match=r"input shapes \[\(100, 100\)\].*over the memory limit"):
        compiled.run({"x": np.ones((100, 100), np.float32)}, memory_limit="64KiB")
    assert compiled.run({"x": np.ones((10, 10), np.float32)}, memory_limit="64KiB")["y"].shape == (2, 100)


def test_a_refusal_names_the_values_that_sized_it():
    """EyeLike(ConstantOfShape(shp)): the eye's size comes from shp's values, not its shape [2]."""
    from onnx import helper as h
    from tests.builders import graph_model
    nodes = [h.make_node("ConstantOfShape", ["shp"], ["z"], name="cos", value=h.make_tensor("v", T.FLOAT, [1], [0.0])),
             h.make_node("EyeLike", ["z"], ["y"], name="eye")]
    compiled = compile_model(graph_model(nodes, [("shp", T.INT64, [2])], [("y", T.FLOAT, [None, None])]))
    with pytest.raises(DmlLowerError, match=r"^node eye at input shapes \[\(2,\)\], shp = \[600, 700\] needs "
                                            r"1\.6 MiB of buffers, over the memory limit of 1\.0 MiB"):
        compiled.run({"shp": np.array([600, 700], np.int64)}, memory_limit="1MiB")


@pytest.mark.parametrize("command", ["run", "check"])
def test_cli_memory_limit_is_one_line_exit_2(command, capfd):
    code = main([command, str(example_paths()[0]), "--memory-limit", "1KiB"])
    err = capfd.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "over the memory limit of 1.0 KiB" in err[0]
    assert "nonzero.coords" in err[0]


def test_every_limit_is_one_type_that_check_stops_on():
    """A limit the user set is MemoryLimitExceeded wherever it is met (the buffers of a run-time-sized
    node, stacked scan outputs, feeds, an inputs file); check matches the type, not the words, and
    stops instead of calling it one backend's ERROR."""
    from onnx_dml_lowering.ir.errors import MemoryLimitExceeded
    from onnx_dml_lowering.runtime.check import BackendOptions, Tolerances, check
    from onnx_dml_lowering.runtime.feeds import check_feed_sizes
    from onnx_dml_lowering.runtime.npz import load_npz, save_npz
    compiled = compile_model(single_node_model("NonZero", T.FLOAT, ("n", "m"), T.INT64))
    feeds = {"x": np.ones((100, 100), np.float32)}
    with pytest.raises(MemoryLimitExceeded):
        check(compiled, feeds, ["cpu", "ort"], Tolerances(), BackendOptions(memory_limit="64KiB"))
    with pytest.raises(MemoryLimitExceeded):
        check_feed_sizes(compiled.inputs, {"x": (1000, 1000)}, 1024)
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/f.npz"
        save_npz(path, feeds, "inputs file")
        with pytest.raises(MemoryLimitExceeded):
            load_npz(path, "inputs file", 1024)


# -- the default limit: the least of physical memory, the cgroup's limit and the rlimits ----------

def _cgroups(tmp_path, listing: str, files: "dict[str, str]") -> "tuple[str, str]":
    """A /proc/self/cgroup holding `listing` and a cgroup mount holding `files` (path: contents)."""
    proc = tmp_path / "cgroup"
    proc.write_text(listing)
    for name, text in files.items():
        (tmp_path / "mnt" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "mnt" / name).write_text(text)
    return str(proc), str(tmp_path / "mnt")


@pytest.mark.parametrize("listing, files, limits", [
    # v2: the process's own cgroup and every folder above it, 'max' meaning none
    ("0::/user.slice/job\n", {"user.slice/job/memory.max": "max\n", "user.slice/memory.max": "1073741824\n",
                              "memory.max": "4294967296\n"}, [1073741824, 4294967296]),
    # v1: the memory controller's hierarchy; its 'no limit' is 2^63 rounded to a page
    ("4:memory:/docker/abc\n2:cpu:/docker/abc\n", {"memory/docker/abc/memory.limit_in_bytes": "536870912\n",
                                                   "memory/memory.limit_in_bytes": "9223372036854771712\n"},
     [536870912]),
    # a container sees its own cgroup as '/': the mount's top file is its limit
    ("0::/\n", {"memory.max": "2147483648\n"}, [2147483648]),
    ("0::/\n", {}, []),                     # no memory controller there
])
def test_the_cgroup_limits_are_read_up_to_the_root(listing, files, limits, tmp_path):
    from onnx_dml_lowering.runtime.memory import _cgroup_limits
    assert sorted(_cgroup_limits(*_cgroups(tmp_path, listing, files))) == sorted(limits)


def test_no_cgroup_listing_is_no_limit(tmp_path):
    from onnx_dml_lowering.runtime.memory import _cgroup_limits
    assert _cgroup_limits(str(tmp_path / "absent"), str(tmp_path)) == []


@pytest.mark.parametrize("cgroup, rlimits, held, physical, expected", [
    ([], {}, {}, 16 * 2**30, 12 * 2**30),                                   # three quarters of physical memory
    ([2 * 2**30], {}, {}, 16 * 2**30, 3 * 2**29),                            # a container's memory.max
    ([], {"RLIMIT_AS": 4 * 2**30}, {"VmSize": 2**30}, 16 * 2**30, 9 * 2**28),  # ulimit -v above what is mapped
    ([], {"RLIMIT_DATA": 2**30}, {"VmData": 2**29}, 16 * 2**30, 3 * 2**27),   # ulimit -d above the data held
    ([], {"RLIMIT_AS": 2**29}, {"VmSize": 2**30}, 16 * 2**30, 1),             # already past it: nothing left
])
def test_the_default_limit_is_the_least_of_what_this_process_may_have(cgroup, rlimits, held, physical, expected,
                                                                       monkeypatch):
    """`ulimit -v 4000000` let a --dim past it through to 'internal error: MemoryError': the default
    limit took physical memory alone."""
    import resource

    from onnx_dml_lowering.runtime import memory
    monkeypatch.setattr(memory, "_cgroup_limits", lambda: list(cgroup))
    monkeypatch.setattr(memory, "_status_sizes", lambda: dict(held))
    monkeypatch.setattr(resource, "getrlimit", lambda which: (
        next((v for k, v in rlimits.items() if getattr(resource, k) == which), resource.RLIM_INFINITY),) * 2)
    monkeypatch.setattr(memory.os, "sysconf", lambda name: {"SC_PHYS_PAGES": physical // 4096,
                                                             "SC_PAGE_SIZE": 4096}[name])
    assert default_limit() == expected


def test_a_real_ulimit_bounds_the_feeds_in_one_line(tmp_path):
    """Under a real RLIMIT_AS the feeds that would not fit are refused before numpy tries (it was
    'internal error: MemoryError: Unable to allocate 4.47 GiB')."""
    import os
    import resource
    import subprocess
    import sys

    import onnx
    onnx.save(single_node_model("NonZero", T.FLOAT, ["rows", 3], T.INT64), tmp_path / "m.onnx")
    cap = 4 * 10**9

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    env = dict(os.environ, DML_LOWER_STRICT="1")
    env.pop("DML_LOWER_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", "check", str(tmp_path / "m.onnx"), "-q",
                           "--dim", "rows=200000000"], env=env, capture_output=True, text=True, timeout=300,
                          preexec_fn=limit)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    line, = proc.stderr.strip().splitlines()
    assert "input 'x'" in line and "over the memory limit of" in line and "internal error" not in line, line
    shown = float(line.split("over the memory limit of ")[1].split()[0])
    assert shown * 2**30 < cap, line         # the limit under the cap, not three quarters of the machine
