"""dml-lower run: the model on one or more backends, its outputs printed (and saved)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display

from ..output_files import check_outputs, save_npz_file, write_json
from .feeds import describe_feeds, feed_sets
from .groups import BackendArgs, FeedArgs, ModelArgs, SessionArgs

if TYPE_CHECKING:
    import numpy as np

MODEL, FEEDS, BACKENDS, SESSION = ModelArgs(), FeedArgs(), BackendArgs("run"), SessionArgs()


def add_run_parser(sub) -> None:
    """The run subcommand."""
    p = sub.add_parser("run", help="run the model on one or more backends and print its outputs")
    MODEL.add(p)
    FEEDS.add(p)
    BACKENDS.add(p)
    BACKENDS.add_provider_options(p)
    BACKENDS.add_fail_on_partial(p)
    SESSION.add(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print one line per backend: its outputs' dtypes and shapes")
    p.add_argument("--save-inputs", metavar="F.npz",
                   help="write the feeds used to this .npz (replay with --inputs); several sets: F.npz, F.1.npz, ...")
    p.add_argument("--save-outputs", metavar="F.npz",
                   help="write the outputs to this .npz (one backend); several feed sets: F.npz, F.1.npz, ...")
    p.add_argument("--json", metavar="F.json",
                   help="write per backend its outputs (dtype, shape, first values), the feeds and the "
                        "initializer defaults used")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    check_outputs(*((option, getattr(args, option[2:].replace("-", "_")))
                    for option in ("--save-outputs", "--save-inputs", "--json")))
    from onnx_dml_lowering.runtime.feeds import check_feeds, dimension_notes, with_defaults
    from onnx_dml_lowering.runtime.report import defaults_line, feeds_line
    from onnx_dml_lowering.runtime.saved_outputs import metadata, saved_file, set_path, wrote_line

    from ..compiled import compile_model
    from ..run_backends import RunBackends, run_record
    feed_options = FEEDS.parse(args)
    settings = SESSION.parse(args)
    model = MODEL.parse(args)
    compiled = compile_model(model.path, feature_level=model.feature_level)
    backends = BACKENDS.parse(args)
    if args.save_outputs and len(backends.names) > 1:
        raise DmlLowerError(f"--save-outputs saves one backend's outputs: give one backend, not {backends.text!r}")
    runner = RunBackends(compiled, backends.names, backends.options(settings))
    for unavailable, why in runner.unavailable.items():
        print(f"{unavailable}: UNAVAILABLE: {why}")
    failed = False
    first_feeds = None
    described: dict = {}
    sets = 0
    records = []
    for index, feeds in enumerate(feed_sets(compiled, feed_options)):
        which = f" (iteration #{index} of {feed_options.script})" if feed_options.script else ""
        _, unfed = with_defaults(feeds, compiled.optional_inputs, compiled.initializers)
        defaults = {name: compiled.initializers[name] for name in unfed}
        if first_feeds is None:
            first_feeds, described = feeds, describe_feeds(feed_options, feeds)
        if args.save_inputs:        # every set, one file each (saved_outputs.set_path)
            save_npz_file(set_path(args.save_inputs, index), feeds, "the inputs")
        sets = index + 1
        if not args.quiet:
            print(feeds_line(described if index == 0 else describe_feeds(feed_options, feeds))
                  + (f" (iteration #{index})" if which else ""))
        for backend in runner.backends:
            done = runner.run(backend, feeds)
            failed |= done.status == "error" or (done.status == "partial" and backends.fail_on_partial)
            if args.save_outputs and not done.error:
                meta = metadata(check_feeds(compiled.inputs, feeds, compiled.optional_inputs), f"run:{backend}")
                save_npz_file(set_path(args.save_outputs, index),
                              saved_file((lambda key: f"the model's output {key!r}", done.outputs),
                                         (lambda key: f"the file's own {key!r} entry", meta)), "the outputs")
            records.append(dict(run_record(done, feeds, defaults), **({"iteration": index} if which else {})))
            if args.quiet:
                print(_quiet_line(done, which))
                continue
            if done.error:
                print(f"{backend}{which}: ERROR {display(done.error)}")
                continue
            print(f"ran {display(args.model)} on backend {backend} (feature level {compiled.feature_level}){which}")
            if done.ran:
                print(f"ran {display(done.ran)}")
            if defaults:
                print(defaults_line(defaults))
            for note in [*dimension_notes(compiled.inputs + compiled.optional_inputs, feeds), *done.notes]:
                print(display(note))
            if done.status == "partial":
                print(f"PARTIAL: {done.partial_text()}")
            for name in compiled.output_names:
                if name in done.outputs:
                    print(_summary(name, done.outputs[name]) + (f"  [not computed by the backend: "
                                                                 f"{done.unvalidated[name]}]"
                                                                 if name in done.unvalidated else ""))
                elif name in done.not_run:
                    print(f"  {display(name)}: not run ({display(done.not_run[name])})")
    if args.save_inputs:
        print(wrote_line(args.save_inputs, sets))
    if args.save_outputs and runner.backends:
        print(wrote_line(args.save_outputs, sets))
    if args.json:
        data = {"model": str(args.model), "feature_level": str(compiled.feature_level),
                "feeds": {**described, "iterations": sets} if "iterations" in described else described,
                "backends": records, "unavailable": dict(runner.unavailable)}
        write_json(args.json, "the run JSON", data)
        print(f"wrote {args.json}")
    return 1 if failed else 0


def _summary(name: str, value: np.ndarray) -> str:
    import numpy as np
    flat = value.reshape(-1)
    preview = np.array2string(flat[:8], separator=", ", threshold=8)
    more = " ..." if flat.size > 8 else ""
    return f"  {display(name)}: {value.dtype} {list(value.shape)} {preview}{more}"


def _quiet_line(done, which: str) -> str:
    """run -q: one line per backend (and feed set), PARTIAL and ERROR said as check -q says them."""
    if done.error:
        return f"{done.backend}{which}: ERROR {display(done.error)}"
    shapes = ", ".join(f"{display(name)} {value.dtype} {list(value.shape)}" for name, value in done.outputs.items())
    partial = f"; PARTIAL: {display(done.partial_text())}" if done.status == "partial" else ""
    return f"{done.backend}{which}: {len(done.outputs)} output(s): {shapes or 'none'}{partial}"
