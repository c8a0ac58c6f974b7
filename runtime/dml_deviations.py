"""The DirectML EP's own deviations from ONNX semantics, as its source shows them
(shared/spec/DML_EP_PLACEMENT.md §5c), emulated so that an answer from onnxruntime's
DmlExecutionProvider can be recognised as one of them, named, and never taken for a plain
mismatch nor hidden:

- NonZero of a scalar gives [1, N] (ONNX says [0, N]); onnxruntime's CPU EP does the same;
- EyeLike's k and Trilu's k are narrowed to int32 without clamping (k = 2^40 acts as 0), and a
  lower Trilu computes k + 1 in int32, so k = INT32_MAX zeroes everything;
- Cast to bool from a float type (float32, float16, double) is a cast to uint8 followed by a clip
  to [0, 1]: fractions, negatives, -inf and NaN come out false;
- Cast to bool from int64 / uint64 reads only the low 32 bits: 2^32 comes out false;
- Relu of NaN (float32, float16, either sign) gives 0: DirectML's ACTIVATION_RELU is a max(x, 0)
  that returns the number (measured on 1.24.4; subnormals pass through unchanged);
- an empty graph output the DML EP produced (NonZero finding nothing) ends onnxruntime's batched
  read-back of the run's outputs before anything is read: the run's other DML-produced graph
  outputs hold memory never written (`unread_outputs`, measured on 1.24.4).
Cast to bool from int8 / int16 / int32 / uint8 / uint16 / uint32 gives ONNX's answer. The Cast
entries are measured on the real onnxruntime-directml 1.24.4 (docs/directml-ep-on-linux.md, the
directml tests of tests/runtime/directml/test_dml_deviations_real.py); a source type not measured
(bfloat16) is not predicted to deviate.

`dml_outputs(model, feeds, providers)` runs the model on onnx.reference with those operators
replaced and says which deviation changed which node's result. `providers` (node name -> provider)
says which nodes the DML EP runs; a node it leaves to the CPU EP gets the CPU EP's answer, which is
ONNX's but for a scalar NonZero ([1, N] there too).

Apart from those answers, FAILURES are nodes the DML EP claims (onnxruntime gives them to it) and
then cannot run, measured on the real onnxruntime-directml 1.24.4 (docs/directml-on-linux.md):
`failing_nodes` predicts them (inspect --ep dml, optimize --for dml) and `name_failure` recognises
one in onnxruntime's message (the ort-dml backend's ERROR names it and the node)."""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping
from dataclasses import dataclass
from enum import Enum

import numpy as np

import onnx

from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.ir.printer import name_list
from onnx_dml_lowering.lowering.onnx_graphs import is_standard, standard_opset
from onnx_dml_lowering.runtime.onnx_inference import infer_shapes

from .dml_fusion import DML, FUSED_OUTPUT_EMPTY, FUSED_OUTPUT_TEXT
from .dml_fusion import FAILURE_MARKS as FUSION_MARKS
from .dml_fusion import FAILURE_TEXT as FUSION_FAILURES
from .dml_fusion import fusion_failures

INT32_MIN, INT32_MAX = -2**31, 2**31 - 1

NAMES = {
    "scalar_nonzero": "DML EP deviation: a scalar NonZero gives [1, N] (ONNX says [0, N])",
    "eyelike_k": "DML EP deviation: EyeLike's k is narrowed to int32",
    "trilu_k": "DML EP deviation: Trilu's k is narrowed to int32",
    "trilu_k_overflow": "DML EP deviation: a lower Trilu at k = INT32_MAX computes k + 1 in int32 and zeroes everything",
    "cast_bool_clip": "DML EP deviation: Cast to bool is a cast to uint8 clipped to [0, 1] (fractions, negatives and "
                      "NaN give false)",
    "cast_bool_low_word": "DML EP deviation: Cast from int64 / uint64 to bool reads only the low 32 bits "
                          "(2^32 gives false)",
    "relu_nan": "DML EP deviation: Relu of NaN gives 0 (ONNX says NaN)",
    "empty_output_readback": "DML EP deviation: an empty output ended onnxruntime's batched read-back of the DML "
                             "EP's outputs (ExecutionProviderImpl::CopyTensors)",
    "scalar_nonzero_cpu": "onnxruntime deviation: a scalar NonZero the DML EP leaves to the CPU EP gives [1, N] "
                          "there too (ONNX says [0, N])",
    "roialign_10_half_pixel": "DML EP deviation: RoiAlign-10 is computed in half_pixel mode (every ROI moved by "
                              "half a pixel; ONNX's RoiAlign-10 has no offset)",
    "roialign_unclamped": "DML EP deviation: RoiAlign in output_half_pixel mode keeps an ROI under one pixel as it "
                          "is (ONNX makes it one pixel wide and high)",
    FUSED_OUTPUT_EMPTY: FUSED_OUTPUT_TEXT,
}
# Float answers: recognised within the output's tolerances, not bit for bit (the DML EP's RoiAlign
# equals the emulation below to ~4e-7, as onnxruntime's CPU RoiAlign equals onnx.reference's)
FLOAT_DEVIATIONS = frozenset({"roialign_10_half_pixel", "roialign_unclamped"})
# Cast to bool's source types that deviate on the DML EP, as measured (1.24.4): the rest give ONNX's answer
CAST_BOOL_CLIPPED = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
CAST_BOOL_LOW_WORD = (np.dtype(np.int64), np.dtype(np.uint64))
CAST_BOOL_BY_TYPE = {"float": "cast_bool_clip", "float16": "cast_bool_clip", "double": "cast_bool_clip",
                     "int64": "cast_bool_low_word", "uint64": "cast_bool_low_word"}
RELU_NAN_TYPES = (np.dtype(np.float16), np.dtype(np.float32))   # measured; double is not predicted
DML_PROVIDER = DML                     # one spelling with dml_fusion's (which cannot import this module)


def int32(k: int) -> int:
    """k narrowed as gsl::narrow_cast<int32_t> does: the low 32 bits, two's complement."""
    return int(np.array(k, np.int64).astype(np.int32))


def _band(shape: "tuple[int, ...]", low: "int | None", high: "int | None") -> np.ndarray:
    """True where low <= col - row <= high (None: unbounded), over the last two axes."""
    rows, cols = shape[-2], shape[-1]
    d = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = np.ones((rows, cols), bool)
    if low is not None:
        keep &= d >= low
    if high is not None:
        keep &= d <= high
    return np.broadcast_to(keep, shape)


def cast_bool_deviation(source: "str | None") -> "str | None":
    """The deviation (a key of NAMES) of the DML EP's Cast to bool from an ONNX type named
    ('float', 'int64', ...), or None where it gives ONNX's answer (or the type is unknown)."""
    return CAST_BOOL_BY_TYPE.get(source or "")


def cast_to_bool(x: np.ndarray) -> "tuple[np.ndarray, str | None]":
    """(the DML EP's Cast of `x` to bool, the deviation key when its answer can differ from ONNX's)."""
    values = np.asarray(x)
    if values.dtype in CAST_BOOL_CLIPPED:
        values = np.where(np.isnan(values), 0, np.trunc(values))
        return np.clip(np.clip(values.astype(np.float64), 0, 255), 0, 1).astype(np.bool_), "cast_bool_clip"
    if values.dtype in CAST_BOOL_LOW_WORD:
        return (values.astype(np.uint64) & np.uint64(0xFFFFFFFF)) != 0, "cast_bool_low_word"
    return values != 0, None


def _ops(fired: "list[tuple[str, str]]", providers: "dict[str, str] | None") -> "list[type]":
    """onnx.reference operators with the DML EP's semantics (on the nodes `providers` gives it: all
    when None); each appends (deviation, detail) to `fired` when its answer differs from ONNX's."""
    # onnx.reference's operator list costs ~0.1 s to import: only a DML EP run needs it
    from onnx.reference.op_run import OpRun
    on_dml = _on_dml(providers)
    return [*_index_ops(fired, OpRun, on_dml), _cast_op(fired, OpRun, on_dml), _relu_op(fired, OpRun, on_dml),
            _roi_align_op(fired, OpRun, on_dml)]


def _on_dml(providers: "dict[str, str] | None") -> "Callable[[Any], bool]":
    """Whether an onnx.reference operator's node runs on the DML EP. A body's node is named by its
    path in the placement ("loop/body/name"); a node the placement does not name (removed by
    onnxruntime's optimisations) keeps the DML EP's semantics."""
    by_name: "dict[str, set[str]]" = {}
    for path, provider in (providers or {}).items():
        by_name.setdefault(path.rsplit("/", 1)[-1], set()).add(provider)

    def on_dml(op: Any) -> bool:
        seen = by_name.get(op.onnx_node.name)
        return providers is None or not seen or DML_PROVIDER in seen
    return on_dml


def _index_ops(fired: "list[tuple[str, str]]", OpRun: type, on_dml: "Callable[[Any], bool]") -> "list[type]":
    """NonZero, EyeLike and Trilu as the DML EP runs them (_ops)."""

    class NonZero(OpRun):
        op_domain = ""

        def _run(self, x: np.ndarray) -> "tuple[np.ndarray]":
            if np.ndim(x) == 0:         # the CPU EP, where the DML EP leaves it, answers the same
                fired.append(("scalar_nonzero" if on_dml(self) else "scalar_nonzero_cpu", ""))
                return (np.zeros((1, int(bool(x))), np.int64),)
            return (np.array(np.nonzero(x), dtype=np.int64),)

    class EyeLike(OpRun):
        op_domain = ""

        def _run(self, x: np.ndarray, dtype: "int | None" = None, k: "int | None" = None) -> "tuple[np.ndarray]":
            k = 0 if k is None else int(k)
            narrow = int32(k) if on_dml(self) else k
            out_type = onnx.helper.tensor_dtype_to_np_dtype(dtype) if dtype else x.dtype
            out = _band(x.shape, narrow, narrow).astype(out_type)
            if narrow != k and not np.array_equal(out, _band(x.shape, k, k).astype(out_type)):
                fired.append(("eyelike_k", f"k {k} acts as {narrow}"))
            return (out,)

    class Trilu(OpRun):
        op_domain = ""

        # k: the input tensor of one int64 (None when absent); rebound to its value
        def _run(self, x: np.ndarray, k: "np.ndarray | int | None" = None,
                 upper: "int | None" = None) -> "tuple[np.ndarray]":
            k = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
            upper = 1 if upper is None else int(upper)
            narrow = int32(k) if on_dml(self) else k
            if upper:
                keep, onnx_keep = _band(x.shape, narrow, None), _band(x.shape, k, None)
            elif narrow == INT32_MAX:
                keep, onnx_keep = np.zeros(x.shape, bool), _band(x.shape, None, k)   # k + 1 wraps to INT32_MIN
            else:
                keep, onnx_keep = _band(x.shape, None, narrow), _band(x.shape, None, k)
            out = np.where(keep, x, np.zeros((), x.dtype)).astype(x.dtype)
            if not np.array_equal(keep, onnx_keep):
                fired.append(("trilu_k_overflow", "") if not upper and narrow == INT32_MAX
                             else ("trilu_k", f"k {k} acts as {narrow}"))
            return (out,)

    return [NonZero, EyeLike, Trilu]


def _cast_op(fired: "list[tuple[str, str]]", OpRun: type, on_dml: "Callable[[Any], bool]") -> type:
    """Cast to bool as the DML EP runs it, through uint8 (_ops)."""
    from onnx.reference.ops.op_cast import cast_to

    class Cast(OpRun):
        op_domain = ""

        # to, saturate: the attributes as onnx.reference passes them (a TensorProto data type, set
        # on every valid Cast; 0 / 1), where its cast_to takes a DataType and a bool: Any
        def _run(self, x: np.ndarray, to: Any = None, saturate: Any = None,
                 round_mode: "str | None" = None) -> "tuple[np.ndarray]":
            if to != onnx.TensorProto.BOOL or x.dtype == np.bool_ or not on_dml(self):
                return (cast_to(x, to, saturate if saturate is not None else True, round_mode or "up"),)
            out, key = cast_to_bool(x)
            if key is not None and not np.array_equal(out, np.asarray(x) != 0):
                fired.append((key, ""))
            return (out,)

    return Cast


def _relu_op(fired: "list[tuple[str, str]]", OpRun: type, on_dml: "Callable[[Any], bool]") -> type:
    """Relu as the DML EP runs it: NaN gives 0 (_ops)."""

    class Relu(OpRun):
        op_domain = ""

        def _run(self, x: np.ndarray) -> "tuple[np.ndarray]":
            if x.dtype not in RELU_NAN_TYPES or not on_dml(self):
                return (np.maximum(x, np.zeros((), x.dtype)).astype(x.dtype),)
            nan = np.isnan(x)
            if nan.any():
                fired.append(("relu_nan", f"{int(nan.sum())} NaN"))
            # x > 0 or 0, as measured: NaN and -0 give +0 (a zero's sign is no deviation)
            return (np.where(x > 0, x, np.zeros((), x.dtype)).astype(x.dtype),)

    return Relu


def roi_align_deviation(since_version: int, mode: "str | None") -> "str | None":
    """The DML EP's RoiAlign deviation (a key of NAMES) for a node of that since-version and
    coordinate_transformation_mode attribute (None: absent), measured on 1.24.4: RoiAlign-10 runs as
    half_pixel; output_half_pixel runs without ONNX's clamp of an ROI to at least 1 x 1."""
    if since_version < 16:
        return "roialign_10_half_pixel"
    return "roialign_unclamped" if mode == "output_half_pixel" else None


def dml_roi_align(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, key: str,
                  attributes: "Mapping[str, Any]") -> np.ndarray:
    """RoiAlign as the DML EP computes it under deviation `key`: onnxruntime's CPU RoiAlign-16 in
    half_pixel mode (no clamp), the ROIs moved back by half a pixel for output_half_pixel."""
    import onnxruntime as ort
    from onnx import helper
    scale = float(attributes.get("spatial_scale", 1.0))
    boxes = np.asarray(rois)
    if key == "roialign_unclamped":      # half_pixel subtracts 0.5 after scaling: add it back first
        boxes = (boxes.astype(np.float64) + 0.5 / scale).astype(boxes.dtype)
    elem = helper.np_dtype_to_tensor_dtype(np.asarray(x).dtype)
    node = helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], coordinate_transformation_mode="half_pixel",
                            **{k: v for k, v in attributes.items() if k != "coordinate_transformation_mode"})
    graph = helper.make_graph([node], "roi_align", [helper.make_tensor_value_info("x", elem, None),
                                                    helper.make_tensor_value_info("rois", elem, None),
                                                    helper.make_tensor_value_info("bi", onnx.TensorProto.INT64, None)],
                              [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x, "rois": boxes, "bi": np.asarray(batch_indices, np.int64)})[0]


def _roi_align_op(fired: "list[tuple[str, str]]", OpRun: type, on_dml: "Callable[[Any], bool]") -> type:
    """RoiAlign as the DML EP runs it (_ops): fired where its answer differs from ONNX's."""
    from onnx.reference.ops.op_roi_align import RoiAlign as OnnxRoiAlign

    class RoiAlign(OnnxRoiAlign):
        op_domain = ""

        def _run(self, x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray,  # type: ignore[override]
                 **attributes: Any) -> "tuple[np.ndarray]":
            names = ("mode", "output_height", "output_width", "sampling_ratio", "spatial_scale",
                     "coordinate_transformation_mode")
            given = {k: _plain(getattr(self, k)) for k in names if getattr(self, k, None) is not None}
            since = _since(self)
            if since < 16:      # RoiAlign-10 has no mode: ONNX's answer is output_half_pixel's (onnx.reference
                given["coordinate_transformation_mode"] = None      # would take RoiAlign-16's default)
            key = roi_align_deviation(since, given.get("coordinate_transformation_mode"))
            onnx_mode = given.get("coordinate_transformation_mode") or ("output_half_pixel" if since < 16
                                                                        else "half_pixel")
            onnx_answer = super()._run(x, rois, batch_indices, coordinate_transformation_mode=onnx_mode)[0]
            if key is None or not on_dml(self):
                return (onnx_answer,)
            given.pop("coordinate_transformation_mode", None)
            out = dml_roi_align(x, rois, batch_indices, key, given)
            if not np.allclose(out, onnx_answer, rtol=1e-5, atol=1e-6):
                fired.append((key, ""))
                return (out,)
            return (onnx_answer,)

    return RoiAlign


def _since(op: Any) -> int:
    """The since-version of an onnx.reference operator's node at its opset."""
    return int(onnx.defs.get_schema(op.onnx_node.op_type, op.run_params.get("opsets", {}).get("", 22)).since_version)


def _plain(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def dml_outputs(model: onnx.ModelProto, feeds: "dict[str, np.ndarray]", providers: "dict[str, str] | None" = None
                ) -> "tuple[dict[str, np.ndarray], list[tuple[str, str]]]":
    """(the outputs the DML EP's lowering gives, the deviations that changed a result on the
    way: (key of NAMES, detail)); `providers`: the provider of each node (None: all on the DML EP).
    Raises what onnx.reference raises for a model it cannot run."""
    from onnx_dml_lowering.runtime.weights import reference_evaluator
    fired: "list[tuple[str, str]]" = []
    # the weights a loaded file left in it are fed from there (onnx.reference refuses external data)
    evaluator = reference_evaluator(model, new_ops=_ops(fired, providers))
    names = [o.name for o in model.graph.output]
    values = evaluator.run(None, feeds)
    return dict(zip(names, values)), fired


def describe(fired: "list[tuple[str, str]]") -> str:
    """One line naming every deviation that fired (in order, once each)."""
    seen: "dict[str, str]" = {}
    for key, detail in fired:
        seen.setdefault(key, detail)
    return "; ".join(NAMES[key] + (f" ({detail})" if detail else "") for key, detail in seen.items())


def recognise(model: onnx.ModelProto, feeds: "dict[str, np.ndarray]", name: str,
              got: "np.ndarray | None", within: "Callable[[np.ndarray, np.ndarray], bool] | None" = None
              ) -> "str | None":
    """The named DML EP deviation(s) when `got` (output `name` from the DML EP) is the DML EP's
    documented answer and that answer comes from a deviation; else None. Bit for bit, but where a
    float deviation (FLOAT_DEVIATIONS) fired: then `within(want, got)`, the check's comparator at
    the output's tolerances (None: bit for bit still)."""
    try:
        outputs, fired = dml_outputs(model, feeds)
    except Exception:  # onnx.reference cannot run this model: nothing is recognised, nothing hidden
        return None
    want = outputs.get(name)
    if not fired or want is None or got is None:
        return None
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return None
    if within is not None and any(key in FLOAT_DEVIATIONS for key, _ in fired):
        if not within(want, got):
            return None
    elif got.tobytes() != want.tobytes():
        return None
    return describe(fired)



# -- outputs never read back: an empty output in the DML EP's batched GPU -> CPU copy -----------------
# onnxruntime copies a run's device-resident graph outputs to the CPU in one batch through the DML
# EP's ExecutionProviderImpl::CopyTensors (the SrcDstPair overload, DmlExecutionProvider/src/
# ExecutionProvider.cpp, 1.24.4). At the first pair of zero bytes it returns OK before the batch's
# read-back from the GPU, so no output of the batch, queued before the empty one or after it, is
# copied: the caller's CPU buffers keep what they held. Only outputs of nodes the DML EP ran are in
# that batch; an output of a node left to the CPU EP is already in CPU memory and is unaffected.


class Held(Enum):
    """What an output never read back holds, against ONNX's answer (the words of its DEVIATION)."""
    OTHER = "holds memory never written"
    WITHIN_TOLERANCE = ("holds memory never written that lies within tolerance of ONNX's answer, not equal to "
                        "it bit for bit: not DirectML's answer")
    EQUAL = "holds memory never written that happens to equal ONNX's answer bit for bit: not DirectML's answer"

    @classmethod
    def of(cls, want: np.ndarray, got: "np.ndarray | None", matched: bool) -> "Held":
        """`matched`: the comparison within tolerance passed; bit for bit decides between the two."""
        if not matched or got is None:
            return cls.OTHER
        got = np.asarray(got)
        same = got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
        return cls.EQUAL if same else cls.WITHIN_TOLERANCE


@dataclass(frozen=True)
class UnreadOutput:
    """A graph output of the DML EP's that was never read back: `empty` (its type `empty_type`,
    e.g. "int64 [2x0]") is the empty DML output that ended the batch."""
    output: str
    empty: str
    empty_type: str

    def describe(self, held: Held = Held.OTHER) -> str:
        """The DEVIATION's line; `held`: whether the unwritten memory equals ONNX's answer (bit for
        bit, or only within tolerance: a 1.4e-45 left there against a 0)."""
        return (f"DML EP deviation: the empty output '{display(self.empty)}' ({self.empty_type}) ended onnxruntime's "
                f"batched read-back of the DML EP's outputs (ExecutionProviderImpl::CopyTensors), so "
                f"'{display(self.output)}' {held.value}")

    def short(self) -> str:
        """In the words of a conformance difference ('output y: ...'), beside the deviation's name."""
        return (f"output {display(self.output)}: never read back (the empty output '{display(self.empty)}' "
                f"({self.empty_type}) ended the batch)")


def _type_line(value: np.ndarray) -> str:
    return f"{value.dtype} [{'x'.join(map(str, value.shape))}]"


def dml_produced_outputs(model: onnx.ModelProto, providers: "Mapping[str, str] | None") -> "list[str]":
    """The graph outputs (in output order) whose producing node runs on the DML EP: the batch
    onnxruntime reads back from the GPU. `providers` as for dml_outputs (None: every node on the DML
    EP; a node it does not name, fused or renamed by onnxruntime's optimisations, counts as the DML
    EP's). A graph input or initializer returned as an output is no node's: not in the batch."""
    producer = {out: node.name for node in model.graph.node for out in node.output if out}
    by_name = dict(providers or {})
    return [o.name for o in model.graph.output if o.name in producer
            and (providers is None or by_name.get(producer[o.name], DML_PROVIDER) == DML_PROVIDER)]


def unread_outputs(model: onnx.ModelProto, outputs: "Mapping[str, np.ndarray | None]",
                   providers: "Mapping[str, str] | None") -> "dict[str, UnreadOutput]":
    """output name -> UnreadOutput for each DML-produced graph output of a run (`outputs`, as the DML
    EP returned them) that onnxruntime never read back, because another DML-produced graph output
    of the run is empty (the first such, in output order, is named); {} when none is."""
    got = {name: np.asarray(value) for name in dml_produced_outputs(model, providers)
           if (value := outputs.get(name)) is not None}
    empty = [name for name, value in got.items() if value.size == 0]
    if not empty:
        return {}
    first = empty[0]
    kind = _type_line(got[first])
    return {name: UnreadOutput(name, first, kind) for name in got if name not in empty}


@dataclass(frozen=True)
class EmptyOutputRisk:
    """A graph output the DML EP produces that can be empty at run time (a NonZero's, or a value
    with a data-dependent dimension downstream of one) beside `others`, the model's other
    DML-produced graph outputs: when it is empty, they are never read back (unread_outputs)."""
    output: str
    node: str
    op_type: str
    others: "tuple[str, ...]"

    def describe(self) -> str:
        return (f"graph output '{display(self.output)}' ({self.op_type} node {display(self.node) or '(unnamed)'} on the DML "
                "EP) can be "
                f"empty at run time: then onnxruntime's batched read-back of the DML EP's outputs "
                f"(ExecutionProviderImpl::CopyTensors) ends before it reads the other DML outputs "
                f"({name_list(list(self.others), 4)}), measured on onnxruntime-directml 1.24.4 (a named DML EP deviation)")


def empty_output_risks(model: onnx.ModelProto, providers: "Mapping[str, str] | None") -> "list[EmptyOutputRisk]":
    """The main graph's outputs that can make unread_outputs fire, predicted from the model alone:
    a DML-produced graph output that is a NonZero's, or downstream of one with a dimension onnx's
    shape inference cannot fix (data-dependent), while other graph outputs are DML-produced too.
    `providers`: as for dml_produced_outputs (the predicted placement)."""
    graph = model.graph
    batch = dml_produced_outputs(model, providers)
    if len(batch) < 2:
        return []
    reached = {out for n in graph.node if n.op_type == "NonZero" and is_standard(n) for out in n.output[:1]}
    if not reached:
        return []
    nonzero = set(reached)
    for node in graph.node:                     # graph order is topological
        if reached.intersection(node.input):
            reached.update(out for out in node.output if out)
    downstream = [name for name in batch if name in reached and name not in nonzero]
    unfixed = _data_dependent(model) if downstream else set()     # shape inference only where it decides
    producer = {out: node for node in graph.node for out in node.output if out}
    return [EmptyOutputRisk(name, producer[name].name, producer[name].op_type, tuple(o for o in batch if o != name))
            for name in batch if name in nonzero or (name in downstream and name in unfixed)]


def _data_dependent(model: onnx.ModelProto) -> "set[str]":
    """Values whose shape onnx's shape inference leaves with a dimension neither a number nor one of
    the graph inputs' named dimensions (an exporter's own name, as torch's u0, counts as data-dependent),
    or with no shape at all: a dimension known only at run time."""
    try:
        inferred = infer_shapes(model)
    except Exception:   # onnx cannot infer this model: every value's dimensions are unknown
        return {out for node in model.graph.node for out in node.output}
    graph = inferred.graph
    named = {d.dim_param for i in graph.input if i.type.HasField("tensor_type")
             for d in i.type.tensor_type.shape.dim if d.HasField("dim_param")}
    known = set()
    for info in list(graph.value_info) + list(graph.output):
        tensor = info.type.tensor_type
        if info.type.HasField("tensor_type") and tensor.HasField("shape") and all(
                d.HasField("dim_value") or d.dim_param in named for d in tensor.shape.dim):
            known.add(info.name)
    return {out for node in graph.node for out in node.output if out and out not in known}


# -- failures: nodes the DML EP claims (so onnxruntime gives them to it) and then cannot run ----------
FAILURES = {
    # onnxruntime-directml 1.24.4: E_INVALIDARG at session creation with static shapes, "Out of memory"
    # at the first run with dynamic ones (torch's dynamo exports of Whisper, BERT, GPT-2, Llama)
    "reshape_allowzero_infer": "DML EP deviation: Reshape with allowzero=1 and a -1 in its shape fails on the DML EP",
    # onnxruntime-directml 1.24.4: E_INVALIDARG at the run in the node reading the [1, N] result (Transpose,
    # Cast; or the MemcpyFromHost feeding it when the NonZero is on the CPU EP); an Identity passes it on
    "scalar_nonzero_read": "DML EP deviation: a node on the DML EP reading a scalar NonZero's result fails at the run",
    # onnxruntime-directml 1.24.4: "This is an invalid model" at session creation, naming the fused node (dml_fusion.py)
    **FUSION_FAILURES,
}
# How each failure shows in onnxruntime's message (HRESULTs): at session creation, at a run. At a run
# both were seen: E_OUTOFMEMORY (GPT-2) and E_INVALIDARG (BERT, Llama, T5 dynamo exports).
_FAILURE_CODES = {"reshape_allowzero_infer": (("80070057",), ("8007000E", "80070057")),
                  "scalar_nonzero_read": ((), ("80070057",)),
                  **{key: ((mark,), ()) for key, mark in FUSION_MARKS.items()}}
# Operators that read a scalar NonZero's result on the DML EP and pass (measured): Identity
_READS_SCALAR_NONZERO = ("Identity",)


@dataclass(frozen=True)
class FailingNode:
    """A node of the model the DML EP will claim and fail on (a key of FAILURES)."""
    node: str
    op_type: str
    key: str

    def describe(self) -> str:
        return f"{FAILURES[self.key]} (node {display(self.node)})"


def _constants(graph: onnx.GraphProto) -> "dict[str, np.ndarray]":
    from onnx import numpy_helper
    values = {t.name: t for t in graph.initializer}
    found: "dict[str, np.ndarray]" = {}
    for name, tensor in values.items():
        if tensor.data_type == onnx.TensorProto.INT64 and tensor.data_location != onnx.TensorProto.EXTERNAL:
            found[name] = numpy_helper.to_array(tensor)
    for node in graph.node:
        if node.op_type == "Constant" and is_standard(node) and node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type == onnx.TensorProto.INT64:
                    found[node.output[0]] = numpy_helper.to_array(attr.t)
                elif attr.name == "value_ints":
                    found[node.output[0]] = np.array(list(attr.ints), np.int64)
    return found


def _holds_minus_one(graph: onnx.GraphProto, value: str, constants: "dict[str, np.ndarray]") -> bool:
    """`value` is a constant holding -1, or a Concat of pieces one of which is (torch's exports build
    a shape as Concat(dynamic dims..., [-1])): either way the shape holds a -1 at every run."""
    if value in constants:
        return bool((constants[value] == -1).any())
    producer = next((n for n in graph.node if value in n.output), None)
    if producer is None or producer.op_type != "Concat":
        return False
    return any(i in constants and bool((constants[i] == -1).any()) for i in producer.input)


def reshapes_allowzero_minus_one(graph: onnx.GraphProto, opset: int) -> "list[onnx.NodeProto]":
    """The graph's Reshape nodes with allowzero=1 whose shape holds a -1 (the reshape_allowzero_infer
    failure); `opset`: the model's ai.onnx opset (allowzero exists from 14)."""
    constants = None
    found = []
    for node in graph.node:
        if node.op_type != "Reshape" or not is_standard(node) or opset < 14 or len(node.input) < 2:
            continue
        allowzero = next((a.i for a in node.attribute if a.name == "allowzero"), 0)
        if allowzero != 1:
            continue
        constants = _constants(graph) if constants is None else constants
        if _holds_minus_one(graph, node.input[1], constants):
            found.append(node)
    return found


def failing_nodes(model: onnx.ModelProto, ranks: "dict[str, int] | None" = None) -> "list[FailingNode]":
    """The nodes of the main graph the DML EP claims and fails on (FAILURES), in graph order;
    `ranks`: value name -> rank where known (else read from the model's declared and inferred shapes)."""
    found = _reshape_failures(model) + _scalar_nonzero_failures(model, ranks) + \
        [FailingNode(*found) for found in fusion_failures(model.graph)]
    order = {n.name: i for i, n in enumerate(model.graph.node)}
    return sorted(found, key=lambda f: order.get(f.node, len(order)))


def _reshape_failures(model: onnx.ModelProto) -> "list[FailingNode]":
    return [FailingNode(node.name, node.op_type, "reshape_allowzero_infer")
            for node in reshapes_allowzero_minus_one(model.graph, standard_opset(model, 0))]


def _scalar_nonzero_failures(model: onnx.ModelProto, ranks: "dict[str, int] | None") -> "list[FailingNode]":
    """The nodes reading the result of a NonZero whose input is a scalar (rank known to be 0)."""
    graph = model.graph
    nonzeros = [n for n in graph.node if n.op_type == "NonZero" and is_standard(n) and n.input and n.output]
    if not nonzeros:
        return []
    ranks = ranks if ranks is not None else _declared_ranks(model)
    scalar = {n.output[0] for n in nonzeros if ranks.get(n.input[0]) == 0}
    return [FailingNode(n.name, n.op_type, "scalar_nonzero_read") for n in graph.node
            if n.op_type not in _READS_SCALAR_NONZERO and scalar.intersection(n.input)]


def _declared_ranks(model: onnx.ModelProto) -> "dict[str, int]":
    """value name -> rank, from the graph's declared types, its initializers and onnx's shape inference."""
    try:
        inferred = infer_shapes(model)
    except Exception:   # onnx cannot infer this model: the declared shapes alone
        inferred = model
    graph = inferred.graph
    ranks = {t.name: len(t.dims) for t in graph.initializer}
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        tensor = info.type.tensor_type
        if info.type.HasField("tensor_type") and tensor.HasField("shape"):
            ranks.setdefault(info.name, len(tensor.shape.dim))
    return ranks


_RUN_NODE = re.compile(r"running (\S+) node\. Name:'(.*?)' Status Message")


def name_failure(model: "onnx.ModelProto | None", message: str, at_run: bool) -> "str | None":
    """The named deviation a DML EP failure (onnxruntime's `message`, at session creation or at a run)
    is, when the model holds a node the deviation predicts and the message is that failure's; else None."""
    if model is None:
        return None
    nodes = failing_nodes(model)
    named = _RUN_NODE.search(message) if at_run else None
    # a copy onnxruntime inserted (Memcpy) is named when it is what fails: the node it feeds is not
    if named is not None and not named.group(1).startswith("Memcpy"):
        nodes = [n for n in nodes if n.node == named.group(2)]
    nodes = [n for n in nodes if any(code in message.upper() for code in _FAILURE_CODES[n.key][1 if at_run else 0])]
    if not nodes:
        return None
    keys = dict.fromkeys(n.key for n in nodes)
    return "; ".join(f"{FAILURES[key]} (node {name_list([n.node for n in nodes if n.key == key], 4)})" for key in keys)
