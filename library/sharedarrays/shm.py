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

import mmap
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import resource_tracker

import numpy as np
from numpy.typing import DTypeLike

from sharedarrays._segments import (
    MAPPED_SEGMENTS,
    Mapping,
    check_room,
    contiguous_strides,
    creator_namespace,
    creator_pid,
    forget_in_resource_tracker,
    mapping_under,
    new_name,
    process_alive,
    refuse_objects,
    segment_names,
    span,
    unlink,
)
from sharedarrays.room import SHM_DIR, pid_namespace

__all__ = ["ArrayHandle", "SharedNDArray", "attach", "handle_of", "process_alive", "sweep"]


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


def _refuse_masked(array: np.ndarray, who: str) -> None:
    """TypeError for a masked array: a segment (and a handle) holds its values only."""
    if isinstance(array, np.ma.MaskedArray):
        raise TypeError(
            f"{who} got a masked array: a segment holds its values only, so the mask would be "
            "silently lost. Share the values and the mask as two arrays "
            "(copy_of(np.ma.getdata(a)), copy_of(np.ma.getmaskarray(a))), or fill the masked "
            "items first (copy_of(a.filled(value)))."
        )


def _view(mapping: Mapping, handle: ArrayHandle) -> np.ndarray:
    refuse_objects(handle.dtype)
    low, high = span(handle.shape, handle.strides, handle.dtype.itemsize)
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

    def __init__(self, mapping: Mapping, handle: ArrayHandle, owner: bool, array_type: type = np.ndarray):
        self._mapping = mapping
        view = _view(mapping, handle)
        self._array: np.ndarray | None = view if array_type is np.ndarray else view.view(array_type)
        self.handle = handle
        self.owner = owner
        self._unlinked = False

    @classmethod
    def create(cls, shape: int | tuple[int, ...], dtype: DTypeLike = np.float64,
               order: str = "C") -> SharedNDArray:
        """A new segment holding an array of ``shape`` and ``dtype`` (contents zeroed).

        Everything is checked before the segment exists (ValueError for a negative dimension or an
        unknown order, TypeError for an object dtype, MemoryError when it does not fit), and a
        failure after it exists unlinks it: a failed ``create`` leaves nothing in /dev/shm.
        """
        shape = (shape,) if isinstance(shape, int | np.integer) else tuple(int(n) for n in shape)
        if any(n < 0 for n in shape):
            raise ValueError(f"negative dimensions are not allowed: shape {shape}")
        dtype = np.dtype(dtype)
        refuse_objects(dtype)
        if order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', got {order!r}")
        strides = contiguous_strides(shape, dtype.itemsize, order)
        n_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        segment_bytes = max(n_bytes, 1)  # POSIX segments cannot be empty
        check_room(segment_bytes)
        name = new_name()
        # Registered before it exists, so a kill at any moment after creation is covered: the
        # tracker unlinks the segment if this process dies without unlinking it.
        resource_tracker.register("/" + name, "shared_memory")
        try:
            mapping = Mapping(name, create_bytes=segment_bytes)
        except BaseException:
            resource_tracker.unregister("/" + name, "shared_memory")
            raise
        try:
            return cls(mapping, ArrayHandle(name, shape, dtype, strides), owner=True)
        except BaseException:
            mapping.close()
            unlink(name)
            resource_tracker.unregister("/" + name, "shared_memory")
            raise

    @classmethod
    def copy_of(cls, array: np.ndarray) -> SharedNDArray:
        """A new segment holding a copy of ``array`` (views are copied contiguous; F order kept).

        ``.array`` keeps an ndarray subclass's type (``np.recarray``, ``np.matrix``: a view of the
        segment as that type); ``attach(handle)`` in another process gives a plain ndarray of the same
        dtype. An ``np.memmap`` comes back a plain ndarray: the copy is in memory, not in its file.
        Raises TypeError for a masked array: a segment holds the values only, the mask would be lost.
        """
        array = np.asanyarray(array)
        _refuse_masked(array, "SharedNDArray.copy_of()")
        refuse_objects(array.dtype)
        array_type = np.ndarray if isinstance(array, np.memmap) else type(array)
        order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
        shared = cls.create(array.shape, array.dtype, order=order)
        try:
            np.copyto(shared.array, array, casting="no")
            if array_type is not np.ndarray:
                shared._array = shared.array.view(array_type)
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
        unlink(self.handle.name)  # False: already removed (e.g. by sweep)
        resource_tracker.unregister("/" + self.handle.name, "shared_memory")

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """``np.asarray(shared)``: the shared view itself (no copy), or a copy when asked for one."""
        array = self.array
        if copy:
            return np.array(array, dtype=dtype, copy=True)
        if dtype is not None and np.dtype(dtype) != array.dtype:
            if copy is False:
                raise ValueError(f"a {np.dtype(dtype)} array of a {array.dtype} SharedNDArray needs a copy")
            return array.astype(dtype)
        return array

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


@contextmanager
def attach(handle: ArrayHandle) -> Iterator[np.ndarray]:
    """View the shared array a handle describes, without copying; never unlinks, never warns.

    Raises FileNotFoundError when the segment is gone and ValueError when the handle does not
    fit it. Leaving the block closes this process's mapping (views kept alive keep it open).
    """
    if not isinstance(handle, ArrayHandle):
        raise TypeError(f"attach() takes an ArrayHandle (SharedNDArray.handle), got {type(handle).__name__}")
    mapping = Mapping(handle.name, create_bytes=None)
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
    _refuse_masked(array, "handle_of()")
    segment_map = mapping_under(array)
    if segment_map is None:
        return None
    found = MAPPED_SEGMENTS.get(segment_map)
    if found is None or array.dtype.hasobject:
        return None
    name, address = found
    if not (SHM_DIR / name).exists():
        return None  # unlinked: the memory is still mapped here, but no other process can attach it
    offset = array.ctypes.data - address
    return ArrayHandle(name, tuple(array.shape), array.dtype, tuple(array.strides), offset)


MP_SEMAPHORE_PREFIX = "sem.mp-"  # multiprocessing's named semaphores (queues, locks), spawn and forkserver


def sweep(everything: bool = False) -> list[str]:
    """Remove our segments whose creating process is dead (all of ours if ``everything``), and
    ``multiprocessing``'s named semaphores that no process has open any more.

    Returns the names removed. Use it after a crash: a SIGKILLed owner cannot unlink, and when the
    whole program was killed, its resource tracker (which would have unlinked both) died with it.
    A segment made in another pid namespace that shares this /dev/shm (a container started with
    ``--ipc=host``, a pod's containers) is left alone unless ``everything``: its creator's pid
    means nothing here. A removed segment that this program's resource tracker knows of (a killed
    worker's) is struck from its list, so it does not warn of a leak at exit.
    Under spawn and forkserver every queue and lock of a pool is a ``sem.mp-*`` file in /dev/shm
    with no owner in its name; one of this user's is an orphan when no process maps it
    (``/proc/*/maps``). A process whose maps this user may not read is not one of a pool's (those
    run as this user and are readable to it) and is not looked at, nor are processes /proc does
    not show (another container sharing this /dev/shm): run ``sweep()`` where no such process uses
    ``multiprocessing``'s semaphores, as after a crash on your own machine. A file this user may not remove
    (another user's, in a shared sticky /dev/shm) is skipped, and one ``RuntimeWarning`` names every
    file skipped so.
    """
    removed, not_allowed = [], []
    here = pid_namespace()
    for name in segment_names():
        pid, namespace = creator_pid(name), creator_namespace(name)
        if not everything and namespace is not None and namespace != here:
            continue  # another pid namespace's: its creator cannot be looked up from here
        if not everything and pid is not None and process_alive(pid):
            continue
        try:
            if unlink(name):
                removed.append(name)
                forget_in_resource_tracker(name)
        except PermissionError:
            not_allowed.append(name)
    for name in orphaned_semaphores():
        try:
            (SHM_DIR / name).unlink()
            removed.append(name)
        except FileNotFoundError:
            pass
        except PermissionError:
            not_allowed.append(name)
    if not_allowed:
        warnings.warn(f"sweep() may not remove {len(not_allowed)} file(s) of another user, left in "
                      f"place: {', '.join(not_allowed)}", RuntimeWarning, stacklevel=2)
    return removed


def orphaned_semaphores() -> list[str]:
    """Names of this user's ``multiprocessing`` semaphores in /dev/shm that no process maps (empty
    where /proc cannot tell)."""
    candidates = {}
    for path in SHM_DIR.glob(MP_SEMAPHORE_PREFIX + "*"):
        try:
            found = path.stat()
        except FileNotFoundError:
            continue
        if found.st_uid == os.geteuid():
            candidates[path.name] = (os.major(found.st_dev), os.minor(found.st_dev), found.st_ino)
    if not candidates:
        return []
    mapped = _files_mapped_by_readable_processes()
    if mapped is None:
        return []
    return sorted(name for name, file_id in candidates.items() if file_id not in mapped)


def _files_mapped_by_readable_processes() -> set[tuple[int, int, int]] | None:
    """(device major, minor, inode) of every file mapped now by a process whose ``/proc/<pid>/maps``
    this user may read; None where there is no /proc. Inodes, not paths: glibc maps a new
    semaphore under a temporary name, then renames it, so its path in the maps is not its name."""
    try:
        pids = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except FileNotFoundError:
        return None
    mapped: set[tuple[int, int, int]] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as maps:
                for line in maps:
                    fields = line.split(None, 5)  # address, perms, offset, dev, inode, path
                    if len(fields) == 6 and fields[4] != "0":
                        major, minor = fields[3].split(":")
                        mapped.add((int(major, 16), int(minor, 16), int(fields[4])))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # it ended meanwhile, or it is not this user's to read
    return mapped
