"""The files a command line reads, as check_outputs takes them (what, path): the model (or a zoo's
files), the --inputs file, the data loader script, a golden --oracle file, and what the caller
adds (check's --load-outputs). Every command that writes asks here, so an output naming any of
them is refused before any work, whichever command it is (reduce wrote its minimal model before
refusing to write its inputs over the --inputs file)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from .command import Parsed


def files_read(parsed: Parsed, *more: "tuple[str, str | None]", model: bool = True
               ) -> "list[tuple[str, str | None]]":
    """(what, path) for each file the command line names to read (None where not given); `model`
    False leaves the model out (optimize -o IN.onnx rewrites it in place, on purpose)."""
    from onnx_dml_lowering.runtime.oracle_names import OracleKind

    from ..loader_spec import parse_spec
    from .groups import FeedArgs, ModelArgs, OracleArgs
    reads: "list[tuple[str, str | None]]" = []
    given = parsed.get(ModelArgs) if model else None
    if given is not None:
        paths: "Sequence[str]" = given.paths or (given.path,)
        reads += [("model file", path) for path in paths]
    feeds = parsed.get(FeedArgs)
    if feeds is not None:
        reads.append(("inputs file", feeds.inputs))
        if feeds.script:
            reads.append(("data loader script", str(parse_spec(feeds.script)[0])))
    oracle = parsed.get(OracleArgs)
    if oracle is not None and oracle.kind is OracleKind.GOLDEN:
        reads.append(("oracle file", oracle.path))
    return reads + list(more)
