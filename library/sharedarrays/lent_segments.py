"""The torch-free way to send an ndarray through ``multiprocessing``: a warm segment lent per item.

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
sender's pool reclaims the segment, warm, at its next lease. Updates take an exclusive ``flock``
on the segment, so processes never lose one. A forked child counts the receptions it inherits;
a process that exits (also through ``os._exit``, via ``multiprocessing.util``'s exit hooks)
releases what it still holds.

Contract: one receiver per send (like a queue item). An item never received, or held by a
process killed with SIGKILL, keeps its segment lent until the sender's pool closes, which unlinks
it; a receiver that loads an item after that gets ``FileNotFoundError`` saying so. A sender that
is killed cannot close its pool: a process that received arrays from it unlinks the dead
sender's segments (``unlink_segments_of_dead_lenders``) and tells the resource tracker, which
would otherwise unlink them, with a warning, only when the whole program ends.
"""

from __future__ import annotations

import fcntl
import itertools
import mmap
import os
import sys
import threading
import weakref
from collections.abc import Callable
from multiprocessing import util

import numpy as np

from sharedarrays._segments import (
    ExitHook,
    Mapping,
    OnceNotice,
    creator_pid,
    forget_in_resource_tracker,
    mapping_under,
    open_existing,
    pickled_as_usual,
    process_alive,
    refuse_objects,
    segment_names,
    unlink,
)
from sharedarrays.segment_pool import HEADER_BYTES, SegmentPool, mark_returned
from sharedarrays.shm import ArrayHandle, handle_of

EXIT_PRIORITY = -10  # multiprocessing exit hooks: after queues' feeder threads flushed (-5)
HOLDERS_OFFSET = 8  # header byte where the int64 count of holders lives (after the pool's state word)

_MAPS: weakref.WeakValueDictionary[str, mmap.mmap] = weakref.WeakValueDictionary()  # name -> our mapping
_LENT_MAPS: weakref.WeakKeyDictionary[mmap.mmap, bool] = weakref.WeakKeyDictionary()  # maps of lent segments
_HELD: dict[int, weakref.finalize] = {}  # receptions of lent segments still alive in this process
_LENDERS: set[int] = set()  # pids of the other processes this one received lent segments from
_tokens = itertools.count()
_pool: SegmentPool | None = None  # set by sharedarrays.reducers while the torch-free way is active
_no_room_notice = OnceNotice()  # an array pickled for want of room, said once per pool
# Held while a thread holds a segment's flock, and across fork(): a child must not inherit a lock
# that a thread of its parent holds through a descriptor the child also inherited.
_flock_guard = threading.Lock()
# Per thread: .inside (it is in count_holders or forking: it holds or wants the guard) and
# .deferred (releases a finalizer asked for meanwhile, run once the guard is let go).
_counting = threading.local()


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


def holders_of(array: np.ndarray) -> np.ndarray:
    """A live int64 view of the holder count in the header of the lent segment ``array`` views."""
    header = _header(mapping_under(array))
    return header[HOLDERS_OFFSET:HOLDERS_OFFSET + 8].view(np.int64)


def count_holders(name: str, header: np.ndarray, delta: int) -> int | None:
    """Add ``delta`` to the holders of lent segment ``name`` (``header``: its first bytes, uint8)
    under an exclusive flock; return the new count, or None if the segment is gone."""
    holders = header[HOLDERS_OFFSET:HOLDERS_OFFSET + 8].view(np.int64)
    # Anything that allocates in here may start the cyclic GC, which may run a release finalizer
    # on this thread: that one must not wait for the locks this thread holds (it would wait forever),
    # so it queues itself (release_later) and runs right after they are let go.
    _start_counting()
    try:
        with _flock_guard:
            try:
                fd = open_existing(name)
            except FileNotFoundError:
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                holders[0] += delta
                return int(holders[0])
            finally:
                os.close(fd)  # the only fd of this open file: closing it releases the lock
    finally:
        _stop_counting()


def _start_counting() -> None:
    """This thread is about to take the guard: from now, releases wait (``release_later``). Its queue
    exists before the flag is up, so nothing in ``release_later`` has to allocate one."""
    if getattr(_counting, "deferred", None) is None:
        _counting.deferred = []
    _counting.inside = True


def _stop_counting() -> None:
    """The guard is let go: run what waited, each release on its own (one that fails is reported,
    as a finalizer's error is, and the others still run)."""
    _counting.inside = False
    queue = _counting.deferred
    while queue:
        release, args = queue.pop()
        try:
            release(*args)
        except Exception:
            sys.excepthook(*sys.exc_info())


def release_later(release: Callable, *args) -> bool:
    """True, with ``release(*args)`` queued, when this thread is inside ``count_holders`` (a finalizer
    the GC ran there) or forking; it then runs as soon as the guard is let go."""
    if getattr(_counting, "inside", False):
        _counting.deferred.append((release, args))
        return True
    return False


def _release(token: int, name: str, header: np.ndarray, pid: int) -> None:
    """A reception's views are all gone: take its holder off; the last one returns the segment.

    Only in the process that counted it (``pid``): a forked child counts what it inherits again,
    under its own pid, and must not take off its parent's holder for a view that died in it first.
    """
    if release_later(_release, token, name, header, pid):
        return
    _HELD.pop(token, None)
    if pid != os.getpid():
        return
    if count_holders(name, header, -1) == 0:
        mark_returned(header)
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
        forget_in_resource_tracker(name)  # the dead process registered it with ours if it was our child
    return removed


def reduce_with_shared_memory(array: np.ndarray):
    """ForkingPickler reduction of an ndarray through a shared-memory segment (module docstring)."""
    refuse_objects(array.dtype)
    if array.nbytes == 0:
        return rebuild_empty, (array.shape, array.dtype)
    handle = handle_of(array)
    if handle is not None:
        segment_map = mapping_under(array)
        lent = segment_map in _LENT_MAPS
        if lent and count_holders(handle.name, _header(segment_map), +1) is None:
            lent = False  # its pool closed meanwhile: nothing left to return
        return rebuild_from_segment, (handle, lent, array.flags.writeable)
    pool = _pool
    if pool is None:
        raise RuntimeError("the torch-free reduction is not active: call share_arrays_with_shared_memory()")
    try:
        lease = pool.lease(array.nbytes)
    except MemoryError:  # no room in /dev/shm (or RAM): the array crosses as if we were not there
        return pickled_as_usual(array, _no_room_notice)
    segment_map = lease.shared.mapped_buffer()
    _MAPS[lease.name] = segment_map
    _LENT_MAPS[segment_map] = True
    root = np.frombuffer(segment_map, np.uint8)
    root[HOLDERS_OFFSET:HOLDERS_OFFSET + 8].view(np.int64)[0] = 1  # the item in flight
    copy = copy_into(root, HEADER_BYTES, array)
    handle = ArrayHandle(lease.name, tuple(array.shape), array.dtype, tuple(copy.strides), HEADER_BYTES)
    return rebuild_from_segment, (handle, True, array.flags.writeable)


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


def rebuild_from_segment(handle: ArrayHandle, lent: bool, writeable: bool) -> np.ndarray:
    """Receiver side: view the segment a handle describes (no copy); a lent one is given back when
    every view made from this reception is gone."""
    segment_map = _map_segment(handle.name)
    root = np.frombuffer(segment_map, np.uint8)  # a fresh buffer export, alive as long as our views
    if lent:
        _LENT_MAPS[segment_map] = True
        lender = creator_pid(handle.name)
        if lender is not None and lender != os.getpid():
            _LENDERS.add(lender)
        token = next(_tokens)
        _watch(root.base, token, handle.name, _header(segment_map))
    array = np.ndarray(handle.shape, handle.dtype, buffer=root, offset=handle.offset, strides=handle.strides)
    if not writeable:
        array.flags.writeable = False
    return array


def _watch(buffer: object, token: int, name: str, header: np.ndarray) -> None:
    """Take this process's holder of ``name`` off when ``buffer`` (the reception's export) goes."""
    _HELD[token] = weakref.finalize(buffer, _release, token, name, header, os.getpid())
    _exit_hook.ensure()


def release_everything_held() -> None:
    """Give back every lent segment this process still views (at exit: the views die with it)."""
    for finalizer in list(_HELD.values()):
        finalizer()


def _at_exit() -> None:
    release_everything_held()
    if _pool is not None:
        _pool.close()
    unlink_segments_of_dead_lenders()


_exit_hook = ExitHook(_at_exit, EXIT_PRIORITY)  # in place while this process lends or holds


def _before_fork() -> None:
    """Take the guard (a child must not inherit it held) with this thread marked as counting, so a
    release the GC runs in the fork's other hooks waits instead of waiting on the guard."""
    _start_counting()
    _flock_guard.acquire()


def _after_fork_in_parent() -> None:
    _flock_guard.release()
    _stop_counting()


def _after_fork_in_child() -> None:
    """A forked child holds what its parent held (count it, under the child's pid) and must not
    lend the parent's segments."""
    global _pool
    _flock_guard.release()
    _stop_counting()  # what waited was the parent's (its pid): a no-op here
    for token, finalizer in list(_HELD.items()):
        found = finalizer.peek()
        if found is not None:
            buffer, _, (_, name, header, _), _ = found
            finalizer.detach()
            count_holders(name, header, +1)
            _watch(buffer, token, name, header)
    if _pool is not None:
        _pool = SegmentPool(_pool.idle_cap_bytes)  # the inherited one lends the parent's segments
    _LENDERS.clear()  # the parent looks after the processes it received from
    if _pool is not None or _HELD:
        _exit_hook.ensure()


def _after_multiprocessing_fork() -> None:
    """multiprocessing clears a forked child's exit hooks after ``os.fork`` returns: add ours back."""
    if _pool is not None or _HELD:
        _exit_hook.ensure()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
util.register_after_fork(_after_multiprocessing_fork, lambda hook: hook())
