"""Run-time specialisations shared between portable matches (runtime/run_time_builds.py): the
graph built for one NonZero runs for every other of the same rule, type and shape under their own
names, with results equal to onnx.reference's; what differs in type, shape or rule, or a renaming
that is not one to one, is built on its own; compile --dim shows each step under its own names."""
import json

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.ir import Graph
from onnx_dml_lowering.lowering import Match
from onnx_dml_lowering.lowering.node import TensorInfo
from onnx_dml_lowering.runtime.run_time_builds import RunTimeBuilds
from tests.builders import graph_model
from tests.cli_runner import cli


def nonzero_model(types=(T.FLOAT, T.FLOAT, T.FLOAT), dims=("n", "n", "n"), transpose=(True, True, True)):
    """Three NonZero of run-time-sized inputs a0, a1, a2, each optionally transposed."""
    nodes, outputs = [], []
    for i, t in enumerate(transpose):
        nodes.append(h.make_node("NonZero", [f"a{i}"], [f"nz{i}" if t else f"y{i}"], name=f"nonzero{i}"))
        if t:
            nodes.append(h.make_node("Transpose", [f"nz{i}"], [f"y{i}"], name=f"transpose{i}", perm=[1, 0]))
        outputs.append((f"y{i}", T.INT64, 2))
    inputs = [(f"a{i}", onnx_type, [dim, 4]) for i, (onnx_type, dim) in enumerate(zip(types, dims))]
    return graph_model(nodes, inputs, outputs)


def feeds_for(model, sizes, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        dtype = {T.FLOAT: np.float32, T.INT32: np.int32, T.BOOL: np.bool_}[vi.type.tensor_type.elem_type]
        rows = sizes[vi.type.tensor_type.shape.dim[0].dim_param]
        feeds[vi.name] = (rng.integers(0, 3, (rows, 4)) * rng.integers(0, 2, (rows, 4))).astype(dtype)
    return feeds


def run_and_builds(model, feeds):
    compiled = compile_model(model)
    outputs = compiled.run(feeds)
    expected = dict(zip([o.name for o in model.graph.output], ReferenceEvaluator(model).run(None, feeds)))
    assert outputs.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_array_equal(outputs[name], value, err_msg=name)
        assert outputs[name].dtype == value.dtype and outputs[name].shape == value.shape
    builds = compiled.session("cpu").main.specialised
    return {key[0]: found.build for key, found in builds.by_call.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nonzero_of_one_type_and_shape_share_one_build_and_each_gets_its_own_values(seed):
    builds = run_and_builds(nonzero_model(), feeds_for(nonzero_model(), {"n": 5}, seed))
    assert set(builds) == {"nonzero0", "nonzero1", "nonzero2"}
    assert builds["nonzero0"] is builds["nonzero1"] is builds["nonzero2"]


@pytest.mark.parametrize("model, sizes, alone", [
    (nonzero_model(types=(T.FLOAT, T.INT32, T.FLOAT)), {"n": 5}, "nonzero1"),          # another type
    (nonzero_model(dims=("n", "m", "n")), {"n": 5, "m": 6}, "nonzero1"),              # another shape
    (nonzero_model(transpose=(True, True, False)), {"n": 5}, "nonzero2"),              # another rule
])
def test_what_differs_in_type_shape_or_rule_is_built_on_its_own(model, sizes, alone):
    builds = run_and_builds(model, feeds_for(model, sizes))
    others = [builds[n] for n in builds if n != alone]
    assert others[0] is others[1] and builds[alone] is not others[0]


def test_a_shared_build_runs_again_on_new_values_of_the_same_shape():
    model = nonzero_model()
    compiled = compile_model(model)
    for seed in range(3):
        feeds = feeds_for(model, {"n": 3}, seed)
        expected = ReferenceEvaluator(model).run(None, feeds)
        outputs = compiled.run(feeds)
        for name, value in zip(["y0", "y1", "y2"], expected):
            np.testing.assert_array_equal(outputs[name], value)
    assert len({id(f.build) for f in compiled.session("cpu").main.specialised.by_call.values()}) == 1


def fake_match(node, inputs, built):
    """A portable match of one-element inputs whose build records the names it was built for."""
    infos = tuple(TensorInfo(name, T.FLOAT, (1,)) for name in inputs)

    def build(shapes, values, level):
        built.append(tuple(shapes))
        graph = Graph(level)
        graph.inputs.extend(dict.fromkeys(inputs))
        graph.outputs.append(f"{node}_out")
        return graph
    return Match("fake", (node,), infos, (f"{node}_out",), build, portable=("fake",))


@pytest.mark.parametrize("first, second, shared", [
    (("x", "x"), ("y", "z"), False),      # the build reads x once: y and z cannot both be fed as x
    (("x", "z"), ("y", "y"), False),
    (("x", "x"), ("y", "y"), True),
    (("x", "w"), ("y", "z"), True),
])
def test_a_build_is_shared_only_under_a_one_to_one_renaming(first, second, shared):
    built: list = []
    builds = RunTimeBuilds(compile_model(nonzero_model()).graph.feature_level)
    tensors = {name: np.zeros(1, np.float32) for name in "xyzw"}
    a = builds.specialised("a", fake_match("a", first, built), tensors)
    b = builds.specialised("b", fake_match("b", second, built), tensors)
    assert (a.build is b.build) == shared and len(built) == (1 if shared else 2)
    if shared:
        assert set(b.feeds(tensors)) == set(first) and b.outputs({"a_out": 1}) == {"b_out": 1}


def test_compile_dims_shows_every_step_under_its_own_names(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    path.write_bytes(nonzero_model().SerializeToString())
    code, out, err = cli(["compile", path, "--dim", "n=5", "--json", tmp_path / "c.json"], capsys)
    assert code == 0, err
    steps = json.loads((tmp_path / "c.json").read_text())["specialised"]["steps"]
    assert [s["status"] for s in steps] == ["specialised"] * 3
    for i, step in enumerate(steps):
        assert step["node"] == f"nonzero{i}"
        assert step["graph"]["inputs"] == [f"a{i}"] and step["graph"]["outputs"] == [f"y{i}"]
        assert all(f"nonzero{i}" in b["name"] for b in step["graph"]["buffers"]), step["graph"]["buffers"]
