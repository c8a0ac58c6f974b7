"""runtime/backend_names.py: the one parser of backend names, and oracle names (runtime/oracle.py)."""
from __future__ import annotations

import pytest

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime.backend_names import (BackendKind, Lowering, SavedBy, as_backend_name,
                                                     parse_backend, provider_backend)
from onnx_dml_lowering.runtime.backends import DirectML, Emulator, LOWERED_BACKENDS, StandIns
from onnx_dml_lowering.runtime.oracle import (EVALUATING, GoldenOracle, HybridOracle, OracleKind, OracleName,
                                              OrtCpuOracle, ReferenceOracle, parse_oracle)


@pytest.mark.parametrize("text, kind, lowering, provider", [
    ("cpu", BackendKind.LOWERED, Lowering.EMULATOR, ""), ("ort", BackendKind.LOWERED, Lowering.STAND_INS, ""),
    ("dml", BackendKind.LOWERED, Lowering.DIRECTML, ""),
    ("ort-cpu", BackendKind.PROVIDER, None, "CPUExecutionProvider"),
    ("ort-dml", BackendKind.PROVIDER, None, "DmlExecutionProvider"),
    ("ort:OpenVINOExecutionProvider", BackendKind.PROVIDER, None, "OpenVINOExecutionProvider"),
    ("ort: CUDAExecutionProvider ", BackendKind.PROVIDER, None, "CUDAExecutionProvider")])
def test_each_form_parses_to_what_it_is(text, kind, lowering, provider):
    name = parse_backend(text)
    assert (name.kind, name.lowering, name.provider, name.text) == (kind, lowering, provider, text)
    assert name.is_provider == (kind is BackendKind.PROVIDER) and name.is_lowered == (lowering is not None)
    assert not name.is_saved


@pytest.mark.parametrize("text, by, source, description", [
    ("saved:oracle", SavedBy.ORACLE, "", "the oracle's outputs saved by check --save-outputs (--load-outputs)"),
    ("saved:outputs", SavedBy.UNKNOWN, "",
     "outputs loaded from a file that does not say who saved them (--load-outputs)"),
    ("saved:run-ort-dml", SavedBy.RUN, "ort-dml",
     "outputs saved by run --backend ort-dml --save-outputs (--load-outputs)"),
    ("saved:ort-cpu", SavedBy.CHECK, "ort-cpu",
     "outputs of backend ort-cpu saved by check --save-outputs (--load-outputs)")])
def test_saved_labels_say_who_saved_them(text, by, source, description):
    name = parse_backend(text)
    assert name.is_saved and (name.saved_by, name.source, name.description) == (by, source, description)


@pytest.mark.parametrize("text, message", [
    ("gpu", "unknown backend 'gpu'; choose from cpu, ort, dml, ort-cpu, ort-dml, ort:<ProviderName>"),
    ("ort:", "names no execution provider"), ("ort-cuda", "onnxruntime's cuda provider is ort:CUDAExecutionProvider"),
    ("CPU", "unknown backend 'CPU'")])
def test_an_unknown_name_is_one_line(text, message):
    with pytest.raises(DmlLowerError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_backend(text)


def test_a_name_equals_its_text_and_is_parsed_once():
    name = parse_backend("ort-cpu")
    assert name == "ort-cpu" and name != "cpu" and {name: 1}["ort-cpu"] == 1 and str(name) == "ort-cpu"
    assert as_backend_name(name) is name and as_backend_name("ort-cpu") == name
    assert provider_backend("DmlExecutionProvider").from_dml_ep and provider_backend("X").text == "ort:X"


def test_each_lowering_has_its_backend_class():
    assert LOWERED_BACKENDS == {Lowering.EMULATOR: Emulator, Lowering.STAND_INS: StandIns,
                                Lowering.DIRECTML: DirectML}


@pytest.mark.parametrize("text, kind, path", [
    ("hybrid", OracleKind.HYBRID, ""), ("reference", OracleKind.REFERENCE, ""), ("ort-cpu", OracleKind.ORT_CPU, ""),
    ("saved/golden.npz", OracleKind.GOLDEN, "saved/golden.npz")])
def test_oracle_names_parse_once(text, kind, path):
    name = parse_oracle(text)
    assert (name.kind, name.path, name.text) == (kind, path, text) and parse_oracle(name) is name


@pytest.mark.parametrize("text", ["golden", "magic", "hybrid.onnx", ""])
def test_an_unknown_oracle_is_one_line(text):
    with pytest.raises(DmlLowerError, match=f"unknown oracle {text!r}; choose from hybrid, reference, ort-cpu or a "
                                            "golden-outputs FILE.npz"):
        parse_oracle(text)


def test_one_class_per_oracle_kind():
    assert EVALUATING == {OracleKind.HYBRID: HybridOracle, OracleKind.REFERENCE: ReferenceOracle,
                          OracleKind.ORT_CPU: OrtCpuOracle}
    assert GoldenOracle.KIND is OracleKind.GOLDEN and OracleName(OracleKind.GOLDEN, "g.npz").text == "g.npz"
