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

import math
import mmap
import operator
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import resource_tracker

import numpy as np
from numpy.typing import DTypeLike

from sharedarrays._names import segment_exists
from sharedarrays._segments import (
    MAPPED_SEGMENTS,
    Mapping,
    check_room,
    contiguous_strides,
    mapping_under,
    new_name,
    process_alive,
    refuse_objects,
    span,
    tell_tracker,
    unlink,
)
from sharedarrays.cleanup import sweep  # noqa: F401 - where it was before it got a module of its own

__all__ = ["ArrayHandle", "SharedNDArray", "attach", "handle_of", "process_alive", "sweep"]


LARGEST_ARRAY_BYTES = 2**63 - 1  # what an int64 byte count holds (NumPy's and the kernel's sizes)


def array_bytes(shape: tuple[int, ...], itemsize: int) -> int:
    """Bytes of an array of ``shape`` and ``itemsize``, in Python's integers (never wrapped); raises
    ValueError past ``LARGEST_ARRAY_BYTES``, which no segment can hold."""
    n_bytes = math.prod(shape) * itemsize
    if n_bytes > LARGEST_ARRAY_BYTES:
        raise ValueError(f"an array of shape {shape} and {itemsize}-byte items would hold {n_bytes} bytes, "
                         "more than any segment can (2**63 - 1)")
    return n_bytes


@dataclass(frozen=True)
class ArrayHandle:
    """What another process needs to view a shared array: segment name, shape, dtype, layout.

    ``strides`` and ``offset`` (bytes from the segment's start) let a handle describe a view
    into a segment, e.g. a Fortran-ordered array or one part of a larger segment. Checked when made:
    TypeError or ValueError for a name that is not a string, a negative dimension, strides that do
    not match the shape, a negative offset, or a byte count no segment can hold.
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...]
    offset: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"an ArrayHandle's name is a segment's name (a str), got {self.name!r}")
        shape, strides = tuple(map(operator.index, self.shape)), tuple(map(operator.index, self.strides))
        if any(n < 0 for n in shape):
            raise ValueError(f"negative dimensions are not allowed: shape {shape}")
        if len(strides) != len(shape):
            raise ValueError(f"strides {strides} do not match shape {shape}")
        offset = operator.index(self.offset)
        if offset < 0:
            raise ValueError(f"an ArrayHandle's offset is bytes from the segment's start, got {offset}")
        dtype = np.dtype(self.dtype)
        array_bytes(shape, dtype.itemsize)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "strides", strides)
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "dtype", dtype)

    @classmethod
    def _of_array(cls, name: str, array: np.ndarray, offset: int) -> ArrayHandle:
        """The handle of ``array`` at ``offset`` bytes into segment ``name``, unchecked: a live
        ndarray's shape, dtype and strides are valid already (a round trip's hot path)."""
        return _trusted_handle(name, array.shape, array.dtype, array.strides, offset)

    def __reduce__(self):
        """Pickled as its fields (the dtype as ``wire_dtype`` gives it); unpickled unchecked, as
        every pickle is trusted (it was checked when it was made, and unpickling runs whatever a
        pickle says anyway)."""
        return _trusted_handle, (self.name, self.shape, wire_dtype(self.dtype), self.strides, self.offset)

    @property
    def nbytes(self) -> int:
        """Bytes of array data the handle describes."""
        return math.prod(self.shape) * self.dtype.itemsize


def wire_dtype(dtype: np.dtype) -> np.dtype | str:
    """What to pickle for ``dtype``: its string (``'<f8'``, ``'<U10'``), which ``np.dtype`` turns
    back into an equal dtype and which pickles and loads several times faster than the dtype itself,
    or the dtype where the string would lose something (fields, a subarray, metadata)."""
    if dtype.fields is None and dtype.subdtype is None and dtype.metadata is None:
        return dtype.str
    return dtype


def _trusted_handle(name: str, shape: tuple[int, ...], dtype: np.dtype | str, strides: tuple[int, ...],
                    offset: int) -> ArrayHandle:
    """An ``ArrayHandle`` of fields known to be valid, made without ``__post_init__``'s checks."""
    handle = object.__new__(ArrayHandle)
    set_field = object.__setattr__
    set_field(handle, "name", name)
    set_field(handle, "shape", tuple(shape))
    set_field(handle, "dtype", np.dtype(dtype))
    set_field(handle, "strides", tuple(strides))
    set_field(handle, "offset", offset)
    return handle


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
    """An ndarray living in a shared-memory segment (see the module docstring).

    ``SharedNDArray.create`` and ``SharedNDArray.copy_of`` make a segment this object owns;
    ``SharedNDArray(handle)`` attaches to an existing one without owning it, as
    ``SharedMemory(name)`` does (it never unlinks it). It pickles as such a non-owning reference to
    the same segment, as ``SharedMemory`` pickles by name: passed to ``submit``, ``Process(args=...)``
    or a queue, the other process attaches; the segment must still exist when it is unpickled.
    """

    def __init__(self, handle: ArrayHandle):
        if not isinstance(handle, ArrayHandle):
            raise TypeError(f"SharedNDArray() attaches to an ArrayHandle (another SharedNDArray's .handle); "
                            f"got {type(handle).__name__}. To make one: SharedNDArray.create(shape, dtype) "
                            "or SharedNDArray.copy_of(array).")
        mapping = Mapping(handle.name, create_bytes=None)
        try:
            self._start(mapping, handle, owner=False)
        except BaseException:
            mapping.close()
            raise

    @classmethod
    def _over(cls, mapping: Mapping, handle: ArrayHandle, owner: bool) -> SharedNDArray:
        shared = cls.__new__(cls)
        shared._start(mapping, handle, owner)
        return shared

    def _start(self, mapping: Mapping, handle: ArrayHandle, owner: bool) -> None:
        self._mapping = mapping
        self._array: np.ndarray | None = _view(mapping, handle)
        self.handle = handle
        self.owner = owner
        self._unlinked = False
        self._tracked = False  # registered with the resource tracker (create(track=True) sets it)

    def __reduce__(self):
        """A non-owning reference to the same segment (its handle): see the class docstring."""
        return (SharedNDArray, (self.handle,))

    @classmethod
    def create(cls, shape: int | tuple[int, ...], dtype: DTypeLike = np.float64,
               order: str = "C", track: bool = True) -> SharedNDArray:
        """A new segment holding an array of ``shape`` and ``dtype`` (contents zeroed).

        Everything is checked before the segment exists (ValueError for a negative dimension, a size
        no segment can hold or an unknown order, TypeError for an object dtype, MemoryError when it
        does not fit), and a failure after it exists unlinks it: a failed ``create`` leaves nothing
        in /dev/shm. ``track`` as in Python 3.13's ``SharedMemory``: True, ``multiprocessing``'s
        resource tracker unlinks the segment if this process ends without unlinking it; False, the
        segment outlives this process until someone unlinks it (``sweep()`` does, once this process
        is gone).
        """
        shape = (shape,) if isinstance(shape, int | np.integer) else tuple(operator.index(n) for n in shape)
        if any(n < 0 for n in shape):
            raise ValueError(f"negative dimensions are not allowed: shape {shape}")
        dtype = np.dtype(dtype)
        refuse_objects(dtype)
        if order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', got {order!r}")
        strides = contiguous_strides(shape, dtype.itemsize, order)
        n_bytes = array_bytes(shape, dtype.itemsize)
        segment_bytes = max(n_bytes, 1)  # POSIX segments cannot be empty
        check_room(segment_bytes)
        name = new_name()
        # Registered before it exists, so a kill at any moment after creation is covered: the
        # tracker unlinks the segment if this process dies without unlinking it.
        if track:
            resource_tracker.register("/" + name, "shared_memory")
        try:
            mapping = Mapping(name, create_bytes=segment_bytes)
        except BaseException:
            if track:
                resource_tracker.unregister("/" + name, "shared_memory")
            raise
        try:
            shared = cls._over(mapping, ArrayHandle(name, shape, dtype, strides), owner=True)
        except BaseException:
            mapping.close()
            unlink(name)
            if track:
                resource_tracker.unregister("/" + name, "shared_memory")
            raise
        shared._tracked = track
        return shared

    @classmethod
    def copy_of(cls, array: np.ndarray, track: bool = True) -> SharedNDArray:
        """A new segment holding a copy of ``array`` (views are copied contiguous; F order kept).

        ``.array`` keeps an ndarray subclass's type (``np.recarray``, ``np.matrix``: a view of the
        segment as that type); ``attach(handle)`` in another process gives a plain ndarray of the same
        dtype. An ``np.memmap`` comes back a plain ndarray: the copy is in memory, not in its file.
        Raises TypeError for a masked array: a segment holds the values only, the mask would be lost.
        ``track``: as for ``create``.
        """
        array = np.asanyarray(array)
        _refuse_masked(array, "SharedNDArray.copy_of()")
        refuse_objects(array.dtype)
        array_type = np.ndarray if isinstance(array, np.memmap) else type(array)
        order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
        shared = cls.create(array.shape, array.dtype, order=order, track=track)
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
        if self._tracked:  # at once, or at the library's next call from a finalizer (the pool's)
            tell_tracker("unregister", self.handle.name)

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
    shared = SharedNDArray(handle)
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
    if not segment_exists(name):
        return None  # unlinked: the memory is still mapped here, but no other process can attach it
    return ArrayHandle._of_array(name, array, array.__array_interface__["data"][0] - address)
