"""compile's text on large real models: a region's nodes and values, and the graph's inputs, are
shortened as check shortens them (ir.printer.name_list), and placements that read the same share
one line; compile --json keeps every name, and the counts the text gives are the JSON's."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from onnx_dml_lowering.compiler.partition import Placement
from onnx_dml_lowering.ir.printer import name_list
from onnx_dml_lowering.runtime.report import GROUP_FROM, format_placement
from tests.cli_runner import cli

REAL = Path(__file__).resolve().parents[1] / "models" / "real"
MODELS = ["ssdlite320_mobilenet_v3.torchscript.onnx", "mask_rcnn_mobilenet_v3.torchscript.onnx",
          "gpt2.dynamo.onnx"]


@pytest.mark.parametrize("names, most, expected", [
    ([], 8, ""),
    (["a", "b"], 8, "a, b"),
    ([f"n{i}" for i in range(8)], 8, "n0, n1, n2, n3, n4, n5, n6, n7"),
    ([f"n{i}" for i in range(9)], 8, "n0, n1, n2, ... n7, n8 (9 nodes)"),
    # five names under a limit of four: the shortened form would show all five behind a '...'
    ([f"n{i}" for i in range(5)], 4, "n0, n1, n2, n3, n4"),
    ([f"n{i}" for i in range(6)], 4, "n0, n1, n2, ... n4, n5 (6 nodes)"),
])
def test_name_list(names, most, expected) -> None:
    assert name_list(names, most) == expected


@pytest.mark.parametrize("model", MODELS)
def test_compile_text_of_a_large_model_is_short_and_agrees_with_json(model, tmp_path, capsys) -> None:
    out_json = tmp_path / "c.json"
    code, out, err = cli(["compile", REAL / model, "--json", out_json], capsys)
    assert code == 0, err
    data = json.loads(out_json.read_text())
    longest = max(len(name) for step in data["graph"]["steps"] for name in step.get("onnx_nodes", []) + step.get("inputs", []) + step.get("outputs", []))
    # a line holds at most a handful of names per list, whatever the model's size
    assert max(map(len, out.splitlines())) <= 3 * (10 * (longest + 2) + 40)
    regions = [s for s in data["graph"]["steps"] if s.get("kind", s.get("type")) in ("OnnxRegion", "onnx_region")
               or "onnx_nodes" in s]
    assert regions
    for step in regions:
        line = next(line for line in out.splitlines() if re.search(rf"\bonnx +{re.escape(step['name'])} \[", line))
        assert f"[{name_list(step['onnx_nodes'])}]" in line
        assert f"({name_list(step['inputs'], noun='values')}) -> ({name_list(step['outputs'], noun='values')})" in line
    # every placement is in the text, alone or in its group's line, and the groups' counts add up
    text = out.split("\nplacement (feature level", 1)[1].split("\n\nwrote ", 1)[0]
    counted = sum(int(n) for n in re.findall(r"\((\d+) placements\): ", text))
    alone = [line for line in text.splitlines()[1:] if line.strip() and " placements): " not in line]
    assert counted + len(alone) == len(data["placement"])


def _placement(i: int, rule: str = "nonzero", note: str = "sizes are bound at run time") -> Placement:
    return Placement([f"nz{i}", f"t{i}"], "lowered", rule, ["NONZERO_COORDINATES"], note=note)


@pytest.mark.parametrize("count", [1, GROUP_FROM - 1, GROUP_FROM, 5, 6, 40])
def test_repeated_placements_share_a_line(count) -> None:
    other = Placement(["eye"], "onnx", "eyelike", reason="declined: dtype")
    text = format_placement([_placement(i) for i in range(count)] + [other], "5_1").splitlines()
    tail = ": lowered by rule nonzero -> NONZERO_COORDINATES  [sizes are bound at run time]"
    assert text[-1] == "  eye: onnx by rule eyelike (declined: dtype)"
    if count < GROUP_FROM:
        assert text[1:-1] == [f"  nz{i}, t{i}{tail}" for i in range(count)]
    else:
        labels = [f"nz{i}, t{i}" for i in range(count)]
        shown = "; ".join(labels) if count <= 5 else "; ".join(labels[:3]) + "; ... " + "; ".join(labels[-2:])
        assert text[1:-1] == [f"  {shown} ({count} placements){tail}"]


def test_placements_that_differ_stay_apart() -> None:
    placements = [_placement(i, note=f"note {i % 2}") for i in range(6)]
    lines = format_placement(placements, "5_1").splitlines()[1:]
    assert len(lines) == 2 and all("(3 placements)" in line for line in lines)
