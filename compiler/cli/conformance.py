"""dml-lower conformance export / run: the onnx_test_runner suite for DirectML."""
from __future__ import annotations

import os

from .cli_options import Parser, backend_options, partial_flag, provider_flags, session_flags, session_settings

def add_conformance_parser(sub) -> None:
    """The conformance subcommand and its export / run actions."""
    p = sub.add_parser("conformance", help="export the NonZero / EyeLike grids as an onnx_test_runner "
                                          "suite, or run such a suite here")
    conformance = p.add_subparsers(dest="action", required=True, parser_class=Parser)
    q = conformance.add_parser("export", help="write the suite (cases, README.txt, manifest.json) to DIR")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("--feature-level", default="5_1", metavar="L", help="the level the manifest's placement is for")
    q.add_argument("--seeds", type=int, default=2, metavar="N", help="test data sets per case")
    q = conformance.add_parser("run", help="run every case of DIR on each backend")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("--backends", default="cpu", metavar="B[,B...]",
                   help="comma-separated: cpu, ort (lowered graph), ort-cpu, ort-dml, ort:<ProviderName> (each "
                        "case's model.onnx as shipped on that provider)")
    q.add_argument("--filter", metavar="GLOB",
                   help="only the cases whose folder name matches GLOB (fnmatch), e.g. 'test_nonzero_int64*'")
    provider_flags(q)
    partial_flag(q)
    session_flags(q)
    p.set_defaults(func=cmd_conformance)


def cmd_conformance(args) -> int:
    from . import conformance
    if args.action == "export":
        manifest = conformance.export(args.dir, args.feature_level, args.seeds)
        print(f"wrote {len(manifest['cases'])} cases to {args.dir} (feature level {manifest['feature_level']}, "
              f"{manifest['seeds']} data sets each); see {os.path.join(args.dir, 'README.txt')}")
        for provider, entry in manifest["providers"].items():
            statuses = [c["status"] for c in entry["cases"].values()]
            print(f"  {provider}: {statuses.count('deviation')} deviations, "
                  f"{statuses.count('unsupported')} unsupported listed in {conformance.MANIFEST}")
        return 0
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    options = backend_options(args, backends, session_settings(args))
    results = conformance.run(args.dir, backends, options, pattern=args.filter)
    for line in conformance.format_results(results):
        print(line)
    failing = ("fail", "partial") if args.fail_on_partial else ("fail",)
    return 1 if any(by_status[s] for by_status in results.values() for s in failing) else 0
