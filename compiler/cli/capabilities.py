"""dml-lower capabilities: the DirectML support matrix the validation uses."""
from __future__ import annotations

import sys

def add_capabilities_parser(sub) -> None:
    """The capabilities subcommand."""
    p = sub.add_parser("capabilities", help="print the DirectML support matrix the validation uses")
    p.add_argument("--feature-level", metavar="L", help="only the tables in force at this level (default: every level)")
    p.add_argument("--markdown", action="store_true", help="Markdown tables (docs/capabilities.md is this)")
    p.set_defaults(func=cmd_capabilities)


def cmd_capabilities(args) -> int:
    from onnx_dml_lowering.ir import parse_level

    from .capabilities import capabilities_text
    level = parse_level(args.feature_level) if args.feature_level else None
    sys.stdout.write(capabilities_text(level, markdown=args.markdown))
    return 0
