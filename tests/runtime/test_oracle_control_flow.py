"""The oracles on If / Loop / Scan (issue #26): Loop scan outputs of rank 0 to 3, carried values,
an empty condition input, M given or not, zero trips, nested constructs, and body nodes
onnxruntime has no kernel for (NonZero on int8, Relu on int16), evaluated by the hybrid and the
reference oracle and compared with a plain numpy evaluation of the constructs as ONNX defines
them (tests/control_flow_spec.py); `check` on each with every oracle, its verdicts computed from
that evaluation and from onnxruntime's own answer (the ort-cpu oracle takes onnxruntime's answer,
so the lowered run MATCHes it exactly where onnxruntime follows ONNX)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.check import make_oracle
from onnx_dml_lowering.runtime.oracle import HOST
from tests.builders import IR_VERSION
from tests.cli_runner import cli
from tests.control_flow_spec import spec_outputs
from tests.oracle import assert_outputs_same

V = h.make_tensor_value_info
N = h.make_node
OPSET = 17          # Relu on int16 (from opset 14), which onnxruntime's CPU provider has no kernel for
SEED = 20261126


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "control_flow", inputs, outputs, list(inits))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    onnx.checker.check_model(model, full_check=True)
    return model


def _axis0(name: str) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array([0], np.int64), name)


def loop_model(ranks=(0, 1, 2, 3), carried=True, trip=True, cond=True, x_type=T.FLOAT, relu16=False,
               counter_out=False, prefix="") -> "tuple[onnx.NodeProto, list, list, list]":
    """A Loop over captured x ([2, 3]): carried acc += float(x) (through Relu on int16 if relu16);
    scan outputs: rank 0 float(i), rank 1 Shape(NonZero(x)), rank 2 NonZero(x), rank 3
    Unsqueeze(acc or float(x)); the body's cond is i < limit; counter_out: i itself as a scan
    output. Returns (node, its outer inputs, its outputs, outer initializers)."""
    p = prefix
    nodes, source = [], "x"
    if relu16:
        nodes += [N("Cast", ["x"], [p + "x16"], to=T.INT16), N("Relu", [p + "x16"], [p + "r16"])]
        source = p + "r16"
    nodes += [N("Cast", [source], [p + "xf"], to=T.FLOAT), N("Less", [p + "i", "limit"], [p + "c_out"]),
              N("NonZero", ["x"], [p + "nz"])]
    inputs = [V(p + "i", T.INT64, []), V(p + "c_in", T.BOOL, [])]
    outputs = [V(p + "c_out", T.BOOL, [])]
    if carried:
        nodes.append(N("Add", [p + "acc_in", p + "xf"], [p + "acc_out"]))
        inputs.append(V(p + "acc_in", T.FLOAT, [2, 3]))
        outputs.append(V(p + "acc_out", T.FLOAT, [2, 3]))
    scans = {0: (N("Cast", [p + "i"], [p + "s0"], to=T.FLOAT), T.FLOAT, []),
             1: (N("Shape", [p + "nz"], [p + "s1"]), T.INT64, [2]),
             2: (N("Identity", [p + "nz"], [p + "s2"]), T.INT64, [2, None]),
             3: (N("Unsqueeze", [p + ("acc_out" if carried else "xf"), p + "axis0"], [p + "s3"]), T.FLOAT, [1, 2, 3])}
    for rank in ranks:
        node, elem, shape = scans[rank]
        nodes.append(node)
        outputs.append(V(node.output[0], elem, shape))
    if counter_out:
        outputs.append(V(p + "i", T.INT64, []))
    body = h.make_graph(nodes, p + "body", inputs, outputs, [_axis0(p + "axis0")])
    loop_inputs = ["M" if trip else "", "c" if cond else ""] + (["acc0"] if carried else [])
    out_names = ([p + "acc"] if carried else []) + [p + f"scan{r}" for r in ranks] + ([p + "counts"] if counter_out else [])
    outer_inputs = [V("x", x_type, [2, 3]), V("limit", T.INT64, [])]
    outer_inputs += [V("M", T.INT64, [])] if trip else []
    outer_inputs += [V("c", T.BOOL, [])] if cond else []
    outer_inputs += [V("acc0", T.FLOAT, [2, 3])] if carried else []
    elems = {0: T.FLOAT, 1: T.INT64, 2: T.INT64, 3: T.FLOAT}
    outer_outputs = ([V(p + "acc", T.FLOAT, [2, 3])] if carried else []) + \
        [V(p + f"scan{r}", elems[r], [None] * (r + 1)) for r in ranks] + \
        ([V(p + "counts", T.INT64, [None])] if counter_out else [])
    return N("Loop", loop_inputs, out_names, name=p + "loop", body=body), outer_inputs, outer_outputs


def loop_case(**kwargs) -> onnx.ModelProto:
    node, inputs, outputs = loop_model(**kwargs)
    return _model([node], inputs, outputs)


def if_case(holds_loop: bool) -> onnx.ModelProto:
    """If(c): then NonZero(x) (or a Loop stacking it, empty cond), else NonZero(EyeLike(float x))
    (or it with a leading axis): the branches' shapes differ."""
    if holds_loop:
        loop, _, _ = loop_model(ranks=(2,), carried=False, cond=False, x_type=T.INT8, prefix="in_")
        then = h.make_graph([loop], "then", [], [V("in_scan2", T.INT64, [None, 2, None])])
        other_nodes = [N("NonZero", ["x"], ["nz_e"]), N("Unsqueeze", ["nz_e", "axis0"], ["y_e"])]
        out = V("y", T.INT64, [None, 2, None])
        extra = [V("M", T.INT64, []), V("limit", T.INT64, [])]
    else:
        then = h.make_graph([N("NonZero", ["x"], ["nz_t"])], "then", [], [V("nz_t", T.INT64, [2, None])])
        other_nodes = [N("Cast", ["x"], ["xf"], to=T.FLOAT), N("EyeLike", ["xf"], ["eye"]),
                       N("NonZero", ["eye"], ["y_e"])]
        out = V("y", T.INT64, [2, None])
        extra = []
    other = h.make_graph(other_nodes, "else", [], [V("y_e", T.INT64, [None] * (3 if holds_loop else 2))])
    node = N("If", ["c"], ["y"], name="if_node", then_branch=then, else_branch=other)
    return _model([node], [V("c", T.BOOL, []), V("x", T.INT8, [2, 3])] + extra, [out], [_axis0("axis0")])


def scan_case(x_type=T.FLOAT, layout=False) -> onnx.ModelProto:
    """Scan over xs: state acc += float(s); scan outputs of rank 0 (ReduceSum), 1 (Shape(NonZero(s))),
    2 (EyeLike(float s)), 3 (Unsqueeze); layout: input axis 1 backward, outputs on other axes,
    two of them reversed (onnx.reference implements neither)."""
    nodes = [N("Cast", ["s"], ["sf"], to=T.FLOAT), N("Add", ["acc_in", "sf"], ["acc_out"]),
             N("ReduceSum", ["sf"], ["r0"], keepdims=0), N("NonZero", ["s"], ["nz"]), N("Shape", ["nz"], ["r1"]),
             N("EyeLike", ["sf"], ["r2"]), N("Unsqueeze", ["sf", "axis0"], ["r3"])]
    body = h.make_graph(nodes, "body", [V("acc_in", T.FLOAT, [2, 3]), V("s", x_type, [2, 3])],
                        [V("acc_out", T.FLOAT, [2, 3]), V("r0", T.FLOAT, []), V("r1", T.INT64, [2]),
                         V("r2", T.FLOAT, [2, 3]), V("r3", T.FLOAT, [1, 2, 3])], [_axis0("axis0")])
    attrs = {}
    xs_shape = [4, 2, 3]
    if layout:
        attrs = dict(scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[0, 1, -1, 2],
                     scan_output_directions=[1, 0, 1, 0])
        xs_shape = [2, 4, 3]
    node = N("Scan", ["acc0", "xs"], ["acc", "o0", "o1", "o2", "o3"], name="scan", body=body, num_scan_inputs=1, **attrs)
    outputs = [V("acc", T.FLOAT, [2, 3])] + [V(f"o{k}", t, [None] * (k + 1))
                                             for k, t in enumerate([T.FLOAT, T.INT64, T.FLOAT, T.FLOAT])]
    return _model([node], [V("acc0", T.FLOAT, [2, 3]), V("xs", x_type, xs_shape)], outputs)


def nested_case() -> onnx.ModelProto:
    """Loop(M, cond) { If(i < 1) { Loop(2, no cond) { NonZero(int8 x) stacked } } else
    { NonZero(x) with a leading axis } -> its shape, stacked }, a carried acc beside."""
    inner, _, _ = loop_model(ranks=(2,), carried=False, cond=False, x_type=T.INT8, prefix="in_")
    inner.input[0] = "two"
    then = h.make_graph([inner, N("Shape", ["in_scan2"], ["shape_t"])], "then", [], [V("shape_t", T.INT64, [3])])
    other = h.make_graph([N("NonZero", ["x"], ["nz_e"]), N("Unsqueeze", ["nz_e", "axis0"], ["u_e"]),
                          N("Shape", ["u_e"], ["shape_e"])], "else", [], [V("shape_e", T.INT64, [3])])
    body = h.make_graph([N("Less", ["i", "one"], ["first"]),
                         N("If", ["first"], ["shape"], name="if_node", then_branch=then, else_branch=other),
                         N("Cast", ["x"], ["xf"], to=T.FLOAT), N("Add", ["acc_in", "xf"], ["acc_out"]),
                         N("Identity", ["c_in"], ["c_out"])], "body",
                        [V("i", T.INT64, []), V("c_in", T.BOOL, []), V("acc_in", T.FLOAT, [2, 3])],
                        [V("c_out", T.BOOL, []), V("acc_out", T.FLOAT, [2, 3]), V("shape", T.INT64, [3])])
    node = N("Loop", ["M", "c", "acc0"], ["acc", "shapes"], name="outer", body=body)
    inits = [_axis0("axis0"), numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array(2, np.int64), "two")]
    return _model([node], [V("x", T.INT8, [2, 3]), V("M", T.INT64, []), V("c", T.BOOL, []), V("acc0", T.FLOAT, [2, 3]),
                           V("limit", T.INT64, [])],
                  [V("acc", T.FLOAT, [2, 3]), V("shapes", T.INT64, [None, 3])], inits)


def scan_holding_loop_case() -> onnx.ModelProto:
    """Scan over xs whose body runs a Loop (M only) stacking float(i) and NonZero(int8 x) per slice."""
    inner, _, _ = loop_model(ranks=(0, 2), carried=False, cond=False, x_type=T.INT8, prefix="in_")
    body = h.make_graph([N("Add", ["acc_in", "s"], ["acc_out"]), inner], "body",
                        [V("acc_in", T.FLOAT, [3]), V("s", T.FLOAT, [3])],
                        [V("acc_out", T.FLOAT, [3]), V("in_scan0", T.FLOAT, [None]),
                         V("in_scan2", T.INT64, [None, 2, None])])
    node = N("Scan", ["acc0", "xs"], ["acc", "steps", "coords"], name="scan", body=body, num_scan_inputs=1)
    return _model([node], [V("acc0", T.FLOAT, [3]), V("xs", T.FLOAT, [2, 3]), V("x", T.INT8, [2, 3]),
                           V("M", T.INT64, []), V("limit", T.INT64, [])],
                  [V("acc", T.FLOAT, [3]), V("steps", T.FLOAT, [None, None]), V("coords", T.INT64, [None, None, 2, None])])


def _mask(rng, shape, dtype):
    values = rng.integers(-3, 4, shape) * (rng.random(shape) < 0.6)
    return values.astype(dtype)


def feeds_for(model: onnx.ModelProto, rng, **values) -> "dict[str, np.ndarray]":
    """Random x / xs / acc0 of the declared types, M = 3, c = True, limit = 10 unless given."""
    defaults = {"M": 3, "c": True, "limit": 10}
    feeds = {}
    for vi in model.graph.input:
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if vi.name in ("M", "limit", "c"):
            feeds[vi.name] = np.array(values.get(vi.name, defaults[vi.name]), dtype)
        else:
            feeds[vi.name] = _mask(rng, dims, dtype)
    return feeds


@dataclass
class Case:
    name: str
    build: Callable[[], onnx.ModelProto]
    feeds: dict          # M / c / limit overrides


CASES = [
    Case("loop_ranks_0_to_3_carried_M_and_cond", lambda: loop_case(), {}),
    Case("loop_stops_on_the_body_cond", lambda: loop_case(), {"limit": 1}),
    Case("loop_cond_false_runs_none", lambda: loop_case(), {"c": False}),
    Case("loop_zero_trips_stacks_nothing", lambda: loop_case(), {"M": 0}),
    Case("loop_empty_cond_ignores_the_body_cond", lambda: loop_case(cond=False), {"limit": 1}),
    Case("loop_no_M_is_a_while_loop", lambda: loop_case(trip=False), {"limit": 2}),
    Case("loop_scan_outputs_only", lambda: loop_case(ranks=(0, 3), carried=False), {}),
    Case("loop_counter_as_a_scan_output", lambda: loop_case(ranks=(0,), counter_out=True), {}),
    Case("loop_int8_nonzero_empty_cond", lambda: loop_case(ranks=(1, 2), cond=False, x_type=T.INT8), {}),
    Case("loop_int16_relu_empty_cond", lambda: loop_case(ranks=(0, 2, 3), cond=False, relu16=True), {}),
    Case("loop_int16_relu_no_semantic_node", lambda: _without_nonzero(loop_case(ranks=(0, 3), cond=False, relu16=True)),
         {}),
    Case("loop_int16_relu_carried_only", lambda: _without_nonzero(loop_case(ranks=(), cond=False, relu16=True)), {}),
    Case("if_then_int8_nonzero", lambda: if_case(False), {"c": True}),
    Case("if_else_eyelike", lambda: if_case(False), {"c": False}),
    Case("if_holding_an_empty_cond_loop", lambda: if_case(True), {"c": True}),
    Case("scan_ranks_0_to_3", lambda: scan_case(), {}),
    Case("scan_int8_nonzero", lambda: scan_case(T.INT8), {}),
    Case("scan_axes_and_directions", lambda: scan_case(layout=True), {}),
    Case("nested_loop_if_loop", nested_case, {}),
    Case("scan_holding_a_loop", scan_holding_loop_case, {"M": 2}),
]
CASE = {case.name: case for case in CASES}


def _without_nonzero(model: onnx.ModelProto) -> onnx.ModelProto:
    """The Loop body without its (unread) NonZero: no semantic node, only the int16 Relu onnxruntime
    cannot load keeps the Loop off onnxruntime."""
    body = model.graph.node[0].attribute[0].g
    keep = [n for n in body.node if n.op_type != "NonZero"]
    del body.node[:]
    body.node.extend(keep)
    return model


_COMPILED: dict = {}


def compiled_case(case: Case):
    if case.name not in _COMPILED:
        model = case.build()
        _COMPILED[case.name] = (model, compile_model(model))
    return _COMPILED[case.name]


@pytest.mark.parametrize("kind", ["hybrid", "reference"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_oracle_is_the_spec(case, kind):
    model, compiled = compiled_case(case)
    feeds = feeds_for(model, np.random.default_rng(SEED), **case.feeds)
    assert_outputs_same(make_oracle(compiled, kind).run(feeds), spec_outputs(model, feeds))


def _onnxruntime(model, feeds):
    """onnxruntime's own answer on the model as it is, or None when it cannot run it."""
    import onnxruntime as ort
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    except Exception:
        return None


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("kind", ["hybrid", "reference", "ort-cpu"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_check_verdicts(case, kind, tmp_path, capsys):
    model, _ = compiled_case(case)
    feeds = feeds_for(model, np.random.default_rng(SEED), **case.feeds)
    onnx.save(model, tmp_path / "m.onnx")
    np.savez(tmp_path / "feeds.npz", **feeds)
    code, out, err = cli(["check", tmp_path / "m.onnx", "--inputs", tmp_path / "feeds.npz", "--oracle", kind], capsys)
    spec = spec_outputs(model, feeds)
    expected = spec
    if kind == "ort-cpu":
        expected = _onnxruntime(model, feeds)
        if expected is None:        # no kernel for a node: one line, exit 2
            assert code == 2 and err.startswith("dml-lower: error: the ort-cpu oracle cannot evaluate the model")
            assert len(err.strip().splitlines()) == 1
            return
    differ = [name for name in spec if not _same(spec[name], expected[name])]
    for name in spec:
        assert f"[cpu] {name}: {'MISMATCH' if name in differ else 'MATCH'} " in out, (name, out)
    assert code == (1 if differ else 0), out + err


def test_host_runs_control_flow_holding_a_node_onnxruntime_cannot_load():
    """The issue's model: check exited 2 'could not place' (the empty-cond Loop went to onnxruntime
    whole, which has no int8 NonZero) while run worked."""
    model, compiled = compiled_case(CASE["loop_int8_nonzero_empty_cond"])
    oracle = make_oracle(compiled)
    oracle.run(feeds_for(model, np.random.default_rng(SEED)))
    assert oracle.node_engines()["loop"] == HOST
    model, compiled = compiled_case(CASE["loop_int16_relu_no_semantic_node"])      # no semantic node: placed by onnxruntime's load error
    oracle = make_oracle(compiled)
    oracle.run(feeds_for(model, np.random.default_rng(SEED)))
    engines = oracle.node_engines()
    assert engines["loop"] == HOST and engines["loop/body/Relu_1"] == "onnx.reference"


def test_the_reference_oracle_names_what_it_runs_on_the_host():
    model, compiled = compiled_case(CASE["loop_ranks_0_to_3_carried_M_and_cond"])
    oracle = make_oracle(compiled, "reference")
    oracle.run(feeds_for(model, np.random.default_rng(SEED)))
    (named,) = oracle.to_dict()["fallbacks"]
    assert named["node"] == "loop" and named["engine"] == HOST and "np.vstack" in named["reason"]
    model, compiled = compiled_case(CASE["scan_ranks_0_to_3"])
    oracle = make_oracle(compiled, "reference")
    oracle.run(feeds_for(model, np.random.default_rng(SEED)))
    assert oracle.to_dict()["fallbacks"] == []      # onnx.reference's Scan is right here: run whole


@pytest.mark.parametrize("ranks", [(), (0, 3)])
def test_an_onnx_region_onnxruntime_cannot_load_runs_its_loop_as_onnx_defines(ranks):
    """The lowered run's ONNX region holding the whole Loop falls back to onnx.reference where
    onnxruntime has no kernel (Relu on int16): its Loop ran an empty-cond Loop zero times (the
    carried value came back unchanged, silently) and failed on the scan outputs it concatenates."""
    model = _without_nonzero(loop_case(ranks=ranks, cond=False, relu16=True))
    compiled = compile_model(model)
    feeds = feeds_for(model, np.random.default_rng(SEED))
    assert_outputs_same(compiled.run(feeds), spec_outputs(model, feeds))
    (engine,) = compiled.session().regions.engines.values()
    assert engine.startswith("onnx.reference (onnxruntime cannot run it")


LOOP_FORMS = {"M_and_cond": {}, "empty_cond": {"cond": False}, "no_M": {"trip": False}}


@given(form=st.sampled_from(sorted(LOOP_FORMS)), trips=st.integers(0, 4), limit=st.integers(0, 5),
       cond=st.booleans(), seed=st.integers(0, 2**16), int8=st.booleans())
def test_loop_forms_follow_the_spec(form, trips, limit, cond, seed, int8):
    """Any trip count, cond and body cond, x with or without an onnxruntime kernel for its NonZero:
    both oracles give what ONNX defines."""
    key = f"loop_{form}_{int8}"
    if key not in _COMPILED:
        model = loop_case(x_type=T.INT8 if int8 else T.FLOAT, **LOOP_FORMS[form])
        _COMPILED[key] = (model, compile_model(model), {})
    model, compiled, oracles = _COMPILED[key]
    feeds = feeds_for(model, np.random.default_rng(seed), M=trips, c=cond, limit=limit)
    want = spec_outputs(model, feeds)
    for kind in ("hybrid", "reference"):
        oracle = oracles.setdefault(kind, make_oracle(compiled, kind))
        assert_outputs_same(oracle.run(feeds), want)


def test_a_body_run_whole_on_onnx_reference_builds_its_evaluator_once(monkeypatch):
    """The Loop inside the Scan's body runs on the host per slice; its body, which onnx.reference
    gets right, runs whole on one evaluator for every iteration of every slice."""
    from onnx_dml_lowering.runtime import oracle as oracle_module
    from onnx_dml_lowering.runtime import region_engine
    built = []
    real = oracle_module.reference_evaluator
    for module in (oracle_module, region_engine):      # whole models, and the engine's regions
        monkeypatch.setattr(module, "reference_evaluator", lambda model: built.append(model.graph.name) or real(model))
    model, compiled = compiled_case(CASE["scan_holding_a_loop"])
    feeds = feeds_for(model, np.random.default_rng(SEED), M=3)
    assert_outputs_same(make_oracle(compiled, "reference").run(feeds), spec_outputs(model, feeds))
    # the Scan body's Add region and the Loop's whole body: one evaluator each for 2 slices x 3 trips
    assert sorted(built) == ["in_loop/body", "oracle_region"]


def test_the_lowered_runs_reference_fallback_gives_no_oracle_advice(monkeypatch):
    from onnx.reference import ReferenceEvaluator

    def failing(self, *args, **kwargs):
        raise ValueError("broken evaluator")

    model = _without_nonzero(loop_case(ranks=(), cond=False, relu16=True))
    compiled = compile_model(model)
    monkeypatch.setattr(ReferenceEvaluator, "run", failing)
    with pytest.raises(DmlLowerError) as error:
        compiled.run(feeds_for(model, np.random.default_rng(SEED)))
    assert "broken evaluator" in str(error.value) and "oracle" not in str(error.value)
