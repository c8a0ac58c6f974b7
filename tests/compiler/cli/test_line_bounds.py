"""No report line grows with the model: hundreds of outputs not compared, of unfed defaults, of
nodes a provider left to others or folded away each come out as one bounded line that says how
many there were (ir.printer.name_list), in text, -q and Markdown alike."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnx_dml_lowering.compiler.cli import main

COUNT = 120
# The longest line a report may print here: names of ~20 characters, four or five of them shown.
BOUND = 600


def wide_model() -> onnx.ModelProto:
    """COUNT inputs with initializer defaults, each through Relu then NonZero (lowered), and COUNT
    EyeLike nodes on constants (onnxruntime folds them away: a placement note each)."""
    nodes, inputs, inits, outputs = [], [], [], []
    for i in range(COUNT):
        name = f"input_number_{i:03d}"
        inputs.append(h.make_tensor_value_info(name, T.FLOAT, [2, 3]))
        inits.append(nh.from_array(np.full((2, 3), i % 3, np.float32), name))
        nodes.append(h.make_node("Relu", [name], [f"relu_output_{i:03d}"], name=f"relu_node_{i:03d}"))
        nodes.append(h.make_node("NonZero", [f"relu_output_{i:03d}"], [f"nonzero_output_{i:03d}"],
                                 name=f"nonzero_node_{i:03d}"))
        outputs.append(h.make_tensor_value_info(f"nonzero_output_{i:03d}", T.INT64, [2, None]))
        inits.append(nh.from_array(np.full((3, 4), 2.0, np.float32), f"constant_{i:03d}"))
        nodes.append(h.make_node("EyeLike", [f"constant_{i:03d}"], [f"folded_output_{i:03d}"],
                                 name=f"folded_eyelike_{i:03d}"))
        outputs.append(h.make_tensor_value_info(f"folded_output_{i:03d}", T.FLOAT, [3, 4]))
    graph = h.make_graph(nodes, "wide", inputs, outputs, inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    path = tmp_path_factory.mktemp("wide") / "wide.onnx"
    onnx.save(wide_model(), str(path))
    return str(path)


@pytest.mark.parametrize("view", ["text", "-q", "markdown"])
def test_every_line_is_bounded_whatever_the_model_width(wide, view, tmp_path, capsys):
    argv = ["check", wide, "--backends", "cpu,ort-cpu", "--outputs", "all"]
    md = tmp_path / "r.md"
    argv += {"text": [], "-q": ["-q"], "markdown": ["--markdown", str(md)]}[view]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    text = md.read_text() if view == "markdown" else out
    long = [line[:120] for line in text.splitlines() if len(line) > BOUND]
    assert not long, f"{len(long)} lines over {BOUND} characters, e.g. {long[0]!r}"
    # the lines say how many names they left out: the Relu outputs --outputs all asks for
    assert f"({COUNT} outputs) not compared" in text
    if view == "text":
        assert f"({COUNT} inputs)" in text                        # the unfed defaults
        notes = [line for line in text.splitlines() if "removed by onnxruntime's constant folding" in line]
        assert len(notes) == 1 and f"({COUNT} nodes)" in notes[0]


LONG = 100_000


def long_named_model(op: str = "Relu") -> onnx.ModelProto:
    """NonZero (lowered) and another op, node and value names of LONG characters each."""
    node, value = "N" * LONG, "v" + "y" * LONG
    nodes = [h.make_node("NonZero", ["x"], [value], name=node),
             h.make_node(op, [value], ["z"], name="o" * LONG)]
    graph = h.make_graph(nodes, "long", [h.make_tensor_value_info("x", T.FLOAT, [3])],
                         [h.make_tensor_value_info("z", T.INT64, [1, None])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("command", [["check"], ["inspect"], ["compile"], ["run"], ["check", "-v"]])
def test_names_of_any_length_print_shortened_and_the_json_keeps_them_whole(command, tmp_path, capsys):
    path = tmp_path / "long.onnx"
    onnx.save(long_named_model(), path)
    code = main([*command, str(path), "--json", str(tmp_path / "out.json")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert max(len(line) for line in (out + err).splitlines()) < 2000 and "N" * 4097 not in out + err
    if command[0] in ("inspect", "compile"):     # they list every node: the name is shown, shortened
        assert re.search(r"N{200}\.\.\.\[99,7\d\d more characters\]\.\.\.", out), out[:300]
    if command[0] != "run":         # run's JSON holds the outputs alone
        assert "N" * LONG in (tmp_path / "out.json").read_text()


def test_an_error_naming_a_long_node_is_one_short_line(tmp_path, capsys):
    path = tmp_path / "long.onnx"
    onnx.save(long_named_model("NoSuchOp"), path)
    code = main(["check", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and not out
    (line,) = err.splitlines()
    assert len(line) < 1000 and "NoSuchOp" in line and "more characters]" in line
