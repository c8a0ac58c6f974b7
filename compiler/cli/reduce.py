"""The `dml-lower reduce` subcommand: its arguments and handler (the search is reduce.py)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display

from ..output_files import check_outputs, load_npz_file
from .feeds import first_feeds
from .groups import BackendArgs, FeedArgs, ModelArgs, OracleArgs, SessionArgs, ToleranceArgs

if TYPE_CHECKING:
    from onnx_dml_lowering.runtime.backend_names import BackendName

MODEL, FEEDS, BACKENDS = ModelArgs(), FeedArgs(), BackendArgs("reduce")
ORACLE, SESSION, TOLERANCES = OracleArgs(), SessionArgs(), ToleranceArgs()


def add_reduce_parser(sub) -> None:
    """The reduce subcommand: its model, feed, oracle, tolerance, provider and session options are
    check's groups (groups.py), read as check reads them."""
    p = sub.add_parser("reduce", help="cut a model that fails check on one backend down to a minimal "
                                      "sub-model (and its inputs .npz) that fails the same way")
    MODEL.add(p)
    FEEDS.add(p)
    p.add_argument("-o", "--output", required=True, metavar="MIN.onnx",
                   help="where to write the minimal model; its inputs go beside it (MIN.inputs.npz)")
    BACKENDS.add(p)
    p.add_argument("--status", default="MISMATCH", type=str.upper, choices=["MISMATCH", "DEVIATION", "ERROR", "UNSUPPORTED"],
                   metavar="STATUS", help="the status to reproduce: MISMATCH, DEVIATION, ERROR (the backend fails with "
                                          "the same message, up to names and numbers) or UNSUPPORTED")
    ORACLE.add(p)                         # a golden FILE.npz: the whole model's mismatch, from another machine
    TOLERANCES.add(p)
    BACKENDS.add_provider_options(p)
    SESSION.add(p)
    p.set_defaults(func=cmd_reduce)


def _rerun_command(args, npz: Path, backend: BackendName, outputs: "list[str]") -> str:
    from ..reduce import sub_model_oracle
    words = ["check", args.output, "--inputs", str(npz), "--backends", backend.text]
    from onnx_dml_lowering.runtime.oracle import OracleKind
    oracle = sub_model_oracle(ORACLE.parse(args))
    words += ["--oracle", oracle.text] if oracle.kind is not OracleKind.HYBRID else []
    words += SessionArgs.tokens(args)
    for flag in ("atol", "rtol"):
        for value in getattr(args, flag) or []:
            name, sep, _ = value.rpartition("=")
            if not sep or name in outputs:          # a per-output tolerance only for an output MIN has
                words += [f"--{flag}", value]
    return " ".join(words)


def cmd_reduce(args) -> int:
    from ..compiled import compile_model
    from ..reduce import NothingSmaller, inputs_path, reduce_model, save_reduction
    backends = BACKENDS.parse(args)
    backend, status = backends.names[0], args.status.lower()
    out = Path(args.output)
    check_outputs(("-o", args.output), ("-o's inputs file", str(inputs_path(out))))    # before the work
    if out.resolve() == Path(args.model).resolve():
        raise DmlLowerError(f"-o {args.output!r} is the model itself: write the minimal model elsewhere")
    tolerances = TOLERANCES.parse(args)
    options = backends.options(SESSION.parse(args))
    feeds = FEEDS.parse(args)
    model = MODEL.parse(args)
    compiled = compile_model(model.path, feature_level=model.feature_level)
    try:
        whole, reduction = reduce_model(compiled, first_feeds(compiled, feeds), backend, status, tolerances, options,
                                        ORACLE.parse(args))
    except NothingSmaller as exc:
        print(f"reduce: {exc}")
        return 1
    if reduction is None:
        failed = f" (the backend failed: {whole.error})" if whole.error else ""
        print(f"reduce: no {args.status} on {backend} in {args.model}: nothing to reduce{failed}")
        return 1
    original = reduction.original
    print(f"reduce: {args.status} on {backend} in {args.model}" + (f": {display(whole.error)}" if status == "error" else
          f" (output{'s' if len(original) > 1 else ''} {', '.join(display(o.output) for o in original)})"))
    nodes = reduction.nodes
    print(f"reduce: {reduction.nodes_before} -> {len(nodes)} node{'s' if len(nodes) > 1 else ''} "
          f"in {reduction.checks} checks: "
          + ", ".join(f"{display(n.name)} ({n.op_type})" for n in nodes))
    npz = save_reduction(reduction, out)
    graph = reduction.model.graph
    print(f"wrote {args.output} (inputs {', '.join(display(i.name) for i in graph.input) or 'none'}; "
          f"outputs {', '.join(display(o.name) for o in graph.output)}) and "
          + (f"{npz}" if npz != out else "its inputs after it"))
    _recheck(args, reduction, out, npz, backend, (tolerances, options), model.feature_level)
    return 0


def _recheck(args, reduction, out: Path, npz: Path, backend: BackendName, settings, feature_level) -> None:
    """The files as written, checked as a user would: that is the repro (what went to a device or
    FIFO cannot be read back: then the model and feeds written). Printed as check prints it."""
    from onnx_dml_lowering.runtime.check import check
    from onnx_dml_lowering.runtime.report import format_results

    from ..compiled import compile_model
    from ..reduce import sub_model_oracle, sub_tolerances
    tolerances, options = settings
    graph = reduction.model.graph
    kept = npz == out
    minimal = compile_model(reduction.model if kept else out, feature_level=feature_level)
    outputs = [o.name for o in graph.output]
    _, report = check(minimal, reduction.feeds if kept else load_npz_file(str(npz)), [backend],
                      sub_tolerances(tolerances, outputs), options, oracle=sub_model_oracle(ORACLE.parse(args)))
    print(f"{_rerun_command(args, npz, backend, outputs)}:" if not kept else
          f"check of the minimal model and inputs as written to {args.output} (a device, FIFO or descriptor: "
          "checked from memory):")
    lines = format_results(report).splitlines()
    said = f"] {args.status} " if args.status == "ERROR" else f": {args.status} ("
    shown = [line for line in lines if said in line]
    print("\n".join(shown or lines))
    if not shown:
        raise RuntimeError(f"the reduced model does not reproduce the {args.status} on {backend}")
