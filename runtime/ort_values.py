"""Feeding onnxruntime and reading its results for every type a user can bring.

onnxruntime's Python binding refuses numpy arrays of ml_dtypes types (bfloat16, float8, int4,
uint4, float4e2m1) and cannot turn such results into numpy; those go through OrtValues with an
explicit ONNX type and are copied out of the result's memory bit for bit. numpy holds one 4-bit
element per byte, onnxruntime two (low nibble first, as ONNX's TensorProto): they are packed on
the way in and unpacked on the way out.
"""
from __future__ import annotations

import ctypes
import weakref
from typing import Any, Mapping, Sequence, cast

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.dtypes import NUMPY_NATIVE, numpy_to_onnx, onnx_to_numpy

from .ort_messages import binding_cannot_convert
from .sequences import as_array

# dtype kind "V": ml_dtypes' extension types present themselves as void to numpy's kind test.
# ONNX uint4, int4, float4e2m1: two elements per byte in onnxruntime's memory.
_FOUR_BIT = (21, 22, 23)



def pack_4bit(array: np.ndarray) -> np.ndarray:
    """One 4-bit element per byte -> two per byte, element 2i in the low nibble (ONNX's order)."""
    nibbles = np.ascontiguousarray(array).reshape(-1).view(np.uint8) & 0x0F
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)


def unpack_4bit(packed: np.ndarray, shape: "tuple[int, ...]", dtype: np.dtype) -> np.ndarray:
    """The inverse of pack_4bit: `shape` elements of the 4-bit `dtype`, one per byte."""
    count = int(np.prod(shape, dtype=np.int64))
    nibbles = np.empty(2 * packed.size, np.uint8)
    nibbles[0::2] = packed & 0x0F
    nibbles[1::2] = packed >> 4
    return nibbles[:count].view(dtype).reshape(shape)


_NATIVE_TYPE_NAMES = {f"tensor({name})" for name in ("float", "double", "float16", "int8", "int16", "int32", "int64",
                                                     "uint8", "uint16", "uint32", "uint64", "bool", "string")}


def to_ort_value(value: np.ndarray) -> Any:     # an onnxruntime.OrtValue (untyped)
    """An OrtValue over `value` (no copy for a contiguous CPU array of a type numpy knows)."""
    import onnxruntime as ort
    array = np.ascontiguousarray(value)
    if array.dtype in NUMPY_NATIVE or array.dtype.kind in "OSU":
        return ort.OrtValue.ortvalue_from_numpy(array)
    onnx_type = numpy_to_onnx(array.dtype)
    if onnx_type in _FOUR_BIT:
        # The binding checks one numpy item per element, so the packed bytes are copied into a
        # tensor onnxruntime allocated for the logical shape.
        packed = pack_4bit(array)
        out = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), onnx_type)
        if packed.nbytes and array.size:
            ctypes.memmove(out.data_ptr(), packed.ctypes.data, packed.nbytes)
        return out
    raw = array.view(np.uint8 if array.dtype.itemsize == 1 else np.uint16)
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, onnx_element_type=onnx_type)


def _from_ort(value: Any) -> np.ndarray:        # value: an onnxruntime.OrtValue
    if not value.is_tensor():
        return value.numpy()
    shape, onnx_type = tuple(value.shape()), value.element_type()
    try:
        dtype = onnx_to_numpy(onnx_type)
    except DmlLowerError:                       # strings and the like: the binding's own conversion
        return np.asarray(value.numpy())
    if dtype in NUMPY_NATIVE:
        return np.asarray(value.numpy())
    # A type numpy has no native dtype for (the binding gives float8 as uint8, or refuses): copy
    # the bits into ml_dtypes'.
    if onnx_type in _FOUR_BIT:
        packed = np.empty((int(np.prod(shape, dtype=np.int64)) + 1) // 2, np.uint8)
        if packed.nbytes:
            ctypes.memmove(packed.ctypes.data, value.data_ptr(), packed.nbytes)
        return unpack_4bit(packed, shape, dtype)
    out = np.empty(shape, dtype)
    if out.nbytes:
        ctypes.memmove(out.ctypes.data, value.data_ptr(), out.nbytes)
    return out


def needs_ort_values(feeds: Mapping[str, np.ndarray]) -> bool:
    return any(isinstance(v, np.ndarray) and v.dtype not in NUMPY_NATIVE and v.dtype.kind not in "OSU"
               for v in feeds.values())


class _SessionFacts:
    """What every run of one onnxruntime session asks again, read once: its output names and
    types (each a binding call per output), the feed names already validated, and whether it may
    be called without the Python wrapper's checks."""

    # session: an onnxruntime.InferenceSession, which has no type information (Any)
    def __init__(self, session: Any) -> None:
        metas = session.get_outputs()
        self.outputs = [o.name for o in metas]
        self.types = {o.name: o.type for o in metas}
        self.typed: "dict[tuple, bool]" = {}           # output names -> a result numpy cannot take
        self.refresh(session)

    def refresh(self, session: Any) -> None:
        """(Re)read the binding session: set_providers (the wrapper's own provider fallback does
        it) replaces it, and then every feed-name set is validated again."""
        # InferenceSession.run validates the feed names with a list membership test per input
        # (2.9 ms for the 559 inputs of the 91-class SSDlite's second region, every run) before
        # calling the binding. On onnxruntime's own CPU session, a feed-name set the wrapper has
        # accepted once is passed straight to the binding; a run that fails there is run again
        # through the wrapper, so its provider fallback and its errors are what the caller sees.
        # Only onnxruntime's own session: a wrapper (WeightedSession) adds feeds in its run.
        from onnxruntime.capi.onnxruntime_inference_collection import Session
        self.validated: "set[tuple]" = set()            # feed names the wrapper's run accepted
        self.binding = getattr(session, "_sess", None) if isinstance(session, Session) else None
        self.direct = (self.binding is not None and hasattr(self.binding, "run")
                       and list(session.get_providers()) == ["CPUExecutionProvider"])


_FACTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _facts(session: Any) -> _SessionFacts:
    facts = _FACTS.get(session)
    if facts is None:
        facts = _FACTS[session] = _SessionFacts(session)
    return facts


# What a provider backend says of a tensor output a run onnxruntime called successful left empty (an
# OrtValue holding nothing; the Python binding gives None, as for an empty optional): the DML EP
# does so for an Add's output that is a graph output and also read by a Relu it runs.
EMPTY_REASON = "onnxruntime returned an empty value for it (an OrtValue holding nothing), though its run succeeded"


def left_empty(value: np.ndarray) -> bool:
    """A result onnxruntime gave as None (np.asarray made it a 0-d object array)."""
    return value.dtype == object and value.shape == () and value.item() is None


# session: an onnxruntime.InferenceSession (untyped), a wrapper of one, or an onnx.reference evaluator
def run_session(session: Any, outputs: "Sequence[str] | None", feeds: Mapping[str, np.ndarray],
                run_config: "Sequence[tuple[str, str]]" = ()) -> "list[np.ndarray]":
    """session.run that also takes and returns bfloat16 / float8 tensors (an onnx.reference
    evaluator is run as it is: it takes ml_dtypes arrays natively). `run_config`: onnxruntime
    run-option entries for this run."""
    if not hasattr(session, "run_with_ort_values"):
        results = session.run(None if outputs is None else list(outputs), dict(feeds))
        return [as_array(r, n) for n, r in zip(list(outputs or []) + [""] * len(results), results)]
    from . import ort_crash
    from .interrupt import stoppable_run
    with stoppable_run() as options:        # Ctrl-C / SIGTERM end the run (a long Loop) at once
        for key, value in run_config:
            cast(Any, options).add_run_config_entry(key, value)     # an onnxruntime.RunOptions
        ort_crash.running(session)          # a crash inside is said as a crash in this session
        try:
            return _run_session(session, outputs, feeds, options)
        finally:
            ort_crash.idle()


def _run_session(session: Any, outputs: "Sequence[str] | None", feeds: Mapping[str, np.ndarray],
                 options: Any) -> "list[np.ndarray]":       # options: an onnxruntime.RunOptions
    facts = _facts(session)
    names = list(outputs) if outputs else facts.outputs      # none or empty: all, as session.run
    key = tuple(names)
    typed_out = facts.typed.get(key)
    if typed_out is None:
        # The binding hands float8 results back as uint8 and refuses bfloat16 / 4-bit ones.
        typed_out = facts.typed[key] = any(facts.types.get(n, "").startswith("tensor(") and
                                           facts.types[n] not in _NATIVE_TYPE_NAMES for n in names)
    try:
        if not typed_out and not needs_ort_values(feeds):
            feed_names = tuple(feeds)
            if facts.direct and feed_names in facts.validated:
                if getattr(session, "_sess", None) is facts.binding and facts.binding is not None:
                    try:
                        return [as_array(r, n, facts.types.get(n))
                                for n, r in zip(names, facts.binding.run(names, dict(feeds), options))]
                    except Exception:       # noqa: BLE001 - run again through the wrapper below
                        pass
                else:
                    facts.refresh(session)
            results = [as_array(r, n, facts.types.get(n)) for n, r in zip(names, session.run(names, dict(feeds), options))]
            facts.validated.add(feed_names)
            return results
    except RuntimeError as exc:
        if not binding_cannot_convert(exc):
            raise
    values = {name: to_ort_value(np.asarray(value)) for name, value in feeds.items()}
    return [_from_ort(r) for r in session.run_with_ort_values(names, values, options)]
