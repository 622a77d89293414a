"""What the library's parts share: creating and mapping a segment, room, layouts, notices.

Private to ``sharedarrays``: ``shm``, ``transit``, ``executor``, ``lent_segments`` and
``torch_reduction`` build on these; nothing outside the library imports them. Segment names,
liveness and the POSIX calls on a name are in ``sharedarrays._names`` (standard library only,
for ``sweep()``), and taken from here too.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import pickle
import sys
import threading
import weakref
from multiprocessing import util

import numpy as np

from sharedarrays._names import (  # noqa: F401 - the library's modules take these from here too
    OWNER_ONLY,
    creator_namespace,
    creator_pid,
    finalizer_safe,
    forget_in_resource_tracker,
    new_name,
    open_existing,
    process_alive,
    require_posix_shared_memory,
    segment_names,
    settle_tracker,
    shm_open,
    tell_tracker,
    unlink,
)
from sharedarrays.room import available_memory, shm_free, shm_size
from sharedarrays.units import format_bytes

# madvise(MADV_POPULATE_WRITE), Linux 5.14+: map every page of a new segment in one call instead of
# one page fault per 4 KiB at first write (about a third less time to fill a new segment here).
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)

# The library's notices (an array pickled for want of room in /dev/shm): WARNING records that Python
# prints on stderr unless logging is configured. A log record, not a warning: ``-W error`` must not
# turn a notice into an exception that takes the place of a value the stdlib would have returned.
LOG = logging.getLogger("sharedarrays")

# Every mapping this process made of one of our segments: map -> (segment name, base address).
# handle_of() uses it to tell an array that already lives in shared memory from a private one.
MAPPED_SEGMENTS: weakref.WeakKeyDictionary[mmap.mmap, tuple[str, int]] = weakref.WeakKeyDictionary()


class OnceNotice:
    """A notice logged (``LOG.warning``) the first time only, from any thread."""

    def __init__(self):
        self._said = False
        self._lock = threading.Lock()

    def say(self, message: str) -> None:
        with self._lock:
            if self._said:
                return
            self._said = True
        LOG.warning(message)


# What making a new segment for an array may raise where the stdlib's pickling would still work: no
# room (MemoryError), or shm_open, ftruncate or mmap refused (OSError: a read-only /dev/shm, no inode
# left, no file descriptor left, EACCES, vm.max_map_count reached). Each makes the array cross
# pickled, as without the library; attaching to a segment that exists still raises.
PLACEMENT_FAILURES = (MemoryError, OSError)


def placement_failure(error: BaseException) -> str:
    """Why an array could not be placed in shared memory, in a few words for a notice."""
    if isinstance(error, MemoryError):
        return "/dev/shm had no room"
    return f"shared memory refused a new segment ({type(error).__name__}: {error})"


def pickled_as_usual(array: np.ndarray, notice: OnceNotice, error: BaseException | None = None):
    """The reduction pickle would use for ``array`` without ours (its own ``__reduce_ex__`` at
    ``multiprocessing``'s protocol), after saying once through ``notice`` that it was not shared
    (``error``: what placing it raised; None or a MemoryError: no room)."""
    if error is None or isinstance(error, MemoryError):
        notice.say(f"sharedarrays: /dev/shm had no room for an array of {format_bytes(array.nbytes)}, so it "
                   "was pickled through the pipe as multiprocessing pickles it without the reduction "
                   "(slower, same values). Said once; free /dev/shm, send smaller arrays, or give the "
                   "container a larger --shm-size.")
    else:
        notice.say(f"sharedarrays: {placement_failure(error)} for an array of {format_bytes(array.nbytes)}, "
                   "so it was pickled through the pipe as multiprocessing pickles it without the "
                   "reduction (slower, same values). Said once.")
    return array.__reduce_ex__(pickle.DEFAULT_PROTOCOL)


def bottom_of(array: np.ndarray) -> object:
    """The object at the bottom of ``array``'s ``.base`` chain: the buffer its memory belongs to.

    NumPy collapses chains of views, so this is at most a few steps; the result is not an ndarray
    (an mmap, a memoryview, bytes, a torch tensor, ...) or ``array`` itself when it owns its data.
    """
    base = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base


def mapping_under(array: np.ndarray) -> mmap.mmap | None:
    """The ``mmap`` whose memory ``array`` views, or None when its memory is not a mapping."""
    base = bottom_of(array)
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def contiguous_strides(shape: tuple[int, ...], itemsize: int, order: str = "C") -> tuple[int, ...]:
    """Byte strides of a contiguous array of ``shape`` in C (row-major) or F (column-major) order."""
    dims = list(shape) if order == "C" else list(reversed(shape))
    strides, step = [], itemsize
    for n in reversed(dims):
        strides.append(step)
        step *= max(n, 1)
    strides.reverse()
    return tuple(strides) if order == "C" else tuple(reversed(strides))


def span(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Lowest and highest byte offset (exclusive) a strided layout touches, relative to its start."""
    if 0 in shape:
        return 0, 0
    low = sum(s * (n - 1) for n, s in zip(shape, strides, strict=True) if s < 0)
    high = sum(s * (n - 1) for n, s in zip(shape, strides, strict=True) if s > 0) + itemsize
    return low, high


def refuse_objects(dtype: np.dtype) -> None:
    """Raise TypeError when ``dtype`` holds Python objects (they cannot live in shared memory)."""
    if dtype.hasobject:
        raise TypeError(
            f"dtype {dtype} holds Python objects, which cannot live in shared memory: its items are "
            "pointers into this process's heap, meaningless (or a crash) in another process. "
            "Convert strings to a fixed-width 'U' or 'S' dtype (e.g. array.astype('U20')) and "
            "numbers to a numeric dtype first."
        )


def check_room(n_bytes: int) -> None:
    """Raise MemoryError naming the sizes when /dev/shm or RAM cannot hold ``n_bytes`` more."""
    free = shm_free()
    if free is not None and n_bytes > free:
        raise MemoryError(
            f"a shared array of {format_bytes(n_bytes)} does not fit in /dev/shm: it needs "
            f"{format_bytes(n_bytes - free)} more than the {format_bytes(free)} free "
            f"(of {format_bytes(shm_size() or 0)}). "
            "Use a smaller array, free /dev/shm, or run the container with a larger "
            "--shm-size."
        )
    available = available_memory()
    if n_bytes > available:
        raise MemoryError(
            f"a shared array of {format_bytes(n_bytes)} does not fit in the memory available: it needs "
            f"{format_bytes(n_bytes - available)} more than the {format_bytes(available)} available "
            "(/dev/shm pages live in RAM)."
        )


class Mapping:
    """One mapping of a segment: the fd is closed right after mmap, the map when views are gone.

    ``create_bytes`` makes the segment (it must not exist) with every page reserved and mapped;
    if any step after the segment exists fails or is interrupted (Ctrl-C in a long
    ``posix_fallocate``), the segment is unlinked before the error goes on. ``private`` maps an
    existing segment copy-on-write (``mmap.ACCESS_COPY``): reads share its pages, writes stay in
    this process; such a mapping is not one of ours to hand on (``MAPPED_SEGMENTS`` leaves it out).
    """

    def __init__(self, name: str, create_bytes: int | None, private: bool = False):
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create_bytes is not None else 0)
        self.map: mmap.mmap | None = None
        try:
            fd = shm_open(name, flags)
        except FileNotFoundError:
            if create_bytes is not None:
                raise
            raise FileNotFoundError(
                f"no shared-memory segment named {name!r}: it was never created, or its owner "
                "already unlinked it (or exited). Attach while the owner still holds it."
            ) from None
        try:
            access = mmap.ACCESS_COPY if private else mmap.ACCESS_WRITE
            if create_bytes is not None:
                os.ftruncate(fd, create_bytes)
                _reserve(fd, create_bytes)
            self.map = _map_whole(fd, access)
            self.size = len(self.map) if self.map is not None else 0
            if self.map is not None and create_bytes is not None:
                _populate(self.map)
            if self.map is not None and not private:
                MAPPED_SEGMENTS[self.map] = (name, ctypes.addressof(ctypes.c_char.from_buffer(self.map)))
        except BaseException:
            if create_bytes is not None:
                self.close()
                unlink(name)
            raise
        finally:
            os.close(fd)

    def close(self) -> None:
        """Unmap now if no view is alive; otherwise the map goes when the last view does."""
        if self.map is not None:
            try:
                self.map.close()
            except BufferError:
                pass  # views still alive keep the mapping valid; it is released with them
            self.map = None


# Python's mmap keeps a duplicate of the file descriptor for each map unless told not to (3.13+):
# without this, every segment a process keeps mapped holds an open file, and a receiver keeping many
# arrays hits its open-file limit (``ulimit -n``) as torch's ``file_descriptor`` strategy does.
_NO_DUPLICATE_FD = {"trackfd": False} if sys.version_info >= (3, 13) else {}


def _map_whole(fd: int, access: int) -> mmap.mmap | None:
    """The whole of the segment open as ``fd`` mapped (``mmap`` reads its size itself: one system
    call less than asking first), or None when it holds no bytes (nothing to map). From Python 3.13
    the map keeps no duplicate of ``fd``: a mapped segment holds no open file (before 3.13, one)."""
    try:
        return mmap.mmap(fd, 0, access=access, **_NO_DUPLICATE_FD)
    except ValueError:  # "cannot mmap an empty file"
        if os.fstat(fd).st_size == 0:
            return None
        raise


NO_RESERVE_NOTICE = OnceNotice()


def _reserve(fd: int, n_bytes: int) -> None:
    """Reserve every page of a new segment now, so a full /dev/shm is a MemoryError, not SIGBUS.

    Where there is no ``os.posix_fallocate`` (macOS), the segment keeps the size ``ftruncate`` gave
    it, as ``multiprocessing.shared_memory`` does everywhere: pages are taken at first write, so a
    shared-memory space that runs out is not caught here. Said once per process."""
    if not hasattr(os, "posix_fallocate"):
        NO_RESERVE_NOTICE.say("sharedarrays: this platform has no os.posix_fallocate, so new segments are "
                              "sized with ftruncate only, as multiprocessing.shared_memory does: running "
                              "out of shared memory is not caught when a segment is made. Said once.")
        return
    try:
        os.posix_fallocate(fd, 0, n_bytes)
    except OSError as error:
        raise MemoryError(
            f"/dev/shm could not reserve {format_bytes(n_bytes)} ({error.strerror}); "
            f"{format_bytes(shm_free() or 0)} free. Use a smaller array."
        ) from None


def _populate(segment_map: mmap.mmap) -> None:
    if not hasattr(segment_map, "madvise"):
        return
    try:
        segment_map.madvise(MADV_POPULATE_WRITE)
    except OSError:
        pass  # older kernel: pages are mapped at first write instead


class ExitHook:
    """``callback`` run once when this process exits, also in a child that leaves through
    ``os._exit`` (no ``atexit``): a ``multiprocessing.util`` exit hook, made again in a forked
    child (which must not trust the one it inherited: multiprocessing clears a child's hooks)."""

    def __init__(self, callback, exitpriority: int):
        self._callback = callback
        self._exitpriority = exitpriority
        self._hook: util.Finalize | None = None
        self._pid = 0

    def ensure(self) -> None:
        """Make sure the hook is in place in this process."""
        if self._hook is None or not self._hook.still_active() or self._pid != os.getpid():
            self._hook = util.Finalize(None, self._callback, exitpriority=self._exitpriority)
            self._pid = os.getpid()
