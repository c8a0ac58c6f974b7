"""runtime.binding on its own: the buffer pool, lifetimes (freeing after the last use), strict-mode
poison, clears done by allocation, upload binding, download sharing and released copies."""
import numpy as np
import pytest
from onnx import TensorProto as TP

from onnx_dml_lowering.ir import (ClearBuffer, DataType, DmlLowerError, Download, ElementWiseIdentity, Graph,
                                  TensorDesc, Upload, parse_level)
from onnx_dml_lowering.runtime import binding
from onnx_dml_lowering.runtime.binding import POISON_BYTE, POOL_MIN_BYTES, Bindings, BufferPool

MIB = POOL_MIN_BYTES


def chain_graph(nbytes=24):
    """0: upload x -> a; 1: copy a -> b; 2: download b -> y (UINT8 views of nbytes)."""
    g = Graph(parse_level("5_1"))
    g.inputs.append("x")
    for name in ("a", "b"):
        g.add_buffer(name, nbytes)
        g.add_view(name + ".v", name, TensorDesc(DataType.UINT8, (nbytes,)))
    g.add(Upload("x", "a.v"))
    g.add(ElementWiseIdentity("a.v", "b.v"))
    g.add(Download("b.v", "y", TP.UINT8, (nbytes,)))
    g.outputs.append("y")
    return g


# -- the pool -----------------------------------------------------------------------------------

def test_pool_hands_an_idle_array_out_again_and_holds_it_once():
    pool = BufferPool()
    first = pool.take(MIB)
    address = first.ctypes.data
    assert first.nbytes >= MIB and pool.held_bytes == first.nbytes
    del first
    again = pool.take(MIB)
    assert again.ctypes.data == address and pool.held_bytes == again.nbytes


def test_pool_never_hands_out_memory_still_referenced():
    pool = BufferPool()
    held = pool.take(MIB)
    view = pool.take(MIB)[:8]                  # the array is gone, a view of it is not
    other = pool.take(MIB)
    assert not np.shares_memory(other, held) and not np.shares_memory(other, view)
    assert pool.held_bytes == 3 * held.nbytes


def test_pool_keeps_small_and_ill_fitting_requests_out():
    pool = BufferPool()
    small = pool.take(MIB - 1)
    assert small.nbytes >= MIB - 1 and pool.held_bytes == 0
    large = pool.take(2 * MIB)
    address = large.ctypes.data
    del large
    # an idle array more than a quarter larger than the request is not used for it
    assert pool.take(MIB).ctypes.data != address


def test_pool_stays_under_its_limit_dropping_the_oldest_idle_arrays(monkeypatch):
    monkeypatch.setattr(binding, "POOL_LIMIT_BYTES", 2 * MIB)
    pool = BufferPool()
    a, b = pool.take(MIB), pool.take(MIB)
    c = pool.take(MIB)                         # a and b are in use: c is not held
    assert pool.held_bytes == 2 * MIB
    del a
    d = pool.take(MIB)                         # a's memory, idle again
    assert pool.held_bytes == 2 * MIB and not np.shares_memory(d, b) and not np.shares_memory(d, c)
    pool.clear()
    assert pool.held_bytes == 0


# -- lifetimes ----------------------------------------------------------------------------------

def test_buffers_are_freed_after_their_last_declared_use():
    bindings = Bindings(chain_graph())
    for index in range(3):
        bindings.enter(index)
        bindings.array("a.v" if index < 2 else "b.v")
        if index == 1:
            bindings.array("b.v")
        bindings.retire(index)
        alive = set(bindings.buffers)
        assert alive == {0: {"a"}, 1: {"b"}, 2: set()}[index]


def test_a_buffer_used_after_its_last_declared_use_is_an_error_naming_both_steps():
    bindings = Bindings(chain_graph())
    for index in range(2):
        bindings.enter(index)
        bindings.array("a.v")
        bindings.retire(index)
    bindings.enter(2)
    with pytest.raises(DmlLowerError, match="buffer a is used by step 2 after its last declared use at step 1"):
        bindings.array("a.v")


def test_a_view_past_its_buffer_is_an_error_naming_both():
    g = chain_graph()
    g.add_view("long.v", "a", TensorDesc(DataType.UINT8, (32,)))
    with pytest.raises(DmlLowerError, match="view long.v: .* exceeds buffer a of 24 bytes"):
        Bindings(g).array("long.v")


# -- strict mode poison and clears --------------------------------------------------------------

@pytest.mark.parametrize("nbytes", [24, 2 * MIB])
def test_strict_mode_poisons_fresh_and_recycled_buffers(nbytes):
    g = chain_graph(nbytes)
    dirty = Bindings(g, strict=False).buffer("a")
    dirty.fill(7)
    del dirty                                  # pooled memory (2 MiB) becomes idle, stale
    raw = Bindings(g, strict=True).buffer("a")
    assert raw.size == nbytes and (raw == POISON_BYTE).all()


@pytest.mark.parametrize("nbytes", [24, 2 * MIB])
@pytest.mark.parametrize("strict", [True, False])
def test_a_zero_clear_of_a_fresh_buffer_is_a_zero_filled_allocation(nbytes, strict):
    bindings = Bindings(chain_graph(nbytes), strict=strict)
    assert not bindings.clear_by_allocation("a", 0xCDCDCDCD)      # not zero: the kernel clears
    assert "a" not in bindings.buffers
    assert bindings.clear_by_allocation("a", 0)
    assert bindings.buffers["a"].size == nbytes and not bindings.buffers["a"].any()
    assert not bindings.clear_by_allocation("a", 0)               # allocated: the kernel clears


# -- uploads and downloads without copies -------------------------------------------------------

def test_upload_binds_a_matching_contiguous_feed_read_only():
    bindings = Bindings(chain_graph())
    x = np.arange(24, dtype=np.uint8)
    bindings.enter(0)
    assert not bindings.bind_upload("a.v", x[::2])                # strided: not bound
    assert "a" not in bindings.buffers
    assert bindings.bind_upload("a.v", x)                         # the upload's work is done
    raw = bindings.buffers["a"]
    assert np.shares_memory(raw, x) and not raw.flags.writeable
    assert not bindings.may_share("a.v")                          # never handed out by a download


def test_download_shares_a_buffer_once_and_only_when_nothing_writes_it_later():
    g = chain_graph()
    g.add_view("half.v", "b", TensorDesc(DataType.UINT8, (11,)))
    bindings = Bindings(g)
    bindings.enter(0)
    bindings.buffer("b")
    assert not bindings.may_share("b.v")                          # step 1 writes b later
    bindings.enter(2)
    assert not bindings.may_share("half.v")                       # under half of the buffer
    assert bindings.may_share("b.v")
    assert not bindings.may_share("b.v")                          # handed out already


@pytest.mark.skipif(not binding.ANONYMOUS_MAPS, reason="no anonymous maps on this platform")
def test_a_copy_out_of_a_dying_zero_cleared_buffer_may_release_it():
    g = chain_graph(2 * MIB)
    g.steps.insert(1, ClearBuffer("a"))        # 0 upload, 1 clear, 2 copy a -> b, 3 download
    bindings = Bindings(g)
    bindings.enter(1)
    assert bindings.clear_by_allocation("a", 0)
    bindings.enter(2)
    release = bindings.release_behind("a.v", "b.v")
    assert callable(release)
    release(bindings.buffers["a"].ctypes.data + 2 * binding.mmap.PAGESIZE)
    assert bindings.release_behind("a.v", "a.v") is None          # a copy onto itself keeps it
    bindings.enter(1)
    assert bindings.release_behind("a.v", "b.v") is None          # not its last use
