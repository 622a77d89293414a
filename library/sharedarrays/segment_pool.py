"""Shared-memory segments kept mapped and touched, so a copy into shared memory runs at warm speed.

Internal to ``sharedarrays``: not part of its API (``sharedarrays.__all__``), and may change
between versions.

The first write to a new ``/dev/shm`` segment faults in and zeroes every page: that costs several
times a copy into memory that is already mapped. A
``SegmentPool`` lends segments out and takes them back instead of unlinking them: their pages stay
allocated and mapped in this process, so the next copy into one costs what a warm copy costs.

- ``lease(n_bytes)`` lends a segment with room for ``n_bytes`` (a returned one if one fits, else
  a new one); ``give_back(lease)`` returns it from this process.
- A borrower in another process returns it by setting the state word in the segment's first
  ``HEADER_BYTES`` (``mark_returned``); the pool notices at its next ``lease``.
- Idle segments are capped at ``idle_cap_bytes`` (default: 1 GiB, or half of what /dev/shm and
  RAM can spare now if that is less); beyond it the least recently used are unlinked. When /dev/shm
  runs short they make room first: a new segment that does not fit unlinks them, and
  ``make_room(n_bytes)`` unlinks them until ``n_bytes`` are free (for a segment someone else is
  about to create, e.g. a worker's result).
- A segment idle for ``idle_seconds`` (default 5 s) is unlinked: the pages of a shared-memory
  segment are never reclaimed while it exists, and they count against a container's
  ``--shm-size`` and memory cgroup. Calls closer together than that find their segments warm.
  With ``expire_in_background`` (what ``SharedMemoryExecutor`` asks for) a thread of the pool
  unlinks them on time even if no call comes: it runs only while the pool holds segments, and
  ``close()`` ends it. Without it (the reductions' pool: a program that only sends through a pipe
  runs no thread of its own, and neither does this) they are unlinked at the next ``lease``,
  ``collect`` or ``close``.
- ``close()`` unlinks every segment; the owner is registered with ``multiprocessing``'s resource
  tracker, so even a killed owner's segments are unlinked when its tracker exits. Only the process
  that made the pool unlinks: in a child forked from it (whose exit runs the inherited finalizers)
  ``close()`` just forgets the segments, which stay the parent's.
"""

from __future__ import annotations

import math
import mmap
import os
import threading
import time
from collections import OrderedDict, deque

import numpy as np

from sharedarrays._segments import OnceNotice
from sharedarrays.room import available_memory, shm_free
from sharedarrays.shm import ArrayHandle, SharedNDArray

HEADER_BYTES = 64  # state word + padding; data starts cache-line aligned
STATE_IDLE, STATE_LENT, STATE_RETURNED = 0, 1, 2
DEFAULT_IDLE_CAP_FRACTION = 0.5  # of the smaller of /dev/shm free and RAM available
DEFAULT_IDLE_CAP_BYTES = 1 << 30  # at most this much idle by default, however much could be spared
DEFAULT_IDLE_SECONDS = 5.0  # a segment idle longer than this is unlinked
LENT_LOOK_SECONDS = 1.0  # while segments are lent, the expiry thread looks at least this often


def _round_up_to_page(n_bytes: int) -> int:
    return -(-n_bytes // mmap.PAGESIZE) * mmap.PAGESIZE


def default_idle_cap_bytes() -> int:
    """1 GiB, or half of what this machine can spare for shared memory now if that is less (bytes)."""
    room = available_memory()
    free = shm_free()
    if free is not None:
        room = min(room, free)
    return min(DEFAULT_IDLE_CAP_BYTES, int(room * DEFAULT_IDLE_CAP_FRACTION))


class Lease:
    """One segment lent out by a pool: ``capacity`` data bytes after a small header."""

    def __init__(self, shared: SharedNDArray, capacity: int):
        self.shared = shared
        self.capacity = capacity
        self.idle_since = 0.0  # time.monotonic() when it was given back, or its return was seen
        self.retired = False  # someone else may still view it: unlinked when given back, never lent again
        self._state = shared.array[:8].view(np.int64)

    @property
    def name(self) -> str:
        """The segment's name in /dev/shm."""
        return self.shared.name

    @property
    def state(self) -> int:
        return int(self._state[0])

    @state.setter
    def state(self, value: int) -> None:
        self._state[0] = value

    def array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A C-contiguous view of ``shape`` and ``dtype`` at the start of the data area.

        Each call builds its views on a fresh export of the mapping, so a finalizer on the
        returned array's buffer fires only when this caller's views are all gone.
        """
        dtype = np.dtype(dtype)
        n_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if n_bytes > self.capacity:
            raise ValueError(f"{n_bytes} bytes do not fit a lease of {self.capacity}")
        raw = np.frombuffer(self.shared.mapped_buffer(), np.uint8)
        return np.ndarray(shape, dtype, buffer=raw, offset=HEADER_BYTES)

    def handle(self, shape: tuple[int, ...], dtype: np.dtype) -> ArrayHandle:
        """The handle of ``array(shape, dtype)`` for another process to attach."""
        view = self.array(shape, dtype)
        return ArrayHandle(self.name, tuple(view.shape), view.dtype, tuple(view.strides), HEADER_BYTES)


def mark_returned(segment: np.ndarray) -> None:
    """From a borrower: say the lent segment (``segment``: any view of its whole mapping, as uint8,
    starting at byte 0) is free again."""
    segment[:8].view(np.int64)[0] = STATE_RETURNED


class SegmentPool:
    """Lends shared-memory segments and keeps returned ones warm (see the module docstring).

    ``idle_cap_bytes``: the most bytes of idle segments kept (default ``default_idle_cap_bytes()``;
    0 keeps none). ``idle_seconds``: how long a segment may stay idle before it is unlinked
    (default 5 s; ``math.inf`` keeps idle segments until ``close()``). ``expire_in_background``:
    a thread unlinks them on time, calls or no calls (else the pool's next call does).
    """

    def __init__(self, idle_cap_bytes: int | None = None, idle_seconds: float | None = None, *,
                 expire_in_background: bool = False):
        self.idle_cap_bytes = default_idle_cap_bytes() if idle_cap_bytes is None else int(idle_cap_bytes)
        self.idle_seconds = DEFAULT_IDLE_SECONDS if idle_seconds is None else float(idle_seconds)
        if not self.idle_seconds >= 0:
            raise ValueError(f"idle_seconds must be 0 or more (math.inf: never), not {idle_seconds!r}")
        self.expire_in_background = bool(expire_in_background)
        self._expiry: threading.Thread | None = None  # the thread that unlinks expired segments
        self._wake_expiry = threading.Event()  # set by close(): the expiry thread ends at once
        self._close_asked = False  # close() was called inside the expiry thread: it closes at its next look
        self._lock = threading.Lock()
        self._idle: OrderedDict[str, Lease] = OrderedDict()  # least recently returned first
        self._lent: dict[str, Lease] = {}
        self._given_back: deque[Lease] = deque()  # filled without the lock: finalizers may run anywhere
        self._closed = False
        self._maker_pid = os.getpid()
        self.created = 0
        self.reused = 0

    def collect(self) -> None:
        """File the segments given back or returned since the last ``lease`` (for statistics), and
        unlink those idle for ``idle_seconds``."""
        with self._lock:
            self._collect_given_back()
            self._collect_returned()
            self._expire_idle()

    @property
    def idle_bytes(self) -> int:
        """Bytes of segments waiting, warm, in the pool (read under the pool's lock: another thread
        may be lending or filing segments)."""
        with self._lock:
            return self._idle_bytes()

    def _idle_bytes(self) -> int:
        """``idle_bytes`` for a caller that holds the lock already."""
        return sum(lease.capacity for lease in self._idle.values())

    @property
    def lent_bytes(self) -> int:
        """Bytes of segments lent out now (read under the pool's lock)."""
        with self._lock:
            return sum(lease.capacity for lease in self._lent.values())

    def names(self) -> list[str]:
        """Names of every segment the pool holds, idle or lent."""
        with self._lock:
            return [*self._idle, *self._lent]

    def lease(self, n_bytes: int) -> Lease:
        """Lend a segment with room for ``n_bytes``: a warm one that fits (at most twice the size),
        else a new one. Raises MemoryError when /dev/shm cannot hold a new one even after the
        idle segments are dropped."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this segment pool is closed")
            self._collect_given_back()
            self._collect_returned()
            self._expire_idle()
            largest = 2 * n_bytes + mmap.PAGESIZE  # do not spend a much bigger segment on a small array
            fits = [lease for lease in self._idle.values() if n_bytes <= lease.capacity <= largest]
            if fits:
                lease = min(fits, key=lambda candidate: candidate.capacity)
                del self._idle[lease.name]
                self.reused += 1
            else:
                lease = self._create(n_bytes)
                self.created += 1
            lease.state = STATE_LENT
            self._lent[lease.name] = lease
            self._watch_expiry()
            return lease

    def make_room(self, n_bytes: int) -> None:
        """Unlink idle segments, least recently returned first, until /dev/shm has ``n_bytes`` free
        or none is idle (a no-op where there is no /dev/shm)."""
        with self._lock:
            while self._idle:
                free = shm_free()
                if free is None or free >= n_bytes:
                    return
                _, lease = self._idle.popitem(last=False)
                self._destroy(lease)

    def give_back(self, lease: Lease) -> None:
        """Return a lent segment from this process: it waits, warm, for the next ``lease`` (a retired
        one is unlinked instead).

        Safe to call from a finalizer at any moment (even while this thread is inside ``lease``):
        it only queues the segment; the pool files it at its next look. Its idle time starts now.
        """
        lease.idle_since = time.monotonic()
        self._given_back.append(lease)

    def is_lent(self, name: str) -> bool:
        """True while segment ``name`` is lent by this pool (given back, it may still count until the
        pool next looks)."""
        return name in self._lent

    def retire(self, name: str) -> None:
        """Never lend segment ``name`` again: another process may still view it (a worker kept an
        argument, a forked child inherited a view). It is unlinked when it is given back, which
        leaves every mapping of it valid: its memory goes when the last one does. A no-op for a
        segment this pool does not have lent. Safe from any thread (one attribute set)."""
        lease = self._lent.get(name)
        if lease is not None:
            lease.retired = True

    def retire_every_lent(self) -> None:
        """``retire`` every segment lent now (before a ``fork``: the child inherits every view)."""
        for lease in tuple(self._lent.values()):  # tuple(): one step, whatever other threads do
            lease.retired = True

    def close(self) -> None:
        """Unlink every segment; lent ones stay readable to whoever still maps them. In a forked
        child, forget them instead, without the lock (a thread of the parent may have held it at
        the fork): they are the parent's."""
        if os.getpid() != self._maker_pid:
            self._closed = True
            self._idle, self._lent, self._given_back = OrderedDict(), {}, deque()
            self._expiry = None  # the parent's thread: not in this process
            return
        if threading.current_thread() is self._expiry:
            # A finalizer (the executor's) run by a garbage collection inside the expiry thread,
            # which may hold the lock right now: the thread closes the pool at its next look.
            self._close_asked = True
            self._wake_expiry.set()
            return
        with self._lock:
            self._closed = True
            self._given_back.clear()
            leases = [*self._idle.values(), *self._lent.values()]
            self._idle.clear()
            self._lent.clear()
            expiry, self._expiry = self._expiry, None
        self._wake_expiry.set()
        for lease in leases:
            self._destroy(lease)
        if expiry is not None and expiry is not threading.current_thread():
            expiry.join(timeout=10.0)  # it ends at its next look, which the event brings at once

    def __enter__(self) -> SegmentPool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _create(self, n_bytes: int) -> Lease:
        capacity = _round_up_to_page(HEADER_BYTES + n_bytes) - HEADER_BYTES
        try:
            shared = SharedNDArray.create(HEADER_BYTES + capacity, np.uint8)
        except (MemoryError, OSError):  # no room, or no more mappings (vm.max_map_count)
            if not self._idle:
                raise
            self._trim(0)  # make room from warm segments nobody uses, then try once more
            shared = SharedNDArray.create(HEADER_BYTES + capacity, np.uint8)
        return Lease(shared, capacity)

    def _collect_given_back(self) -> None:
        while self._given_back:
            lease = self._given_back.popleft()
            if self._lent.pop(lease.name, None) is not None:
                self._keep_idle(lease, lease.idle_since)

    def _collect_returned(self) -> None:
        now = time.monotonic()  # a borrower's return is seen now: its idle time starts here
        for lease in [lease for lease in self._lent.values() if lease.state == STATE_RETURNED]:
            del self._lent[lease.name]
            self._keep_idle(lease, now)

    def _keep_idle(self, lease: Lease, idle_since: float) -> None:
        if self._closed or lease.retired or lease.capacity > self.idle_cap_bytes:
            self._destroy(lease)
            return
        lease.state = STATE_IDLE
        lease.idle_since = idle_since
        self._idle[lease.name] = lease
        self._trim(self.idle_cap_bytes)

    def _expire_idle(self) -> None:
        """Unlink the segments idle for ``idle_seconds`` or longer (lock held)."""
        now = time.monotonic()
        expired = [name for name, lease in self._idle.items() if now - lease.idle_since >= self.idle_seconds]
        for name in expired:
            self._destroy(self._idle.pop(name))

    def _watch_expiry(self) -> None:
        """Start the expiry thread where it is asked for, segments are held, and none runs (lock
        held). Only in the process that made the pool: a forked child's copy lends nothing."""
        if (self.expire_in_background and self._expiry is None and math.isfinite(self.idle_seconds)
                and not self._closed and os.getpid() == self._maker_pid and (self._idle or self._lent)):
            self._expiry = threading.Thread(target=self._expire_in_background, daemon=True,
                                            name="sharedarrays-idle-expiry")
            self._expiry.start()

    def _expire_in_background(self) -> None:
        """The expiry thread: file segments given back or returned, unlink those idle for
        ``idle_seconds``, and end once the pool holds none (the next ``lease`` starts another) or
        is closed. It looks again when the oldest idle segment is due, and at least every
        ``LENT_LOOK_SECONDS`` while segments are lent (a borrower returns them unseen)."""
        me = threading.current_thread()
        while True:
            if self._close_asked:
                self._expiry = None
                self.close()
                return
            with self._lock:
                if self._closed or self._expiry is not me or os.getpid() != self._maker_pid:
                    return
                self._collect_given_back()
                self._collect_returned()
                self._expire_idle()
                if not self._idle and not self._lent and not self._given_back:
                    self._expiry = None
                    return
                now = time.monotonic()
                waits = [lease.idle_since + self.idle_seconds - now for lease in self._idle.values()]
                if self._lent or self._given_back:
                    waits.append(min(self.idle_seconds, LENT_LOOK_SECONDS))
            self._wake_expiry.wait(max(0.01, min(waits)))

    def _trim(self, cap_bytes: int) -> None:
        while self._idle and self._idle_bytes() > cap_bytes:
            _, lease = self._idle.popitem(last=False)
            self._destroy(lease)


    def _destroy(self, lease: Lease) -> None:
        """Unlink ``lease``'s segment; in a forked child only let go of its mapping (the parent's)."""
        if os.getpid() == self._maker_pid:
            _destroy(lease)
        else:
            lease.shared.close()


def _destroy(lease: Lease) -> None:
    """Unmap and unlink ``lease``'s segment. A refused unlink (a /dev/shm made read-only meanwhile) is
    said once and left to the resource tracker, which tries again when the program ends: letting go
    of a segment never raises into the caller's ``shutdown`` or next call."""
    lease.shared.close()
    try:
        lease.shared.unlink()
    except OSError as error:
        _UNLINK_REFUSED.say(f"sharedarrays: could not unlink segment {lease.name!r} ({error.strerror}); "
                            "the resource tracker tries again when the program ends. Said once.")


_UNLINK_REFUSED = OnceNotice()
