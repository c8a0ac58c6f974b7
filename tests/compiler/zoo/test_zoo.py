"""`dml-lower check MODEL_OR_DIR ...`: whole zoos, one process per model (local executor).

The zoo of zoo_models.py is checked with --jobs 1 and --jobs 2: the same summary, JSON and exit
code (times aside); statuses from onnx.reference against the golden file; placement counts from
compile_model; the JUnit report's counts from the per-model JSON reports. The real exported
models are checked as a directory with --jobs 2 --junit.
"""
from __future__ import annotations

import fcntl
import importlib.util
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from onnx_dml_lowering.compiler.cli import main
from tests.cli_runner import cli_exits as cli
from tests import paths
from tests.compiler.zoo.zoo_models import (BACKENDS, BROKEN, CRASH, check_junit, crash_env, expected_statuses, last_line,
                                       load_json, placement_counts, summary_rows, summary_without_times,
                                       without_times, write_zoo)

MODELS_DIR = paths.MODELS


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    return write_zoo(tmp_path_factory.mktemp("zoo"))


@pytest.fixture(scope="module")
def runs(zoo, tmp_path_factory):
    """The zoo checked with --jobs 1 and --jobs 2 (in-process main, so stdout is not a terminal)."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", crash_env(zoo["hook"]))
        for jobs in (1, 2):
            where = tmp_path_factory.mktemp(f"jobs{jobs}")
            argv = ["check", zoo["dir"], "--inputs", zoo["feeds"], "--oracle", zoo["golden"],
                    "--backends", ",".join(BACKENDS), "--jobs", jobs,
                    "--json", where / "zoo.json", "--junit", where / "zoo.xml"]
            with _Capture() as cap:
                code = main([str(a) for a in argv])
            out[jobs] = {"code": code, "out": cap.out, "err": cap.err,
                         "json": load_json(where / "zoo.json"), "xml": where / "zoo.xml"}
    return out


class _Capture:
    """stdout / stderr of an in-process main() in a module-scoped fixture (capsys is per test)."""

    def __enter__(self):
        import io
        self._saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        return self

    def __exit__(self, *exc):
        self.out, self.err = sys.stdout.getvalue(), sys.stderr.getvalue()
        sys.stdout, sys.stderr = self._saved
        return False


@pytest.mark.parametrize("jobs", [1, 2])
def test_zoo_statuses_counts_and_exit_code(runs, zoo, jobs):
    run = runs[jobs]
    want = expected_statuses(zoo)
    assert set(want.values()) == {"ok", "MISMATCH", "exit-2", "crashed"}
    # sorted discovery, recursive: the JSON lists the models in path order
    assert [m["model"] for m in run["json"]["models"]] == sorted(want)
    assert {m["model"]: m["status"] for m in run["json"]["models"]} == want
    assert run["code"] == 1       # a MISMATCH and a crash
    rows = summary_rows(run["out"])
    assert {model: row[0] for model, row in rows.items()} == want
    for model, status in want.items():
        lowered, onnx_ = rows[model][1:3]
        if status in ("ok", "MISMATCH"):
            assert (int(lowered), int(onnx_)) == placement_counts(model), model
        else:
            assert (lowered, onnx_) == ("-", "-")
    assert last_line(run["out"]) == "zoo: 6 models: 3 ok, 1 MISMATCH, 1 exit-2, 1 crashed"
    assert run["out"].splitlines()[-2:] == [f"wrote {run['xml'].parent / 'zoo.json'}", f"wrote {run['xml']}"]
    assert run["err"] == ""       # no progress bar when stdout / stderr is not a terminal


@pytest.mark.parametrize("jobs", [1, 2])
def test_zoo_json_entries(runs, zoo, jobs):
    for entry in runs[jobs]["json"]["models"]:
        assert set(entry) == {"model", "status", "exit_code", "report", "error", "seconds"}
        assert entry["seconds"] >= 0
        name = Path(entry["model"]).name
        if name == BROKEN:
            assert entry["exit_code"] == 2 and entry["report"] is None
            assert entry["error"].startswith(f"model file {entry['model']!r} is not an ONNX model")
        elif name == CRASH:
            assert entry["exit_code"] == -9 and entry["report"] is None
            assert entry["error"].startswith("killed by SIGKILL")
        else:
            assert entry["error"] is None
            assert entry["exit_code"] == (0 if entry["status"] == "ok" else 1)
            report = entry["report"]
            assert report["model"] == entry["model"] and report["ok"] == (entry["status"] == "ok")
            assert [b["backend"] for b in report["backends"]] == ["cpu", "ort-cpu"]
            assert list(report["unavailable_backends"]) == ["ort-dml"]


def test_zoo_jobs_1_and_2_agree(runs):
    assert runs[1]["code"] == runs[2]["code"]
    assert summary_without_times(runs[1]["out"]) == summary_without_times(runs[2]["out"])
    assert without_times(runs[1]["json"]) == without_times(runs[2]["json"])


@pytest.mark.parametrize("jobs", [1, 2])
def test_zoo_junit_counts_from_reports(runs, jobs):
    check_junit(runs[jobs]["xml"], runs[jobs]["json"], BACKENDS)


def test_zoo_failure_lines_are_the_check_report_lines(runs, zoo, capsys):
    """The summary's detail lines and the JUnit failure text are the lines `check` prints for that
    model alone."""
    model = zoo["paths"]["d_nonzero_relu.onnx"]
    code, out, err = cli(["check", model, "--inputs", zoo["feeds"], "--oracle", zoo["golden"],
                          "--backends", ",".join(BACKENDS)], capsys)
    assert code == 1, err
    alone = {line.strip() for line in out.splitlines()}
    mismatch_lines = [line for line in alone if ": MISMATCH (" in line]
    assert len(mismatch_lines) == 2     # cpu and ort-cpu
    failures = ET.parse(runs[2]["xml"]).getroot().iter("failure")
    texts = [line for f in failures for line in f.text.splitlines()]
    assert sorted(texts) == sorted(mismatch_lines)
    details = [line for line in runs[2]["out"].splitlines() if line.startswith(f"{model}: ")]
    assert sorted(d[len(f"{model}: "):] for d in details) == sorted(mismatch_lines)


def test_one_model_with_junit_is_a_zoo_of_one(zoo, tmp_path, capsys):
    model = zoo["paths"]["a_nonzero.onnx"]
    code, out, err = cli(["check", model, "--inputs", zoo["feeds"], "--junit", tmp_path / "one.xml",
                          "--json", tmp_path / "one.json"], capsys)
    assert code == 0, err
    document = load_json(tmp_path / "one.json")
    assert [m["status"] for m in document["models"]] == ["ok"]
    check_junit(tmp_path / "one.xml", document, ["cpu"])
    assert last_line(out) == "zoo: 1 model: 1 ok"


def test_one_model_alone_is_check_as_ever(zoo, tmp_path, capsys):
    """Without zoo options the single-model check prints its own report and writes its own JSON."""
    model = zoo["paths"]["a_nonzero.onnx"]
    code, out, err = cli(["check", model, "--inputs", zoo["feeds"], "--json", tmp_path / "r.json"], capsys)
    assert code == 0, err
    assert out.startswith(f"check {model} (feature level 5_1")
    assert "zoo:" not in out
    assert load_json(tmp_path / "r.json")["model"] == str(model)


@pytest.mark.parametrize("names,code,last", [
    ([BROKEN], 2, "zoo: 1 model: 1 exit-2"),
    (["a_nonzero.onnx", BROKEN], 2, "zoo: 2 models: 1 ok, 1 exit-2"),
    (["d_nonzero_relu.onnx", BROKEN], 1, "zoo: 2 models: 1 MISMATCH, 1 exit-2"),
])
def test_exit_code_failure_over_usage_over_ok(zoo, names, code, last, capsys):
    """1 when a model failed; else 2 when one ended in exit 2 (as checking it alone would); else 0."""
    argv = ["check", *[zoo["paths"][n] for n in names], "--inputs", zoo["feeds"], "--oracle", zoo["golden"],
            "--jobs", 2]
    got, out, err = cli(argv, capsys)
    assert got == code, out + err
    assert out.splitlines()[-1] == last


def test_options_are_forwarded(zoo, tmp_path, capsys):
    """Per-model options reach every subprocess: --iterations 3 shows in every report, a
    tolerance naming no output is each model's own usage error."""
    models = [zoo["paths"]["a_nonzero.onnx"], zoo["paths"]["c_nonzero_eye.onnx"]]
    code, out, err = cli(["check", *models, "--iterations", 3, "--seed", 5, "--val-range", "-1,1",
                          "--zero-fraction", "x:0.25",
                          "--json", tmp_path / "z.json"], capsys)
    assert code == 0, err
    assert [m["report"]["iterations"] for m in load_json(tmp_path / "z.json")["models"]] == [3, 3]
    code, out, err = cli(["check", *models, "--atol", "nope=1", "--json", tmp_path / "z.json"], capsys)
    assert code == 2
    errors = [m["error"] for m in load_json(tmp_path / "z.json")["models"]]
    assert errors == ["tolerance for 'nope': the model has no output of that name (outputs: y)"] * 2


def test_empty_directory_and_missing_path(tmp_path, capsys):
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "notes.txt").write_text("no models here")
    cases = [
        (["check", empty], f"directory {str(empty)!r} holds no .onnx model (searched recursively)"),
        (["check", empty, tmp_path / "nope.onnx"], None),
        (["check", tmp_path / "nope.onnx", "--jobs", 2], f"model {str(tmp_path / 'nope.onnx')!r} does not exist"),
    ]
    for argv, line in cases:
        code, out, err = cli(argv, capsys)
        assert code == 2 and out == "", argv
        assert len(err.splitlines()) == 1 and err.startswith("dml-lower: error: "), err
        if line:
            assert err == f"dml-lower: error: {line}\n"


USAGE_ERRORS = [
    (["--jobs", "0"], "dml-lower: error: --jobs 0: must be at least 1"),
    (["--ray-address", "127.0.0.1:6379"], "dml-lower: error: --ray-address applies to --executor ray"),
    (["--markdown", "r.md"], "dml-lower: error: --markdown writes one model's file, and this check is a zoo "
                             "(2 models): use --json / --junit, or check one model file alone"),
    (["--save-inputs", "f.npz"], "dml-lower: error: --save-inputs writes one model's file, and this check is a zoo "
                                 "(2 models): use --json / --junit, or check one model file alone"),
    (["--executor", "slurm"], "dml-lower: error: argument --executor: invalid choice: 'slurm' "
                              "(choose from 'local', 'ray') (see 'dml-lower check --help')"),
    (["--jobs", "two"], "dml-lower: error: argument --jobs: 'two' is not a whole number (ASCII digits, like 3) "
                        "(see 'dml-lower check --help')"),
    (["--junit", "/no-such-folder/z.xml"], "dml-lower: error: --junit '/no-such-folder/z.xml': cannot write there: "
                                           "folder '/no-such-folder' does not exist"),
    (["--json", "/no-such-folder/z.json"], "dml-lower: error: --json '/no-such-folder/z.json': cannot write there: "
                                           "folder '/no-such-folder' does not exist"),
    (["--no-such-option"], "dml-lower: error: unrecognized arguments: --no-such-option "
                           "(see 'dml-lower check --help')"),
]


@pytest.mark.parametrize("extra,line", USAGE_ERRORS, ids=[e[0][0] for e in USAGE_ERRORS])
def test_zoo_usage_errors_are_one_line(zoo, extra, line, capsys):
    models = [zoo["paths"]["a_nonzero.onnx"], zoo["paths"]["nested/b_nonzero_abs.onnx"]]
    code, out, err = cli(["check", *models, *extra], capsys)
    assert code == 2
    assert out == "" and err == line + "\n"


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="ray is installed here (make ray)")
def test_executor_ray_without_the_extra(zoo, capsys):
    code, out, err = cli(["check", zoo["paths"]["a_nonzero.onnx"], "--executor", "ray"], capsys)
    assert code == 2 and out == ""
    assert err == "dml-lower: error: --executor ray needs the ray extra: pip install 'onnx-dml-lowering[ray]'\n"


def test_progress_bar_on_a_terminal(zoo, tmp_path):
    """On a terminal (a pty) tqdm draws the bar on stderr; the summary still ends the output."""
    model = zoo["paths"]["a_nonzero.onnx"]
    master, slave = pty.openpty()
    # a terminal of 24 x 100 characters (a fresh pty is 0 x 0, where tqdm draws nothing)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "onnx_dml_lowering.compiler", "check", str(model),
                             "--inputs", str(zoo["feeds"]), "--jobs", "1"],
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            pytest.fail("no output from the zoo check on a pty within 120 s")
        try:
            data = os.read(master, 4096)
        except OSError:      # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=60) == 0
    text = b"".join(chunks).decode()
    assert "check:   0%|" in text and "0/1 [" in text
    assert "check: 100%|" in text and "1/1 [" in text
    assert text.rstrip().splitlines()[-1] == "zoo: 1 model: 1 ok"


@pytest.mark.skipif(not sorted(MODELS_DIR.glob("*.onnx")), reason="tests/models holds no exported model")
def test_real_exported_models_as_a_directory(tmp_path, capsys):
    """tests/models/*.onnx (the torch exports) as one directory, --jobs 2 --junit: every model
    passes on cpu and ort-cpu, counts as compile_model places them, JUnit from the reports."""
    models = tmp_path / "exported"
    models.mkdir()
    for path in sorted(MODELS_DIR.glob("*.onnx")):
        shutil.copy(path, models / path.name)
    backends = ["cpu", "ort-cpu"]
    code, out, err = cli(["check", models, "--jobs", 2, "--backends", ",".join(backends),
                          "--junit", tmp_path / "real.xml", "--json", tmp_path / "real.json"], capsys)
    document = load_json(tmp_path / "real.json")
    assert code == 0, out
    assert err == ""
    names = sorted(str(models / p.name) for p in MODELS_DIR.glob("*.onnx"))
    assert [m["model"] for m in document["models"]] == names
    assert all(m["status"] == "ok" for m in document["models"])
    rows = summary_rows(out)
    for name in names:
        assert rows[name][0] == "ok"
        assert (int(rows[name][1]), int(rows[name][2])) == placement_counts(name)
    check_junit(tmp_path / "real.xml", document, backends)
    suite = ET.parse(tmp_path / "real.xml").getroot().find("testsuite")
    assert int(suite.get("tests")) == len(names) * len(backends)


def test_dims_apply_to_the_models_that_have_them(tmp_path, capsys):
    """A zoo of text and detection models at non-default sizes: each --dim sizes the models with
    that dimension and is no error for the others (a single-model check still refuses it); a name
    no model has is one line on stderr and exit 2."""
    real = MODELS_DIR / "real"
    models = tmp_path / "mixed"
    models.mkdir()
    for name in ("gpt2.dynamo.onnx", "ssdlite320_mobilenet_v3.torchscript.onnx"):
        shutil.copy(real / name, models / name)
    dims = ["--dim", "batch=2", "--dim", "sequence=9", "--dim", "height=200", "--dim", "width=280"]
    code, out, err = cli(["check", models, "--jobs", 2, "--backends", "cpu", *dims, "--json", tmp_path / "z.json"],
                         capsys)
    assert code == 0 and err == "", out + err
    reports = {Path(m["model"]).name: m["report"] for m in load_json(tmp_path / "z.json")["models"]}
    assert reports["gpt2.dynamo.onnx"]["dims"] == {"batch": 2, "sequence": 9}
    assert reports["ssdlite320_mobilenet_v3.torchscript.onnx"]["dims"] == {"height": 200, "width": 280}
    outputs = reports["gpt2.dynamo.onnx"]["backends"][0]["outputs"]
    assert [o["expected_shape"][:2] for o in outputs] == [[2, 9]] and all(o["status"] == "match" for o in outputs)
    code, out, err = cli(["check", models, "--backends", "cpu", "--dim", "sequense=9", "--junit", tmp_path / "j.xml"],
                         capsys)
    assert code == 2 and err == "zoo: --dim sequense: no model checked has an input dimension of that name\n"
    assert "2 ok" in out
    code, _, err = cli(["check", models / "gpt2.dynamo.onnx", "--dim", "height=200"], capsys)
    assert code == 2 and "--dim height: no input dimension has that name" in err
    # with --inputs no feed is drawn at any --dim: refused in one line before any model runs, as
    # for one model (it was taken and ignored)
    import numpy as np
    np.savez(tmp_path / "f.npz", input_ids=np.ones((2, 4), np.int64), attention_mask=np.ones((2, 4), np.int64))
    code, out, err = cli(["check", models, "--backends", "cpu", "--inputs", tmp_path / "f.npz", "--dim", "batch=2",
                          "--junit", tmp_path / "k.xml"], capsys)
    assert (code, out) == (2, "") and not (tmp_path / "k.xml").exists()
    assert err == ("dml-lower: error: --dim shapes random feeds: it does not apply to --inputs (the file gives every "
                   "size and value)\n")


FORWARDED = [
    ["--backends", "cpu,ort-cpu", "--seed", "3", "--iterations", "2"],
    ["--val-range", "-1,1", "--val-range", "x:-5,-2", "--zero-fraction", "x:0.25", "--dim", "n=4", "--strict"],
    ["--atol", "1e-3", "--rtol", "y=0", "--oracle", "reference", "--memory-limit", "1GiB", "--feature-level", "3_0"],
    ["--outputs", "a", "b", "--inputs", "f.npz", "--load-outputs", "s.npz", "--no-fallback", "-v"],
    ["--provider-option", "device_type=CPU", "--ep-library", "X=/lib/x.so", "--feed-initializers",
     "--data-loader-script", "feeds.py:make"],
]


@pytest.mark.parametrize("options", FORWARDED, ids=range(len(FORWARDED)))
def test_forwarded_options_round_trip(options):
    """What each per-model process gets parses back to the values the zoo command was given."""
    from onnx_dml_lowering.compiler.cli import build_parser
    from onnx_dml_lowering.compiler.cli.check import FORWARDED
    from onnx_dml_lowering.compiler.cli.command import parsed_command
    from onnx_dml_lowering.compiler.cli.feeds import attach_signed_values as _attach_signed_values
    from onnx_dml_lowering.compiler.cli.groups import ModelArgs
    from onnx_dml_lowering.compiler.cli.zoo_options import forwarded_options
    parser = build_parser()
    zoo_args = parser.parse_args(_attach_signed_values(["check", "m1.onnx", "m2.onnx", "--jobs", "2", *options]))
    tokens = forwarded_options(parsed_command(zoo_args), FORWARDED)
    one_args = parser.parse_args(["check", *tokens, "--json", "t.json", "--", "m1.onnx"])
    zoo, one = parsed_command(zoo_args).values(), parsed_command(one_args).values()
    for kind in FORWARDED:
        if kind is ModelArgs:          # the paths are each process's own
            assert replace(one[kind], path="", paths=()) == replace(zoo[kind], path="", paths=())
        else:
            assert one[kind] == zoo[kind], kind.__name__
    assert one_args.model == ["m1.onnx"] and one_args.json == "t.json"


@pytest.mark.parametrize("option", ["--val-range", "--zero-fraction"])
def test_named_value_options_apply_to_the_models_that_have_the_input(option, tmp_path, capsys):
    """--val-range NAME: / --zero-fraction NAME: in a zoo are applied as --dim is: to the models with
    that input, no error for the others; a name no model has is one line on stderr and exit 2."""
    models = tmp_path / "mixed"
    models.mkdir()
    for name in ("nonzero.dynamo.onnx", "nonzero.torchscript.onnx"):     # inputs x and x0
        shutil.copy(MODELS_DIR / name, models / name)
    value = {"--val-range": "x0:5,6", "--zero-fraction": "x0:1"}[option]
    code, out, err = cli(["check", models, "--backends", "cpu", option, value, "--json", tmp_path / "z.json"], capsys)
    assert code == 0 and err == "", out + err
    feeds = {Path(m["model"]).name: m["report"]["feeds"]["inputs"] for m in load_json(tmp_path / "z.json")["models"]}
    x0, x = feeds["nonzero.torchscript.onnx"]["x0"], feeds["nonzero.dynamo.onnx"]["x"]
    if option == "--val-range":
        assert x0["min"] >= 5 and x0["max"] <= 6 and x0["zeros"] == 0
    else:
        assert x0["zeros"] == 9 and x0["min"] == x0["max"] == 0
    assert 0 < x["zeros"] < 9 and x["min"] < 0           # the default feeds: the option was not applied there
    code, out, err = cli(["check", models, "--backends", "cpu", option, value.replace("x0", "y"),
                          "--junit", tmp_path / "j.xml"], capsys)
    assert code == 2 and err == f"zoo: {option} y: no model checked has an input of that name\n"
    assert "2 ok" in out
    code, _, err = cli(["check", models / "nonzero.dynamo.onnx", option, value], capsys)
    assert code == 2 and f"{option} names input 'x0': the model has no input of that name" in err


@pytest.mark.parametrize("zoo_option", [["--junit", "z.xml"], ["--jobs", "2"], ["--executor", "local"]])
@pytest.mark.parametrize("one_model_option, what", [(["--markdown", "r.md"], "writes one model's file"),
                                                    (["--save-outputs", "o.npz"], "writes one model's file"),
                                                    (["--localize"], "works on one model's graph")])
def test_one_model_with_a_zoo_option_is_told_why(zoo, zoo_option, one_model_option, what, capsys, tmp_path,
                                                 monkeypatch):
    """One model file and a zoo option make a zoo: the line names the option, not "several models"
    (it said "with several models" to a user who gave one)."""
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(["check", zoo["paths"]["a_nonzero.onnx"], *zoo_option, *one_model_option], capsys)
    assert (code, out) == (2, "")
    option = one_model_option[0]
    assert err.startswith(f"dml-lower: error: {option} {what}, and this check is a zoo ({zoo_option[0]}): ")
    assert err.endswith(f"check one model file without {zoo_option[0]}\n") and err.count("\n") == 1
    assert not (tmp_path / zoo_option[-1]).exists()


def test_a_folder_zoo_leaves_out_hidden_folders_and_python_environments(zoo, tmp_path, capsys):
    """A folder holding a .venv and a torch environment made 706 models of installed packages a new
    user's zoo (silent for ten minutes): hidden folders and folders holding pyvenv.cfg are not
    searched, and the output says which; given by name, such a folder is checked."""
    folder = tmp_path / "work"
    for sub in ("mine", ".venv/lib", "torchenv/lib"):
        (folder / sub).mkdir(parents=True)
        shutil.copy(zoo["paths"]["a_nonzero.onnx"], folder / sub / "m.onnx")
    (folder / "torchenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    code, out, err = cli(["check", folder, "--inputs", zoo["feeds"], "--backends", "cpu"], capsys)
    assert (code, err) == (0, ""), out + err
    assert summary_rows(out).keys() == {str(folder / "mine" / "m.onnx")}
    assert out.splitlines()[-1] == (f"zoo: not searched: {folder / '.venv'}, {folder / 'torchenv'} (hidden folders "
                                    "and Python environments; give a model there by its path to check it)")
    code, out, _ = cli(["check", folder / "torchenv", "--inputs", zoo["feeds"], "--backends", "cpu"], capsys)
    assert code == 0 and summary_rows(out).keys() == {str(folder / "torchenv" / "lib" / "m.onnx")}


def test_a_left_out_folder_given_by_name_is_not_said_left_out(zoo, tmp_path, capsys):
    """`check w w/.venv` checks the .venv's model and names no folder as not searched; `check w`
    alone, whose only model is under .venv, says where it left one out and how to check it."""
    folder = tmp_path / "w"
    (folder / ".venv" / "lib").mkdir(parents=True)
    shutil.copy(zoo["paths"]["a_nonzero.onnx"], folder / ".venv" / "lib" / "m.onnx")
    code, out, err = cli(["check", folder, folder / ".venv", "--inputs", zoo["feeds"], "--backends", "cpu"], capsys)
    assert (code, err) == (0, ""), out + err
    assert summary_rows(out).keys() == {str(folder / ".venv" / "lib" / "m.onnx")} and "not searched" not in out
    code, out, err = cli(["check", folder], capsys)
    assert (code, out) == (2, "")
    assert err == (f"dml-lower: error: directory '{folder}' holds no .onnx model (searched recursively; left out: "
                   f"{folder / '.venv'}, hidden folders, Python environments and .onnx names that are no regular "
                   "file: give one by its path to check it)\n")


def test_a_folder_zoo_follows_linked_folders_once_and_names_what_is_no_model_file(zoo, tmp_path, capsys):
    """A FIFO, a dangling link and a folder named *.onnx were dropped in silence, and a linked folder
    not searched: the linked folder's models are checked (a link loop ends at a folder seen), and
    each *.onnx name that is no regular file is named with what it is."""
    folder, elsewhere = tmp_path / "z", tmp_path / "elsewhere"
    (folder / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(zoo["paths"]["a_nonzero.onnx"], folder / "m.onnx")
    shutil.copy(zoo["paths"]["a_nonzero.onnx"], elsewhere / "far.onnx")
    (folder / "linked").symlink_to(elsewhere)
    (folder / "sub" / "loop").symlink_to(folder)
    os.mkfifo(folder / "f.onnx")
    (folder / "dangling.onnx").symlink_to(tmp_path / "nowhere.onnx")
    (folder / "dir.onnx").mkdir()
    code, out, err = cli(["check", folder, "--inputs", zoo["feeds"], "--backends", "cpu"], capsys)
    assert (code, err) == (0, ""), out + err
    assert summary_rows(out).keys() == {str(folder / "m.onnx"), str(folder / "linked" / "far.onnx")}
    assert out.splitlines()[-1] == (f"zoo: not checked: {folder / 'dangling.onnx'} (a dangling symbolic link), "
                                    f"{folder / 'f.onnx'} (a FIFO): named .onnx but not regular files")


# -- folders and names the walk cannot read ---------------------------------------------------------

def _denied(monkeypatch, *denied: Path) -> None:
    """os.stat and os.scandir refuse `denied` with EACCES, as /proc/1/fdinfo does even to root."""
    import errno
    real_stat, real_scandir = os.stat, os.scandir
    blocked = {str(p) for p in denied}

    def check(path) -> None:
        text = os.fsdecode(path)
        if text in blocked or os.path.dirname(text) in blocked:
            raise PermissionError(errno.EACCES, "Permission denied", text)

    def stat(path, *args, **kwargs):
        if not isinstance(path, int):
            check(path)
        return real_stat(path, *args, **kwargs)

    def scandir(path="."):
        check(path)
        return real_scandir(path)
    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "scandir", scandir)


def test_what_the_walk_cannot_read_is_left_out_with_why(zoo, tmp_path, monkeypatch):
    """`check /proc/1` (or a zoo holding a link to it) was 'internal error: PermissionError' from
    probing fdinfo/pyvenv.cfg: a folder that cannot be listed or probed, and an *.onnx name that
    cannot be stat'ed, are left out and named with the errno; the rest is checked."""
    from onnx_dml_lowering.compiler.zoo.runner import found_models, left_out_lines
    folder = tmp_path / "z"
    for sub in ("ok", "locked", "unprobed"):
        (folder / sub).mkdir(parents=True)
        shutil.copy(zoo["paths"]["a_nonzero.onnx"], folder / sub / "m.onnx")
    _denied(monkeypatch, folder / "locked", folder / "unprobed" / "pyvenv.cfg", folder / "ok" / "m.onnx")
    shutil.copy(zoo["paths"]["a_nonzero.onnx"], folder / "top.onnx")
    models, skipped = found_models([str(folder)])
    assert models == [str(folder / "top.onnx")]
    assert sorted(skipped) == sorted(str(folder / p) for p in ("locked", "unprobed", "ok/m.onnx"))
    why = "(cannot be read: Permission denied (EACCES))"
    # in the walk's order: the folders of z first, then what is below them
    assert left_out_lines(skipped) == [f"zoo: not searched: {folder / 'locked'} {why}, {folder / 'unprobed'} {why}, "
                                       f"{folder / 'ok' / 'm.onnx'} {why}: this user cannot read them"]


def test_a_zoo_of_nothing_readable_is_one_line_naming_what_was_left_out(zoo, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "z"
    (folder / "locked").mkdir(parents=True)
    shutil.copy(zoo["paths"]["a_nonzero.onnx"], folder / "locked" / "m.onnx")
    _denied(monkeypatch, folder / "locked")
    code, out, err = cli(["check", folder], capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1 and "internal error" not in err, err
    assert f"{folder / 'locked'} (cannot be read: Permission denied (EACCES))" in err, err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode 000 folder: permissions are not enforced for "
                                              "root (the EACCES case root meets is tested by monkeypatching)")
def test_a_mode_000_folder_is_left_out_with_why(zoo, tmp_path, capsys):
    from onnx_dml_lowering.compiler.zoo.runner import found_models, left_out_lines
    folder = tmp_path / "z"
    (folder / "locked").mkdir(parents=True)
    shutil.copy(zoo["paths"]["a_nonzero.onnx"], folder / "locked" / "m.onnx")
    shutil.copy(zoo["paths"]["a_nonzero.onnx"], folder / "top.onnx")
    (folder / "locked").chmod(0)
    try:
        models, skipped = found_models([str(folder)])
        assert models == [str(folder / "top.onnx")]
        assert left_out_lines(skipped) == [f"zoo: not searched: {folder / 'locked'} (cannot be read: Permission "
                                           "denied (EACCES)): this user cannot read them"]
    finally:
        (folder / "locked").chmod(0o755)


def _proc_denies() -> bool:
    try:
        os.stat("/proc/1/fdinfo/pyvenv.cfg")
    except PermissionError:
        return True
    except OSError:
        return False
    return False


@pytest.mark.skipif(not _proc_denies(), reason="this system lets this user stat /proc/1/fdinfo's entries")
def test_proc_1_as_a_zoo_is_one_line(capsys):
    """The real case: /proc/1's fdinfo refuses even root (ptrace rules)."""
    code, out, err = cli(["check", "/proc/1"], capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1 and "internal error" not in err, err
    assert "/proc/1/fdinfo (cannot be read: Permission denied (EACCES))" in err, err


def test_a_file_named_twice_is_checked_once_and_the_other_names_are_said(tmp_path, capsys):
    """m.onnx, m.onnx again, a hard link and a symlink to it: one model checked, and a line names the
    other spellings (a hard link was checked twice, and the dropped paths were never said)."""
    from onnx_dml_lowering.compiler.zoo.runner import found_models, left_out_lines
    shutil.copyfile("compiler/examples/masked_select.onnx", tmp_path / "m.onnx")
    shutil.copyfile("compiler/examples/edge_cases.onnx", tmp_path / "e.onnx")
    os.link(tmp_path / "m.onnx", tmp_path / "hard.onnx")
    (tmp_path / "link.onnx").symlink_to("m.onnx")
    given = [str(tmp_path / n) for n in ("m.onnx", "m.onnx", "hard.onnx", "link.onnx", "e.onnx")]
    models, skipped = found_models(given)
    assert models == [given[0], given[4]]
    assert left_out_lines(skipped) == [f"zoo: checked once: {given[2]} (the same file as {given[0]}), "
                                       f"{given[3]} (the same file as {given[0]})"]
    code, out, err = cli(["check", *given, "--backends", "cpu"], capsys)
    assert code == 0 and "zoo: 2 models: 2 ok" in out and left_out_lines(skipped)[0] in out, out + err
    folder_models, folder_skipped = found_models([str(tmp_path)])      # found in one folder (sorted): the same
    assert folder_models == [str(tmp_path / "e.onnx"), str(tmp_path / "hard.onnx")]
    assert [(str(p), p.of) for p in folder_skipped] == [(str(tmp_path / n), str(tmp_path / "hard.onnx"))
                                                        for n in ("link.onnx", "m.onnx")]
