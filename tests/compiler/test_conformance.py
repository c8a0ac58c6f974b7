"""conformance export / run: onnx's loader reads the folder, a tampered output fails, export is
deterministic, and the manifest's deviations are the ones this onnxruntime shows."""
from __future__ import annotations

import filecmp
import json
import os

import onnx
import pytest
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests

from onnx_dml_lowering.compiler import conformance
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.conformance_cases import all_cases


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    directory = tmp_path_factory.mktemp("suite") / "dml"
    assert main(["conformance", "export", str(directory), "--seeds", "1"]) == 0
    return directory


def test_onnx_loader_reads_every_case(suite):
    cases = load_model_tests(data_dir=str(suite.parent), kind=suite.name)
    names = {c.name for c in cases}
    assert names == {c.name for c in all_cases(1)}
    for case in cases:
        assert os.path.isfile(os.path.join(case.model_dir, "model.onnx"))
        assert os.path.isfile(os.path.join(case.model_dir, "test_data_set_0", "output_0.pb"))


def test_grid_covers_types_ranks_empties_k_and_idioms(suite):
    names = {c.name for c in all_cases(1)}
    for t in ("float", "float16", "double", "int8", "int16", "int32", "int64", "uint8", "uint16",
              "uint32", "uint64", "bool"):
        assert {f"test_nonzero_{t}_rank{r}" for r in range(9)} <= names
        assert f"test_nonzero_{t}_empty_3x0" in names and f"test_eyelike_float_to_{t}" in names
    assert "test_eyelike_float_4x4_km1099511627776" in names
    manifest = json.loads((suite / "manifest.json").read_text())
    rules = {line.split(" by ")[1].split(" ")[0] for name, entry in manifest["cases"].items()
             if name.startswith("test_idiom") for line in entry["placement"]}
    assert rules == {"nonzero_transpose", "nonzero_columns", "eyelike_constant_of_shape", "eye_from_ranges",
                     "trilu_constant_fill", "constant_diagonal"}
    readme = (suite / "README.txt").read_text()
    assert "onnx_test_runner -e dml DIR" in readme and '-C "session.disable_cpu_ep_fallback|1"' in readme


def test_manifest_lists_what_this_onnxruntime_does(suite):
    cpu = json.loads((suite / "manifest.json").read_text())["providers"]["CPUExecutionProvider"]["cases"]
    scalar = cpu["test_nonzero_float_rank0"]
    assert scalar["status"] == "deviation" and "shape [1, 0], ONNX says [0, 0]" in scalar["detail"]
    for t in ("int8", "int16", "uint16", "uint32", "uint64", "double"):
        assert cpu[f"test_nonzero_{t}_rank2"]["status"] == "unsupported"
    for t in ("float", "int32", "int64", "uint8", "bool"):
        assert f"test_nonzero_{t}_rank2" not in cpu
    assert cpu["test_eyelike_float_to_uint8"]["status"] == "unsupported"
    assert cpu["test_eyelike_float_to_bool"]["status"] == "unsupported"
    assert "test_eyelike_float_to_int64" not in cpu


def test_run_counts_and_exit_zero(suite, capsys):
    assert main(["conformance", "run", str(suite), "--backends", "cpu,ort-cpu"]) == 0
    out = capsys.readouterr().out
    total = len(all_cases(1))
    assert f"[cpu] {total} pass, 0 deviation, 0 unsupported, 0 fail" in out
    line = next(l for l in out.splitlines() if l.startswith("[ort-cpu]"))
    assert "0 fail" in line and " 0 deviation" not in line and " 0 unsupported" not in line
    assert "DEVIATION test_nonzero_float_rank0" in out
    assert "UNSUPPORTED test_nonzero_double_rank2: no kernel for NonZero(13)" in out


def test_tampered_output_is_a_failure(suite, tmp_path, capsys):
    import shutil
    copy = tmp_path / "suite"
    shutil.copytree(suite, copy)
    path = copy / "test_eyelike_float_4x4_k1" / "test_data_set_0" / "output_0.pb"
    tensor = onnx.load_tensor(str(path))
    array = numpy_helper.to_array(tensor).copy()
    array[0, 0] = 7.0
    path.write_bytes(numpy_helper.from_array(array, tensor.name).SerializeToString())
    assert main(["conformance", "run", str(copy), "--backends", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "1 fail" in out
    assert "FAIL test_eyelike_float_4x4_k1: test_data_set_0: output y: 1 of 16 values differ; first at [0, 0]" in out


def test_export_is_deterministic(suite, tmp_path):
    again = tmp_path / "again"
    conformance.export(str(again), seeds=1)
    compare = filecmp.dircmp(suite, again)

    def same(c):
        assert not c.left_only and not c.right_only and not c.diff_files and not c.funny_files, c.report()
        for sub in c.subdirs.values():
            same(sub)
    same(compare)
    assert filecmp.cmp(suite / "manifest.json", again / "manifest.json", shallow=False)


def test_run_errors_are_one_line(tmp_path, capsys):
    assert main(["conformance", "run", str(tmp_path / "none")]) == 2
    assert main(["conformance", "run", str(tmp_path), "--backends", "cpu"]) == 2
    assert main(["conformance", "export", str(tmp_path / "x"), "--seeds", "0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"dml-lower: error: conformance directory '{tmp_path / 'none'}' does not exist",
                   f"dml-lower: error: conformance directory '{tmp_path}' holds no case (DIR/<case>/model.onnx)",
                   "dml-lower: error: --seeds must be at least 1, got 0"]


def test_unknown_backend_is_one_line(suite, capsys):
    assert main(["conformance", "run", str(suite), "--backends", "gpu"]) == 2
    assert "unknown conformance backend 'gpu'" in capsys.readouterr().err
