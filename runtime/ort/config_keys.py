"""Whether the installed onnxruntime reads a session config key at all. onnxruntime takes any
key and ignores one it does not read, so a misspelt `--session-config` entry
(session.disable_prepack=1) would change nothing, silently. The keys it reads are string
constants in its library (onnxruntime_session_options_config_keys.h): a key is known when its
library holds it as a whole C string, or holds a prefix of it of two parts or more ending in
'.' (keys built at run time, as session.moe.offload.gpu_budget_bytes.<device> or ep.cuda.<name>). Read once per process, only when a
command is given config entries."""
from __future__ import annotations

import functools
import mmap
import os

# What a key is made of: a byte before a match that is one of these means the match is the tail
# of a longer string (a linker may store "a.b" inside "xa.b").
_KEY_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


@functools.lru_cache(maxsize=1)
def _library() -> "mmap.mmap | None":
    """onnxruntime's library this process loads, mapped (None where it cannot be read)."""
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as library
        with open(os.path.realpath(library.__file__ or ""), "rb") as file:
            return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (ImportError, OSError, ValueError):
        return None


def _holds_string(data: mmap.mmap, text: str) -> bool:
    needle = text.encode("utf-8") + b"\0"
    start = data.find(needle)
    while start >= 0:
        if start == 0 or data[start - 1] not in _KEY_BYTES:
            return True
        start = data.find(needle, start + 1)
    return False


def reads_key(key: str) -> "bool | None":
    """True when onnxruntime's library holds `key` (or a prefix of it ending in '.') as a string,
    False when it does not, None when its library could not be read (nothing is claimed)."""
    data = _library()
    if data is None:
        return None
    if _holds_string(data, key):
        return True
    # prefixes of two parts or more: the library also holds "session." alone (in its messages)
    dots = [i for i, c in enumerate(key[:-1]) if c == "."]
    return any(_holds_string(data, key[:i + 1]) for i in dots[1:])


# Keys whose value names a file or folder onnxruntime writes itself (its node memory statistics,
# an EP context model and its weights, an optimized model's weights, MoE counters and caches):
# such a write would pass this project's one writer and its checks (runtime/output_target.py)
# and could replace the model or another input. Named by what a path-valued key's name ends with;
# the keys onnxruntime only reads from are left out by name.
_PATH_KEY_ENDINGS = ("_file", "_filepath", "_file_path", "_file_name", "_dir", "_directory", "_folder")
_READ_ONLY_PATH_KEYS = frozenset(("session.node_partition_config_file", "session.moe.offload.popularity_file",
                                  "ep.context_source_model_path"))


def writes_files(key: str) -> bool:
    """True when onnxruntime may write the file or folder the key's value names."""
    return key.endswith(_PATH_KEY_ENDINGS) and key not in _READ_ONLY_PATH_KEYS
