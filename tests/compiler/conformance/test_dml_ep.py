"""The conformance suite and the DML EP: each case carries its predicted DML EP placement, the
manifest predicts the DML EP's deviations (named) and missing kernels where the DML EP is not
here, and the runner on Windows compares onnxruntime's own record of who ran each node with the
prediction. The DML run is simulated here by a backend that answers as the DML EP's lowering does
(runtime/dml_deviations.py) and reports a chosen assignment."""
import json
from types import SimpleNamespace

import onnx
import pytest

from onnx_dml_lowering.compiler import conformance
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.conformance.cases import all_cases, dml_ep_cases
from onnx_dml_lowering.compiler.ep.placement import CPU, DML, REMOVED, predict_placement
from onnx_dml_lowering.runtime.dml_deviations import NAMES, dml_outputs


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    directory = tmp_path_factory.mktemp("suite") / "dml"
    assert main(["conformance", "export", str(directory), "--seeds", "1"]) == 0
    return directory


@pytest.fixture(scope="module")
def manifest(suite):
    return json.loads((suite / "manifest.json").read_text())


class FakeDml(conformance.CaseRunner):
    """Answers as the DML EP's lowering does; reports `assignment` as who ran each node."""

    def __init__(self, assignment=None):
        self.spec, self.no_fallback, self.settings = "ort-dml", False, None
        self.provider = SimpleNamespace(name=DML, description="DmlExecutionProvider (simulated)")
        self.assignment = None
        self._ran = assignment

    def run(self, model, data_sets):
        if isinstance(model, str):          # the case's file, as a provider backend runs it
            model = onnx.load(model)
        names = [o.name for o in model.graph.output]
        self.assignment = self._ran if self._ran is not None else {n.name: DML for n in model.graph.node}
        return [[dml_outputs(model, feeds)[0][n] for n in names] for feeds in data_sets], "", [], ""


def test_the_dml_ep_cases_are_in_the_suite(manifest):
    names = {c.name for c in dml_ep_cases(1)}
    assert names <= set(manifest["cases"])
    assert len(manifest["cases"]) == len(all_cases(1))


def test_every_case_has_its_predicted_placement(manifest):
    cases = {c.name: c for c in all_cases(1)}
    for name in ("test_nonzero_int64_rank2", "test_nonzero_float_rank2", "test_cast_float_to_bool",
                 "test_trilu_float_lower_k2147483647"):
        predicted = {n["node"]: n["provider"] for n in predict_placement(cases[name].model, None)["nodes"]
                     if n["provider"] != REMOVED}
        assert manifest["cases"][name]["dml_ep_placement"] == predicted
    assert manifest["cases"]["test_nonzero_int64_rank2"]["dml_ep_placement"] == {"nonzero": CPU}
    assert manifest["cases"]["test_nonzero_float_rank2"]["dml_ep_placement"] == {"nonzero": DML}


@pytest.mark.parametrize("case,deviation", [
    ("test_nonzero_float_rank0", "scalar_nonzero"), ("test_eyelike_float_4x4_k1099511627776", "eyelike_k"),
    ("test_trilu_float_upper_k2147483648", "trilu_k"), ("test_trilu_float_lower_k2147483647", "trilu_k_overflow"),
    ("test_cast_float_to_bool", "cast_bool_clip"), ("test_cast_int64_to_bool", "cast_bool_low_word"),
    ("test_nonzero_int64_rank0", "scalar_nonzero_cpu")])
def test_manifest_predicts_each_dml_deviation_by_name(manifest, case, deviation):
    entry = manifest["providers"][DML]["cases"][case]
    assert entry["status"] == "deviation" and entry["named"].startswith(NAMES[deviation])
    assert "predicted, not run" in manifest["providers"][DML]["verified"]


def test_no_deviation_is_predicted_where_dml_agrees_or_the_cpu_computes(manifest):
    dml = manifest["providers"][DML]["cases"]
    assert "test_eyelike_float_4x4_k2147483648" not in dml     # INT32_MIN: zeros either way
    assert "test_trilu_float_upper_k1" not in dml
    assert dml["test_nonzero_double_rank2"]["status"] == "unsupported"   # no kernel in any provider
    assert "test_cast_int32_to_bool" not in dml                 # measured: the DML EP gives ONNX's answer
    assert "test_nonzero_int64_rank2" not in dml                # on the CPU EP: ONNX's answer but for a scalar


def test_runner_names_the_dml_deviation_seen_again(suite, manifest):
    _, cases = conformance.load(str(suite), "test_cast_float_to_bool")
    (name, model, sets, expected), = cases
    outcome = conformance.judge(FakeDml(), name, model, sets, expected, manifest["providers"],
                                manifest["cases"][name]["dml_ep_placement"])
    assert outcome.status == "deviation" and outcome.detail.startswith(NAMES["cast_bool_clip"])


def test_runner_fails_a_placement_that_differs_from_the_prediction(suite, manifest):
    _, cases = conformance.load(str(suite), "test_nonzero_float_rank2")
    (name, model, sets, expected), = cases
    predicted = manifest["cases"][name]["dml_ep_placement"]
    good = conformance.judge(FakeDml({"nonzero": DML}), name, model, sets, expected, manifest["providers"], predicted)
    assert good.status == "pass"
    bad = conformance.judge(FakeDml({"nonzero": CPU}), name, model, sets, expected, manifest["providers"], predicted)
    assert bad.status == "fail"
    assert bad.detail == ("placement differs from the prediction: nonzero predicted on DmlExecutionProvider, "
                          "ran on CPUExecutionProvider")


def test_placement_differences_skip_nodes_the_session_no_longer_has():
    assert conformance.placement_differences({"a": DML, "b": CPU}, {"a": DML}) == []
    assert conformance.placement_differences({"a": DML}, {"a": CPU}) == ["a predicted on DmlExecutionProvider, "
                                                                         "ran on CPUExecutionProvider"]


def test_other_backends_ignore_the_dml_placement(suite, manifest, capsys):
    assert main(["conformance", "run", str(suite), "--filter", "test_cast_*", "--backends", "cpu,ort-cpu"]) == 0
    out = capsys.readouterr().out
    assert "[cpu] 3 pass" in out and "[ort-cpu] 3 pass" in out
    assert manifest["cases"]["test_cast_float_to_bool"]["dml_ep_placement"] == {"cast": DML}


def test_the_committed_manifest_predicts_the_two_measured_if_and_transpose_outcomes():
    """The two cases the real 1.24.4 EP answered differently than predicted before (a Relu of NaN in
    an If branch, a Transpose reading a scalar NonZero): the committed dml/ manifest names them."""
    from onnx_dml_lowering.runtime.dml_deviations import FAILURES
    from tests.paths import REPO
    committed = json.loads((REPO / "dml" / "manifest.json").read_text())["providers"][DML]["cases"]
    relu = committed["test_control_if_nonzero"]
    assert relu["status"] == "deviation" and relu["named"].startswith(NAMES["relu_nan"])
    assert relu["detail"] == "test_data_set_1: output y: shape [2, 5], ONNX says [2, 6]"
    transpose = committed["test_idiom_nonzero_transpose_rank0"]
    assert transpose["status"] == "unsupported" and transpose["named"] == FAILURES["scalar_nonzero_read"]
    assert transpose["detail"] == f"predicted: {FAILURES['scalar_nonzero_read']} (node transpose)"


def test_runner_takes_a_predicted_failure_seen_again_as_unsupported(suite, manifest):
    from onnx_dml_lowering.ir import DmlLowerError
    from onnx_dml_lowering.runtime.dml_deviations import FAILURES, name_failure
    _, cases = conformance.load(str(suite), "test_idiom_nonzero_transpose_rank0")
    (name, model, sets, expected), = cases
    assert manifest["providers"][DML]["cases"][name]["status"] == "unsupported"
    message = ("Non-zero status code returned while running Transpose node. Name:'transpose' Status Message: "
               "80070057 Invalid parameter.")

    class FailingDml(FakeDml):
        def run(self, model, data_sets):
            model = onnx.load(model) if isinstance(model, str) else model
            return None, DmlLowerError(name_failure(model, message, at_run=True) or message), [], ""

    outcome = conformance.judge(FailingDml(), name, model, sets, expected, manifest["providers"],
                                manifest["cases"][name]["dml_ep_placement"])
    assert outcome.status == "unsupported" and outcome.detail.startswith(FAILURES["scalar_nonzero_read"])


def test_an_empty_nonzero_beside_relu_is_predicted_and_judged_as_the_unread_deviation(suite, manifest):
    """Set 0 (no true element): the manifest predicts y never read back, named; the simulated DML EP's
    run (y as ONNX says, nz empty) is judged that deviation, by the same line, whatever y holds."""
    predicted = manifest["providers"][DML]["cases"]["test_nonzero_empty_beside_relu"]
    assert predicted["status"] == "deviation" and predicted["named"] == NAMES["empty_output_readback"]
    assert predicted["detail"] == ("test_data_set_0: output y: never read back (the empty output 'nz' (int64 [2x0]) "
                                   "ended the batch)")
    case = next(c for c in dml_ep_cases(1) if c.name == "test_nonzero_empty_beside_relu")
    expected = [[dml_outputs(case.model, feeds)[0][o.name] for o in case.model.graph.output] for feeds in case.data_sets]
    outcome = conformance.judge(FakeDml(), case.name, case.model, case.data_sets, expected, manifest["providers"])
    assert outcome.status == "deviation" and outcome.detail.startswith(NAMES["empty_output_readback"])
    # y placed on the CPU EP: not in the batch, nothing deviates
    cpu_relu = conformance.judge(FakeDml({"relu": CPU, "nonzero": DML}), case.name, case.model, case.data_sets,
                                 expected, {})
    assert cpu_relu.status in ("pass", "partial")


def test_the_fusion_cases_are_predicted_named_and_judged(manifest):
    """The DML EP's activation fusion: the Gemm without C and the MeanVarianceNormalization fused
    with their Relu are predicted unsupported, named; the Conv output beside its fused Relu is
    predicted empty, and a DML run that gives it empty is judged that deviation by the same line,
    one that gives it as ONNX says contradicts the prediction."""
    from onnx_dml_lowering.compiler.conformance.cases import dml_fusion_cases
    from onnx_dml_lowering.runtime.dml_deviations import FAILURES
    from onnx_dml_lowering.runtime.dml_fusion import FUSED_OUTPUT_EMPTY, GEMM_WITHOUT_C, MVN_FUSED
    predicted = manifest["providers"][DML]["cases"]
    for name, key in (("test_dml_fusion_gemm_without_c_relu", GEMM_WITHOUT_C), ("test_dml_fusion_mvn_relu", MVN_FUSED)):
        assert predicted[name]["status"] == "unsupported" and predicted[name]["named"] == FAILURES[key]
    conv = predicted["test_dml_fusion_conv_output_relu"]
    assert conv == {"status": "deviation", "named": NAMES[FUSED_OUTPUT_EMPTY],
                    "detail": "test_data_set_0: output c: came back empty (the DML EP fused Relu node relu into "
                              "Conv node conv)"}
    case = next(c for c in dml_fusion_cases(1) if c.name == "test_dml_fusion_conv_output_relu")
    expected = [[dml_outputs(case.model, feeds)[0][o.name] for o in case.model.graph.output] for feeds in case.data_sets]

    class EmptyConv(FakeDml):
        def run(self, model, data_sets):
            runs, error, notes, partial = super().run(model, data_sets)
            return [[None, y] for _, y in runs], error, notes, partial

    empty = conformance.judge(EmptyConv(), case.name, case.model, case.data_sets, expected, manifest["providers"])
    assert (empty.status, empty.detail) == ("deviation", f"{NAMES[FUSED_OUTPUT_EMPTY]}: {conv['detail']}")
    assert not empty.contradicts
    whole = conformance.judge(FakeDml(), case.name, case.model, case.data_sets, expected, manifest["providers"])
    assert whole.status == "pass" and whole.contradicts.startswith("the manifest predicted deviation")
    # the Relu on the CPU EP: nothing is fused, nothing predicted
    split = {n["node"]: n["provider"] for n in predict_placement(case.model, None)["nodes"]} | {"relu": CPU}
    from onnx_dml_lowering.runtime.dml_fusion import fused_output_risks
    assert fused_output_risks(case.model, split) == []
