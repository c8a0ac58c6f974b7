"""The one reader of this tool's on / off environment variables (DML_LOWER_DEBUG, _UNSUPERVISED,
_STRICT): unset, empty, 0, false, no or off is off, in any case; anything else is on
(DML_LOWER_DEBUG=0 turned tracebacks on). Imports nothing heavy: the command line reads them
before numpy and onnx."""
from __future__ import annotations

import os

OFF = frozenset({"", "0", "false", "no", "off"})


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in OFF
