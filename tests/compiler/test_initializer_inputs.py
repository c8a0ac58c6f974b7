"""Initializers that are also graph inputs (IR < 4 models, keep_initializers_as_inputs exports): unfed,
the initializer is the default; fed, the feed wins, shape included, on every backend and oracle.
The oracle here is onnx.reference on the same graph with x a plain input fed what should be used."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.optimize import optimize_model
from onnx_dml_lowering.runtime.check import Tolerances, check
from tests.builders import graph_model
from tests.oracle import assert_outputs_same, reference

DEFAULT = np.array([[1, 0, 2, 0], [0, 0, 3, 0], [4, 0, 0, 5]], np.float32)
OUTPUTS = [("eye", T.FLOAT, ["a", "b"]), ("nz", T.INT64, [2, None]), ("tri", T.FLOAT, ["a", "b"]),
           ("relu", T.FLOAT, ["a", "b"])]


def _nodes():
    return [h.make_node("EyeLike", ["x"], ["eye"], k=1), h.make_node("NonZero", ["x"], ["nz"]),
            h.make_node("Trilu", ["x"], ["tri"], upper=0), h.make_node("Relu", ["x"], ["relu"])]


def with_default(ir_version: int):
    model = graph_model(_nodes(), [("x", T.FLOAT, ["a", "b"])], OUTPUTS, opset=14)
    model.graph.initializer.append(numpy_helper.from_array(DEFAULT, "x"))
    model.ir_version = ir_version
    return model


def plain():
    return graph_model(_nodes(), [("x", T.FLOAT, ["a", "b"])], OUTPUTS, opset=14)


FEEDS = {
    "unfed": None,
    "same shape": np.arange(12, dtype=np.float32).reshape(3, 4) % 3,
    "other shape": (np.arange(10, dtype=np.float32).reshape(2, 5) % 4),
    "wide": np.ones((2, 7), np.float32),
}


@pytest.mark.parametrize("ir_version", [3, 8])
@pytest.mark.parametrize("feed", list(FEEDS))
def test_feed_wins_default_otherwise(ir_version: int, feed: str) -> None:
    value = FEEDS[feed]
    feeds = {} if value is None else {"x": value}
    expected = reference(plain(), {"x": DEFAULT if value is None else value})
    compiled = compile_model(with_default(ir_version))
    for backend in ("cpu", "ort"):
        assert_outputs_same(compiled.run(feeds, backend=backend), expected)
    for oracle in ("hybrid", "reference", "ort-cpu"):
        _, report = check(compiled, feeds, ["cpu", "ort", "ort-cpu"], Tolerances(), oracle=oracle)
        statuses = {(o.backend, o.output): o.status for b in report.backends for o in b.outputs}
        # ort-cpu runs the file as shipped: below IR version 4 onnxruntime takes the initializer as
        # a constant (no input x), so a feed cannot override it there: a MISMATCH, as it is
        if ir_version < 4 and value is not None:
            shipped = {k: v for k, v in statuses.items() if k[0] == "ort-cpu"}
            assert "mismatch" in shipped.values(), shipped
            assert_outputs_same(report.backends[2].values, reference(plain(), {"x": DEFAULT}))
            statuses = {k: v for k, v in statuses.items() if k[0] != "ort-cpu"}
        assert set(statuses.values()) == {"match"}, statuses
        assert_outputs_same(report.expected, expected)
        assert list(report.defaults) == (["x"] if value is None else [])


def test_cli_says_which_defaults_were_used(tmp_path, capsys) -> None:
    import onnx
    path = tmp_path / "m.onnx"
    onnx.save(with_default(3), str(path))
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "inputs not fed, their initializer used as the default: x (float32 [3x4])" in out
    report = tmp_path / "r.json"
    assert main(["check", str(path), "--backends", "cpu,ort-cpu", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "initializer used as the default: x (float32 [3x4])" in out
    assert json.loads(report.read_text())["initializer_defaults"] == {"x": {"dtype": "float32", "shape": [3, 4]}}


def test_feed_initializers_draws_random_values_at_the_given_dims(tmp_path, capsys) -> None:
    import onnx
    path = tmp_path / "m.onnx"
    onnx.save(with_default(8), str(path))
    saved = tmp_path / "feeds.npz"
    assert main(["check", str(path), "--feed-initializers", "--dim", "a=2", "--dim", "b=6", "--backends",
                 "cpu,ort,ort-cpu", "--save-inputs", str(saved), "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "initializer used as the default" not in out and "MISMATCH" not in out
    with np.load(saved) as data:
        x = data["x"]
    assert x.shape == (2, 6) and not np.array_equal(x[:2, :4], DEFAULT[:2])
    compiled = compile_model(with_default(8))
    # atol 0: values equal (onnxruntime's Relu keeps -0.0 where onnx.reference gives +0.0)
    assert_outputs_same(compiled.run({"x": x}), reference(plain(), {"x": x}), atol=0.0)


# -- every pass, random overrides ------------------------------------------------------------------
# Models where an initializer that is also a graph input sizes or steers what is lowered: the shape
# of a ConstantOfShape (EyeLike / Trilu over it, the idioms), a Reshape's target (NonZero, Trilu
# after it), Range limits (torch.eye's idiom), Trilu's k, EyeLike's own input. Each is run fed a
# random subset of its defaults, with random values and (where declared symbolic) shapes; the
# oracle is onnx.reference on the same graph with no initializers, fed every value used.

def _fill(value=1.0) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array([value], np.float32))


def _case(nodes, inputs, outputs, defaults: "dict[str, np.ndarray]", opset: int = 14):
    model = graph_model(nodes, inputs, outputs, opset=opset)
    model.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in defaults.items())
    return model


def without_defaults(model) -> "onnx.ModelProto":
    """The oracle's model: the same graph whose defaults are plain inputs (constants kept)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inputs = {vi.name for vi in model.graph.input}
    kept = [t for t in out.graph.initializer if t.name not in inputs]
    del out.graph.initializer[:]
    out.graph.initializer.extend(kept)
    return out

DIMS = st.integers(0, 5)
SHAPES_2D = st.lists(st.integers(1, 5), min_size=2, max_size=2)


def eye_of_fill(as_output: bool):
    """EyeLike(ConstantOfShape(shp)); with c also an output the EyeLike is lowered on its own."""
    outputs = [("y", T.FLOAT, 2)] + ([("c", T.FLOAT, 2)] if as_output else [])
    return _case([h.make_node("ConstantOfShape", ["shp"], ["c"], value=_fill()),
                  h.make_node("EyeLike", ["c"], ["y"], k=1)],
                 [("shp", T.INT64, [2])], outputs, {"shp": np.array([3, 3], np.int64)})


def trilu_of_fill():
    """Trilu(ConstantOfShape(shp), k): shp of any length >= 2 (declared symbolic), k a default too."""
    return _case([h.make_node("ConstantOfShape", ["shp"], ["c"], value=_fill(-2.0)),
                  h.make_node("Trilu", ["c", "k"], ["tri"], upper=0),
                  h.make_node("Reshape", ["tri", "flat"], ["y"])],
                 [("shp", T.INT64, ["rank"]), ("k", T.INT64, [])], [("y", T.FLOAT, [None])],
                 {"shp": np.array([3, 3], np.int64), "k": np.array(0, np.int64)})


def reshaped():
    """NonZero and Trilu of Reshape(x, shp), EyeLike of Reshape(x, eye_shp)."""
    return _case([h.make_node("Reshape", ["x", "shp"], ["r"]),
                  h.make_node("NonZero", ["r"], ["nz"]),
                  h.make_node("Trilu", ["r", "k"], ["tri"], upper=1),
                  h.make_node("Reshape", ["tri", "flat"], ["tri_flat"]),
                  h.make_node("Reshape", ["x", "eye_shp"], ["r2"]),
                  h.make_node("EyeLike", ["r2"], ["eye"])],
                 [("x", T.FLOAT, [12]), ("shp", T.INT64, ["rank"]), ("k", T.INT64, []),
                  ("eye_shp", T.INT64, [2])],
                 [("nz", T.INT64, [None, None]), ("tri_flat", T.FLOAT, [None]), ("eye", T.FLOAT, 2)],
                 {"shp": np.array([3, 4], np.int64), "k": np.array(1, np.int64),
                  "eye_shp": np.array([2, 6], np.int64)})


def eye_of_ranges():
    """torch.eye(n, m) from Ranges whose limits are defaults (eye_from_ranges)."""
    return _case([h.make_node("Range", ["zero", "n", "one"], ["r0"]),
                  h.make_node("Range", ["zero", "m", "one"], ["r1"]),
                  h.make_node("Unsqueeze", ["r0", "axes"], ["u"]),
                  h.make_node("Equal", ["u", "r1"], ["eq"]),
                  h.make_node("Cast", ["eq"], ["y"], to=T.FLOAT)],
                 [("n", T.INT64, []), ("m", T.INT64, [])], [("y", T.FLOAT, 2)],
                 {"n": np.array(3, np.int64), "m": np.array(4, np.int64)}, opset=13)


def with_constants(model, constants: "dict[str, np.ndarray]"):
    """Initializers that are not inputs (constants every pass may fold)."""
    model.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in constants.items())
    return model


FLAT = {"flat": np.array([-1], np.int64)}
CASES = {
    "eyelike_of_fill": lambda: eye_of_fill(False),
    "eyelike_of_fill_output": lambda: eye_of_fill(True),
    "trilu_of_fill": lambda: with_constants(trilu_of_fill(), FLAT),
    "reshaped": lambda: with_constants(reshaped(), FLAT),
    "eye_of_ranges": lambda: with_constants(eye_of_ranges(), {"zero": np.array(0, np.int64),
                                                              "one": np.array(1, np.int64),
                                                              "axes": np.array([1], np.int64)}),
}


@st.composite
def overrides(draw, case: str) -> "dict[str, np.ndarray]":
    """Feeds for a random subset of the case's defaults (and its plain inputs)."""
    feeds: "dict[str, np.ndarray]" = {}
    if case.startswith("eyelike_of_fill"):
        candidates = {"shp": st.builds(lambda d: np.array(d, np.int64), SHAPES_2D)}
    elif case == "trilu_of_fill":
        candidates = {"shp": st.builds(lambda d: np.array(d, np.int64),
                                       st.lists(st.integers(1, 4), min_size=2, max_size=4)),
                      "k": st.builds(lambda k: np.array(k, np.int64), st.integers(-5, 5))}
    elif case == "reshaped":
        factorings = [[12], [3, 4], [4, 3], [2, 6], [6, 2], [2, 2, 3], [3, 2, 2], [1, 12, 1]]
        feeds["x"] = draw(st.builds(lambda v: np.array(v, np.float32).reshape(12),
                                    st.lists(st.sampled_from([0.0, 1.0, -2.5]), min_size=12, max_size=12)))
        candidates = {"shp": st.builds(lambda d: np.array(d, np.int64),
                                       st.sampled_from([f for f in factorings if len(f) >= 2])),
                      "k": st.builds(lambda k: np.array(k, np.int64), st.integers(-4, 4)),
                      "eye_shp": st.builds(lambda d: np.array(d, np.int64),
                                           st.sampled_from([[3, 4], [4, 3], [2, 6], [12, 1], [1, 12]]))}
    else:
        candidates = {"n": st.builds(lambda n: np.array(n, np.int64), DIMS),
                      "m": st.builds(lambda n: np.array(n, np.int64), DIMS)}
    for name, values in candidates.items():
        if draw(st.booleans()):
            feeds[name] = draw(values)
    return feeds


def all_values(model, feeds) -> "dict[str, np.ndarray]":
    """What the oracle is fed: every input, the default where no feed replaces it."""
    inputs = {vi.name for vi in model.graph.input}
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if t.name in inputs}
    values.update(feeds)
    return values


@pytest.mark.parametrize("case", sorted(CASES))
@given(data=st.data())
def test_overrides_reach_every_pass(case: str, data) -> None:
    model = CASES[case]()
    feeds = data.draw(overrides(case))
    expected = reference(without_defaults(model), all_values(model, feeds))
    compiled = compile_model(model)
    for backend in ("cpu", "ort"):
        assert_outputs_same(compiled.run(feeds, backend=backend), expected)
    optimized, _, _ = optimize_model(model)
    assert_outputs_same(reference(optimized, feeds), expected)


def test_issue_model_fed_another_shape_everywhere(tmp_path, capsys) -> None:
    """EyeLike(ConstantOfShape(shp)) with the ConstantOfShape also an output, shp's default [3, 3]
    fed [2, 5]: run (API and CLI) and check answer [2, 5] on every backend and oracle."""
    model = eye_of_fill(True)
    feeds = {"shp": np.array([2, 5], np.int64)}
    expected = reference(without_defaults(model), feeds)
    compiled = compile_model(model)
    for oracle in ("hybrid", "reference", "ort-cpu"):
        _, report = check(compiled, feeds, ["cpu", "ort", "ort-cpu"], Tolerances(), oracle=oracle)
        assert {o.status for b in report.backends for o in b.outputs} == {"match"}
        assert_outputs_same(report.expected, expected)
    path, saved = tmp_path / "m.onnx", tmp_path / "feeds.npz"
    onnx.save(model, str(path))
    np.savez(saved, **feeds)
    out = tmp_path / "out.npz"
    assert main(["run", str(path), "--inputs", str(saved), "--save-outputs", str(out)]) == 0
    with np.load(out) as data:
        assert_outputs_same({name: data[name] for name in expected}, expected)
    assert main(["check", str(path), "--inputs", str(saved), "--backends", "cpu,ort,ort-cpu"]) == 0
    assert "MISMATCH" not in capsys.readouterr().out


def test_compile_dims_never_specialises_at_a_default() -> None:
    """compile --dim: a step sized by a default a feed may replace is symbolic, not specialised at
    the stored value (the NonZero sized by the named dimensions is specialised)."""
    from onnx_dml_lowering.compiler.specialise import specialise
    model = _case([h.make_node("ConstantOfShape", ["shp"], ["c"], value=_fill()),
                   h.make_node("EyeLike", ["c"], ["eye"]), h.make_node("NonZero", ["x"], ["nz"])],
                  [("shp", T.INT64, [2]), ("x", T.FLOAT, ["a", "b"])],
                  [("eye", T.FLOAT, 2), ("nz", T.INT64, [2, None])], {"shp": np.array([3, 3], np.int64)})
    spec = specialise(compile_model(model), {"a": 2, "b": 4})
    status = {s["rule"]: s for s in spec["steps"]}
    assert status["eyelike_constant_of_shape"]["status"] == "symbolic"
    assert "'shp'" in status["eyelike_constant_of_shape"]["reason"]
    assert status["nonzero"]["status"] == "specialised" and status["nonzero"]["input_shapes"] == {"x": [2, 4]}
