"""The `dml-lower reduce` subcommand: its arguments and handler (the search is reduce.py)."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from onnx_dml_lowering.ir.display import display

from ..output_files import check_outputs, check_writable, load_npz_file
from .command import ArgGroup, Command, Parsed, Word, option_value
from .command import line as typed_line
from .feeds import first_feeds
from .reads import files_read
from .groups import BackendArgs, FeedArgs, Feeds, ModelArgs, OracleArgs, SessionArgs, ToleranceArgs
from .output_groups import OutputArgs

if TYPE_CHECKING:
    from onnx_dml_lowering.runtime.backends import BackendOptions
    from onnx_dml_lowering.runtime.backend_names import BackendName
    from onnx_dml_lowering.runtime.tolerances import Tolerances

    from ..reduce import Reduction


class StatusArgs(ArgGroup[str]):
    """--status: the failure to reproduce, upper case as typed and printed."""

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--status", default="MISMATCH", type=str.upper,
                  choices=["MISMATCH", "DEVIATION", "ERROR", "UNSUPPORTED"],
                  metavar="STATUS", help="the status to reproduce: MISMATCH, DEVIATION, ERROR (the backend fails with "
                                         "the same message, up to names and numbers) or UNSUPPORTED")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> str:
        return str(args.status)

    def tokens(self, status: str) -> "list[Word]":
        return option_value("--status", status, "MISMATCH")


class Reduce(Command):
    """Its model, feed, oracle, tolerance, provider and session options are check's groups
    (groups.py), read as check reads them."""
    name, help = "reduce", "cut a model that fails check on one backend down to a minimal sub-model (and its " \
                           "inputs .npz) that fails the same way"

    def __init__(self) -> None:
        self.backends = BackendArgs("reduce")
        # --oracle FILE.npz (golden outputs): the whole model's mismatch, from another machine
        super().__init__(ModelArgs(), FeedArgs(), OutputArgs("reduce"), self.backends, StatusArgs(), OracleArgs(),
                         ToleranceArgs(), SessionArgs())

    def layout(self) -> "list[Callable[[argparse.ArgumentParser], None]]":
        model, feeds, output, _, status, oracle, tolerances, session = self.groups
        return [model.add, feeds.add, output.add, self.backends.add, status.add, oracle.add, tolerances.add,
                self.backends.add_provider_options, session.add]

    def run(self, parsed: Parsed) -> int:
        return cmd_reduce(parsed)


def _rerun_command(parsed: Parsed, npz: Path, backend: BackendName, outputs: "list[str]") -> str:
    """The repro line: check of the minimal model and its inputs as written, with the oracle,
    session options and tolerances (per output only for an output MIN has) that apply to it."""
    from ..reduce import sub_model_oracle, sub_tolerances
    words = [Word("", ("check", parsed[OutputArgs])), *FeedArgs().tokens(Feeds(inputs=str(npz))),
             # every backend option as given (--provider-model modified, provider options): the
             # repro must run the backend as the reduction did
             *BackendArgs("reduce").tokens(dataclasses.replace(parsed[BackendArgs], names=[backend],
                                                               text=backend.text)),
             *OracleArgs().tokens(sub_model_oracle(parsed[OracleArgs])), *SessionArgs().tokens(parsed[SessionArgs]),
             *ToleranceArgs().tokens(sub_tolerances(parsed[ToleranceArgs], outputs))]
    return typed_line(words)


def cmd_reduce(parsed: Parsed) -> int:
    from ..compiled import compile_model
    from ..reduce import NothingSmaller, inputs_path, reduce_model, save_reduction
    backends = parsed[BackendArgs]
    status_text, output = parsed[StatusArgs], parsed[OutputArgs]
    backend, status = backends.names[0], status_text.lower()
    check_writable("-o", output)            # before its sibling's name is made from it
    out = Path(output)
    check_outputs(("-o", output), ("-o's inputs file", str(inputs_path(out))),     # before the work
                  reads=files_read(parsed))
    tolerances = parsed[ToleranceArgs]
    options = backends.options(parsed[SessionArgs])
    feeds = parsed[FeedArgs]
    model = parsed[ModelArgs]
    compiled = compile_model(model.path, feature_level=model.feature_level)
    try:
        whole, reduction = reduce_model(compiled, first_feeds(compiled, feeds), backend, status, tolerances, options,
                                        parsed[OracleArgs])
    except NothingSmaller as exc:
        print(f"reduce: {exc}")
        return 1
    if reduction is None:
        failed = f" (the backend failed: {display(whole.error)})" if whole.error else ""
        # a provider that cannot load the file shows no other status: its modified copy cuts those nodes out
        hint = ("; --provider-model modified runs it with the nodes it cannot load cut out, where another "
                "status shows" if whole.error and backend.is_provider and backends.provider_model == "shipped" else "")
        print(f"reduce: no {status_text} on {backend} in {display(model.path)}: nothing to reduce{failed}{hint}")
        return 1
    original = reduction.original
    print(f"reduce: {status_text} on {backend} in {display(model.path)}" + (f": {display(whole.error)}" if status == "error" else
          f" (output{'s' if len(original) > 1 else ''} {', '.join(display(o.output) for o in original)})"))
    nodes = reduction.nodes
    print(f"reduce: {reduction.nodes_before} -> {len(nodes)} node{'s' if len(nodes) > 1 else ''} "
          f"in {reduction.checks} checks: "
          + ", ".join(f"{display(n.name)} ({n.op_type})" for n in nodes))
    npz = save_reduction(reduction, out)
    graph = reduction.model.graph
    print(f"wrote {display(output)} (inputs {', '.join(display(i.name) for i in graph.input) or 'none'}; "
          f"outputs {', '.join(display(o.name) for o in graph.output)}) and "
          + (display(npz) if npz != out else "its inputs after it"))
    _recheck(parsed, reduction, (out, npz), (tolerances, options))
    return 0


def _recheck(parsed: Parsed, reduction: Reduction, written: "tuple[Path, Path]", settings: "tuple[Tolerances, BackendOptions]") -> None:
    """The files as written, checked as a user would: that is the repro (what went to a device or
    FIFO cannot be read back: then the model and feeds written). Printed as check prints it."""
    from onnx_dml_lowering.runtime.check import check
    from onnx_dml_lowering.runtime.report import format_results

    from ..compiled import compile_model
    from ..reduce import sub_model_oracle, sub_tolerances
    out, npz = written
    tolerances, options = settings
    backend, status = parsed[BackendArgs].names[0], parsed[StatusArgs]
    graph = reduction.model.graph
    kept = npz == out
    minimal = compile_model(reduction.model if kept else out, feature_level=parsed[ModelArgs].feature_level)
    outputs = [o.name for o in graph.output]
    _, report = check(minimal, reduction.feeds if kept else load_npz_file(str(npz)), [backend],
                      sub_tolerances(tolerances, outputs), options, oracle=sub_model_oracle(parsed[OracleArgs]))
    print(f"{_rerun_command(parsed, npz, backend, outputs)}:" if not kept else
          f"check of the minimal model and inputs as written to {display(parsed[OutputArgs])} (a device, FIFO or descriptor: "
          "checked from memory):")
    lines = format_results(report).splitlines()
    said = f"] {status} " if status == "ERROR" else f": {status} ("
    shown = [line for line in lines if said in line]
    print("\n".join(shown or lines))
    if not shown:
        raise RuntimeError(f"the reduced model does not reproduce the {status} on {backend}")
