"""dml-lower capabilities: the DirectML support matrix the validation uses."""
from __future__ import annotations

import sys

from .groups import FeatureLevelArgs

LEVEL = FeatureLevelArgs("capabilities", filter=True)


def add_capabilities_parser(sub) -> None:
    """The capabilities subcommand."""
    p = sub.add_parser("capabilities", help="print the DirectML support matrix the validation uses")
    LEVEL.add(p)
    p.add_argument("--markdown", action="store_true", help="Markdown tables (docs/capabilities.md is this)")
    p.set_defaults(func=cmd_capabilities)


def cmd_capabilities(args) -> int:
    from ..capabilities import capabilities_text
    level = LEVEL.parse(args)
    sys.stdout.write(capabilities_text(level, markdown=args.markdown))
    return 0
