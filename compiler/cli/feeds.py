"""How run / check / reduce get their feeds from the command line: the --inputs file, a data loader
script, or seeded random feeds shaped by --dim / --val-range / --zero-fraction, one set at a time."""
from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Iterator, Protocol, Sequence

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display, name_list


if TYPE_CHECKING:
    import numpy as np
    import onnx

    from ..compiled import CompiledModel
    from .groups import Feeds


def memory_limit(feeds: Feeds) -> int:
    from onnx_dml_lowering.runtime.memory import default_limit, parse_size
    return default_limit() if feeds.memory_limit is None else parse_size(feeds.memory_limit)


def describe_feeds(feeds: Feeds, arrays: "dict[str, np.ndarray]", sets: int = 1,
                   declared: "Sequence[onnx.ValueInfoProto]" = ()) -> dict:
    """The reports' account of the feeds (report.feeds_line, JSON "feeds"): their source (random
    with its seed, the number of `sets` and, from the `declared` inputs, each symbolic dimension's
    size with those no --dim set named as defaulted; the --inputs file, the data loader script)
    and what `arrays`, the first set, holds per input (runtime.feeds.feed_summary)."""
    from onnx_dml_lowering.runtime.feeds import feed_summary
    if feeds.script:
        source = {"source": "script", "path": feeds.script, "iterations": sets}
    elif feeds.inputs:
        source = {"source": "file", "path": feeds.inputs}
    else:
        dims = drawn_dims(declared, arrays)
        source = {"source": "random", "seed": feeds.seed, "iterations": sets, "dims": dims,
                  "default_dims": [name for name in dims if name not in feeds.dims]}
    return {**source, "inputs": feed_summary(arrays)}


def drawn_dims(declared: "Sequence[onnx.ValueInfoProto]", arrays: "dict[str, np.ndarray]") -> "dict[str, int]":
    """Each symbolic dimension of the `declared` inputs fed in `arrays`, with the size drawn."""
    sizes: "dict[str, int]" = {}
    for vi in declared:
        if vi.name in arrays and vi.type.HasField("tensor_type"):
            shape = arrays[vi.name].shape
            for axis, dim in enumerate(vi.type.tensor_type.shape.dim):
                if dim.dim_param and axis < len(shape):
                    sizes.setdefault(dim.dim_param, int(shape[axis]))
    return sizes


def first_feeds(compiled: CompiledModel, feeds: Feeds) -> "dict[str, np.ndarray]":
    """The first feed set (see feed_sets)."""
    return next(feed_sets(compiled, feeds))


def feed_sets(compiled: CompiledModel, feeds: Feeds) -> "Iterator[dict[str, np.ndarray]]":
    """The feed sets of run / check, one at a time: a data loader script's, the --inputs file, or
    seeded random ones (seeds SEED .. SEED+N-1 for --iterations N). The combinations of options
    were checked when they were parsed (groups.FeedArgs)."""
    from onnx_dml_lowering.runtime.feeds import check_feed_headers, random_feeds, with_declared_types
    from onnx_dml_lowering.runtime.npz import load_npz
    declared = compiled.inputs + compiled.optional_inputs
    if feeds.script:
        from ..data_loader import feed_sets as script_feed_sets
        for arrays in script_feed_sets(feeds.script, compiled.inputs, compiled.optional_inputs):
            yield with_declared_types(declared, arrays)
        return
    if feeds.inputs:
        yield with_declared_types(declared, load_npz(
            feeds.inputs, "inputs file", memory_limit(feeds),
            check=lambda headers: check_feed_headers(compiled.inputs, headers, compiled.optional_inputs)))
        return
    dims = known_dims(compiled, feeds.dims, feeds.names_where_present)
    control = check_value_control(compiled, value_control(feeds.val_range, feeds.zero_fraction), feeds)
    limit = memory_limit(feeds)
    for index in range(feeds.iterations):
        # drawn one at a time as check consumes them: memory stays flat in N
        yield random_feeds(random_inputs(compiled, feeds), seed=feeds.seed + index, dims=dims, **control,
                           memory_limit=limit)


def random_inputs(compiled: CompiledModel, feeds: "Feeds | None") -> list:
    """The inputs random feeds are drawn for: initializers that are also inputs keep their stored
    default unless --feed-initializers asks for random values in their place."""
    return compiled.inputs + (compiled.optional_inputs if feeds is not None and feeds.feed_initializers else [])


def drawn_sizes_hint(compiled: CompiledModel, feeds: Feeds) -> str:
    """For an error on random feeds: the symbolic dimensions they gave the default size (none set
    by --dim), which a model that ties sizes together (a decoder's past and total sequence length)
    may not take; '' when the feeds are not drawn or every dimension was set."""
    from onnx_dml_lowering.ir.display import name_list
    from onnx_dml_lowering.runtime.feeds import DIM_DEFAULT
    if not feeds.random:
        return ""
    free = sorted({d.dim_param for vi in random_inputs(compiled, feeds) for d in vi.type.tensor_type.shape.dim
                   if d.dim_param and d.dim_param not in feeds.dims})
    if not free:
        return ""
    # the sizes the user chose are said too: a failure may be theirs (--dim batch=0), not the default's
    given = sorted({d.dim_param for vi in random_inputs(compiled, feeds) for d in vi.type.tensor_type.shape.dim
                    if d.dim_param in feeds.dims})
    chosen = f", and {name_list([f'{n} {feeds.dims[n]}' for n in given], 6, 'dimensions')} from --dim" if given else ""
    return (f" (the random feeds gave symbolic dimension{'s' if len(free) > 1 else ''} "
            f"{name_list(free, 6, 'dimensions')} size {DIM_DEFAULT}{chosen}; if the model ties sizes together, "
            "give them with --dim NAME=SIZE)")


class ModelInputs(Protocol):
    """What known_dims reads: a CompiledModel, or optimize --check's namespace of the two lists."""
    inputs: "list[onnx.ValueInfoProto]"
    optional_inputs: "list[onnx.ValueInfoProto]"


def known_dims(compiled: ModelInputs, dims: "dict[str, int]", names_where_present: bool = False
               ) -> "dict[str, int]":
    """`dims` (groups.DimArgs) checked against the model: each names a symbolic input dimension
    (in a zoo's per-model check, --names-where-present, one the model lacks is left out instead)."""
    known = {d.dim_param for vi in compiled.inputs + compiled.optional_inputs
             for d in vi.type.tensor_type.shape.dim if d.dim_param}
    if names_where_present:
        return {name: size for name, size in dims.items() if name in known}
    unknown = sorted(set(dims) - known)
    if unknown:
        these = "that name" if len(unknown) == 1 else "these names"
        raise DmlLowerError(f"--dim {', '.join(unknown)}: no input dimension has {these} "
                            f"(symbolic input dimensions: {', '.join(sorted(known)) or 'none'})")
    return dims


def named_options(args: argparse.Namespace) -> "list[tuple[str, str]]":
    """(option, name) of every --dim NAME=SIZE, --val-range NAME:LO,HI and --zero-fraction NAME:F,
    in order, once each: what each model of a zoo applies where it has that name."""
    control = value_control(args.val_range, args.zero_fraction)
    named = [("--dim", text.partition("=")[0]) for text in args.dim or []]
    named += [("--val-range", name) for name in control["input_value_range"]]
    named += [("--zero-fraction", name) for name in control["input_zero_fraction"]]
    return list(dict.fromkeys(named))


def value_control(val_range: "list[str] | None", zero_fraction: "list[str] | None") -> dict:
    """--zero-fraction / --val-range, for random feeds: global `F` / `LO,HI` and per input
    `NAME:F` / `NAME:LO,HI` (the per-input form wins; of repeated ones the last)."""
    from onnx_dml_lowering.runtime.feeds import range_problem
    control: dict = {"zero_fraction": None, "value_range": None, "input_zero_fraction": {},
                     "input_value_range": {}}
    for text in _listed(val_range):
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
    for text in _listed(zero_fraction):
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


def _listed(value: "list[str] | None") -> "list[str]":
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


def check_value_control(compiled: CompiledModel, control: dict, feeds: "Feeds | None" = None) -> dict:
    """An input named by --val-range / --zero-fraction must be one the random feeds fill (in a
    zoo's per-model check, --names-where-present, one the model lacks is left out instead)."""
    names = [vi.name for vi in random_inputs(compiled, feeds)]
    for option, key in (("--val-range", "input_value_range"), ("--zero-fraction", "input_zero_fraction")):
        if feeds is not None and feeds.names_where_present:
            control[key] = {name: value for name, value in control[key].items() if name in names}
        for name in control[key]:
            if name not in names:
                raise DmlLowerError(f"{option} names input '{display(name)}': the model has no input of that name "
                                    f"(inputs: {name_list(names, noun='inputs') or 'none'})")
    return control


# Options whose value may start with '-' ('--val-range -1,1'): argparse would read it as an option.
# the options whose value is a number (or holds one first): a negative one gets the option's own
# message (a tolerance is 0 or more ...), not argparse's "expected one argument"
_SIGNED_VALUES = ("--val-range", "--zero-fraction", "--atol", "--rtol", "--seed", "--iterations", "--threads",
                  "--jobs")
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
