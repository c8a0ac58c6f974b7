"""A plain `check`, `run` or `compile` leaves onnx.reference unimported: its operator list costs
~0.05 s of CPU (a fifth of our own imports), and only `--oracle reference`, a DML EP run or a node
onnx.reference evaluates needs it. On a small model the fixed cost of starting is most of the
command (SSDlite-320: README's Performance section)."""
from __future__ import annotations

import os
import subprocess
import sys

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.runtime.directml.home import HOME_ENV
from tests.builders import graph_model

# and the DirectML backend's host and the DML EP's deviation table (~12 ms of imports), which only
# a `dml` backend or a DML EP provider reads
NOT_NEEDED = ("onnx.reference", "onnx_dml_lowering.runtime.directml.dml_host",
              "onnx_dml_lowering.runtime.directml.home", "onnx_dml_lowering.runtime.dml_deviations")

PROBE = """
import sys
from onnx_dml_lowering.compiler.cli import main
code = main(sys.argv[1:])
print(code, *sorted(m for m in sys.modules if m in {names!r}))
"""


@pytest.mark.parametrize("argv", [["check", "{model}", "-q"], ["check", "{model}", "-q", "--backends", "cpu,ort,ort-cpu"],
                                  ["run", "{model}", "-q"], ["compile", "{model}"]])
def test_a_plain_command_leaves_unneeded_modules_unimported(tmp_path, argv):
    model = graph_model([h.make_node("Relu", ["x"], ["r"], name="relu"),
                         h.make_node("NonZero", ["r"], ["nz"], name="nz"),
                         h.make_node("Add", ["r", "r"], ["y"], name="add")],
                        [("x", T.FLOAT, [3, 4])], [("nz", T.INT64, 2), ("y", T.FLOAT, [3, 4])])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    args = [a.format(model=path) for a in argv]
    result = subprocess.run([sys.executable, "-c", PROBE.format(names=set(NOT_NEEDED)), *args],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0", result.stdout


# What a command that prints a placement (no backend, no oracle) never needs: onnxruntime itself,
# and the check's modules behind runtime.report's check renderings (~25 ms of CPU together).
NOT_NEEDED_FOR_A_PLACEMENT = ("onnxruntime", "onnx_dml_lowering.runtime.check", "onnx_dml_lowering.runtime.oracle",
                              "onnx_dml_lowering.runtime.backends", "onnx_dml_lowering.runtime.region_engine")


@pytest.mark.parametrize("command", ["compile", "inspect"])
def test_compile_and_inspect_leave_onnxruntime_and_the_check_unimported(tmp_path, command):
    model = graph_model([h.make_node("NonZero", ["x"], ["nz"], name="nz")],
                        [("x", T.FLOAT, [3, 4])], [("nz", T.INT64, 2)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    result = subprocess.run([sys.executable, "-c", PROBE.format(names=set(NOT_NEEDED_FOR_A_PLACEMENT)), command,
                             str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0", result.stdout


EARLY_HOST_PROBE = """
import sys
from onnx_dml_lowering.runtime.directml import dml_host
seen = []
dml_host.start_early = lambda: seen.append(sorted(m for m in {names!r} if m in sys.modules))
from onnx_dml_lowering.compiler.cli import main
code = main(sys.argv[1:])
print(code, seen)
"""


def test_check_with_dml_starts_the_host_before_it_imports_numpy_onnx_and_onnxruntime(tmp_path):
    """The DirectML host's start-up (0.65-1 s) runs beside everything check does, its imports too
    (numpy, onnx, onnxruntime: 0.1-0.2 s): the host's client imports none of them before it spawns."""
    model = graph_model([h.make_node("NonZero", ["x"], ["nz"], name="nz")],
                        [("x", T.FLOAT, [3, 4])], [("nz", T.INT64, 2)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    env = {**os.environ, HOME_ENV: str(tmp_path / "absent")}     # the backend is UNAVAILABLE: no host runs
    result = subprocess.run([sys.executable, "-c", EARLY_HOST_PROBE.format(names=("numpy", "onnx", "onnxruntime")),
                             "check", str(path), "-q", "--backends", "cpu,dml"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0 [[]]", result.stdout


# What a run whose backends all run the model on an onnxruntime provider never needs: the partition
# and the lowering rules (computed and imported when first asked for: compiled.py,
# lowering/__init__.py), the DirectML operator tables they read, the oracle and its region engine
# (only a node the provider has no kernel for asks: oracle_on_demand.py), check's comparison and
# the saved-output files (~40 ms of imports and 50-70 ms of partition on SSDlite320's export).
NOT_NEEDED_FOR_A_PROVIDER_RUN = ("onnx_dml_lowering.compiler.partition", "onnx_dml_lowering.lowering.registry",
                                 "onnx_dml_lowering.lowering.nonzero", "onnx_dml_lowering.ir.operators",
                                 "onnx_dml_lowering.runtime.oracle", "onnx_dml_lowering.runtime.region_engine",
                                 "onnx_dml_lowering.runtime.compare", "onnx_dml_lowering.runtime.saved_outputs",
                                 "onnx.reference")


@pytest.mark.parametrize("options", [[], ["--provider-model", "modified"]])
def test_a_provider_only_run_leaves_the_lowering_and_the_oracle_unimported(tmp_path, options):
    model = graph_model([h.make_node("Relu", ["x"], ["r"], name="relu"),
                         h.make_node("NonZero", ["r"], ["nz"], name="nz")],
                        [("x", T.FLOAT, [3, 4])], [("nz", T.INT64, 2)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    result = subprocess.run([sys.executable, "-c", PROBE.format(names=set(NOT_NEEDED_FOR_A_PROVIDER_RUN)), "run",
                             str(path), "-q", "--backends", "ort-cpu", *options], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0", result.stdout


# What inspect without --ep never needs: the DML EP's placement, its registration tables and the DML
# EP's deviation table (0.4 MiB of the peak RSS of inspect on the tiny detector exports).
NOT_NEEDED_FOR_INSPECT = ("onnx_dml_lowering.compiler.ep.placement", "onnx_dml_lowering.compiler.ep.registry",
                          "onnx_dml_lowering.runtime.dml_deviations")


def test_inspect_without_ep_leaves_the_dml_ep_placement_unimported(tmp_path):
    model = graph_model([h.make_node("NonZero", ["x"], ["nz"], name="nz")],
                        [("x", T.FLOAT, [3, 4])], [("nz", T.INT64, 2)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    result = subprocess.run([sys.executable, "-c", PROBE.format(names=set(NOT_NEEDED_FOR_INSPECT)), "inspect",
                             str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0", result.stdout
