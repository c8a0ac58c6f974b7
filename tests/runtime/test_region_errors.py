"""A lowered run's ONNX region that fails at run time: one line naming a bounded number of its
nodes, and, under check, whether the oracle could not run those nodes on onnxruntime either."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.runtime.check import Tolerances, check
from onnx_dml_lowering.runtime.onnx_regions import RegionFailed
from onnx_dml_lowering.runtime.report import format_quiet
from tests.builders import graph_model


def rotary_region(relus: int):
    """`relus` Relu nodes, then a RotaryEmbedding whose caches have batch 1 for a batch-2 input: ONNX
    broadcasts them (onnx.reference runs it), onnxruntime 1.32's kernel refuses it at run time. A
    NonZero after it is lowered, so the Relu chain and the RotaryEmbedding make one ONNX region."""
    nodes = [h.make_node("Relu", ["x" if i == 0 else f"r{i - 1}"], [f"r{i}"], name=f"relu_{i}") for i in range(relus)]
    nodes += [h.make_node("RotaryEmbedding", [f"r{relus - 1}", "cos", "sin"], ["y"], name="rot"),
              h.make_node("NonZero", ["y"], ["nz"], name="nz")]
    return graph_model(nodes, [("x", T.FLOAT, [2, 2, 3, 4]), ("cos", T.FLOAT, [1, 3, 2]), ("sin", T.FLOAT, [1, 3, 2])],
                       [("y", T.FLOAT, [2, 2, 3, 4]), ("nz", T.INT64, [4, None])], opset=23)


def feeds():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((2, 2, 3, 4)).astype(np.float32),
            "cos": rng.standard_normal((1, 3, 2)).astype(np.float32),
            "sin": rng.standard_normal((1, 3, 2)).astype(np.float32)}


@pytest.mark.parametrize("relus", [1, 7, 60])
def test_a_failing_region_names_a_bounded_number_of_its_nodes(relus):
    compiled = compile_model(rotary_region(relus))
    with pytest.raises(RegionFailed) as caught:
        compiled.run(feeds())
    line = str(caught.value)
    assert "\n" not in line and "cos_cache" in line and len(caught.value.nodes) == relus + 1
    named = [f"relu_{i}" for i in range(relus) if f"relu_{i}," in line or f"relu_{i} " in line]
    if relus + 1 <= 8:
        assert len(named) == relus and "rot]" in line
    else:
        # the first three, the last two: ir/display.name_list
        assert named == ["relu_0", "relu_1", "relu_2", f"relu_{relus - 1}"] and f"rot ({relus + 1} nodes)]" in line


@pytest.mark.parametrize("backends", [["cpu"], ["cpu", "ort"]])
def test_check_says_the_oracle_could_not_run_them_on_onnxruntime_either(backends):
    _, report = check(compile_model(rotary_region(9)), feeds(), backends, Tolerances())
    (fallback,) = report.oracle["fallbacks"]
    assert fallback["node"] == "rot" and fallback["engine"] == "onnx.reference"
    for backend in report.backends:
        assert backend.error.endswith("; the oracle could not run rot on onnxruntime either and evaluated it by "
                                      "onnx.reference (the full report's oracle: lines say why)")
        assert "(10 nodes)" in backend.error
    assert format_quiet(report).count("the oracle could not run rot") == len(backends)


def test_a_region_the_oracle_ran_says_nothing_of_it():
    """The same region failing where the oracle's onnxruntime run did not fail: no such words."""
    from onnx_dml_lowering.runtime.check import CheckRun
    run = CheckRun(compile_model(rotary_region(2)), feeds(), ["cpu"], Tolerances())
    run.prepare()
    assert run._oracle_failed_too(RegionFailed("ONNX region r [a] failed", ("relu_0", "relu_1"))) == ""
