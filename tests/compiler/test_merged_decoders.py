"""Optimum's merged decoders (an If whose two decoders reuse value names): shape inference with data
propagation, both branches lowered and run against onnx.reference, feeds that depart from the
model's own dimension names, and onnx's messages cut to one line."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.body_names import distinct_body_names, restore_names
from onnx_dml_lowering.compiler.frontend import check_and_infer
from onnx_dml_lowering.compiler.onnx_errors import MESSAGE_LIMIT, onnx_message
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.check import Tolerances, check
from onnx_dml_lowering.runtime.feeds import check_feeds, dimension_notes
from onnx_dml_lowering.runtime.npz import save_npz
from tests.builders import graph_model
from tests.cli_runner import cli
from tests.compiler.merged_decoder import decoder_feeds, merged_decoder
from tests.oracle import assert_outputs_same, reference


def _branch(node: onnx.NodeProto, name: str) -> onnx.GraphProto:
    return next(a.g for a in node.attribute if a.name == name)


def _body_names(model: onnx.ModelProto) -> "list[list[str]]":
    return [list(n.input) + list(n.output) for node in model.graph.node for a in node.attribute
            for n in a.g.node]


@pytest.mark.parametrize("opset", [13, 17, 18])
def test_merged_decoder_infers_with_data_propagation_and_keeps_its_names(opset) -> None:
    model = merged_decoder(opset)
    onnx.checker.check_model(model, full_check=True)
    with pytest.raises(onnx.shape_inference.InferenceError, match="already exists"):
        onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)     # onnx's collision
    before = model.SerializeToString()
    inferred = check_and_infer(model)
    assert model.SerializeToString() == before                     # the caller's model is left as it was
    assert _body_names(inferred) == _body_names(model)
    bodies = [a.g for a in inferred.graph.node[0].attribute]
    assert all("~" not in vi.name for g in bodies for vi in g.value_info)
    assert {vi.name for vi in bodies[0].value_info} >= {"seq", "total", "causal"}


@pytest.mark.parametrize("use_cache,batch,new,past", [(True, 2, 3, 4), (True, 1, 1, 6), (False, 2, 5, 1),
                                                      (False, 3, 1, 1)])
def test_merged_decoder_both_branches_lowered_and_match_reference(use_cache, batch, new, past) -> None:
    model = merged_decoder()
    compiled = compile_model(model)
    lowered = [p for p in compiled.placement if p.status == "lowered"]
    assert sorted(p.extra["graph_path"] for p in lowered) == ["optimum::if/else_branch", "optimum::if/then_branch"]
    assert {p.rule for p in lowered} == {"range_comparison_mask"}
    feeds = decoder_feeds(use_cache, batch, new, past, seed=batch * 10 + new)
    expected = reference(model, feeds)
    assert_outputs_same(compiled.run(feeds, strict=True), expected, atol=1e-5, rtol=1e-5)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for output, value in zip(session.get_outputs(), session.run(None, feeds)):
        np.testing.assert_allclose(value, expected[output.name], rtol=1e-5, atol=1e-5)


def test_distinct_body_names_renames_only_reused_names_scoped_to_their_body() -> None:
    inner = h.make_graph([h.make_node("Neg", ["t"], ["u"])], "inner", [],
                         [h.make_tensor_value_info("u", T.FLOAT, [1])])
    then = h.make_graph([h.make_node("Abs", ["x"], ["t"]),
                         h.make_node("If", ["c"], ["v"], then_branch=inner, else_branch=inner)], "then", [],
                        [h.make_tensor_value_info("v", T.FLOAT, [1])])
    other = h.make_graph([h.make_node("Abs", ["x"], ["t"]), h.make_node("Neg", ["t"], ["v"])], "else", [],
                         [h.make_tensor_value_info("v", T.FLOAT, [1])])
    model = graph_model([h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                        [("x", T.FLOAT, [1]), ("c", T.BOOL, [])], [("y", T.FLOAT, [1])])
    before = model.SerializeToString()
    restore = distinct_body_names(model)
    # every definition after the first of t, v and u is renamed; reads follow their own scope
    assert sorted(restore.values()) == ["t", "u", "v"]
    then_g, else_g = (_branch(model.graph.node[0], b) for b in ("then_branch", "else_branch"))
    nested = [_branch(then_g.node[1], b) for b in ("then_branch", "else_branch")]
    # reads follow their own scope's name, wherever the walk met the name first
    assert then_g.node[0].output[0] == nested[0].node[0].input[0] == nested[1].node[0].input[0]
    assert nested[0].node[0].output[0] != nested[1].node[0].output[0]
    assert else_g.node[1].input[0] == else_g.node[0].output[0] != then_g.node[0].output[0]
    assert [g.output[0].name for g in (then_g, else_g)] == [then_g.node[1].output[0], else_g.node[1].output[0]]
    defined = [o for g in (then_g, else_g, *nested) for n in g.node for o in n.output]
    assert len(defined) == len(set(defined))
    restore_names(model, restore)
    assert model.SerializeToString() == before


def test_a_model_without_reused_names_is_not_touched() -> None:
    branches = [h.make_graph([h.make_node("Abs", ["x"], [f"t{k}"])], f"b{k}", [],
                             [h.make_tensor_value_info(f"t{k}", T.FLOAT, [1])]) for k in range(2)]
    model = graph_model([h.make_node("If", ["c"], ["y"], then_branch=branches[0], else_branch=branches[1])],
                        [("x", T.FLOAT, [1]), ("c", T.BOOL, [])], [("y", T.FLOAT, [1])])
    before = model.SerializeToString()
    assert distinct_body_names(model) == {} and model.SerializeToString() == before


# -- onnx's messages: one line ------------------------------------------------------------------

def _failing_merged_decoder() -> onnx.ModelProto:
    """Every node of both branches fails inference: the embedding is given an int64 table."""
    model = merged_decoder()
    for a in model.graph.node[0].attribute:
        for node in a.g.node:
            if node.op_type == "MatMul":
                node.input[:] = [node.input[0], "input_ids"] if node.output[0] == "q" else list(node.input)
    return model


def test_shape_inference_failure_of_a_merged_decoder_is_one_short_line() -> None:
    model = _failing_merged_decoder()
    raw = ""
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=False)
    except onnx.shape_inference.InferenceError as exc:
        raw = str(exc)
    assert raw.count("\n") >= 1
    with pytest.raises(DmlLowerError) as err:
        check_and_infer(model)
    message = str(err.value)
    assert "\n" not in message and len(message) < MESSAGE_LIMIT + 120
    assert message.startswith("ONNX shape inference failed: node 'optimum::if' (If): ")
    assert "MatMul" in message and "~" not in message


@pytest.mark.parametrize("text,expected", [
    ("[ShapeInferenceError] Inference error(s): (op_type:If, node name: if0): [ShapeInferenceError] "
     "Inference error(s): (op_type:Shape, node name: s): [ShapeInferenceError] Data for input  0 already exists.\n"
     "(op_type:Gather, node name: g): [ShapeInferenceError] Data for input  0 already exists.\n"
     "(op_type:Add): [ShapeInferenceError] Data for input  0 already exists.",
     "node 'if0' (If): node 's' (Shape): [ShapeInferenceError] Data for input 0 already exists. (and 2 more errors)"),
    ("Nodes in a graph must be topologically sorted, however input 'a' of node:\nname: n OpType: Abs\n"
     " is not output of any previous nodes.",
     "Nodes in a graph must be topologically sorted, however input 'a' of node: name: n OpType: Abs is not "
     "output of any previous nodes."),
    ("(op_type:Abs): [TypeInferenceError] bad type for 'x~1'", "Abs node: [TypeInferenceError] bad type for 'x'"),
    ("", "ValueError"),
])
def test_onnx_message_table(text, expected) -> None:
    assert onnx_message(ValueError(text), {"x~1": "x"}) == expected


def test_onnx_message_restores_longer_temporary_names_first() -> None:
    restore = {"x~1": "x", "x~10": "y"}
    assert onnx_message(ValueError("(op_type:Abs): bad 'x~10' and 'x~1'"), restore) == "Abs node: bad 'y' and 'x'"


def test_onnx_message_bounds_one_long_line() -> None:
    message = onnx_message(RuntimeError("values " + ", ".join(str(i) for i in range(5000))))
    assert len(message) == MESSAGE_LIMIT + 3 and message.endswith("...")


# -- feeds that depart from the model's dimension names -----------------------------------------

def test_cached_feeds_run_as_fed_with_one_note() -> None:
    model = merged_decoder()
    compiled = compile_model(model)
    feeds = decoder_feeds(True, 2, 3, 4)
    checked = check_feeds(compiled.inputs, feeds)           # accepted, as onnxruntime accepts them
    assert checked["attention_mask"].shape == (2, 7)
    notes = dimension_notes(compiled.inputs, feeds)
    assert notes == ["note: the model names these sizes both 'sequence_length', but input 'input_ids' has 3 "
                     "(axis 1), 'attention_mask' has 7 (axis 1); run as fed, as onnxruntime does (it does not "
                     "enforce dimension names); if one size was meant, feed them so"]
    assert dimension_notes(compiled.inputs, decoder_feeds(False, 2, 3)) == []


def test_check_and_run_cli_say_the_note_and_pass(tmp_path, capsys) -> None:
    path = tmp_path / "decoder_model_merged.onnx"
    onnx.save(merged_decoder(), str(path))
    save_npz(str(tmp_path / "f.npz"), decoder_feeds(True, 2, 3, 4), "the inputs")
    code, out, err = cli(["check", str(path), "--inputs", str(tmp_path / "f.npz"), "--atol", "1e-5",
                          "--json", str(tmp_path / "r.json")], capsys)
    assert code == 0, out + err
    assert out.count("note: the model names these sizes both 'sequence_length'") == 1
    assert json.loads((tmp_path / "r.json").read_text())["feed_notes"][0].startswith("note: the model names")
    code, out, err = cli(["run", str(path), "--inputs", str(tmp_path / "f.npz")], capsys)
    assert code == 0 and out.count("note: the model names these sizes both 'sequence_length'") == 1


def test_merged_decoder_nested_in_a_body_lowers_both_masks() -> None:
    """The decoder's If one level down (inside an outer If's branch): the renaming is scoped through
    nested bodies, and each body's masks lower."""
    inner = merged_decoder()
    outputs = [h.make_tensor_value_info(o.name, T.FLOAT, [None, None, None]) for o in inner.graph.output]
    branch = h.make_graph(list(inner.graph.node), "outer_branch", [], outputs)
    zeros = onnx.numpy_helper.from_array(np.zeros((1, 1, 8), np.float32))
    bypass = h.make_graph([h.make_node("Constant", [], ["logits"], value=zeros),
                           h.make_node("Identity", ["past_key_values.0.key"], ["present.0.key"])], "bypass", [],
                          outputs)
    outer = h.make_node("If", ["run_decoder"], [o.name for o in outputs], name="outer",
                        then_branch=branch, else_branch=bypass)
    graph = h.make_graph([outer], "nested", list(inner.graph.input) + [h.make_tensor_value_info("run_decoder", T.BOOL, [])],
                         outputs, list(inner.graph.initializer))
    model = h.make_model(graph, opset_imports=list(inner.opset_import), ir_version=inner.ir_version)
    compiled = compile_model(model)
    lowered = [p for p in compiled.placement if p.status == "lowered"]
    assert sorted(p.extra["graph_path"] for p in lowered) == ["outer/then_branch/optimum::if/else_branch",
                                                              "outer/then_branch/optimum::if/then_branch"]
    for use_cache in (True, False):
        feeds = dict(decoder_feeds(use_cache), run_decoder=np.array(True))
        assert_outputs_same(compiled.run(feeds, strict=True), reference(model, feeds), atol=1e-5, rtol=1e-5)


# -- a real one: tiny GPT-2 merged by Optimum (tests/models/export_merged_decoder.py) ---------------

REAL_MERGED = Path(__file__).parent.parent / "models" / "decoders" / "gpt2.decoder_model_merged.onnx"


def _gpt2_feeds(use_cache: bool, batch: int, new: int, past: int, seed: int) -> "dict[str, np.ndarray]":
    """Feeds as Optimum's ORTModelForCausalLM gives them: with the cache the mask spans past + new."""
    rng = np.random.default_rng(seed)
    past = past if use_cache else 1
    mask = np.ones((batch, past + new if use_cache else new), np.int64)
    mask[0, :1] = 0                                           # a left-padded row
    feeds = {"input_ids": rng.integers(0, 128, (batch, new)), "attention_mask": mask,
             "use_cache_branch": np.array([use_cache])}
    for kv in ("key", "value"):
        feeds[f"past_key_values.0.{kv}"] = rng.standard_normal((batch, 4, past, 8)).astype(np.float32)
    return feeds


def test_real_merged_decoder_is_what_onnx_data_propagation_refused() -> None:
    model = onnx.load(str(REAL_MERGED))
    assert REAL_MERGED.stat().st_size < 300_000
    with pytest.raises(onnx.shape_inference.InferenceError) as err:
        onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    assert "already exists" in str(err.value) and len(str(err.value)) > 5000


# The TorchScript trace keeps the query length of the export (3 new tokens) in a Reshape of the mask;
# batch and past length stay free.
@pytest.mark.parametrize("use_cache,batch,new,past", [(True, 2, 3, 5), (True, 3, 3, 9), (True, 1, 3, 2),
                                                      (False, 3, 3, 1), (False, 1, 3, 1)])
def test_real_merged_decoder_checks_on_both_branches(use_cache, batch, new, past) -> None:
    compiled = compile_model(REAL_MERGED)
    lowered = {p.extra["graph_path"] for p in compiled.placement
               if p.status == "lowered" and p.rule == "range_comparison_mask"}
    assert lowered == {"optimum::if/then_branch", "optimum::if/else_branch"}
    feeds = _gpt2_feeds(use_cache, batch, new, past, seed=new)
    _, report = check(compiled, feeds, ["cpu", "ort-cpu"], Tolerances(atol=1e-5, rtol=1e-4))
    assert report.ok, [(o.backend, o.output, o.status) for b in report.backends for o in b.outputs]
    assert len(report.feed_notes) == (1 if use_cache else 0)


SHIPPED_DECODER = Path(__file__).parent.parent / "models" / "decoders" / "gpt2.decoder_model_merged.onnx"


def test_random_feeds_a_decoder_cannot_take_name_the_dimensions_to_set(capsys) -> None:
    """Optimum's merged decoder ties the attention mask's length to past + new tokens while it
    declares it `sequence_length`; random feeds at the default size break it in the oracle. The
    one error line names the symbolic dimensions the feeds sized by default and --dim; with
    --dim past_sequence_length=0 the same check passes."""
    model = onnx.load(str(SHIPPED_DECODER), load_external_data=False)
    free = sorted({d.dim_param for vi in model.graph.input for d in vi.type.tensor_type.shape.dim if d.dim_param})
    code, out, err = cli(["check", SHIPPED_DECODER, "-q"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert f"(the random feeds gave symbolic dimensions {', '.join(free)} size 3; " in err
    assert "--dim NAME=SIZE" in err
    code, out, err = cli(["check", SHIPPED_DECODER, "-q", "--dim", "past_sequence_length=0"], capsys)
    assert code == 0, err
    # given every dimension, nothing is blamed on the default size
    dims = [w for name in free for w in ("--dim", f"{name}=2")]
    code, _, err = cli(["check", SHIPPED_DECODER, "-q", *dims], capsys)
    assert "random feeds gave" not in err


def test_the_dim_hint_is_only_for_failures_on_the_feeds(capsys) -> None:
    """An error that has nothing to do with the feeds' sizes (a provider this machine lacks) gets
    no --dim hint, on a model whose symbolic dimensions the feeds sized by default."""
    code, _, err = cli(["check", SHIPPED_DECODER, "--backends", "ort:NoSuchExecutionProvider"], capsys)
    assert code == 2 and err.count("\n") == 1 and "random feeds gave" not in err


def test_the_dim_hint_says_the_sizes_given_too(capsys) -> None:
    """GPT-2's Reshape to [batch, -1] cannot take batch 0 (a 0 beside a -1): the line says the
    user's --dim batch=0 beside the default-sized sequence, not the default size alone."""
    code, _, err = cli(["check", Path(__file__).parent.parent / "models" / "real" / "gpt2.torchscript.onnx",
                        "--dim", "batch=0", "-q"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "(the random feeds gave symbolic dimension sequence size 3, and batch 0 from --dim; " in err
