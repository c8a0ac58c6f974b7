"""check --localize: where a MISMATCH begins. A backend's values are saved with every value an
output (check --outputs all --save-outputs), changed from one chosen value on (as a wrong kernel
would change them), and compared again with --load-outputs: the node producing the first changed
value is where the difference starts, whatever node was chosen; with the intermediates not saved,
the node is only a candidate and the values not compared are named."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from tests.cli_runner import cli

CHAIN = [("relu", "Relu", ["x"], "a"), ("square", "Mul", ["a", "a"], "b"), ("add", "Add", ["b", "x"], "c"),
         ("neg", "Neg", ["c"], "y")]


@pytest.fixture
def chain(tmp_path):
    x = h.make_tensor_value_info("x", T.FLOAT, [4])
    nodes = [h.make_node(op, ins, [out], name=name) for name, op, ins, out in CHAIN]
    graph = h.make_graph(nodes, "chain", [x], [h.make_tensor_value_info("y", T.FLOAT, [4])])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(tmp_path / "chain.onnx"))
    np.savez(tmp_path / "in.npz", x=np.array([-1, 0.5, 2, 3], np.float32))
    return tmp_path / "chain.onnx", tmp_path / "in.npz"


def saved(tmp_path, model, feeds, capsys, every_value: bool, changed_from: int):
    """cpu's values saved, every value from CHAIN[changed_from] on moved by 1 (a wrong node there)."""
    out = tmp_path / "saved.npz"
    code, _, err = cli(["check", model, "--backends", "cpu", "--inputs", feeds, "--save-outputs", out, "-q",
                        *(["--outputs", "all"] if every_value else [])], capsys)
    assert code == 0, err
    data = dict(np.load(out))
    for _, _, _, value in CHAIN[changed_from:]:
        if f"cpu:{value}" in data:
            data[f"cpu:{value}"] = data[f"cpu:{value}"] + np.float32(1)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **data)
    return bad


@pytest.mark.parametrize("changed_from", [0, 1, 2, 3])
def test_the_first_changed_node_is_named(chain, tmp_path, capsys, changed_from):
    model, feeds = chain
    bad = saved(tmp_path, model, feeds, capsys, True, changed_from)
    code, text, err = cli(["check", model, "--load-outputs", bad, "--inputs", feeds, "--localize",
                           "--json", tmp_path / "r.json"], capsys)
    assert code == 1, err
    name, op, ins, out = CHAIN[changed_from]
    assert f"localize [saved:cpu]: the difference starts at {name} ({op}): output '{out}' differs (max abs err 1)" in text
    (found,) = json.loads((tmp_path / "r.json").read_text())["localized"]
    assert found["backend"] == "saved:cpu" and found["reproduced"] and found["candidates"] == []
    assert [(f["node"], list(f["outputs"]), f["inputs"]) for f in found["first"]] == \
        [(name, [out], [i for i in dict.fromkeys(ins) if i != "x"])]
    assert found["not_compared"] == []


def test_values_not_compared_make_a_candidate(chain, tmp_path, capsys):
    """Only the graph output saved: the difference starts at its node or before, in values that
    could not be compared, which are named."""
    model, feeds = chain
    bad = saved(tmp_path, model, feeds, capsys, False, 3)
    code, text, err = cli(["check", model, "--load-outputs", bad, "--inputs", feeds, "--localize"], capsys)
    assert code == 1, err
    assert ("localize [saved:cpu]: the difference starts at or before neg (Neg): output 'y' differs (max abs err 1); "
            "not compared: input 'c'") in text
    assert "localize [saved:cpu]: 3 values could not be compared: 'a', 'b', 'c'" in text


def test_nothing_to_localize_and_what_it_refuses(chain, tmp_path, capsys):
    model, feeds = chain
    code, text, err = cli(["check", model, "--backends", "cpu", "--inputs", feeds, "--localize"], capsys)
    assert code == 0 and "localize: no MISMATCH to localize" in text
    golden = saved(tmp_path, model, feeds, capsys, False, 4)
    code, _, err = cli(["check", model, "--backends", "cpu", "--inputs", feeds, "--oracle", golden, "--localize"],
                       capsys)
    assert code == 2 and err.startswith("dml-lower: error: --localize compares every intermediate value") \
        and err.count("\n") == 1
    code, _, err = cli(["check", model, model, "--localize"], capsys)
    assert code == 2 and "--localize works on one model's graph" in err


@pytest.mark.view
def test_the_overlay_after_localize_has_every_nodes_error(chain, tmp_path, capsys):
    """With --model-explorer, each node's error comes from the run with every value an output."""
    pytest.importorskip("model_explorer_onnx", reason="the [view] extra (Model Explorer) is not installed")
    from onnx_dml_lowering.compiler.explorer import load_node_data
    model, feeds = chain
    bad = saved(tmp_path, model, feeds, capsys, True, 1)
    code, _, err = cli(["check", model, "--load-outputs", bad, "--inputs", feeds, "--localize",
                        "--model-explorer", tmp_path / "me.json"], capsys)
    assert code == 1, err
    (_, errors), = load_node_data(str(tmp_path / "me.error-saved-cpu.json")).items()
    assert {n: r.value for n, r in errors.results.items()} == {"relu": 0, "square": 1, "add": 1, "neg": 1}
    assert "every value compared" in errors.name


def test_a_provider_backend_is_localized_on_its_modified_copy(tmp_path, capsys):
    """ort-cpu runs the file as shipped (its intermediates are no outputs there): --localize runs it
    again on the modified copy with every value an output, so the node is named where its output
    parts from the oracle's (onnxruntime's Tanh against onnx.reference's numpy at no tolerance:
    some ulps on most of 1,000 values), not a candidate at the graph's output."""
    x = h.make_tensor_value_info("x", T.FLOAT, [1000])
    nodes = [h.make_node("Abs", ["x"], ["a"], name="abs"), h.make_node("Tanh", ["a"], ["t"], name="tanh"),
             h.make_node("Neg", ["t"], ["y"], name="neg")]
    graph = h.make_graph(nodes, "g", [x], [h.make_tensor_value_info("y", T.FLOAT, [1000])])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 19)]), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "in.npz", x=np.linspace(-3, 3, 1000, dtype=np.float32))
    code, text, err = cli(["check", tmp_path / "m.onnx", "--backends", "ort-cpu", "--inputs", tmp_path / "in.npz",
                           "--oracle", "reference", "--atol", "0", "--rtol", "0", "--localize"], capsys)
    assert code == 1, err
    assert "[ort-cpu] y: MISMATCH" in text and "[ort-cpu] ran the model file as shipped" in text
    assert "localize [ort-cpu]: the difference starts at tanh (Tanh): output 't' differs" in text
    assert "while its input 'a' agrees" in text and "could not be compared" not in text


def test_a_backend_that_fails_on_the_localize_run_says_so() -> None:
    """A backend whose run with every value an output failed gets its line with the error, never none
    (the DML EP once failed that run on Mask R-CNN and --localize printed nothing)."""
    from types import SimpleNamespace

    from onnx_dml_lowering.compiler.localize import format_localized, localize
    from onnx_dml_lowering.runtime.backend_names import parse_backend
    from onnx_dml_lowering.runtime.compare import BackendReport
    name = parse_backend("ort-cpu")
    report = SimpleNamespace(backends=[BackendReport(name, error="onnxruntime failed to run the model: boom")])
    found = localize(report, None, [name])     # type: ignore[arg-type]  # a failed backend reads no graph
    assert [f.to_dict()["error"] for f in found] == ["onnxruntime failed to run the model: boom"]
    assert format_localized(found) == ["localize [ort-cpu]: its run with every value an output failed, so nothing "
                                       "is localized: onnxruntime failed to run the model: boom"]
