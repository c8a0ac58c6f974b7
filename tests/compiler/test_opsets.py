"""An opset past what the installed onnx defines is refused at load in one line (domain, opset
given, highest known); ai.onnx.ml within its range, custom domains and model-local functions keep
working. The highest versions come from onnx.defs, never from this file."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.cli import main
from onnx_dml_lowering.ir import DmlLowerError
from tests.builders import single_node_model
from tests.oracle import assert_outputs_same, reference

DEFAULT = onnx.defs.onnx_opset_version()
ML = onnx.defs.onnx_ml_opset_version()


def nonzero_with(*imports: "tuple[str, int]") -> onnx.ModelProto:
    """NonZero over float [3, 4] at opset 13, plus these (domain, version) imports."""
    model = single_node_model("NonZero", T.FLOAT, [3, 4], T.INT64, opset=13)
    model.opset_import.extend(h.make_opsetid(d, v) for d, v in imports)
    return model


def spelled_ai_onnx(version: int) -> onnx.ModelProto:
    """The default domain imported once, spelt 'ai.onnx' (with '' beside it, it would be imported twice)."""
    model = at_default(version)
    model.opset_import[0].domain = "ai.onnx"
    return model


def at_default(version: int) -> onnx.ModelProto:
    model = single_node_model("NonZero", T.FLOAT, [3, 4], T.INT64, opset=13)
    model.opset_import[0].version = version
    return model


def with_function(version: int) -> onnx.ModelProto:
    """y = local.Wrap(x), Wrap's body a NonZero importing the default domain at `version`."""
    function = h.make_function("local", "Wrap", ["a"], ["b"], [h.make_node("NonZero", ["a"], ["b"])],
                               [h.make_opsetid("", version)])
    graph = h.make_graph([h.make_node("Wrap", ["x"], ["y"], domain="local", name="wrap")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                         [h.make_tensor_value_info("y", T.INT64, [2, None])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("local", 1)],
                        functions=[function], ir_version=8)


REFUSED = {
    "default-domain-30": (lambda: at_default(30), ["'ai.onnx'", "opset 30", f"up to opset {DEFAULT}"]),
    "default-domain-next": (lambda: at_default(DEFAULT + 1), [f"opset {DEFAULT + 1}", f"up to opset {DEFAULT}"]),
    "ai.onnx-spelled": (lambda: spelled_ai_onnx(DEFAULT + 2), ["'ai.onnx'", f"opset {DEFAULT + 2}"]),
    "ml-domain-next": (lambda: nonzero_with(("ai.onnx.ml", ML + 1)),
                       ["'ai.onnx.ml'", f"opset {ML + 1}", f"up to opset {ML}"]),
    "function-import": (lambda: with_function(DEFAULT + 1), ["function 'Wrap'", f"opset {DEFAULT + 1}"]),
}

ACCEPTED = {
    "default-domain-newest": lambda: at_default(DEFAULT),
    "ml-domain-newest": lambda: nonzero_with(("ai.onnx.ml", ML)),
    "custom-domain-any-version": lambda: nonzero_with(("com.example", 999)),
    "function-at-13": lambda: with_function(13),
}


@pytest.mark.parametrize("row", sorted(REFUSED))
def test_refused_in_one_line(row: str, tmp_path, capsys) -> None:
    build, substrings = REFUSED[row]
    with pytest.raises(DmlLowerError) as info:
        compile_model(build())
    for text in substrings:
        assert text in str(info.value), str(info.value)
    path = tmp_path / "m.onnx"
    onnx.save(build(), str(path))
    for command in ("check", "run", "compile", "inspect"):
        assert main([command, str(path)]) == 2
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and substrings[0] in lines[0], captured.err
        assert "match ONNX semantics" not in captured.out


@pytest.mark.parametrize("row", sorted(ACCEPTED))
def test_known_and_custom_opsets_keep_working(row: str) -> None:
    model = ACCEPTED[row]()
    x = np.array([[1, 0, 2, 0], [0, 0, 3, 0], [4, 0, 0, 5]], np.float32)
    got = compile_model(model).run({"x": x})
    assert_outputs_same(got, reference(model, {"x": x}))
