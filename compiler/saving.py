"""The one wording of what a rewrite saves: bytes (and nodes) saved, or, where the file grows,
how many bytes more (optimize's per-rewrite lines and its summary line alike)."""
from __future__ import annotations


def saving(bytes_saved: int, nodes_added: "int | None" = None) -> str:
    """'4011 bytes saved, -4 nodes'; a negative saving is said as growth: '55 bytes more, -2 nodes'."""
    size = f"{bytes_saved} bytes saved" if bytes_saved >= 0 else f"{-bytes_saved} bytes more"
    return size if nodes_added is None else f"{size}, {nodes_added:+d} nodes"
