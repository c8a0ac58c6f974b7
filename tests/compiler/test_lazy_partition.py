"""The partition is computed when something first asks for it (CompiledModel.partition): a `run`
whose backends all run the model on an onnxruntime provider never asks, and prints, writes and
exits exactly as when compile_model partitioned every model up front; a command that needs the
partition (compile, a lowered backend, check's oracle) still computes it, and an error the
partition raises is still its one line, exit 2, there."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compiled as compiled_module
from onnx_dml_lowering.compiler import partition as partition_module
from onnx_dml_lowering.ir import DmlLowerError
from tests.builders import graph_model
from tests.cli_runner import cli
from tests.paths import REAL


@pytest.fixture
def partitions(monkeypatch) -> "list[str]":
    """The graph name of every main-graph partition computed (the real one, counted)."""
    real, seen = partition_module.partition, []

    def counted(model, *args, **kwargs):
        seen.append(model.graph.name)
        return real(model, *args, **kwargs)
    monkeypatch.setattr(partition_module, "partition", counted)
    return seen


def _eager(monkeypatch) -> None:
    """compile_model as it was: the partition computed before it returns."""
    real = compiled_module.compile_model

    def eager(*args, **kwargs):
        compiled = real(*args, **kwargs)
        _ = compiled.partition
        return compiled
    monkeypatch.setattr(compiled_module, "compile_model", eager)


def _with_default(tmp_path) -> str:
    """An initializer that is also an input (a default run reports taking) beside a lowered NonZero,
    and a Trilu on int8 (no CPU kernel: the modified provider model cuts it, PARTIAL)."""
    model = graph_model([h.make_node("Add", ["x", "d"], ["y"], name="add"),
                         h.make_node("NonZero", ["y"], ["nz"], name="nz"),
                         h.make_node("Trilu", ["q"], ["t"], name="tri")],
                        [("x", T.FLOAT, [2, 3]), ("q", T.INT8, [3, 3])],
                        [("y", T.FLOAT, [2, 3]), ("nz", T.INT64, [2, None]), ("t", T.INT8, [3, 3])], opset=14)
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.eye(2, 3, dtype=np.float32), "d"))
    model.graph.input.append(h.make_tensor_value_info("d", T.FLOAT, [2, 3]))
    path = tmp_path / "defaults.onnx"
    onnx.save(model, path)
    return str(path)


LOADER = """import numpy as np
def load_data():
    for i in range(2):          # two iterations, the second overriding the default d
        feeds = {"x": np.full((2, 3), i, np.float32), "q": np.arange(9, dtype=np.int8).reshape(3, 3)}
        yield feeds if i == 0 else dict(feeds, d=np.ones((2, 3), np.float32))
"""

RUNS = [
    (str(REAL / "ssdlite320_mobilenet_v3.torchscript.onnx"), ["--backends", "ort-cpu"]),
    (str(REAL / "gpt2.dynamo.onnx"), ["--backends", "ort-cpu", "-q"]),
    (str(REAL / "gpt2.dynamo.onnx"), ["--backends", "ort-cpu", "--dim", "batch=2", "--dim", "sequence=5"]),
    (str(REAL / "mixtral.torchscript.onnx"), ["--backends", "ort-cpu"]),
    ("defaults", ["--backends", "ort-cpu", "--provider-model", "modified", "--data-loader-script", "{loader}"]),
    ("defaults", ["--backends", "ort-cpu", "--provider-model", "modified"]),
    ("defaults", ["--backends", "ort-cpu", "--provider-model", "modified", "-q"]),
    ("defaults", ["--backends", "ort-cpu"]),          # the Trilu has no kernel: the backend's ERROR
]


@pytest.mark.parametrize("model, options", RUNS)
def test_a_provider_only_run_never_partitions_and_prints_as_before(tmp_path, capsys, monkeypatch, partitions,
                                                                   model, options):
    path = _with_default(tmp_path) if model == "defaults" else model
    loader = tmp_path / "loader.py"
    loader.write_text(LOADER)
    argv = ["run", path, "--seed", "3", *[o.format(loader=loader) for o in options], "--json"]
    lazy = cli([*argv, tmp_path / "lazy.json"], capsys)
    assert partitions == []
    _eager(monkeypatch)
    eager = cli([*argv, tmp_path / "eager.json"], capsys)
    assert partitions, "the eager compile partitioned"
    assert lazy[0] == eager[0] and lazy[2] == eager[2]
    assert lazy[1].replace("lazy.json", "eager.json") == eager[1]
    assert json.loads((tmp_path / "lazy.json").read_text()) == json.loads((tmp_path / "eager.json").read_text())


@pytest.mark.parametrize("argv, partitioned", [
    (["run", "{model}", "--backends", "ort-cpu,cpu", "-q"], True),
    (["run", "{model}", "--backends", "cpu", "-q"], True),
    (["check", "{model}", "--backends", "ort-cpu", "-q"], True),     # the oracle reads the placement
    (["compile", "{model}"], True),
    (["run", "{model}", "--backends", "ort-cpu", "-q"], False),
])
def test_what_needs_the_partition_computes_it_once(tmp_path, capsys, partitions, argv, partitioned):
    path = str(REAL / "gpt2.dynamo.onnx")
    code, _, err = cli([a.format(model=path) for a in argv], capsys)
    assert (code, err) == (0, "")
    assert len(partitions) == (1 if partitioned else 0)


def _refusing(monkeypatch) -> None:
    def refuse(model, *args, **kwargs):
        raise DmlLowerError(f"model {model.graph.name!r}: the partition refuses it")
    monkeypatch.setattr(partition_module, "partition", refuse)


@pytest.mark.parametrize("argv", [["compile", "{model}"], ["run", "{model}", "--backends", "cpu"],
                                  ["run", "{model}", "--backends", "ort-cpu,ort"], ["run", "{model}", "-q"],
                                  ["check", "{model}"], ["check", "{model}", "-q"],
                                  ["check", "{model}", "--backends", "ort-cpu"], ["inspect", "{model}"]])
def test_a_partition_error_is_one_line_where_the_partition_is_needed(tmp_path, capsys, monkeypatch, argv):
    path = str(REAL / "gpt2.dynamo.onnx")
    _refusing(monkeypatch)
    code, out, err = cli([a.format(model=path) for a in argv], capsys)
    assert code == 2 and out == ""
    assert err == "dml-lower: error: model 'main_graph': the partition refuses it\n"


def test_a_provider_only_run_does_not_need_the_partition(tmp_path, capsys, monkeypatch):
    path = str(REAL / "gpt2.dynamo.onnx")
    expected = cli(["run", path, "--backends", "ort-cpu", "-q"], capsys)
    _refusing(monkeypatch)
    assert cli(["run", path, "--backends", "ort-cpu", "-q"], capsys) == expected
    assert expected[0] == 0 and expected[1].startswith("ort-cpu: 1 output(s)")


@pytest.mark.parametrize("ask", [False, True])
def test_a_compiled_model_is_freed_by_reference_counting(ask):
    """Nothing of the partition-on-first-ask refers back to the compiled model: with the cyclic
    collector off, dropping the last reference frees it (and the sessions it holds) at once."""
    import gc
    import weakref

    from onnx_dml_lowering.compiler import compile_model
    enabled = gc.isenabled()
    gc.disable()
    try:
        compiled = compile_model(str(REAL / "gpt2.dynamo.onnx"))
        if ask:
            assert compiled.placement        # the partition, and the initializers it leaves out
            assert set(compiled.initializers) == ({t.name for t in compiled.model.graph.initializer}
                                                  - set(compiled.partition.generated))
        assert compiled.initializers.get("attention_mask") is None
        freed = weakref.ref(compiled)
        del compiled
        assert freed() is None
    finally:
        if enabled:
            gc.enable()
