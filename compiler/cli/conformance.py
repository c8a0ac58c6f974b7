"""dml-lower conformance export / run: the onnx_test_runner suite for DirectML."""
from __future__ import annotations

import os

from .groups import BackendArgs, FeatureLevelArgs, SessionArgs
from .options import Parser

LEVEL, BACKENDS, SESSION = FeatureLevelArgs("manifest"), BackendArgs("conformance"), SessionArgs()


def add_conformance_parser(sub) -> None:
    """The conformance subcommand and its export / run actions."""
    p = sub.add_parser("conformance", help="export the NonZero / EyeLike grids as an onnx_test_runner "
                                          "suite, or run such a suite here")
    conformance = p.add_subparsers(dest="action", required=True, parser_class=Parser)
    q = conformance.add_parser("export", help="write the suite (cases, README.txt, manifest.json) to DIR")
    q.add_argument("dir", metavar="DIR")
    LEVEL.add(q)
    q.add_argument("--seeds", type=int, default=2, metavar="N", help="test data sets per case")
    q = conformance.add_parser("run", help="run every case of DIR on each backend")
    q.add_argument("dir", metavar="DIR")
    BACKENDS.add(q)
    q.add_argument("--filter", metavar="GLOB",
                   help="only the cases whose folder name matches GLOB (fnmatch), e.g. 'test_nonzero_int64*'")
    BACKENDS.add_provider_options(q)
    BACKENDS.add_fail_on_partial(q)
    SESSION.add(q)
    p.set_defaults(func=cmd_conformance)


def cmd_conformance(args) -> int:
    from .. import conformance
    if args.action == "export":
        manifest = conformance.export(args.dir, args.feature_level, args.seeds)
        print(f"wrote {len(manifest['cases'])} cases to {args.dir} (feature level {manifest['feature_level']}, "
              f"{manifest['seeds']} data sets each); see {os.path.join(args.dir, 'README.txt')}")
        for provider, entry in manifest["providers"].items():
            statuses = [c["status"] for c in entry["cases"].values()]
            print(f"  {provider}: {statuses.count('deviation')} deviations, "
                  f"{statuses.count('unsupported')} unsupported listed in {conformance.MANIFEST}")
        return 0
    backends = BACKENDS.parse(args)
    results = conformance.run(args.dir, backends.names, backends.options(SESSION.parse(args)), pattern=args.filter)
    for line in conformance.format_results(results):
        print(line)
    failing = ("fail", "partial") if backends.fail_on_partial else ("fail",)
    return 1 if any(by_status[s] for by_status in results.values() for s in failing) else 0
