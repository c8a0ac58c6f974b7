"""onnx's backend test runner drives backend: NonZero / EyeLike node tests and a
selection of ordinary ones (which run as ONNX regions)."""
import re

import numpy as np
import onnx.backend.test
from onnx import TensorProto as T
from onnx import helper

from onnx_dml_lowering.compiler import backend
from tests.builders import single_node_model
from tests.oracle import assert_same

INCLUDE = re.compile(r"test_(nonzero.*|eyelike.*|relu.*|add|transpose_default.*|gathernd_example.*"
                     r"|cast_FLOAT_to_DOUBLE.*|equal|where_example.*)_cpu$")

backend_test = onnx.backend.test.BackendTest(backend, __name__)
backend_test.include(INCLUDE.pattern)
# Keep only the selected tests (the runner would otherwise report thousands of skips).
CASES = backend_test.test_cases          # a property that builds new classes on every access
for case in CASES.values():
    for name in [n for n in vars(case) if n.startswith("test_") and not INCLUDE.match(n)]:
        delattr(case, name)
globals().update(CASES)


def test_node_tests_were_selected():
    names = [n for case in CASES.values() for n in vars(case) if n.startswith("test_")]
    assert any("nonzero" in n for n in names) and any("eyelike" in n for n in names)


def test_run_node_and_supports_device():
    node = helper.make_node("EyeLike", ["x"], ["y"], k=1)
    x = np.zeros((3, 4), np.float32)
    (y,) = backend.run_node(node, [x], outputs_info=[(np.float32, (3, 4))])
    assert_same(y, np.eye(3, 4, 1, dtype=np.float32))
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")


def test_prepare_runs_repeatedly():
    rep = backend.prepare(single_node_model("NonZero", T.INT32, (2, 3), T.INT64))
    for seed in range(3):
        x = np.random.default_rng(seed).integers(0, 2, (2, 3)).astype(np.int32)
        (y,) = rep.run([x])
        assert_same(y, np.array(np.nonzero(x), np.int64))
