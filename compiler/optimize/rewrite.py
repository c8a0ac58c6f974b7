"""`dml-lower optimize`: ONNX in, ONNX out. Stored bands of diagonals (identities, c * I, offset
diagonals, triangles, with batch dimensions), the torch.eye Range/Equal/Cast idiom (static, or
sized at run time from a Shape: eye.py) and
Range-comparison attention masks (masks.py) become the few nodes that generate them, where
that is bit-identical on onnxruntime's CPU provider and the file gets smaller or the node count
falls. Nothing else is touched."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import brief
from onnx_dml_lowering.ir.feature_levels import FeatureLevel
from onnx_dml_lowering.lowering import Declined
from onnx_dml_lowering.lowering.diagonal import find_band
from onnx_dml_lowering.lowering.onnx_graphs import is_standard
from onnx_dml_lowering.lowering.schedule import is_constant
from onnx_dml_lowering.lowering.common import EXACT_INTEGER_LIMIT
from onnx_dml_lowering.lowering.diagonal_idioms import EyeFromRanges, match_initializer, range_length

from ..node_ids import identify_nodes
from onnx_dml_lowering.runtime.inline_weights import in_model_file
from onnx_dml_lowering.runtime.interrupt import stoppable_run
from onnx_dml_lowering.runtime.weights import external_path, inline, is_lazy, proto_bytes, tensor_array

from ..frontend import default_opset, load_model, load_stored
from ..generators import Generator, band_generator
from ..graph_view import OnnxGraphView
from .eye import RunTimeEye, replace_unread
from .masks import Kept, inferred_view, rewrite_masks
from .names import Names, labeller, restore_names, with_op
from .verify import check_level, node_names, verify_rewrite


@dataclass
class Rewrite:
    replaced: str           # what was there, e.g. "initializer mask (bool [1024, 1024])"
    generator: str          # what generates it now, e.g. "ConstantOfShape + Trilu"
    bytes_saved: int
    nodes_delta: int        # nodes added (negative: removed)

    def line(self) -> str:
        from ..saving import saving
        return f"{self.replaced} -> {self.generator}: {saving(self.bytes_saved, self.nodes_delta)}"


def _type_name(onnx_type: int) -> str:
    return TensorProto.DataType.Name(onnx_type).lower()


def band_of(array: np.ndarray) -> "tuple[int, int, bool, Any] | None":
    """find_band over the bits; bfloat16 (a numpy 'V' kind) is searched as its uint16 bits."""
    if array.dtype.kind == "V" and array.dtype.itemsize == 2 and array.dtype.name == "bfloat16":
        band = find_band(array.view(np.uint16))
        if band is None:
            return None
        begin, end, inverted, bits = band
        value = np.array(bits, np.uint16).view(array.dtype)
        return None if np.isnan(np.float32(value)) else (begin, end, inverted, value)
    return find_band(array)


class _Optimizer:
    def __init__(self, model: onnx.ModelProto, min_bytes: int, level: "FeatureLevel | None",
                 renamed: "dict[str, str | bytes] | None" = None) -> None:
        self.model, self.min_bytes, self.level = model, min_bytes, level
        self.opset = default_opset(model)
        self.rewrites: "list[Rewrite]" = []
        self.declined: "list[str]" = []
        renamed = renamed or {}
        # every name anywhere in the model (bodies, functions, value_info), the renamed nodes' own too
        self.names = Names(model, renamed.values())
        self.taken = self.names.taken
        self.label = labeller(renamed)      # what the text calls a node: its name in the file

    def prefix(self, base: str) -> str:
        return self.names.prefix(base)

    def shown(self, names: "list[str]") -> str:
        """The nodes named by identity in `names`, as the text shows them (labeller)."""
        by_name = {n.name: n for n in self.model.graph.node}
        return ", ".join(self.label(by_name[n]) if n in by_name else n for n in names)

    def band(self, name: str, array: np.ndarray, stored: int, what: str) -> "Generator | None":
        """A generator of `array` (output `name`), if it pays and is exact; else None."""
        if array.ndim < 2:
            return None
        band = band_of(array)
        if band is None:
            return None
        if array.nbytes < self.min_bytes:
            self.declined.append(f"{what}: kept, {array.nbytes} bytes, under --min-bytes {self.min_bytes}")
            return None
        begin, end, inverted, value = band
        if self.level is not None:
            match = match_initializer(name, array, self.level)
            # the band's DirectML form, validated
            built = match.build({}, {}, self.level) if match is not None and not isinstance(match, Declined) else match
            if isinstance(built, Declined):
                self.declined.append(f"{what}: kept, feature level {self.level}: {built.reason}")
                return None
        onnx_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
        gen = band_generator(name, self.prefix(name), onnx_type, tuple(array.shape), begin, end, value, inverted)
        if gen is None:
            self.declined.append(f"{what}: kept, onnxruntime CPU has no exact generator for "
                                 f"{_type_name(onnx_type)}")
            return None
        if gen.opset > self.opset:
            self.declined.append(f"{what}: kept, its generator needs opset {gen.opset} (model: {self.opset})")
            return None
        if gen.size() >= stored:
            self.declined.append(f"{what}: kept, its generator ({' + '.join(gen.ops)}, {gen.size()} bytes) is not "
                                 f"smaller than the {stored} bytes stored")
            return None
        return gen

    def constants(self) -> None:
        graph = self.model.graph
        inputs = {i.name for i in graph.input}
        keep, front = [], []
        for init in graph.initializer:
            if (init.name in inputs or init.data_type == TensorProto.STRING or len(init.dims) < 2
                    or (init.data_location == TensorProto.EXTERNAL and not is_lazy(init))):  # nothing to read
                keep.append(init)
                continue
            array = tensor_array(init)      # a large one in its external file: a memory map
            stored = array.nbytes if is_lazy(init) else init.ByteSize()
            what = f"initializer {init.name} ({_type_name(init.data_type)} {list(array.shape)})"
            gen = self.band(init.name, array, stored, what)
            if gen is None:
                keep.append(init)
                continue
            front += gen.nodes
            keep += gen.initializers
            self.record(what, gen, stored, 0)
        nodes: "list[onnx.NodeProto]" = []
        for node in graph.node:
            gen = None
            if is_constant(node) and len(node.attribute) == 1 \
                    and node.attribute[0].name == "value" and len(node.attribute[0].t.dims) >= 2:
                array = numpy_helper.to_array(node.attribute[0].t)
                what = f"{with_op(node, self.label)} ({_type_name(node.attribute[0].t.data_type)} " \
                       f"{list(array.shape)})"
                gen = self.band(node.output[0], array, node.ByteSize(), what)
                if gen is not None:
                    keep += gen.initializers
                    self.record(what, gen, node.ByteSize(), 1)
            nodes += gen.nodes if gen is not None else [node]
        del graph.initializer[:]
        graph.initializer.extend(keep)
        del graph.node[:]
        graph.node.extend(front + nodes)

    def add_rewrite(self, replaced: str, generator: str, bytes_saved: int, nodes_delta: int) -> None:
        self.rewrites.append(Rewrite(replaced, generator, bytes_saved, nodes_delta))

    def record(self, what: str, gen: Generator, removed: int, nodes_removed: int) -> None:
        self.rewrites.append(Rewrite(what, " + ".join(gen.ops), removed - gen.size(),
                                     len(gen.nodes) - nodes_removed))

    def eye_ranges(self) -> None:
        graph = self.model.graph
        view = inferred_view(self.model)
        rule = EyeFromRanges()
        for node in list(graph.node):
            if node.op_type != "Equal" or not is_standard(node):
                continue
            if node.name not in {n.name for n in graph.node}:      # removed by an earlier rewrite
                continue
            found = rule.pattern(view.info(node.name), view)
            if found is None:
                continue
            b = found.bindings
            covered = [n for n in found.nodes if view.info(n).op_type != "Expand"]
            y = found.outputs[0]
            if len(covered) < len(found.nodes):        # the Expand stays: generate what it reads
                y = next(view.info(n) for n in found.nodes if n not in covered).input(0).name
            rows, cols = view.constant(b["rows"].name), view.constant(b["cols"].name)
            if rows is None or cols is None:     # sized at run time: EyeLike over the run-time shape
                self.run_time_eye(view, covered, y, b)
                view = inferred_view(self.model)
                continue
            dims = (range_length(rows), range_length(cols))
            exact = EXACT_INTEGER_LIMIT.get(b["rows"].onnx_type)
            if exact is not None and max(dims) > exact or min(dims) < 2:
                continue
            out_type = b["out_type"]
            what = f"{', '.join(view.info(n).op_type for n in covered)} ({self.shown(covered)})"
            gen = band_generator(y, self.prefix(y), out_type, dims, 0, 1, True if out_type == TensorProto.BOOL
                                 else 1, False)
            if gen is None or gen.opset > self.opset or len(gen.nodes) >= len(covered):
                continue
            names = set(covered)
            removed = sum(n.ByteSize() + 4 for n in graph.node if n.name in names)
            position = min(i for i, n in enumerate(graph.node) if n.name in names)
            kept = [n for n in graph.node if n.name not in names]
            kept[position:position] = gen.nodes
            del graph.node[:]
            graph.node.extend(kept)
            graph.initializer.extend(gen.initializers)
            self.rewrites.append(Rewrite(what, " + ".join(gen.ops), removed - gen.size(),
                                         len(gen.nodes) - len(covered)))
            view = inferred_view(self.model)

    def run_time_eye(self, view: OnnxGraphView, covered: "list[str]", y: str, b: "dict[str, Any]") -> None:
        """The eye of run-time size matched as `covered` nodes writing `y` -> EyeLike over the
        ConstantOfShape of its run-time [n, m], if that is fewer nodes; else kept with the reason."""
        graph = self.model.graph
        out_type = b["out_type"]
        cast = view.consumers(y)
        if out_type == TensorProto.BOOL and len(cast) == 1 and cast[0].op_type == "Cast" and \
                not view.is_graph_output(y):      # a Cast to a type DirectML lacks (bfloat16): ours too
            covered, y, out_type = covered + [cast[0].name], cast[0].outputs[0].name, int(cast[0].attrs["to"])
        what = f"{', '.join(view.info(n).op_type for n in covered)} ({self.shown(covered)})"
        eye = RunTimeEye(self, view, self.prefix(y))
        try:
            eye.build(b["rows"], b["cols"], out_type, y)
        except Kept as kept:
            self.declined.append(f"{what}: kept, {kept}")
            return
        made = view.producer(y)
        assert made is not None             # y is the eye's output, made by a covered node
        nodes, inits, gone = replace_unread(graph, set(covered), eye.nodes, made.name)
        removed = len(gone)
        if len(eye.nodes) >= removed:
            self.declined.append(f"{what}: kept, its generator ({' + '.join(n.op_type for n in eye.nodes)}) is "
                                 f"not fewer nodes ({len(eye.nodes)} for {removed})")
            return
        dropped = {t.name for t in graph.initializer} - {t.name for t in inits}
        removed_bytes = sum(n.ByteSize() + 4 for n in graph.node if n.name in gone) + \
            sum(proto_bytes(t) + 4 for t in graph.initializer if t.name in dropped)
        added = sum(n.ByteSize() + 4 for n in eye.nodes) + sum(t.ByteSize() + 4 for t in eye.inits)
        outputs = {o for n in graph.node if n.name in gone for o in n.output} - {y}
        went = [n for n in graph.node if n.name in gone]
        what = f"{', '.join(n.op_type for n in went)} ({', '.join(self.label(n) for n in went)})"
        value_info = [v for v in graph.value_info if v.name not in outputs]
        del graph.node[:]
        graph.node.extend(nodes)
        del graph.initializer[:]
        graph.initializer.extend(inits + eye.inits)
        del graph.value_info[:]
        graph.value_info.extend(value_info)
        self.taken |= {n.name for n in eye.nodes} | {o for n in eye.nodes for o in n.output}
        self.add_rewrite(what, " + ".join(n.op_type for n in eye.nodes), removed_bytes - added,
                         len(eye.nodes) - removed)


def optimize_model(model: onnx.ModelProto, min_bytes: int = 0, level: "FeatureLevel | None" = None
                   ) -> "tuple[onnx.ModelProto, list[Rewrite], list[str]]":
    """The rewritten copy of `model` (external data already loaded), the rewrites made and the
    candidates kept with the reason. With `level`, only bands this project lowers at that
    DirectML feature level are rewritten."""
    out = load_model(model)
    names_before = node_names(out)
    # The graph view finds nodes by name: give each a unique one (node_ids), put the originals
    # (repeated, empty, not UTF-8) back below.
    renamed = identify_nodes(out)
    level_passed = check_level(out)
    opt = _Optimizer(out, min_bytes, level, renamed)
    opt.eye_ranges()
    rewrite_masks(opt)
    opt.constants()
    escaped = restore_names(out, renamed)
    if escaped:
        opt.declined.append(f"node names that are not UTF-8 are written as their identities: {', '.join(escaped)}")
    if opt.rewrites:
        verify_rewrite(out, level_passed, names_before, "optimize")
    return out, opt.rewrites, opt.declined


def external_initializers(path: str) -> "set[str]":
    """Names of the initializers `path` stores as external data."""
    proto = load_stored(path)
    return {t.name for t in proto.graph.initializer
            if t.data_location == TensorProto.EXTERNAL and not in_model_file(t, Path(path).name)}


@dataclass(frozen=True)
class Saved:
    location: "str | None"      # the external data file's name, when the model has one
    size: int                   # bytes written, model and data
    beside: bool = True         # the data went to a file of that name beside the model (not after
                                # it, to the device, FIFO or descriptor the model went to)
    landed: "str | None" = None  # where the model went when `path` was a link (its data beside it)
    data_size: int = 0          # of `size`, the external data's bytes


def data_file(path: str) -> str:
    """Where save_model writes the external data of a model written to `path`: `path.data` beside
    it, spelled as `path` is (as the loader spells the input's data files, so a refusal names one
    path one way); beside a link's final target and named after it, where the model reads it from;
    `path` itself when that is a device, FIFO or descriptor, after the model."""
    from onnx_dml_lowering.runtime.output_target import landing, sibling
    out = landing(path)
    if out == os.path.abspath(path):
        return sibling(path, os.path.join(os.path.dirname(path), os.path.basename(path) + ".data"))
    return sibling(path, os.path.join(os.path.dirname(out), os.path.basename(out) + ".data"))


def save_model(model: onnx.ModelProto, path: str, external: "set[str]", what: str = "optimized model") -> Saved:
    """Write `model`; the initializers named in `external` go to one external data file beside
    it, as they were in the input (to `path` itself, after the model, when that is a device, FIFO
    or descriptor).

    Both files are written under temporary names and land only once both are whole, so the
    output may be the input itself (or its data file): every weight is read from the input's
    files before either is replaced, and a failure leaves them as they were."""
    from onnx_dml_lowering.runtime.output_file import staged
    from onnx_dml_lowering.runtime.output_target import landing
    # through a link, the files land beside its target: the model reads its data from its own folder
    out = Path(landing(path))
    location, data_size = None, 0
    tensors = [t for t in model.graph.initializer if t.name in external]
    for tensor in model.graph.initializer:
        if tensor.name not in external:
            inline(tensor)       # read from the input file as it loaded (runtime.inline_weights): inline again
    data_path = data_file(path) if tensors else None
    beside = data_path != path
    with contextlib.ExitStack() as stack:
        # they land in the reverse order: files the data first, so no model names a file not yet
        # there; a stream the model first, then its data, as a derived file follows on a device
        def enter(target: str, label: str) -> str:
            return stack.enter_context(staged(target, label))
        data_label = f"the {what}'s external data"
        data_temp = enter(data_path, data_label) if data_path is not None and not beside else None
        model_temp = enter(str(out), f"the {what}")
        if data_path is not None and beside:
            data_temp = enter(data_path, data_label)
        if data_temp is not None:
            location = out.name + ".data"
            _write_external(tensors, Path(data_temp), location)
            data_size = os.path.getsize(data_temp)
        # Nothing large is left in the proto: it serialises under 2 GB whatever the weights.
        onnx.save_model(model, model_temp)
        size = data_size + os.path.getsize(model_temp)
    return Saved(location, size, beside, str(out) if str(out) != os.path.abspath(path) else None, data_size)


_CHUNK = 1 << 24


def _write_external(tensors: "list[TensorProto]", data: Path, location: str) -> None:
    """Write each tensor's data into `data` (page-aligned offsets) and point the tensor at it. A tensor
    still in its input file is copied chunk by chunk through a small buffer, not mapped, and runs of
    zeros are skipped (the file stays sparse where the input was)."""
    with open(data, "wb") as sink:
        end = 0
        for tensor in tensors:
            offset = -(-end // 4096) * 4096
            if is_lazy(tensor):
                source, start = external_path(tensor)
                length = tensor_array(tensor).nbytes
                with open(source, "rb") as src:
                    src.seek(start)
                    done = 0
                    while done < length:
                        chunk = src.read(min(_CHUNK, length - done))
                        if not chunk:
                            raise OSError(f"{source} ends before tensor {tensor.name}'s data")
                        if np.frombuffer(chunk, np.uint8).any():
                            sink.seek(offset + done)
                            sink.write(chunk)
                        done += len(chunk)
            else:
                raw = tensor.raw_data if tensor.HasField("raw_data") else numpy_helper.from_array(
                    numpy_helper.to_array(tensor)).raw_data
                length = len(raw)
                sink.seek(offset)
                sink.write(raw)
            end = offset + length
            sink.truncate(end)
            for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data",
                          "string_data"):
                tensor.ClearField(field)
            del tensor.external_data[:]
            tensor.data_location = TensorProto.EXTERNAL
            for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value


# onnxruntime's Python binding cannot return these; Cast to float32 widens them exactly.
_NO_NUMPY = {TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
             TensorProto.FLOAT8E5M2FNUZ}


def _widened(model: "str | bytes | onnx.ModelProto") -> "tuple[onnx.ModelProto, list[str]]":
    """`model` loaded (large weights left in their files), its node names made unique (onnxruntime
    refuses a model whose node names repeat), each output onnxruntime cannot hand to numpy read
    through an exact Cast to float32 into a new graph output of a name new to the model, in its
    place (the value itself keeps its name: a body or another output may read it); and the graph
    output names as the model has them."""
    proto = load_model(model)
    identify_nodes(proto)                   # onnxruntime refuses a model whose node names repeat
    names = [o.name for o in proto.graph.output]
    outputs = [o for o in proto.graph.output if o.type.tensor_type.elem_type in _NO_NUMPY]
    if not outputs:
        return proto, names
    fresh = Names(proto)
    for out in outputs:
        wide = fresh(f"{out.name}__float")
        proto.graph.node.append(onnx.helper.make_node("Cast", [out.name], [wide], name=fresh(f"{out.name}__widen"),
                                                      to=TensorProto.FLOAT))
        out.name = wide
        out.type.tensor_type.elem_type = TensorProto.FLOAT
    return proto, names


def _random_runs(inputs: "list[onnx.ValueInfoProto]", seeds: "tuple[int, ...]", sizes: "tuple[int, ...]",
                 dims: "dict[str, int]", memory_limit: "int | str | None") -> "Iterator[tuple[str, dict[str, np.ndarray]]]":
    """(where, feeds) of bit_identical's seeded random runs, each set drawn when its run comes."""
    from onnx_dml_lowering.runtime.feeds import random_feeds
    from onnx_dml_lowering.runtime.memory import parse_size
    limit = None if memory_limit is None else parse_size(memory_limit)
    all_dims = [d for vi in inputs for d in vi.type.tensor_type.shape.dim]
    names = {d.dim_param for d in all_dims if d.dim_param} - set(dims)
    swept = bool(names) or any(not d.dim_param and not d.HasField("dim_value") for d in all_dims)
    fixed = ", ".join(f"{k}={v}" for k, v in sorted(dims.items()))
    for size in sizes if swept else sizes[:1]:
        where = ", ".join(([f"dimensions {size}"] if swept else []) + ([fixed] if fixed else [])) \
            or "no symbolic dimensions"
        for seed in seeds:
            yield f"seed {seed}, {where}", random_feeds(inputs, seed=seed, dims={**{n: size for n in names}, **dims},
                                                        dim_default=size, memory_limit=limit)


def bit_identical(original: "str | bytes | onnx.ModelProto", rewritten: "str | bytes | onnx.ModelProto", inputs: "list[onnx.ValueInfoProto]",
                  seeds: "tuple[int, ...]" = (0, 1, 2), sizes: "tuple[int, ...]" = (1, 3, 8),
                  feeds: "dict[str, np.ndarray] | None" = None, dims: "dict[str, int] | None" = None,
                  memory_limit: "int | str | None" = None) -> "list[str]":
    """Runs both models on onnxruntime CPU, each graph as written (graph optimizations off: the
    optimizer rewrites the two graphs differently, and at its default level turns Where(Not(m), 0,
    x)'s -0.0 into +0.0 in the original, an answer ONNX does not give), and returns the differences
    found (empty: bit-identical everywhere). With `feeds`, on those feeds only; otherwise over seeded random feeds, the
    symbolic dimensions named in `dims` at those sizes and every other one at each of `sizes`, each
    set refused in one line past `memory_limit` (--memory-limit: bytes or a size like "512MiB";
    default: runtime.memory's) before it is drawn."""
    from onnx_dml_lowering.runtime.ort.sessions import make_session   # logs nothing: errors are our one line
    from onnx_dml_lowering.runtime.ort.settings import as_written
    from onnx_dml_lowering.runtime import ort_crash
    sessions: "list[Any]" = []
    shown: "list[str]" = []
    for model, label in ((original, "the original model"), (rewritten, "the rewritten model")):
        try:
            widened, names = _widened(model)
            shown = shown or names          # the original's output names, before _widened's
            sessions.append(make_session(widened, ["CPUExecutionProvider"], settings=as_written(),
                                         label=f"{label} (optimize --check)"))
        except DmlLowerError:
            raise
        except Exception as exc:  # onnxruntime raises its own Fail / InvalidGraph types
            what = model if isinstance(model, str) else "the model"
            raise DmlLowerError(f"--check: onnxruntime CPU cannot load {what}: "
                                f"{brief(str(exc))}") from None
    a, b = sessions
    runs = [("the --inputs feeds", feeds)] if feeds is not None else \
        _random_runs(inputs, seeds, sizes, dims or {}, memory_limit)
    problems = []
    for where, run_feeds in runs:
        try:
            with stoppable_run() as options:
                try:
                    ort_crash.running(a)
                    first = a.run(None, run_feeds, options)
                    ort_crash.running(b)
                    results = first, b.run(None, run_feeds, options)
                finally:
                    ort_crash.idle()
        except Exception as exc:  # the model itself does not run on these feeds
            raise DmlLowerError(f"--check: onnxruntime CPU cannot run the model on {where}: "
                                f"{brief(str(exc))}") from None
        for name, x, y in zip(shown, *results):
            x, y = np.asarray(x), np.asarray(y)
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                problems.append(f"output {name}, {where}: "
                                f"{x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}, bits differ")
    return problems
