"""The torch-free way to send an ndarray through ``multiprocessing``: a warm segment lent per item.

Internal to ``sharedarrays``: not part of its API (``sharedarrays.__all__``), and may change
between versions.

``reduce_with_shared_memory`` is what ``sharedarrays.reducers.share_arrays_with_shared_memory()``
registers for ``np.ndarray`` on ``ForkingPickler``; ``rebuild_from_segment`` runs in the receiver.

- **First share** (private memory): the sender's ``SegmentPool`` lends a segment (a warm one if
  one was returned, so the copy runs at warm-memcpy speed), the array's bytes are copied in once
  (memory order kept) and only a handle crosses the pipe, marked *lent*.
- **Already shared** (``sharedarrays.shm.handle_of(array)`` finds a live segment): only the handle
  crosses; no copy, O(1) in the size.
- **No room** (the pool can lend no segment that /dev/shm or RAM can hold): the array is pickled as
  ``multiprocessing`` pickles it without the reduction, and a notice says so once (a WARNING of the
  ``sharedarrays`` logger).
- **Receiver**: maps the segment by name (reusing this process's mapping if it has one, so a
  receiver in the sender's own process copies and maps nothing) and views it. Attaching never
  involves the resource tracker.

Who may reuse a lent segment is counted in its header: word 0 is the pool's state, word 1 the
number of *holders*: items in flight plus receptions still alive. A first share sets it to 1 (the
item in flight, which the reception then takes over); sending on an array that views a lent
segment adds 1 (the new item); when every view a reception made is gone (``weakref.finalize`` on
its own buffer export) it takes 1 off. The last one calls ``segment_pool.mark_returned`` and the
sender's pool reclaims the segment, warm, at its next lease. The count is kept by
``sharedarrays.segment_holds``, the one protocol the executor's segments use too: updates take an
exclusive ``flock`` on the segment, so processes never lose one; a forked child is counted for the
receptions it inherits by its parent, before ``fork``; a process that exits (also through
``os._exit``, via ``multiprocessing.util``'s exit hooks) releases what it still holds.

Contract: one receiver per send (like a queue item). An item never received, or held by a
process killed with SIGKILL, keeps its segment lent until the sender's pool closes, which unlinks
it; a receiver that loads an item after that gets ``FileNotFoundError`` saying so. A sender that
is killed cannot close its pool: a process that received arrays from it unlinks the dead
sender's segments (``unlink_segments_of_dead_lenders``) and tells the resource tracker, which
would otherwise unlink them, with a warning, only when the whole program ends.
"""

from __future__ import annotations

import mmap
import os
import weakref
from multiprocessing import util

import numpy as np

from sharedarrays._names import segment_exists
from sharedarrays._segments import (
    MAPPED_SEGMENTS,
    PLACEMENT_FAILURES,
    ExitHook,
    Mapping,
    OnceNotice,
    creator_pid,
    mapping_under,
    pickled_as_usual,
    process_alive,
    refuse_objects,
    segment_names,
    settle_tracker,
    tell_tracker,
    unlink,
)
from sharedarrays.segment_holds import EXIT_PRIORITY, HOLDERS_OFFSET, count_holders, hold_segment, holders_of
from sharedarrays.segment_pool import HEADER_BYTES, SegmentPool
from sharedarrays.shm import wire_dtype

__all__ = ["holders_of"]  # re-exported: the holder count of a lent segment (segment_holds defines it)

_MAPS: weakref.WeakValueDictionary[str, mmap.mmap] = weakref.WeakValueDictionary()  # name -> our mapping
_LENT_MAPS: weakref.WeakKeyDictionary[mmap.mmap, bool] = weakref.WeakKeyDictionary()  # maps of lent segments
_LENDERS: set[int] = set()  # pids of the other processes this one received lent segments from
_pool: SegmentPool | None = None  # set by sharedarrays.reducers while the torch-free way is active
_no_room_notice = OnceNotice()  # an array pickled for want of room, said once per pool


def set_pool(pool: SegmentPool | None) -> None:
    """Lend from ``pool`` (None: this process lends nothing); make sure exit hooks are in place."""
    global _pool, _no_room_notice
    _pool = pool
    _no_room_notice = OnceNotice()  # said once each time the way is switched on
    _exit_hook.ensure()


def current_pool() -> SegmentPool | None:
    """The pool this process lends from now (None when the torch-free way is not active)."""
    return _pool


def memory_order(array: np.ndarray) -> str:
    """'F' for an array that is Fortran- but not C-contiguous, else 'C': the layout a copy keeps."""
    return "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"


def copy_into(buffer: np.ndarray, offset: int, array: np.ndarray) -> np.ndarray:
    """Copy ``array`` into ``buffer`` (uint8) at byte ``offset`` keeping its memory order; return the
    copy (a view of ``buffer``). A contiguous array is copied as raw bytes: one memcpy, any dtype."""
    order = memory_order(array)
    target = np.ndarray(array.shape, array.dtype, buffer=buffer, offset=offset, order=order)
    if array.flags.c_contiguous or array.flags.f_contiguous:
        as_bytes = array.reshape(-1, order=order).view(np.uint8)
        np.copyto(target.reshape(-1, order=order).view(np.uint8), as_bytes)
    else:
        np.copyto(target, array, casting="no")
    return target


def rebuild_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Receiver side of an array with no bytes: nothing to share."""
    return np.empty(shape, dtype)


def _header(segment_map: mmap.mmap) -> np.ndarray:
    return np.frombuffer(segment_map, np.uint8, count=HEADER_BYTES)


def _after_release(name: str) -> None:
    """A reception of segment ``name`` was let go: if its lender died meanwhile, unlink what it left."""
    lender = creator_pid(name)
    if lender in _LENDERS and not process_alive(lender):
        unlink_segments_of_dead_lenders()


def unlink_segments_of_dead_lenders() -> list[str]:
    """Unlink the segments of every process this one received lent arrays from that has died (it
    could not close its pool); return their names. Our views of them stay valid."""
    dead = {pid for pid in _LENDERS if not process_alive(pid)}
    if not dead:
        return []
    _LENDERS.difference_update(dead)
    removed = []
    for name in segment_names():
        if creator_pid(name) not in dead or not unlink(name):
            continue
        removed.append(name)
        tell_tracker("forget", name)  # the dead process registered it with ours if it was our child
    return removed


def _shared_place(array: np.ndarray) -> tuple[str, int, mmap.mmap] | None:
    """(segment name, byte offset, our mapping) of the shared segment ``array`` views, or None when
    its memory is private or its segment was unlinked (``shm.handle_of``, without building a handle:
    the fields cross as they are)."""
    segment_map = mapping_under(array)
    found = MAPPED_SEGMENTS.get(segment_map) if segment_map is not None else None
    if found is None or not segment_exists(found[0]):
        return None
    name, address = found
    return name, array.ctypes.data - address, segment_map


def reduce_with_shared_memory(array: np.ndarray):
    """ForkingPickler reduction of an ndarray through a shared-memory segment (module docstring).
    What crosses is the segment's name and the array's layout as plain fields (the dtype as
    ``shm.wire_dtype`` gives it): an array already shared crosses at little more than its name."""
    refuse_objects(array.dtype)
    settle_tracker()  # what finalizers left for the resource tracker (_names.tell_tracker)
    if array.nbytes == 0:
        return rebuild_empty, (array.shape, array.dtype)
    place = _shared_place(array)
    if place is not None:
        name, offset, segment_map = place
        lent = segment_map in _LENT_MAPS
        if lent and count_holders(name, _header(segment_map), +1) is None:
            lent = False  # its pool closed meanwhile: nothing left to return
        return rebuild_from_segment, (name, array.shape, wire_dtype(array.dtype), array.strides, offset, lent,
                                      array.flags.writeable)
    pool = _pool
    if pool is None:
        raise RuntimeError("the torch-free reduction is not active: call share_arrays_with_shared_memory()")
    try:
        lease = pool.lease(array.nbytes)
    except PLACEMENT_FAILURES as error:  # no room, or no new segment: it crosses as if we were not there
        return pickled_as_usual(array, _no_room_notice, error)
    segment_map = lease.shared.mapped_buffer()
    _MAPS[lease.name] = segment_map
    _LENT_MAPS[segment_map] = True
    root = np.frombuffer(segment_map, np.uint8)
    root[HOLDERS_OFFSET:HOLDERS_OFFSET + 8].view(np.int64)[0] = 1  # the item in flight
    copy = copy_into(root, HEADER_BYTES, array)
    return rebuild_from_segment, (lease.name, array.shape, wire_dtype(array.dtype), copy.strides,
                                  HEADER_BYTES, True, array.flags.writeable)


def _map_segment(name: str) -> mmap.mmap:
    segment_map = _MAPS.get(name)
    if segment_map is not None and not segment_map.closed:
        return segment_map
    try:
        segment_map = Mapping(name, create_bytes=None).map
    except FileNotFoundError:
        raise FileNotFoundError(
            f"the array sent through shared memory is gone: segment {name!r} no longer exists. A "
            "segment lent by sharedarrays.reducers lives until the sender's pool closes "
            "(stop_sharing_arrays() or the sender's exit); one owned by a SharedNDArray until its "
            "owner unlinks it. Receive every item before the sender stops sharing or exits."
        ) from None
    _MAPS[name] = segment_map  # unmapped when the last view of it goes
    return segment_map


def rebuild_from_segment(name: str, shape: tuple[int, ...], dtype: np.dtype | str, strides: tuple[int, ...],
                         offset: int, lent: bool, writeable: bool) -> np.ndarray:
    """Receiver side: view segment ``name`` as the array the sender described (no copy); a lent one
    is given back when every view made from this reception is gone."""
    settle_tracker()
    segment_map = _map_segment(name)
    root = np.frombuffer(segment_map, np.uint8)  # a fresh buffer export, alive as long as our views
    if lent:
        _LENT_MAPS[segment_map] = True
        lender = creator_pid(name)
        if lender is not None and lender != os.getpid():
            _LENDERS.add(lender)
        # The sender counted this item in flight; the reception takes that holder over.
        hold_segment(name, root, counted=True, after_release=_after_release)
        _exit_hook.ensure()
    array = np.ndarray(shape, dtype, buffer=root, offset=offset, strides=strides)
    if not writeable:
        array.flags.writeable = False
    return array


def _at_exit() -> None:
    """Close this process's pool (its lent segments unlinked) and unlink what dead lenders left.
    (The receptions it still holds are let go by ``segment_holds``' own exit hook.)"""
    if _pool is not None:
        _pool.close()
    unlink_segments_of_dead_lenders()


_exit_hook = ExitHook(_at_exit, EXIT_PRIORITY)  # in place while this process lends or holds


def _after_fork_in_child() -> None:
    """A forked child must not lend its parent's segments (a pool of its own) and leaves the processes
    its parent received from to the parent. What it holds was counted for it before the fork
    (``segment_holds``)."""
    global _pool
    if _pool is not None:
        _pool = SegmentPool(_pool.idle_cap_bytes, _pool.idle_seconds)  # the inherited one lends the parent's
    _LENDERS.clear()


def _after_multiprocessing_fork() -> None:
    """multiprocessing clears a forked child's exit hooks after ``os.fork`` returns: add ours back."""
    if _pool is not None:
        _exit_hook.ensure()


if hasattr(os, "register_at_fork"):  # absent where there is no fork (Windows)
    os.register_at_fork(after_in_child=_after_fork_in_child)
util.register_after_fork(_after_multiprocessing_fork, lambda hook: hook())
