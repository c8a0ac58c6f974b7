"""Every DML EP prediction chooses its registration table one way (registry.choose_table): inspect
--ep dml, optimize --for dml and conformance export take --ort-version, model the installed DML EP's
table by default, and name the table and why in what they print and write; an unknown version is
one line naming the tables held. Needs no DirectML: the installed EP is a setup folder the test
makes (tests/compiler/ep/test_tables.py's fake_setup)."""
import json

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler.conformance.cases import all_cases
from onnx_dml_lowering.compiler.ep.placement import REMOVED, predict_placement
from onnx_dml_lowering.compiler.ep.registry import (TABLE_SOURCES, TABLES, choose_table, dml_kernels, schema,
                                                    table_rows, type_name)
from onnx_dml_lowering.compiler.optimize.dml import optimize_for_dml
from onnx_dml_lowering.runtime.directml.home import HOME_ENV
from tests.cli_runner import cli
from tests.compiler.ep.test_tables import fake_setup
from tests.compiler.optimize.test_dml import masks22_model

VERSIONS = sorted(TABLES)


def _takes(row: dict, constraint: str, type_: str) -> bool:
    types = (row["type_constraints"] or {}).get(constraint)
    return types is None or "ALL" in types or type_ in types


def table_difference() -> "tuple[str, int, int]":
    """(op, opset, element type) of a one-input node whose kernel lookup the two tables answer
    differently, found in the JSON tables: a type the node's schema allows that one version's
    kernel registers (or 'ALL') and the other's does not."""
    rows = {v: {(r["domain"], r["op"], r["since_version"]): r for r in table_rows(v)[0]} for v in VERSIONS}
    for key in sorted(set(rows[VERSIONS[0]]) & set(rows[VERSIONS[1]]), key=lambda k: (k[1], -k[2])):
        domain, op, since = key
        if domain != "ai.onnx" or not onnx.defs.has(op):
            continue
        try:
            sch = onnx.defs.get_schema(op, since, "")
        except onnx.defs.SchemaError:      # an operator onnx dropped before that opset
            continue
        if len(sch.inputs) != 1 or len(sch.outputs) != 1 or sch.since_version != since or sch.attributes and any(
                a.required for a in sch.attributes.values()):
            continue
        constraint = sch.inputs[0].type_str
        allowed = next((c.allowed_type_strs for c in sch.type_constraints if c.type_param_str == constraint), [])
        for text in allowed:
            elem = getattr(T, text.removeprefix("tensor(").removesuffix(")").upper(), None)
            if elem is None:
                continue
            takes = {v: _takes(rows[v][key], constraint, type_name(elem)) for v in VERSIONS}
            if len(set(takes.values())) == 2:
                return op, since, elem
    raise AssertionError("the two tables place every one-input node alike")


def differing_model() -> onnx.ModelProto:
    op, since, elem = table_difference()
    out = onnx.defs.get_schema(op, since, "").outputs[0]
    out_elem = T.INT64 if "int64" in out.type_str or out.type_str == "T1" else elem
    graph = h.make_graph([h.make_node(op, ["x"], ["y"], name="n")], "g",
                         [h.make_tensor_value_info("x", elem, ["N", 3])], [h.make_tensor_value_info("y", out_elem, None)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", since)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)     # the output's shape, as the checker wants


def test_the_tables_differ_on_a_node_and_the_prediction_follows_each():
    """The node the tables disagree on is placed with the reason its version's table gives."""
    model = differing_model()
    op, since, elem = table_difference()
    reasons = {}
    for version in VERSIONS:
        (node,) = predict_placement(model, None, ort_version=version)["nodes"]
        kernel = dml_kernels(op, "", version)[since]
        lacks = not _takes({"type_constraints": kernel.types}, schema(op, "", since).inputs[0][0], type_name(elem))
        assert (f"DML's {op}-{since} kernel: the kernel lacks {type_name(elem)}" in node["reason"]) == lacks, node
        reasons[version] = node["reason"]
    assert reasons[VERSIONS[0]] != reasons[VERSIONS[1]]


@pytest.mark.parametrize("version", VERSIONS)
def test_optimize_for_dml_models_the_table_asked_for(version, tmp_path, capsys, monkeypatch):
    onnx.save(masks22_model(), str(tmp_path / "m.onnx"))
    code, out, err = cli(["optimize", tmp_path / "m.onnx", "-o", tmp_path / "o.onnx", "--for", "dml",
                          "--ort-version", version], capsys)
    assert code == 0, err
    assert out.splitlines()[0] == (f"DML EP placement modelled: onnxruntime {version}'s DML EP registration "
                                   "table (chosen by --ort-version)")
    # each rewrite's before / after is that table's prediction of the model before and after it
    _, rewrites, _ = optimize_for_dml(masks22_model(), None, choose_table(version))
    final = {n["node"]: n["provider"] for n in predict_placement(onnx.load(str(tmp_path / "o.onnx")), None,
                                                                 ort_version=version)["nodes"]}
    for rewrite in rewrites:
        for node in rewrite.nodes:
            assert f"  {node}: {rewrite.before[node]} -> {', '.join(sorted(set(rewrite.after[node])))}" in out
    last = rewrites[-1]          # the last rewrite's after is the written model's prediction
    assert last.nodes and all(last.after[n] == [final[name] for _, name in last.created[n]] for n in last.nodes)


def test_optimize_defaults_to_the_installed_dml_eps_table(tmp_path, capsys, monkeypatch):
    for version in VERSIONS:
        monkeypatch.setenv(HOME_ENV, str(fake_setup(tmp_path / version, version)))
        onnx.save(differing_model(), str(tmp_path / "m.onnx"))
        code, out, err = cli(["optimize", tmp_path / "m.onnx", "-o", tmp_path / "o.onnx", "--for", "dml"], capsys)
        assert code == 0, err
        assert out.splitlines()[0] == (f"DML EP placement modelled: onnxruntime {version}'s DML EP registration "
                                       "table (the installed DML EP's)")


@pytest.mark.parametrize("argv", [["optimize", "{model}", "-o", "{out}/o.onnx", "--for", "dml", "--ort-version", "1.9"],
                                  ["conformance", "export", "{out}/suite", "--ort-version", "1.9"]])
def test_an_unknown_ort_version_is_one_line_naming_the_tables(argv, tmp_path, capsys):
    onnx.save(masks22_model(), str(tmp_path / "m.onnx"))
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "manifest.json").write_text("{}")     # an earlier export: left as it was
    code, out, err = cli([a.format(model=tmp_path / "m.onnx", out=tmp_path) for a in argv], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--ort-version 1.9" in err and all(v in err for v in TABLES)
    assert not (tmp_path / "o.onnx").exists() and (tmp_path / "suite" / "manifest.json").read_text() == "{}"


def test_ort_version_needs_for_dml(tmp_path, capsys):
    onnx.save(masks22_model(), str(tmp_path / "m.onnx"))
    code, out, err = cli(["optimize", tmp_path / "m.onnx", "-o", tmp_path / "o.onnx", "--ort-version", "1.24.4"],
                         capsys)
    assert code == 2 and "add --for dml" in err and err.count("\n") == 1


@pytest.fixture(scope="module")
def manifests(tmp_path_factory):
    """The suite exported once per table (one data set per case)."""
    from onnx_dml_lowering.compiler.cli import main
    out = {}
    for version in VERSIONS:
        directory = tmp_path_factory.mktemp("suite") / version
        assert main(["conformance", "export", str(directory), "--seeds", "1", "--ort-version", version]) == 0
        out[version] = json.loads((directory / "manifest.json").read_text())
        out[version]["_dir"] = str(directory)
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_the_manifest_names_its_table_and_predicts_with_it(manifests, version):
    manifest = manifests[version]
    assert manifest["dml_ep_table"] == {"onnxruntime": version, "chosen": "chosen by --ort-version",
                                        "source": TABLE_SOURCES[version]}
    assert manifest["providers"]["DmlExecutionProvider"]["onnxruntime"] == version
    for case in all_cases(1)[::17]:        # a spread of the cases: each node as that table places it
        want = {n["node"]: n["provider"] for n in predict_placement(case.model, None, ort_version=version)["nodes"]
                if n["provider"] != REMOVED}
        assert manifest["cases"][case.name]["dml_ep_placement"] == want, case.name


def test_the_two_manifests_differ_only_where_the_tables_do(manifests):
    """The suite's cases hold no node the tables place differently (computed above for every case
    by the predictions themselves): apart from the table named, the manifests are the same."""
    a, b = (json.loads(json.dumps(manifests[v])) for v in VERSIONS)
    for m in (a, b):
        del m["dml_ep_table"], m["_dir"]
        del m["providers"]["DmlExecutionProvider"]["onnxruntime"]
    assert a == b


def test_export_prints_the_table_it_modelled(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(HOME_ENV, str(fake_setup(tmp_path / "home", "1.24.4")))
    code, out, err = cli(["conformance", "export", tmp_path / "suite", "--seeds", "1"], capsys)
    assert code == 0, err
    assert "  DML EP predictions model onnxruntime 1.24.4's registration table (the installed DML EP's)" in out
    manifest = json.loads((tmp_path / "suite" / "manifest.json").read_text())
    assert manifest["dml_ep_table"]["onnxruntime"] == "1.24.4"


@pytest.mark.parametrize("version", VERSIONS)
def test_run_names_the_table_of_a_prediction_the_dml_ep_contradicts(manifests, version):
    """A DML EP that gives ONNX's answer where the manifest predicted a deviation: the case passes,
    and its PREDICTION note names the table the prediction came from."""
    from onnx_dml_lowering.compiler import conformance
    from tests.compiler.conformance.test_dml_ep import FakeDml
    manifest = manifests[version]
    name = "test_cast_float_to_bool"
    assert manifest["providers"]["DmlExecutionProvider"]["cases"][name]["status"] == "deviation"
    (_, model, sets, expected), = conformance.load(manifest["_dir"], name)[1]

    class OnnxAnswering(FakeDml):
        def run(self, model, data_sets):
            self.assignment = manifest["cases"][name]["dml_ep_placement"]
            return expected, "", [], ""

    outcome = conformance.judge(OnnxAnswering(), name, model, sets, expected, manifest["providers"],
                                manifest["cases"][name]["dml_ep_placement"])
    assert outcome.status == "pass"
    assert outcome.contradicts.startswith("the manifest predicted deviation (") and \
        outcome.contradicts.endswith(f") for onnxruntime {version}; the DML EP here: pass")
