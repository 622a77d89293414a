"""What the library's parts share: segment names, creating and mapping a segment, liveness, layouts.

Private to ``sharedarrays``: ``shm``, ``transit``, ``executor``, ``lent_segments`` and
``torch_reduction`` build on these; nothing outside the library imports them. Segment names carry
our prefix, the creating process's pid and its pid namespace (``sal_<pid>_ns<namespace>_<random>``),
so ``sweep()`` can tell a dead owner's segments from a live one's, and leaves alone those of
processes in another pid namespace, whose pids mean nothing here.
"""

from __future__ import annotations

import logging
import mmap
import os
import pickle
import secrets
import stat
import sys
import threading
import weakref
from multiprocessing import resource_tracker, util

try:
    import _posixshmem  # CPython's shm_open/shm_unlink; absent where there is no POSIX shared memory
except ImportError:
    _posixshmem = None

import numpy as np

from sharedarrays.room import SEGMENT_PREFIX, SHM_DIR, available_memory, creator_prefix, shm_free, shm_size
from sharedarrays.units import format_bytes

OWNER_ONLY = stat.S_IRUSR | stat.S_IWUSR  # 0o600: no other user can read or write the segment
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


def new_name() -> str:
    """A fresh segment name: our prefix, this process's pid and pid namespace, 12 random hex digits."""
    return f"{creator_prefix()}{secrets.token_hex(6)}"


def creator_pid(name: str) -> int | None:
    """The pid written into one of our segment names, or None when the name is not ours."""
    if not name.startswith(SEGMENT_PREFIX):
        return None
    try:
        return int(name[len(SEGMENT_PREFIX):].split("_", 1)[0])
    except ValueError:
        return None


def creator_namespace(name: str) -> str | None:
    """The pid namespace tag written into one of our segment names (``room.pid_namespace()`` of
    its creator), or None for a name without one."""
    fields = name[len(SEGMENT_PREFIX):].split("_")
    if name.startswith(SEGMENT_PREFIX) and len(fields) >= 3 and fields[1].startswith("ns"):
        return fields[1][2:]
    return None


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs in this pid namespace; one that exited but is not reaped yet (a
    zombie) is dead. The kernel answers (``kill(pid, 0)``, on every POSIX system); /proc, where
    there is one, only tells a zombie from a running process."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except OverflowError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            return stat_file.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except FileNotFoundError:  # it ended since kill() answered, or this /proc shows no pids
        return not os.path.isdir(f"/proc/{os.getpid()}")
    except (OSError, IndexError):
        return True  # no readable /proc: kill() is the answer


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


def pickled_as_usual(array: np.ndarray, notice: OnceNotice):
    """The reduction pickle would use for ``array`` without ours (its own ``__reduce_ex__`` at
    ``multiprocessing``'s protocol), after saying once through ``notice`` that it was not shared."""
    notice.say(f"sharedarrays: /dev/shm had no room for an array of {format_bytes(array.nbytes)}, so it "
               "was pickled through the pipe as multiprocessing pickles it without the reduction "
               "(slower, same values). Said once; free /dev/shm, send smaller arrays, or give the "
               "container a larger --shm-size.")
    return array.__reduce_ex__(pickle.DEFAULT_PROTOCOL)


def forget_in_resource_tracker(name: str) -> None:
    """Make this program's resource tracker forget segment ``name`` if it tracks it (a process of
    this program registered it, then died without unlinking it): registering, then unregistering,
    strikes a name it knew and leaves one it did not know as it was (unregistering an unknown name
    alone makes the tracker print a KeyError). Starts no tracker where this process has none."""
    tracker = getattr(resource_tracker, "_resource_tracker", None)
    if getattr(tracker, "_fd", None) is None:
        return
    resource_tracker.register("/" + name, "shared_memory")
    resource_tracker.unregister("/" + name, "shared_memory")


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
            f"a shared array of {format_bytes(n_bytes)} does not fit in /dev/shm: "
            f"{format_bytes(free)} free of {format_bytes(shm_size() or 0)}. "
            "Use a smaller array (LAB_ARRAY_MB), free /dev/shm, or run the container with a larger "
            "--shm-size."
        )
    available = available_memory()
    if n_bytes > available:
        raise MemoryError(
            f"a shared array of {format_bytes(n_bytes)} does not fit in the memory available "
            f"({format_bytes(available)}): /dev/shm pages live in RAM."
        )


def require_posix_shared_memory() -> None:
    """Raise a clear error naming what is missing where POSIX shared memory cannot work as we need.

    The library needs ``shm_open`` (CPython's ``_posixshmem``) and ``os.posix_fallocate`` (to
    reserve a new segment's pages, so that a full /dev/shm is a MemoryError instead of SIGBUS).
    Both exist on Linux, the only platform the course tests; macOS lacks ``posix_fallocate``,
    Windows both.
    """
    missing = [what for what, present in (("POSIX shared memory (shm_open, CPython's _posixshmem)",
                                           _posixshmem is not None),
                                          ("os.posix_fallocate", hasattr(os, "posix_fallocate")),
                                          (f"a {SHM_DIR} folder", os.path.isdir(SHM_DIR)))
               if not present]
    if missing:
        raise OSError(f"sharedarrays needs {' and '.join(missing)}, which this platform ({sys.platform}) "
                      "does not have; it is tested on Linux only. Use multiprocessing.shared_memory "
                      "directly (it does not reserve pages up front), or run on Linux.")


def open_existing(name: str) -> int:
    """A read-write file descriptor of existing segment ``name`` (FileNotFoundError if it is gone)."""
    require_posix_shared_memory()
    return _posixshmem.shm_open("/" + name, os.O_RDWR, 0)


def unlink(name: str) -> bool:
    """Remove segment ``name``; False when it was already gone."""
    require_posix_shared_memory()
    try:
        _posixshmem.shm_unlink("/" + name)
    except FileNotFoundError:
        return False
    return True


class Mapping:
    """One mapping of a segment: the fd is closed right after mmap, the map when views are gone.

    ``create_bytes`` makes the segment (it must not exist) with every page reserved and mapped;
    if any step after the segment exists fails or is interrupted (Ctrl-C in a long
    ``posix_fallocate``), the segment is unlinked before the error goes on. ``private`` maps an
    existing segment copy-on-write (``mmap.ACCESS_COPY``): reads share its pages, writes stay in
    this process; such a mapping is not one of ours to hand on (``MAPPED_SEGMENTS`` leaves it out).
    """

    def __init__(self, name: str, create_bytes: int | None, private: bool = False):
        require_posix_shared_memory()
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create_bytes is not None else 0)
        self.map: mmap.mmap | None = None
        try:
            fd = _posixshmem.shm_open("/" + name, flags, mode=OWNER_ONLY)
        except FileNotFoundError:
            if create_bytes is not None:
                raise
            raise FileNotFoundError(
                f"no shared-memory segment named {name!r}: it was never created, or its owner "
                "already unlinked it (or exited). Attach while the owner still holds it."
            ) from None
        try:
            if create_bytes is not None:
                os.ftruncate(fd, create_bytes)
                _reserve(fd, create_bytes)
            self.size = os.fstat(fd).st_size
            access = mmap.ACCESS_COPY if private else mmap.ACCESS_WRITE
            self.map = mmap.mmap(fd, self.size, access=access) if self.size else None
            if self.map is not None and create_bytes is not None:
                _populate(self.map)
            if self.map is not None and not private:
                MAPPED_SEGMENTS[self.map] = (name, np.frombuffer(self.map, np.uint8).ctypes.data)
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


def _reserve(fd: int, n_bytes: int) -> None:
    """Reserve every page of a new segment now, so a full /dev/shm is a MemoryError, not SIGBUS."""
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


def segment_names() -> list[str]:
    """Names of our segments now in /dev/shm (sorted), or [] where there is no such folder."""
    try:
        return sorted(name for name in os.listdir(SHM_DIR) if name.startswith(SEGMENT_PREFIX))
    except OSError:
        return []


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
