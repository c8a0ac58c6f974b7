"""dml-lower compile --dim: the run-time-sized steps specialised at the given sizes (through the
runtime's own specialisation), sizes checked against onnxruntime on the same model; steps sized by
feed values (a NonZero count) stay symbolic."""
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from onnx_dml_lowering.compiler import compile_model
from tests.cli_runner import cli
from onnx_dml_lowering.ir.tensor_desc import min_size_bytes
from onnx_dml_lowering.ir import DataType, graph_to_dict
from onnx_dml_lowering.runtime.weights import inline
from tests.builders import graph_model

REAL = Path(__file__).parent.parent / "models" / "real"
MASK_MODELS = ["gpt2.dynamo.onnx", "gpt2.torchscript.onnx", "llama.dynamo.onnx", "llama.torchscript.onnx",
               "mistral_sliding.dynamo.onnx", "mistral_sliding.torchscript.onnx"]


def compile_dims(path, dims, tmp_path, capsys):
    out_json = tmp_path / "compile.json"
    argv = ["compile", path, "--json", out_json]
    for name, size in dims.items():
        argv += ["--dim", f"{name}={size}"]
    code, out, err = cli(argv, capsys)
    assert code == 0, err
    return json.loads(out_json.read_text()), out


def ort_shapes(path, names, feeds) -> "dict[str, tuple]":
    """Shapes of intermediate values, by onnxruntime on the model with them as outputs."""
    model = compile_model(path, outputs=list(names)).model
    for tensor in model.graph.initializer:
        inline(tensor)          # a weight left in the file (LAZY_MIN_BYTES or more) goes back inline
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, (v.shape for v in session.run(list(names), feeds))))


@pytest.mark.parametrize("name", MASK_MODELS)
@pytest.mark.parametrize("batch, sequence", [(2, 5), (1, 9)])
def test_llm_mask_is_diagonal_matrix1_at_the_given_sizes(name, batch, sequence, tmp_path, capsys):
    data, out = compile_dims(REAL / name, {"batch": batch, "sequence": sequence}, tmp_path, capsys)
    assert {"feature_level", "placement", "graph", "specialised"} <= set(data)
    spec = data["specialised"]
    assert spec["dims"] == {"batch": batch, "sequence": sequence}
    (step,) = [s for s in spec["steps"] if s["rule"] == "range_comparison_mask"]
    assert step["status"] == "specialised"
    (op,) = step["operators"]
    assert op["operator"] == "DIAGONAL_MATRIX1"
    output = op["tensors"]["output"]
    # The mask's value as onnxruntime computes it at these sizes: its non-unit dims are the operator's.
    feeds = {"input_ids": np.zeros((batch, sequence), np.int64), "attention_mask": np.ones((batch, sequence), np.int64)}
    graph = data["graph"]
    (run_time,) = [s for s in graph["steps"] if s.get("onnx_node") == step["node"]]
    shapes = ort_shapes(REAL / name, run_time["outputs"], feeds)
    (mask_shape,) = shapes.values()
    assert [d for d in output["sizes"] if d != 1] == [d for d in mask_shape if d != 1][-2:] == [sequence, sequence]
    total = min_size_bytes(DataType[output["data_type"]], tuple(output["sizes"]), tuple(output["strides"]))
    assert output["total_size_in_bytes"] == total
    sizes = ",".join(str(d) for d in output["sizes"])
    strides = ",".join(str(d) for d in output["strides"])
    assert (f"output: {output['data_type']} Sizes {{{sizes}}} Strides {{{strides}}} "
            f"TotalTensorSizeInBytes {total}") in out
    assert f"run-time steps specialised at batch={batch}, sequence={sequence}:" in out


def count_dependent_model():
    """NonZero of a dynamic x (its sizes follow --dim), then a Trilu over a ConstantOfShape
    whose shape is the NonZero result's shape: sized by the count, so symbolic."""
    one = numpy_helper.from_array(np.array([1.0], np.float32))
    nodes = [h.make_node("NonZero", ["x"], ["nz"], name="nz"),
             h.make_node("Shape", ["nz"], ["nz_shape"], name="shape"),
             h.make_node("ConstantOfShape", ["nz_shape"], ["fill"], name="fill", value=one),
             h.make_node("Trilu", ["fill"], ["tri"], name="tri", upper=1)]
    return graph_model(nodes, [("x", T.FLOAT, ["n", "m"])], [("nz", T.INT64, [2, None]), ("tri", T.FLOAT, [2, None])],
                       opset=14)


@pytest.mark.parametrize("n, m", [(3, 4), (5, 2)])
def test_count_sized_step_stays_symbolic(n, m, tmp_path, capsys):
    path = tmp_path / "model.onnx"
    onnx.save(count_dependent_model(), str(path))
    data, out = compile_dims(path, {"n": n, "m": m}, tmp_path, capsys)
    steps = {s["node"]: s for s in data["specialised"]["steps"]}
    assert steps["nz"]["status"] == "specialised" and steps["nz"]["input_shapes"] == {"x": [n, m]}
    (op,) = [o for o in steps["nz"]["operators"] if o["operator"] == "NONZERO_COORDINATES"]
    x, coords = op["tensors"]["input"], op["tensors"]["output_coordinates"]
    assert int(np.prod(x["sizes"])) == n * m
    assert coords["sizes"][-2:] == [n * m, 2]     # room for every element: the count is read back
    # what follows the count keeps it as a symbol: no size one particular feed happened to give
    assert any(isinstance(d, str) for o in steps["nz"]["operators"] for t in o["tensors"].values()
               for d in t["sizes"])
    assert steps["tri"]["status"] == "symbolic" and "nz_shape" in steps["tri"]["reason"]
    assert "tri (rule trilu_constant_fill): symbolic: " in out


def test_unknown_dim_is_the_existing_error(capsys):
    code, out, err = cli(["compile", REAL / "gpt2.dynamo.onnx", "--dim", "seq=4"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert out == ""            # refused before the graph is printed, as run and check refuse it
    assert err.strip() == ("dml-lower: error: --dim seq: no input dimension has that name "
                           "(symbolic input dimensions: batch, sequence)")


def test_dims_past_memory_name_the_all_zero_feeds(tmp_path, capsys):
    """compile runs the model on all-zero feeds (nothing is drawn): a refusal says so."""
    path = tmp_path / "eye.onnx"
    onnx.save(graph_model([h.make_node("EyeLike", ["x"], ["y"], name="eye")], [("x", T.FLOAT, ["n", "m"])],
                          [("y", T.FLOAT, ["n", "m"])]), str(path))
    code, out, err = cli(["compile", path, "--dim", "n=500000000000", "--dim", "m=1"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert ("input 'x' of shape [500000000000, 1] needs 2,000,000,000,000 bytes (1.8 TiB); the all-zero feeds "
            "need 1.8 TiB, over the memory limit of") in err and "numpy's draws" not in err
    assert err.strip().endswith("(use smaller --dim values)")


def eyes_model() -> onnx.ModelProto:
    """Two run-time EyeLikes, [n, n] from x then [m, m] from z (each EyeLike(ConstantOfShape(s)))."""
    nodes = []
    for tag, source in (("1", "x"), ("2", "z")):
        nodes += [h.make_node("Shape", [source], [f"s{tag}"], name=f"shape{tag}"),
                  h.make_node("Concat", [f"s{tag}", f"s{tag}"], [f"ss{tag}"], name=f"cat{tag}", axis=0),
                  h.make_node("ConstantOfShape", [f"ss{tag}"], [f"c{tag}"], name=f"cos{tag}"),
                  h.make_node("EyeLike", [f"c{tag}"], [f"y{tag}"], name=f"eye{tag}")]
    return graph_model(nodes, [("x", T.FLOAT, ["n"]), ("z", T.FLOAT, ["m"])], [("y1", T.FLOAT, 2), ("y2", T.FLOAT, 2)])


def test_memory_limit_bounds_the_run_dim_makes(tmp_path, capsys):
    """compile --dim runs the model within --memory-limit: a step is specialised (its descriptors
    built) before its run allocates, so the step past the limit is still reported, and the steps
    the run did not reach say why, naming the option the command takes (exit 0: the descriptors
    are what compile shows; a symbolic dim past 32 bits must still show its decline)."""
    from onnx_dml_lowering.runtime.memory import format_size
    path, out_json = tmp_path / "eyes.onnx", tmp_path / "c.json"
    onnx.save(eyes_model(), str(path))
    n, m = 100, 2
    small = n * n * 4 - 1           # eye1's output buffer, n * n float32, by one byte
    argv = ["compile", path, "--dim", f"n={n}", "--dim", f"m={m}", "--json", out_json]
    code, out, err = cli([*argv, "--memory-limit", small], capsys)
    assert code == 0, err
    steps = {s["node"]: s for s in json.loads(out_json.read_text())["specialised"]["steps"]}
    assert steps["eye1"]["status"] == "specialised" and steps["eye2"]["status"] == "not reached"
    assert f"node eye1 at input shapes [(2,)], ss1 = [{n}, {n}] needs {format_size(n * n * 4)} of buffers, over the " \
           f"memory limit of {format_size(small)}" in steps["eye2"]["reason"]
    assert "raise --memory-limit" in steps["eye2"]["reason"] and "not reached" in out
    code, out, err = cli([*argv, "--memory-limit", "64MiB"], capsys)
    assert code == 0, err
    steps = {s["node"]: s for s in json.loads(out_json.read_text())["specialised"]["steps"]}
    assert [steps[e]["operators"][0]["tensors"]["output"]["sizes"] for e in ("eye1", "eye2")] == [[n, n], [m, m]]


def test_specialise_passes_its_memory_limit_to_the_run():
    from onnx_dml_lowering.compiler.specialise import specialise
    spec = specialise(compile_model(eyes_model()), {"n": 2, "m": 100}, memory_limit=100 * 100 * 4 - 1)
    assert [s["status"] for s in spec["steps"]] == ["specialised", "specialised"]   # eye2 built, then refused
    spec = specialise(compile_model(eyes_model()), {"n": 100, "m": 2}, memory_limit=100 * 100 * 4 - 1)
    assert [s["status"] for s in spec["steps"]] == ["specialised", "not reached"]
    assert "node eye1" in spec["steps"][1]["reason"]
    spec = specialise(compile_model(eyes_model()), {"n": 2, "m": 100}, memory_limit="1MiB")
    assert [s["status"] for s in spec["steps"]] == ["specialised", "specialised"]


def test_memory_limit_without_dim_is_refused(tmp_path, capsys):
    """Without --dim compile runs nothing: a --memory-limit would bound nothing, said, not ignored."""
    path = tmp_path / "eyes.onnx"
    onnx.save(eyes_model(), str(path))
    assert cli(["compile", path, "--memory-limit", "1GiB"], capsys) == \
        (2, "", "dml-lower: error: --memory-limit bounds the run --dim makes: add --dim\n")


def test_without_dim_the_json_is_unchanged(tmp_path, capsys):
    out_json = tmp_path / "c.json"
    assert cli(["compile", REAL / "gpt2.dynamo.onnx", "--json", out_json], capsys)[0] == 0
    assert set(json.loads(out_json.read_text())) == {"feature_level", "placement", "graph"}


def test_shape_inference_skips_data_propagation_over_a_flattened_weight(monkeypatch):
    """onnx's data propagation lists a rank-1 value it derives element by element: a large weight
    flattened then gathered from took 24 GB. Past DATA_PROP_ELEMENTS a plain pass decides (here
    the limit is lowered to a 100 x 100 weight)."""
    from onnx import shape_inference

    from onnx_dml_lowering.compiler import frontend
    calls = []
    real = shape_inference.infer_shapes

    def spy(model, *args, **kwargs):
        calls.append(kwargs.get("data_prop", False))
        return real(model, *args, **kwargs)
    monkeypatch.setattr(frontend.shape_inference, "infer_shapes", spy)
    monkeypatch.setattr(frontend, "DATA_PROP_ELEMENTS", 1000)
    weight = np.arange(10000, dtype=np.float32).reshape(100, 100)
    nodes = [h.make_node("Reshape", ["W", "flat"], ["w_flat"], name="flatten"),
             h.make_node("Gather", ["w_flat", "pick"], ["g"], name="gather"),
             h.make_node("NonZero", ["g"], ["nz"], name="nz")]
    model = graph_model(nodes, [("pick", T.INT64, [3])], [("nz", T.INT64, [1, None])],
                        initializers={"W": weight, "flat": np.array([-1], np.int64)})
    compiled = compile_model(model)
    assert calls == [False]                                     # the plain pass saw w_flat [10000]
    out = compiled.run({"pick": np.array([0, 5, 9999], np.int64)})
    assert out["nz"].tolist() == [[1, 2]]
    # the flattened size computed from Shape (as exporters write it): unknown to the plain pass
    computed = [h.make_node("Shape", ["W"], ["s"], name="shape"),
                h.make_node("ReduceProd", ["s"], ["n"], name="prod", keepdims=1)] + nodes
    computed[2] = h.make_node("Reshape", ["W", "n"], ["w_flat"], name="flatten")
    model2 = graph_model(computed, [("pick", T.INT64, [3])], [("nz", T.INT64, [1, None])], initializers={"W": weight})
    calls.clear()
    assert compile_model(model2).run({"pick": np.array([0, 5, 9999], np.int64)})["nz"].tolist() == [[1, 2]]
    assert calls == [False]
    calls.clear()
    monkeypatch.setattr(frontend, "DATA_PROP_ELEMENTS", 1 << 24)
    compile_model(model)
    assert calls == [True]                                      # below the limit: data propagation as ever


def trilu_model(shape: list, k: int, upper: int) -> onnx.ModelProto:
    return graph_model([h.make_node("Trilu", ["x", "k"], ["y"], name="tri", upper=upper)],
                       [("x", T.FLOAT, shape)], [("y", T.FLOAT, shape)], {"k": np.array(k, np.int64)}, opset=14)


@pytest.mark.parametrize("k, upper", [(-2, 0), (3, 1), (0, 1), (10, 0)])
def test_a_specialised_operator_shows_its_descriptor_fields(k, upper, tmp_path, capsys):
    """tril(-2) / triu(3) become DIAGONAL_MATRIX1 fill ranges: at run-time sizes the text and JSON
    show the same fields as the compile of the model with those sizes fixed (ir.graph_to_dict)."""
    path = tmp_path / "tri.onnx"
    onnx.save(trilu_model(["b", "r", "c"], k, upper), str(path))
    data, out = compile_dims(path, {"b": 2, "r": 4, "c": 6}, tmp_path, capsys)
    (step,) = data["specialised"]["steps"]
    (op,) = step["operators"]
    static = graph_to_dict(compile_model(trilu_model([2, 4, 6], k, upper)).graph)
    (want,) = [s for s in static["steps"] if s["kind"] == op["operator"]]
    fields = {key: value for key, value in want.items() if key not in ("kind", *op["tensors"])}
    assert op["attributes"] == fields and {"fill_begin", "fill_end", "value"} <= set(fields)
    for key, value in fields.items():
        assert f"      {key}={value}\n" in out
