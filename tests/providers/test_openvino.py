"""Provider validation on OpenVINOExecutionProvider (device_type=CPU), run by `make openvino` in
.venv-openvino, where onnxruntime-openvino replaces onnxruntime. Every case runs; what OpenVINO
does differently from ONNX, and every NonZero / EyeLike it hands to the CPU provider, is asserted
by name against the table below (README "Execution providers"), so a change either way shows."""
from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnx_dml_lowering.compiler import compile_model, conformance, examples
from onnx_dml_lowering.compiler.conformance.cases import all_cases, nonzero_cases
from onnx_dml_lowering.runtime.ort.model import MAX_IR_VERSION

OPENVINO = "OpenVINOExecutionProvider"
pytestmark = [pytest.mark.openvino, pytest.mark.skipif(
    OPENVINO not in ort.get_available_providers(),
    reason=f"{OPENVINO} is not in this onnxruntime ({', '.join(ort.get_available_providers())}); "
           "`make openvino` builds .venv-openvino with onnxruntime-openvino")]


@pytest.fixture(scope="module")
def backend():
    from onnx_dml_lowering.runtime.backends import BackendOptions, provider_backend
    return conformance.CaseRunner(provider_backend(OPENVINO), options=BackendOptions(provider_options=["device_type=CPU"]))


def outcome(backend, case):
    from onnx.reference import ReferenceEvaluator
    expected = [[np.asarray(v) for v in ReferenceEvaluator(case.model).run(None, feeds)] for feeds in case.data_sets]
    return conformance.judge(backend, case.name, case.model, case.data_sets, expected, None)


def observed(cases, backend) -> "dict[str, tuple[str, str]]":
    """{case: (status, CPU fallback of the watched node or '')} for cases that are not a clean pass."""
    found = {}
    for case in cases:
        result = outcome(backend, case)
        fell = "fallback" if any("fell back" in n for n in result.fallbacks) else ""
        folded = "folded" if any("constant folding" in n for n in result.fallbacks) else (
            "vanished" if any("optimized graph" in n for n in result.fallbacks) else "")
        if result.status != "pass" or fell or folded:      # a node on the CPU provider: "partial"
            found[case.name] = (result.status, fell or folded, result.detail)
    return found


# Every case of the conformance grids that is not a clean pass on OpenVINO (onnxruntime-openvino
# 1.24.1; "partial": some node ran on CPUExecutionProvider), as (status, where the watched node
# ran: 'fallback' = CPUExecutionProvider, 'folded' = absent from the assignment with constant
# inputs, 'vanished' = absent although its input is a graph input: an optimization replaced it).
# Every case not listed passes with its nodes on OpenVINO.
EXPECTED = {
    'test_eyelike_double_input_3x5_k1': ('partial', 'fallback'),  #
    'test_eyelike_float_empty_0x4': ('partial', 'fallback'),  #
    'test_eyelike_float_empty_4x0': ('partial', 'fallback'),  #
    'test_eyelike_float_to_double': ('partial', 'fallback'),  #
    'test_eyelike_float_to_uint64': ('partial', 'fallback'),  #
    'test_eyelike_uint64_input_3x5_k1': ('partial', 'fallback'),  #
    'test_idiom_eye_from_ranges': ('partial', ''),  # its Range / Unsqueeze nodes ran on CPUExecutionProvider
    'test_idiom_eyelike_of_fill_k0': ('partial', 'fallback'),  #
    'test_idiom_eyelike_of_fill_k2': ('partial', 'fallback'),  #
    'test_idiom_eyelike_of_fill_km1099511627776': ('partial', 'fallback'),  #
    'test_idiom_nonzero_transpose_rank0': ('fail', 'fallback'),  # shape [0, 1], ONNX says [0, 0]
    'test_idiom_trilu_of_fill_upper0': ('partial', 'fallback'),  #
    'test_idiom_trilu_of_fill_upper1': ('partial', 'fallback'),  #
    'test_nonzero_bool_empty_0': ('partial', 'fallback'),  #
    'test_nonzero_bool_empty_0x4x2': ('partial', 'fallback'),  #
    'test_nonzero_bool_empty_2x0x1x3x1x1x1x2': ('partial', 'fallback'),  #
    'test_nonzero_bool_empty_3x0': ('partial', 'fallback'),  #
    'test_nonzero_bool_rank0': ('fail', 'fallback'),  # shape [1, 0], ONNX says [0, 0]
    'test_nonzero_double_empty_0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_empty_0x4x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_empty_2x0x1x3x1x1x1x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_empty_3x0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_rank0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_rank1': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_rank2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_rank3': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_rank4': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_rank5': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_rank6': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_rank7': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_double_rank8': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_float16_empty_0': ('pass', 'vanished'),  #
    'test_nonzero_float16_empty_0x4x2': ('pass', 'vanished'),  #
    'test_nonzero_float16_empty_2x0x1x3x1x1x1x2': ('pass', 'vanished'),  #
    'test_nonzero_float16_empty_3x0': ('pass', 'vanished'),  #
    'test_nonzero_float16_rank0': ('fail', 'vanished'),  # shape [1, 0], ONNX says [0, 0]
    'test_nonzero_float_empty_0': ('partial', 'fallback'),  #
    'test_nonzero_float_empty_0x4x2': ('partial', 'fallback'),  #
    'test_nonzero_float_empty_2x0x1x3x1x1x1x2': ('partial', 'fallback'),  #
    'test_nonzero_float_empty_3x0': ('partial', 'fallback'),  #
    'test_nonzero_float_rank0': ('fail', 'fallback'),  # shape [1, 0], ONNX says [0, 0]
    'test_nonzero_int16_empty_0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_int16_empty_0x4x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_int16_empty_2x0x1x3x1x1x1x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_int16_empty_3x0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_int16_rank0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_int32_empty_0': ('partial', 'fallback'),  #
    'test_nonzero_int32_empty_0x4x2': ('partial', 'fallback'),  #
    'test_nonzero_int32_empty_2x0x1x3x1x1x1x2': ('partial', 'fallback'),  #
    'test_nonzero_int32_empty_3x0': ('partial', 'fallback'),  #
    'test_nonzero_int32_rank0': ('fail', 'fallback'),  # shape [1, 0], ONNX says [0, 0]
    'test_nonzero_int64_empty_0': ('partial', 'fallback'),  #
    'test_nonzero_int64_empty_0x4x2': ('partial', 'fallback'),  #
    'test_nonzero_int64_empty_2x0x1x3x1x1x1x2': ('partial', 'fallback'),  #
    'test_nonzero_int64_empty_3x0': ('partial', 'fallback'),  #
    'test_nonzero_int64_rank0': ('fail', 'fallback'),  # shape [1, 0], ONNX says [0, 0]
    'test_nonzero_int64_rank1': ('fail', ''),  # shape [1, 6], ONNX says [1, 7]
    'test_nonzero_int64_rank2': ('fail', ''),  # shape [2, 9], ONNX says [2, 10]
    'test_nonzero_int64_rank4': ('fail', ''),  # shape [4, 11], ONNX says [4, 12]
    'test_nonzero_int64_rank6': ('fail', ''),  # shape [6, 13], ONNX says [6, 14]
    'test_nonzero_int64_rank7': ('fail', ''),  # shape [7, 17], ONNX says [7, 18]
    'test_nonzero_int64_rank8': ('fail', ''),  # shape [8, 17], ONNX says [8, 18]
    'test_nonzero_int8_empty_0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_int8_empty_0x4x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_int8_empty_2x0x1x3x1x1x1x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_int8_empty_3x0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_int8_rank0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint16_empty_0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint16_empty_0x4x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint16_empty_2x0x1x3x1x1x1x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint16_empty_3x0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint16_rank0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint32_empty_0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint32_empty_0x4x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint32_empty_2x0x1x3x1x1x1x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint32_empty_3x0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint32_rank0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_empty_0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_empty_0x4x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_empty_2x0x1x3x1x1x1x2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_empty_3x0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_rank0': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_rank1': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_rank2': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_rank3': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_rank4': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_rank5': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_rank6': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_rank7': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint64_rank8': ('unsupported', ''),  # NonZero(13)
    'test_nonzero_uint8_empty_0': ('partial', 'fallback'),  #
    'test_nonzero_uint8_empty_0x4x2': ('partial', 'fallback'),  #
    'test_nonzero_uint8_empty_2x0x1x3x1x1x1x2': ('partial', 'fallback'),  #
    'test_nonzero_uint8_empty_3x0': ('partial', 'fallback'),  #
    'test_nonzero_uint8_rank0': ('fail', 'fallback'),  # shape [1, 0], ONNX says [0, 0]
    # int64 narrowed to int32: a value non-zero only in the high word counts as zero
    'test_nonzero_int64_highword_8': ('fail', ''),  # shape [1, 1], ONNX says [1, 5]
    'test_nonzero_int64_highword_2x4': ('fail', ''),  # shape [2, 1], ONNX says [2, 5]
    'test_nonzero_int64_highword_2x2x2': ('fail', ''),  # shape [3, 1], ONNX says [3, 5]
    # ... and int64 Trilu wrong where the grid holds the int64 extremes (lower k=-2 keeps none of them)
    'test_trilu_int64_lower_k0': ('fail', ''),  # 1 of 24 values differ; first at [0, 0, 0]: -1
    'test_trilu_int64_lower_k1': ('fail', ''),  # 2 of 24 values differ; first at [0, 0, 0]: -1
    'test_trilu_int64_upper_k0': ('fail', ''),  # 1 of 24 values differ; first at [1, 2, 3]: 0
    'test_trilu_int64_upper_k1': ('fail', ''),  # 1 of 24 values differ; first at [1, 2, 3]: 0
    'test_trilu_int64_upper_km2': ('fail', ''),  # 2 of 24 values differ; first at [0, 0, 0]: -1
    # the else branch, NonZero(Relu(x)) with a NaN in x, finds one coordinate fewer than ONNX
    'test_control_if_nonzero': ('fail', ''),  # test_data_set_1: shape [2, 5], ONNX says [2, 6]
    'test_control_loop_eyelike': ('fail', ''),  # session fails: ... x node not found in graph cache
    'test_control_loop_nonzero': ('fail', ''),  # session fails: OpenVINO does not support ... EP-subgraph
    # the DML EP's Cast-to-bool cases: OpenVINO leaves the Cast to the CPU provider (right answer)
    'test_cast_float_to_bool': ('partial', ''),  # node cast not run on it
    'test_cast_int32_to_bool': ('partial', ''),  # node cast not run on it
    'test_cast_int64_to_bool': ('partial', ''),  # node cast not run on it
}
# Whole families, one entry per case of the grid (conformance.cases names them).
EXPECTED.update({f"test_nonzero_{t}_highword_{s}": ("unsupported", "")  # NonZero(13): no kernel anywhere
                 for t in ("uint64", "double") for s in ("8", "2x4", "2x2x2")})
EXPECTED.update({f"test_trilu_{t}_{side}_{k}": want                     # double: CPU runs it; uint64: nobody
                 for t, want in (("double", ("partial", "fallback")), ("uint64", ("unsupported", "")))
                 for side in ("upper", "lower") for k in ("k0", "k1", "km2")})


def test_openvino_grids_and_idioms(backend):
    found = observed(all_cases(2), backend)
    assert {n: s[:2] for n, s in found.items()} == EXPECTED
    # a PARTIAL line says why: which nodes ran where instead
    partial = [detail for status, _, detail in found.values() if status == "partial"]
    assert partial and all("ran on CPUExecutionProvider (requested OpenVINOExecutionProvider)" in d for d in partial)


def test_openvino_int64_nonzero_drops_values_over_32_bits(backend):
    """OpenVINO's CPU plugin narrows int64 to int32: 2**40 (low word zero) counts as zero."""
    case = next(c for c in nonzero_cases(2) if c.name == "test_nonzero_int64_rank1")
    assert case.data_sets[0]["x"][-1] in (0, 2 ** 40)
    result = outcome(backend, case)
    assert result.status == "fail" and "shape [1, 6], ONNX says [1, 7]" in result.detail


EXAMPLES = sorted(glob.glob(os.path.join(os.path.dirname(examples.__file__), "*.onnx")))


def example_outcome(path, backend, seed=0):
    from onnx.reference import ReferenceEvaluator

    from onnx_dml_lowering.runtime.feeds import random_feeds
    compiled = compile_model(path)
    model = onnx.ModelProto()
    model.CopyFrom(compiled.model)
    model.ir_version = min(model.ir_version, MAX_IR_VERSION)
    feeds = random_feeds(compiled.inputs, seed)
    expected = [[np.asarray(v) for v in ReferenceEvaluator(compiled.model).run(None, feeds)]]
    return conformance.judge(backend, os.path.basename(path), model, [feeds], expected, None)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_openvino_example_models(path, backend):
    result = example_outcome(path, backend)
    name = os.path.basename(path)
    want = {"edge_cases.onnx": ("unsupported", []),    # nonzero_double: neither OpenVINO nor CPU has it
            "exporter_idioms.onnx": ("pass", ["Trilu node causal_mask: removed by onnxruntime's constant "
                                              "folding (no provider ran it)"])}.get(name, ("pass", []))
    assert (result.status, result.fallbacks) == want, result.detail
