"""The one reader of a conformance case's test data (onnx's backend-test layout:
<case>/test_data_set_N/input_K.pb, output_K.pb): every file is one TensorProto, checked before
numpy reads it, and nothing in a data set is silently left out.

- data sets are test_data_set_0 .. test_data_set_{n-1}: a gap (a set that would not be run) is refused;
- a set holds input_K.pb for each of the model's inputs (initializers excluded) and output_K.pb for
  each of its outputs, K from 0 in the model's order; a file beyond them, or another name of that
  pattern (input_01.pb), is refused: onnx's own runner counts the files and fails on such a set;
- a tensor's name may be empty (onnx's own runner writes them so) but, when given, must be the
  model's input or output at its position: onnx_test_runner feeds and compares by that name;
- its data type is the one the model declares for that input or output, and its dims have the
  rank and the sizes the model fixes (a dimension name or an unknown size takes any): data that is
  not the model's is one line naming the file, before any case runs, not a backend's failure;
- the tensor has a defined element type, no external data and no segment, and holds exactly the
  elements its dims say (raw_data's bytes, checked by runtime.weights.check_raw_data as a model's
  tensors are, or the typed field's entries);
- every file's array counts against one memory budget: `load` holds all cases' data at once.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display, name_list
from onnx_dml_lowering.ir.errors import MemoryLimitExceeded, first_line
from onnx_dml_lowering.runtime.feeds import declared_dims
from onnx_dml_lowering.runtime.memory import default_limit, format_size, parse_size
from onnx_dml_lowering.runtime.weights import PACKED_BITS, check_raw_data

from ..frontend import read_regular_file

SET_PREFIX = "test_data_set_"
_NUMBER = re.compile(r"0|[1-9][0-9]*")          # input_01.pb is not input_1.pb: refused, never read twice
_TENSOR_FILE = re.compile(r"(input|output)_(.*)\.pb")
# sub-byte types pack several elements into each int32_data entry (one byte of it), as onnx writes them
_PER_ENTRY = {data_type: 8 // bits for data_type, bits in PACKED_BITS.items() if 8 % bits == 0}
_COMPLEX = {TensorProto.COMPLEX64, TensorProto.COMPLEX128}       # two float / double entries each


@dataclass
class Budget:
    """The bytes every test data array loaded so far takes, against the memory limit."""
    limit: int
    used: int = 0

    @classmethod
    def of(cls, memory_limit: "int | str | None") -> "Budget":
        return cls(default_limit() if memory_limit is None else parse_size(memory_limit))

    def take(self, nbytes: int, what: str) -> None:
        if self.used + nbytes > self.limit:
            raise MemoryLimitExceeded(
                f"{what} holds {format_size(nbytes)} of values; with the test data read before it that is "
                f"{format_size(self.used + nbytes)}, over the memory limit of {format_size(self.limit)} "
                "(every case's data is held at once: run fewer cases with --filter)")
        self.used += nbytes


def read_case(folder: str, model: onnx.ModelProto, budget: Budget) -> "tuple[list, list]":
    """(feeds per data set, expected outputs per data set) of the case in `folder`; [] when it has no set."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    outputs = list(model.graph.output)
    sets, expected = [], []
    for data in _set_folders(folder):
        _check_layout(data, {"input": [i.name for i in inputs], "output": [o.name for o in outputs]})
        sets.append({vi.name: read_tensor(os.path.join(data, f"input_{k}.pb"), ("input", k, vi), budget)
                     for k, vi in enumerate(inputs)})
        expected.append([read_tensor(os.path.join(data, f"output_{k}.pb"), ("output", k, vi), budget)
                         for k, vi in enumerate(outputs)])
    return sets, expected


def _set_folders(folder: str) -> "list[str]":
    """test_data_set_0 .. test_data_set_{n-1}; one line for a gap or another name of that prefix."""
    numbers = []
    for entry in sorted(os.listdir(folder)):
        if not entry.startswith(SET_PREFIX):
            continue
        number = entry[len(SET_PREFIX):]
        path = os.path.join(folder, entry)
        if not _NUMBER.fullmatch(number) or not os.path.isdir(path):
            raise DmlLowerError(f"conformance data set '{display(path)}' is not a folder test_data_set_N "
                                "(N from 0, no leading zero): it would not be run")
        numbers.append(int(number))
    numbers.sort()
    for n, found in enumerate(numbers):
        if found != n:          # a set past a gap would never be run
            raise DmlLowerError(f"conformance data set '{display(os.path.join(folder, SET_PREFIX + str(found)))}' "
                                f"follows no {SET_PREFIX}{n}: data sets are numbered from 0 without a gap")
    return [os.path.join(folder, f"{SET_PREFIX}{n}") for n in numbers]


def _check_layout(data: str, names: "dict[str, list[str]]") -> None:
    """Every input_*.pb / output_*.pb of the set is one the model reads, and none it reads is missing."""
    for entry in sorted(os.listdir(data)):
        match = _TENSOR_FILE.fullmatch(entry)
        if match is None:
            continue                # another file (a README) is no test data
        kind, number = match.groups()
        if not _NUMBER.fullmatch(number) or int(number) >= len(names[kind]):
            raise DmlLowerError(f"conformance tensor file '{display(os.path.join(data, entry))}' is not one of the "
                                f"model's: {_expected_files(kind, names[kind])}; it would be ignored")
    for kind, listed in names.items():
        for k, name in enumerate(listed):
            path = os.path.join(data, f"{kind}_{k}.pb")
            if not os.path.lexists(path):
                raise DmlLowerError(f"conformance tensor file '{display(path)}' does not exist: the model's {kind} "
                                    f"{k} is '{display(name)}' ({_expected_files(kind, listed)})")


def _expected_files(kind: str, names: "list[str]") -> str:
    if not names:
        return f"the model has no {kind}"
    files = f"{kind}_0.pb" + (f" to {kind}_{len(names) - 1}.pb" if len(names) > 1 else "")
    plural = "s" if len(names) > 1 else ""
    return f"the model has {len(names)} {kind}{plural} ({name_list(names, noun=kind + 's')}), in {files}"


def read_tensor(path: str, role: "tuple[str, int, onnx.ValueInfoProto]", budget: Budget) -> np.ndarray:
    """One test data tensor: a regular file, a TensorProto whose name (if any) is the model's
    `role` (kind, position, value), of its declared type and fixed dims, its data inline and whole,
    within the budget."""
    what = f"conformance tensor file '{display(path)}'"
    tensor = TensorProto()
    try:
        tensor.ParseFromString(read_regular_file(Path(path), what))
    except DecodeError as exc:
        raise DmlLowerError(f"{what} is not a TensorProto (protobuf parse failed: {first_line(exc)})") from None
    _check_tensor(tensor, what)
    kind, position, value = role
    name = value.name
    if tensor.name and tensor.name != name:
        raise DmlLowerError(f"{what}: tensor '{display(tensor.name)}' is not the model's {kind} {position}, "
                            f"'{display(name)}' (a name, where given, must be it: onnx_test_runner goes by it)")
    _check_declared(tensor, value, f"{what}: {_type_text(tensor.data_type)} tensor {list(tensor.dims)}, but the "
                    f"model's {kind} {position} '{display(name)}' is")
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    count = math.prod(int(d) for d in tensor.dims)
    budget.take(count * dtype.itemsize + sum(len(s) for s in tensor.string_data), what)
    return numpy_helper.to_array(tensor)


def _type_text(data_type: int) -> str:
    """An ONNX data type as the .pb names it (DOUBLE, UINT4)."""
    return helper.tensor_dtype_to_string(data_type).removeprefix("TensorProto.")


def _check_declared(tensor: TensorProto, value: onnx.ValueInfoProto, said: str) -> None:
    """The tensor has the data type `value` declares and the rank and sizes it fixes; else one line
    (`said` then what the model declares): the test data is not the model's."""
    kind = value.type.WhichOneof("value")
    if kind is None:            # no type declared: any tensor
        return
    if kind != "tensor_type":
        raise DmlLowerError(f"{said} a {kind.removesuffix('_type')}, not a tensor: a test data file holds one tensor")
    declared = value.type.tensor_type
    elem = declared.elem_type
    if elem != TensorProto.UNDEFINED and tensor.data_type != elem:
        raise DmlLowerError(f"{said} {_type_text(elem)}: the test data is not the model's")
    if not declared.HasField("shape"):
        return
    dims = declared_dims(declared.shape)
    if len(dims) != len(tensor.dims) or any(isinstance(d, int) and d != got for d, got in zip(dims, tensor.dims)):
        shown = "[" + ", ".join("?" if d is None else display(d) for d in dims) + "]"
        raise DmlLowerError(f"{said} {shown}: the test data is not the model's")


def _check_tensor(tensor: TensorProto, what: str) -> None:
    """What numpy_helper.to_array would fail on (or read elsewhere than this file) is one line."""
    if tensor.data_type == TensorProto.UNDEFINED or tensor.data_type not in TensorProto.DataType.values():
        shown = "UNDEFINED" if tensor.data_type == TensorProto.UNDEFINED else str(tensor.data_type)
        raise DmlLowerError(f"{what} is not a TensorProto with an element type (data_type {shown}): an empty "
                            "file, or another message (a SequenceProto, OptionalProto)")
    if tensor.data_location == TensorProto.EXTERNAL:
        raise DmlLowerError(f"{what}: tensor '{display(tensor.name)}' names external data; test data is read "
                            "inline only")
    if tensor.HasField("segment"):      # field 3: a segment, or what a SequenceProto's tensors read as
        raise DmlLowerError(f"{what} is not a whole TensorProto: it holds a segment (field 3, as a SequenceProto's "
                            "tensors do); test data is one whole tensor per file")
    check_raw_data(tensor, what)        # negative dims; raw_data's bytes, as a model's tensors are checked
    _check_typed_count(tensor, what)


def _check_typed_count(tensor: TensorProto, what: str) -> None:
    """Without raw_data, the typed field onnx reads holds one entry per element (two for complex,
    one per byte of packed sub-byte elements); with it, no typed field holds values too."""
    field = helper.tensor_dtype_to_field(tensor.data_type)
    held = len(getattr(tensor, field))
    shown = f"{_type_text(tensor.data_type)} {list(tensor.dims)}"
    if tensor.HasField("raw_data"):
        if tensor.data_type == TensorProto.STRING:        # onnx reads string_data only
            raise DmlLowerError(f"{what}: tensor '{display(tensor.name)}' ({shown}) holds raw_data: a string "
                                "tensor's values are in string_data")
        if held:                                          # onnx would read raw_data and ignore the rest
            raise DmlLowerError(f"{what}: tensor '{display(tensor.name)}' ({shown}) holds raw_data and {held} "
                                f"values in {field}: its values belong in one of them")
        return
    count = math.prod(int(d) for d in tensor.dims)
    per = _PER_ENTRY.get(tensor.data_type, 1)
    need = 2 * count if tensor.data_type in _COMPLEX else -(-count // per)
    if held != need:
        raise DmlLowerError(f"{what}: tensor '{display(tensor.name)}' holds {held} values in {field} (and no "
                            f"raw_data), but its type and shape {shown} take {need}")
