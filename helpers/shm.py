"""An ndarray in a named POSIX shared-memory segment that other processes attach by handle.

``SharedNDArray.create(shape, dtype)`` or ``SharedNDArray.copy_of(array)`` makes a segment in
``/dev/shm`` (owner-only permissions, pages reserved up front so a full ``/dev/shm`` raises
``MemoryError`` instead of killing the writer with SIGBUS) and owns it: ``unlink()`` (or leaving
its ``with`` block) removes it. ``.handle`` is a small picklable description; another process
calls ``attach(handle)`` to get a view without copying. Attaching never registers the segment with
``multiprocessing``'s resource tracker, so an attaching process neither unlinks it nor warns when
it exits (the Python 3.11/3.12 pitfall that ``track=False`` fixes on 3.13+). Segment names carry
our prefix and the creator's pid, so ``sweep()`` can remove what a killed owner left behind.
"""

from __future__ import annotations

import _posixshmem
import mmap
import os
import secrets
import stat
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import resource_tracker

import numpy as np

from helpers import system
from helpers.leftovers import SEGMENT_PREFIX, SHM_DIR
from helpers.units import format_bytes

OWNER_ONLY = stat.S_IRUSR | stat.S_IWUSR  # 0o600: no other user can read or write the segment
# madvise(MADV_POPULATE_WRITE), Linux 5.14+: map every page of a new segment in one call instead of
# one page fault per 4 KiB at first write (about a third less time to fill a new segment here).
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)

# Every mapping this process made of one of our segments: map -> (segment name, base address).
# handle_of() uses it to tell an array that already lives in shared memory from a private one.
_MAPPED_SEGMENTS: weakref.WeakKeyDictionary[mmap.mmap, tuple[str, int]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ArrayHandle:
    """What another process needs to view a shared array: segment name, shape, dtype, layout.

    ``strides`` and ``offset`` (bytes from the segment's start) let a handle describe a view
    into a segment, e.g. a Fortran-ordered array or one part of a larger segment.
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...]
    offset: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes of array data the handle describes."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _refuse_objects(dtype: np.dtype) -> None:
    if dtype.hasobject:
        raise TypeError(
            f"dtype {dtype} holds Python objects, which cannot live in shared memory: its items are "
            "pointers into this process's heap, meaningless (or a crash) in another process. "
            "Convert strings to a fixed-width 'U' or 'S' dtype (e.g. array.astype('U20')) and "
            "numbers to a numeric dtype first."
        )


def _span(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Lowest and highest byte offset (exclusive) a strided layout touches, relative to its start."""
    if 0 in shape:
        return 0, 0
    low = sum(s * (n - 1) for n, s in zip(shape, strides, strict=True) if s < 0)
    high = sum(s * (n - 1) for n, s in zip(shape, strides, strict=True) if s > 0) + itemsize
    return low, high


def _new_name() -> str:
    return f"{SEGMENT_PREFIX}{os.getpid()}_{secrets.token_hex(6)}"


def _check_room(n_bytes: int) -> None:
    """Raise MemoryError naming the sizes when /dev/shm or RAM cannot hold ``n_bytes`` more."""
    free = system.shm_free()
    if free is not None and n_bytes > free:
        raise MemoryError(
            f"a shared array of {format_bytes(n_bytes)} does not fit in /dev/shm: "
            f"{format_bytes(free)} free of {format_bytes(system.shm_size() or 0)}. "
            "Use a smaller array (LAB_ARRAY_MB), free /dev/shm, or run the container with a larger "
            "--shm-size."
        )
    available = system.available_memory()
    if n_bytes > available:
        raise MemoryError(
            f"a shared array of {format_bytes(n_bytes)} does not fit in the memory available "
            f"({format_bytes(available)}): /dev/shm pages live in RAM."
        )


class _Mapping:
    """One mapping of a segment: the fd is closed right after mmap, the map when views are gone."""

    def __init__(self, name: str, create_bytes: int | None):
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create_bytes is not None else 0)
        try:
            fd = _posixshmem.shm_open("/" + name, flags, mode=OWNER_ONLY)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no shared-memory segment named {name!r}: it was never created, or its owner "
                "already unlinked it (or exited). Attach while the owner still holds it."
            ) from None
        try:
            if create_bytes is not None:
                os.ftruncate(fd, create_bytes)
                try:
                    os.posix_fallocate(fd, 0, create_bytes)  # reserve every page now, not at first write
                except OSError as error:
                    _posixshmem.shm_unlink("/" + name)
                    raise MemoryError(
                        f"/dev/shm could not reserve {format_bytes(create_bytes)} ({error.strerror}); "
                        f"{format_bytes(system.shm_free() or 0)} free. Use a smaller array."
                    ) from None
            self.size = os.fstat(fd).st_size
            self.map = mmap.mmap(fd, self.size) if self.size else None
            if self.map is not None and create_bytes is not None:
                _populate(self.map)
            if self.map is not None:
                _MAPPED_SEGMENTS[self.map] = (name, np.frombuffer(self.map, np.uint8).ctypes.data)
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


def _populate(segment_map: mmap.mmap) -> None:
    if not hasattr(segment_map, "madvise"):
        return
    try:
        segment_map.madvise(MADV_POPULATE_WRITE)
    except OSError:
        pass  # older kernel: pages are mapped at first write instead


def _view(mapping: _Mapping, handle: ArrayHandle) -> np.ndarray:
    _refuse_objects(handle.dtype)
    low, high = _span(handle.shape, handle.strides, handle.dtype.itemsize)
    if handle.offset + low < 0 or handle.offset + high > mapping.size:
        raise ValueError(
            f"handle does not fit segment {handle.name!r}: shape {handle.shape} of {handle.dtype} "
            f"with strides {handle.strides} at offset {handle.offset} needs bytes "
            f"{handle.offset + low}..{handle.offset + high}, the segment has {mapping.size}"
        )
    if mapping.map is None or handle.nbytes == 0:
        return np.ndarray(handle.shape, dtype=handle.dtype)
    # np.frombuffer keeps a memoryview as the base, and the memoryview holds a buffer export on
    # the mmap, so the map cannot be closed under a live view (mmap.close raises BufferError
    # instead of leaving the view pointing at unmapped memory: a segfault on the next access).
    # np.ndarray(buffer=mmap) would not: it keeps the mmap itself and releases the export.
    raw_bytes = np.frombuffer(mapping.map, dtype=np.uint8)
    return np.ndarray(handle.shape, handle.dtype, buffer=raw_bytes, offset=handle.offset,
                      strides=handle.strides)


class SharedNDArray:
    """An ndarray living in a shared-memory segment this object owns (see the module docstring)."""

    def __init__(self, mapping: _Mapping, handle: ArrayHandle, owner: bool):
        self._mapping = mapping
        self._array: np.ndarray | None = _view(mapping, handle)
        self.handle = handle
        self.owner = owner
        self._unlinked = False

    @classmethod
    def create(cls, shape: int | tuple[int, ...], dtype=np.float64, order: str = "C") -> SharedNDArray:
        """A new segment holding an array of ``shape`` and ``dtype`` (contents zeroed)."""
        shape = (shape,) if isinstance(shape, int | np.integer) else tuple(int(n) for n in shape)
        dtype = np.dtype(dtype)
        _refuse_objects(dtype)
        if order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', got {order!r}")
        strides = _contiguous_strides(shape, dtype.itemsize, order)
        n_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        segment_bytes = max(n_bytes, 1)  # POSIX segments cannot be empty
        _check_room(segment_bytes)
        name = _new_name()
        # Registered before it exists, so a kill at any moment after creation is covered: the
        # tracker unlinks the segment if this process dies without unlinking it.
        resource_tracker.register("/" + name, "shared_memory")
        try:
            mapping = _Mapping(name, create_bytes=segment_bytes)
        except BaseException:
            resource_tracker.unregister("/" + name, "shared_memory")
            raise
        return cls(mapping, ArrayHandle(name, shape, dtype, strides), owner=True)

    @classmethod
    def copy_of(cls, array: np.ndarray) -> SharedNDArray:
        """A new segment holding a copy of ``array`` (views are copied contiguous; F order kept)."""
        array = np.asanyarray(array)
        _refuse_objects(array.dtype)
        order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
        shared = cls.create(array.shape, array.dtype, order=order)
        try:
            np.copyto(shared.array, array, casting="no")
        except BaseException:
            shared.close()
            shared.unlink()
            raise
        return shared

    @property
    def array(self) -> np.ndarray:
        """The shared view (writable). Raises ValueError once closed."""
        if self._array is None:
            raise ValueError(f"shared array {self.handle.name!r} is closed")
        return self._array

    @property
    def name(self) -> str:
        """The segment's name in /dev/shm."""
        return self.handle.name

    def mapped_buffer(self) -> mmap.mmap:
        """This process's mapping of the whole segment (views made from it keep it mapped)."""
        if self._array is None or self._mapping.map is None:
            raise ValueError(f"shared array {self.handle.name!r} is closed")
        return self._mapping.map

    def close(self) -> None:
        """Stop using the segment in this process (views still alive keep their mapping)."""
        self._array = None
        self._mapping.close()

    def unlink(self) -> None:
        """Remove the segment's name (owner only): memory is freed once no process maps it."""
        if not self.owner:
            raise PermissionError("only the process that created a shared array unlinks it")
        if self._unlinked:
            return
        self._unlinked = True
        try:
            _posixshmem.shm_unlink("/" + self.handle.name)
        except FileNotFoundError:
            pass  # already removed (e.g. by sweep)
        resource_tracker.unregister("/" + self.handle.name, "shared_memory")

    def __enter__(self) -> SharedNDArray:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
        if self.owner:
            self.unlink()

    def __repr__(self) -> str:
        state = "closed" if self._array is None else "open"
        return (f"SharedNDArray({self.handle.name!r}, shape={self.handle.shape}, "
                f"dtype={self.handle.dtype}, {state})")


def _contiguous_strides(shape: tuple[int, ...], itemsize: int, order: str) -> tuple[int, ...]:
    dims = list(shape) if order == "C" else list(reversed(shape))
    strides, step = [], itemsize
    for n in reversed(dims):
        strides.append(step)
        step *= max(n, 1)
    strides.reverse()
    return tuple(strides) if order == "C" else tuple(reversed(strides))


@contextmanager
def attach(handle: ArrayHandle) -> Iterator[np.ndarray]:
    """View the shared array a handle describes, without copying; never unlinks, never warns.

    Raises FileNotFoundError when the segment is gone and ValueError when the handle does not
    fit it. Leaving the block closes this process's mapping (views kept alive keep it open).
    """
    if not isinstance(handle, ArrayHandle):
        raise TypeError(f"attach() takes an ArrayHandle (SharedNDArray.handle), got {type(handle).__name__}")
    mapping = _Mapping(handle.name, create_bytes=None)
    try:
        shared = SharedNDArray(mapping, handle, owner=False)
    except BaseException:
        mapping.close()
        raise
    try:
        yield shared.array
    finally:
        shared.close()


def handle_of(array: np.ndarray) -> ArrayHandle | None:
    """The handle of the shared segment ``array`` views, or None when its memory is private.

    Follows ``.base`` to the buffer at the bottom; if that is a mapping of one of our segments
    (made by ``SharedNDArray`` or ``attach`` in this process) whose name still exists, the handle
    carries the array's own shape, strides and byte offset, so another process can attach exactly
    this view, zero-copy.
    """
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    if not isinstance(base, mmap.mmap):
        return None
    found = _MAPPED_SEGMENTS.get(base)
    if found is None or array.dtype.hasobject:
        return None
    name, address = found
    if not (SHM_DIR / name).exists():
        return None  # unlinked: the memory is still mapped here, but no other process can attach it
    offset = array.ctypes.data - address
    return ArrayHandle(name, tuple(array.shape), array.dtype, tuple(array.strides), offset)


def _creator_pid(name: str) -> int | None:
    try:
        return int(name[len(SEGMENT_PREFIX):].split("_", 1)[0])
    except ValueError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(everything: bool = False) -> list[str]:
    """Remove our segments whose creating process is dead (all of ours if ``everything``).

    Returns the names removed. Use it after a crash: a SIGKILLed owner cannot unlink.
    """
    removed = []
    try:
        names = sorted(os.listdir(SHM_DIR))
    except OSError:
        return removed
    for name in names:
        if not name.startswith(SEGMENT_PREFIX):
            continue
        pid = _creator_pid(name)
        if not everything and pid is not None and _alive(pid):
            continue
        try:
            _posixshmem.shm_unlink("/" + name)
            removed.append(name)
        except FileNotFoundError:
            continue
    return removed
