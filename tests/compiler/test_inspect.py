"""dml-lower inspect: the summary is computed against the model proto (bodies included), the
anchors agree with compile_model's placement at the level, and a bad file is one line (exit 2)."""
import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from tests.cli_runner import cli
from tests.builders import graph_model
from tests.compiler.test_control_flow import function_model, if_model, loop_model, nested_model, scan_model

REAL = Path(__file__).parent.parent / "models" / "real"
REAL_MODELS = ["gpt2.dynamo.onnx", "gpt2.torchscript.onnx", "llama.torchscript.onnx",
               "ssdlite320_mobilenet_v3.torchscript.onnx"]
ALWAYS = ("NonZero", "EyeLike", "Trilu")


def every_node(graph: onnx.GraphProto, path=""):
    """(path, node) over the graph and, through every graph-valued attribute, its bodies."""
    for node in graph.node:
        yield path + node.name, node
        for attr in node.attribute:
            subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for sub in subs:
                yield from every_node(sub, f"{path}{node.name}/{attr.name}/")


def inspect_json(model_path, tmp_path, capsys, level="5_1"):
    out_json = tmp_path / "inspect.json"
    code, out, err = cli(["inspect", model_path, "--json", out_json, "--feature-level", level], capsys)
    assert code == 0, err
    return json.loads(out_json.read_text()), out


def save(model, tmp_path: Path, name="model.onnx") -> Path:
    model = model[0] if isinstance(model, tuple) else model     # scan_model also gives its scan shape
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def assert_agrees(report: dict, model_path, level="5_1"):
    proto = onnx.load(str(model_path))
    counts = Counter(n.op_type for _, n in every_node(proto.graph))
    assert report["op_counts"] == dict(counts)
    assert report["opsets"] == {o.domain or "ai.onnx": o.version for o in proto.opset_import}
    assert [i["name"] for i in report["inputs"]] == [i.name for i in proto.graph.input]
    assert [o["name"] for o in report["outputs"]] == [o.name for o in proto.graph.output]
    for entry, vi in zip(report["inputs"] + report["outputs"], list(proto.graph.input) + list(proto.graph.output)):
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in vi.type.tensor_type.shape.dim]
        assert entry["shape"] == dims
    inline = sum(numpy_helper.to_array(i).nbytes for _, g in [("", proto.graph)] for i in g.initializer)
    assert report["initializers"]["inline"]["bytes"] >= inline   # bodies' initializers add to the main graph's
    placement = compile_model(model_path, feature_level=level).placement
    anchors = {a["node"]: a for a in report["anchors"]}
    for p in placement:
        a = anchors[p.onnx_nodes[0]]
        assert (a["rule"], a["lowers"], a["reason"]) == (p.rule, p.status == "lowered", p.reason)
        assert a["nodes"] == p.onnx_nodes
    covered = {name for p in placement for name in p.onnx_nodes}
    for path, node in every_node(compile_model(model_path).model.graph):
        if node.op_type in ALWAYS:
            assert path in anchors and anchors[path]["op_type"] == node.op_type
            if path not in covered:
                assert not anchors[path]["lowers"] and anchors[path]["reason"]
    for a in report["anchors"]:
        assert set(a) >= {"node", "op_type", "rule", "lowers", "reason"}
        assert a["lowers"] or a["reason"], a


@pytest.mark.parametrize("name", REAL_MODELS)
def test_real_models(name, tmp_path, capsys):
    report, out = inspect_json(REAL / name, tmp_path, capsys)
    assert {"inputs", "outputs", "opsets", "op_counts", "anchors"} <= set(report)
    assert_agrees(report, REAL / name)
    assert any(a["lowers"] for a in report["anchors"])
    total = sum(report["op_counts"].values())
    assert f"nodes: {total} (control-flow bodies included)" in out
    for entry in report["inputs"]:
        assert f"  {entry['name']}: {entry['type']} [{', '.join(str(d) for d in entry['shape'])}]" in out
    for a in report["anchors"]:
        assert f"  {a['node']} ({a['op_type']}): " in out


def trilu_model():
    nodes = [h.make_node("ConstantOfShape", ["shape"], ["ones"], name="fill",
                         value=numpy_helper.from_array(np.array([1.0], np.float32))),
             h.make_node("Trilu", ["ones"], ["y"], name="tri", upper=0),
             h.make_node("Trilu", ["x"], ["z"], name="tri_of_data")]
    return graph_model(nodes, [("shape", T.INT64, [2]), ("x", T.FLOAT, [3, 3])],
                       [("y", T.FLOAT, [None, None]), ("z", T.FLOAT, [3, 3])], opset=14)


@pytest.mark.parametrize("build", [if_model, loop_model, scan_model, nested_model, trilu_model])
@pytest.mark.parametrize("level", ["5_1", "2_0"])
def test_control_flow_bodies_and_levels(build, level, tmp_path, capsys):
    path = save(build(), tmp_path)
    report, out = inspect_json(path, tmp_path, capsys, level)
    assert_agrees(report, path, level)
    assert report["feature_level"] == level
    assert f"anchors at feature level {level}:" in out


def test_declined_anchor_says_why(tmp_path, capsys):
    path = save(if_model(), tmp_path)
    report, out = inspect_json(path, tmp_path, capsys, "2_0")   # NONZERO_COORDINATES needs 3_0
    nonzero = [a for a in report["anchors"] if a["op_type"] == "NonZero"]
    assert len(nonzero) == 2 and not any(a["lowers"] for a in nonzero)
    assert all("/" in a["node"] and a["reason"] for a in nonzero)
    assert all(f"{a['node']} (NonZero): stays on ONNX" in out for a in nonzero)


def test_external_initializers_are_counted_apart(tmp_path, capsys):
    weight = np.arange(64, dtype=np.float32).reshape(8, 8)
    model = graph_model([h.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
                         h.make_node("NonZero", ["y"], ["nz"], name="nz")],
                        [("x", T.FLOAT, [2, 8])], [("nz", T.INT64, [2, None])])
    model.graph.initializer.append(numpy_helper.from_array(weight, "w"))
    model.graph.initializer.append(numpy_helper.from_array(np.ones(3, np.int8), "small"))
    onnx.save(model, str(tmp_path / "ext.onnx"), save_as_external_data=True, size_threshold=100,
              location="ext.bin")
    report, out = inspect_json(tmp_path / "ext.onnx", tmp_path, capsys)
    assert report["initializers"] == {"inline": {"count": 1, "bytes": 3},
                                      "external": {"count": 1, "bytes": weight.nbytes}}
    assert f"1 external ({weight.nbytes} bytes)" in out


@pytest.mark.parametrize("content, expected", [
    (None, "does not exist"),
    (b"", "is empty"),
    (b"\xff\xfe not a protobuf at all \x00\x01", "is not an ONNX model"),
])
def test_bad_file_is_one_line(content, expected, tmp_path, capsys):
    path = tmp_path / "bad.onnx"
    if content is not None:
        path.write_bytes(content)
    code, out, err = cli(["inspect", path], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("dml-lower: error: ") and expected in err and "bad.onnx" in err


def test_directory_is_one_line(tmp_path, capsys):
    code, _, err = cli(["inspect", tmp_path], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is a directory" in err


@pytest.mark.parametrize("kind, op", [("nonzero", "NonZero"), ("eyelike", "EyeLike")])
def test_local_function_counts_apart_and_its_anchor_inlined(kind, op, tmp_path, capsys):
    proto = function_model(kind)
    path = save(proto, tmp_path)
    report, out = inspect_json(path, tmp_path, capsys)
    assert report["op_counts"] == dict(Counter(n.op_type if not n.domain else f"{n.domain}:{n.op_type}"
                                               for n in proto.graph.node))
    (function,) = proto.functions
    assert report["function_op_counts"] == {f"{function.domain}:{function.name}":
                                            dict(Counter(n.op_type for n in function.node))}
    placement = compile_model(path).placement
    (anchor,) = [a for a in report["anchors"] if a["op_type"] == op]
    (entry,) = [p for p in placement if p.onnx_nodes[0] == anchor["node"]]
    assert anchor["node"].startswith("call/") and anchor["lowers"] == (entry.status == "lowered")
    assert f"function {function.domain}:{function.name}: " in out


def readme_block(command: str) -> "tuple[list[str], str]":
    text = (Path(__file__).parent.parent.parent / "README.md").read_text()
    import re
    import shlex
    block = re.search(r"```\n\$ dml-lower (" + command + r" [^\n]+)\n(.*?)```", text, re.S)
    assert block, f"README shows dml-lower {command}"
    return shlex.split(block.group(1)), block.group(2)


def test_readme_inspect_output_is_real(capsys, monkeypatch):
    argv, shown = readme_block("inspect")
    monkeypatch.chdir(Path(__file__).parent.parent.parent)
    code, out, _ = cli(argv, capsys)
    assert code == 0 and out == shown
