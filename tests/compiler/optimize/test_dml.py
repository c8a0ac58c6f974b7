"""optimize --for dml: every rewrite is exact (differential against onnx.reference and onnxruntime
on the original model, over edge values and hypothesis-drawn arrays), each moves what it claims
to the DML EP in the placement prediction, and the CLI reports it and proves it with --check."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

from onnx_dml_lowering.compiler.ep.placement import CPU, DML, predict_placement
from onnx_dml_lowering.compiler.ep.registry import choose_table
from onnx_dml_lowering.compiler.optimize.dml import downconvert_blockers, optimize_for_dml
from tests import paths
from tests.cli_runner import cli

REAL = paths.REAL


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset=21):
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs), opset_imports=[h.make_opsetid("", opset)],
                        ir_version=10)


def run_ort(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def assert_bit_identical(original, rewritten, feeds, reference=True, ort_original=True):
    """The rewritten model's outputs on onnxruntime equal the original's on onnxruntime (where it
    has a kernel for it) and on onnx.reference: dtype, shape and bytes."""
    pairs = [(run_ort(original, feeds), run_ort(rewritten, feeds))] if ort_original else []
    if reference:
        pairs.append((ReferenceEvaluator(original).run(None, feeds), run_ort(rewritten, feeds)))
    for a, b in pairs:
        for x, y in zip(a, b):
            x, y = np.asarray(x), np.asarray(y)
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), (x, y)


def providers(m, names):
    placed = {n["node"]: n["provider"] for n in predict_placement(m, None)["nodes"]}
    return [placed[n] for n in names]


EDGE_FLOATS = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, 255.0, 256.0, 1e-45, -3.4e38, np.nan, np.inf, -np.inf],
                       np.float32)


# --- NonZero over int64 / uint64 -------------------------------------------------------------

@pytest.mark.parametrize("elem,dtype", [(T.INT64, np.int64), (T.UINT64, np.uint64)])
@pytest.mark.parametrize("shape", [(0,), (5,), (3, 4), (2, 0, 3), (2, 3, 2)])
def test_nonzero_64_is_exact_and_moves_to_dml(elem, dtype, shape):
    m = model([h.make_node("NonZero", ["x"], ["y"], name="nz")], [vi("x", elem, list(shape))],
              [vi("y", T.INT64, [len(shape), None])])
    out, rewrites, _ = optimize_for_dml(m)
    assert [r.kind.split(" ->")[0] for r in rewrites] == ["NonZero over int64 / uint64"]
    rng = np.random.default_rng(0)
    values = np.array([0, 1, -1 if dtype == np.int64 else 2**64 - 1, 2**40, 2**62], dtype=dtype)
    x = rng.choice(values, size=shape).astype(dtype)
    # onnxruntime's CPU EP has no uint64 NonZero: onnx.reference is the oracle there
    assert_bit_identical(m, out, {"x": x}, reference=True, ort_original=dtype == np.int64)
    assert providers(m, ["nz"]) == [CPU if dtype == np.int64 else "none"] and providers(out, ["nz"]) == [DML]
    assert rewrites[0].before == {"nz": providers(m, ["nz"])[0]} and rewrites[0].after["nz"] == [DML, DML, DML]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                  elements=st.sampled_from([0, 1, -1, 2**63 - 1, -2**63, 7])))
def test_nonzero_64_property(x):
    m = model([h.make_node("NonZero", ["x"], ["y"], name="nz")], [vi("x", T.INT64, list(x.shape))],
              [vi("y", T.INT64, [x.ndim, None])])
    out, _, _ = optimize_for_dml(m)
    assert_bit_identical(m, out, {"x": x}, reference=False)


# --- Cast to bool ----------------------------------------------------------------------------

@pytest.mark.parametrize("elem,values", [
    (T.FLOAT, EDGE_FLOATS),
    (T.FLOAT16, np.array([0.0, -0.0, 0.5, -0.5, 1.0, 255.0, 256.0, 6e-8, -65504.0, np.nan, np.inf], np.float16)),
    (T.INT64, np.array([0, 1, -1, 256, 2**32, 2**40, -2**63], np.int64)),
])
def test_cast_to_bool_is_exact(elem, values):
    m = model([h.make_node("Cast", ["x"], ["y"], name="cast", to=T.BOOL)], [vi("x", elem, [len(values)])],
              [vi("y", T.BOOL, [len(values)])])
    out, rewrites, _ = optimize_for_dml(m)
    assert [r.kind.split(" ->")[0] for r in rewrites] == ["Cast to bool"]
    assert_bit_identical(m, out, {"x": values})
    assert providers(out, ["cast"]) == [DML]


@pytest.mark.parametrize("elem", [T.INT8, T.INT16, T.INT32, T.UINT8, T.UINT16, T.UINT32])
def test_cast_to_bool_the_dml_ep_gets_right_is_left_alone(elem):
    # measured on the real 1.24.4 DML EP (tests/runtime/directml/test_dml_deviations_real.py): ONNX's answer
    m = model([h.make_node("Cast", ["x"], ["y"], name="cast", to=T.BOOL)], [vi("x", elem, [3])],
              [vi("y", T.BOOL, [3])])
    _, rewrites, _ = optimize_for_dml(m)
    assert rewrites == []


def test_cast_from_double_to_bool_is_left_alone():
    # DML registers no double Equal: the rewrite would trade a DML node for a CPU one.
    m = model([h.make_node("Cast", ["x"], ["y"], name="cast", to=T.BOOL)], [vi("x", T.DOUBLE, [3])],
              [vi("y", T.BOOL, [3])])
    _, rewrites, _ = optimize_for_dml(m)
    assert rewrites == []


@settings(max_examples=40, deadline=None, derandomize=True)
@given(hnp.arrays(np.float32, st.integers(1, 20), elements=st.floats(width=32, allow_nan=True)))
def test_cast_to_bool_property(x):
    m = model([h.make_node("Cast", ["x"], ["y"], name="cast", to=T.BOOL)], [vi("x", T.FLOAT, [len(x)])],
              [vi("y", T.BOOL, [len(x)])])
    out, _, _ = optimize_for_dml(m)
    assert_bit_identical(m, out, {"x": x}, reference=False)


# --- Equal over bool -------------------------------------------------------------------------

def test_bool_equal_is_the_truth_table_and_moves_to_dml():
    a = np.array([False, False, True, True])
    b = np.array([False, True, False, True])
    m = model([h.make_node("Equal", ["a", "b"], ["y"], name="eq")], [vi("a", T.BOOL, [4]), vi("b", T.BOOL, [4])],
              [vi("y", T.BOOL, [4])])
    out, rewrites, _ = optimize_for_dml(m)
    assert_bit_identical(m, out, {"a": a, "b": b})
    assert providers(m, ["eq"]) == [CPU] and providers(out, ["eq"]) == [DML]
    assert rewrites[0].after["eq"] == [DML, DML]


# --- EyeLike at opset >= 22 and the opset down-conversion ------------------------------------

def _eye(opset, k, elem=T.FLOAT, dtype=None, extra=()):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    nodes = [h.make_node("ConstantOfShape", ["s"], ["z"], name="zeros",
                         value=h.make_tensor("v", elem, [1], [0])),
             h.make_node("EyeLike", ["z"], ["y"], name="eye", **attrs), *extra]
    out_elem = dtype if dtype is not None else elem
    outputs = [vi("y", out_elem, ["r", "c"])] + ([vi("n", T.FLOAT, ["r", "c"])] if extra else [])
    inputs = [vi("s", T.INT64, [2])] + ([vi("x", T.FLOAT, ["r", "c"])] if extra else [])
    return model(nodes, inputs, outputs, opset)


def _rms(opset):
    # RMSNormalization is new at opset 23: no opset-21 schema, so the model cannot go down to 21.
    return [h.make_node("RMSNormalization", ["x", "scale"], ["n"], name="rms")]


@pytest.mark.parametrize("k", [-5, -1, 0, 1, 3, 2**31, -2**31 - 5, 2**40])
@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (1, 1), (0, 3)])
@pytest.mark.parametrize("dtype", [None, T.INT32, T.INT64, T.DOUBLE])
def test_eyelike_23_rewrite_is_exact_when_the_opset_must_stay(k, shape, dtype):
    m = _eye(23, k, dtype=dtype, extra=_rms(23))
    scale = onnx.numpy_helper.from_array(np.ones((1,), np.float32), "scale")
    m.graph.initializer.append(scale)
    out, rewrites, notes = optimize_for_dml(m)
    assert any("opset 23 kept" in n and "rms" in n for n in notes)
    assert [r.kind.split(" (")[0] for r in rewrites] == ["EyeLike-22"]
    feeds = {"s": np.array(shape, np.int64), "x": np.ones(shape, np.float32)}
    assert_bit_identical(m, out, feeds, reference=False)
    # The EyeLike is on the CPU at opset 23; its replacement (Expand, Trilu, Trilu, Where) on DML.
    assert providers(m, ["eye"]) == [CPU]
    assert set(rewrites[0].after["eye"]) == {DML}


@pytest.mark.parametrize("k", [-2, 0, 1, 2**33])
def test_opset_22_goes_down_to_21_exactly(k):
    m = _eye(22, k)
    out, rewrites, notes = optimize_for_dml(m)
    assert notes == [] and [r.kind.split(" ->")[0] for r in rewrites] == ["opset 22"]
    assert {o.domain: o.version for o in out.opset_import}[""] == 21
    assert_bit_identical(m, out, {"s": np.array([3, 5], np.int64)})
    assert providers(m, ["eye"]) == [CPU] and providers(out, ["eye"]) == [DML]


def test_opset_down_conversion_keeps_the_exporter_s_annotations():
    """onnx's version converter drops node, graph, input and weight metadata_props and initializers'
    value_info (seen on a torch dynamo export: 6 KB 'saved' of stack traces and scopes): the
    down-converted model keeps them all."""
    m = _eye(22, 1)
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.array([3, 5], np.int64), "s"))
    m.graph.value_info.append(vi("s", T.INT64, [2]))
    for item in (*m.graph.node, m.graph, m.graph.input[0], m.graph.output[0], m.graph.initializer[0],
                 m.graph.value_info[0]):
        item.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=f"['{getattr(item, 'name', 'graph')}']")
    out, rewrites, _ = optimize_for_dml(m)
    assert [r.kind.split(" ->")[0] for r in rewrites] == ["opset 22"]
    assert {o.domain: o.version for o in out.opset_import}[""] == 21

    def annotations(model):
        g = model.graph
        items = [*g.node, g, *g.input, *g.output, *g.initializer, *g.value_info]
        return sorted((getattr(i, "name", ""), p.key, p.value) for i in items for p in i.metadata_props)
    assert annotations(out) == annotations(m) and len(annotations(m)) == 7
    assert "s" in {v.name for v in out.graph.value_info}


def test_downconversion_blockers_name_the_node():
    m = model([h.make_node("Cast", ["x"], ["y"], name="c", to=T.FLOAT, round_mode="up")],
              [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], 25)
    blockers = downconvert_blockers(m)
    assert blockers and "c (Cast)" in blockers[0] and "round_mode" in blockers[0]


# --- the command, and the real exports --------------------------------------------------------

def masks22_model():
    """A NonZero over int64, a float mask cast to bool, a bool Equal and an EyeLike, at opset 22:
    one node for each rewrite of `optimize --for dml`."""
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz"),
             h.make_node("Cast", ["f"], ["fb"], name="castb", to=T.BOOL),
             h.make_node("Equal", ["fb", "b"], ["eq"], name="beq"),
             h.make_node("EyeLike", ["f"], ["eye"], name="eye", k=1)]
    return model(nodes, [vi("x", T.INT64, [3, 4]), vi("f", T.FLOAT, [3, 4]), vi("b", T.BOOL, [3, 4])],
                 [vi("nz", T.INT64, [2, None]), vi("eq", T.BOOL, [3, 4]), vi("eye", T.FLOAT, [3, 4])], 22)


def test_cli_reports_each_rewrite_and_checks(tmp_path, capsys, monkeypatch):
    onnx.save(masks22_model(), str(tmp_path / "masks22.onnx"))
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(["optimize", "masks22.onnx", "-o", "masks21.onnx", "--for", "dml", "--check"], capsys)
    assert code == 0, err
    assert "eye: CPUExecutionProvider -> DmlExecutionProvider" in out
    assert "nz: CPUExecutionProvider -> DmlExecutionProvider (Equal nz_equal + Not nz_not + NonZero nz)" in out
    assert "castb: DmlExecutionProvider -> DmlExecutionProvider (Equal castb_equal + Not castb)" in out
    assert "beq: CPUExecutionProvider -> DmlExecutionProvider (Xor beq_xor + Not beq)" in out
    first, second = out.splitlines()[:2]
    assert first == f"DML EP placement modelled: {choose_table(None).describe()}"     # the table, named first
    assert second.startswith("opset 22 -> 21 ") and "4 -> 8 nodes" in out
    assert "check: bit-identical on onnxruntime CPU" in out


def test_cli_for_dml_refuses_generator_options(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_eye(21, 0), str(path))
    code, _, err = cli(["optimize", path, "-o", tmp_path / "o.onnx", "--for", "dml", "--min-bytes", "5"], capsys)
    assert code == 2 and "--for dml" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["gpt2.torchscript.onnx", "bert.dynamo.onnx", "t5_encoder.torchscript.onnx",
                                  "llama.torchscript.onnx"])
def test_real_exports_stay_bit_identical_and_nothing_leaves_dml(name, tmp_path, capsys):
    code, out, err = cli(["optimize", REAL / name, "-o", tmp_path / "o.onnx", "--for", "dml", "--check"], capsys)
    assert code == 0, err
    assert "check: bit-identical on onnxruntime CPU" in out
    optimized = onnx.load(str(tmp_path / "o.onnx"))
    _, rewrites, _ = optimize_for_dml(onnx.load(str(REAL / name)), str(REAL))
    assert rewrites, "each of these exports casts its attention mask to bool"
    for r in rewrites:
        for node in r.nodes:
            assert r.before[node] != DML or set(r.after[node]) == {DML}, (node, r.after[node])
    assert len(optimized.graph.node) > 0


def test_a_model_with_external_data_is_rewritten_from_any_working_directory(tmp_path, monkeypatch, capsys):
    """Weights left in their external file: the checker sees them as typed inputs, not as files
    beside the working directory (from elsewhere, the rewritten model was 'invalid': internal
    error, exit 3, and the opset down-conversion was silently kept)."""
    weight = (np.arange(600 * 512, dtype=np.float32) % 7).reshape(600, 512)      # past 1 MiB: left in its file
    # EyeLike-22 has no DML kernel and EyeLike-9 has one: the down-conversion moves it to DML
    m = model([h.make_node("MatMul", ["x", "w"], ["p"], name="mm"),
               h.make_node("NonZero", ["i"], ["nz"], name="nonzero"), h.make_node("EyeLike", ["e"], ["ey"], name="eye")],
              [vi("x", T.FLOAT, [2, 600]), vi("i", T.INT64, [3, 4]), vi("e", T.FLOAT, [3, 4])],
              [vi("p", T.FLOAT, [2, 512]), vi("nz", T.INT64, [2, None]), vi("ey", T.FLOAT, [3, 4])], opset=22)
    m.graph.initializer.append(onnx.numpy_helper.from_array(weight, "w"))
    folder = tmp_path / "model"
    folder.mkdir()
    onnx.save(m, str(folder / "m.onnx"), save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    out = tmp_path / "out.onnx"
    code, text, err = cli(["optimize", str(folder / "m.onnx"), "--for", "dml", "-o", str(out), "--check"], capsys)
    assert code == 0, err
    assert "opset 22 -> 21" in text and "bit-identical" in text
    written = onnx.load(str(out))
    assert written.opset_import[0].version == 21
    feeds = {"x": np.ones((2, 600), np.float32), "i": np.array([[0, 1, 0, 2]] * 3, np.int64),
             "e": np.zeros((3, 4), np.float32)}
    assert_bit_identical(onnx.load(str(folder / "m.onnx")), written, feeds, reference=False)


def test_a_down_conversion_that_moves_nothing_keeps_the_opset(tmp_path, capsys):
    """An opset-22 MatMul and NonZero have the same kernels at 21: converting changed the file and
    moved nothing (`0 nodes rewritten, 0 moved to DML`); the opset is kept and the note says why."""
    m = model([h.make_node("MatMul", ["x", "w"], ["p"], name="mm"), h.make_node("NonZero", ["p"], ["nz"], name="nz")],
              [vi("x", T.FLOAT, [2, 3]), vi("w", T.FLOAT, [3, 4])], [vi("nz", T.INT64, [2, None])], opset=22)
    onnx.save(m, str(tmp_path / "m.onnx"))
    code, text, err = cli(["optimize", str(tmp_path / "m.onnx"), "--for", "dml", "-o", str(tmp_path / "o.onnx")], capsys)
    assert code == 0, err
    assert "opset 22 kept (down-conversion to 21 would move no node to DML and change no copy and no failure" in text
    assert "opset 22 -> 21" not in text and onnx.load(str(tmp_path / "o.onnx")).opset_import[0].version == 22


# --- Reshape allowzero=1 with a -1 ---------------------------------------------------------------

def _reshape_allowzero(shape_nodes, shape_name, out_rank, dims=("n", 6), opset=18):
    nodes = shape_nodes + [h.make_node("Reshape", ["x", shape_name], ["y"], name="view", allowzero=1)]
    return model(nodes, [vi("x", T.FLOAT, list(dims))], [vi("y", T.FLOAT, [None] * out_rank)], opset)


def _const(name, values):
    return h.make_node("Constant", [], [name], name=f"{name}_c",
                       value=onnx.numpy_helper.from_array(np.array(values, np.int64), name))


def _dynamo_view():
    """torch's dynamo shape: Concat(Shape(x)[0:1], [-1, 3])."""
    return _reshape_allowzero([h.make_node("Shape", ["x"], ["s"], name="shape", start=0, end=1),
                               _const("tail", [-1, 3]),
                               h.make_node("Concat", ["s", "tail"], ["target"], name="cat", axis=0)], "target", 3)


@pytest.mark.parametrize("build", [lambda: _reshape_allowzero([_const("target", [-1, 3])], "target", 2),
                                   _dynamo_view], ids=["constant", "dynamo_concat"])
@pytest.mark.parametrize("rows", [0, 1, 4])
def test_reshape_allowzero_with_minus_one_becomes_allowzero_0_exactly(build, rows):
    m = build()
    out, rewrites, _ = optimize_for_dml(m)
    assert [r.kind for r in rewrites] == ["Reshape allowzero=1 with a -1 in its shape -> allowzero=0"]
    view = next(n for n in out.graph.node if n.name == "view")
    assert all(a.name != "allowzero" for a in view.attribute)
    assert (rewrites[0].failures_before, rewrites[0].failures_after) == (1, 0)
    assert "predicted DML EP failures 1 -> 0" in rewrites[0].lines()[0]
    x = np.random.default_rng(rows).standard_normal((rows, 6)).astype(np.float32)
    if rows == 0 and build is _dynamo_view:
        # the shape [0, -1, 3] holds a 0 beside the -1: invalid under allowzero=1 (ONNX's Reshape),
        # refused by onnx.reference before and after (onnxruntime's CPU EP answers the original anyway)
        for either in (m, out):
            with pytest.raises(ValueError):
                ReferenceEvaluator(either).run(None, {"x": x})
        return
    assert_bit_identical(m, out, {"x": x})


@pytest.mark.parametrize("shape_nodes,name", [([_const("target", [0, 3])], "target"),
                                               ([h.make_node("Shape", ["x"], ["target"], name="shape")], "target")],
                         ids=["a_zero_not_a_minus_one", "computed_shape"])
def test_reshape_allowzero_without_a_known_minus_one_is_left_alone(shape_nodes, name):
    """Where the shape may hold a 0 (and no -1), allowzero=1 changes the answer: it is kept."""
    _, rewrites, _ = optimize_for_dml(_reshape_allowzero(shape_nodes, name, 2))
    assert rewrites == []


def test_reshape_allowzero_in_a_body_is_rewritten_too():
    body = h.make_graph([_const("target", [-1]),
                         h.make_node("Reshape", ["x", "target"], ["flat"], name="body_view", allowzero=1)],
                        "then", [], [vi("flat", T.FLOAT, [None])])
    other = h.make_graph([h.make_node("Reshape", ["x", "minus_one"], ["flat2"], name="else_view")],
                         "else", [], [vi("flat2", T.FLOAT, [None])])
    m = model([_const("minus_one", [-1]), h.make_node("If", ["c"], ["y"], name="branch", then_branch=body,
                                                      else_branch=other)],
              [vi("x", T.FLOAT, [2, 3]), vi("c", T.BOOL, [])], [vi("y", T.FLOAT, [None])], opset=18)
    out, rewrites, _ = optimize_for_dml(m)
    assert rewrites[0].nodes == ["branch/then_branch/body_view"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for c in (True, False):
        assert_bit_identical(m, out, {"x": x, "c": np.array(c)})


@pytest.mark.parametrize("named", [True, False])
def test_a_body_rewritten_beside_its_parent_graph_is_kept(named):
    """A Cast to bool in the main graph and one in an If branch: both rewritten in the model returned
    (the branch's rewrite went to a copy of the If that the main graph's rewrite had replaced, while
    the report listed it), named or not, and bit-identical whichever branch runs."""
    then = h.make_graph([h.make_node("Cast", ["xf"], ["tb"], to=T.BOOL, name="inner" if named else "")], "then", [],
                        [vi("tb", T.BOOL, [len(EDGE_FLOATS)])])
    other = h.make_graph([h.make_node("IsNaN", ["xf"], ["eb"])], "else", [], [vi("eb", T.BOOL, [len(EDGE_FLOATS)])])
    m = model([h.make_node("Cast", ["xf"], ["xb"], to=T.BOOL, name="outer" if named else ""),
               h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if" if named else "")],
              [vi("xf", T.FLOAT, [len(EDGE_FLOATS)]), vi("c", T.BOOL, [])],
              [vi("xb", T.BOOL, [len(EDGE_FLOATS)]), vi("y", T.BOOL, [len(EDGE_FLOATS)])])
    out, rewrites, _ = optimize_for_dml(m)
    (rewrite,) = rewrites
    assert len(rewrite.nodes) == 2
    from onnx_dml_lowering.lowering.onnx_graphs import all_nodes
    assert not [n for _, n in all_nodes(out) if n.op_type == "Cast"]
    onnx.checker.check_model(out, full_check=True)
    for flag in (True, False):
        assert_bit_identical(m, out, {"xf": EDGE_FLOATS, "c": np.array(flag)})
