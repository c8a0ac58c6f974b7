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
    """Three quarters of the memory this process can have: the least of the machine's physical
    memory, its cgroup's limit (memory.max, or cgroup v1's memory.limit_in_bytes; a container's), and
    what RLIMIT_AS / RLIMIT_DATA (`ulimit -v` / `ulimit -d`) leave above the address space and data
    the process holds now (onnxruntime and numpy take a good part of `ulimit -v` before any feed):
    a run past it is refused in one line rather than ending in MemoryError or the OOM killer."""
    known = [*_cgroup_limits(), *_rlimit_headroom()]
    try:
        known.append(int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")))
    except (ValueError, OSError, AttributeError):
        pass
    return max(min(known) * 3 // 4, 1) if known else 8 * 2**30


def _cgroup_limits(listing: str = "/proc/self/cgroup", mount: str = "/sys/fs/cgroup") -> "list[int]":
    """The memory limits of this process's cgroup and its ancestors (v2 memory.max, v1
    memory.limit_in_bytes), from `listing` and the cgroup file systems under `mount`; none where
    there is no cgroup file system (not Linux) or no limit is set."""
    try:
        with open(listing, encoding="utf-8") as lines:
            entries = [line.rstrip("\n").split(":", 2) for line in lines]
    except OSError:
        return []
    files = []
    for entry in entries:
        if len(entry) != 3:
            continue
        _, controllers, path = entry
        if controllers == "":                           # v2: the unified hierarchy
            files += _up_to_root(mount, path, "memory.max")
        elif "memory" in controllers.split(","):        # v1: the memory controller's own hierarchy
            files += _up_to_root(os.path.join(mount, "memory"), path, "memory.limit_in_bytes")
    limits = []
    for name in files:
        try:
            with open(name, encoding="utf-8") as text:
                value = text.read().strip()
        except OSError:
            continue
        if value.isdigit() and int(value) < 2**60:     # 'max', or v1's page-rounded 2^63 for none
            limits.append(int(value))
    return limits


def _up_to_root(mount: str, path: str, name: str) -> "list[str]":
    """`name` in the cgroup folder `path` under `mount` and in each folder above it (a container sees
    its own cgroup as the root: the mount's top file is its limit then)."""
    parts = [part for part in path.split("/") if part and part != ".."]
    return [os.path.join(mount, *parts[:depth], name) for depth in range(len(parts), -1, -1)]


def _rlimit_headroom() -> "list[int]":
    """What RLIMIT_AS and RLIMIT_DATA leave above the address space (VmSize) and data (VmData) the
    process holds now; none where unlimited or unknown."""
    try:
        import resource
    except ImportError:                 # Windows
        return []
    held = _status_sizes()
    headroom = []
    for limit, field in ((getattr(resource, "RLIMIT_AS", None), "VmSize"), (getattr(resource, "RLIMIT_DATA", None), "VmData")):
        if limit is None:
            continue
        soft = resource.getrlimit(limit)[0]
        if soft != resource.RLIM_INFINITY and soft >= 0:
            headroom.append(max(soft - held.get(field, 0), 0))
    return headroom


def _status_sizes() -> "dict[str, int]":
    """VmSize and VmData of this process, in bytes (/proc/self/status; none elsewhere)."""
    sizes = {}
    try:
        with open("/proc/self/status", encoding="utf-8") as lines:
            for line in lines:
                key, _, value = line.partition(":")
                if key in ("VmSize", "VmData") and value.split()[:1] and value.split()[0].isdigit():
                    sizes[key] = int(value.split()[0]) * 1024          # in kB
    except OSError:
        pass
    return sizes


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
