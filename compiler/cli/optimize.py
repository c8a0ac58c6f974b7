"""The `dml-lower optimize` subcommand: its arguments and handler (the rewrite is optimize.py)."""
from __future__ import annotations

import os
from pathlib import Path

from onnx_dml_lowering.ir import DmlLowerError

from ..output_files import check_outputs
from .groups import DimArgs, FeatureLevelArgs, FeedArgs, ModelArgs, VerboseArgs

LEVEL = FeatureLevelArgs("optimize", filter=True)
MODEL, FEEDS = ModelArgs(verbose=False, level=LEVEL), FeedArgs()
DIMS = DimArgs("optimize", several="to check {name} at several sizes write --sweep {sizes} (the sizes every "
                                   "dimension --dim does not fix takes in turn)")


def add_optimize_parser(sub) -> None:
    """The optimize subcommand; --check's --inputs and --dim are read as run / check read them."""
    p = sub.add_parser("optimize", help="rewrite stored identities, bands and triangles (and torch.eye "
                                        "Range/Equal/Cast, static or run-time sized) into the ONNX nodes that generate them")
    MODEL.add(p, level=False)
    p.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="where to write the optimized .onnx")
    LEVEL.add(p)
    p.add_argument("--min-bytes", type=int, default=0, metavar="N",
                   help="leave constants smaller than N bytes alone (0: any that shrinks the file; default: 0)")
    p.add_argument("--for", dest="target", choices=["dml"],
                   help="instead: the exact rewrites that keep NonZero / eye / mask nodes on onnxruntime's "
                        "DirectML EP (opset down-conversion, NonZero over int64, Cast to bool, bool Equal, "
                        "EyeLike-22), with each one's predicted placement effect")
    p.add_argument("--check", action="store_true",
                   help="run original and optimized on onnxruntime CPU over seeded feeds; exit 1 unless "
                        "bit-identical")
    FEEDS.add_inputs(p, "optimize")
    DIMS.add(p)
    DIMS.add_sweep(p)
    VerboseArgs().add(p)
    p.set_defaults(func=cmd_optimize)


def cmd_optimize(args) -> int:
    from ..frontend import check_and_infer, load_model
    from onnx_dml_lowering.runtime.model_facts import graph_inputs
    from ..optimize import bit_identical, external_initializers, optimize_model, save_model
    check_outputs(("-o", args.output))          # before the work, not after it
    if args.min_bytes < 0:
        raise DmlLowerError(f"--min-bytes {args.min_bytes}: must be a non-negative number of bytes")
    if args.target and (args.feature_level or args.min_bytes):
        raise DmlLowerError(f"{'--feature-level' if args.feature_level else '--min-bytes'} chooses the generator "
                            "rewrites; --for dml does not take it")
    level = LEVEL.parse(args)
    model = load_model(args.model)
    check_and_infer(model)          # an invalid model is refused, as by every other command
    feeds, dims, sizes = _check_feeds(args, model)
    external = external_initializers(args.model)
    if args.target == "dml":
        from ..optimize.dml import optimize_for_dml
        optimized, dml_rewrites, notes = optimize_for_dml(model, str(Path(args.model).resolve().parent))
        for line in notes:
            print(line)
        if not dml_rewrites:
            print(f"{args.model}: nothing to rewrite for the DML EP")
        for rewrite in dml_rewrites:
            print("\n".join(rewrite.lines()))
    else:
        optimized, rewrites, declined = optimize_model(model, args.min_bytes, level)
        for line in declined:
            print(line)
        if not rewrites:
            print(f"{args.model}: nothing to rewrite")
        for change in rewrites:
            print(change.line())
    before = _file_bytes(args.model)
    if args.check:              # before writing: an output the check refuses is not written
        swept = {} if sizes is None else {"sizes": sizes}
        problems = bit_identical(args.model, optimized, graph_inputs(model), feeds=feeds, dims=dims, **swept)
        for line in problems:
            print(f"check: {line}")
        if problems:
            print(f"check: NOT bit-identical: {args.output} not written")
            return 1
        print("check: bit-identical on onnxruntime CPU")
    saved = save_model(optimized, args.output, external)
    print(f"wrote {args.output}" + (f" (external data {saved.location})" if saved.location else "") +
          f": {before} -> {saved.size} bytes ({_saved(before, saved.size)}), "
          f"{len(model.graph.node)} -> {len(optimized.graph.node)} nodes")
    return 0


def _check_feeds(args, model) -> "tuple[dict | None, dict, tuple[int, ...] | None]":
    """--inputs / --dim / --sweep, validated before anything is written: the feeds, the fixed
    dimension sizes and the sizes the other dimensions sweep."""
    from types import SimpleNamespace

    from onnx_dml_lowering.runtime.feeds import check_feed_headers, check_feeds
    from onnx_dml_lowering.runtime.npz import load_npz

    from onnx_dml_lowering.runtime.model_facts import graph_inputs, overridable_inputs
    swept = args.sweep is not None
    given = "--inputs" if args.inputs else "--dim" if args.dim else "--sweep" if swept else None
    if not args.check and given:
        raise DmlLowerError(f"{given} gives the feeds of --check: add --check")
    if args.inputs and (args.dim or swept):
        raise DmlLowerError(f"{'--dim' if args.dim else '--sweep'} sizes the random feeds: it does not combine "
                            "with --inputs")
    inputs = graph_inputs(model)
    from .feeds import known_dims
    dims = known_dims(SimpleNamespace(inputs=inputs, optional_inputs=overridable_inputs(model)), DIMS.parse(args))
    sizes = DIMS.parse_sweep(args)
    if not args.inputs:
        return None, dims, sizes
    optional = overridable_inputs(model)
    arrays = load_npz(args.inputs, "inputs file", check=lambda headers: check_feed_headers(inputs, headers, optional))
    return check_feeds(inputs, arrays, optional), dims, sizes


def _saved(before: int, after: int) -> str:
    return f"{before - after} bytes saved" if after <= before else f"{after - before} bytes more"


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
