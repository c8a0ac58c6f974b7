"""What every dml-lower command shares: the argument parser class (one-line usage errors, defaults
in --help), option groups declared once (the model and feed options, the provider options), and
writing files with one-line errors."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from onnx_dml_lowering.ir import DmlLowerError


def write_file(path: str, what: str, write) -> None:
    """`write(temp)` writes the file at a temporary name beside `path`, renamed over it once whole."""
    from onnx_dml_lowering.runtime.output_file import write_output
    write_output(path, what, write)


def write_json(path: str, what: str, data) -> None:
    """A --json document, strict RFC 8259: NaN / Infinity / -Infinity are the strings "NaN",
    "Infinity", "-Infinity" (ir.display.json_safe); written atomically."""
    import json

    from onnx_dml_lowering.ir.display import json_safe
    from onnx_dml_lowering.runtime.output_file import write_text
    write_text(path, what, json.dumps(json_safe(data), indent=1, allow_nan=False))


def save_npz_file(path: str, arrays, what: str) -> None:
    from onnx_dml_lowering.runtime.npz import save_npz
    save_npz(path, arrays, what)


def load_npz_file(path: str) -> dict:
    from onnx_dml_lowering.runtime.npz import load_npz
    return load_npz(path, "inputs file")


def write_text(path: str, what: str, text: str) -> None:
    """A text report, written atomically."""
    from onnx_dml_lowering.runtime.output_file import write_text as write
    write(path, what, text)


def check_writable(option: str, path: "str | None") -> None:
    """An output file the run would fail to write is found before the run, in one line."""
    if not path:
        return
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        why = "it is a directory"
    elif folder.exists() and not folder.is_dir():
        why = f"{str(folder)!r} is a file, not a folder"
    elif not folder.is_dir():
        why = f"folder {str(folder)!r} does not exist"
    elif target.exists() and not os.access(target, os.W_OK):
        why = "the file is not writable"
    elif not target.exists() and not os.access(folder, os.W_OK | os.X_OK):
        why = f"folder {str(folder)!r} is not writable"
    else:
        return
    raise DmlLowerError(f"{option} {path!r}: cannot write there: {why}")


def check_outputs(*options: "tuple[str, str | None]") -> None:
    """Every output file of a command, (option, path) pairs, checked before any work: each one
    writable, and no two naming the same file (one would silently replace the other)."""
    seen: "dict[str, str]" = {}
    for option, path in options:
        if not path:
            continue
        check_writable(option, path)
        key = os.path.normcase(os.path.realpath(path))
        if key in seen:
            raise DmlLowerError(f"{seen[key]} and {option} both write {path!r}: give each its own file")
        seen[key] = option


class HelpFormatter(argparse.HelpFormatter):
    """Every option with a default says it, as '(default: X)', unless its help already does
    (a default that is not a plain value, 'default: random'). None and False are not defaults
    worth saying (the option is off / unset)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or any(default is off for off in (None, False, argparse.SUPPRESS))
                or not action.option_strings
                or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
            return text
        return f"{text} (default: {default})"


class Parser(argparse.ArgumentParser):
    """Usage errors are one line, `dml-lower: error: ...` exit 2, from every (sub)command, pointing
    at its --help instead of printing usage; every --help shows the defaults (HelpFormatter)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_command(self, argv: "list[str]") -> argparse.Namespace:
        """parse_args, but an option no parser knows is reported by the (sub)command it was typed
        to, so the line points at that command's --help ('dml-lower check --help'), not the top's."""
        args, extras = self.parse_known_args(argv)
        if extras:
            self._chosen(args).error(f"unrecognized arguments: {' '.join(extras)}")
        return args

    def _chosen(self, args: argparse.Namespace) -> argparse.ArgumentParser:
        """The deepest subparser `args` went through (dml-lower -> conformance -> run)."""
        parser: argparse.ArgumentParser = self
        while True:
            chooser = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            name = getattr(args, chooser.dest, None) if chooser is not None else None
            if name is None or name not in chooser.choices:
                return parser
            parser = chooser.choices[name]

    def error(self, message: str):
        from onnx_dml_lowering.ir.display import display   # the message quotes what was typed
        if message.startswith("unrecognized arguments: "):
            for token in message.split()[2:]:
                if token.partition("=")[0] in FOREIGN_OPTIONS:
                    self.exit(2, f"dml-lower: error: {FOREIGN_OPTIONS[token.partition('=')[0]]}\n")
        self.exit(2, f"dml-lower: error: {display(message)} (see '{self.prog} --help')\n")


# Options of other tools (Polygraphy) users type by habit: what to use here, in one line.
FOREIGN_OPTIONS = {
    "--input-shapes": "--input-shapes is Polygraphy's option: here each symbolic input dimension takes its size "
                      "from --dim NAME=SIZE (repeatable; e.g. --dim batch=1 --dim seq=128)",
}


def provider_flags(p) -> None:
    """The options of backends that run the original model on an onnxruntime provider."""
    p.add_argument("--provider-option", action="append", metavar="NAME=VALUE",
                   help="an option for the ort-*/ort:<Name> backends' provider (repeatable), e.g. device_type=CPU")
    p.add_argument("--ep-library", action="append", metavar="NAME=PATH",
                   help="register a plugin execution provider library (onnxruntime >= 1.22; repeatable)")
    p.add_argument("--no-fallback", action="store_true",
                   help="set session.disable_cpu_ep_fallback: a node the provider cannot take is an error")
    p.add_argument("--provider-model", choices=("shipped", "modified"), default="shipped",
                   help="what the ort-*/ort:<Name> backends run: shipped (default: the model file as given, "
                        "external data included) or modified (our checked, shape-inferred copy: a node the "
                        "provider has no kernel for is cut out and its value computed by ONNX semantics, "
                        "--outputs' intermediates are outputs; the result is PARTIAL when a node was cut)")


def partial_flag(p) -> None:
    """--fail-on-partial, for the commands that report backend statuses (run, check, conformance run)."""
    p.add_argument("--fail-on-partial", action="store_true",
                   help="a PARTIAL backend (a node cut out or run by another provider, an output not "
                        "compared) fails the command (exit 1)")


def backend_options(args, backends: "list[str]", settings=None, providers: "list[str] | None" = None, loaded=None):
    """The runtime's BackendOptions from the command's flags; a provider flag given with no
    provider backend is a usage error naming the flag and --backends."""
    from onnx_dml_lowering.runtime.backends import BackendOptions, is_provider
    if not any(is_provider(b) for b in backends):
        for option, given in (("--provider-option", args.provider_option), ("--ep-library", args.ep_library)):
            if given:
                raise DmlLowerError(f"{option} {given[0]}: no requested backend uses it (it applies to "
                                    f"ort-cpu, ort-dml, ort:<ProviderName>; --backends {','.join(backends)})")
    return BackendOptions(providers=providers, provider_options=args.provider_option, ep_libraries=args.ep_library,
                          no_fallback=args.no_fallback, provider_model=args.provider_model,
                          settings=settings,
                          strict=getattr(args, "strict", False) or None,
                          memory_limit=getattr(args, "memory_limit", None), loaded=loaded)


def session_flags(p: argparse.ArgumentParser) -> None:
    """Settings of every onnxruntime session the command creates (as onnx_test_runner -C)."""
    p.add_argument("--session-config", action="append", metavar="KEY=VALUE",
                   help="an onnxruntime session config entry for every session (repeatable), "
                        "e.g. session.intra_op.allow_spinning=0")
    p.add_argument("--graph-optimization-level", metavar="LEVEL",
                   help="onnxruntime graph optimizations of every session: disable, basic, extended or all "
                        "(default: onnxruntime's, all)")
    p.add_argument("--threads", metavar="N",
                   help="intra-op threads of every onnxruntime session (0: onnxruntime's default; "
                        "wins over the one thread small region sessions get)")


def session_settings(args):
    """The SessionSettings of --session-config / --graph-optimization-level / --threads, or None."""
    from onnx_dml_lowering.runtime.ort_providers import parse_session_settings
    settings = parse_session_settings(getattr(args, "session_config", None),
                                      getattr(args, "graph_optimization_level", None),
                                      getattr(args, "threads", None))
    return None if settings.empty else settings


def oracle_option(p: argparse.ArgumentParser) -> None:
    """--oracle of check and reduce (runtime.oracle.Oracle reads it)."""
    p.add_argument("--oracle", default="hybrid", metavar="ORACLE",
                   help="hybrid (ONNX semantics for NonZero / EyeLike / Trilu / idiom nodes: numpy ONNX definitions, "
                        "onnx.reference where they stop; onnxruntime CPU for the rest), reference (whole model on onnx.reference), "
                        "ort-cpu, or FILE.npz of golden outputs")


def tolerance_options(p: argparse.ArgumentParser) -> None:
    """--atol / --rtol of check and reduce (runtime.check.Tolerances.parse reads them)."""
    p.add_argument("--atol", action="append", metavar="[OUTPUT=]A",
                   help="absolute tolerance for floats, global or per output (repeatable; default: 1e-5)")
    p.add_argument("--rtol", action="append", metavar="[OUTPUT=]R",
                   help="relative tolerance for floats, global or per output (repeatable; default: 1e-5)")


def model_options(p: argparse.ArgumentParser, inputs: bool = True, models: bool = False) -> None:
    """The model argument and, with `inputs`, the feed options of run / check / reduce."""
    if models:
        p.add_argument("model", nargs="+", metavar="MODEL_OR_DIR",
                       help="an .onnx model; several, or a directory (every *.onnx below it), check a zoo")
    else:
        p.add_argument("model", help="path to an .onnx model")
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="on an unexpected error, print the traceback")
    p.add_argument("--feature-level", default="5_1", metavar="L", help="DirectML feature level, 1_0 .. 6_4")
    if inputs:
        p.add_argument("--inputs", metavar="F.npz", help=".npz of feeds keyed by graph input name (default: random)")
        p.add_argument("--seed", type=int, default=0, metavar="N", help="seed for random feeds")
        p.add_argument("--dim", action="append", metavar="NAME=SIZE",
                       help="size of a symbolic input dimension for random feeds (repeatable; default: 3)")
        # a zoo's per-model checks: a --dim, --val-range NAME: or --zero-fraction NAME: applies to
        # the models that have that dimension or input (the zoo names the ones no model had)
        p.add_argument("--names-where-present", action="store_true", help=argparse.SUPPRESS)
        p.add_argument("--strict", action="store_true",
                       help="poison undefined memory in the emulator, so anything that reads it shows")
        p.add_argument("--zero-fraction", action="append", metavar="[NAME:]F",
                       help="share of random feed elements that are zero (0: full, 1: empty; default: 0.5, "
                            "and 0 for an input given a --val-range); NAME:F for one input (repeatable; "
                            "wins over the global F)")
        p.add_argument("--val-range", action="append", metavar="[NAME:]LO,HI",
                       help="random feed values in [LO, HI] (floats uniform, integers inclusive; [LO,HI] too); "
                            "NAME:LO,HI for one input (repeatable; wins over the global LO,HI). Default: floats "
                            "standard normal with one -0.0, integers in [-100, 100], half of them zero, "
                            "booleans half true")
        p.add_argument("--data-loader-script", metavar="FILE.py[:FUNC]",
                       help="feed sets from FUNC (default: load_data) of a Python script, which returns "
                            "or yields dicts of input name to array; each dict is one iteration")
        p.add_argument("--feed-initializers", action="store_true",
                       help="draw random feeds for initializers that are also graph inputs too "
                            "(default: their stored value is used and the output says so)")
        p.add_argument("--memory-limit", metavar="SIZE",
                       help="refuse a run whose buffers would exceed SIZE, e.g. 512MiB, 2GB "
                            "(default: three quarters of physical memory)")
