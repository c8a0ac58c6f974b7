"""Names holding control characters (issue 27): they reach no terminal raw, split no report line,
end no Markdown row, break no JUnit file and no JSON. Each run is compared with the same model
under plain names, which is what every view must look like line for line."""
from __future__ import annotations

import json
import math
import os
import unicodedata
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir.display import display
from tests.builders import graph_model
from tests.cli_runner import cli

HOSTILE = {"esc": "n\x1b[2J\x1b]0;pwned\x07", "cr": "row\rfake", "lf": "a\nverdict: all outputs match",
           "nul": "nul\x00x", "pipe": "a|b\r\n|c", "bidi": "x\u202ey", "c1": "c1\x9b31m"}


def _visible(text: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") and c not in "\n\t" for c in text) \
        and not any(0x202A <= ord(c) <= 0x202E for c in text)


def _model(name: str) -> onnx.ModelProto:
    """x -> NonZero (node, input and output named `name`-ish) -> Identity -> y."""
    nodes = [h.make_node("NonZero", [f"x{name}"], [f"nz{name}"], name=f"node{name}"),
             h.make_node("Identity", [f"nz{name}"], [f"y{name}"], name=f"id{name}")]
    return graph_model(nodes, [(f"x{name}", T.FLOAT, [3, 4])], [(f"y{name}", T.INT64, [2, None])],
                       name=f"graph{name}")


def _strict_json(path) -> dict:
    def refuse(token):
        raise AssertionError(f"bare {token} in --json: not RFC 8259")
    return json.loads(open(path, encoding="utf-8").read(), parse_constant=refuse)


def _check(tmp_path, capsys, name: str, tag: str):
    path = tmp_path / f"{tag}.onnx"
    onnx.save(_model(name), path)
    code, out, err = cli(["check", path, "--backends", "cpu,ort", "--json", tmp_path / f"{tag}.json",
                          "--markdown", tmp_path / f"{tag}.md"], capsys)
    assert code == 0, out + err
    return out, (tmp_path / f"{tag}.md").read_text(encoding="utf-8"), _strict_json(tmp_path / f"{tag}.json")


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_check_views_show_hostile_names_escaped_line_for_line(tmp_path, capsys, kind):
    out, markdown, document = _check(tmp_path, capsys, HOSTILE[kind], "hostile")
    plain_out, plain_markdown, _ = _check(tmp_path, capsys, "", "plain")
    assert _visible(out) and _visible(markdown)
    # the same lines as under plain names: none split, none added, no row ended early
    assert len(out.splitlines()) == len(plain_out.splitlines())
    assert len(markdown.splitlines()) == len(plain_markdown.splitlines())
    for row, plain in zip(markdown.splitlines(), plain_markdown.splitlines()):
        assert row.replace("\\|", "").count("|") == plain.count("|"), row
    # the JSON keeps the names as they are (JSON escapes them itself)
    names = [n for p in document["placement"] for n in p["onnx_nodes"]]
    assert f"node{HOSTILE[kind]}" in names


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("command", [["compile"], ["inspect"], ["run", "--backends", "cpu,ort"]])
def test_compile_inspect_and_run_show_hostile_names_line_for_line(kind, command, tmp_path, capsys):
    outs = []
    for tag, name in (("hostile", HOSTILE[kind]), ("plain", "")):
        onnx.save(_model(name), tmp_path / f"{tag}.onnx")
        code, out, err = cli([command[0], tmp_path / f"{tag}.onnx", *command[1:]], capsys)
        assert code == 0, out + err
        outs.append(out)
    assert _visible(outs[0]) and len(outs[0].splitlines()) == len(outs[1].splitlines())


def test_an_error_naming_a_hostile_input_is_one_visible_line(tmp_path, capsys):
    name = HOSTILE["esc"] + HOSTILE["lf"]
    path = tmp_path / "m.onnx"
    onnx.save(_model(name), path)
    np.savez(tmp_path / "wrong.npz", other=np.ones((3, 4), np.float32))
    code, out, err = cli(["run", path, "--inputs", tmp_path / "wrong.npz"], capsys)
    assert code == 2 and err.count("\n") == 1 and _visible(err) and "\\x1b" in err, err


def test_json_encodes_non_finite_errors_as_strings(tmp_path, capsys):
    """A MISMATCH whose error is infinite (golden 0, got x / 0): strict JSON, "Infinity" as a string,
    and the zoo's reader takes it back as the float."""
    from onnx_dml_lowering.ir.display import json_float
    model = graph_model([h.make_node("Div", ["x", "z"], ["y"], name="div"),
                         h.make_node("NonZero", ["x"], ["nz"], name="nz")],
                        [("x", T.FLOAT, [4]), ("z", T.FLOAT, [4])], [("y", T.FLOAT, [4]), ("nz", T.INT64, [1, None])])
    onnx.save(model, tmp_path / "m.onnx")
    x = np.array([1, -1, 0, 2], np.float32)
    np.savez(tmp_path / "f.npz", x=x, z=np.zeros(4, np.float32))
    np.savez(tmp_path / "gold.npz", y=np.zeros(4, np.float32), nz=np.array(np.nonzero(x)))
    code, out, err = cli(["check", tmp_path / "m.onnx", "--inputs", tmp_path / "f.npz", "--oracle",
                          tmp_path / "gold.npz", "--json", tmp_path / "r.json"], capsys)
    assert code == 1, out + err
    y = next(o for o in _strict_json(tmp_path / "r.json")["backends"][0]["outputs"] if o["output"] == "y")
    assert y["status"] == "mismatch" and y["max_abs_error"] == "Infinity"
    assert json_float(y["max_abs_error"]) == math.inf


def test_run_json_previews_non_finite_values_in_the_same_encoding(tmp_path, capsys):
    model = graph_model([h.make_node("Div", ["x", "z"], ["y"], name="div")],
                        [("x", T.FLOAT, [4]), ("z", T.FLOAT, [4])], [("y", T.FLOAT, [4])])
    onnx.save(model, tmp_path / "m.onnx")
    x = np.array([1, -1, 0, 2], np.float32)
    np.savez(tmp_path / "f.npz", x=x, z=np.zeros(4, np.float32))
    code, out, err = cli(["run", tmp_path / "m.onnx", "--inputs", tmp_path / "f.npz", "--json", tmp_path / "r.json"],
                         capsys)
    assert code == 0, out + err
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = (x / np.zeros(4, np.float32)).tolist()
    preview = _strict_json(tmp_path / "r.json")["backends"][0]["outputs"]["y"]["preview"]
    from onnx_dml_lowering.ir.display import json_float
    got = [json_float(v) for v in preview]
    assert all(isinstance(v, str) for v in preview)
    assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, expected))


@pytest.mark.skipif(os.name == "nt", reason="control characters in file names")
def test_zoo_summary_and_junit_with_hostile_file_and_node_names(tmp_path, capsys):
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    hostile = zoo / f"m{HOSTILE['cr']}\x1b[1m.onnx"
    onnx.save(_model(HOSTILE["esc"]), hostile)
    onnx.save(_model("\x00\x01\x02"), zoo / "plain.onnx")
    code, out, err = cli(["check", zoo, "--junit", tmp_path / "z.xml", "--json", tmp_path / "z.json"], capsys)
    assert code == 0, out + err
    assert _visible(out) and _visible(err)
    assert out.splitlines()[-3:] == ["zoo: 2 models: 2 ok", f"wrote {tmp_path / 'z.json'}", f"wrote {tmp_path / 'z.xml'}"]
    tree = ET.parse(tmp_path / "z.xml")          # well-formed XML 1.0 whatever the names held
    cases = tree.getroot().iter("testcase")
    assert {c.get("classname") for c in cases} == {display(str(hostile)), str(zoo / "plain.onnx")}
    document = _strict_json(tmp_path / "z.json")
    assert not document.get("interrupted")
    assert all(not math.isnan(m["seconds"]) for m in document["models"])
