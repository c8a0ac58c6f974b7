"""Saved outputs read back (`check --load-outputs`): classified by the same rules as live (a saved
provider's known onnxruntime deviation is a DEVIATION, an output its backend left out UNSUPPORTED
with the saved reason), and a file short of an entry it says it holds is one line, exit 2: never
a MISMATCH when nothing mismatched."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.saved_outputs import CONTENTS_KEY, RESERVED, LoadedOutputs
from tests.builders import graph_model
from tests.cli_runner import cli
from tests.runtime.test_ort_deviations import column_of_pairs


def edge_model() -> onnx.ModelProto:
    """NonZero over a double (no kernel on onnxruntime's CPU EP), over a scalar (onnxruntime's known
    (1, nnz) reading), and a Relu (a plain match)."""
    nodes = [h.make_node("NonZero", ["x"], ["nz_double"], name="nonzero_double"),
             h.make_node("NonZero", ["s"], ["nz_scalar"], name="nonzero_scalar"),
             h.make_node("Relu", ["x"], ["r"], name="relu")]
    return graph_model(nodes, [("x", T.DOUBLE, [2, 3]), ("s", T.FLOAT, [])],
                       [("nz_double", T.INT64, [2, None]), ("nz_scalar", T.INT64, [0, None]), ("r", T.DOUBLE, [2, 3])])


MODELS = {"edge": (edge_model, ["--provider-model", "modified"]), "reading": (column_of_pairs, [])}


def _statuses(report_path, prefix="") -> "dict[str, dict[str, tuple[str, str]]]":
    report = json.loads(report_path.read_text())
    return {b["backend"][len(prefix):]: {o["output"]: (o["status"], o.get("detail", "")) for o in b["outputs"]}
            for b in report["backends"] if b["backend"].startswith(prefix)}


@pytest.fixture(params=sorted(MODELS))
def saved(request, tmp_path, capsys):
    """(model path, inputs, the live check's statuses by backend, its saved outputs file)."""
    make, options = MODELS[request.param]
    path = tmp_path / "m.onnx"
    onnx.save(make(), path)
    code, _, err = cli(["check", path, "--backends", "cpu,ort-cpu", *options, "--save-inputs", tmp_path / "in.npz",
                        "--save-outputs", tmp_path / "out.npz", "--json", tmp_path / "live.json", "-q"], capsys)
    assert code == 0, err
    return path, tmp_path / "in.npz", _statuses(tmp_path / "live.json"), tmp_path / "out.npz", options


def test_loaded_outputs_are_classified_as_live(saved, tmp_path, capsys):
    path, inputs, live, out, _ = saved
    assert "deviation" in {s for s, _ in live["ort-cpu"].values()}
    code, text, err = cli(["check", path, "--backends", "cpu", "--inputs", inputs, "--load-outputs", out,
                           "--json", tmp_path / "r.json", "-q"], capsys)
    loaded = _statuses(tmp_path / "r.json", "saved:")
    assert code == 0 and "MISMATCH" not in text, text + err
    assert loaded["ort-cpu"] == live["ort-cpu"] and loaded["cpu"] == live["cpu"]
    assert {s for s, _ in loaded["oracle"].values()} == {"match"}


def test_a_run_file_is_classified_as_the_live_check(saved, tmp_path, capsys):
    path, inputs, live, _, options = saved
    code, _, err = cli(["run", path, "--backends", "ort-cpu", *options, "--inputs", inputs,
                        "--save-outputs", tmp_path / "run.npz", "-q"], capsys)
    assert code == 0, err
    code, text, err = cli(["check", path, "--backends", "cpu", "--inputs", inputs, "--load-outputs",
                           tmp_path / "run.npz", "--json", tmp_path / "r.json", "-q"], capsys)
    assert code == 0 and "MISMATCH" not in text, text + err
    assert _statuses(tmp_path / "r.json", "saved:")["run-ort-cpu"] == live["ort-cpu"]


def test_an_entry_missing_from_a_saved_file_is_one_line(saved, tmp_path, capsys):
    """Each entry of the file (the oracle's, each backend's) deleted in turn: one line naming the
    file and the entry, exit 2; a backend whose only entry went is one the file no longer holds."""
    path, inputs, _, out, _ = saved
    entries = dict(np.load(out))
    for key in (k for k in entries if k not in RESERVED):
        np.savez(tmp_path / "cut.npz", **{k: v for k, v in entries.items() if k != key})
        code, text, err = cli(["check", path, "--backends", "cpu", "--inputs", inputs, "--load-outputs",
                               tmp_path / "cut.npz", "--json", tmp_path / "r.json", "-q"], capsys)
        backend, sep, _ = key.rpartition(":")
        if sep and not any(k.startswith(backend + ":") for k in entries if k != key):
            assert code == 0 and "MISMATCH" not in text and f"saved:{backend}" not in _statuses(tmp_path / "r.json")
            continue
        assert code == 2 and text == "" and len(err.splitlines()) == 1, (key, text, err)
        assert f"'{tmp_path / 'cut.npz'}' has no output '{key}'" in err and "damaged or edited" in err, err


def test_an_older_check_file_without_the_oracles_entry_is_one_line(tmp_path, capsys):
    """A check file without the record (saved before it was written): its BACKEND:OUTPUT entries are
    split at the model's outputs, the oracle's missing value is one line, a backend's is not compared."""
    path = tmp_path / "m.onnx"
    onnx.save(edge_model(), path)
    code, _, err = cli(["check", path, "--backends", "cpu,ort-cpu", "--provider-model", "modified", "--save-inputs",
                        tmp_path / "in.npz", "--save-outputs", tmp_path / "out.npz", "-q"], capsys)
    assert code == 0, err
    entries = {k: v for k, v in np.load(tmp_path / "out.npz").items() if k != CONTENTS_KEY}
    load = ["check", path, "--backends", "cpu", "--inputs", tmp_path / "in.npz", "--load-outputs", tmp_path / "old.npz",
            "--json", tmp_path / "r.json", "-q"]
    for cut in ("", "cpu:r"):
        np.savez(tmp_path / "old.npz", **{k: v for k, v in entries.items() if k != cut})
        code, text, err = cli(load, capsys)
        assert code == 0 and "MISMATCH" not in text, text + err     # the record is not needed to read it
        loaded = _statuses(tmp_path / "r.json", "saved:")
        assert (loaded["ort-cpu"]["nz_double"][0], loaded["ort-cpu"]["nz_scalar"][0]) == ("unsupported", "deviation")
        assert loaded["cpu"]["r"][0] == ("unsupported" if cut else "match")
        if cut:
            assert "holds no value of it" in loaded["cpu"]["r"][1]
    for cut in ("r", "nz_scalar"):
        np.savez(tmp_path / "old.npz", **{k: v for k, v in entries.items() if k != cut})
        code, text, err = cli(load, capsys)
        assert code == 2 and f"has no output '{cut}' (the oracle's)" in err, text + err


@pytest.mark.parametrize("record", ["not json", json.dumps({"outputs": "y"}), json.dumps([1]),
                                    json.dumps({"outputs": [1], "left_out": {}})])
def test_a_damaged_record_is_one_line(tmp_path, record):
    np.savez(tmp_path / "s.npz", y=np.zeros(2), **{CONTENTS_KEY: np.array(record), "__saved_by__": np.array("check")})
    with pytest.raises(DmlLowerError, match="entry is not the record --save-outputs writes: the file was damaged"):
        LoadedOutputs.load(str(tmp_path / "s.npz"))


@pytest.mark.parametrize("outputs", [["y:0", "z"], ["cpu:z", "y"], ["a:b:c", "c"]])
def test_backend_entries_split_at_the_recorded_outputs(tmp_path, outputs):
    """BACKEND:OUTPUT splits at the output the file records, whatever colons either name holds."""
    values = {name: np.full(2, i, np.float32) for i, name in enumerate(outputs)}
    entries = {**values, **{f"ort-cpu:{n}": v + 10 for n, v in values.items()},
               **{f"cpu:{n}": v for n, v in values.items() if n != outputs[0]}}     # cpu left outputs[0] out
    record = json.dumps({"outputs": outputs, "left_out": {"cpu": {outputs[0]: "why"}}})
    np.savez(tmp_path / "s.npz", **entries, **{CONTENTS_KEY: np.array(record), "__saved_by__": np.array("check")})
    loaded = LoadedOutputs.load(str(tmp_path / "s.npz"))
    assert sorted(loaded.by_backend) == ["saved:cpu", "saved:oracle", "saved:ort-cpu"]
    for name, value in values.items():
        assert np.array_equal(loaded.by_backend["saved:ort-cpu"][name], value + 10)
        assert np.array_equal(loaded.by_backend["saved:oracle"][name], value)
    held, left = loaded.results("saved:cpu", [*outputs, "extra"])
    assert left[outputs[0]] == "why" and "holds no value of it" in left["extra"] and len(left) == 2


def two_outputs() -> onnx.ModelProto:
    nodes = [h.make_node("Neg", ["x"], ["a"], name="neg"), h.make_node("Abs", ["x"], ["b"], name="abs"),
             h.make_node("Relu", ["x"], ["hidden"], name="relu"), h.make_node("Exp", ["hidden"], ["e"], name="exp")]
    return graph_model(nodes, [("x", T.FLOAT, [3])], [("a", T.FLOAT, [3]), ("b", T.FLOAT, [3]), ("e", T.FLOAT, [3])])


@pytest.fixture
def two(tmp_path, capsys):
    """(check argv up to the saved file's option, the entries of a check file saved with cpu and
    ort-cpu, and with --outputs hidden too)."""
    path = tmp_path / "m.onnx"
    onnx.save(two_outputs(), path)
    code, _, err = cli(["check", path, "--backends", "cpu,ort-cpu", "--outputs", "hidden", "--save-inputs",
                        tmp_path / "in.npz", "--save-outputs", tmp_path / "out.npz", "-q"], capsys)
    assert code == 0, err
    return ["check", path, "--inputs", tmp_path / "in.npz", "--backends", "cpu", "-q"], dict(np.load(tmp_path / "out.npz"))


def _edited(tmp_path, entries, drop=(), **extra) -> str:
    path = tmp_path / "edited.npz"
    np.savez(path, **{k: v for k, v in entries.items() if k not in drop}, **extra)
    return str(path)


@pytest.mark.parametrize("option", ["--oracle", "--load-outputs"])
def test_an_entry_for_no_value_of_the_model_is_one_line(option, two, tmp_path, capsys):
    """Another model's output, or a backend's value of one: one line naming the entry, never
    skipped. An intermediate value saved with --outputs is the model's (--outputs and --localize
    compare it): the file reads with or without --outputs; as --oracle, a check file's backend
    entries are its own business."""
    argv, entries = two
    whose = "oracle file" if option == "--oracle" else "outputs file"
    for more in (["--outputs", "hidden"], []):
        code, out, err = cli([*argv, option, _edited(tmp_path, entries), *more], capsys)
        assert code == 0 and "MISMATCH" not in out, out + err
    held = {k: v for k, v in entries.items() if k != CONTENTS_KEY and not k.endswith("hidden")}
    for key in ("zzz", "cpu:zzz", "cpu:x:y", "ort-cpu:nope"):
        code, out, err = cli([*argv, option, _edited(tmp_path, held, **{key: entries["a"]})], capsys)
        assert code == 2 and out == "" and len(err.splitlines()) == 1, (key, out, err)
        assert f"{whose} '{tmp_path / 'edited.npz'}' holds '" in err and "which is no value of the model" in err
        assert "(its outputs: a, b, e)" in err


@pytest.mark.parametrize("keys", [["x:y:z", "nope:zz"], ["zz"], ["a:b:c"]])
def test_a_file_of_another_models_outputs_compares_nothing_and_is_refused(keys, two, tmp_path, capsys):
    argv, entries = two
    path = _edited(tmp_path, {k: entries["a"] for k in keys})
    code, out, err = cli([*argv, "--load-outputs", path], capsys)
    assert code == 2 and out == "" and f"holds '{keys[0]}', which is no value of the model" in err, out + err


def test_an_empty_outputs_file_is_refused(two, tmp_path, capsys):
    argv, entries = two
    for kept in ({}, {k: v for k, v in entries.items() if k in RESERVED}):
        code, out, err = cli([*argv, "--load-outputs", _edited(tmp_path, kept)], capsys)
        assert code == 2 and out == "" and "holds no outputs, so nothing would be compared" in err, out + err


@pytest.mark.parametrize("option", ["--oracle", "--load-outputs"])
def test_a_value_held_and_recorded_left_out_is_one_line(option, two, tmp_path, capsys):
    argv, entries = two
    record = json.loads(str(entries[CONTENTS_KEY]))
    record["left_out"].setdefault("cpu", {})["b"] = "because"
    path = _edited(tmp_path, entries, (CONTENTS_KEY,), **{CONTENTS_KEY: np.array(json.dumps(record))})
    code, out, err = cli([*argv, option, path, "--outputs", "hidden"], capsys)
    assert code == 2 and out == "", out + err
    assert "holds 'cpu:b' (backend cpu's 'b'), which the file also says that backend left out" in err
    # recorded left out and not held: UNSUPPORTED with the saved reason, as before
    path = _edited(tmp_path, entries, (CONTENTS_KEY, "cpu:b"), **{CONTENTS_KEY: np.array(json.dumps(record))})
    code, out, err = cli([*argv, "--load-outputs", path, "--outputs", "hidden"], capsys)
    assert code == 0 and "[saved:cpu] b: UNSUPPORTED (float32 [3]) - because" in out, out + err
