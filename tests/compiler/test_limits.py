"""Trust at the edges: the one .npz reader, sizes past memory and --memory-limit, check's feed sets
streamed one at a time and stopped by Ctrl-C (exit 130), finite tolerances, and graph inputs no
feed can satisfy (sequence / optional / map / string) named with their ONNX type."""
from __future__ import annotations

import gc
import json
import os
import tracemalloc
import weakref
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnx_dml_lowering.compiler import compile_model
from onnx_dml_lowering.compiler.examples import example_paths
from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.runtime import feeds as feeds_module
from onnx_dml_lowering.runtime.check import Tolerances, check
from onnx_dml_lowering.runtime.feeds import random_feeds
from onnx_dml_lowering.runtime.npz import load_npz, save_npz
from onnx_dml_lowering.runtime.oracle import load_golden
from tests.cli_runner import cli
from tests.builders import graph_model, single_node_model
from tests.oracle import assert_outputs_same, reference

MASKED = str(next(p for p in example_paths() if p.stem == "masked_select"))


def one_line(code: int, err: str, *substrings: str) -> str:
    assert code == 2, err
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for text in substrings:
        assert text in lines[0], f"{text!r} not in {lines[0]!r}"
    return lines[0]


def save(model: onnx.ModelProto, tmp_path: Path, name: str = "m.onnx") -> str:
    onnx.save(model, tmp_path / name)
    return str(tmp_path / name)


# -- the one .npz reader ----------------------------------------------------------------------------

def _zip_with(tmp: Path, name: str, members: "dict[str, bytes]") -> Path:
    path = tmp / name
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


def _npy_bytes(array: np.ndarray) -> bytes:
    import io
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


BAD_NPZ = {
    "missing": (lambda t: t / "absent.npz", ["absent.npz", "does not exist"]),
    # Refused from its stat: nothing opens the FIFO, so the row cannot hang.
    "fifo": (lambda t: os.mkfifo(t / "p.npz") or t / "p.npz", ["p.npz", "not a regular file"]),
    "directory": (lambda t: (t / "d.npz").mkdir() or t / "d.npz", ["d.npz", "directory"]),
    "text": (lambda t: (t / "f.npz").write_text("x = 1\n") and t / "f.npz", ["f.npz", "not an .npz archive"]),
    "npy": (lambda t: (np.save(t / "f.npy", np.ones(3)), t / "f.npy")[1], ["f.npy", "single .npy array"]),
    "pickled-objects": (lambda t: _zip_with(t, "o.npz", {"x.npy": _npy_bytes(np.array([{}, 1], object))}),
                        ["o.npz", "not a plain array"]),
    "other-member": (lambda t: _zip_with(t, "z.npz", {"x.npy": _npy_bytes(np.ones(2)), "notes.txt": b"hi"}),
                     ["z.npz", "other files"]),
    "not-npy-member": (lambda t: _zip_with(t, "n.npz", {"x.npy": b"not numpy at all"}), ["n.npz", ".npy"]),
    # The header fits the example's input x: float [2, 3, 4], so the data is read (and found short).
    "truncated-member": (lambda t: _zip_with(t, "t.npz", {"x.npy": _npy_bytes(np.ones((2, 3, 4), np.float32))[:-40]}),
                         ["t.npz", "'x'", "truncated"]),
    "unknown-type": (lambda t: _zip_with(t, "u.npz", {"x.npy": _npy_bytes(np.ones(2)).replace(b"'<f8'", b"'zz8'")}),
                     ["u.npz", "type"]),
}


@pytest.mark.parametrize("row", sorted(BAD_NPZ))
@pytest.mark.parametrize("what", ["inputs file", "oracle file", "outputs file"])
def test_every_npz_reader_says_the_same_one_line(row, what, tmp_path):
    build, substrings = BAD_NPZ[row]
    path = str(build(tmp_path))
    with pytest.raises(DmlLowerError) as info:
        load_npz(path, what)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{what} ")
    for text in substrings:
        assert text in message, message
    # The oracle's loader is the same function, word for word.
    with pytest.raises(DmlLowerError) as golden:
        load_golden(path)
    assert str(golden.value) == message.replace(what, "oracle file", 1)


@pytest.mark.parametrize("row", sorted(BAD_NPZ))
@pytest.mark.parametrize("option", ["--inputs", "--oracle", "--load-outputs"])
def test_every_npz_option_of_the_cli_gives_that_line(row, option, tmp_path, capsys):
    build, substrings = BAD_NPZ[row]
    path = str(build(tmp_path))
    if option == "--oracle" and not path.endswith(".npz"):
        pytest.skip("--oracle takes FILE.npz by its suffix")
    code, _, err = cli(["check", MASKED, option, path], capsys)
    one_line(code, err, *substrings)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16, np.uint8])
@pytest.mark.parametrize("compressed", [False, True])
def test_the_reader_gives_numpy_s_own_arrays(order, dtype, compressed, tmp_path, rng):
    arrays = {"a": np.asarray(rng.integers(0, 5, (3, 4, 2)), dtype, order=order), "b": np.zeros((0, 3), dtype),
              "s": np.asarray(7, dtype)}
    (np.savez_compressed if compressed else np.savez)(tmp_path / "f.npz", **arrays)
    loaded = load_npz(str(tmp_path / "f.npz"))
    with np.load(tmp_path / "f.npz") as want:
        assert sorted(loaded) == sorted(want.files)
        for name in want.files:
            assert loaded[name].dtype == want[name].dtype and loaded[name].shape == want[name].shape
            np.testing.assert_array_equal(loaded[name], want[name])


def test_an_npz_over_the_memory_limit_is_refused_before_it_is_read(tmp_path, capsys):
    model = save(single_node_model("NonZero", T.FLOAT, ["n", 4], T.INT64), tmp_path)
    np.savez(tmp_path / "big.npz", x=np.ones((20000, 4), np.float32))          # 320,000 bytes
    code, _, err = cli(["run", model, "--inputs", tmp_path / "big.npz", "--memory-limit", "100KiB"], capsys)
    one_line(code, err, "big.npz", "'x'", "[20000, 4]", "memory limit", "100.0 KiB")
    with pytest.raises(DmlLowerError, match="memory limit"):
        load_npz(str(tmp_path / "big.npz"), limit=100_000)
    assert load_npz(str(tmp_path / "big.npz"), limit=400_000)["x"].shape == (20000, 4)


# -- feeds checked from the .npz headers, before any data is inflated --------------------------------

ROWS_BIG = 1 << 21                     # x 4 float32: 32 MiB inflated, a few KiB compressed


def _two_input_model() -> onnx.ModelProto:
    """y = a + b, a: float [n, 4], b: float [n, 1] (one symbolic n)."""
    return graph_model([h.make_node("Add", ["a", "b"], ["y"], name="add")],
                       [("a", T.FLOAT, ["n", 4]), ("b", T.FLOAT, ["n", 1])], [("y", T.FLOAT, ["n", 4])])


HEADER_ROWS = {
    # feeds of the .npz: 'a' is always the 32 MiB one
    "extra-name": lambda r: {"a": np.zeros((r, 4), np.float32), "b": np.zeros((r, 1), np.float32),
                             "zeta": np.zeros(r, np.float32)},
    "missing-name": lambda r: {"a": np.zeros((r, 4), np.float32)},
    "dtype": lambda r: {"a": np.zeros((r, 4), np.float64), "b": np.zeros((r, 1), np.float32)},
    "rank": lambda r: {"a": np.zeros(r * 4, np.float32), "b": np.zeros((r, 1), np.float32)},
    "dimension": lambda r: {"a": np.zeros((r, 5), np.float32), "b": np.zeros((r, 1), np.float32)},
}


def _oracle_line(arrays: "dict[str, np.ndarray]") -> str:
    """The line check_feeds gives on the arrays themselves."""
    with pytest.raises(DmlLowerError) as info:
        feeds_module.check_feeds(list(_two_input_model().graph.input), arrays)
    return str(info.value)


def _compressed(tmp_path: Path, row: str) -> "tuple[str, str]":
    """(the .npz path, the line check_feeds gives on its arrays read whole: the oracle)."""
    path = tmp_path / f"{row}.npz"
    np.savez_compressed(path, **HEADER_ROWS[row](ROWS_BIG))
    with np.load(path) as arrays:
        return str(path), _oracle_line(dict(arrays))


@pytest.mark.parametrize("row", sorted(HEADER_ROWS))
def test_npz_feeds_are_checked_from_their_headers_before_any_data(row, tmp_path):
    path, expected = _compressed(tmp_path, row)
    assert Path(path).stat().st_size < (1 << 20)
    inputs = list(_two_input_model().graph.input)
    tracemalloc.start()
    try:
        with pytest.raises(DmlLowerError) as info:
            load_npz(path, check=lambda headers: feeds_module.check_feed_headers(inputs, headers))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(info.value) == expected
    assert peak < (4 << 20), f"{peak} bytes were allocated before the header's mismatch was reported"


@pytest.mark.parametrize("command", ["run", "check", "optimize", "reduce"])
@pytest.mark.parametrize("row", sorted(HEADER_ROWS))
def test_every_inputs_option_checks_the_headers(row, command, tmp_path, capsys):
    """Each member's data is cut short after its header: the header's mismatch must be the line."""
    arrays = HEADER_ROWS[row](8)
    expected = _oracle_line(arrays)
    path = _zip_with(tmp_path, "cut.npz", {f"{name}.npy": _npy_bytes(value)[:-8] for name, value in arrays.items()})
    model = save(_two_input_model(), tmp_path)
    extra = {"optimize": ["-o", tmp_path / "o.onnx", "--check"], "reduce": ["-o", tmp_path / "min.onnx",
                                                                          "--backends", "cpu"]}.get(command, [])
    code, _, err = cli([command, model, "--inputs", path, *extra], capsys)
    assert one_line(code, err) == f"dml-lower: error: {expected}"


def test_npz_headers_count_against_the_default_memory_limit(tmp_path, monkeypatch):
    """Without a limit given, the default (three quarters of memory) applies: nothing is inflated past it."""
    np.savez_compressed(tmp_path / "f.npz", x=np.zeros(ROWS_BIG, np.float32))
    monkeypatch.setattr("onnx_dml_lowering.runtime.npz.default_limit", lambda: 1 << 20)
    with pytest.raises(DmlLowerError, match="over the memory limit of 1.0 MiB"):
        load_npz(str(tmp_path / "f.npz"))


def test_save_npz_failure_is_one_line(tmp_path):
    with pytest.raises(DmlLowerError, match="cannot write the inputs to"):
        save_npz(str(tmp_path / "no" / "dir" / "f.npz"), {"x": np.ones(2)}, "the inputs")


# -- sizes past memory ---------------------------------------------------------------------------------

def wide_model() -> onnx.ModelProto:
    """x: float [n, 2, 2, 2] -> NonZero: the coordinate buffer is 4 x 8 bytes per element."""
    return single_node_model("NonZero", T.FLOAT, ["n", 2, 2, 2], T.INT64)


@pytest.mark.parametrize("command", ["run", "check"])
@pytest.mark.parametrize("size, shown", [(10**10, "[10000000000, 2, 2, 2]"),
                                         (10**20, "[100000000000000000000, 2, 2, 2]"),    # numpy refuses it
                                         (2**62, f"[{2**62}, 2, 2, 2]")])
def test_a_dim_past_memory_is_one_line_naming_the_input_shape_and_bytes(command, size, shown, tmp_path, capsys):
    model = save(wide_model(), tmp_path)
    code, out, err = cli([command, model, "--dim", f"n={size}"], capsys)
    one_line(code, err, "input 'x'", shown, f"{size * 32:,} bytes", "memory limit")
    with pytest.raises(DmlLowerError, match=r"input 'x' of shape"):
        random_feeds(compile_model(wide_model()).inputs, dims={"n": size})


@pytest.mark.parametrize("command", ["run", "check", "compile"])
@pytest.mark.parametrize("rows, cols, named", [(2**63 - 1, 0, "rows"), (0, 2**62, "cols")])
def test_an_empty_shape_numpy_cannot_index_is_one_line(command, rows, cols, named, tmp_path, capsys):
    """`--dim rows=9223372036854775807 --dim cols=0`: no byte for the memory limit to count, yet numpy
    refuses the shape ('internal error: ValueError: array is too big' in every command)."""
    model = save(single_node_model("NonZero", T.FLOAT, ["rows", "cols"], T.INT64), tmp_path)
    code, _, err = cli([command, model, "--dim", f"rows={rows}", "--dim", f"cols={cols}"], capsys)
    one_line(code, err, "input 'x'", f"[{rows}, {cols}]", f"dimension '{named}'", "numpy", f"--dim {named}")


def test_feeds_over_the_limit_are_refused_before_anything_is_drawn(tmp_path, capsys):
    model = save(wide_model(), tmp_path)
    tracemalloc.start()
    try:
        code, _, err = cli(["check", model, "--dim", "n=2000000", "--memory-limit", "10MiB"], capsys)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    one_line(code, err, "input 'x'", "[2000000, 2, 2, 2]", "64,000,000 bytes", "10.0 MiB")
    assert peak < 5 * 2**20, f"{peak} bytes were allocated before the refusal"


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_limit_the_directml_buffers_exceed_is_refused(command, tmp_path, capsys):
    """n = 4096: the feed (128 KiB) and numpy's draws (544 KiB) fit 1 MiB; the lowered graph's
    buffers (input 128 KiB, coordinates 1 MiB, result 1 MiB) do not."""
    model = save(wide_model(), tmp_path)
    code, _, err = cli([command, model, "--dim", "n=4096", "--memory-limit", "1MiB"], capsys)
    one_line(code, err, "buffers", "memory limit of 1.0 MiB", "node nonzero")
    code, _, err = cli([command, model, "--dim", "n=4096", "--memory-limit", "4MiB"], capsys)
    assert code == 0, err


# -- --iterations streams its feed sets; Ctrl-C ----------------------------------------------------------

def test_check_draws_feed_sets_one_at_a_time(rng):
    """A generator of 40 feed sets: check takes them lazily and drops each once checked."""
    compiled = compile_model(MASKED)
    alive: "list[weakref.ref]" = []
    most = [0]

    def feed_sets(n: int):
        for seed in range(1, n):
            gc.collect()
            most[0] = max(most[0], sum(ref() is not None for ref in alive))
            feeds = random_feeds(compiled.inputs, seed=seed)
            alive.extend(weakref.ref(v) for v in feeds.values())
            yield feeds

    first = random_feeds(compiled.inputs, seed=0)
    kept = len(first)                           # the first set is returned (for --save-inputs)
    _, report = check(compiled, first, ["cpu", "ort-cpu"], Tolerances(), more_feeds=feed_sets(40))
    assert report.iterations == 40 and report.ok and not report.interrupted
    assert {o.iteration for o in report.backends[0].outputs} == set(range(40))
    assert most[0] <= 2 * kept, f"{most[0]} feed arrays alive while drawing the next set"
    # The same feeds as a list keep every set alive: the counter sees it.
    alive.clear()
    listed = list(feed_sets(40))
    gc.collect()
    assert sum(ref() is not None for ref in alive) == 39 * kept
    del listed


def _interrupting_random_feeds(stop_seed: int):
    real = feeds_module.random_feeds

    def drawn(inputs, seed=0, **kwargs):
        if seed == stop_seed:
            raise KeyboardInterrupt
        return real(inputs, seed=seed, **kwargs)
    return drawn


@pytest.mark.parametrize("stop_at, checked", [(3, 3), (7, 7), (1, 1)])
def test_ctrl_c_in_the_feed_generator_prints_what_was_checked_and_exits_130(stop_at, checked, tmp_path, capsys,
                                                                           monkeypatch):
    monkeypatch.setattr(feeds_module, "random_feeds", _interrupting_random_feeds(stop_at))
    code, out, err = cli(["check", MASKED, "--iterations", 10, "--json", tmp_path / "r.json"], capsys)
    assert code == 130
    assert err.strip() == f"dml-lower: interrupted: the report covers the {checked} of 10 feed sets checked before Ctrl-C"
    assert "verdict: all outputs match ONNX semantics" in out
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["interrupted"] and data["iterations"] == checked
    assert {o["iteration"] for o in data["backends"][0]["outputs"]} == set(range(checked))


def test_ctrl_c_inside_a_backend_drops_the_feed_set_under_way(tmp_path, capsys, monkeypatch):
    from onnx_dml_lowering.compiler.compiled import CompiledModel
    real, calls = CompiledModel.run, [0]

    def run(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == 5:                        # cpu of feed set 2 (ort runs it too: 2 calls a set)
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)
    monkeypatch.setattr(CompiledModel, "run", run)
    code, out, err = cli(["check", MASKED, "--backends", "cpu,ort", "--iterations", 6, "--json",
                          tmp_path / "r.json"], capsys)
    assert code == 130 and "the 2 of 6 feed sets" in err
    data = json.loads((tmp_path / "r.json").read_text())
    for backend in data["backends"]:
        assert sorted({o["iteration"] for o in backend["outputs"]}) == [0, 1]
        assert len(backend["outputs"]) == 2 * 2
    assert "[cpu #1]" in out and "#2" not in out


def test_ctrl_c_before_any_feed_set_was_checked_exits_130_without_a_report(capsys, monkeypatch):
    monkeypatch.setattr(feeds_module, "random_feeds", _interrupting_random_feeds(0))
    code, out, err = cli(["check", MASKED, "--iterations", 5], capsys)
    assert code == 130 and out == "" and err.strip() == "dml-lower: interrupted"


def test_ctrl_c_from_the_python_api_after_some_sets(rng):
    compiled = compile_model(MASKED)

    def feed_sets():
        yield random_feeds(compiled.inputs, seed=1)
        raise KeyboardInterrupt

    _, report = check(compiled, random_feeds(compiled.inputs), ["cpu"], Tolerances(), more_feeds=feed_sets())
    assert report.interrupted and report.iterations == 2 and report.to_dict()["interrupted"]


# -- tolerances ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("option, value", [("--atol", "nan"), ("--atol", "inf"), ("--atol", "-inf"),
                                           ("--rtol", "NaN"), ("--rtol", "coords=nan"), ("--atol", "coords=inf"),
                                           ("--rtol", "Infinity"), ("--atol", "1e999")])
def test_nan_or_infinite_tolerances_are_refused(option, value, capsys):
    code, out, err = cli(["check", MASKED, f"{option}={value}"], capsys)
    one_line(code, err, "tolerance", value, "not a finite number")
    assert out == ""


@pytest.mark.parametrize("tolerances", [Tolerances(atol=float("nan")), Tolerances(rtol=float("inf")),
                                        Tolerances(per_output={"coords": (float("nan"), None)})])
def test_nan_or_infinite_tolerances_are_refused_by_the_api(tolerances):
    compiled = compile_model(MASKED)
    with pytest.raises(DmlLowerError, match="not a finite number"):
        check(compiled, random_feeds(compiled.inputs), ["cpu"], tolerances)


def test_finite_tolerances_still_parse():
    tol = Tolerances.parse(["1e-3", "coords=0"], ["selected=0.5"])
    assert (tol.atol, tol.for_output("coords"), tol.for_output("selected")) == (1e-3, (0.0, 1e-5), (1e-3, 0.5))


# -- inputs no feed can satisfy --------------------------------------------------------------------------

def _with_input(extra: onnx.ValueInfoProto, nodes=(), opset: int = 13) -> onnx.ModelProto:
    nodes = list(nodes) or [h.make_node("NonZero", ["x"], ["y"], name="nz")]
    return graph_model(nodes, [("x", T.FLOAT, [3]), extra], [("y", T.INT64, 2)], opset=opset)


def _typed(name: str, build) -> onnx.ValueInfoProto:
    type_proto = onnx.TypeProto()
    build(type_proto)
    return h.make_value_info(name, type_proto)


NOT_FEEDABLE = {
    "sequence": (lambda: _with_input(h.make_tensor_sequence_value_info("seq", T.FLOAT, [3]), [
        h.make_node("Constant", [], ["i"], name="zero", value_int=0),
        h.make_node("SequenceAt", ["seq", "i"], ["a"], name="at"), h.make_node("Add", ["a", "x"], ["s"], name="add"),
        h.make_node("NonZero", ["s"], ["y"], name="nz")]),
                 "input 'seq': type sequence(tensor(float)) is not supported: only tensor inputs can be fed"),
    "optional": (lambda: _with_input(_typed("opt", lambda t: t.optional_type.elem_type.CopyFrom(
        h.make_tensor_type_proto(T.FLOAT, [3]))), opset=18),
                 "input 'opt': type optional(tensor(float)) is not supported: only tensor inputs can be fed"),
    "map": (lambda: _with_input(_typed("m", lambda t: (setattr(t.map_type, "key_type", T.INT64),
                                                         t.map_type.value_type.CopyFrom(
                                                             h.make_tensor_type_proto(T.FLOAT, [3]))))),
            "input 'm': type map(int64, tensor(float)) is not supported: only tensor inputs can be fed"),
    "sequence-of-sequences": (lambda: _with_input(_typed("ss", lambda t: t.sequence_type.elem_type.sequence_type
                                                          .elem_type.CopyFrom(h.make_tensor_type_proto(T.INT64, [])))),
                              "input 'ss': type sequence(sequence(tensor(int64))) is not supported"),
    "string": (lambda: _with_input(h.make_tensor_value_info("s", T.STRING, [2])),
               "input 's': type tensor(string) is not supported: it has no numpy type to feed it with"),
}


@pytest.mark.parametrize("command", ["run", "check"])
@pytest.mark.parametrize("row", sorted(NOT_FEEDABLE))
def test_inputs_no_feed_can_satisfy_are_named_with_their_type(row, command, tmp_path, capsys):
    build, line = NOT_FEEDABLE[row]
    model = save(build(), tmp_path)
    code, out, err = cli(["compile", model], capsys)
    assert code == 0, err                       # compiling needs no feeds
    code, _, err = cli([command, model], capsys)
    one_line(code, err, line)
    np.savez(tmp_path / "f.npz", x=np.ones(3, np.float32))
    code, _, err = cli([command, model, "--inputs", tmp_path / "f.npz"], capsys)
    one_line(code, err, line)


@pytest.mark.parametrize("row", sorted(NOT_FEEDABLE))
def test_inputs_no_feed_can_satisfy_from_the_api(row):
    build, line = NOT_FEEDABLE[row]
    compiled = compile_model(build())
    with pytest.raises(DmlLowerError) as info:
        random_feeds(compiled.inputs)
    assert line in str(info.value)
    with pytest.raises(DmlLowerError) as info:
        compiled.run({"x": np.ones(3, np.float32)})
    assert line in str(info.value)


def test_a_tensor_model_still_runs_with_the_same_feeds(tmp_path):
    """The control: the model without the extra input runs and matches onnx.reference."""
    model = graph_model([h.make_node("NonZero", ["x"], ["y"], name="nz")], [("x", T.FLOAT, [3])],
                        [("y", T.INT64, 2)])
    x = np.array([1, 0, 2], np.float32)
    assert_outputs_same(compile_model(model).run({"x": x}), reference(model, {"x": x}))


# -- feeds that disagree on a shared symbolic dimension -------------------------------------------

def _two_inputs_model():
    return graph_model([h.make_node("Add", ["a", "b"], ["s"]), h.make_node("NonZero", ["s"], ["nz"])],
                       [("a", T.FLOAT, ["batch", 4]), ("b", T.FLOAT, ["batch", 4])],
                       [("nz", T.INT64, [2, None])])


@pytest.mark.parametrize("a_rows,b_rows", [(3, 3), (3, 5), (1, 2)])
def test_feeds_disagreeing_on_a_symbolic_dimension_name_run_as_fed_with_a_note(a_rows, b_rows) -> None:
    """onnxruntime does not enforce dimension names, and exporters declare some that real feeds
    break: the feeds run as given (against onnx.reference) and the note names both inputs."""
    model = _two_inputs_model()
    compiled = compile_model(model)
    feeds = {"a": np.ones((a_rows, 4), np.float32), "b": np.ones((b_rows, 4), np.float32)}
    if a_rows == b_rows or 1 in (a_rows, b_rows):
        assert_outputs_same(compiled.run(feeds), reference(model, feeds))
    else:
        with pytest.raises(DmlLowerError, match="Add"):            # numpy cannot broadcast 3 and 5 either
            compiled.run(feeds)
    notes = feeds_module.dimension_notes(compiled.inputs, feeds)
    assert notes == ([] if a_rows == b_rows else [
        f"note: the model names these sizes both 'batch', but input 'a' has {a_rows} (axis 0), 'b' has {b_rows} "
        "(axis 0); run as fed, as onnxruntime does (it does not enforce dimension names); if one size was "
        "meant, feed them so"])


@pytest.mark.parametrize("name", ["file", "x", "allow_pickle", "a.b"])
def test_npz_round_trips_any_input_name(tmp_path, name) -> None:
    """np.savez(path, **arrays) takes 'file' as its own argument; the one writer does not."""
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    save_npz(str(tmp_path / "f.npz"), {name: array}, "the inputs")
    loaded = load_npz(str(tmp_path / "f.npz"))
    assert list(loaded) == [name] and np.array_equal(loaded[name], array) and loaded[name].dtype == array.dtype
    save_npz(str(tmp_path / "g"), {name: array}, "the inputs")          # the exact path, nothing appended
    assert np.array_equal(load_npz(str(tmp_path / "g"))[name], array) and not (tmp_path / "g.npz").exists()


def test_one_input_using_a_dimension_name_twice_runs_as_fed_with_a_note() -> None:
    model = graph_model([h.make_node("NonZero", ["x"], ["nz"])], [("x", T.FLOAT, ["n", "n"])],
                        [("nz", T.INT64, [2, None])])
    compiled = compile_model(model)
    x = np.ones((3, 5), np.float32)
    assert_outputs_same(compiled.run({"x": x}), reference(model, {"x": x}))
    assert feeds_module.dimension_notes(compiled.inputs, {"x": np.eye(3, dtype=np.float32)}) == []
    assert feeds_module.dimension_notes(compiled.inputs, {"x": x}) == [
        "note: the model names these sizes both 'n', but input 'x' has 3 on axis 0 and 5 on axis 1; run as fed, "
        "as onnxruntime does (it does not enforce dimension names); if one size was meant, feed them so"]


def test_sigint_to_a_real_check_after_one_feed_set_writes_ok_false(tmp_path):
    """A real `dml-lower check` process gets SIGINT from its data loader after the first feed set:
    the JSON it writes says interrupted and not ok (it said "ok": true), the verdict says so."""
    import subprocess
    import sys
    script = tmp_path / "loader.py"
    script.write_text("import os, signal\n"
                      "import numpy as np\n"
                      "def load_data():\n"
                      "    yield {'x': np.arange(24, dtype=np.float32).reshape(2, 3, 4) % 3}\n"
                      "    os.kill(os.getpid(), signal.SIGINT)\n"
                      "    yield {'x': np.ones((2, 3, 4), np.float32)}\n")
    out = tmp_path / "r.json"
    import signal
    # SIGINT as a terminal gives it, even when this test runs where it is ignored (a shell's `cmd &`
    # without job control starts the whole run with SIGINT ignored, and a child inherits that)
    proc = subprocess.run([sys.executable, "-m", "onnx_dml_lowering.compiler", "check", MASKED,
                           "--data-loader-script", str(script), "--json", str(out)],
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 130, proc.stderr
    data = json.loads(out.read_text())
    assert data["interrupted"] is True and data["ok"] is False and data["iterations"] == 1
    lines = proc.stdout.splitlines()
    assert "; interrupted after 1 feed set" in lines[-3] and lines[-1] == f"wrote {out}"
