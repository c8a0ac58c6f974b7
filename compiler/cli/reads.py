"""The files a command line reads, as check_outputs takes them (what, path): the model (or a zoo's
files), the --inputs file, the data loader script, a golden --oracle file, the --load-outputs file,
the --ep-library libraries, and what the caller adds. Every command that writes asks here, so an
output naming any of them is refused before any work, whichever command it is (reduce wrote its
minimal model before refusing its inputs over the --inputs file; check printed its verdict before
refusing a report over an --ep-library). The model's external data is found by check_outputs
(output_files.MODEL_FILE), where an output could be one of its files."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..output_files import MODEL_FILE

if TYPE_CHECKING:
    from .command import Parsed


def files_read(parsed: Parsed, *more: "tuple[str, str | None]", model: bool = True
               ) -> "list[tuple[str, str | None]]":
    """(what, path) for each file the command line names to read (None where not given); `model`
    False leaves the model out (optimize -o IN.onnx rewrites it in place, on purpose, its external
    data too)."""
    from onnx_dml_lowering.runtime.oracle_names import OracleKind

    from ..loader_spec import parse_spec
    from .groups import FeedArgs, ModelArgs, OracleArgs
    reads: "list[tuple[str, str | None]]" = []
    given = parsed.get(ModelArgs) if model else None
    if given is not None:
        paths: "Sequence[str]" = given.paths or (given.path,)
        reads += [(MODEL_FILE, path) for path in paths]
    feeds = parsed.get(FeedArgs)
    if feeds is not None:
        reads.append(("inputs file", feeds.inputs))
        if feeds.script:
            reads.append(("data loader script", str(parse_spec(feeds.script)[0])))
    oracle = parsed.get(OracleArgs)
    if oracle is not None and oracle.kind is OracleKind.GOLDEN:
        reads.append(("oracle file", oracle.path))
    # as typed (the groups that parse them check more than a path): check's --load-outputs, the
    # --ep-library NAME=PATH of every command with provider backends
    given_args = vars(parsed.args)
    reads.append(("saved outputs file", given_args.get("load_outputs")))
    for spec in given_args.get("ep_library") or []:
        name, _, path = str(spec).partition("=")
        reads.append((f"--ep-library {name.strip()} library file", path.strip() or None))
    return reads + list(more)
