"""The bundled example models of `dml-lower demo`: built here, committed as .onnx beside this file.

Regenerate with `python -m onnx_dml_lowering.compiler.examples`; a test checks the committed files match.
"""
from __future__ import annotations

from typing import Sequence

from pathlib import Path

import onnx
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.ir.display import display

HERE = Path(__file__).parent
OPSET = 13
IR_VERSION = 8


def _model(name: str, nodes: "list[onnx.NodeProto]", inputs: "list[onnx.ValueInfoProto]", outputs: "list[onnx.ValueInfoProto]",
           initializers: "Sequence[onnx.TensorProto]" = (), opset: int = OPSET) -> onnx.ModelProto:
    graph = h.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION,
                         producer_name="onnx-dml-lowering examples")
    onnx.checker.check_model(model)
    return model


def masked_select() -> onnx.ModelProto:
    """x[x > 0.3] and its coordinates: Sub, Relu, NonZero, Transpose, GatherND (torch-style)."""
    return _model("masked_select", [
        h.make_node("Sub", ["x", "threshold"], ["shifted"], name="sub"),
        h.make_node("Relu", ["shifted"], ["kept"], name="relu"),
        h.make_node("NonZero", ["kept"], ["coords"], name="nonzero"),
        h.make_node("Transpose", ["coords"], ["coords_t"], name="transpose", perm=[1, 0]),
        h.make_node("GatherND", ["x", "coords_t"], ["selected"], name="gather"),
    ], [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])],
        [h.make_tensor_value_info("coords", T.INT64, [3, "nnz"]),
         h.make_tensor_value_info("selected", T.FLOAT, ["nnz"])],
        [h.make_tensor("threshold", T.FLOAT, [], [0.3])])


def banded_mix() -> onnx.ModelProto:
    """Shifted identities mixed into ordinary arithmetic: EyeLike with k and dtype attributes."""
    return _model("banded_mix", [
        h.make_node("EyeLike", ["x"], ["upper"], name="eye_upper", k=2),
        h.make_node("EyeLike", ["x"], ["lower_i64"], name="eye_lower", k=-1, dtype=T.INT64),
        h.make_node("Cast", ["lower_i64"], ["lower"], name="cast", to=T.FLOAT),
        h.make_node("Mul", ["x", "upper"], ["band"], name="mul"),
        h.make_node("Add", ["band", "lower"], ["y"], name="add"),
        h.make_node("EyeLike", ["x"], ["mask"], name="eye_bool", dtype=T.BOOL),
    ], [h.make_tensor_value_info("x", T.FLOAT, [6, 8])],
        [h.make_tensor_value_info("y", T.FLOAT, [6, 8]),
         h.make_tensor_value_info("mask", T.BOOL, [6, 8])])


def edge_cases() -> onnx.ModelProto:
    """Where peers go wrong: scalar and empty NonZero, bool and double inputs, k beyond int32."""
    return _model("edge_cases", [
        h.make_node("NonZero", ["s"], ["nz_scalar"], name="nonzero_scalar"),
        h.make_node("NonZero", ["empty"], ["nz_empty"], name="nonzero_empty"),
        h.make_node("NonZero", ["flags"], ["nz_bool"], name="nonzero_bool"),
        h.make_node("NonZero", ["wide"], ["nz_double"], name="nonzero_double"),
        h.make_node("EyeLike", ["square"], ["eye_far"], name="eyelike_far", k=2**40),
        h.make_node("EyeLike", ["square"], ["eye_u8"], name="eyelike_uint8", k=-1, dtype=T.UINT8),
    ], [h.make_tensor_value_info("s", T.FLOAT, []),
        h.make_tensor_value_info("empty", T.FLOAT, [0, 4]),
        h.make_tensor_value_info("flags", T.BOOL, [3, 5]),
        h.make_tensor_value_info("wide", T.DOUBLE, [4, 3]),
        h.make_tensor_value_info("square", T.INT32, [4, 4])],
        [h.make_tensor_value_info("nz_scalar", T.INT64, [0, "n0"]),
         h.make_tensor_value_info("nz_empty", T.INT64, [2, 0]),
         h.make_tensor_value_info("nz_bool", T.INT64, [2, "n1"]),
         h.make_tensor_value_info("nz_double", T.INT64, [2, "n2"]),
         h.make_tensor_value_info("eye_far", T.INT32, [4, 4]),
         h.make_tensor_value_info("eye_u8", T.UINT8, [4, 4])])


def exporter_idioms() -> onnx.ModelProto:
    """What exporters wrap around the operators: torch.nonzero's Transpose, torch.where's
    per-axis Slice+Squeeze, a causal mask Trilu(ConstantOfShape), and a stored 2 * identity."""
    import numpy as np
    from onnx import numpy_helper
    scores = h.make_tensor_value_info("scores", T.FLOAT, [6, 6])
    nodes = [
        h.make_node("Greater", ["scores", "zero"], ["positive"], name="greater"),
        h.make_node("NonZero", ["positive"], ["nz"], name="nonzero"),
        h.make_node("Transpose", ["nz"], ["positions"], name="transpose", perm=[1, 0]),
        h.make_node("Less", ["scores", "zero"], ["negative"], name="less"),
        h.make_node("NonZero", ["negative"], ["nz_neg"], name="nonzero_neg"),
        h.make_node("Transpose", ["nz_neg"], ["nz_neg_t"], name="transpose_neg", perm=[1, 0]),
        h.make_node("Slice", ["nz_neg_t", "s0", "s1", "axis1"], ["col0"], name="slice_rows"),
        h.make_node("Squeeze", ["col0", "axis1"], ["neg_rows"], name="squeeze_rows"),
        h.make_node("Slice", ["nz_neg_t", "s1", "s2", "axis1"], ["col1"], name="slice_cols"),
        h.make_node("Squeeze", ["col1", "axis1"], ["neg_cols"], name="squeeze_cols"),
        h.make_node("ConstantOfShape", ["mask_shape"], ["ones"], name="fill",
                    value=h.make_tensor("v", T.FLOAT, [1], [-1e9])),
        h.make_node("Trilu", ["ones", "one"], ["mask"], name="causal_mask", upper=1),
        h.make_node("MatMul", ["scores", "two_eye"], ["scaled"], name="scale"),
        h.make_node("Add", ["scaled", "mask"], ["masked_scores"], name="apply_mask"),
    ]
    inits = [numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "s0"),
             numpy_helper.from_array(np.array([1], np.int64), "s1"),
             numpy_helper.from_array(np.array([2], np.int64), "s2"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1"),
             numpy_helper.from_array(np.array([6, 6], np.int64), "mask_shape"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array((np.eye(6) * 2).astype(np.float32), "two_eye")]
    return _model("exporter_idioms", nodes, [scores],
                  [h.make_tensor_value_info("positions", T.INT64, ["n", 2]),
                   h.make_tensor_value_info("neg_rows", T.INT64, ["m"]),
                   h.make_tensor_value_info("neg_cols", T.INT64, ["m"]),
                   h.make_tensor_value_info("masked_scores", T.FLOAT, [6, 6])], inits, opset=14)


BUILDERS = {"masked_select": masked_select, "banded_mix": banded_mix, "edge_cases": edge_cases,
            "exporter_idioms": exporter_idioms}


def example_paths() -> "list[Path]":
    return [HERE / f"{name}.onnx" for name in BUILDERS]


def describe(path: Path) -> str:
    """What an example shows, in one line: its builder's docstring (what `dml-lower demo` says of it)."""
    return " ".join((BUILDERS[path.stem].__doc__ or "").split())


def write_all() -> None:
    from onnx_dml_lowering.runtime.output_file import write_bytes
    for name, build in BUILDERS.items():
        write_bytes(HERE / f"{name}.onnx", f"example {name}", build().SerializeToString())
        print(f"wrote {display(HERE / f'{name}.onnx')}")


if __name__ == "__main__":
    write_all()
