"""The `dml-lower optimize` subcommand: its arguments and handler (the rewrite is optimize.py)."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display

from ..output_files import check_outputs
from .reads import files_read
from .command import ArgGroup, Command, Parsed, Word, flag, option_value
from .numbers import whole_number
from .groups import DimArgs, FeatureLevelArgs, FeedArgs, ModelArgs, OrtVersionArgs, SweepArgs, VerboseArgs
from .output_groups import OutputArgs

if TYPE_CHECKING:
    import onnx

    from onnx_dml_lowering.ir import FeatureLevel

    from ..ep.registry import TableChoice
    from ..optimize.rewrite import Saved


@dataclass(frozen=True)
class Rewrites:
    """Which rewrites optimize makes (--min-bytes, --for), the DML EP table --for dml models
    (--ort-version) and whether it checks them (--check)."""
    min_bytes: int = 0
    target: "str | None" = None
    check: bool = False
    ort_version: "str | None" = None


class RewriteArgs(ArgGroup[Rewrites]):
    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--min-bytes", type=whole_number, default=0, metavar="N",
                  help="leave constants smaller than N bytes alone (0: any that shrinks the file; default: 0)")
        self._add(parser, "--for", dest="target", choices=["dml"],
                  help="instead: the exact rewrites that keep NonZero / eye / mask nodes on onnxruntime's "
                       "DirectML EP (opset down-conversion, NonZero over int64, Cast to bool, bool Equal, "
                       "EyeLike-22), with each one's predicted placement effect")
        OrtVersionArgs("the rewrites and their predicted placement", "with --for dml").add(parser)
        self._add(parser, "--check", action="store_true",
                  help="run original and optimized on onnxruntime CPU over seeded feeds; exit 1 unless "
                       "bit-identical")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Rewrites:
        if args.min_bytes < 0:
            raise DmlLowerError(f"--min-bytes {args.min_bytes}: must be a non-negative number of bytes")
        if args.ort_version is not None and args.target != "dml":
            raise DmlLowerError("--ort-version names the DML EP registration table --for dml models: add --for dml")
        return Rewrites(min_bytes=args.min_bytes, target=args.target, check=args.check, ort_version=args.ort_version)

    def tokens(self, rewrites: Rewrites) -> "list[Word]":
        return [*option_value("--min-bytes", rewrites.min_bytes, 0), *option_value("--for", rewrites.target),
                *option_value("--ort-version", rewrites.ort_version), *flag("--check", rewrites.check)]


class Optimize(Command):
    """--check's --inputs, --dim and --memory-limit are read as run / check read them."""
    name, help = "optimize", "rewrite stored identities, bands and triangles (and torch.eye Range/Equal/Cast, " \
                             "static or run-time sized) into the ONNX nodes that generate them"

    def __init__(self) -> None:
        super().__init__(ModelArgs(verbose=False, level=False), OutputArgs("optimize"),
                         FeatureLevelArgs("optimize", filter=True), RewriteArgs(),
                         FeedArgs(only=("inputs", "memory-limit"), use="optimize"),
                         DimArgs("optimize", several="to check {name} at several sizes write --sweep {sizes} (the "
                                                     "sizes every dimension --dim does not fix takes in turn)"),
                         SweepArgs(), VerboseArgs())

    def run(self, parsed: Parsed) -> int:
        return cmd_optimize(parsed)


def cmd_optimize(parsed: Parsed) -> int:
    from ..frontend import check_and_infer, load_model
    output = parsed[OutputArgs]
    in_place = _same_file(output, parsed[ModelArgs].path)       # -o IN.onnx: rewritten in place, on purpose
    reads = files_read(parsed, model=not in_place)
    # before the work, not after it; no output may replace a file the command reads but the model in
    # place; then (the model read, as stored) the external data file -o writes beside it, spelled as
    # the reads spell theirs
    check_outputs(("-o", output), reads=reads)
    external = _stored_external(parsed[ModelArgs].path)
    check_outputs((f"-o {output!r}: its external data", _data_output(output, external)), reads=reads)
    rewrites = parsed[RewriteArgs]
    level = parsed[FeatureLevelArgs]
    if rewrites.target and (level or rewrites.min_bytes):
        raise DmlLowerError(f"{'--feature-level' if level else '--min-bytes'} chooses the generator "
                            "rewrites; --for dml does not take it")
    path = parsed[ModelArgs].path
    table = None
    if rewrites.target == "dml":        # an unknown --ort-version is one line before the model is read
        from ..ep.registry import choose_table
        table = choose_table(rewrites.ort_version)
    model = load_model(path)
    check_and_infer(model, f"model file {str(path)!r}")     # an invalid model is refused, as by every other command
    feeds, dims, sizes = _check_feeds(parsed, model)
    optimized = _rewrite(path, model, rewrites, level, table)
    before = _file_bytes(path)
    if rewrites.check:              # before writing: an output the check refuses is not written
        from onnx_dml_lowering.runtime.model_facts import graph_inputs
        from ..optimize import bit_identical
        from .feeds import memory_limit
        swept = {} if sizes is None else {"sizes": sizes}
        problems = bit_identical(path, optimized, graph_inputs(model), feeds=feeds, dims=dims,
                                 memory_limit=memory_limit(parsed[FeedArgs]), **swept)
        for line in problems:
            print(f"check: {line}")
        if problems:
            print(f"check: NOT bit-identical: {output} not written")
            return 1
        print("check: bit-identical on onnxruntime CPU")
    from ..optimize import save_model
    if in_place:            # save_model reads every weight before it replaces the model or its data
        from onnx_dml_lowering.runtime.input_files import forget_all
        forget_all()
    saved = save_model(optimized, output, external)
    print(f"wrote {display(output)}{_data_words(saved)}" +
          f": {before} -> {saved.size} bytes ({_saved(before, saved.size)}), {_node_counts(model, optimized)}")
    return 0


def _stored_external(path: str) -> "set[str]":
    """The initializers the model file stores as external data; none when it cannot be read (the
    loader says why, after the outputs are checked)."""
    from ..optimize import external_initializers
    try:
        return external_initializers(path)
    except (DmlLowerError, OSError, ValueError):
        return set()


def _data_output(output: str, external: "set[str]") -> "str | None":
    """The external data file -o writes beside the model, when the input has external data and -o is
    a file (on a device, FIFO or descriptor the data follows the model there)."""
    from ..optimize.rewrite import data_file
    data = data_file(output) if external else None
    return data if data != output else None


def _data_words(saved: "Saved") -> str:
    """What the `wrote` line says of the external data: the file beside the model, or the bytes
    after it on the same stream (a pipe's reader splits there: the model is the size less them)."""
    if not saved.location:
        return ""
    if saved.beside:
        landed = f" beside {display(saved.landed)}, where the link leads" if saved.landed else ""
        return f" (external data {display(saved.location)}{landed})"
    return (f" (and after it, to the same stream, the {saved.data_size} bytes of external data it names "
            f"{display(saved.location)}: no such file is made)")


def _node_counts(model: onnx.ModelProto, optimized: onnx.ModelProto) -> str:
    """`N -> M nodes`, counted as inspect counts them: control-flow bodies included, and said so
    where the model has any."""
    from ..optimize.names import has_bodies, node_count
    bodies = " (control-flow bodies included)" if has_bodies(model) or has_bodies(optimized) else ""
    return f"{node_count(model)} -> {node_count(optimized)} nodes{bodies}"


def _same_file(a: str, b: str) -> bool:
    """Whether -o `a` rewrites the model `b` in place: the model's own file, replaced whole by a
    rename; not a descriptor, FIFO or device open on it (`-o /dev/fd/3` of `3<>m.onnx`), which would
    be written into, over the model it reads: that one is refused as an input."""
    from onnx_dml_lowering.runtime.output_target import Unwritable, resolve
    try:
        return not resolve(a).kind.in_place and os.path.samefile(a, b)
    except (OSError, Unwritable):
        return False


def _rewrite(path: str, model: onnx.ModelProto, rewrites: Rewrites, level: "FeatureLevel | None",
             table: "TableChoice | None") -> onnx.ModelProto:
    """The rewritten model, each rewrite (or why none) printed; --for dml first names the table it
    models (`table`)."""
    if table is not None:
        from ..optimize.dml import optimize_for_dml
        print(f"DML EP placement modelled: {table.describe()}")
        optimized, dml_rewrites, notes = optimize_for_dml(model, str(Path(path).resolve().parent), table)
        for line in notes:
            print(display(line))
        if not dml_rewrites:
            print(f"{display(path)}: nothing to rewrite for the DML EP")
        for rewrite in dml_rewrites:
            print("\n".join(rewrite.lines()))
        _predicted_load_failure(optimized, path, table)
        return optimized
    from ..optimize import optimize_model
    optimized, changes, declined = optimize_model(model, rewrites.min_bytes, level)
    for line in declined:           # each names the model's nodes and values: displayed, never raw
        print(display(line))
    if not changes:
        print(f"{display(path)}: nothing to rewrite")
    for change in changes:
        print(display(change.line()))
    return optimized


def _predicted_load_failure(optimized: onnx.ModelProto, path: str, table: "TableChoice") -> None:
    """A warning line per node of the model written that no provider takes on the DML EP, as the
    prediction (inspect --ep dml) words it: onnxruntime would not create the session. A prediction,
    not a failure of optimize: the file is still written, exit 0."""
    from ..ep.placement import NONE, no_provider_warning, predict_placement
    report = predict_placement(optimized, str(Path(path).resolve().parent), ort_version=table.version)
    for entry in report["nodes"]:
        if entry["provider"] == NONE:
            print(display(f"warning: the rewritten model is predicted not to load on the DML EP (onnxruntime "
                          f"{report['onnxruntime']}): {no_provider_warning(entry['node'], entry['op_type'])}; "
                          f"why: {entry['reason']}"))


def _check_feeds(parsed: Parsed, model: onnx.ModelProto) -> "tuple[dict | None, dict, tuple[int, ...] | None]":
    """--inputs / --dim / --sweep / --memory-limit, validated before anything is written: the feeds
    (an --inputs file read within the limit), the fixed dimension sizes and the sizes the other
    dimensions sweep."""
    from types import SimpleNamespace

    from onnx_dml_lowering.runtime.feeds import check_feed_headers, check_feeds
    from onnx_dml_lowering.runtime.npz import load_npz

    from onnx_dml_lowering.runtime.model_facts import graph_inputs, overridable_inputs
    from .feeds import known_dims, memory_limit
    given_feeds, given_dims, sizes = parsed[FeedArgs], parsed[DimArgs], parsed[SweepArgs]
    inputs_file, swept = given_feeds.inputs, sizes is not None
    given = "--inputs" if inputs_file else "--dim" if given_dims else "--sweep" if swept else None
    if not parsed[RewriteArgs].check and given:
        raise DmlLowerError(f"{given} gives the feeds of --check: add --check")
    if not parsed[RewriteArgs].check and given_feeds.memory_limit is not None:
        raise DmlLowerError("--memory-limit bounds the feeds of --check: add --check")
    if inputs_file and (given_dims or swept):
        raise DmlLowerError(f"{'--dim' if given_dims else '--sweep'} sizes the random feeds: it does not combine "
                            "with --inputs")
    inputs = graph_inputs(model)
    dims = known_dims(SimpleNamespace(inputs=inputs, optional_inputs=overridable_inputs(model)), given_dims)
    if not inputs_file:
        return None, dims, sizes
    optional = overridable_inputs(model)
    arrays = load_npz(inputs_file, "inputs file", memory_limit(given_feeds),
                      check=lambda headers: check_feed_headers(inputs, headers, optional))
    return check_feeds(inputs, arrays, optional), dims, sizes


def _saved(before: int, after: int) -> str:
    from ..saving import saving
    return saving(before - after)


def _external_files(path: str) -> "list[Path]":
    """The external data files the model file `path` names."""
    import onnx

    from onnx_dml_lowering.runtime.inline_weights import in_model_file

    from ..frontend import load_stored
    proto = load_stored(path)
    files = {entry.value for t in proto.graph.initializer
             if t.data_location == onnx.TensorProto.EXTERNAL and not in_model_file(t, Path(path).name)
             for entry in t.external_data if entry.key == "location"}
    return [Path(path).parent / f for f in sorted(files)]


def _file_bytes(path: str) -> int:
    """The model file plus the external data files it refers to."""
    return os.path.getsize(path) + sum(os.path.getsize(f) for f in _external_files(path))
