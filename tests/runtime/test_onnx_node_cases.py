"""onnx's own backend node test cases for NonZero and EyeLike, run through the compiler."""
import warnings

import numpy as np
import pytest

from onnx_dml_lowering.compiler import compile_model
from tests.oracle import assert_same

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from onnx.backend.test.case.node import collect_testcases
    CASES = [c for c in collect_testcases(None) if c.name.startswith(("test_nonzero", "test_eyelike"))]


def test_cases_were_found():
    assert {c.name for c in CASES} >= {"test_nonzero_example", "test_eyelike_without_dtype",
                                       "test_eyelike_with_dtype", "test_eyelike_populate_off_main_diagonal"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("level", ["3_0", "4_0", "5_1", "6_4"])
def test_onnx_node_case(case, level):
    compiled = compile_model(case.model, feature_level=level)
    if level >= "5_1":
        assert all(p.status == "lowered" for p in compiled.placement), compiled.placement
    names_in = [i.name for i in case.model.graph.input]
    names_out = [o.name for o in case.model.graph.output]
    for inputs, outputs in case.data_sets:
        got = compiled.run(dict(zip(names_in, inputs)))
        for name, want in zip(names_out, outputs):
            assert_same(got[name], np.asarray(want), name, atol=case.atol, rtol=case.rtol)
