"""The `dml-lower optimize` subcommand: its arguments and handler (the rewrite is optimize.py)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from onnx_dml_lowering.ir import DmlLowerError


def add_optimize_parser(sub) -> None:
    p = sub.add_parser("optimize", help="rewrite stored identities, bands and triangles (and torch.eye "
                                        "Range/Equal/Cast) into the ONNX nodes that generate them")
    p.add_argument("model", help="path to an .onnx model")
    p.add_argument("-o", "--output", required=True, help="where to write the optimized .onnx")
    p.add_argument("--feature-level", help="only rewrite bands this project lowers to DirectML at this level "
                                           "(default: every band onnxruntime generates exactly)")
    p.add_argument("--min-bytes", type=int, default=0, metavar="N",
                   help="leave constants smaller than N bytes alone (default 0: any that shrinks the file)")
    p.add_argument("--check", action="store_true",
                   help="run original and optimized on onnxruntime CPU over seeded feeds; exit 1 unless "
                        "bit-identical")
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="on an unexpected error, print the traceback")
    p.set_defaults(func=cmd_optimize)


def cmd_optimize(args) -> int:
    from onnx_dml_lowering.ir import parse_level

    from .frontend import graph_inputs, load_model
    from .optimize import bit_identical, external_initializers, optimize_model, save_model
    if args.min_bytes < 0:
        raise DmlLowerError(f"--min-bytes {args.min_bytes}: must be a non-negative number of bytes")
    level = parse_level(args.feature_level) if args.feature_level else None
    model = load_model(args.model)
    external = external_initializers(args.model)
    optimized, rewrites, declined = optimize_model(model, args.min_bytes, level)
    for line in declined:
        print(line)
    if not rewrites:
        print(f"{args.model}: nothing to rewrite")
    for rewrite in rewrites:
        print(rewrite.line())
    location = save_model(optimized, args.output, external)
    before, after = _file_bytes(args.model), _file_bytes(args.output)
    print(f"wrote {args.output}" + (f" (external data {location})" if location else "") +
          f": {before} -> {after} bytes, {len(model.graph.node)} -> {len(optimized.graph.node)} nodes")
    if args.check:
        problems = bit_identical(args.model, args.output, graph_inputs(model))
        for line in problems:
            print(f"check: {line}")
        print("check: bit-identical on onnxruntime CPU" if not problems else "check: NOT bit-identical")
        return 1 if problems else 0
    return 0


def _file_bytes(path: str) -> int:
    """The model file plus the external data files it refers to."""
    import onnx
    proto = onnx.load(path, load_external_data=False)
    files = {entry.value for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL
             for entry in t.external_data if entry.key == "location"}
    return os.path.getsize(path) + sum(os.path.getsize(Path(path).parent / f) for f in files)
