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
from onnx_dml_lowering.compiler.conformance.cases import all_cases
from tests.runtime.test_session_settings import spy  # noqa: F401  (the fixture)


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
                     "trilu_constant_fill", "constant_diagonal", "range_comparison_mask"}
    readme = (suite / "README.txt").read_text()
    assert "onnx_test_runner -e dml DIR" in readme and '-C "session.disable_cpu_ep_fallback|1"' in readme


def test_suite_holds_trilu_masks_control_flow_and_high_words(suite):
    cases = all_cases(1)
    names = {c.name for c in cases}
    assert len(cases) >= 300
    for t in ("float", "float16", "double", "int8", "int16", "int32", "int64", "uint8", "uint16",
              "uint32", "uint64", "bool"):
        assert {f"test_trilu_{t}_{side}_{k}" for side in ("upper", "lower") for k in ("k0", "k1", "km2")} <= names
    for t in ("int64", "uint64", "double"):
        assert {f"test_nonzero_{t}_highword_{s}" for s in ("8", "2x4", "2x2x2")} <= names
    manifest = json.loads((suite / "manifest.json").read_text())["cases"]
    masks = [n for n in names if n.startswith("test_idiom_mask_")]
    assert len(masks) >= 10
    for name in masks:         # every mask is one range_comparison_mask, nothing left on onnxruntime
        (line,) = manifest[name]["placement"]
        assert "lowered by range_comparison_mask" in line, line
    for name in (n for n in names if n.startswith("test_trilu_")):
        assert manifest[name]["placement"] == ["trilu: lowered by trilu -> DIAGONAL_MATRIX1"], name
    for name in ("test_control_if_nonzero", "test_control_if_eyelike", "test_control_loop_nonzero",
                 "test_control_loop_eyelike"):           # the bodies' NonZero / EyeLike are lowered
        lines = manifest[name]["placement"]
        assert lines and all("_branch/" in l or "/body/" in l for l in lines), lines
        assert all(": lowered by " in l for l in lines), lines


def test_high_word_values_are_non_zero_only_above_32_bits():
    cases = {c.name: c for c in all_cases(1)}
    for t, dtype in (("int64", "int64"), ("uint64", "uint64")):
        x = cases[f"test_nonzero_{t}_highword_8"].data_sets[0]["x"]
        assert x.dtype == dtype and any(v != 0 and (int(v) & 0xFFFFFFFF) == 0 for v in x)
    x = cases["test_nonzero_double_highword_8"].data_sets[0]["x"]
    bits = x.view("uint64")
    assert any(v != 0 and (int(b) & 0xFFFFFFFF) == 0 for v, b in zip(x, bits))     # 2.0, -1.0
    assert any(v == 0 and b != 0 for v, b in zip(x, bits)) and any(v != v for v in x)   # -0.0, NaN


def test_filter_runs_the_matching_cases_only(suite, capsys):
    import fnmatch
    for pattern in ("test_nonzero_int64*", "test_control_*", "test_idiom_mask_*"):
        want = sorted(n for n in os.listdir(suite) if fnmatch.fnmatchcase(n, pattern)
                      and os.path.isfile(suite / n / "model.onnx"))
        assert want
        results = conformance.run(str(suite), ["cpu", "ort"], pattern=pattern)
        for backend in ("cpu", "ort"):
            assert sorted(n for n, _ in results[backend]["pass"]) == want
            assert sum(len(v) for v in results[backend].values()) == len(want)
    assert main(["conformance", "run", str(suite), "--filter", "test_control_*", "--backends", "cpu,ort-cpu"]) == 0
    out = capsys.readouterr().out
    assert "[cpu] 4 pass, 0 partial, 0 deviation, 0 unsupported, 0 fail" in out
    assert main(["conformance", "run", str(suite), "--filter", "test_nothing*"]) == 2
    assert capsys.readouterr().err == (f"dml-lower: error: --filter 'test_nothing*' matches no case of "
                                       f"conformance directory '{suite}'\n")


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
    assert f"[cpu] {total} pass, 0 partial, 0 deviation, 0 unsupported, 0 fail" in out
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
    (tmp_path / "m.onnx").write_bytes(b"")
    assert main(["conformance", "run", str(tmp_path / "m.onnx")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"dml-lower: error: conformance directory '{tmp_path / 'none'}' does not exist",
                   f"dml-lower: error: conformance directory '{tmp_path}' holds no case (DIR/<case>/model.onnx)",
                   "dml-lower: error: --seeds must be at least 1, got 0",
                   f"dml-lower: error: conformance directory '{tmp_path / 'm.onnx'}' is not a folder (a file, device, "
                   "FIFO or socket): give the folder conformance export wrote"]


def test_a_folder_or_case_model_behind_a_link_that_leads_nowhere_is_said_not_skipped(tmp_path, capsys):
    (tmp_path / "loop_a").symlink_to(tmp_path / "loop_b")
    (tmp_path / "loop_b").symlink_to(tmp_path / "loop_a")
    assert main(["conformance", "run", str(tmp_path / "loop_a")]) == 2
    suite = tmp_path / "suite"
    (suite / "case").mkdir(parents=True)
    (suite / "case" / "model.onnx").symlink_to(suite / "case" / "model.onnx")      # a loop of its own
    assert main(["conformance", "run", str(suite), "--backends", "cpu"]) == 2
    (suite / "case" / "model.onnx").unlink()
    (suite / "case" / "model.onnx").symlink_to(suite / "gone.onnx")                # dangling
    assert main(["conformance", "run", str(suite), "--backends", "cpu"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"dml-lower: error: conformance directory '{tmp_path / 'loop_a'}' cannot be read: Too many levels of "
        "symbolic links",
        f"dml-lower: error: model file '{suite / 'case' / 'model.onnx'}' cannot be read: Too many levels of "
        "symbolic links",
        f"dml-lower: error: model file '{suite / 'case' / 'model.onnx'}' does not exist"]


def test_export_refuses_a_dash_and_makes_no_folder_named_dash(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["conformance", "export", "-"]) == 2
    assert capsys.readouterr().err == ("dml-lower: error: conformance directory '-': cannot write there: '-' stands for "
                                       "no stream here (the suite is a folder of files): for a folder named '-' give "
                                       "its full path\n")
    assert os.listdir(tmp_path) == []


def test_unknown_backend_is_one_line(suite, capsys):
    assert main(["conformance", "run", str(suite), "--backends", "gpu"]) == 2
    assert "unknown backend 'gpu'; choose from" in capsys.readouterr().err


def test_session_options_reach_every_conformance_session(suite, spy, capsys):  # noqa: F811  (the fixture)
    import onnxruntime as ort

    from tests.runtime.test_session_settings import settings_of
    assert main(["conformance", "run", str(suite), "--filter", "test_control_*", "--backends", "cpu,ort,ort-cpu",
                 "--threads", "2", "--graph-optimization-level", "basic",
                 "--session-config", "session.intra_op.allow_spinning=1"]) == 0
    assert "[ort-cpu] 4 pass" in capsys.readouterr().out
    made = [(c, settings_of(o)) for c, o in spy if c != "other"]         # "other": the options' probe
    assert {c for c, _ in made} == {"regions", "ort operators", "original on ort-cpu"}
    assert {s for _, s in made} == {(ort.GraphOptimizationLevel.ORT_ENABLE_BASIC, 2, "1")}


def test_export_over_an_earlier_export_leaves_no_stale_case(suite, tmp_path):
    """An earlier export's case (and data set) this export does not write is gone, not run as part of it."""
    import shutil
    again = tmp_path / "again"
    shutil.copytree(suite, again)
    shutil.copytree(again / "test_eyelike_float_4x4_k1", again / "test_stale_case")
    shutil.copytree(again / "test_eyelike_float_4x4_k1" / "test_data_set_0",
                    again / "test_eyelike_float_4x4_k1" / "test_data_set_7")
    manifest = json.loads((again / "manifest.json").read_text())       # a case of that earlier export
    manifest["cases"]["test_stale_case"] = manifest["cases"]["test_eyelike_float_4x4_k1"]
    (again / "manifest.json").write_text(json.dumps(manifest))
    conformance.export(str(again), seeds=1)
    compare = filecmp.dircmp(suite, again)

    def same(c):
        assert not c.left_only and not c.right_only and not c.diff_files, c.report()
        for sub in c.subdirs.values():
            same(sub)
    same(compare)


@pytest.mark.parametrize("damage", ["no data set", "no output file"])
def test_a_case_without_its_data_is_one_line_not_a_pass(damage, suite, tmp_path, capsys):
    import shutil
    copy = tmp_path / "suite"
    shutil.copytree(suite, copy)
    case = copy / "test_eyelike_float_4x4_k1"
    if damage == "no data set":
        shutil.rmtree(case / "test_data_set_0")
    else:
        (case / "test_data_set_0" / "output_0.pb").unlink()
    capsys.readouterr()
    assert main(["conformance", "run", str(copy), "--backends", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "test_eyelike_float_4x4_k1" in err, err


def test_export_removes_only_what_an_earlier_export_of_its_own_wrote(suite, tmp_path, capsys):
    """A manifest.json beside a model zoo's <name>/model.onnx folders is not this tool's: refused in
    one line, every file left as it was (the folders were removed and the README replaced). Over
    its own export, a file the user added to a case folder, and a folder the manifest does not
    list, stay."""
    import shutil
    zoo = tmp_path / "zoo"
    (zoo / "resnet50").mkdir(parents=True)
    (zoo / "manifest.json").write_text('{"models": ["resnet50"]}')
    (zoo / "README.txt").write_text("MY README")
    shutil.copy(suite / "test_eyelike_float_4x4_k1" / "model.onnx", zoo / "resnet50" / "model.onnx")
    (zoo / "resnet50" / "weights.bin").write_text("weights")
    before = {p: p.read_bytes() for p in zoo.rglob("*") if p.is_file()}
    code = main(["conformance", "export", str(zoo), "--seeds", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "holds a manifest.json that is not a conformance manifest" in err
    assert {p: p.read_bytes() for p in zoo.rglob("*") if p.is_file()} == before
    again = tmp_path / "again"
    shutil.copytree(suite, again)
    (again / "test_eyelike_float_4x4_k1" / "notes.md").write_text("mine")
    (again / "mine").mkdir()
    (again / "mine" / "model.onnx").write_bytes(b"not listed")
    conformance.export(str(again), seeds=1)
    assert (again / "test_eyelike_float_4x4_k1" / "notes.md").read_text() == "mine"
    assert (again / "mine" / "model.onnx").read_bytes() == b"not listed"
    assert (again / "test_eyelike_float_4x4_k1" / "model.onnx").read_bytes() == \
        (suite / "test_eyelike_float_4x4_k1" / "model.onnx").read_bytes()


def test_export_over_its_own_export_removes_links_not_what_they_point_to(suite, tmp_path):
    """A link left at a name the export writes (a case's model.onnx, a data set, a case folder, the
    README) goes itself: left, the new file was written through it, outside the folder."""
    import shutil
    again = tmp_path / "again"
    shutil.copytree(suite, again)
    victims = {name: tmp_path / f"victim_{name}.txt" for name in ("model", "set", "case", "readme")}
    for victim in victims.values():
        victim.write_text("mine")
    (tmp_path / "victim_dir").mkdir()
    (again / "test_eyelike_float_4x4_k1" / "model.onnx").unlink()
    (again / "test_eyelike_float_4x4_k1" / "model.onnx").symlink_to(victims["model"])
    shutil.rmtree(again / "test_cast_float_to_bool" / "test_data_set_0")
    (again / "test_cast_float_to_bool" / "test_data_set_0").symlink_to(tmp_path / "victim_dir")
    shutil.rmtree(again / "test_cast_int32_to_bool")
    (again / "test_cast_int32_to_bool").symlink_to(tmp_path / "victim_dir")
    (again / "README.txt").unlink()
    (again / "README.txt").symlink_to(victims["readme"])
    conformance.export(str(again), seeds=1)
    assert all(v.read_text() == "mine" for v in victims.values()) and not any((tmp_path / "victim_dir").iterdir())
    compare = filecmp.dircmp(suite, again)
    assert not compare.left_only and not compare.right_only and not compare.diff_files, compare.report()


def test_an_export_from_before_dml_ep_table_is_still_its_own(suite, tmp_path):
    import shutil
    again = tmp_path / "again"
    shutil.copytree(suite, again)
    manifest = json.loads((again / "manifest.json").read_text())
    del manifest["dml_ep_table"]
    (again / "manifest.json").write_text(json.dumps(manifest))
    conformance.export(str(again), seeds=1)
    assert json.loads((again / "manifest.json").read_text())["dml_ep_table"]


def eye_sum_suite(folder, n: int):
    """A one-case suite: x float [n] -> ReduceSum(EyeLike(ConstantOfShape([n, n]))), whose run holds
    an n x n buffer behind n floats of test data; its expected output from onnx.reference."""
    import numpy as np
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Concat", ["s", "s"], ["ss"], name="cat", axis=0),
             helper.make_node("ConstantOfShape", ["ss"], ["c"], name="cos"),
             helper.make_node("EyeLike", ["c"], ["e"], name="eye"),
             helper.make_node("ReduceSum", ["e"], ["y"], name="sum", keepdims=0)]
    graph = helper.make_graph(nodes, "eye_sum", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    data = folder / "test_eye_sum" / "test_data_set_0"
    data.mkdir(parents=True)
    onnx.save(model, str(folder / "test_eye_sum" / "model.onnx"))
    x = np.zeros(n, np.float32)
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    (y,) = ReferenceEvaluator(model).run(None, {"x": x})
    (data / "output_0.pb").write_bytes(numpy_helper.from_array(np.asarray(y), "y").SerializeToString())
    return folder


def test_a_run_past_memory_limit_stops_the_suite_naming_the_case(tmp_path, capsys):
    """conformance run --memory-limit bounds each case's run as check's does: past it the command
    stops with that one line naming the case (exit 2), not a FAIL of the case; within it, a pass."""
    from onnx_dml_lowering.ir.errors import MemoryLimitExceeded
    from onnx_dml_lowering.runtime.backends import BackendOptions
    from onnx_dml_lowering.runtime.memory import format_size
    n = 100
    folder, small = eye_sum_suite(tmp_path / "suite", n), n * n * 4 - 1        # the eye's buffer by one byte
    assert main(["conformance", "run", str(folder), "--backends", "cpu", "--memory-limit", str(small)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("dml-lower: error: conformance case 'test_eye_sum' on "
                                                                 "cpu: node eye at input shapes ")
    assert f"over the memory limit of {format_size(small)}" in err and "raise --memory-limit" in err
    assert main(["conformance", "run", str(folder), "--backends", "cpu", "--memory-limit", "64MiB"]) == 0
    assert "[cpu] 1 pass" in capsys.readouterr().out
    with pytest.raises(MemoryLimitExceeded):
        conformance.run(str(folder), ["cpu"], BackendOptions(memory_limit=small))
