"""Trust at the edges: the one .npz reader, sizes past memory and --memory-limit, check's feed sets
streamed one at a time and stopped by Ctrl-C (exit 130), finite tolerances, and graph inputs no
feed can satisfy (sequence / optional / map / string) named with their ONNX type."""
from __future__ import annotations

import gc
import json
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
    "directory": (lambda t: (t / "d.npz").mkdir() or t / "d.npz", ["d.npz", "directory"]),
    "text": (lambda t: (t / "f.npz").write_text("x = 1\n") and t / "f.npz", ["f.npz", "not an .npz archive"]),
    "npy": (lambda t: (np.save(t / "f.npy", np.ones(3)), t / "f.npy")[1], ["f.npy", "single .npy array"]),
    "pickled-objects": (lambda t: _zip_with(t, "o.npz", {"x.npy": _npy_bytes(np.array([{}, 1], object))}),
                        ["o.npz", "not a plain array"]),
    "other-member": (lambda t: _zip_with(t, "z.npz", {"x.npy": _npy_bytes(np.ones(2)), "notes.txt": b"hi"}),
                     ["z.npz", "other files"]),
    "not-npy-member": (lambda t: _zip_with(t, "n.npz", {"x.npy": b"not numpy at all"}), ["n.npz", ".npy"]),
    "truncated-member": (lambda t: _zip_with(t, "t.npz", {"x.npy": _npy_bytes(np.ones(100))[:-40]}),
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


@pytest.mark.parametrize("a_rows,b_rows,ok", [(3, 3, True), (3, 5, False), (1, 2, False)])
def test_feeds_disagreeing_on_a_symbolic_dimension_name_both_inputs(a_rows, b_rows, ok) -> None:
    compiled = compile_model(_two_inputs_model())
    feeds = {"a": np.ones((a_rows, 4), np.float32), "b": np.ones((b_rows, 4), np.float32)}
    if ok:
        assert compiled.run(feeds)["nz"].shape == (2, a_rows * 4)
        return
    with pytest.raises(DmlLowerError) as err:
        compiled.run(feeds)
    assert str(err.value) == (f"inputs 'a' and 'b' disagree on dimension 'batch': {a_rows} in 'a' (axis 0), "
                              f"{b_rows} in 'b' (axis 0)")


@pytest.mark.parametrize("name", ["file", "x", "allow_pickle", "a.b"])
def test_npz_round_trips_any_input_name(tmp_path, name) -> None:
    """np.savez(path, **arrays) takes 'file' as its own argument; the one writer does not."""
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    save_npz(str(tmp_path / "f.npz"), {name: array}, "the inputs")
    loaded = load_npz(str(tmp_path / "f.npz"))
    assert list(loaded) == [name] and np.array_equal(loaded[name], array) and loaded[name].dtype == array.dtype
    save_npz(str(tmp_path / "g"), {name: array}, "the inputs")          # the exact path, nothing appended
    assert np.array_equal(load_npz(str(tmp_path / "g"))[name], array) and not (tmp_path / "g.npz").exists()


def test_one_input_using_a_dimension_name_twice_names_its_two_axes() -> None:
    model = graph_model([h.make_node("NonZero", ["x"], ["nz"])], [("x", T.FLOAT, ["n", "n"])],
                        [("nz", T.INT64, [2, None])])
    compiled = compile_model(model)
    assert compiled.run({"x": np.eye(3, dtype=np.float32)})["nz"].shape == (2, 3)
    with pytest.raises(DmlLowerError) as err:
        compiled.run({"x": np.ones((3, 5), np.float32)})
    assert str(err.value) == ("input 'x': axes 0 and 1 share dimension 'n', so they must be equal; "
                              "got 3 and 5 (shape [3, 5])")
