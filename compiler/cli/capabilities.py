"""dml-lower capabilities: the DirectML support matrix the validation uses, or (--device) what the
DirectML device here measures."""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from onnx_dml_lowering.ir import DmlLowerError

from ..output_files import check_outputs, write_json
from .command import ArgGroup, Command, Parsed, Word, flag
from .groups import FeatureLevelArgs
from .output_groups import JsonArgs


@dataclass(frozen=True)
class Shown:
    """What capabilities shows: the tables (as Markdown with `markdown`) or the device here."""
    markdown: bool = False
    device: bool = False


class ShownArgs(ArgGroup[Shown]):
    def add(self, parser: argparse.ArgumentParser) -> None:
        self._add(parser, "--markdown", action="store_true", help="Markdown tables (docs/capabilities.md is this)")
        self._add(parser, "--device", action="store_true",
                  help="ask the DirectML device here instead: DirectML.dll's version, its highest feature level, "
                       "each data type's support, the D3D12 adapter, the self-test (make directml)")

    def parse(self, args: argparse.Namespace, parsed: "Parsed | None" = None) -> Shown:
        return Shown(markdown=args.markdown, device=args.device)

    def tokens(self, shown: Shown) -> "list[Word]":
        return flag("--markdown", shown.markdown) + flag("--device", shown.device)


class Capabilities(Command):
    name, help = "capabilities", "print the DirectML support matrix the validation uses"

    def __init__(self) -> None:
        super().__init__(FeatureLevelArgs("capabilities", filter=True), ShownArgs(), JsonArgs("capabilities"))

    def run(self, parsed: Parsed) -> int:
        level, shown, json_out = parsed[FeatureLevelArgs], parsed[ShownArgs], parsed[JsonArgs]
        if shown.device:
            if shown.markdown or level is not None:
                raise DmlLowerError("capabilities --device asks the device, not the tables: it takes no "
                                    f"{'--markdown' if shown.markdown else '--feature-level'}")
            return _device(json_out)
        if json_out:
            raise DmlLowerError("capabilities --json writes the device facts: give it with --device")
        from ..capabilities import capabilities_text
        sys.stdout.write(capabilities_text(level, markdown=shown.markdown))
        return 0


def _device(json_out: "str | None") -> int:
    from ..device import device_facts, device_text
    check_outputs(("--json", json_out))
    facts = device_facts()
    sys.stdout.write(device_text(facts))
    if json_out:
        write_json(json_out, "the device JSON", facts)
    return 0
