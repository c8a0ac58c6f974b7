"""dml-lower conformance export / run: the onnx_test_runner suite for DirectML."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Callable

from onnx_dml_lowering.ir.display import display

from .command import ArgGroup, Command, Parsed, Word, option_value
from .groups import BackendArgs, FeatureLevelArgs, FeedArgs, OrtVersionArgs, SessionArgs
from .numbers import whole_number


@dataclass(frozen=True)
class Suite:
    """The suite's folder; export's data sets per case and the DML EP table its predictions model,
    run's case filter."""
    dir: str
    seeds: int = 2
    filter: "str | None" = None
    ort_version: "str | None" = None


class SuiteArgs(ArgGroup[Suite]):
    """DIR, then (add_more, where the action's --help lists it) export's --seeds and --ort-version or
    run's --filter."""

    def __init__(self, action: str) -> None:
        self.action = action

    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "dir", metavar="DIR")

    def add_more(self, parser: argparse.ArgumentParser) -> None:
        if self.action == "export":
            self._add(parser, "--seeds", type=whole_number, default=2, metavar="N", help="test data sets per case")
            OrtVersionArgs("the manifest's DML EP predictions").add(parser)
        else:
            self._add(parser, "--filter", metavar="GLOB",
                      help="only the cases whose folder name matches GLOB (fnmatch), e.g. 'test_nonzero_int64*'")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Suite:
        if self.action == "export":
            return Suite(dir=args.dir, seeds=args.seeds, ort_version=args.ort_version)
        return Suite(dir=args.dir, filter=args.filter)

    def tokens(self, suite: Suite) -> "list[Word]":
        return [Word("", (suite.dir,)), *option_value("--seeds", suite.seeds, 2), *option_value("--filter", suite.filter),
                *option_value("--ort-version", suite.ort_version)]


class ConformanceExport(Command):
    name, help = "export", "write the suite (cases, README.txt, manifest.json) to DIR"

    def __init__(self) -> None:
        self.suite = SuiteArgs("export")
        super().__init__(self.suite, FeatureLevelArgs("manifest"))

    def layout(self) -> "list[Callable[[argparse.ArgumentParser], None]]":
        return [self.suite.add, self.groups[1].add, self.suite.add_more]

    def run(self, parsed: Parsed) -> int:
        from .. import conformance
        suite = parsed[SuiteArgs]
        manifest = conformance.export(suite.dir, str(parsed[FeatureLevelArgs]), suite.seeds, suite.ort_version)
        print(f"wrote {len(manifest['cases'])} cases to {display(suite.dir)} (feature level {manifest['feature_level']}, "
              f"{manifest['seeds']} data sets each); see {display(os.path.join(suite.dir, 'README.txt'))}")
        table = manifest["dml_ep_table"]
        print(f"  DML EP predictions model onnxruntime {table['onnxruntime']}'s registration table ({table['chosen']})")
        for provider, entry in manifest["providers"].items():
            statuses = [c["status"] for c in entry["cases"].values()]
            print(f"  {provider}: {statuses.count('deviation')} deviations, "
                  f"{statuses.count('unsupported')} unsupported listed in {conformance.MANIFEST}")
        return 0


class ConformanceRun(Command):
    name, help = "run", "run every case of DIR on each backend"

    def __init__(self) -> None:
        self.suite, self.backends = SuiteArgs("run"), BackendArgs("conformance")
        # --memory-limit: the feed group's, which the backends read (groups.BackendArgs.parse)
        super().__init__(self.suite, self.backends, SessionArgs(), FeedArgs(only="memory-limit", use="conformance"))

    def layout(self) -> "list[Callable[[argparse.ArgumentParser], None]]":
        return [self.suite.add, self.backends.add, self.suite.add_more, self.backends.add_provider_options,
                self.backends.add_fail_on_partial, self.groups[2].add, self.groups[3].add]

    def run(self, parsed: Parsed) -> int:
        from .. import conformance
        suite, backends = parsed[SuiteArgs], parsed[BackendArgs]
        results = conformance.run(suite.dir, backends.names, backends.options(parsed[SessionArgs]),
                                  pattern=suite.filter)
        for line in conformance.format_results(results):
            print(line)
        failing = ("fail", "partial") if backends.fail_on_partial else ("fail",)
        return 1 if any(by_status[s] for by_status in results.values() for s in failing) else 0


class Conformance(Command):
    name, help = "conformance", "export the NonZero / EyeLike grids as an onnx_test_runner suite, or run such a suite here"

    def __init__(self) -> None:
        super().__init__(children=(ConformanceExport(), ConformanceRun()))
