"""conformance run finds every case of a suite (compiler/conformance/discovery.py): a case the
manifest lists that is gone, a folder holding a case's data or another .onnx but no model.onnx, an
entry that is a link leading nowhere, are each named in one line (exit 2), with or without
--filter, never passed over while the rest pass; a folder holding none of a case's content is no
case; a suite without a manifest is found by its folders."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.conformance import suite as suite_module
from onnx_dml_lowering.compiler.conformance.cases import all_cases
from tests.cli_runner import cli

CASES = 4           # the first cases of the grid: a suite of several folders, exported fast


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("discovery") / "suite"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(suite_module, "all_cases", lambda seeds: all_cases(seeds)[:CASES])
        suite_module.export(str(directory), seeds=1)
    return directory


@pytest.fixture
def suite(exported, tmp_path) -> Path:
    copy = tmp_path / "suite"
    shutil.copytree(exported, copy, symlinks=True)
    return copy


def names(suite: Path) -> "list[str]":
    """The suite's cases, as its manifest lists them."""
    return sorted(json.loads((suite / "manifest.json").read_text())["cases"])


def run(suite: Path, capsys, *more: str) -> "tuple[int, str, str]":
    return cli(["conformance", "run", str(suite), "--backends", "cpu", *more], capsys)


def refused(suite: Path, capsys, *more: str) -> str:
    code, out, err = run(suite, capsys, *more)
    assert (code, out) == (2, "") and err.count("\n") == 1 and err.startswith("dml-lower: error: "), out + err
    return err


def _remove_model(case: Path) -> None:
    (case / "model.onnx").unlink()


def _rename_model(case: Path) -> None:
    (case / "model.onnx").rename(case / "Model.onnx")


def _model_under_other_name(case: Path) -> None:
    (case / "model.onnx").rename(case / "model_v2.onnx")


def _remove_folder(case: Path) -> None:
    shutil.rmtree(case)


def _empty_folder(case: Path) -> None:
    shutil.rmtree(case)
    case.mkdir()


def _file_for_folder(case: Path) -> None:
    shutil.rmtree(case)
    case.write_text("not a case folder")


def _dangling_link(case: Path) -> None:
    shutil.rmtree(case)
    case.symlink_to(case.parent / "gone")


def _link_loop(case: Path) -> None:
    shutil.rmtree(case)
    case.symlink_to(case)


# (damage to one case folder, a phrase the line holds besides the case's name)
DAMAGE = {"model deleted, data kept": (_remove_model, "holds test_data_set_0 but no model.onnx"),
          "model renamed Model.onnx": (_rename_model, "holds 'Model.onnx' but no model.onnx"),
          "model under another .onnx name": (_model_under_other_name, "holds 'model_v2.onnx' but no model.onnx"),
          "folder deleted": (_remove_folder, "that manifest.json lists is missing from"),
          "folder emptied": (_empty_folder, "holds no model.onnx (manifest.json lists it)"),
          "a file in its place": (_file_for_folder, "is not a folder (manifest.json lists it)"),
          "a dangling link in its place": (_dangling_link, "is a symbolic link that leads nowhere"),
          "a link loop in its place": (_link_loop, "is a symbolic link that leads nowhere")}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_case_that_cannot_be_run_is_named_not_passed_over(damage, suite, capsys):
    case = names(suite)[1]
    apply, phrase = DAMAGE[damage]
    apply(suite / case)
    err = refused(suite, capsys)
    assert f"conformance case '{case}'" in err and phrase in err, err
    # a filter choosing it says the same, not that it matches no case; one choosing the others runs them
    assert refused(suite, capsys, "--filter", case) == err
    others = [n for n in names(suite) if n != case]
    code, out, err = run(suite, capsys, "--filter", others[-1])
    assert code == 0 and out.startswith("[cpu] 1 pass, "), out + err


def test_every_case_that_cannot_be_run_is_named_in_the_one_line(suite, capsys):
    cases = names(suite)
    shutil.rmtree(suite / cases[0])
    (suite / cases[2] / "model.onnx").unlink()
    (suite / cases[3] / "model.onnx").unlink()
    err = refused(suite, capsys)
    assert f"conformance case '{cases[0]}' that manifest.json lists is missing from '{suite}'" in err, err
    assert f"; 2 more cases cannot be run either: {cases[2]}, {cases[3]}\n" in err, err
    assert cases[1] not in err, err


def test_folders_holding_nothing_of_a_case_are_not_cases(suite, capsys):
    """notes/, .git/, a killed export's temporary folder and files beside the cases are not read."""
    (suite / "notes").mkdir()
    (suite / "notes" / "todo.txt").write_text("look at rank 2")
    (suite / ".git" / "objects").mkdir(parents=True)
    shutil.copytree(suite / names(suite)[0], suite / ".dml-lower-export-dead" / names(suite)[0])
    (suite / "results.csv").write_text("case,status\n")
    code, out, err = run(suite, capsys)
    assert code == 0 and out.startswith(f"[cpu] {len(names(suite))} pass, "), out + err


def names_of_folders(suite: Path) -> "list[str]":
    return sorted(p.name for p in suite.iterdir() if (p / "model.onnx").is_file())


def test_a_suite_without_a_manifest_is_found_by_its_folders(suite, capsys):
    os.unlink(suite / "manifest.json")
    cases = names_of_folders(suite)
    code, out, err = run(suite, capsys)
    assert code == 0 and out.startswith(f"[cpu] {len(cases)} pass, "), out + err
    (suite / cases[0] / "model.onnx").unlink()           # no manifest to list it: its data still says it is a case
    err = refused(suite, capsys)
    assert f"conformance case '{cases[0]}' in '{suite}' holds test_data_set_0 but no model.onnx" in err, err
    shutil.rmtree(suite / cases[0])                       # gone without a trace: the others are the suite
    code, out, err = run(suite, capsys)
    assert code == 0 and out.startswith(f"[cpu] {len(cases) - 1} pass, "), out + err


@pytest.mark.parametrize("text, why", [('{"models": ["resnet50"]}', "no feature_level, seeds, cases, providers"),
                                       ("[1, 2]", "no feature_level, seeds, cases, providers"),
                                       ('{"feature_level": "5_1", "seeds": 1, "cases": [], "providers": {}}',
                                        "no feature_level, seeds, cases, providers"),
                                       ('{"feature_level": "5_1", "seeds": 1, "cases": {"a/b": {}}, "providers": {}}',
                                        "case 'a/b' is not a folder name"),
                                       ('{"feature_level": "5_1", "seeds": 1, "cases": {"x": 1}, "providers": {}}',
                                        "a case or provider entry that is not an object")])
def test_a_manifest_conformance_export_did_not_write_is_refused(text, why, suite, capsys):
    """Its case list and deviations cannot be read: one line, never ignored nor an internal error."""
    (suite / "manifest.json").write_text(text)
    err = refused(suite, capsys)
    assert err == (f"dml-lower: error: conformance manifest '{suite / 'manifest.json'}' is not one conformance "
                   f"export wrote ({why}): its case list and deviations cannot be read; move it away to run the "
                   "folder's cases without it\n")


def test_damage_outside_the_filter_is_not_read(suite, capsys):
    cases = names(suite)
    shutil.rmtree(suite / cases[0])
    code, out, err = run(suite, capsys, "--filter", cases[1])
    assert code == 0 and out.startswith("[cpu] 1 pass, "), out + err
    assert main(["conformance", "run", str(suite), "--filter", "test_nothing*"]) == 2
