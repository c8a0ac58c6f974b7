"""The option groups several dml-lower commands share, after Polygraphy's tools/args: each group
declares its options once (add), reads them once (parse, through command.Parsed) into a small typed
object the command uses, and writes that object back as command-line words (tokens). A command
(command.Command) lists the groups it takes and declares none of their options itself; where
commands use an option differently, the variant is a parameter of the group, and its help text
lives here beside the declaration (test_groups.py walks every subparser to hold both).

A group may add its options in more than one place of a command's --help (add_... methods), so the
help of every command reads as it always has."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from onnx_dml_lowering.ir import DEFAULT_LEVEL, DmlLowerError
from onnx_dml_lowering.ir.digits import ascii_digits

from .command import DECLARED_BY, ArgGroup, Parsed, Word, each, flag, option_value
from .numbers import whole_number

if TYPE_CHECKING:
    from onnx_dml_lowering.ir import FeatureLevel
    from onnx_dml_lowering.runtime.backends import BackendOptions
    from onnx_dml_lowering.runtime.backend_names import BackendName
    from onnx_dml_lowering.runtime.oracle_names import OracleName
    from onnx_dml_lowering.runtime.saved_outputs import LoadedOutputs
    from onnx_dml_lowering.runtime.tolerances import Tolerances
    from onnx_dml_lowering.runtime.ort.settings import SessionSettings

__all__ = ["DECLARED_BY", "ArgGroup", "BackendArgs", "DimArgs", "FeatureLevelArgs", "FeedArgs", "ModelArgs",
           "OracleArgs", "SessionArgs", "ToleranceArgs", "VerboseArgs"]


# -- the model --------------------------------------------------------------------------------------

class VerboseArgs(ArgGroup[bool]):
    """-v, before the command (`program`) or after it; a command's leaves the program's value
    alone unless given (default SUPPRESS)."""

    def __init__(self, program: bool = False) -> None:
        self.program = program

    def add(self, parser: argparse.ArgumentParser) -> None:
        if self.program:
            self._add(parser, "-v", "--verbose", action="store_true",
                      help="on an unexpected error, print the traceback (as DML_LOWER_DEBUG=1)")
        else:
            self._add(parser, "-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                      help="on an unexpected error, print the traceback")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> bool:
        """Given before or after the command (the program's -v sets the same value)."""
        return bool(vars(args).get("verbose", False))

    def tokens(self, value: bool) -> "list[Word]":
        return flag("--verbose", value)


# --feature-level: the level a command lowers at, or (filter=True) an optional filter whose absence
# means every level. The help says what the level does for that command.
LEVEL_HELP = {
    "lower": "DirectML feature level, 1_0 .. 6_4",
    "manifest": "the level the manifest's placement is for",
    "capabilities": "only the tables in force at this level (default: every level)",
    "optimize": "only rewrite bands this project lowers to DirectML at this level "
                "(default: every band onnxruntime generates exactly)",
}


class FeatureLevelArgs(ArgGroup["FeatureLevel | None"]):
    """--feature-level. `use` picks the help text (LEVEL_HELP); `filter` makes it optional (no
    default: every level), as capabilities and optimize take it."""

    def __init__(self, use: str = "lower", filter: bool = False) -> None:
        self.use, self.filter = use, filter

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--feature-level", metavar="L", help=LEVEL_HELP[self.use],
                  **({} if self.filter else {"default": str(DEFAULT_LEVEL)}))

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> "FeatureLevel | None":
        """The level (ir.parse_level; a bad one is one error line); None for an absent filter, and
        for a level that is not a filter, its default."""
        from onnx_dml_lowering.ir import parse_level
        if args.feature_level is None:
            return None if self.filter else DEFAULT_LEVEL
        return parse_level(args.feature_level)       # '' given is a bad level, not an absent one

    def required(self, args: argparse.Namespace) -> FeatureLevel:
        """The level of a command that lowers at one (not a filter: it has a default)."""
        return self.parse(args) or DEFAULT_LEVEL

    def tokens(self, value: "FeatureLevel | None") -> "list[Word]":
        return _level_words(value, None if self.filter else DEFAULT_LEVEL)


def _level_words(level: "FeatureLevel | None", default: "FeatureLevel | None") -> "list[Word]":
    return [] if level is None or level == default else [Word("--feature-level", (str(level),))]


@dataclass(frozen=True)
class Model:
    """The model file a command reads and the level it lowers at (the default level where the
    command takes its level elsewhere); a zoo's files and directories in `paths`."""
    path: str
    feature_level: FeatureLevel
    verbose: bool = False
    paths: "tuple[str, ...]" = ()


class ModelArgs(ArgGroup[Model]):
    """The model argument (one file, or with `many` the zoo's files and directories), then -v and
    --feature-level as the commands that lower a model take them (`level` False: the command places
    its own FeatureLevelArgs)."""

    def __init__(self, many: bool = False, verbose: bool = True, level: bool = True) -> None:
        self.many, self.verbose = many, verbose
        self.level = FeatureLevelArgs() if level else None

    def add(self, parser: argparse.ArgumentParser) -> None:
        if self.many:
            self._add(parser, "model", nargs="+", metavar="MODEL_OR_DIR",
                      help="an .onnx model; several, or a directory (every *.onnx below it), check a zoo")
        else:
            self._add(parser, "model", help="path to an .onnx model")
        if self.verbose:
            VerboseArgs().add(parser)
        if self.level is not None:
            self.level.add(parser)

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Model:
        """The model path and the feature level (a bad level is one error line). A zoo's paths are
        the zoo runner's (check hands one model at a time here)."""
        paths = tuple(args.model) if isinstance(args.model, list) else ()
        level = self.level.required(args) if self.level is not None else DEFAULT_LEVEL
        return Model(path=paths[0] if paths else args.model, feature_level=level,
                     verbose=self.verbose and VerboseArgs().parse(args), paths=paths)

    def tokens(self, model: Model) -> "list[Word]":
        words = [Word("", model.paths or (model.path,)), *VerboseArgs().tokens(model.verbose)]
        return words + (self.level.tokens(model.feature_level) if self.level is not None else [])


# -- symbolic dimension sizes ---------------------------------------------------------------------

# --dim NAME=SIZE is a fixed size for a symbolic input dimension, whatever the command; the help
# says what the command does at that size.
DIM_HELP = {
    "feeds": "size of a symbolic input dimension for random feeds (repeatable; default: 3)",
    "compile": "specialise the run-time-sized steps at these input dimension sizes and print their "
               "descriptors (repeatable; unnamed symbolic dimensions: 3)",
    "optimize": "with --check: size of a symbolic input dimension for the random feeds (repeatable; "
                "the others take each --sweep size)",
}


class DimArgs(ArgGroup["dict[str, int]"]):
    """--dim NAME=SIZE (repeatable): the size one symbolic input dimension takes."""

    def __init__(self, use: str = "feeds", several: str = "") -> None:
        # `several`: what to write instead of --dim NAME=A,B,C where the command checks several
        # sizes ({name} is NAME, {sizes} A,B,C)
        self.use, self.several = use, several

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--dim", action="append", metavar="NAME=SIZE", help=DIM_HELP[self.use])

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> "dict[str, int]":
        """NAME -> SIZE, in the order given. A malformed one, or one name given two different
        sizes, is one error line (the same size twice is fine)."""
        return parse_dim_sizes(args.dim, self.several)

    def tokens(self, dims: "dict[str, int]") -> "list[Word]":
        return dim_words(dims)


def dim_words(dims: "dict[str, int]") -> "list[Word]":
    return each("--dim", (f"{name}={size}" for name, size in dims.items()))


class SweepArgs(ArgGroup["tuple[int, ...] | None"]):
    """optimize --check's --sweep: one list of sizes for every dimension --dim leaves free, which
    all take each size in turn (one run per size and seed, not a product over dimensions)."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--sweep", metavar="SIZES",
                  help="with --check: comma-separated sizes every symbolic input dimension not fixed by "
                       "--dim takes in turn (default: 1,3,8)")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> "tuple[int, ...] | None":
        """The --sweep sizes, in order, once each; None when not given (optimize.bit_identical's
        own default, 1, 3 and 8)."""
        if args.sweep is None:
            return None
        sizes = [s.strip() for s in args.sweep.split(",")]
        if not all(ascii_digits(s) for s in sizes):
            raise DmlLowerError(f"--sweep {args.sweep!r}: expected SIZE[,SIZE...] of non-negative integers")
        return tuple(dict.fromkeys(int(s) for s in sizes))

    def tokens(self, sizes: "tuple[int, ...] | None") -> "list[Word]":
        return [] if sizes is None else [Word("--sweep", (",".join(map(str, sizes)),))]


def parse_dim_sizes(texts: "list[str] | None", several: str = "") -> "dict[str, int]":
    dims: "dict[str, int]" = {}
    for text in texts or []:
        name, _, value = text.partition("=")
        name, value = name.strip(), value.strip()       # ' n=3' names n (it said 'n' is not 'n')
        if several and name and "," in value and all(ascii_digits(v.strip()) for v in value.split(",")):
            raise DmlLowerError(f"--dim {text!r}: --dim fixes one size; {several.format(name=name, sizes=value)}")
        if not name or not ascii_digits(value):
            raise DmlLowerError(f"--dim {text!r}: expected NAME=SIZE with a non-negative integer size")
        if name in dims and dims[name] != int(value):
            raise DmlLowerError(f"--dim {name}: given two sizes, {dims[name]} and {int(value)}: "
                                "give each dimension one size")
        dims[name] = int(value)
    return dims


# -- feeds ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Feeds:
    """How a command's feeds are made: the --inputs file, a data loader script, or seeded random
    feeds shaped by --dim / --val-range / --zero-fraction (cli/feeds.py draws them)."""
    inputs: "str | None" = None
    script: "str | None" = None
    seed: int = 0
    iterations: int = 1
    dims: "dict[str, int]" = field(default_factory=dict)
    val_range: "list[str]" = field(default_factory=list)
    zero_fraction: "list[str]" = field(default_factory=list)
    feed_initializers: bool = False
    names_where_present: bool = False
    memory_limit: "str | None" = None
    strict: bool = False

    @property
    def random(self) -> bool:
        """No --inputs file and no data loader script: seeded random feeds, shaped by --dim."""
        return not (self.inputs or self.script)

    @property
    def one_set(self) -> bool:
        """Exactly one feed set, known before any is drawn (a script's number is its own)."""
        return not self.script and (bool(self.inputs) or self.iterations == 1)


INPUTS_HELP = {
    "feeds": ".npz of feeds keyed by graph input name (default: random)",
    "optimize": "with --check: run both models on these feeds (.npz keyed by graph input name) "
                "instead of random ones",
}


# --memory-limit SIZE: the one bound of every command that runs a model (the runtime's errors say
# "raise --memory-limit"); the help says what the command runs.
MEMORY_LIMIT_DEFAULT = ("(default: three quarters of the memory this process can have: the least of physical "
                        "memory, its cgroup's limit and what ulimit -v / -d leave)")
MEMORY_LIMIT_HELP = {
    "feeds": "refuse a run whose buffers would exceed SIZE, e.g. 512MiB, 2GB ",
    "optimize": "with --check: refuse feeds (random or --inputs) that would exceed SIZE, e.g. 512MiB, 2GB ",
    "compile": "with --dim: refuse a run whose buffers would exceed SIZE, e.g. 512MiB, 2GB ",
    "conformance": "refuse test data or a run whose buffers would exceed SIZE, e.g. 512MiB, 2GB ",
}


class FeedArgs(ArgGroup[Feeds]):
    """The feed options of run / check / reduce (and --strict / --memory-limit, which bound the
    run they feed); --iterations where the command takes several feed sets (add_iterations).
    `only` some of them, of "seed", "inputs" and "memory-limit": demo's --seed, optimize's --inputs
    and --memory-limit, compile's and conformance run's --memory-limit (`use` picks their help)."""

    def __init__(self, only: "str | tuple[str, ...]" = (), use: str = "feeds") -> None:
        self.only, self.use = ((only,) if only else ()) if isinstance(only, str) else tuple(only), use

    def add(self, parser: argparse.ArgumentParser) -> None:
        if self.only:
            places = {"seed": self.add_seed, "inputs": lambda p: self.add_inputs(p, self.use),
                      "memory-limit": lambda p: self.add_memory_limit(p, self.use)}
            for part in self.only:
                places[part](parser)
            return
        self.add_inputs(parser, self.use)
        self.add_seed(parser)
        DimArgs().add(parser)
        # a zoo's per-model checks: a --dim, --val-range NAME: or --zero-fraction NAME: applies to
        # the models that have that dimension or input (the zoo names the ones no model had)
        self._add(parser, "--names-where-present", action="store_true", help=argparse.SUPPRESS)
        self._add(parser, "--strict", action="store_true",
                  help="poison undefined memory in the emulator, so anything that reads it shows")
        self._add(parser, "--zero-fraction", action="append", metavar="[NAME:]F",
                  help="share of random feed elements that are zero (0: full, 1: empty; default: 0.5, "
                       "and 0 for an input given a --val-range); NAME:F for one input (repeatable; "
                       "wins over the global F)")
        self._add(parser, "--val-range", action="append", metavar="[NAME:]LO,HI",
                  help="random feed values in [LO, HI] (floats uniform, integers inclusive; [LO,HI] too); "
                       "NAME:LO,HI for one input (repeatable; wins over the global LO,HI). Default: floats "
                       "standard normal with one -0.0, integers in [-100, 100], half of them zero, "
                       "booleans half true")
        self._add(parser, "--data-loader-script", metavar="FILE.py[:FUNC]",
                  help="feed sets from FUNC (default: load_data) of a Python script, which returns "
                       "or yields dicts of input name to array; each dict is one iteration")
        self._add(parser, "--feed-initializers", action="store_true",
                  help="draw random feeds for initializers that are also graph inputs too "
                       "(default: their stored value is used and the output says so)")
        self.add_memory_limit(parser)

    def add_memory_limit(self, parser: argparse.ArgumentParser, use: str = "feeds") -> None:
        self._add(parser, "--memory-limit", metavar="SIZE", help=MEMORY_LIMIT_HELP[use] + MEMORY_LIMIT_DEFAULT)

    def add_inputs(self, parser: argparse.ArgumentParser, use: str = "feeds") -> None:
        self._add(parser, "--inputs", metavar="F.npz", help=INPUTS_HELP[use])

    def add_seed(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--seed", type=whole_number, default=0, metavar="N", help="seed for random feeds")

    def add_iterations(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--iterations", type=whole_number, default=1, metavar="N",
                  help="check N seeded random feed sets (seeds SEED .. SEED+N-1)")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Feeds:
        """The feed options, their combinations checked: one error line for a pair that does not
        combine or a value out of range."""
        if vars(args).get("seed", 0) < 0:          # every command taking it (demo's too), whatever it feeds
            raise DmlLowerError(f"--seed {args.seed}: the seed must be a non-negative integer")
        if self.only:
            given = {part.replace("-", "_"): vars(args)[part.replace("-", "_")] for part in self.only}
            if given.get("memory_limit") is not None:       # a bad size is one line before any work
                from onnx_dml_lowering.runtime.memory import parse_size
                parse_size(given["memory_limit"])
            return Feeds(**given)
        iterations = vars(args).get("iterations", 1)
        if iterations < 1:
            raise DmlLowerError(f"--iterations {iterations}: must be at least 1")
        if args.data_loader_script:
            if args.inputs:
                raise DmlLowerError("--data-loader-script gives the feeds: it does not combine with --inputs")
            if iterations > 1:
                raise DmlLowerError("--data-loader-script gives the feed sets (one iteration each): "
                                    "it does not combine with --iterations")
            for option, value in (("--dim", args.dim), ("--val-range", args.val_range),
                                  ("--zero-fraction", args.zero_fraction)):
                if value:
                    raise DmlLowerError(f"{option} shapes random feeds: it does not apply to --data-loader-script")
        elif args.inputs:
            if iterations > 1:
                raise DmlLowerError("--iterations draws seeded random feeds: it does not combine with --inputs")
            for option, value in (("--dim", args.dim), ("--val-range", args.val_range),
                                  ("--zero-fraction", args.zero_fraction)):
                if value:           # it was ignored: the run went on at the file's sizes and values
                    raise DmlLowerError(f"{option} shapes random feeds: it does not apply to --inputs "
                                        f"(the file gives every size and value)")
        random = not (args.inputs or args.data_loader_script)
        return Feeds(inputs=args.inputs, script=args.data_loader_script, seed=args.seed, iterations=iterations,
                     dims=DimArgs().parse(args) if random else {},
                     val_range=list(args.val_range or []), zero_fraction=list(args.zero_fraction or []),
                     feed_initializers=args.feed_initializers, names_where_present=args.names_where_present,
                     memory_limit=args.memory_limit, strict=args.strict)

    def tokens(self, feeds: Feeds) -> "list[Word]":
        return [*option_value("--inputs", feeds.inputs), *option_value("--seed", feeds.seed, 0), *dim_words(feeds.dims),
                *flag("--names-where-present", feeds.names_where_present), *flag("--strict", feeds.strict),
                *each("--zero-fraction", feeds.zero_fraction), *each("--val-range", feeds.val_range),
                *option_value("--data-loader-script", feeds.script), *flag("--feed-initializers", feeds.feed_initializers),
                *option_value("--memory-limit", feeds.memory_limit), *option_value("--iterations", feeds.iterations, 1)]


# -- backends ---------------------------------------------------------------------------------------

BACKENDS_HELP = {
    "run": "comma-separated: cpu (lowered graph, DirectML operators on the numpy emulator), "
           "ort (lowered graph, each DirectML operator on onnxruntime --providers), "
           "dml (lowered graph, each DirectML operator on DirectML.dll: make directml), "
           "ort-cpu / ort-dml / ort:<ProviderName> (the model as shipped on that onnxruntime "
           "provider); --backend is the same option",
    "check": "comma-separated: cpu (lowered graph, emulator), ort (lowered graph, "
             "operators on onnxruntime), dml (lowered graph, operators on DirectML.dll: make directml), "
             "ort-cpu / ort-dml / ort:<ProviderName> (the model as shipped "
             "on that onnxruntime provider)",
    "reduce": "the one check backend that fails: cpu, ort, dml, ort-cpu, ort-dml or ort:<ProviderName>",
    "conformance": "comma-separated: cpu, ort, dml (lowered graph), ort-cpu, ort-dml, ort:<ProviderName> (each "
                   "case's model.onnx as shipped on that provider)",
}


@dataclass(frozen=True)
class Backends:
    """The backends a command runs (parsed here, where the user's text enters) and how their
    onnxruntime providers are set up."""
    names: "list[BackendName]"
    text: str = field(compare=False)     # as typed, for messages
    providers: "list[str] | None" = None
    provider_options: "list[str] | None" = None
    ep_libraries: "list[str] | None" = None
    no_fallback: bool = False
    provider_model: str = "shipped"
    fail_on_partial: bool = False
    strict: bool = False
    memory_limit: "str | None" = None

    def options(self, settings: "SessionSettings | None" = None,
                loaded: "LoadedOutputs | None" = None) -> BackendOptions:
        """The runtime's BackendOptions; a provider option given with no provider backend is a
        usage error naming the option and --backends."""
        from onnx_dml_lowering.runtime.backends import BackendOptions
        if not any(b.is_provider for b in self.names):
            for option, given in (("--provider-option", self.provider_options), ("--ep-library", self.ep_libraries)):
                if given:
                    raise DmlLowerError(f"{option} {given[0]}: no requested backend uses it (it applies to "
                                        f"ort-cpu, ort-dml, ort:<ProviderName>; --backends {','.join(n.text for n in self.names)})")
        return BackendOptions(providers=self.providers, provider_options=self.provider_options,
                              ep_libraries=self.ep_libraries, no_fallback=self.no_fallback,
                              provider_model=self.provider_model, settings=settings,
                              strict=self.strict or None, memory_limit=self.memory_limit, loaded=loaded)


class BackendArgs(ArgGroup[Backends]):
    """--backends (`use`: the command, for its help; reduce's is required and takes one backend),
    run's --providers; the provider options and --fail-on-partial, added where each command lists
    them."""

    def __init__(self, use: str) -> None:
        self.use = use

    def add(self, parser: argparse.ArgumentParser) -> None:
        names = ("--backends", "--backend") if self.use == "run" else ("--backends",)
        how = {"required": True, "metavar": "B"} if self.use == "reduce" else {"default": "cpu", "metavar": "B[,B...]"}
        self._add(parser, *names, dest="backends", help=BACKENDS_HELP[self.use], **how)
        if self.use == "run":
            self._add(parser, "--providers", metavar="P[,P...]",
                      help="onnxruntime execution providers of the ort backend: cpu, dml (or full names), "
                           "comma-separated (default: cpu)")

    def add_provider_options(self, parser: argparse.ArgumentParser) -> None:
        """The options of backends that run the original model on an onnxruntime provider."""
        self._add(parser, "--provider-option", action="append", metavar="NAME=VALUE",
                  help="an option for the ort-*/ort:<Name> backends' provider (repeatable), e.g. device_type=CPU")
        self._add(parser, "--ep-library", action="append", metavar="NAME=PATH",
                  help="register a plugin execution provider library (onnxruntime >= 1.22; repeatable)")
        self._add(parser, "--no-fallback", action="store_true",
                  help="set session.disable_cpu_ep_fallback: a node the provider cannot take is an error")
        self._add(parser, "--provider-model", choices=("shipped", "modified"), default="shipped",
                  help="what the ort-*/ort:<Name> backends run: shipped (default: the model file as given, "
                       "external data included) or modified (our checked, shape-inferred copy: a node the "
                       "provider has no kernel for is cut out and its value computed by ONNX semantics, "
                       "--outputs' intermediates are outputs; the result is PARTIAL when a node was cut)")

    def add_fail_on_partial(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--fail-on-partial", action="store_true",
                  help="a PARTIAL backend (a node cut out or run by another provider, an output not "
                       "compared) fails the command (exit 1)")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Backends:
        """The backends and their provider options; --strict / --memory-limit are the feed group's
        (the run they bound), read from its value where the command takes it."""
        from onnx_dml_lowering.runtime.backend_names import Lowering
        names = parse_backend_names(args.backends, self.use)
        given = vars(args)              # --providers and --fail-on-partial: the commands that take them
        providers = [p.strip() for p in given["providers"].split(",")] if given.get("providers") else None
        if providers and not any(n.lowering is Lowering.STAND_INS for n in names):
            raise DmlLowerError("--providers applies to the ort backend only (--backends ort)")
        if any(n.lowering is Lowering.DIRECTML or n.from_dml_ep for n in names):
            # its Wine setting, read when a host starts, is the user's: a usage error now, not a backend ERROR
            from onnx_dml_lowering.runtime.directml.wine import persist_seconds
            persist_seconds()
        feeds = parsed.get(FeedArgs) if parsed is not None else None
        return Backends(names=names, text=args.backends, providers=providers,
                        provider_options=args.provider_option, ep_libraries=args.ep_library,
                        no_fallback=args.no_fallback, provider_model=args.provider_model,
                        fail_on_partial=given.get("fail_on_partial", False),
                        strict=feeds.strict if feeds else False, memory_limit=feeds.memory_limit if feeds else None)

    def tokens(self, backends: Backends) -> "list[Word]":
        """Its own options only (--strict / --memory-limit are the feed group's words)."""
        return [*option_value("--backends", ",".join(n.text for n in backends.names), None if self.use == "reduce" else "cpu"),
                *option_value("--providers", ",".join(backends.providers) if backends.providers else None),
                *each("--provider-option", backends.provider_options), *each("--ep-library", backends.ep_libraries),
                *flag("--no-fallback", backends.no_fallback),
                *option_value("--provider-model", backends.provider_model, "shipped"),
                *flag("--fail-on-partial", backends.fail_on_partial)]


def parse_backend_names(text: str, use: str = "check") -> "list[BackendName]":
    """The one reader of --backends: the names, in order (reduce: exactly one), parsed once here
    where the user's text enters (runtime.backend_names)."""
    from onnx_dml_lowering.runtime.backend_names import parse_backend
    parts = [b.strip() for b in text.split(",")]
    if len(parts) > 1 and not all(parts):     # 'cpu,,dml', 'cpu,': a name left out, not nothing
        raise DmlLowerError(f"--backends {text!r}: an empty name between its commas")
    names = [p for p in parts if p]
    if not names:       # conformance run went on with nothing to run and exit 0
        from onnx_dml_lowering.runtime.backend_names import CHOICES
        raise DmlLowerError(f"--backends {text!r}: no backend named; choose from {CHOICES}")
    if use == "reduce" and len(names) != 1:
        raise DmlLowerError(f"--backends {text!r}: reduce takes exactly one backend")
    parsed = [parse_backend(name) for name in names]
    twice = next((n for i, n in enumerate(parsed) if n.text in {m.text for m in parsed[:i]}), None)
    if twice is not None:       # its report and its outputs would be shown (and saved) twice under one name
        raise DmlLowerError(f"--backends {text!r} names {twice.text!r} twice: give each backend once")
    return parsed


# -- onnxruntime sessions ---------------------------------------------------------------------------

def parse_session_settings(config: "list[str] | None" = None, optimization_level: "str | None" = None,
                           threads: "str | int | None" = None) -> "SessionSettings":
    """--session-config KEY=VALUE..., --graph-optimization-level, --threads -> SessionSettings
    (validated against onnxruntime), or one line naming the option and its bad value."""
    from onnx_dml_lowering.runtime.ort.sessions import validate_settings
    from onnx_dml_lowering.runtime.ort.settings import GRAPH_OPTIMIZATION_LEVELS, SessionSettingRejected, SessionSettings
    pairs = []
    for pair in config or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DmlLowerError(f"--session-config {pair!r} is not KEY=VALUE")
        pairs.append((key.strip(), value.strip()))
    level = None
    if optimization_level is not None:
        level = optimization_level.strip().lower()
        if level not in GRAPH_OPTIMIZATION_LEVELS:
            raise DmlLowerError(f"--graph-optimization-level {optimization_level!r} is unknown; choose from "
                                f"{', '.join(GRAPH_OPTIMIZATION_LEVELS)}")
    settings = SessionSettings(tuple(pairs), level, _thread_count(threads))
    _refuse_unread_keys(settings)
    try:
        return settings if settings.empty else validate_settings(settings)
    except SessionSettingRejected as exc:
        what = f"--session-config {exc.key}={exc.value}" if exc.key else "the session options"
        reason = exc.reason
        if exc.key == "session.disable_cpu_ep_fallback":      # every command has CPU sessions too
            reason += " (for the provider under test, --no-fallback sets it on its sessions alone)"
        raise DmlLowerError(f"onnxruntime rejects {what}: {reason}") from None


def _refuse_unread_keys(settings: "SessionSettings") -> None:
    """A config key the installed onnxruntime never reads would be ignored without a word: one line
    instead (one naming a file onnxruntime writes itself never gets here: SessionSettings refuses it).
    Keys of three parts or more under 'ep.' are an execution provider's own (a plugin library's,
    read where this process cannot look): those are passed on unchecked."""
    from onnx_dml_lowering.ir.display import display
    from onnx_dml_lowering.runtime.ort.config_keys import reads_key
    for key, value in settings.config:          # a key naming a file onnxruntime writes: SessionSettings refused it
        if (key.startswith("ep.") and key.count(".") >= 2) or reads_key(key) is not False:
            continue
        import onnxruntime
        raise DmlLowerError(f"--session-config {display(key)}={display(value)}: onnxruntime {onnxruntime.__version__} "
                            "reads no config key of that name and would ignore the entry without a word; check its "
                            "spelling (onnxruntime_session_options_config_keys.h lists the keys)")


def _thread_count(threads: "str | int | None") -> "int | None":
    if threads is None:
        return None
    count = int(str(threads)) if ascii_digits(str(threads)) else -1     # as every whole-number option
    if count < 0:
        raise DmlLowerError(f"--threads {threads!r} is not a non-negative integer (0: onnxruntime's default)")
    if count > MAX_THREADS:         # onnxruntime makes each one when a session is created
        raise DmlLowerError(f"--threads {threads!r}: at most {MAX_THREADS:,} intra-op threads (onnxruntime starts "
                            f"each one with every session; this machine has {os.cpu_count() or 1} CPUs)")
    return count


MAX_THREADS = 1024


class SessionArgs(ArgGroup["SessionSettings | None"]):
    """Settings of every onnxruntime session the command creates (as onnx_test_runner -C)."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--session-config", action="append", metavar="KEY=VALUE",
                  help="an onnxruntime session config entry for every session (repeatable), "
                       "e.g. session.intra_op.allow_spinning=0")
        self._add(parser, "--graph-optimization-level", metavar="LEVEL",
                  help="onnxruntime graph optimizations of every session: disable, basic, extended or all "
                       "(default: onnxruntime's, all)")
        self._add(parser, "--threads", metavar="N",
                  help="intra-op threads of every onnxruntime session (0: onnxruntime's default; "
                       "wins over the one thread small region sessions get)")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> "SessionSettings | None":
        """The SessionSettings, or None when none was given; a bad one is one error line."""
        settings = parse_session_settings(args.session_config, args.graph_optimization_level, args.threads)
        return None if settings.empty else settings

    def tokens(self, settings: "SessionSettings | None") -> "list[Word]":
        if settings is None:
            return []
        return [*each("--session-config", (f"{key}={entry}" for key, entry in settings.config)),
                *option_value("--graph-optimization-level", settings.optimization_level),
                *option_value("--threads", settings.threads)]


# -- the comparison ---------------------------------------------------------------------------------

class OracleArgs(ArgGroup["OracleName"]):
    """--oracle of check and reduce (runtime.oracle.parse_oracle reads it)."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--oracle", default="hybrid", metavar="ORACLE",
                  help="hybrid (ONNX semantics for NonZero / EyeLike / Trilu / idiom nodes: numpy ONNX definitions, "
                       "onnx.reference where they stop; onnxruntime CPU for the rest), reference (whole model on "
                       "onnx.reference), ort-cpu, or FILE.npz of golden outputs")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> OracleName:
        from onnx_dml_lowering.runtime.oracle_names import parse_oracle
        return parse_oracle(str(args.oracle))

    def tokens(self, oracle: OracleName) -> "list[Word]":
        return option_value("--oracle", oracle.text, "hybrid")


class ToleranceArgs(ArgGroup["Tolerances"]):
    """--atol / --rtol of check and reduce (runtime.tolerances.Tolerances.parse reads them)."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--atol", action="append", metavar="[OUTPUT=]A",
                  help="absolute tolerance for floats, global or per output (repeatable; default: 1e-5)")
        self._add(parser, "--rtol", action="append", metavar="[OUTPUT=]R",
                  help="relative tolerance for floats, global or per output (repeatable; default: 1e-5)")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Tolerances:
        from onnx_dml_lowering.runtime.tolerances import Tolerances
        return Tolerances.parse(args.atol, args.rtol)

    def tokens(self, tolerances: Tolerances) -> "list[Word]":
        """The global values where not the defaults, then one per output (repr: exact floats)."""
        from onnx_dml_lowering.runtime.tolerances import DEFAULT_ATOL
        words = {"--atol": option_value("--atol", _number(tolerances.atol), _number(DEFAULT_ATOL)),
                 "--rtol": option_value("--rtol", _number(tolerances.rtol))}
        for name, pair in tolerances.per_output.items():
            for option, tolerance in zip(("--atol", "--rtol"), pair):
                words[option] += option_value(option, None if tolerance is None else f"{name}={_number(tolerance)}")
        return words["--atol"] + words["--rtol"]


def _number(value: "float | None") -> "str | None":
    return None if value is None else repr(float(value))


class OrtVersionArgs(ArgGroup["str | None"]):
    """--ort-version: the onnxruntime whose DML EP registration table a prediction models, declared
    here once for every command that predicts the DML EP (inspect --ep dml, optimize --for dml,
    conformance export); each command's own group adds it (`add`, `with_` its precondition) and
    reads it, and registry.choose_table resolves it."""

    def __init__(self, what: str, with_: str = "") -> None:
        self.what, self.with_ = what, with_

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--ort-version", metavar="V",
                  help=f"{self.with_ + ': ' if self.with_ else ''}the onnxruntime whose DML EP registration table "
                       f"{self.what} model: 1.24.4 (measured) or 1.27.0 (default: the installed DML EP's where "
                       "its table is held, else 1.27.0)")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> "str | None":
        return args.ort_version

    def tokens(self, version: "str | None") -> "list[Word]":
        return option_value("--ort-version", version)
