"""How run / check / reduce get their feeds from the command line: the --inputs file, a data loader
script, or seeded random feeds shaped by --dim / --val-range / --zero-fraction, one set at a time."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator, Protocol

from onnx_dml_lowering.ir import DmlLowerError


if TYPE_CHECKING:
    import numpy as np
    import onnx

    from .compiled import CompiledModel


def memory_limit(args) -> int:
    from onnx_dml_lowering.runtime.memory import default_limit, parse_size
    limit = getattr(args, "memory_limit", None)
    return default_limit() if limit is None else parse_size(limit)


def draws_random_feeds(args) -> bool:
    """No --inputs file and no data loader script: seeded random feeds, shaped by --dim."""
    return not (getattr(args, "inputs", None) or getattr(args, "data_loader_script", None))


def describe_feeds(args, feeds: "dict[str, np.ndarray]", sets: int = 1) -> dict:
    """The reports' account of the feeds (report.feeds_line, JSON "feeds"): their source (random
    with its seed and the number of `sets`, the --inputs file, the data loader script) and what
    `feeds`, the first set, holds per input (runtime.feeds.feed_summary)."""
    from onnx_dml_lowering.runtime.feeds import feed_summary
    if getattr(args, "data_loader_script", None):
        source = {"source": "script", "path": args.data_loader_script, "iterations": sets}
    elif getattr(args, "inputs", None):
        source = {"source": "file", "path": args.inputs}
    else:
        source = {"source": "random", "seed": args.seed, "iterations": sets}
    return {**source, "inputs": feed_summary(feeds)}


def first_feeds(compiled: CompiledModel, args) -> "dict[str, np.ndarray]":
    """The first feed set (see feed_sets)."""
    return next(feed_sets(compiled, args))


def feed_sets(compiled: CompiledModel, args) -> "Iterator[dict[str, np.ndarray]]":
    """The feed sets of run / check, one at a time: a data loader script's, the --inputs file, or
    seeded random ones (seeds SEED .. SEED+N-1 for --iterations N)."""
    from onnx_dml_lowering.runtime.feeds import check_feed_headers, random_feeds
    from onnx_dml_lowering.runtime.npz import load_npz
    iterations = getattr(args, "iterations", 1)
    script = getattr(args, "data_loader_script", None)
    if script:
        if args.inputs:
            raise DmlLowerError("--data-loader-script gives the feeds: it does not combine with --inputs")
        if iterations > 1:
            raise DmlLowerError("--data-loader-script gives the feed sets (one iteration each): "
                                "it does not combine with --iterations")
        for option, value in (("--dim", args.dim), ("--val-range", args.val_range),
                               ("--zero-fraction", args.zero_fraction)):
            if value:
                raise DmlLowerError(f"{option} shapes random feeds: it does not apply to --data-loader-script")
        from .data_loader import feed_sets as script_feed_sets
        yield from script_feed_sets(script, compiled.inputs, compiled.optional_inputs)
        return
    if args.inputs:
        if iterations > 1:
            raise DmlLowerError("--iterations draws seeded random feeds: it does not combine with --inputs")
        yield load_npz(args.inputs, "inputs file", memory_limit(args), check=lambda headers: check_feed_headers(
            compiled.inputs, headers, compiled.optional_inputs))
        return
    if args.seed < 0:
        raise DmlLowerError(f"--seed {args.seed}: the seed must be a non-negative integer")
    dims = parse_dims(compiled, args)
    control = check_value_control(compiled, value_control(args), args)
    limit = memory_limit(args)
    for index in range(iterations):
        # drawn one at a time as check consumes them: memory stays flat in N
        yield random_feeds(random_inputs(compiled, args), seed=args.seed + index, dims=dims, **control,
                           memory_limit=limit)


def random_inputs(compiled: CompiledModel, args) -> list:
    """The inputs random feeds are drawn for: initializers that are also inputs keep their stored
    default unless --feed-initializers asks for random values in their place."""
    return compiled.inputs + (compiled.optional_inputs if getattr(args, "feed_initializers", False) else [])


class ModelInputs(Protocol):
    """What parse_dims reads: a CompiledModel, or optimize --check's namespace of the two lists."""
    inputs: "list[onnx.ValueInfoProto]"
    optional_inputs: "list[onnx.ValueInfoProto]"


def parse_dims(compiled: ModelInputs, args) -> "dict[str, int]":
    dims = {}
    for text in args.dim or []:
        name, _, value = text.partition("=")
        if not name or not value.isdigit():
            raise DmlLowerError(f"--dim {text!r}: expected NAME=SIZE with a non-negative integer size")
        dims[name] = int(value)
    known = {d.dim_param for vi in compiled.inputs + compiled.optional_inputs
             for d in vi.type.tensor_type.shape.dim if d.dim_param}
    if getattr(args, "names_where_present", False):
        return {name: size for name, size in dims.items() if name in known}
    unknown = sorted(set(dims) - known)
    if unknown:
        raise DmlLowerError(f"--dim {unknown[0]}: no input dimension has that name "
                            f"(symbolic input dimensions: {', '.join(sorted(known)) or 'none'})")
    return dims


def value_control(args) -> dict:
    """--zero-fraction / --val-range, for random feeds: global `F` / `LO,HI` and per input
    `NAME:F` / `NAME:LO,HI` (the per-input form wins; of repeated ones the last)."""
    from onnx_dml_lowering.runtime.feeds import range_problem
    control: dict = {"zero_fraction": None, "value_range": None, "input_zero_fraction": {},
                     "input_value_range": {}}
    for text in _listed(getattr(args, "val_range", None)):
        name, bounds = _split_input(text, "--val-range")
        if bounds.startswith("[") and bounds.endswith("]"):
            bounds = bounds[1:-1]            # Polygraphy's spelling, [LO,HI]
        lo, sep, hi = bounds.partition(",")
        try:
            value_range = (float(lo), float(hi))
        except ValueError:
            raise DmlLowerError(f"--val-range {text!r}: expected [NAME:]LO,HI (two numbers)") from None
        problem = range_problem(value_range)
        if problem:
            raise DmlLowerError(f"--val-range {text!r}: {problem}")
        if name is None:
            control["value_range"] = value_range
        else:
            control["input_value_range"][name] = value_range
    for text in _listed(getattr(args, "zero_fraction", None)):
        name, value = _split_input(text, "--zero-fraction")
        try:
            fraction = float(value)
        except ValueError:
            raise DmlLowerError(f"--zero-fraction {text!r}: expected [NAME:]F (a number from 0 to 1)") from None
        if not 0.0 <= fraction <= 1.0:
            raise DmlLowerError(f"--zero-fraction {text!r}: F must be between 0 and 1")
        if name is None:
            control["zero_fraction"] = fraction
        else:
            control["input_zero_fraction"][name] = fraction
    return control


def _listed(value) -> "list[str]":
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def _split_input(text: str, option: str) -> "tuple[str | None, str]":
    """NAME:VALUE -> (NAME, VALUE); VALUE alone -> (None, VALUE). The last colon splits, so input
    names holding a colon (TensorFlow's 'x:0') still work."""
    name, sep, value = text.rpartition(":")
    if not sep:
        return None, text
    if not name:
        raise DmlLowerError(f"{option} {text!r}: the input name before ':' is empty")
    return name, value


def check_value_control(compiled: CompiledModel, control: dict, args=None) -> dict:
    """An input named by --val-range / --zero-fraction must be one the random feeds fill (in a
    zoo's per-model check, --names-where-present, one the model lacks is left out instead)."""
    names = [vi.name for vi in (random_inputs(compiled, args) if args is not None else compiled.inputs)]
    for option, key in (("--val-range", "input_value_range"), ("--zero-fraction", "input_zero_fraction")):
        if getattr(args, "names_where_present", False):
            control[key] = {name: value for name, value in control[key].items() if name in names}
        for name in control[key]:
            if name not in names:
                raise DmlLowerError(f"{option} {name}: the model has no input of that name "
                                    f"(inputs: {', '.join(names) or 'none'})")
    return control


# Options whose value may start with '-' ('--val-range -1,1'): argparse would read it as an option.
_SIGNED_VALUES = ("--val-range", "--zero-fraction")
_NUMBER_START = re.compile(r"-(\d|\.\d|inf\b|nan\b)", re.IGNORECASE)


def attach_signed_values(argv: "list[str]") -> "list[str]":
    """'--val-range -1,1' -> '--val-range=-1,1', so that argparse takes -1,1 as the value."""
    out: "list[str]" = []
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            out += argv[index:]
            break
        if token in _SIGNED_VALUES and index + 1 < len(argv) and _NUMBER_START.match(argv[index + 1]):
            out.append(f"{token}={argv[index + 1]}")
            index += 2
            continue
        out.append(token)
        index += 1
    return out
