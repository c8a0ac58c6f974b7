"""dml-lower run: the model on one or more backends, its outputs printed (and saved)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display

from .cli_feeds import feed_sets
from .cli_options import (check_outputs, model_options, provider_flags, save_npz_file, session_flags,
                          session_settings, write_json)

if TYPE_CHECKING:
    import numpy as np

def add_run_parser(sub) -> None:
    """The run subcommand."""
    p = sub.add_parser("run", help="run the model on one or more backends and print its outputs")
    model_options(p)
    p.add_argument("--backends", "--backend", dest="backends", default="cpu", metavar="B[,B...]",
                   help="comma-separated: cpu (lowered graph, DirectML operators on the numpy emulator), "
                        "ort (lowered graph, each DirectML operator on onnxruntime --providers), "
                        "ort-cpu / ort-dml / ort:<ProviderName> (the original model on that onnxruntime "
                        "provider); --backend is the same option")
    p.add_argument("--providers", metavar="P[,P...]",
                   help="onnxruntime execution providers of the ort backend: cpu, dml (or full names), "
                        "comma-separated (default: cpu)")
    provider_flags(p)
    session_flags(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print one line per backend: its outputs' dtypes and shapes")
    p.add_argument("--save-inputs", metavar="F.npz", help="write the feeds used to this .npz (replay with --inputs)")
    p.add_argument("--save-outputs", metavar="F.npz", help="write the outputs to this .npz (of the first feed set; one backend)")
    p.add_argument("--json", metavar="F.json",
                   help="write per backend its outputs (dtype, shape, first values), the feeds and the "
                        "initializer defaults used")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    check_outputs(*((option, getattr(args, option[2:].replace("-", "_")))
                    for option in ("--save-outputs", "--save-inputs", "--json")))
    from onnx_dml_lowering.runtime.feeds import with_defaults
    from onnx_dml_lowering.runtime.report import defaults_line

    from .compiled import compile_model
    from .run_backends import RunBackends, run_record
    settings = session_settings(args)
    compiled = compile_model(args.model, feature_level=args.feature_level)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    providers = [p.strip() for p in args.providers.split(",")] if args.providers else None
    if providers and "ort" not in backends:
        raise DmlLowerError("--providers applies to the ort backend only (--backends ort)")
    if args.save_outputs and len(backends) > 1:
        raise DmlLowerError(f"--save-outputs saves one backend's outputs: give one backend, not {args.backends!r}")
    runner = RunBackends(compiled, backends, providers, args.provider_option, args.ep_library, args.no_fallback,
                         strict=args.strict or None, memory_limit=args.memory_limit,
                         session_settings=settings)
    for backend, why in runner.unavailable.items():
        print(f"{backend}: UNAVAILABLE: {why}")
    first = first_feeds = None
    records = []
    for index, feeds in enumerate(feed_sets(compiled, args)):
        which = f" (iteration #{index} of {args.data_loader_script})" if args.data_loader_script else ""
        _, unfed = with_defaults(feeds, compiled.optional_inputs, compiled.initializers)
        defaults = {name: compiled.initializers[name] for name in unfed}
        if first_feeds is None:
            first_feeds = feeds
            if args.save_inputs:
                save_npz_file(args.save_inputs, feeds, "the inputs")
        for backend in runner.backends:
            done = runner.run(backend, feeds)
            if first is None:
                first = done.outputs
            records.append(dict(run_record(done, feeds, defaults), **({"iteration": index} if which else {})))
            if args.quiet:
                print(_quiet_line(done, which))
                continue
            print(f"ran {display(args.model)} on backend {backend} (feature level {compiled.feature_level}){which}")
            if defaults:
                print(defaults_line(defaults))
            for note in done.notes:
                print(note)
            for name in compiled.output_names:
                if name in done.outputs:
                    print(_summary(name, done.outputs[name]) + (f"  [not run on the provider: {done.not_run[name]}]"
                                                                 if name in done.not_run else ""))
                elif name in done.not_run:
                    print(f"  {display(name)}: not run ({display(done.not_run[name])})")
    if args.save_inputs:
        print(f"wrote {args.save_inputs}")
    if args.save_outputs:
        from onnx_dml_lowering.runtime.feeds import check_feeds
        from onnx_dml_lowering.runtime.saved_outputs import metadata, saved_file
        meta = metadata(check_feeds(compiled.inputs, first_feeds, compiled.optional_inputs), f"run:{backends[0]}")
        save_npz_file(args.save_outputs, saved_file((lambda key: f"the model's output {key!r}", first),
                                                    (lambda key: f"the file's own {key!r} entry", meta)), "the outputs")
        print(f"wrote {args.save_outputs}")
    if args.json:
        data = {"model": str(args.model), "feature_level": str(compiled.feature_level), "backends": records,
                "unavailable": dict(runner.unavailable)}
        write_json(args.json, "the run JSON", data)
        print(f"wrote {args.json}")
    return 0


def _summary(name: str, value: np.ndarray) -> str:
    import numpy as np
    flat = value.reshape(-1)
    preview = np.array2string(flat[:8], separator=", ", threshold=8)
    more = " ..." if flat.size > 8 else ""
    return f"  {display(name)}: {value.dtype} {list(value.shape)} {preview}{more}"


def _quiet_line(done, which: str) -> str:
    """run -q: one line per backend (and feed set)."""
    shapes = ", ".join(f"{display(name)} {value.dtype} {list(value.shape)}" for name, value in done.outputs.items())
    not_run = f"; not run: {', '.join(done.not_run)}" if done.not_run else ""
    semantics = (f"; no kernel, computed by ONNX semantics: {', '.join(done.by_semantics)}"
                 if done.by_semantics else "")
    return f"{done.backend}{which}: {len(done.outputs)} output(s): {shapes or 'none'}{not_run}{semantics}"
