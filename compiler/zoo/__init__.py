"""`dml-lower check MODEL_OR_DIR ...` on a whole zoo: the options, discovery, scheduling and summary
(runner), one model's check subprocess (model_check), Ray actors, one per worker (ray_executor), JUnit XML (junit).

Only the runner loads here: the CLI imports this package for its Zoo, the rest loads when a zoo
runs."""
from __future__ import annotations

from .runner import Zoo, ZooRun, run_zoo

__all__ = ["Zoo", "ZooRun", "run_zoo"]
