"""Conformance suites: the grids of cases (cases), exported as onnx_test_runner folders and run on
any backend (suite). `conformance.export(DIR)`, `conformance.load(DIR)`, `conformance.run(DIR, ...)`."""
from __future__ import annotations

from .suite import (MANIFEST, STATUSES, CaseRunner, Outcome, export, format_results, judge, load,
                    placement_differences, probe_providers, run)

__all__ = ["MANIFEST", "STATUSES", "CaseRunner", "Outcome", "export", "format_results", "judge", "load",
           "placement_differences", "probe_providers", "run"]
