"""The emulator's memory: one run's buffers, the views over them, and how they are bound.

Buffers are allocated at their declared byte sizes; a view that reaches past its buffer or past
its own TotalTensorSizeInBytes is an error naming both. In strict mode fresh buffers are filled
with poison (the undefined rows of NONZERO_COORDINATES are the kernels' to poison), so a result
that depends on them is caught.

Memory is bound the way a device allocator would, without changing any result: large buffers
are recycled across runs (POOL), a clear of a fresh buffer is a zero-filled allocation, an upload
of a matching contiguous host tensor binds the buffer to that tensor (read-only), a download of
a buffer nothing writes again hands its memory out instead of copying it, and a buffer is
dropped after its last use (a copy out of a dying zero-cleared buffer returns its pages as it
goes). All of it follows from the steps' declared reads() and writes().
"""
from __future__ import annotations

from dataclasses import dataclass, field

import mmap
import sys
import threading
from typing import Callable

import numpy as np

from onnx_dml_lowering.ir import ClearBuffer, DmlLowerError, Download, Graph, TensorDesc
from onnx_dml_lowering.ir.tensor_desc import packed_strides

POISON_BYTE = 0xCD

# Buffers of at least this many bytes are recycled across runs, up to POOL_LIMIT_BYTES held idle.
POOL_MIN_BYTES = 1 << 20
POOL_LIMIT_BYTES = 1 << 30
# Bound descriptors and view geometries kept across runs of one graph before each cache restarts.
_BOUND_KEPT = 4096


class BufferPool:
    """Host memory recycled across runs, as a device allocator recycles GPU memory: the pages of
    a large buffer are faulted in once, not on every run. A backing array is handed out again
    only when nothing outside the pool references it any more (no run holds it and no host
    tensor returned by a download views it), so reuse can never alias live data. Reused memory
    holds stale bytes, as a fresh DirectML buffer may; strict mode poisons it as usual."""

    def __init__(self) -> None:
        self._entries: "list[np.ndarray]" = []        # uint64 backing arrays, oldest first
        self._lock = threading.Lock()
        # The reference count _refs() sees for an entry only the pool holds, measured through
        # the very same code path (so interpreter differences in counting cancel out).
        self._idle = self._refs([np.empty(1, np.uint64)], 0)

    @staticmethod
    def _refs(entries: "list[np.ndarray]", position: int) -> int:
        return sys.getrefcount(entries[position])

    def _is_idle(self, position: int) -> bool:
        return self._refs(self._entries, position) <= self._idle

    def take(self, nbytes: int) -> np.ndarray:
        """An 8-byte aligned uint64 array of at least nbytes (stale contents)."""
        count = (nbytes + 7) // 8
        if nbytes < POOL_MIN_BYTES:
            return np.empty(count, np.uint64)
        with self._lock:
            entries = self._entries
            for position in range(len(entries)):
                size = entries[position].size
                if count <= size <= count + count // 4 and self._is_idle(position):
                    entries.append(entries.pop(position))
                    return entries[-1]
            # A new array; drop the oldest idle entries that would take the pool past its limit.
            held = sum(words.nbytes for words in entries) + 8 * count
            position = 0
            while held > POOL_LIMIT_BYTES and position < len(entries):
                if self._is_idle(position):
                    held -= entries.pop(position).nbytes
                else:
                    position += 1
            words = np.empty(count, np.uint64)
            if held <= POOL_LIMIT_BYTES:
                entries.append(words)
            return words

    @property
    def held_bytes(self) -> int:
        """Bytes of the arrays the pool holds, idle or handed out."""
        with self._lock:
            return sum(words.nbytes for words in self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


POOL = BufferPool()

# Large zero-cleared buffers live in private anonymous maps (zero pages on first touch, and
# returnable early with MADV_DONTNEED) where the platform has them; elsewhere np.zeros.
ANONYMOUS_MAPS = (all(hasattr(mmap, flag) for flag in ("MAP_PRIVATE", "MAP_ANONYMOUS", "MADV_DONTNEED"))
                  and hasattr(mmap.mmap, "madvise"))


@dataclass(frozen=True)
class Lifetimes:
    """Per buffer: the steps that write it (through a view, or a clear) and its last use. A
    property of the graph alone, so a graph run many times (a run-time specialisation, once per
    NonZero per model run) is analysed once."""
    writers: "dict[str, list[int]]"     # buffer -> indices of the steps writing it
    last_use: "dict[str, int]"          # buffer -> index of the last step using it
    dies: "dict[int, list[str]]"        # step index -> buffers last used there
    views_of: "dict[str, list[str]]"    # buffer -> its views
    # Per-graph facts every run asks again, worked out by the first run that needs them:
    # view -> (descriptor, its size symbols); (view, symbol values) -> bound descriptor;
    # (view, id of its bound descriptor) -> (that descriptor, validated once, and the dtype, sizes,
    # byte strides and total bytes of its numpy view, its buffer and offset); view -> (descriptor,
    # what an upload binds to it).
    descs: "dict[str, tuple]" = field(default_factory=dict, compare=False)
    bound: "dict[tuple, TensorDesc]" = field(default_factory=dict, compare=False)
    geometry: "dict[tuple, tuple]" = field(default_factory=dict, compare=False)
    uploads: "dict[str, tuple]" = field(default_factory=dict, compare=False)
    # Per step, made by the first run: (step, downloads?, DirectML operator?, a view with a static
    # zero size?, views whose sizes hold symbols, buffers that die after it).
    table: "list[tuple]" = field(default_factory=list, compare=False)


def analyse(graph: Graph) -> Lifetimes:
    writers: "dict[str, list[int]]" = {}
    dies: "dict[int, list[str]]" = {}
    last: "dict[str, int]" = {}
    views = graph.views
    for index, step in enumerate(graph.steps):
        written = [views[v].buffer for v in step.writes() if v in views]
        if isinstance(step, ClearBuffer):             # a clear names its buffer, not a view
            written.append(step.buffer)
        for name in written:
            writers.setdefault(name, []).append(index)
            last[name] = index
        for v in step.reads():
            if v in views:
                last[views[v].buffer] = index
    for name, index in last.items():
        dies.setdefault(index, []).append(name)
    views_of: "dict[str, list[str]]" = {}
    for v, view in views.items():
        views_of.setdefault(view.buffer, []).append(v)
    return Lifetimes(writers, last, dies, views_of)


class Bindings:
    """The buffers, bound size symbols and numpy views of one execution of one graph.

    The interpreter tells it which step runs (enter) and when a step is done (retire); the
    lifetimes come from the graph's steps, analysed once when the bindings are made."""

    def __init__(self, graph: Graph, strict: bool = False, lifetimes: "Lifetimes | None" = None) -> None:
        self.graph = graph
        self.strict = strict
        self.symbols: "dict[str, int]" = {}
        self.buffers: "dict[str, np.ndarray]" = {}
        self.index = -1                                   # the step being run
        self._retired: "dict[str, int]" = {}              # buffers dropped after their last use
        self._maps: "dict[str, mmap.mmap]" = {}           # zero-cleared buffers held in anonymous maps
        self._host_bound: "set[str]" = set()              # buffers that are a host tensor's memory
        self._shared: "set[str]" = set()                  # buffers a download handed out
        self._bound_descs: "dict[str, tuple]" = {}        # view -> (symbol values, bound descriptor)
        self._arrays: "dict[str, tuple]" = {}             # view -> (bound descriptor, numpy view)
        lifetimes = lifetimes or analyse(graph)
        self._uploads = lifetimes.uploads                 # view -> what an upload binds (bind_upload)
        self._writers, self._last_use = lifetimes.writers, lifetimes.last_use
        self._dies, self._views_of = lifetimes.dies, lifetimes.views_of
        self._desc_keys = lifetimes.descs                 # view -> (descriptor, its size symbols)
        self._geometry = lifetimes.geometry
        self._bound = lifetimes.bound
        self._table = lifetimes.table

    # -- buffers and views ----------------------------------------------------------------
    def buffer(self, name: str, zeroed: bool = False) -> np.ndarray:
        """The buffer's bytes, allocated at its declared size on first use (8-byte aligned).

        zeroed=True allocates zero-filled memory that the OS zeroes page by page on first
        touch (a clear that immediately follows allocation costs only the pages used; large
        ones are anonymous maps whose pages can be returned early, see release_behind);
        otherwise large buffers come from the pool, and strict mode fills them with poison."""
        raw = self.buffers.get(name)
        if raw is None:
            if name in self._retired:
                raise DmlLowerError(f"buffer {name} is used by step {self.index} after its last "
                                    f"declared use at step {self._retired[name]}")
            size = self.graph.buffers[name].size(self.symbols)
            if zeroed and size >= POOL_MIN_BYTES and ANONYMOUS_MAPS:
                pages = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
                if hasattr(mmap, "MADV_HUGEPAGE"):
                    pages.madvise(mmap.MADV_HUGEPAGE)
                self._maps[name] = pages
                words = np.frombuffer(pages, np.uint8)
            elif zeroed:
                words = np.zeros((size + 7) // 8, dtype=np.uint64)
            else:
                words = POOL.take(size)
            raw = words.view(np.uint8)[:size]
            if self.strict and not zeroed:
                raw.fill(POISON_BYTE)
            self.buffers[name] = raw
        return raw

    def desc(self, view_name: str) -> TensorDesc:
        """The view's descriptor with its size symbols bound (memoised per symbol values)."""
        key = self._desc_keys.get(view_name)
        if key is None:
            desc = self.graph.views[view_name].desc
            key = self._desc_keys[view_name] = (desc, desc.symbols)
        desc, names = key
        if not names:
            return desc
        values = tuple(self.symbols.get(n) for n in names)
        bound = self._bound_descs.get(view_name)
        if bound is None or bound[0] != values:
            # Across runs too: a warm run usually sees counts it has seen (kept for a bounded set).
            made = self._bound.get((view_name, values))
            if made is None:
                if len(self._bound) >= _BOUND_KEPT:
                    self._bound.clear()
                made = self._bound[(view_name, values)] = desc.bind(self.symbols)
            bound = self._bound_descs[view_name] = (values, made)
        return bound[1]

    def array(self, view_name: str) -> np.ndarray:
        """A numpy view through the descriptor's strides; bounds-checked against the buffer.
        Built and checked once per run (per value of the symbols in its sizes)."""
        key = self._desc_keys.get(view_name)
        if key is not None and not key[1]:          # no size symbol: one descriptor every run
            made = self._arrays.get(view_name)
            if made is not None:
                return made[1]
            desc = key[0]
        else:
            desc = self.desc(view_name)
            made = self._arrays.get(view_name)
            if made is not None and made[0] is desc:
                return made[1]
        array = self._array(view_name, desc)
        self._arrays[view_name] = (desc, array)
        return array

    def _array(self, view_name: str, desc: TensorDesc) -> np.ndarray:
        # Keyed by the descriptor's identity (the graph's own, or the one bound per count, both
        # kept), checked on the hit: hashing a descriptor costs more than building the view.
        shape = self._geometry.get((view_name, id(desc)))
        if shape is None or shape[0] is not desc:   # validated and worked out once per descriptor
            if len(self._geometry) >= _BOUND_KEPT:
                self._geometry.clear()
            view = self.graph.views[view_name]
            desc.validate(f"view {view_name} over buffer {view.buffer}")
            dtype = desc.data_type.numpy
            shape = self._geometry[(view_name, id(desc))] = (
                desc, dtype, desc.concrete_sizes(), tuple(s * dtype.itemsize for s in desc.effective_strides),
                desc.total_bytes, view.buffer, view.offset)
        _, dtype, sizes, strides, total, buffer, offset = shape
        raw = self.buffers.get(buffer)
        if raw is None:
            raw = self.buffer(buffer)
        if offset < 0 or offset + total > raw.size:
            raise DmlLowerError(
                f"view {view_name}: offset {offset} + TotalTensorSizeInBytes "
                f"{total} exceeds buffer {buffer} of {raw.size} bytes")
        return np.ndarray(sizes, dtype=dtype, buffer=raw, offset=offset, strides=strides)

    # -- lifetimes ------------------------------------------------------------------------
    def enter(self, index: int) -> None:
        """Step `index` is about to run."""
        self.index = index

    def retire(self, index: int) -> None:
        """Drop the buffers no step after `index` uses: pooled memory becomes reusable at once,
        other memory is freed (a buffer a download handed out lives on in that host tensor)."""
        for name in self._dies.get(index, ()):
            if name in self.buffers:
                del self.buffers[name]
                self._maps.pop(name, None)
                self._retired[name] = index
                for view in self._views_of.get(name, ()):
                    self._arrays.pop(view, None)

    # -- copies and clears done without touching the data --------------------------------
    def clear_by_allocation(self, buffer: str, value: int) -> bool:
        """A zero clear of a buffer not yet allocated allocates it zero-filled: True when that
        did the clear's work."""
        if buffer in self.buffers or value & 0xFFFFFFFF:
            return False
        self.buffer(buffer, zeroed=True)
        return True

    def bind_upload(self, view_name: str, host: object) -> bool:
        """Before an upload of `host` into the view at the current step: when the view fills a
        whole buffer nothing else writes, and `host` is a C-contiguous array of the view's type,
        the buffer becomes the host tensor's memory (read-only), so the upload copies nothing.
        Downloads never hand such a buffer out (they copy it). True when it did the upload's work."""
        view = self.graph.views.get(view_name)
        if view is None or view.offset or view.buffer in self.buffers or not isinstance(host, np.ndarray):
            return False
        if self._writers.get(view.buffer) != [self.index]:
            return False
        desc = self.desc(view_name)
        # What the view asks of a host tensor, worked out once per descriptor: its type, element
        # count and bytes when it is packed and fills its buffer, else None (never bound).
        wanted = self._uploads.get(view_name)
        if wanted is None or wanted[0] is not desc or self.graph.buffers[view.buffer].symbols:
            fits = desc.is_bound and (desc.strides is None or
                                      tuple(desc.strides) == packed_strides(desc.concrete_sizes()))
            want = desc.data_type.numpy
            nbytes = self.graph.buffers[view.buffer].size(self.symbols)
            fits = fits and desc.element_count * want.itemsize == nbytes
            wanted = self._uploads[view_name] = (desc, (want, desc.element_count, nbytes) if fits else None)
        if wanted[1] is None:
            return False
        want, count, nbytes = wanted[1]
        data = host.view(np.uint8) if host.dtype == np.bool_ else host
        if data.dtype.itemsize != want.itemsize and data.flags.c_contiguous and data.nbytes == nbytes:
            data = data.reshape(-1).view(want)      # kernels.upload's byte reinterpretation (64-bit words)
        if (data.dtype != want or not data.flags.c_contiguous or data.size != count
                or data.ctypes.data % 8):
            return False
        raw = data.reshape(-1).view(np.uint8).view()
        raw.flags.writeable = False
        self.buffers[view.buffer] = raw
        self._host_bound.add(view.buffer)
        return True

    def may_share(self, view_name: str) -> bool:
        """May the download at the current step return the buffer's memory itself? Only if no
        later step writes the buffer, it is not bound to a host tensor, no earlier download
        handed it out, and the view covers at least half of it (a small view copies rather
        than keep a large buffer alive). True also records that the buffer is handed out."""
        view = self.graph.views[view_name]
        name = view.buffer
        if name in self._host_bound or name in self._shared or name not in self.buffers:
            return False
        if any(i > self.index for i in self._writers.get(name, ())):
            return False
        desc = self.desc(view_name)
        if 2 * desc.element_count * desc.data_type.numpy.itemsize < self.buffers[name].size:
            return False
        self._shared.add(name)
        return True

    def release_behind(self, source_view: str, out_view: str) -> "Callable[[int], None] | None":
        """For a copy at the current step out of a large zero-cleared buffer that dies with it:
        the callback that returns the buffer's pages to the OS as the copy passes them (a kernel
        may ignore it). None when the source's memory must stay."""
        views = self.graph.views
        name = views[source_view].buffer
        pages = self._maps.get(name)
        if (pages is None or self._last_use.get(name) != self.index or name in self._shared
                or views[out_view].buffer == name):
            return None
        base = self.buffers[name].__array_interface__["data"][0]
        done = [0]

        def release(address: int) -> None:
            upto = (address - base) // mmap.PAGESIZE * mmap.PAGESIZE
            if upto > done[0]:
                pages.madvise(mmap.MADV_DONTNEED, done[0], upto - done[0])
                done[0] = upto
        return release

    def step_table(self) -> "list[tuple]":
        """Lifetimes.table for this graph, made on the first call (see the field)."""
        table = self._table
        if not table and self.graph.steps:
            made = []
            for index, step in enumerate(self.graph.steps):
                names = step.reads() + step.writes()
                descs = [self.graph.views[n].desc for n in names]
                made.append((step, isinstance(step, Download), step.is_dml_operator,
                             any(s == 0 for d in descs for s in d.sizes),
                             tuple(n for n, d in zip(names, descs) if d.symbols),
                             tuple(self._dies.get(index, ()))))
            table[:] = made               # whole at once: a run in another thread sees all or none
        return table
