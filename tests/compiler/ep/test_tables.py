"""The DML EP registration tables by onnxruntime version: which one `inspect --ep dml` models
(--ort-version; by default the installed DML EP's, read from make directml's setup.json), the one
line naming the tables for an unknown version, and the kernels the two tables differ in placed as
each table says. Needs no DirectML: the setup is a folder the test makes."""
import json
import re

import pytest

from onnx_dml_lowering.compiler.ep.placement import DML, predict_placement
from onnx_dml_lowering.compiler.ep.probes import PROBED_TYPES, Probe, constraint_types, probe_model
from onnx_dml_lowering.compiler.ep.registry import (NEWEST_ORT, TABLES, UnknownOrtVersion, default_version,
                                                    table_rows, table_version)
from onnx_dml_lowering.compiler.ep.table_diff import markdown
from onnx_dml_lowering.runtime.directml.home import DLLS, HOME_ENV
from tests.cli_runner import cli, cli_exits
from tests.paths import REPO

EXAMPLE = REPO / "compiler" / "examples" / "masked_select.onnx"
PAGE = REPO / "docs" / "directml-ep-on-linux.md"


def fake_setup(root, version):
    """A folder laid out as make directml leaves it (the dlls' bytes are not read here)."""
    (root / "bin").mkdir(parents=True)
    (root / "prefix").mkdir()
    for dll in DLLS:
        (root / "bin" / dll).write_bytes(b"")
    (root / "setup.json").write_text(json.dumps({"onnxruntime_directml": version}))
    return root


@pytest.mark.parametrize("given,held", [("1.24.4", "1.24.4"), ("1.27", "1.27.0"), ("1.27.0", "1.27.0"),
                                        (" 1.24.4 ", "1.24.4")])
def test_a_version_names_its_table(given, held):
    assert table_version(given) == held


@pytest.mark.parametrize("given", ["1.9.0", "1.24", "1.25.0", "latest", ""])
def test_an_unknown_version_is_one_line_naming_the_tables(given, tmp_path, capsys):
    with pytest.raises(UnknownOrtVersion) as exc:
        table_version(given)
    assert all(v in str(exc.value) for v in TABLES) and "\n" not in str(exc.value)
    code, out, err = cli_exits(["inspect", EXAMPLE, "--ep", "dml", "--ort-version", given], capsys)
    assert code == 2 and err.count("\n") == 1
    assert all(v in err for v in TABLES) if given else "an empty value names nothing" in err


def test_ort_version_needs_ep_dml(capsys):
    code, out, err = cli(["inspect", EXAMPLE, "--ort-version", "1.24.4"], capsys)
    assert code == 2 and "add --ep dml" in err and err.count("\n") == 1


def test_without_a_dml_ep_the_newest_table_is_modelled():
    # conftest points DML_LOWER_DIRECTML_HOME at no setup, and onnxruntime here has no DML EP
    assert default_version()[0] == NEWEST_ORT == max(TABLES, key=lambda v: tuple(map(int, v.split("."))))


def test_the_installed_dml_eps_table_is_the_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(HOME_ENV, str(fake_setup(tmp_path / "home", "1.24.4")))
    assert default_version() == ("1.24.4", "the installed DML EP's")
    out_json = tmp_path / "r.json"
    code, out, err = cli(["inspect", EXAMPLE, "--ep", "dml", "--json", out_json], capsys)
    assert code == 0, err
    report = json.loads(out_json.read_text())["ep_placement"]
    assert report["onnxruntime"] == "1.24.4" and "the installed DML EP's" in report["assumptions"]["registration_table"]
    assert "DML EP placement predicted (onnxruntime 1.24.4 registration table [the installed DML EP's];" in out
    code, out, err = cli(["inspect", EXAMPLE, "--ep", "dml", "--ort-version", "1.27", "--json", out_json], capsys)
    assert code == 0 and json.loads(out_json.read_text())["ep_placement"]["onnxruntime"] == "1.27.0"


def test_an_installed_version_without_a_table_models_the_newest_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(HOME_ENV, str(fake_setup(tmp_path / "home", "1.25.1")))
    version, why = default_version()
    assert version == NEWEST_ORT and "1.25.1" in why


def test_the_measured_table_holds_only_probed_types():
    rows, meta = table_rows("1.24.4")
    assert "measured" in meta["source"]
    for r in rows:
        if r["measured"]:
            for types in r["type_constraints"].values():
                assert types and set(types) <= set(PROBED_TYPES), r


def _sample(version, seed=20261128, count=16):
    """A seeded sample of (op, since, types, claimed) from that version's measured rows: each row's
    first types (claimed), and a type of one constraint its schema allows and the row does not."""
    import random
    from onnx_dml_lowering.compiler.ep.probes import valid_alone
    from onnx_dml_lowering.compiler.ep.measure_registrations import _opsets
    rows = [r for r in table_rows(version)[0] if r.get("measured", True) and r["domain"] == "ai.onnx"
            and not r.get("support_query") and r["type_constraints"] and "ALL" not in str(r["type_constraints"])]
    random.Random(seed).shuffle(rows)
    out = []
    for r in rows:
        allowed = constraint_types(r["op"], r["domain"], r["since_version"])
        base = {c: next((t for t in PROBED_TYPES if t in r["type_constraints"].get(c, ())), None) for c in allowed}
        if None in base.values():
            continue
        cases = [(base, True)]
        for c, types in allowed.items():
            refused = [t for t in types if t not in r["type_constraints"][c]]
            if refused:
                cases.append(({**base, c: refused[0]}, False))
                break
        for types, claimed in cases:
            probe = Probe("ai.onnx", r["op"], r["since_version"], tuple(sorted(types.items())))
            if valid_alone(probe, _opsets(probe)) in (None, "no CPU kernel"):
                out.append((probe, claimed))
        if len(out) >= count:
            return out
    return out


@pytest.mark.parametrize("version", sorted(TABLES))
def test_the_prediction_reads_the_table_of_its_version(version):
    from onnx_dml_lowering.compiler.ep.measure_registrations import _opsets
    sample = _sample(version)
    assert len(sample) >= 12
    for probe, claimed in sample:
        m = probe_model([("n", probe)], _opsets(probe))
        node = {n["node"]: n for n in predict_placement(m, None, (), version)["nodes"]}["n"]
        assert (node["provider"] == DML) == claimed, (probe, node)


@pytest.mark.directml
def test_a_sample_of_the_measured_table_is_what_the_real_ep_does(tmp_path):
    """The 1.24.4 table against the real EP once more: a sample of its kernels and of the types
    they refuse, placed side by side in one session per opset."""
    from onnx_dml_lowering.compiler.ep.measure_registrations import Measured, _groups, _run
    from onnx_dml_lowering.runtime.directml.ort_dml import shared_host
    sample = _sample("1.24.4")
    measured = Measured()
    for opsets, group in _groups([probe for probe, _ in sample]):
        _run(shared_host(), group, opsets, str(tmp_path), measured)
    assert {p: measured.claimed.get(p) for p, _ in sample} == dict(sample)


def test_the_docs_table_of_differences_is_the_data():
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("| operator | since-version | difference |")
    shown = [line for line in text[start:].splitlines() if line.startswith("|")]
    shown = shown[:next((i for i, line in enumerate(shown[2:], 2) if not re.match(r"^\| ", line)), len(shown))]
    assert shown == markdown("1.24.4", "1.27.0")


def test_placement_json_round_trips_the_version(tmp_path, capsys):
    out_json = tmp_path / "r.json"
    code, out, err = cli(["inspect", EXAMPLE, "--ep", "dml", "--ort-version", "1.24.4", "--json", out_json], capsys)
    assert code == 0, err
    report = json.loads(out_json.read_text())["ep_placement"]
    assert report["onnxruntime"] == "1.24.4"
    assert "measured on the real DML EP" in report["assumptions"]["registration_table"]
    assert "chosen by --ort-version" in report["assumptions"]["registration_table"]
    assert "onnxruntime 1.24.4 ships it" in report["assumptions"]["directml"]


