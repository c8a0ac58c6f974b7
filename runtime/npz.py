"""The one reader and writer of .npz files: feeds (`--inputs`, `--save-inputs`), golden outputs
(`--oracle F.npz`) and saved outputs (`--save-outputs`, `--load-outputs`).

numpy stores ml_dtypes arrays (bfloat16, float8, int4, uint4, float4e2m1) under descriptors it
cannot read back (float8e5m2 is '<f1') or as raw void records ('|V1'). The writer stores every
such array as raw void records of its item size, and the reader reads any 1/2-byte descriptor
numpy refuses the same way; `feeds.restore_dtype` then gives each array its declared ONNX type
back, bit for bit. The reader reads each entry's header first, so an entry that would not fit the
memory limit is refused before its bytes are read.
"""
from __future__ import annotations

import ast
import re
import zipfile
import zlib
from pathlib import Path
from typing import Callable, IO, Mapping

import numpy as np

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.errors import MemoryLimitExceeded
from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.ir.dtypes import NUMPY_NATIVE

from . import input_files
from .memory import default_limit, format_size

_MAGIC = b"\x93NUMPY"


# A zip entry's name is at most 65535 bytes (a 16-bit length), ".npy" included.
_ENTRY_NAME_BYTES = 0xFFFF - len(".npy")


def _storable(name: str, value: object, what: str, path: str) -> np.ndarray:
    """`value` as an array np.load reads back without pickle: ml_dtypes arrays as raw records,
    strings (onnxruntime returns them as Python objects) as fixed-width Unicode."""
    label = f"cannot write {what} to '{display(path)}': entry '{display(name[:80])}'"
    if len(name.encode("utf-8", "surrogatepass")) > _ENTRY_NAME_BYTES:
        raise DmlLowerError(f"{label}{'...' if len(name) > 80 else ''} has a name of "
                            f"{len(name.encode('utf-8', 'surrogatepass'))} bytes, over the {_ENTRY_NAME_BYTES} "
                            "bytes an .npz entry name can hold")
    value = np.asarray(value)
    if value.dtype.hasobject:
        if not all(isinstance(item, str) for item in value.reshape(-1)):
            raise DmlLowerError(f"{label} holds Python objects that are not strings: an .npz holds plain arrays")
        value = value.astype(np.str_) if value.size else np.zeros(value.shape, "<U1")
    if value.dtype.kind in "Vf" and value.dtype not in NUMPY_NATIVE and value.dtype.fields is None:
        value = np.ascontiguousarray(value).view(f"V{value.dtype.itemsize}")
    return value


def save_npz(path: str, arrays: Mapping[str, np.ndarray], what: str) -> None:
    """np.savez at exactly `path` (no .npz appended), with ml_dtypes arrays as raw records numpy
    can read back and strings as Unicode arrays; written atomically; one line on failure."""
    from .output_file import staged
    raw = {name: _storable(name, value, what, str(path)) for name, value in arrays.items()}
    with staged(path, what) as temp:
        # The archive np.savez writes, without its keyword arguments: an input may be named 'file'.
        with zipfile.ZipFile(temp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name, value in raw.items():
                with archive.open(f"{name}.npy", "w", force_zip64=True) as entry:
                    np.lib.format.write_array(entry, np.asanyarray(value), allow_pickle=False)


def _header(entry: IO[bytes], what: str) -> "tuple[np.dtype, tuple, bool]":
    """(dtype, shape, fortran_order) of one .npy member; a descriptor numpy cannot parse (an
    ml_dtypes type such as '<f1') becomes raw void records of its size."""
    if entry.read(6) != _MAGIC:
        raise DmlLowerError(f"{what} holds an entry that is not a .npy array")
    major = entry.read(2)[0]
    length = int.from_bytes(entry.read(2 if major == 1 else 4), "little")
    try:
        header = ast.literal_eval(entry.read(length).decode("latin1"))
        descr, shape, fortran = header["descr"], tuple(int(d) for d in header["shape"]), bool(header["fortran_order"])
    except (ValueError, SyntaxError, KeyError, TypeError):
        raise DmlLowerError(f"{what} holds an entry whose .npy header cannot be read") from None
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError):
        size = re.fullmatch(r"[<>|=]?[a-zA-Z](\d+)", descr) if isinstance(descr, str) else None
        if not size:
            raise DmlLowerError(f"{what} holds an entry of a type numpy cannot read ({descr!r})") from None
        dtype = np.dtype(f"V{size.group(1)}")
    if dtype.hasobject:
        raise DmlLowerError(f"{what} holds an entry that is not a plain array (Python objects)")
    return dtype, shape, fortran


def _named_once(members: "list[zipfile.ZipInfo]", label: str) -> None:
    """Each array named once: of two entries of one name np.load reads the last and a zip tool
    the first, so which one counts would be a guess."""
    names = [member.filename[:-4] for member in members]
    twice = next((name for index, name in enumerate(names) if name in names[:index]), None)
    if twice is not None:
        raise DmlLowerError(f"{label} holds entry '{display(twice)}' {names.count(twice)} times: which one counts "
                            "would be a guess (an .npz names each array once)")


def _no_trailing_bytes(entry: IO[bytes], member: zipfile.ZipInfo, dtype: np.dtype, shape: tuple,
                       label: str) -> None:
    """Nothing past the array's declared data (np.load ignores it: a header that declares less than
    the entry holds is a lie, or a damaged file). One byte is read, never the rest (an inflating
    entry may be any size)."""
    if entry.read(1):
        extra = member.file_size - entry.tell() + 1          # as the zip's directory says: never inflated
        raise DmlLowerError(f"{label}: entry '{display(member.filename[:-4])}' holds {extra} bytes past the "
                            f"{dtype} {list(shape)} data its header declares")


def load_npz(path: str, what: str = "inputs file", limit: "int | None" = None,
             check: "Callable[[dict[str, tuple[np.dtype, tuple]]], None] | None" = None) -> "dict[str, np.ndarray]":
    """{name: array} from an .npz; every way it can be wrong is one line naming the file.

    Nothing is read or inflated before every entry's header is: `check` gets {name: (dtype, shape)}
    (feeds.check_feed_headers: the names, dtypes and shapes the model takes), then the arrays'
    total size is refused over `limit` bytes (None: the default memory limit)."""
    limit = default_limit() if limit is None else limit
    label = f"{what} {path!r}"
    input_files.regular_file(path, label, "an .npz archive")     # the one check of every reader
    file = Path(path)
    try:
        with open(file, "rb") as handle:
            start = handle.read(6)
    except OSError as exc:
        raise DmlLowerError(f"{label} cannot be read: {exc.strerror or exc}") from None
    if start == _MAGIC:
        raise DmlLowerError(f"{label} is a single .npy array, not an .npz archive keyed by name")
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        raise DmlLowerError(f"{label} is not an .npz archive of arrays keyed by name") from None
    out: "dict[str, np.ndarray]" = {}
    with archive:
        members = [m for m in archive.infolist() if m.filename.endswith(".npy")]
        if len(members) != len(archive.infolist()):
            raise DmlLowerError(f"{label} is not an .npz archive of arrays keyed by name (it holds other files)")
        _named_once(members, label)
        try:
            headers = []
            for member in members:
                with archive.open(member) as entry:
                    headers.append((member, *_header(entry, label)))
            if check is not None:
                check({member.filename[:-4]: (dtype, shape) for member, dtype, shape, _ in headers})
            total = sum(int(np.prod(shape, dtype=object)) * dtype.itemsize for _, dtype, shape, _ in headers)
            if total > limit:
                member, dtype, shape, _ = max(headers, key=lambda h: int(np.prod(h[2], dtype=object)) * h[1].itemsize)
                raise MemoryLimitExceeded(f"{label} holds {format_size(total)} of arrays, over the memory limit of "
                                    f"{format_size(limit)}: {member.filename[:-4]!r} of shape {list(shape)} "
                                    "(raise --memory-limit)")
            for member, dtype, shape, fortran in headers:
                with archive.open(member) as entry:
                    _header(entry, label)
                    count = int(np.prod(shape, dtype=object))
                    array = np.empty(count, dtype)
                    # stubs: typeshed types ZipFile.open as IO[bytes] (it is a ZipExtFile, which has readinto),
                    # numpy's ndarray is a Buffer only for Python 3.12+ targets
                    if array.nbytes and entry.readinto(memoryview(array.view(np.uint8))) != array.nbytes:  # type: ignore[attr-defined,arg-type]
                        raise DmlLowerError(f"{label}: entry {member.filename[:-4]!r} is truncated")
                    _no_trailing_bytes(entry, member, dtype, shape, label)
                array = array.reshape(shape[::-1]).T if fortran else array.reshape(shape)
                # strings are stored as Unicode arrays (save_npz); every engine holds them as objects
                out[member.filename[:-4]] = array.astype(object) if dtype.kind == "U" else array
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
            raise DmlLowerError(f"{label} is a damaged .npz archive ({exc})") from None
    return out

