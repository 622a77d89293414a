"""Arrays in transit through shared memory: swap big arrays for handles and back, on both sides.

``helpers.shared.executor`` uses this to move a call's arguments and result: ``rebuild`` walks tuples,
lists and dicts (the containers pickled calls are made of), ``SharedArg`` marks an array that
crosses as a handle, ``WorkerSide`` attaches a task's segments in the worker and detaches them
after, and ``pack_result`` puts a worker's big results in shared memory (a view of a segment the
worker was given goes back as a handle, anything else into one new segment named by the parent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import resource_tracker

import numpy as np

from helpers.shared._segments import Mapping, bottom_of, check_room, contiguous_strides, unlink
from helpers.shared.shm import ArrayHandle, handle_of

ALIGN_BYTES = 64  # each result array starts on a cache line in the result segment
SHAREABLE_TYPES = (np.ndarray, np.memmap)


@dataclass(frozen=True)
class SharedArg:
    """An array that crosses as a handle; ``readonly`` keeps a read-only array read-only."""

    handle: ArrayHandle
    readonly: bool = False


def is_big_array(value, min_bytes: int) -> bool:
    """True for a plain ndarray of at least ``min_bytes`` that shared memory can hold."""
    return type(value) in SHAREABLE_TYPES and value.nbytes >= min_bytes and not value.dtype.hasobject


def rebuild(value, min_bytes: int | None, convert: Callable):
    """A copy of ``value`` with leaves converted, containers rebuilt only where something changed.

    With ``min_bytes``: big arrays become ``SharedArg(convert(array))``. With None: every
    ``SharedArg`` becomes ``convert(handle)`` (read-only again if it was).
    """
    if min_bytes is not None and is_big_array(value, min_bytes):
        return SharedArg(convert(value), readonly=not value.flags.writeable)
    if min_bytes is None and type(value) is SharedArg:
        array = convert(value.handle)
        if value.readonly:
            array.flags.writeable = False
        return array
    if type(value) is tuple or type(value) is list:
        items = [rebuild(item, min_bytes, convert) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        items = [rebuild(item, min_bytes, convert) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(*items)
    if type(value) is dict:
        items = {key: rebuild(item, min_bytes, convert) for key, item in value.items()}
        if all(items[key] is item for key, item in value.items()):
            return value
        return items
    return value


def view_on(root: np.ndarray, handle: ArrayHandle) -> np.ndarray:
    """The array ``handle`` describes, as a view of ``root`` (bytes of the whole segment)."""
    return np.ndarray(handle.shape, handle.dtype, buffer=root, offset=handle.offset, strides=handle.strides)


def root_of(array: np.ndarray) -> np.ndarray:
    """Bytes of the whole mapping ``array`` views, kept alive by the same buffer export.

    (NumPy collapses ``.base`` chains, so the bottom ndarray may be a view of any part; the
    buffer object below it spans the mapping from its first byte.)
    """
    return np.frombuffer(bottom_of(array), np.uint8)


class WorkerSide:
    """Attach a task's segments in the worker (once per name) and detach them when it ends."""

    def __init__(self):
        self._roots: dict[str, np.ndarray] = {}
        self._mappings: list[Mapping] = []

    def unpack(self, value):
        """``value`` with every ``SharedArg`` replaced by a view of its segment (zero-copy)."""
        return rebuild(value, None, self._array_of)

    def _array_of(self, handle: ArrayHandle) -> np.ndarray:
        root = self._roots.get(handle.name)
        if root is None:
            mapping = Mapping(handle.name, create_bytes=None)
            self._mappings.append(mapping)
            root = self._roots[handle.name] = np.frombuffer(mapping.map, np.uint8)
        return view_on(root, handle)

    def __enter__(self) -> WorkerSide:
        return self

    def __exit__(self, *exc_info) -> None:
        self._roots.clear()
        for mapping in self._mappings:
            mapping.close()  # a view the task kept elsewhere keeps its mapping until it goes


def pack_result(result, result_name: str, min_bytes: int):
    """``result`` with big arrays as ``SharedArg``: views of live segments by handle, the rest
    copied into one new segment called ``result_name`` (the parent adopts and unlinks it)."""
    new_arrays: dict[int, np.ndarray] = {}

    def collect(array: np.ndarray) -> None:
        if handle_of(array) is None:
            new_arrays[id(array)] = array

    rebuild(result, min_bytes, collect)
    handles: dict[int, ArrayHandle] = {}
    if new_arrays:
        handles = _copy_into_new_segment(list(new_arrays.values()), result_name)

    def handle_for(array: np.ndarray) -> ArrayHandle:
        return handles.get(id(array)) or handle_of(array)

    return rebuild(result, min_bytes, handle_for)


def _copy_into_new_segment(arrays: list[np.ndarray], name: str) -> dict[int, ArrayHandle]:
    """Copy ``arrays`` into one new segment ``name``, each at a cache-line-aligned offset (bytes).

    If anything fails or is interrupted once the segment exists (reserving its pages, mapping it,
    a copy), the segment is unlinked and its tracker entry dropped before the error goes on.
    """
    offsets, total = [], 0
    for array in arrays:
        offsets.append(total)
        total += -(-array.nbytes // ALIGN_BYTES) * ALIGN_BYTES
    check_room(total)
    # Registered with the tracker this worker shares with its parent before it exists: if the
    # program dies before the parent adopts the segment, the tracker unlinks it.
    resource_tracker.register("/" + name, "shared_memory")
    try:
        mapping = Mapping(name, create_bytes=max(total, 1))  # unlinks the segment itself on failure
    except BaseException:
        resource_tracker.unregister("/" + name, "shared_memory")
        raise
    try:
        return _copy_arrays(mapping, arrays, offsets, name)
    except BaseException:
        unlink(name)
        resource_tracker.unregister("/" + name, "shared_memory")
        raise
    finally:
        mapping.close()


def _copy_arrays(mapping: Mapping, arrays: list[np.ndarray], offsets: list[int],
                 name: str) -> dict[int, ArrayHandle]:
    """Copy each array to its offset (bytes) in ``mapping``; their handles by ``id(array)``."""
    root = np.frombuffer(mapping.map, np.uint8)
    handles = {}
    for array, offset in zip(arrays, offsets, strict=True):
        fortran = array.flags.f_contiguous and not array.flags.c_contiguous
        shape = array.shape[::-1] if fortran else array.shape
        strides = contiguous_strides(shape, array.dtype.itemsize)
        handle = ArrayHandle(name, tuple(shape), array.dtype, strides, offset)
        view = view_on(root, handle)
        np.copyto(view.T if fortran else view, array, casting="no")
        if fortran:
            handle = ArrayHandle(name, tuple(array.shape), array.dtype, strides[::-1], offset)
        handles[id(array)] = handle
    return handles
