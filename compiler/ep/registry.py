"""The kernel tables placement is predicted from: a DirectML EP registration table by onnxruntime
version (shipped as data: 1.27's generated from OperatorRegistration.cpp, see
shared/spec/DML_EP_PLACEMENT.md; 1.24.4's measured on the real EP by measure_registrations.py),
the CPU EP's kernels of the onnxruntime installed here, and the operator schemas that resolve a
node's since-version and its type constraints."""
from __future__ import annotations

from typing import Any

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import onnx

from onnx_dml_lowering.lowering.onnx_graphs import is_standard
from onnx_dml_lowering.ir import DmlLowerError

# The DML EP registration tables held, by the onnxruntime version they are of (oldest first), and
# how each was made (docs/directml-ep-on-linux.md)
TABLES = {"1.24.4": "dml_ep_registrations_ort1.24.4.json", "1.27.0": "dml_ep_registrations_ort1.27.json"}
TABLE_SOURCES = {"1.24.4": "measured on the real DML EP (onnxruntime.dll 1.24.4)",
                 "1.27.0": "read from OperatorRegistration.cpp"}
NEWEST_ORT = "1.27.0"

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


@lru_cache(maxsize=4)
def table_rows(version: str) -> "tuple[list[dict], dict]":
    """The rows and meta of the packaged table of that onnxruntime version (a TABLES key)."""
    text = resources.files("onnx_dml_lowering.compiler.ep").joinpath(TABLES[version]).read_text(encoding="utf-8")
    data = json.loads(text)
    return data["rows"], data["meta"]


@lru_cache(maxsize=4)
def dml_table(version: str = NEWEST_ORT) -> "dict[tuple[str, str], dict[int, DmlKernel]]":
    """(domain, op) -> {since_version: kernel}, read once from the packaged table of that version."""
    table: "dict[tuple[str, str], dict[int, DmlKernel]]" = {}
    rows, meta = table_rows(version)
    for row in rows:
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


def dml_kernels(op: str, domain: str, version: str = NEWEST_ORT) -> "dict[int, DmlKernel]":
    return dml_table(version).get((_domain(domain), op), {})


class UnknownOrtVersion(DmlLowerError):
    """An onnxruntime version no DML EP registration table is held for."""


def table_version(version: str) -> str:
    """The TABLES key a version names ("1.27" and "1.27.0" alike), or UnknownOrtVersion naming the
    tables held."""
    wanted = version.strip()
    for held in TABLES:
        if wanted in (held, held.removesuffix(".0")):
            return held
    raise UnknownOrtVersion(f"--ort-version {version}: no DML EP registration table for that onnxruntime here "
                            f"(tables: {', '.join(TABLES)})")


def installed_dml_ep() -> "str | None":
    """The onnxruntime version of the DML EP installed here: make directml's (its setup.json), else an
    in-process onnxruntime-directml's (Windows), else None."""
    from onnx_dml_lowering.runtime.directml.home import DirectMLUnavailable, find_home
    try:
        version = find_home().info.get("onnxruntime_directml")
        if isinstance(version, str):
            return version
    except DirectMLUnavailable:
        pass
    import onnxruntime as ort
    if "DmlExecutionProvider" in ort.get_available_providers():
        return str(ort.__version__)
    return None


def default_version() -> "tuple[str, str]":
    """(the table modelled when --ort-version is not given, why): the installed DML EP's where its
    table is held, else the newest."""
    installed = installed_dml_ep()
    if installed is None:
        return NEWEST_ORT, "the newest table held; no DML EP installed here"
    try:
        return table_version(installed), "the installed DML EP's"
    except UnknownOrtVersion:
        return NEWEST_ORT, f"the newest table held; none for the installed DML EP's onnxruntime {installed}"


@dataclass(frozen=True)
class TableChoice:
    """The DML EP registration table a prediction models (a TABLES key) and why that one."""
    version: str
    why: str

    def describe(self) -> str:
        return f"onnxruntime {self.version}'s DML EP registration table ({self.why})"

    def to_json(self) -> "dict[str, str]":
        return {"onnxruntime": self.version, "chosen": self.why, "source": TABLE_SOURCES[self.version]}


def choose_table(version: "str | None") -> TableChoice:
    """The one place every DML EP prediction (inspect, optimize --for dml, conformance export) picks
    its table: `version` as --ort-version gave it (UnknownOrtVersion naming the tables held), or by
    default the installed DML EP's where its table is held, else the newest."""
    if version is None:
        return TableChoice(*default_version())
    return TableChoice(table_version(version), "chosen by --ort-version")


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


@dataclass(frozen=True)
class FullSchema:
    """A schema's arguments, type constraints and attributes, from onnx's or onnxruntime's own."""
    since_version: int
    inputs: "list[tuple[str, str]]"                 # (type string, Single|Optional|Variadic)
    outputs: "list[tuple[str, str]]"
    constraints: "dict[str, tuple[str, ...]]"        # constraint -> allowed type strings
    attributes: "dict[str, tuple[bool, int]]"        # name -> (required, onnx.AttributeProto kind)


def _full(s: "onnx.defs.OpSchema", type_attr: str) -> FullSchema:
    def kind(a: "onnx.defs.OpSchema.Attribute") -> int:
        return int(getattr(onnx.AttributeProto, str(a.type).split(".")[-1]))
    return FullSchema(s.since_version, [(getattr(p, type_attr), _option(p)) for p in s.inputs],
                      [(getattr(p, type_attr), _option(p)) for p in s.outputs],
                      {c.type_param_str: tuple(c.allowed_type_strs) for c in s.type_constraints},
                      {name: (bool(a.required), kind(a)) for name, a in s.attributes.items()})


@lru_cache(maxsize=4096)
def exact_schema(op: str, domain: str, since_version: int) -> "FullSchema | None":
    """The schema of that op introduced at exactly that since-version, or None."""
    try:
        s = onnx.defs.get_schema(op, since_version, "" if _domain(domain) == "ai.onnx" else domain)
        return _full(s, "type_str") if s.since_version == since_version and not s.deprecated else None
    except onnx.defs.SchemaError:
        pass
    for s in _ort_schemas().get((_domain(domain), op), []):
        if s.since_version == since_version and not s.deprecated:
            return _full(s, "typeStr")
    return None


@lru_cache(maxsize=1024)
def since_versions(op: str, domain: str, newest_opset: int) -> "list[int]":
    """Every since-version of the op up to that opset (onnx's history, or onnxruntime's schemas)."""
    found = {s.since_version for s in onnx.defs.get_all_schemas_with_history()
             if s.name == op and _domain(s.domain) == _domain(domain) and s.since_version <= newest_opset}
    found |= {s.since_version for s in _ort_schemas().get((_domain(domain), op), [])
              if s.since_version <= newest_opset}
    return sorted(found)
