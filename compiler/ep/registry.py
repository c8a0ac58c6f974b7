"""The kernel tables placement is predicted from: onnxruntime 1.27's DirectML registration table
(shipped as data, dml_ep_registrations_ort1.27.json, generated from OperatorRegistration.cpp;
see shared/spec/DML_EP_PLACEMENT.md), the CPU EP's kernels of the onnxruntime installed here,
and the operator schemas that resolve a node's since-version and its type constraints."""
from __future__ import annotations

from typing import Any

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import onnx

from onnx_dml_lowering.lowering.onnx_graphs import is_standard

TABLE_FILE = "dml_ep_registrations_ort1.27.json"
MODELLED_ORT = "1.27.0"

# ONNX element type -> the type name the registration table (and onnxruntime) use.
_TYPE_NAMES: "dict[int, str]" = {
    onnx.TensorProto.FLOAT: "float", onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.DOUBLE: "double",
    onnx.TensorProto.BFLOAT16: "bfloat16", onnx.TensorProto.BOOL: "bool", onnx.TensorProto.STRING: "string",
    onnx.TensorProto.INT8: "int8", onnx.TensorProto.INT16: "int16", onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64", onnx.TensorProto.UINT8: "uint8", onnx.TensorProto.UINT16: "uint16",
    onnx.TensorProto.UINT32: "uint32", onnx.TensorProto.UINT64: "uint64", onnx.TensorProto.COMPLEX64: "complex64",
    onnx.TensorProto.COMPLEX128: "complex128", onnx.TensorProto.INT4: "int4", onnx.TensorProto.UINT4: "uint4",
}


def type_name(elem_type: int) -> str:
    """The registration table's name of an ONNX element type (float8 and newer: onnx's own name)."""
    if elem_type in _TYPE_NAMES:
        return _TYPE_NAMES[elem_type]
    return onnx.helper.tensor_dtype_to_string(elem_type).split(".")[-1].lower()


# Element types DirectML has a tensor data type for (bool is stored as UINT8); the others make a
# node unsupported whatever the device (DmlCommon.cpp).
DML_TYPES = frozenset({"float", "float16", "double", "bool", "int8", "int16", "int32", "int64", "uint8",
                       "uint16", "uint32", "uint64", "int4", "uint4"})
# The types whose support the device decides at run time (IDMLDevice::CheckFeatureSupport); the
# others every DirectML device has.
DEVICE_DEPENDENT = ("int64", "uint64", "double", "float16")


@dataclass(frozen=True)
class DmlKernel:
    op: str
    domain: str
    since_version: int
    types: "dict[str, tuple[str, ...]]"   # constraint -> registered types ('ALL' = any)
    graph_support: str
    cpu_inputs: "tuple[int, ...]"
    support_query: "str | None"


def _domain(domain: str) -> str:
    return "ai.onnx" if is_standard(domain) else domain


@lru_cache(maxsize=1)
def dml_table() -> "dict[tuple[str, str], dict[int, DmlKernel]]":
    """(domain, op) -> {since_version: kernel}, read once from the packaged table."""
    text = resources.files("onnx_dml_lowering.compiler.ep").joinpath(TABLE_FILE).read_text(encoding="utf-8")
    table: "dict[tuple[str, str], dict[int, DmlKernel]]" = {}
    data = json.loads(text)
    meta = data["meta"]
    for row in data["rows"]:
        kernel = DmlKernel(row["op"], row["domain"], row["since_version"],
                           {k: tuple(v) for k, v in (row["type_constraints"] or {}).items()},
                           row["graph_support"], tuple(row["required_cpu_inputs"]), row["support_query"])
        table.setdefault((row["domain"], row["op"]), {})[row["since_version"]] = kernel
    # Kernels registered outside the table (§1.9): CPU implementations registered under the DML
    # provider, listed in the table's meta as "Op(v1,v2,...)". They take every type; If reads its
    # condition on the CPU.
    for entry in meta["extra_cpu_implemented_dml_kernels"]:
        op, versions = entry.rstrip(")").split("(")
        for v in (int(x) for x in versions.split(",")):
            table.setdefault(("ai.onnx", op), {})[v] = DmlKernel(op, "ai.onnx", v, {}, "NotSupported",
                                                                 (0,) if op == "If" else (), None)
    return table


def dml_kernels(op: str, domain: str) -> "dict[int, DmlKernel]":
    return dml_table().get((_domain(domain), op), {})


@dataclass(frozen=True)
class Schema:
    since_version: int
    inputs: "tuple[tuple[str, str], ...]"    # (type constraint, option: Single|Optional|Variadic)
    outputs: "tuple[tuple[str, str], ...]"


def _option(p: Any) -> str:
    name = str(p.option).split(".")[-1]
    return name


@lru_cache(maxsize=1)
def _ort_schemas() -> "dict[tuple[str, str], list]":
    """onnxruntime's own schemas (its contrib domains included), by (domain, op)."""
    from onnxruntime.capi import _pybind_state as C
    out: "dict[tuple[str, str], list]" = {}
    for s in C.get_all_operator_schema():
        out.setdefault((_domain(s.domain), s.name), []).append(s)
    return out


@lru_cache(maxsize=4096)
def schema(op: str, domain: str, opset: int) -> "Schema | None":
    """The schema a node of that op resolves to at that opset (onnx's for the ONNX domains,
    onnxruntime's for its contrib domains), or None."""
    try:
        s = onnx.defs.get_schema(op, opset, "" if _domain(domain) == "ai.onnx" else domain)
        return Schema(s.since_version, tuple((p.type_str, _option(p)) for p in s.inputs),
                      tuple((p.type_str, _option(p)) for p in s.outputs))
    except onnx.defs.SchemaError:
        pass
    candidates = [s for s in _ort_schemas().get((_domain(domain), op), []) if s.since_version <= opset]
    if not candidates:
        return None
    s = max(candidates, key=lambda s: s.since_version)
    return Schema(s.since_version, tuple((p.typeStr, _option(p)) for p in s.inputs),
                  tuple((p.typeStr, _option(p)) for p in s.outputs))


_OPEN_END = 2 ** 31 - 1         # a kernel registered without an end version (INT_MAX)


@dataclass(frozen=True)
class CpuKernel:
    start: int
    end: int
    types: "dict[str, tuple[str, ...]]"


@lru_cache(maxsize=1)
def _cpu_table() -> "dict[tuple[str, str], list[CpuKernel]]":
    from onnxruntime.capi import _pybind_state as C
    out: "dict[tuple[str, str], list[CpuKernel]]" = {}
    for k in C.get_all_opkernel_def():
        if k.provider != "CPUExecutionProvider":
            continue
        start, end = k.version_range
        types = {c: tuple(t[len("tensor("):-1] if t.startswith("tensor(") else t for t in ts)
                 for c, ts in k.type_constraints.items()}
        out.setdefault((_domain(k.domain), k.op_name), []).append(CpuKernel(start, end, types))
    return out


def cpu_kernels(op: str, domain: str, since_version: int) -> "list[CpuKernel]":
    """The CPU EP kernels whose version range takes that since-version (onnxruntime's VerifyVersion:
    the exact start, or a range that has an end; an open-ended kernel, end INT_MAX, takes only its
    start, since a newer version of the operator may have come after it: GlobalLpPool-2 does not
    run a GlobalLpPool-22)."""
    return [k for k in _cpu_table().get((_domain(domain), op), [])
            if k.start == since_version or (k.end != _OPEN_END and k.start <= since_version <= k.end)]
