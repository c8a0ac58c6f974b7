"""The memory a run needs, summed before anything is allocated, against a limit.

NonZero's coordinate buffer is sized for the worst case (every element non-zero), and buffers
sized by a count read back at run time are bounded by that worst case too.
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import MemoryLimitExceeded

if TYPE_CHECKING:
    from onnx_dml_lowering.ir import Graph

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6, "mib": 2**20,
          "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12, "tib": 2**40}


def parse_size(text: "str | int | float") -> int:
    """'512MiB', '2GB', '1.5GiB', '1000000' -> bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
        if not match or match.group(2).lower() not in _UNITS:
            raise DmlLowerError(f"memory limit {text!r} is not a size like 512MiB, 2GB or 1000000")
        value, unit = float(match.group(1)), match.group(2).lower()
    size = int(value * _UNITS[unit])
    if size <= 0:
        raise DmlLowerError(f"memory limit {text!r} must be positive")
    return size


def default_limit() -> int:
    """Three quarters of the machine's physical memory."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * 3 // 4)
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


# binary units, largest first: a size from a huge --dim reads 16.3 ZiB, not 17881393432617.2 GiB
_SHOWN_UNITS = tuple((unit, 2 ** (10 * power)) for power, unit in
               reversed(list(enumerate(("KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"), start=1))))


def format_size(size: int) -> str:
    for unit, scale in _SHOWN_UNITS:
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def symbol_bounds(graph: Graph) -> "dict[str, int]":
    """Largest value each read-back count can take: the element count of its NonZero input."""
    # the operator classes load with the lowered graph (memory's limits are read by every run)
    from onnx_dml_lowering.ir import NonZeroCoordinates, ReadCount
    rows_of = {}
    for step in graph.steps:
        if isinstance(step, NonZeroCoordinates):
            rows_of[step.output_count] = int(graph.views[step.output_coordinates].desc.sizes[-2])
    return {step.symbol: rows_of.get(step.view, 0) for step in graph.steps if isinstance(step, ReadCount)}


def buffer_bytes(graph: Graph) -> "dict[str, int]":
    bounds = symbol_bounds(graph)
    return {name: buffer.size(bounds) for name, buffer in graph.buffers.items()}


def check_memory(graph: Graph, limit: int, what: str = "the lowered graph",
                 sizes: "dict[str, int] | None" = None) -> None:
    """One line naming the largest buffer (its node is its name's prefix) when the sum of the
    buffers `graph` allocates exceeds `limit`. `sizes`: buffer_bytes(graph), if already known."""
    sizes = buffer_bytes(graph) if sizes is None else sizes
    total = sum(sizes.values())
    if total > limit:
        largest = max(sizes, key=sizes.__getitem__)
        node = largest.split(".")[0]
        raise MemoryLimitExceeded(
            f"{what} needs {format_size(total)} of buffers, over the memory limit of {format_size(limit)}: "
            f"node {node}, buffer {largest} alone is {format_size(sizes[largest])} "
            "(raise --memory-limit, or run smaller inputs)")
