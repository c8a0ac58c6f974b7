"""A small model zoo written by the zoo tests (test_zoo.py, test_ray_executor.py), and the checks both
make of a zoo run's summary, JSON and JUnit against the per-model reports.

Every model maps x: float32[3, 4] to y = the coordinates of x's non-zeros, so one golden file
(onnx.reference on the plain NonZero model) is the oracle for all of them: the models that compute
the same thing another way pass, the one that does not (Relu drops the negatives) is a MISMATCH
on every backend, deterministically. One file is not ONNX at all (exit 2), and one valid model is
killed by SIGKILL as its checking process starts (a sitecustomize on PYTHONPATH that only that
process's command line triggers): a real crash, as a segfault or the OOM killer would give.
"""
from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from tests.builders import graph_model
from tests.oracle import reference

BACKENDS = ["cpu", "ort-cpu", "ort-dml"]      # ort-dml: UNAVAILABLE off Windows, a skipped testcase
CRASH = "f_crash.onnx"
BROKEN = "e_broken.onnx"

_SITECUSTOMIZE = f'''
import os, signal, sys
if any(arg.endswith({CRASH!r}) for arg in sys.argv):
    os.kill(os.getpid(), signal.SIGKILL)
'''


def _nonzero_of(nodes, inits=None) -> onnx.ModelProto:
    return graph_model(nodes, [("x", T.FLOAT, [3, 4])], [("y", T.INT64, [2, None])], initializers=inits or {})


def zoo_models() -> "dict[str, onnx.ModelProto]":
    """Relative path -> model (a sub-directory too: discovery is recursive)."""
    nz = h.make_node("NonZero", ["v"], ["y"], name="nonzero")
    return {
        "a_nonzero.onnx": _nonzero_of([h.make_node("Identity", ["x"], ["v"], name="id"), nz]),
        "nested/b_nonzero_abs.onnx": _nonzero_of([h.make_node("Abs", ["x"], ["v"], name="abs"), nz]),
        "c_nonzero_eye.onnx": _nonzero_of([   # x + 0 * EyeLike(x): an EyeLike lowered too
            h.make_node("EyeLike", ["x"], ["eye"], name="eyelike"),
            h.make_node("Mul", ["eye", "zero"], ["zeros"], name="mul"),
            h.make_node("Add", ["x", "zeros"], ["v"], name="add"), nz], {"zero": np.float32(0)}),
        "d_nonzero_relu.onnx": _nonzero_of([h.make_node("Relu", ["x"], ["v"], name="relu"), nz]),
        CRASH: _nonzero_of([h.make_node("Identity", ["x"], ["v"], name="id"), nz]),
    }


def write_zoo(root: Path) -> dict:
    """The zoo under root/models, its feeds and golden outputs, and the crash hook under root/hook."""
    models = root / "models"
    paths = {}
    for rel, model in zoo_models().items():
        path = models / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(path))
        paths[rel] = path
    (models / BROKEN).write_bytes(b"this is not an ONNX protobuf")
    paths[BROKEN] = models / BROKEN
    rng = np.random.default_rng(7)
    x = rng.integers(-2, 3, size=(3, 4)).astype(np.float32)
    assert (x < 0).any() and (x == 0).any() and (x > 0).any()
    feeds, golden = root / "feeds.npz", root / "golden.npz"
    np.savez(feeds, x=x)
    np.savez(golden, y=reference(paths["a_nonzero.onnx"], {"x": x})["y"])
    hook = root / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    return {"dir": models, "paths": paths, "feeds": feeds, "golden": golden, "x": x, "hook": hook}


def crash_env(hook: Path) -> str:
    """PYTHONPATH with the crash hook first."""
    return os.pathsep.join([str(hook)] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def expected_statuses(zoo: dict) -> "dict[str, str]":
    """What each model's check must end in, from onnx.reference against the golden file."""
    golden = dict(np.load(zoo["golden"]))["y"]
    out = {}
    for rel, path in zoo["paths"].items():
        if rel == BROKEN:
            out[str(path)] = "exit-2"
        elif rel == CRASH:
            out[str(path)] = "crashed"
        else:
            got = reference(path, {"x": zoo["x"]})["y"]
            out[str(path)] = "ok" if got.shape == golden.shape and (got == golden).all() else "MISMATCH"
    return out


def placement_counts(path) -> "tuple[int, int]":
    statuses = [p.status for p in compile_model(str(path)).placement]
    return statuses.count("lowered"), statuses.count("onnx")


def without_times(value):
    """A JSON document with every 'seconds' dropped (the only thing that differs between runs)."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def summary_without_times(text: str) -> "list[str]":
    """The summary table with its seconds column cut off (rows end in a number of seconds), the
    `wrote F` lines of the report files left out (each run writes its own)."""
    return [re.sub(r"\s+\d+\.\d$", "", line).rstrip() for line in text.splitlines() if not line.startswith("wrote ")]


def last_line(text: str) -> str:
    """The last line printed before the `wrote F` lines of the files written."""
    return [line for line in text.splitlines() if not line.startswith("wrote ")][-1]


def summary_rows(text: str) -> "dict[str, list[str]]":
    """model -> [status, lowered, onnx, seconds] from the summary table."""
    lines = text.splitlines()
    assert lines[0].split() == ["model", "status", "lowered", "onnx", "seconds"]
    rows = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) == 5 and re.fullmatch(r"\d+\.\d", parts[4]):
            rows[parts[0]] = parts[1:]
    return rows


def check_junit(xml_path: Path, document: dict, backends: "list[str]") -> None:
    """The JUnit report against the per-model JSON reports: one testcase per model x backend,
    counts and messages computed from the reports."""
    root = ET.parse(xml_path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    want = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    cases = {}
    for case in suite.findall("testcase"):
        key = (case.get("classname"), case.get("name"))
        assert key not in cases, f"two testcases for {key}"
        cases[key] = case
    for entry in document["models"]:
        model, report = entry["model"], entry["report"]
        if report is None:
            for backend in backends:
                case = cases.pop((model, backend))
                error = case.find("error")
                assert error is not None and error.get("message") == entry["error"], model
                want["tests"] += 1
                want["errors"] += 1
            continue
        for backend in report["backends"]:
            case = cases.pop((model, backend["backend"]))
            want["tests"] += 1
            failure, error = case.find("failure"), case.find("error")
            if backend["status"] == "mismatch":
                want["failures"] += 1
                bad = [o for o in backend["outputs"] if o["status"] == "mismatch"]
                assert failure is not None and error is None
                assert failure.get("message") == f"{len(bad)} MISMATCH"
                for o in bad:
                    assert any(line.startswith(f"[{backend['backend']}] {o['output']}: MISMATCH")
                               and o["detail"] in line for line in failure.text.splitlines()), failure.text
            elif backend["status"] == "error":
                want["errors"] += 1
                assert error is not None and error.get("message") == backend["error"]
            else:
                assert failure is None and error is None
        for backend, reason in report["unavailable_backends"].items():
            case = cases.pop((model, backend))
            want["tests"] += 1
            want["skipped"] += 1
            skipped = case.find("skipped")
            assert skipped is not None and reason in skipped.get("message")
    assert not cases, f"testcases no report accounts for: {sorted(cases)}"
    for key, value in want.items():
        assert int(suite.get(key)) == value, (key, suite.get(key), value)
        assert int(root.get(key)) == value, (key, root.get(key), value)


def load_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())
