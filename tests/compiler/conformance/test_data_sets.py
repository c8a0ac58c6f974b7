"""conformance run's test data (compiler/conformance/data_sets.py, the one reader of the .pb
files): a malformed file, a file the model does not read, a name that contradicts the model's and
a gap in the numbering are each one line naming the file (exit 2), never an internal error nor
ignored; all data is bounded by the memory limit; a value mismatch says values as check does."""
from __future__ import annotations

import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnx_dml_lowering.compiler import conformance
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.compiler.conformance.cases import all_cases
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.ir.errors import MemoryLimitExceeded
from onnx_dml_lowering.runtime.compare import value_text

CASE = "test_control_if_nonzero"        # inputs c (bool scalar), x (float 3x4); output y (int64)


@pytest.fixture
def suite(tmp_path):
    """A one-case suite in onnx's layout, its expected output from onnx.reference."""
    case = next(c for c in all_cases(1) if c.name == CASE)
    folder = tmp_path / "suite" / CASE
    data = folder / "test_data_set_0"
    data.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(case.model.SerializeToString())
    feeds = case.data_sets[0]
    for k, vi in enumerate(case.model.graph.input):
        _write(data / f"input_{k}.pb", numpy_helper.from_array(feeds[vi.name], vi.name))
    for k, (vi, value) in enumerate(zip(case.model.graph.output, ReferenceEvaluator(case.model).run(None, feeds))):
        _write(data / f"output_{k}.pb", numpy_helper.from_array(np.asarray(value), vi.name))
    return tmp_path / "suite"


def _write(path, message) -> None:
    path.write_bytes(message.SerializeToString())


def _data(suite):
    return suite / CASE / "test_data_set_0"


def _refused(suite, capsys, *phrases: str) -> str:
    """The run exits 2 with one line holding every phrase (never an internal error)."""
    capsys.readouterr()
    code = main(["conformance", "run", str(suite), "--backends", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("dml-lower: error: "), err
    for phrase in phrases:
        assert phrase in err, err
    return err


def _passes(suite, capsys) -> None:
    capsys.readouterr()
    assert main(["conformance", "run", str(suite), "--backends", "cpu"]) == 0
    assert "[cpu] 1 pass" in capsys.readouterr().out


def test_the_suite_as_built_passes(suite, capsys):
    _passes(suite, capsys)


def _sequence(path) -> None:
    sequence = onnx.SequenceProto(name="y", elem_type=onnx.SequenceProto.TENSOR)
    sequence.tensor_values.append(numpy_helper.from_array(np.zeros(2, np.int64)))
    _write(path, sequence)


def _empty_sequence(path) -> None:
    _write(path, onnx.SequenceProto(name="y"))


def _huge(path) -> None:
    tensor = onnx.load_tensor(str(path))
    tensor.ClearField("raw_data")
    del tensor.dims[:]
    tensor.dims.extend([2**31, 2**31])
    _write(path, tensor)


def _short_raw(path) -> None:
    tensor = onnx.load_tensor(str(path))
    tensor.raw_data = tensor.raw_data[:-1]
    _write(path, tensor)


def _short_typed(path) -> None:
    value = numpy_helper.to_array(onnx.load_tensor(str(path)))
    tensor = helper.make_tensor("x", TensorProto.FLOAT, value.shape, value.ravel().tolist())
    del tensor.float_data[-1]           # make_tensor itself refuses a short list
    _write(path, tensor)


def _unknown_type(path) -> None:
    tensor = onnx.load_tensor(str(path))
    tensor.data_type = 99
    _write(path, tensor)


def _raw_and_typed(path) -> None:
    tensor = onnx.load_tensor(str(path))
    tensor.float_data.extend([1.0])
    _write(path, tensor)


MALFORMED = {      # what is done to which file, and what the line says about it
    "empty input": ("input_0.pb", lambda p: p.write_bytes(b""), "data_type UNDEFINED"),
    "empty output": ("output_0.pb", lambda p: p.write_bytes(b""), "data_type UNDEFINED"),
    "sequence output": ("output_0.pb", _sequence, "is not a whole TensorProto: it holds a segment"),
    "empty sequence output": ("output_0.pb", _empty_sequence, "data_type UNDEFINED"),
    "not protobuf": ("output_0.pb", lambda p: p.write_bytes(b"\xff\xff\xff"), "is not a TensorProto"),
    "huge dims, no data": ("input_1.pb", _huge, "holds 0 values in float_data (and no raw_data), but its type and "
                                                "shape FLOAT [2147483648, 2147483648] take 4611686018427387904"),
    "short raw_data": ("input_1.pb", _short_raw, "holds 47 bytes of raw data, but its type and shape FLOAT [3, 4] "
                                                 "take 48 bytes"),
    "short float_data": ("input_1.pb", _short_typed, "holds 11 values in float_data (and no raw_data), but its "
                                                     "type and shape FLOAT [3, 4] take 12"),
    "unknown type": ("input_1.pb", _unknown_type, "data_type 99"),
    "raw and typed": ("input_1.pb", _raw_and_typed, "holds raw_data and 1 values in float_data"),
}


@pytest.mark.parametrize("damage", list(MALFORMED))
def test_a_malformed_tensor_file_is_one_line_naming_it(damage, suite, capsys):
    name, spoil, phrase = MALFORMED[damage]
    path = _data(suite) / name
    spoil(path)
    _refused(suite, capsys, f"conformance tensor file {display(str(path))!r}", phrase)


def test_all_test_data_is_bounded_by_the_memory_limit(suite):
    sizes = {p.name: numpy_helper.to_array(onnx.load_tensor(str(p))).nbytes for p in _data(suite).iterdir()}
    total = sum(sizes.values())
    assert conformance.load(str(suite), memory_limit=total)[1]           # exactly what it takes: read
    with pytest.raises(MemoryLimitExceeded) as caught:
        conformance.load(str(suite), memory_limit=total - 1)
    last = sorted(sizes)[-1]            # input_0, input_1, then output_0 is read last and passes the limit
    assert str(_data(suite) / last) in str(caught.value) and "over the memory limit" in str(caught.value)


@pytest.mark.parametrize("extra,said", [
    ("input_7.pb", "the model has 2 inputs (c, x), in input_0.pb to input_1.pb"),
    ("output_1.pb", "the model has 1 output (y), in output_0.pb"),
    ("input_01.pb", "the model has 2 inputs"),
])
def test_a_file_the_model_does_not_read_is_refused(extra, said, suite, capsys):
    shutil.copy(_data(suite) / "output_0.pb" if extra.startswith("output") else _data(suite) / "input_0.pb",
                _data(suite) / extra)
    _refused(suite, capsys, f"{display(str(_data(suite) / extra))!r} is not one of the model's", said)


def test_a_gap_in_the_numbering_is_refused(suite, capsys):
    data = _data(suite)
    os.rename(data / "input_1.pb", data / "input_2.pb")         # input_0.pb, input_2.pb: input_2 is not read
    _refused(suite, capsys, f"{display(str(data / 'input_2.pb'))!r} is not one of the model's")
    (data / "input_2.pb").unlink()
    _refused(suite, capsys, f"{display(str(data / 'input_1.pb'))!r} does not exist: the model's input 1 is 'x'")


def test_a_gap_between_data_sets_is_refused(suite, capsys):
    shutil.copytree(_data(suite), suite / CASE / "test_data_set_2")
    _refused(suite, capsys, "test_data_set_2", "follows no test_data_set_1")
    shutil.rmtree(suite / CASE / "test_data_set_2")
    (suite / CASE / "test_data_set_x").mkdir()
    _refused(suite, capsys, "test_data_set_x", "is not a folder test_data_set_N")


@pytest.mark.parametrize("file,name", [("output_0.pb", "bogus"), ("input_0.pb", "x"), ("input_1.pb", "c")])
def test_a_name_contradicting_the_model_is_refused_and_an_empty_one_is_not(file, name, suite, capsys):
    path = _data(suite) / file
    tensor = onnx.load_tensor(str(path))
    model_name = tensor.name
    tensor.name = name
    _write(path, tensor)
    _refused(suite, capsys, f"{display(str(path))!r}: tensor {name!r} is not the model's", repr(model_name))
    tensor.name = ""                     # as onnx's own runner writes its test data
    _write(path, tensor)
    _passes(suite, capsys)


def _tamper(suite):
    """output_0.pb's first value changed: (the value the backend gives, the one the file says)."""
    path = _data(suite) / "output_0.pb"
    tensor = onnx.load_tensor(str(path))
    array = numpy_helper.to_array(tensor).copy()
    given = array.flat[0].copy()
    array.flat[0] += 1
    _write(path, numpy_helper.from_array(array, tensor.name))
    return given, array.flat[0], int(np.ndim(array))


def test_a_value_mismatch_says_values_as_check_does(suite, capsys):
    got, want, rank = _tamper(suite)
    assert main(["conformance", "run", str(suite), "--backends", "cpu"]) == 1
    out = capsys.readouterr().out
    assert f"first at {[0] * rank}: {value_text(got)}, ONNX says {value_text(want)}" in out, out
    assert "np." not in out


def test_a_deviation_written_with_numpy_reprs_still_matches(suite):
    """A manifest exported before values were said as check says them names the same deviation."""
    got, want, rank = _tamper(suite)
    detail = f"first at {[0] * rank}: {got!r}, ONNX says {want!r}"
    assert "np." in detail              # numpy 2's reprs, as such a manifest holds them
    _, cases = conformance.load(str(suite))
    name, model, sets, expected = cases[0]
    outcome = conformance.judge(conformance.CaseRunner("cpu"), name, model, sets, expected, None)
    assert outcome.status == "fail" and outcome.detail.endswith(f"{value_text(got)}, ONNX says {value_text(want)}")
    legacy = outcome.detail.replace(f"{value_text(got)}, ONNX says {value_text(want)}", f"{got!r}, ONNX says {want!r}")
    known = {"cpu": {"cases": {name: {"status": "deviation", "detail": legacy}}}}
    assert conformance.judge(conformance.CaseRunner("cpu"), name, model, sets, expected, known).status == "deviation"


def _retyped(value, dtype=None, shape=None, data_type=None):
    """A spoiler: the file's tensor as another numpy dtype / shape, or its bytes under another ONNX
    data type (raw data kept, sized for it)."""
    def spoil(path) -> None:
        tensor = onnx.load_tensor(str(path))
        array = numpy_helper.to_array(tensor)
        array = array.astype(dtype) if dtype is not None else array
        array = array.reshape(shape) if shape is not None else array
        spoiled = numpy_helper.from_array(array, tensor.name)
        if data_type is not None:           # 4-bit: two elements a byte
            spoiled.data_type, spoiled.raw_data = data_type, b"\0" * -(-array.size // 2)
        _write(path, spoiled)
    return spoil


NOT_THE_MODELS = {      # (file, spoiler, what the line says the file holds and the model declares)
    "input as double": ("input_1.pb", _retyped(None, np.float64), "DOUBLE tensor [3, 4], but the model's input 1 'x' "
                                                                  "is FLOAT"),
    "input as string": ("input_1.pb", _retyped(None, np.str_), "STRING tensor [3, 4], but the model's input 1 'x' is "
                                                              "FLOAT"),
    "input as uint4": ("input_1.pb", _retyped(None, data_type=TensorProto.UINT4), "UINT4 tensor [3, 4], but the "
                                                                                  "model's input 1 'x' is FLOAT"),
    "input transposed": ("input_1.pb", _retyped(None, shape=(4, 3)), "FLOAT tensor [4, 3], but the model's input 1 "
                                                                     "'x' is [3, 4]"),
    "input of another rank": ("input_1.pb", _retyped(None, shape=(12,)), "FLOAT tensor [12], but the model's input 1 "
                                                                         "'x' is [3, 4]"),
    "scalar as int64": ("input_0.pb", _retyped(None, np.int64), "INT64 tensor [], but the model's input 0 'c' is BOOL"),
    "scalar as a vector": ("input_0.pb", _retyped(None, shape=(1,)), "BOOL tensor [1], but the model's input 0 'c' "
                                                                     "is []"),
    "output as int32": ("output_0.pb", _retyped(None, np.int32), "INT32 tensor [2, "),
    "output of another fixed size": ("output_0.pb", lambda p: _write(p, numpy_helper.from_array(
        np.zeros((3, 1), np.int64), "y")), "INT64 tensor [3, 1], but the model's output 0 'y' is [2, ?]"),
}


@pytest.mark.parametrize("damage", list(NOT_THE_MODELS))
def test_data_that_is_not_the_models_is_one_line_before_any_case_runs(damage, suite, tmp_path, capsys):
    """Another type, rank or fixed size than the model declares: the file named, exit 2, no case run
    (a second, sound case is not run either), never a backend's FAIL; said as a .pb's data type."""
    shutil.copytree(suite / CASE, suite / "test_a_sound_case")
    name, spoil, phrase = NOT_THE_MODELS[damage]
    path = _data(suite) / name
    spoil(path)
    err = _refused(suite, capsys, f"conformance tensor file {display(str(path))!r}: {phrase}",
                   f"the model's {name[:-5].replace('_', ' ')} ", "the test data is not the model's")
    assert "np.savez" not in err and "FAIL" not in err


def test_a_size_the_model_leaves_open_takes_any(suite, capsys):
    """y is declared [2, ?]: another count of coordinates is a value mismatch, not data refused."""
    _write(_data(suite) / "output_0.pb", numpy_helper.from_array(np.zeros((2, 7), np.int64), "y"))
    capsys.readouterr()
    assert main(["conformance", "run", str(suite), "--backends", "cpu"]) == 1
    assert "output y: shape" in capsys.readouterr().out
