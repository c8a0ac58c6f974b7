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

from onnx_dml_lowering.ir import DmlLowerError
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


def _saved_changed(tmp_path, model, feeds, capsys, change) -> "object":
    """cpu's values with every value an output, saved, then `change(data)` applied to them."""
    out = tmp_path / "saved.npz"
    code, _, err = cli(["check", model, "--backends", "cpu", "--inputs", feeds, "--save-outputs", out, "-q",
                        "--outputs", "all"], capsys)
    assert code == 0, err
    data = dict(np.load(out))
    change(data)
    np.savez(tmp_path / "bad.npz", **data)
    return tmp_path / "bad.npz"


def test_an_if_reading_a_differing_value_through_its_body_does_not_start_the_difference(tmp_path, capsys):
    """The If reads 'a' only through its branches (a capture), its condition a graph input: 'a'
    differing makes relu the start, and the If is not named beside it (its inputs were its
    condition alone, so it read as reading only graph inputs)."""
    def branch(op: str) -> onnx.GraphProto:
        return h.make_graph([h.make_node(op, ["a"], [f"{op}_out"], name=op.lower())], op.lower(), [],
                            [h.make_tensor_value_info(f"{op}_out", T.FLOAT, [4])])
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu"),
             h.make_node("If", ["c"], ["z"], name="choose", then_branch=branch("Neg"), else_branch=branch("Abs")),
             h.make_node("Add", ["z", "x"], ["y"], name="add")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4]), h.make_tensor_value_info("c", T.BOOL, [])],
                         [h.make_tensor_value_info("y", T.FLOAT, [4])])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "in.npz", x=np.array([-1, 0.5, 2, 3], np.float32), c=np.array(True))

    def shift(data):
        for name in ("a", "z", "y"):
            data[f"cpu:{name}"] = data[f"cpu:{name}"] + np.float32(1)
    bad = _saved_changed(tmp_path, tmp_path / "m.onnx", tmp_path / "in.npz", capsys, shift)
    code, text, err = cli(["check", tmp_path / "m.onnx", "--load-outputs", bad, "--inputs", tmp_path / "in.npz",
                           "--localize", "--json", tmp_path / "r.json"], capsys)
    assert code == 1, err
    (found,) = json.loads((tmp_path / "r.json").read_text())["localized"]
    assert [f["node"] for f in found["first"]] == ["relu"] and found["candidates"] == []
    assert "starts at choose" not in text


@pytest.fixture
def ranked(tmp_path):
    """e = Exp(x), then TopK(e, 1): x holds its largest value twice (index 1 wins the tie)."""
    nodes = [h.make_node("Exp", ["x"], ["e"], name="exp"),
             h.make_node("TopK", ["e", "k"], ["values", "indices"], name="top")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [6])],
                         [h.make_tensor_value_info("values", T.FLOAT, [1]), h.make_tensor_value_info("indices", T.INT64, [1])],
                         [onnx.numpy_helper.from_array(np.array([1], np.int64), "k")])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "in.npz", x=np.array([0.1, 2.0, -1.0, 2.0, 0.5, 1.0], np.float32))
    return tmp_path / "m.onnx", tmp_path / "in.npz"


@pytest.mark.parametrize("nudged", [True, False])
def test_a_ranking_node_whose_inputs_agree_within_tolerance_is_said_to_rank(ranked, tmp_path, capsys, nudged):
    """TopK's chosen index differs while its input agrees: within tolerance but not bit for bit
    (one ulp on the second of the tied values) the line says it ranks near-equal values; with the
    input bit for bit the same, nothing is said beside the node (a ranking that parts on equal
    inputs is the node's own)."""
    model, feeds = ranked

    def change(data):
        if nudged:
            e = data["cpu:e"]
            e[3] = np.nextafter(e[3], np.float32(np.inf))
        data["cpu:indices"] = np.array([3], np.int64)
    bad = _saved_changed(tmp_path, model, feeds, capsys, change)
    code, text, err = cli(["check", model, "--load-outputs", bad, "--inputs", feeds, "--localize",
                           "--json", tmp_path / "r.json"], capsys)
    assert code == 1, err
    line = next(line for line in text.splitlines() if line.startswith("localize [saved:cpu]: the difference starts"))
    assert line.startswith("localize [saved:cpu]: the difference starts at top (TopK): output 'indices' differs "
                           "(max abs err 2) while its input 'e' agrees")
    (found,) = json.loads((tmp_path / "r.json").read_text())["localized"]
    if nudged:
        assert line.endswith(", within tolerance but not bit for bit (max abs err 4.77e-07), and it ranks (top (TopK)): "
                             "near-equal values ordered by rounding differences part there, not necessarily a node "
                             "computing otherwise than ONNX says")
        assert found["first"][0]["ranks"] == {"nodes": [["top", "TopK"]], "input_error": pytest.approx(4.76837e-07)}
    else:
        assert line.endswith("while its input 'e' agrees") and "ranks" not in found["first"][0]


@pytest.mark.parametrize("nudged", ["e", "f"])
def test_in_a_body_only_what_the_ranking_node_reads_counts(tmp_path, capsys, nudged):
    """An If whose branch holds TopK(e) and, beside it, an Add of f: with f one ulp off and e exact
    the TopK is not said to rank near-equal values (its input is exact); with e one ulp off it is."""
    then = h.make_graph([h.make_node("TopK", ["e", "k"], ["tv", "ti"], name="top"),
                         h.make_node("Add", ["f", "f"], ["g"], name="dbl"),
                         h.make_node("Cast", ["g"], ["gi"], to=T.INT64, name="cast"),
                         h.make_node("Add", ["ti", "gi"], ["o"], name="sum")], "then", [],
                        [h.make_tensor_value_info("o", T.INT64, [1])])
    other = h.make_graph([h.make_node("Identity", ["k"], ["o2"], name="id")], "else", [],
                         [h.make_tensor_value_info("o2", T.INT64, [1])])
    nodes = [h.make_node("Exp", ["x"], ["e"], name="exp"), h.make_node("Sigmoid", ["x1"], ["f"], name="sig"),
             h.make_node("If", ["c"], ["y"], name="choose", then_branch=then, else_branch=other)]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [6]),
                                      h.make_tensor_value_info("x1", T.FLOAT, [1]),
                                      h.make_tensor_value_info("c", T.BOOL, [])],
                         [h.make_tensor_value_info("y", T.INT64, [1])],
                         [onnx.numpy_helper.from_array(np.array([1], np.int64), "k")])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "in.npz", x=np.array([0.1, 2.0, -1.0, 2.0, 0.5, 1.0], np.float32),
             x1=np.array([0.3], np.float32), c=np.array(True))

    def change(data):
        value = data[f"cpu:{nudged}"]
        value[-1 if nudged == "f" else 3] = np.nextafter(value[-1 if nudged == "f" else 3], np.float32(np.inf))
        data["cpu:y"] = data["cpu:y"] + 2
    bad = _saved_changed(tmp_path, tmp_path / "m.onnx", tmp_path / "in.npz", capsys, change)
    code, text, err = cli(["check", tmp_path / "m.onnx", "--load-outputs", bad, "--inputs", tmp_path / "in.npz",
                           "--localize"], capsys)
    assert code == 1, err
    line = next(line for line in text.splitlines() if line.startswith("localize [saved:cpu]: the difference starts"))
    assert line.startswith("localize [saved:cpu]: the difference starts at choose (If): output 'y' differs")
    assert ("and it ranks (top (TopK))" in line) == (nudged == "e"), line


def test_a_named_deviation_upstream_is_where_the_difference_starts(tmp_path, capsys):
    """onnxruntime's scalar NonZero (shape [1, n] where ONNX says [0, n]) read through a Transpose:
    the graph output MISMATCHes; with every value an output, the NonZero's own output is the named
    DEVIATION, compared (it was said 'not compared'), and the difference starts there."""
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], name="total", keepdims=0),
             h.make_node("NonZero", ["s"], ["nz"], name="scalar_nonzero"),
             h.make_node("Transpose", ["nz"], ["y"], name="flip")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [3])],
                         [h.make_tensor_value_info("y", T.INT64, ["a", "b"])])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "in.npz", x=np.array([1, 2, 3], np.float32))
    code, text, err = cli(["check", tmp_path / "m.onnx", "--backends", "ort-cpu", "--inputs", tmp_path / "in.npz",
                           "--localize", "--json", tmp_path / "r.json"], capsys)
    assert code == 1, err
    assert "[ort-cpu] y: MISMATCH (int64 [1x1]) - shape [1, 1] != expected [1, 0]" in text
    assert ("localize [ort-cpu]: the difference starts at scalar_nonzero (NonZero): output 'nz' is a named "
            "DEVIATION (known onnxruntime deviation: a scalar NonZero gives (1, nnz); ONNX says (0, nnz) "
            "(node scalar_nonzero; expected [0, 1])) while its input 's' agrees") in text
    assert "not compared" not in text and "flip" not in text.split("verdict")[1]
    (found,) = json.loads((tmp_path / "r.json").read_text())["localized"]
    assert [(f["node"], list(f["deviations"])) for f in found["first"]] == [("scalar_nonzero", ["nz"])]
    assert found["candidates"] == [] and found["not_compared"] == []


def test_one_value_not_compared_is_said_in_the_singular():
    from onnx_dml_lowering.compiler.localize import Localized, format_localized
    lines = format_localized([Localized("cpu", True, not_compared=["c"]),
                              Localized("ort", True, not_compared=["b", "c"])])
    assert lines == ["localize [cpu]: 1 value could not be compared: 'c'",
                     "localize [ort]: 2 values could not be compared: 'b', 'c'"]


def _sequence_model(tmp_path, kind: str) -> "tuple[object, object]":
    """x -> Relu a -> (a value of `kind`: a sequence, an optional, or one shape inference gives no
    type) -> back to a tensor c -> Neg y."""
    x = h.make_tensor_value_info("x", T.FLOAT, [4])
    middle = {"sequence": [h.make_node("SplitToSequence", ["a"], ["s"], name="split"),
                           h.make_node("ConcatFromSequence", ["s"], ["c"], name="concat", axis=0)],
              "optional": [h.make_node("Optional", ["a"], ["s"], name="wrap"),
                           h.make_node("OptionalGetElement", ["s"], ["c"], name="unwrap")],
              "untyped": [h.make_node("Custom", ["a"], ["s"], name="custom", domain="my.domain"),
                          h.make_node("Identity", ["a"], ["c"], name="same")]}[kind]
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu"), *middle, h.make_node("Neg", ["c"], ["y"], name="neg")]
    graph = h.make_graph(nodes, "g", [x], [h.make_tensor_value_info("y", T.FLOAT, [4])])
    if kind == "untyped":       # the custom node's output is read by none: a value without a type
        graph.output.append(h.make_tensor_value_info("y2", T.FLOAT, [4]))
        graph.node.append(h.make_node("Identity", ["c"], ["y2"], name="again"))
    opsets = [h.make_opsetid("", 18)] + ([h.make_opsetid("my.domain", 1)] if kind == "untyped" else [])
    onnx.save(h.make_model(graph, opset_imports=opsets), str(tmp_path / f"{kind}.onnx"))
    np.savez(tmp_path / "in.npz", x=np.array([-1, 0.5, 2, 3], np.float32))
    return tmp_path / f"{kind}.onnx", tmp_path / "in.npz"


@pytest.mark.parametrize("kind", ["sequence", "optional"])
def test_outputs_all_leaves_out_what_is_no_tensor_and_localize_names_it_not_compared(tmp_path, capsys, kind):
    """--outputs all is every value shape inference gives a tensor type: a sequence or optional
    value is left out, not the fatal `--outputs s: ...` line (longformer_ts's SplitToSequence once
    ended --outputs all and --localize so, exit 2 after a MISMATCH). Named by hand it is one line
    naming its type; --localize lists it among the values not compared."""
    model, feeds = _sequence_model(tmp_path, kind)
    code, text, err = cli(["check", model, "--backends", "cpu", "--inputs", feeds, "--outputs", "all"], capsys)
    assert code == 0 and err == "", err
    assert "[cpu] a: MATCH" in text and "[cpu] c: MATCH" in text and "[cpu] s:" not in text
    code, _, err = cli(["check", model, "--backends", "cpu", "--inputs", feeds, "--outputs", "s"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"dml-lower: error: --outputs s: shape inference gives that value the type {kind}(")

    def shift(data):
        for name in ("c", "y"):
            data[f"cpu:{name}"] = data[f"cpu:{name}"] + np.float32(1)
    bad = _saved_changed(tmp_path, model, feeds, capsys, shift)
    code, text, err = cli(["check", model, "--load-outputs", bad, "--inputs", feeds, "--localize"], capsys)
    assert code == 1 and err == "", err
    unpack = "concat (ConcatFromSequence)" if kind == "sequence" else "unwrap (OptionalGetElement)"
    assert f"localize [saved:cpu]: the difference starts at or before {unpack}: output 'c' differs" in text
    assert "localize [saved:cpu]: 1 value could not be compared: 's'" in text


def test_outputs_all_leaves_out_a_value_without_a_type(tmp_path, capsys):
    """A custom domain's node: shape inference gives its output no type; all leaves it out, by hand
    it is named as untyped."""
    from onnx_dml_lowering.compiler.frontend import mark_outputs
    model, _ = _sequence_model(tmp_path, "untyped")
    proto = onnx.shape_inference.infer_shapes(onnx.load(str(model)))
    assert mark_outputs(proto, "all") == ["a", "c"]
    with pytest.raises(DmlLowerError, match=r"^--outputs s: shape inference gives that value no type, so it "):
        mark_outputs(onnx.shape_inference.infer_shapes(onnx.load(str(model))), ["s"])


def test_a_localisation_that_cannot_finish_leaves_the_mismatch_and_its_exit_code(chain, tmp_path, capsys,
                                                                                   monkeypatch):
    """The check with every value an output failing (a limit, the oracle on a value) is one line
    after the report: the MISMATCH stands with its exit 1, never turned into exit 2; the JSON holds
    the reason per backend."""
    from onnx_dml_lowering.compiler import localize as localize_module
    model, feeds = chain
    bad = saved(tmp_path, model, feeds, capsys, False, 3)

    def fails(*args, **kwargs):
        raise DmlLowerError("the lowered graph needs 2 KiB of buffers, over the memory limit of 1 KiB")
    monkeypatch.setattr(localize_module, "every_value_check", fails)
    code, text, err = cli(["check", model, "--load-outputs", bad, "--inputs", feeds, "--localize",
                           "--json", tmp_path / "r.json"], capsys)
    assert code == 1 and err == "", err
    assert "[saved:cpu] y: MISMATCH" in text
    lines = [line for line in text.splitlines() if line.startswith("localize")]
    assert lines == ["localize: the check with every value an output could not be made, so nothing is localized: "
                     "the lowered graph needs 2 KiB of buffers, over the memory limit of 1 KiB"]
    (found,) = json.loads((tmp_path / "r.json").read_text())["localized"]
    assert found["backend"] == "saved:cpu" and found["error"].startswith("the lowered graph needs 2 KiB")
