"""The contract that keeps a check's sides independent (runtime/region_cache.py): a value one side
holds may share memory with another side's only if neither can write that memory, so no mutation on
one side can reach the other."""
from __future__ import annotations

import numpy as np


def writable(array: object) -> bool:
    """`array`, or an array it views (its chain of ndarray bases), can be written through."""
    while isinstance(array, np.ndarray):
        if array.flags.writeable:
            return True
        array = array.base
    return False


def independent(a: np.ndarray, b: np.ndarray) -> bool:
    """No mutation of `a` can change `b` nor the reverse: no memory in common, or none of it
    writable through either."""
    return not np.shares_memory(a, b) or not (writable(a) or writable(b))
