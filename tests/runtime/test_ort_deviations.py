"""onnxruntime's deviations from ONNX (runtime/ort_deviations.py): every entry of the table is
confirmed on the installed onnxruntime by a differential test against onnx.reference, nodes outside
its condition agree (so they stay on onnxruntime); the hybrid oracle follows the spec on them, a
provider backend showing onnxruntime's reading is a named DEVIATION, and a region is never refused a
value its producer gave."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.lowering.node import TensorInfo
from onnx_dml_lowering.runtime.check import Tolerances, check, make_oracle
from onnx_dml_lowering.runtime.ort_deviations import BY_KEY, TABLE, deviation, first_deviation
from onnx_dml_lowering.runtime.region_engine import ORT, RegionEngine
from tests.oracle import reference


def model_of(nodes, inputs, outputs, initializers=(), opset=17):
    graph = h.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)


def tensor(name, value, dtype):
    return onnx.numpy_helper.from_array(np.array(value, dtype), name)


def on_ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def on_reference(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


def agree(model, feeds) -> bool:
    """onnxruntime and onnx.reference give the same outputs (shape, type, values to float noise)."""
    try:
        got = on_ort(model, feeds)
    except Exception:  # onnxruntime refuses what ONNX defines: a deviation too
        return False
    want = on_reference(model, feeds)
    return all(np.shape(g) == np.shape(w) and np.allclose(g, w, atol=1e-5, rtol=1e-4) for g, w in zip(got, want))


# -- the table's entries, each on the installed onnxruntime ----------------------------------------
def split_to_sequence(shape, axis, split, keepdims):
    """x -> SplitToSequence -> SequenceAt(0) -> y (split: None, an int (scalar input) or a list)."""
    inputs, inits = ["x"], [tensor("i", 0, np.int64)]
    if split is not None:
        inputs.append("s")
        inits.append(tensor("s", split, np.int64))
    nodes = [h.make_node("SplitToSequence", inputs, ["seq"], axis=axis, keepdims=keepdims, name="sts"),
             h.make_node("SequenceAt", ["seq", "i"], ["y"], name="at")]
    return model_of(nodes, [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                    [h.make_tensor_value_info("y", T.FLOAT, None)], inits)


def resize(length, scale, mode, transform, by_sizes=False):
    x = h.make_tensor_value_info("x", T.FLOAT, [1, 1, length, length + 1])
    if by_sizes:
        inputs, init = ["x", "", "", "s"], tensor("s", [1, 1, int(length * scale), int((length + 1) * scale)], np.int64)
    else:
        inputs, init = ["x", "", "s"], tensor("s", [1, 1, scale, scale], np.float32)
    node = h.make_node("Resize", inputs, ["y"], mode=mode, coordinate_transformation_mode=transform, name="resize")
    return model_of([node], [x], [h.make_tensor_value_info("y", T.FLOAT, None)], [init], opset=19)


def nonzero(shape):
    return model_of([h.make_node("NonZero", ["x"], ["y"], name="nz")], [h.make_tensor_value_info("x", T.FLOAT, shape)],
                    [h.make_tensor_value_info("y", T.INT64, None)])


def slicing(starts, ends, axes, steps, shape=(4, 3), constant_node=False):
    """x -> Slice -> y, its starts / ends / axes / steps initializers (steps None: no steps input),
    or Constant nodes."""
    values = {"s": starts, "e": ends, "a": axes, **({} if steps is None else {"st": steps})}
    tensors = [tensor(name, value, np.int64) for name, value in values.items()]
    nodes = [h.make_node("Constant", [], [t.name], value=t) for t in tensors] if constant_node else []
    nodes.append(h.make_node("Slice", ["x", *values], ["y"], name="slice"))
    model = model_of(nodes, [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [] if constant_node else tensors)
    return model


def feeds_for(model, seed=0):
    rng = np.random.default_rng(seed)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return {"x": (rng.standard_normal(shape) * (rng.random(shape) < 0.7)).astype(np.float32)}


def ranks_and_constants(model):
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in model.graph.input}
    ranks.update((t.name, len(t.dims)) for t in model.graph.initializer)
    return ranks, {t.name: t for t in model.graph.initializer}


# (entry key, models meeting its condition: some deviate on onnxruntime; models outside it: all agree)
CASES = {
    "scalar_nonzero": ([nonzero([])], [nonzero([3]), nonzero([2, 3])]),
    "split_to_sequence_keepdims": (
        [split_to_sequence(shape, axis, split, 0) for shape, axis, split in
         [((6, 4), 0, 1), ((3, 2), 1, 1), ((2, 5, 3), 1, 1), ((6, 4), 0, 2), ((2, 6), 1, 3)]],
        [split_to_sequence(shape, axis, split, keep) for shape, axis, split, keep in
         [((6, 4), 0, None, 0), ((6, 4), 0, None, 1), ((6, 4), 0, [1] * 6, 0), ((6, 4), 0, [2, 4], 0),
          ((6, 4), 0, 1, 1), ((6, 4), 0, 2, 1), ((2, 5, 3), 1, [1] * 5, 0)]]),
    "resize_align_corners_scales": (
        [resize(n, s, mode, "align_corners") for n, s, mode in itertools.product([4, 5, 7], [0.6, 1.5], ["linear"])],
        [resize(n, s, mode, t, by) for n, s, mode, t, by in
         [(4, 0.6, "linear", "half_pixel", False), (5, 1.5, "linear", "asymmetric", False),
          (4, 2.0, "linear", "align_corners", False), (5, 3.0, "nearest", "align_corners", False),
          (4, 0.6, "linear", "align_corners", True), (7, 1.5, "cubic", "align_corners", True)]]),
    "slice_backwards_sentinel_end": (
        [slicing([0], [2**63 - 1], [0], [-1]), slicing([3], [2**31 - 1], [0], [-2]),
         slicing([1, 2], [2**63 - 1, 0], [0, 1], [-1, -1], shape=(4, 5)), slicing([2], [2**63 - 1], [1], [-1], (2, 6))],
        [slicing([0], [2**63 - 1], [0], [1]), slicing([-1], [-2**63], [0], [-1]), slicing([0], [100], [0], [-1]),
         slicing([3], [2**63 - 2], [0], [-1]), slicing([0], [2**63 - 1], [0], None), slicing([1], [-1], [0], [-1])]),
}


def test_every_entry_has_its_differential_cases():
    assert sorted(CASES) == sorted(entry.key for entry in TABLE)


@pytest.mark.parametrize("key", sorted(CASES))
def test_onnxruntime_deviates_where_the_entry_says_and_only_there(key):
    meeting, outside = CASES[key]
    for model in meeting + outside:
        ranks, constants = ranks_and_constants(model)
        found = deviation(model.graph.node[0], ranks, constants)
        assert (found is BY_KEY[key]) == (model in meeting), onnx.helper.printable_graph(model.graph)
    # confirmed on the installed onnxruntime: drop the entry once none of these deviates
    assert [m for m in meeting if not agree(m, feeds_for(m))], f"onnxruntime {ort.__version__} no longer deviates"
    assert all(agree(m, feeds_for(m)) for m in outside)


def test_split_input_of_unknown_rank_is_taken_as_deviating():
    node = h.make_node("SplitToSequence", ["x", "s"], ["seq"], keepdims=0)
    assert deviation(node, {"x": 2}) is BY_KEY["split_to_sequence_keepdims"]
    assert deviation(node, {"x": 2, "s": 1}) is None


# -- the check: the oracle follows the spec, a provider showing onnxruntime's reading is a DEVIATION --
def column_of_pairs():
    """y = -(SequenceAt(SplitToSequence(relu(x), 1, axis=1, keepdims=0), 0)), declared [N, 1] (the spec's
    reading; onnxruntime's is [N])."""
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("SplitToSequence", ["r", "one"], ["seq"], axis=1, keepdims=0, name="sts"),
             h.make_node("SequenceAt", ["seq", "zero"], ["a"], name="at"),
             h.make_node("Neg", ["a"], ["y"], name="neg")]
    return model_of(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 2])],
                    [h.make_tensor_value_info("y", T.FLOAT, ["N", 1])],
                    [tensor("one", 1, np.int64), tensor("zero", 0, np.int64)])


def split_then_trilu_then_gemm():
    """A SplitToSequence(keepdims=0, split 1) row feeds a lowered Trilu, and both feed a MatMul + Add
    region, whose inputs carry their rank (onnxruntime fuses MatMul + Add into Gemm on a known rank)."""
    rng = np.random.default_rng(3)
    nodes = [h.make_node("SplitToSequence", ["x", "one"], ["seq"], axis=1, keepdims=0, name="sts"),
             h.make_node("SequenceAt", ["seq", "zero"], ["a"], name="at"),
             h.make_node("Trilu", ["a"], ["t"], name="trilu"),
             h.make_node("Add", ["a", "t"], ["s"], name="sum"),
             h.make_node("MatMul", ["s", "w"], ["m"], name="matmul"),
             h.make_node("Add", ["m", "b"], ["y"], name="bias")]
    return model_of(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["B", 3, 4, 4])],
                    [h.make_tensor_value_info("y", T.FLOAT, ["B", 1, 4, 5])],
                    [tensor("one", 1, np.int64), tensor("zero", 0, np.int64),
                     tensor("w", rng.standard_normal((4, 5)), np.float32),
                     tensor("b", rng.standard_normal(5), np.float32)])


def statuses(report):
    return {b.backend: (b.error or [o.status for o in b.outputs]) for b in report.backends}


@pytest.mark.parametrize("make, shape", [(column_of_pairs, (3, 2)), (column_of_pairs, (7, 2)),
                                         (split_then_trilu_then_gemm, (2, 3, 4, 4)),
                                         (split_then_trilu_then_gemm, (1, 3, 4, 4))])
@pytest.mark.parametrize("oracle", ["hybrid", "reference"])
def test_check_follows_the_spec_and_names_onnxruntimes_reading(make, shape, oracle):
    model = make()
    compiled = compile_model(model)
    feeds = {"x": np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)}
    _, report = check(compiled, feeds, ["cpu", "ort", "ort-cpu"], Tolerances(), oracle=oracle)
    assert statuses(report) == {"cpu": ["match"], "ort": ["match"], "ort-cpu": ["deviation"]}, statuses(report)
    detail = report.backends[2].outputs[0].detail
    assert BY_KEY["split_to_sequence_keepdims"].name in detail and "(node sts;" in detail, detail
    assert report.ok
    # the oracle's answer is ONNX's (onnx.reference of the whole model), onnxruntime's the other one
    want = reference(model, feeds)["y"]
    assert np.array_equal(report.expected["y"], want)
    assert np.shape(on_ort(model, feeds)[0]) != want.shape
    assert np.allclose(report.backends[0].values["y"], want, atol=1e-6)


def test_the_hybrid_oracle_evaluates_the_deviating_nodes_by_their_definitions():
    compiled = compile_model(column_of_pairs())
    oracle = make_oracle(compiled)
    oracle.run({"x": np.ones((2, 2), np.float32)})
    engines = oracle.to_dict()["node_engines"]
    assert engines["sts"] == engines["at"] == "onnx.reference"        # the sequence stays with its maker
    assert engines["relu"] == engines["neg"] == "onnxruntime CPUExecutionProvider"
    assert oracle.to_dict()["ort_deviations"] == {"sts": "split_to_sequence_keepdims",
                                                   "at": "split_to_sequence_keepdims"}


def test_a_provider_mismatch_that_is_not_onnxruntimes_reading_stays_a_mismatch(tmp_path):
    """The provider's answer is compared with onnxruntime's reading too: another answer is no deviation."""
    from onnx_dml_lowering.runtime.ort_reading import OrtReading
    compiled = compile_model(column_of_pairs())
    reading = OrtReading(lambda **kw: make_oracle(compiled, **kw), compiled.model, compiled.types)
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(3, 2)}
    spec = make_oracle(compiled)
    spec.run(feeds)
    ort_answer = on_ort(compiled.model, feeds)[0]
    assert reading.recognise(feeds, "y", ort_answer, 1e-5, 1e-5, False, spec.values)
    assert reading.recognise(feeds, "y", ort_answer + 1, 1e-5, 1e-5, False, spec.values) is None


# -- regions run what their producers give ------------------------------------------------------------
def test_a_region_takes_a_rank_other_than_inference_declared():
    """A MatMul + Add region whose input inference declared 3-D is fed a 2-D value (what an engine
    reading an operator otherwise than the spec gives): it is opened again declaring what is fed, and
    the first declaration still serves feeds that fit it."""
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    nodes = [h.make_node("MatMul", ["s", "w"], ["m"], name="matmul"), h.make_node("Add", ["m", "b"], ["y"], name="add")]
    model = model_of(nodes, [h.make_tensor_value_info("s", T.FLOAT, ["B", 1, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["B", 1, 5])], [tensor("w", w, np.float32),
                                                                             tensor("b", b, np.float32)])
    types = {"s": TensorInfo("s", T.FLOAT, ("B", 1, 4)), "m": TensorInfo("m", T.FLOAT, ("B", 1, 5)),
             "y": TensorInfo("y", T.FLOAT, ("B", 1, 5))}
    engine = RegionEngine(model, types)
    region = engine.region(nodes, ["s", "w", "b"], ["y"])
    for s in (rng.standard_normal((3, 4)), rng.standard_normal((3, 1, 4)), rng.standard_normal((2, 4))):
        s = s.astype(np.float32)
        got = engine.run(region, {"s": s}, (ORT,))["y"]
        np.testing.assert_allclose(got, s @ w + b, rtol=1e-5, atol=1e-6)
    assert len(engine.cache) == 2          # the declared session and the one as fed, each built once
    assert engine.fed_otherwise({"s": np.zeros((3, 1, 4), np.float32)}) == {}
    assert engine.fed_otherwise({"s": np.zeros((3, 4), np.float64)}) == {"s": (T.DOUBLE, 2)}


STORED = Path(__file__).parent.parent / "models" / "deviations" / "split_to_sequence_column.onnx"


def test_the_documented_model_is_column_of_pairs():
    """docs/statuses-and-oracle.md checks this file (its example is run by tests/test_transcripts.py)."""
    assert onnx.load(str(STORED)) == column_of_pairs()


def test_the_docs_table_is_the_table():
    """The deviation table in docs/statuses-and-oracle.md lists every entry with its condition and reading."""
    text = (Path(__file__).parent.parent.parent / "docs" / "statuses-and-oracle.md").read_text()
    section = text.split("### onnxruntime's known deviations", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows == [docs_row(entry) for entry in TABLE]


def docs_row(entry) -> str:
    return f"| `{entry.key}` | {entry.op_type} | {entry.condition} | {entry.reading} |"


def test_a_lowered_run_region_keeps_onnxruntime_but_for_the_deviating_nodes():
    """The lowered run's chain: a region holding a node onnxruntime deviates on runs as the hybrid
    oracle runs it (the rest on onnxruntime); one onnxruntime cannot load stays on the reference oracle."""
    from onnx_dml_lowering.runtime.onnx_regions import CHAIN
    from onnx_dml_lowering.runtime.oracle import HybridSession, ReferenceSession
    from onnx_dml_lowering.runtime.region_engine import HYBRID, REFERENCE_ORACLE
    int16 = model_of([h.make_node("Neg", ["x"], ["n"], name="neg"), h.make_node("Relu", ["n"], ["y"], name="relu16")],
                     [h.make_tensor_value_info("x", T.INT16, [2, 3])], [h.make_tensor_value_info("y", T.INT16, [2, 3])])
    cases = [(column_of_pairs(), {"x": np.arange(-3, 3, dtype=np.float32).reshape(3, 2)}, HYBRID, "node sts: onnxruntime's"),
             (int16, {"x": np.array([[1, -2, 3], [-4, 5, 0]], np.int16)}, REFERENCE_ORACLE, "onnxruntime cannot run it")]
    for model, feeds, engine_name, why in cases:
        compiled = compile_model(model)
        engine = RegionEngine(compiled.model, compiled.types, reference_oracle=ReferenceSession,
                              hybrid_oracle=HybridSession)
        reads = list(feeds) + [t.name for t in compiled.model.graph.initializer]
        region = engine.region(list(compiled.model.graph.node), reads, ["y"])
        got = engine.run(region, feeds, CHAIN)["y"]
        assert np.array_equal(got, reference(model, feeds)["y"])
        chosen, reason = engine.chosen(region, CHAIN)
        assert chosen == engine_name and reason.startswith(why), (chosen, reason)
        if chosen == HYBRID:
            engines = engine.session(region, HYBRID).oracle.to_dict()["node_engines"]
            assert engines == {"relu": "onnxruntime CPUExecutionProvider", "sts": "onnx.reference",
                               "at": "onnx.reference", "neg": "onnxruntime CPUExecutionProvider"}


@pytest.mark.parametrize("steps, deviates", [([-1], True), ([1], False)])
def test_slice_steps_and_ends_from_constant_nodes_are_read(steps, deviates):
    model = slicing([0], [2**63 - 1], [0], steps, constant_node=True)
    assert model.graph.node[-1].op_type == "Slice" and len(model.graph.node) == 5
    assert (first_deviation(model.graph.node, {"x": 2}) is not None) == deviates
    assert agree(model, feeds_for(model)) != deviates


@pytest.mark.parametrize("scales, deviates", [([1, 1, 2, 2], False), ([1, 1, 0.6, 0.6], True)])
def test_resize_scales_from_a_constant_node_are_read(scales, deviates):
    """Exporters write a Resize's scales as a Constant node: whole scales keep the node on onnxruntime."""
    from onnx_dml_lowering.runtime.ort_deviations import first_deviation
    nodes = [h.make_node("Constant", [], ["s"], value=tensor("s", scales, np.float32)),
             h.make_node("Resize", ["x", "", "s"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")]
    assert (first_deviation(nodes, {"x": 4}) is not None) == deviates


def test_reduce_cuts_onnxruntimes_reading_down_to_the_deviating_nodes(tmp_path, capsys):
    """`reduce --status DEVIATION` takes the named deviation like any other: the minimal model is the
    SplitToSequence and its SequenceAt, and still a DEVIATION on ort-cpu."""
    from onnx_dml_lowering.compiler.cli import main
    minimal = tmp_path / "min.onnx"
    code = main(["reduce", str(STORED), "-o", str(minimal), "--backends", "ort-cpu", "--status", "DEVIATION",
                 "--dim", "N=3"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert [n.op_type for n in onnx.load(str(minimal)).graph.node] == ["SplitToSequence", "SequenceAt"]
    assert "DEVIATION" in out and "split_to_sequence_keepdims" in out


def split_then_concat(split, keepdims):
    """x [6, 2] -> SplitToSequence(scalar split) -> ConcatFromSequence -> y [6, 2]."""
    nodes = [h.make_node("SplitToSequence", ["x", "s"], ["seq"], axis=0, keepdims=keepdims, name="sts"),
             h.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, name="cfs")]
    return model_of(nodes, [h.make_tensor_value_info("x", T.FLOAT, [6, 2])],
                    [h.make_tensor_value_info("y", T.FLOAT, [6, 2])], [tensor("s", split, np.int64)])


@pytest.mark.parametrize("split", [2, 3])
def test_a_listed_deviation_that_fails_on_onnxruntime_is_named_in_the_error(split):
    """SplitToSequence keepdims=0 with a scalar split > 1 fails on onnxruntime (the entry's "or
    fails"): the backend's ERROR line says it is that listed deviation."""
    model = split_then_concat(split, 0)
    assert not agree(model, feeds_for(model))
    _, report = check(compile_model(model), feeds_for(model), ["cpu", "ort-cpu"], Tolerances())
    by_backend = {b.backend: b for b in report.backends}
    assert [o.status for o in by_backend["cpu"].outputs] == ["match"]
    error = by_backend["ort-cpu"].error or ""
    assert "failed to run the model" in error and BY_KEY["split_to_sequence_keepdims"].name in error, error


def test_a_failure_outside_the_table_names_no_deviation():
    from onnx_dml_lowering.runtime.backends import known_run_failure
    message = "Non-zero status code returned while running SplitToSequence node. Name:'sts' Status Message: bad"
    assert known_run_failure(compile_model(split_then_concat(2, 1)), RuntimeError(message)) == ""
    assert "split_to_sequence_keepdims" in known_run_failure(compile_model(split_then_concat(2, 0)),
                                                              RuntimeError(message))
