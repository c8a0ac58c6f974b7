"""dml-lower capabilities: the DirectML support matrix the validation uses, or (--device) what the
DirectML device here measures."""
from __future__ import annotations

import sys

from onnx_dml_lowering.ir import DmlLowerError

from ..output_files import check_outputs, write_json
from .groups import FeatureLevelArgs

LEVEL = FeatureLevelArgs("capabilities", filter=True)


def add_capabilities_parser(sub) -> None:
    """The capabilities subcommand."""
    p = sub.add_parser("capabilities", help="print the DirectML support matrix the validation uses")
    LEVEL.add(p)
    p.add_argument("--markdown", action="store_true", help="Markdown tables (docs/capabilities.md is this)")
    p.add_argument("--device", action="store_true",
                   help="ask the DirectML device here instead: DirectML.dll's version, its highest feature level, "
                        "each data type's support, the D3D12 adapter, the self-test (make directml)")
    p.add_argument("--json", metavar="F.json", help="with --device: write the device facts as JSON here")
    p.set_defaults(func=cmd_capabilities)


def cmd_capabilities(args) -> int:
    level = LEVEL.parse(args)
    if args.device:
        if args.markdown or level is not None:
            raise DmlLowerError("capabilities --device asks the device, not the tables: it takes no "
                                f"{'--markdown' if args.markdown else '--feature-level'}")
        return _device(args)
    if args.json:
        raise DmlLowerError("capabilities --json writes the device facts: give it with --device")
    from ..capabilities import capabilities_text
    sys.stdout.write(capabilities_text(level, markdown=args.markdown))
    return 0


def _device(args) -> int:
    from ..device import device_facts, device_text
    check_outputs(("--json", args.json))
    facts = device_facts()
    sys.stdout.write(device_text(facts))
    if args.json:
        write_json(args.json, "the device JSON", facts)
        print(f"wrote {args.json}")
    return 0
