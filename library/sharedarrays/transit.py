"""Arrays in transit through shared memory: pickle a call or a result with big arrays as handles.

Internal to ``sharedarrays``: not part of its API (``sharedarrays.__all__``), and may change
between versions.

``sharedarrays.executor`` uses this to move a call and its result. ``pack`` pickles a value with
``multiprocessing``'s own pickler and protocol, except that each big plain ndarray (wherever it is:
in tuples, lists, dicts, any object's state) may be replaced by a slot in a table of ``ArrayRef``
(a handle plus how the receiver sees it); ``unpack`` turns the slots back into arrays. Pickle's
memo keeps identity: an array that appears twice arrives as one object, as with plain pickling.

A copy made for the trip arrives as an unpickled array would (``copy_as_unpickled``): same byte
order, memory order and writability as ``pickle.loads(pickle.dumps(array))`` gives with that
protocol (NumPy's pickling may turn a big-endian array native, and a read-only one writable).

A pooled segment is lent again only once nobody views it: the parent holds it for the task, and
the worker says in its reply which pooled segments it still views when the task ends (``Packed.kept``:
a view the function kept, or any view at all once it forked a child); the parent then retires them
(unlinks them once its own views are gone, never lends them again: a mapping outlives an unlink).

``WorkerSide`` attaches a task's segments in the worker and detaches them after; ``pack_result``
puts a worker's big results in shared memory (a view of an argument's segment goes back as a
handle, anything else into one new segment named by the parent).
"""

from __future__ import annotations

import functools
import io
import mmap
import os
import pickle
import weakref
from collections.abc import Callable
from multiprocessing import resource_tracker
from multiprocessing.reduction import ForkingPickler
from typing import NamedTuple

import numpy as np

from sharedarrays._segments import (
    MAPPED_SEGMENTS,
    Mapping,
    bottom_of,
    check_room,
    contiguous_strides,
    mapping_under,
    unlink,
)
from sharedarrays.room import available_memory, shm_free
from sharedarrays.shm import ArrayHandle
from sharedarrays.units import format_bytes

ALIGN_BYTES = 64  # each result array starts on a cache line in the result segment
SHAREABLE_TYPES = (np.ndarray, np.memmap)
# The protocol multiprocessing pickles with (ForkingPickler.dumps(obj) passes protocol=None).
STDLIB_PROTOCOL = pickle.DEFAULT_PROTOCOL
PICKLED_COPIES = 2  # pickling an array takes about this many times its bytes of free RAM (bytes, pickle)


class ArrayRef(NamedTuple):
    """One array that crosses as a handle, and how the receiver sees it.

    ``pooled``: the segment is lent by the parent's pool: the worker says in its reply whether it
    kept a view of it (``Packed.kept``).
    ``copied``: the segment holds a private copy made for this task (not memory the caller shares).
    ``memmap``: the array was an ``np.memmap``; it arrives as one (without a file, as unpickled).
    ``private``: memory the caller did not share on purpose (an earlier result): the receiver maps
    it copy-on-write, so its writes stay its own, as in an unpickled copy.
    """

    handle: ArrayHandle
    writeable: bool
    pooled: bool = False
    copied: bool = False
    memmap: bool = False
    private: bool = False


class Packed(NamedTuple):
    """A pickled value whose big arrays are slots in ``table``; ``fallbacks``: big arrays pickled
    in ``blob`` because shared memory had no room for them; ``kept`` (a worker's reply): the pooled
    segments of the task the worker still views (``WorkerSide.kept``)."""

    blob: bytes
    table: list
    fallbacks: int = 0
    kept: tuple[str, ...] = ()


def pickling_fits(n_bytes: int) -> bool:
    """True when the memory available can hold what pickling ``n_bytes`` of array takes."""
    return n_bytes * PICKLED_COPIES <= available_memory()


def too_big_to_pickle(n_bytes: int, what: str) -> MemoryError:
    """The error for ``what`` (e.g. "a result array") that fits neither /dev/shm nor, pickled, in RAM."""
    free = shm_free() or 0
    room = (f"it needs {format_bytes(n_bytes - free)} more than the {format_bytes(free)} free"
            if n_bytes > free else f"{format_bytes(free)} free")
    return MemoryError(
        f"{what} of {format_bytes(n_bytes)} does not fit in /dev/shm ({room}), and pickling it instead "
        f"takes about {format_bytes(n_bytes * PICKLED_COPIES)} of the "
        f"{format_bytes(available_memory())} of memory available. Use a smaller array, free /dev/shm, "
        "or give the container a larger --shm-size."
    )


def is_big_array(value, min_bytes: int) -> bool:
    """True for a plain, non-empty ndarray of at least ``min_bytes`` that shared memory can hold."""
    return (type(value) in SHAREABLE_TYPES and 0 < value.nbytes and value.nbytes >= min_bytes
            and not value.dtype.hasobject)


# --- pickling with arrays as slots -----------------------------------------------------------------


def _shared_array(slot: int):
    """Stands for the array in ``slot`` of a ``Packed`` table; only ``unpack`` can resolve it."""
    raise pickle.UnpicklingError(
        f"array slot {slot} of a sharedarrays.transit pickle was loaded without its table: "
        "load it with sharedarrays.transit.unpack(packed, ...)"
    )


class _Packer(ForkingPickler):
    """``multiprocessing``'s pickler (its reducers and protocol) with big arrays handed to ``share``."""

    def __init__(self, file, min_bytes: int, share: Callable, table: list):
        super().__init__(file, STDLIB_PROTOCOL)
        self._min_bytes, self._share, self._table = min_bytes, share, table
        # Its own dispatch table (ForkingPickler gives each pickler a copy): the reductions of
        # sharedarrays.reducers, while switched on, do not change how the executor ships arrays.
        reducer = self.dispatch_table.get(np.ndarray)
        if getattr(reducer, "__module__", "").startswith("sharedarrays."):
            del self.dispatch_table[np.ndarray]

    def reducer_override(self, obj):
        if not is_big_array(obj, self._min_bytes):
            return NotImplemented
        entry = self._share(obj)
        if entry is None:
            return NotImplemented  # pickled as usual
        self._table.append(entry)
        return _shared_array, (len(self._table) - 1,)


class _Unpacker(pickle.Unpickler):
    """Loads a ``Packed`` blob, turning each slot into ``array_of(table[slot])``."""

    def __init__(self, file, array_at: Callable[[int], np.ndarray]):
        super().__init__(file)
        self._array_at = array_at

    def find_class(self, module: str, name: str):
        if module == __name__ and name == _shared_array.__name__:
            return self._array_at
        return super().find_class(module, name)


def pack(value, min_bytes: int, share: Callable[[np.ndarray], object]) -> Packed:
    """Pickle ``value``; each big array goes to ``share(array)``, whose answer (an ``ArrayRef``, or
    anything the caller fills in later) takes a slot of the table; None pickles the array as usual."""
    buffer, table = io.BytesIO(), []
    _Packer(buffer, min_bytes, share, table).dump(value)
    return Packed(buffer.getvalue(), table)


def unpack(packed: Packed, array_of: Callable[[ArrayRef], np.ndarray]):
    """The value ``pack`` pickled, each slot replaced by ``array_of(ref)`` (once per slot)."""
    return _Unpacker(io.BytesIO(packed.blob), lambda slot: array_of(packed.table[slot])).load()


def as_received(array: np.ndarray, ref: ArrayRef) -> np.ndarray:
    """``array`` (a view of the segment) with the writability and type ``ref`` says."""
    if not ref.writeable:
        array.flags.writeable = False
    return array.view(np.memmap) if ref.memmap else array


# --- how an array arrives when pickled (the stdlib's way) ---------------------------------------------


def memory_order(array: np.ndarray) -> str:
    """'F' for an array that is Fortran- but not C-contiguous, 'C' for a C-contiguous one, else 'N'."""
    if array.flags.c_contiguous:
        return "C"
    return "F" if array.flags.f_contiguous else "N"


@functools.cache
def _unpickled_form(dtype: np.dtype, order: str, writeable: bool) -> tuple[np.dtype, bool]:
    """The dtype and writability an array of ``dtype``, memory ``order`` ('C', 'F', 'N') and
    ``writeable`` has after a pickle round trip at ``STDLIB_PROTOCOL`` (probed once on a tiny one)."""
    template = {"C": lambda: np.zeros(2, dtype), "F": lambda: np.zeros((2, 2), dtype, order="F"),
                "N": lambda: np.zeros(4, dtype)[::2]}[order]()
    template.flags.writeable = writeable
    back = pickle.loads(pickle.dumps(template, protocol=STDLIB_PROTOCOL))
    return back.dtype, bool(back.flags.writeable)


def unpickled_form(array: np.ndarray) -> tuple[np.dtype, str, bool]:
    """The dtype, memory order ('C' or 'F') and writability of ``array`` once unpickled."""
    order = memory_order(array)
    dtype, writeable = _unpickled_form(array.dtype, order, bool(array.flags.writeable))
    return dtype, "F" if order == "F" else "C", writeable


def copy_as_unpickled(array: np.ndarray, root: np.ndarray, offset: int, name: str) -> ArrayRef:
    """Copy ``array`` into ``root`` (bytes of segment ``name``) at ``offset`` (bytes), laid out as
    unpickling would give it (``unpickled_form``); return its ``ArrayRef``."""
    dtype, order, writeable = unpickled_form(array)
    strides = contiguous_strides(array.shape, dtype.itemsize, order)
    handle = ArrayHandle(name, tuple(array.shape), dtype, strides, offset)
    np.copyto(view_on(root, handle), array, casting="equiv")  # equiv: byte order may change
    return ArrayRef(handle, writeable, memmap=type(array) is np.memmap)


def view_on(root: np.ndarray, handle: ArrayHandle) -> np.ndarray:
    """The array ``handle`` describes, as a view of ``root`` (bytes of the whole segment)."""
    return np.ndarray(handle.shape, handle.dtype, buffer=root, offset=handle.offset, strides=handle.strides)


def root_of(array: np.ndarray) -> np.ndarray:
    """Bytes of the whole mapping ``array`` views: a new export of the same buffer (so a holder
    held through ``array``'s export does not cover it: hold the new root too).

    (NumPy collapses ``.base`` chains, so the bottom ndarray may be a view of any part; the
    buffer object below it spans the mapping from its first byte.)
    """
    return np.frombuffer(bottom_of(array), np.uint8)


# --- the worker's side -------------------------------------------------------------------------------


_FORKS_HERE = [0]  # os.fork calls in this process since watch_forks(): a task's child may keep its views


def _count_fork() -> None:
    _FORKS_HERE[0] += 1


def watch_forks() -> None:
    """Count this process's forks from now on (a worker calls it once, at its start): a child forked
    during a task inherits the task's views, so the worker then reports every segment it mapped."""
    if hasattr(os, "register_at_fork"):  # absent where there is no fork (Windows)
        os.register_at_fork(before=_count_fork)


class WorkerSide:
    """Attach a task's segments in the worker (once per name) and detach them when it ends.

    The parent holds every pooled segment of the task until the worker's reply; at the end of the
    task the worker knows whether it still views one (``kept``), and says so in its reply: the
    parent then never lends it again. No lock, no count in the segment.
    """

    def __init__(self):
        self._roots: dict[str, np.ndarray] = {}
        self._private_roots: dict[str, np.ndarray] = {}  # copy-on-write mappings (ArrayRef.private)
        self._mappings: list[Mapping] = []
        self._pooled: set[str] = set()  # segments the parent's pool lent for this task
        self._copied: set[str] = set()  # segments holding a private copy made for this task
        self._returned: set[str] = set()  # copied segments a result already views
        self._forks_at_start = _FORKS_HERE[0]
        self.kept: tuple[str, ...] = ()  # set by end(): pooled segments this worker still views

    def unpack(self, packed: Packed):
        """The call ``packed`` holds, every slot a view of its segment (zero-copy)."""
        return unpack(packed, self._array_of)

    def _array_of(self, ref: ArrayRef) -> np.ndarray:
        name = ref.handle.name
        if ref.private:
            return as_received(view_on(self._private_root(name), ref.handle), ref)
        root = self._roots.get(name)
        if root is None:
            mapping = Mapping(name, create_bytes=None)
            self._mappings.append(mapping)
            root = self._roots[name] = np.frombuffer(mapping.map, np.uint8)
        if ref.pooled:
            self._pooled.add(name)
        if ref.copied:
            self._copied.add(name)
        return as_received(view_on(root, ref.handle), ref)

    def _private_root(self, name: str) -> np.ndarray:
        """Bytes of segment ``name`` mapped copy-on-write (once per task): the function reads the
        caller's pages without a copy, and what it writes is its own."""
        root = self._private_roots.get(name)
        if root is None:
            mapping = Mapping(name, create_bytes=None, private=True)
            self._mappings.append(mapping)
            root = self._private_roots[name] = np.frombuffer(mapping.map, np.uint8)
        return root

    def start_result(self) -> None:
        """Forget which copied segments a result views (before packing a result again)."""
        self._returned.clear()

    def result_ref(self, array: np.ndarray) -> ArrayRef | None:
        """The ``ArrayRef`` of a result that views one of this task's argument segments, or None
        when it must be copied: it views other memory, or a private copy made for this task that
        another result already views or that unpickling would lay out differently."""
        handle = self._handle_of(array)
        if handle is None:
            return None
        memmap = type(array) is np.memmap
        if handle.name not in self._copied:  # memory the caller shares: the same memory goes back
            return ArrayRef(handle, bool(array.flags.writeable), memmap=memmap)
        dtype, order, writeable = unpickled_form(array)
        if handle.name in self._returned or dtype != array.dtype or memory_order(array) != order:
            return None
        self._returned.add(handle.name)
        return ArrayRef(handle, writeable, copied=True, memmap=memmap)

    def _handle_of(self, array: np.ndarray) -> ArrayHandle | None:
        """The handle of ``array`` if it views one of this task's argument segments, else None
        (``shm.handle_of`` without asking /dev/shm: the parent keeps them until the reply)."""
        segment_map = mapping_under(array)
        found = MAPPED_SEGMENTS.get(segment_map) if segment_map is not None else None
        if found is None or found[0] not in self._roots or array.dtype.hasobject:
            return None
        name, address = found
        return ArrayHandle._of_array(name, array, array.__array_interface__["data"][0] - address)

    def end(self) -> None:
        """Let go of the task's roots (the caller dropped its own references first, and an error's
        frames are cleared); set ``kept`` to the pooled segments still viewed (a view the task kept),
        or to every segment of the task if it forked meanwhile (a child inherited its views); make a
        kept copy-on-write view the worker's own (``_keep_private``). Then unmap what nothing views."""
        forked = _FORKS_HERE[0] != self._forks_at_start
        exports = {name: weakref.ref(root.base) for name, root in self._roots.items()}
        private_exports = {name: weakref.ref(root.base) for name, root in self._private_roots.items()}
        self._roots.clear()
        self._private_roots.clear()
        if forked:
            self.kept = tuple(sorted(self._pooled | set(private_exports)))
        else:
            self.kept = tuple(sorted(name for name in self._pooled if exports[name]() is not None))
        for export in private_exports.values():
            if export() is not None:
                _keep_private(export())
        for mapping in self._mappings:
            mapping.close()  # a view the task kept elsewhere keeps its mapping until it goes
        self._mappings.clear()


def _keep_private(buffer) -> None:
    """Write one byte of every page of a copy-on-write mapping back as it is: each page becomes this
    process's own copy, so the caller's later writes into its segment no longer show through (the
    worker kept an argument, as if unpickled: only then is the copy paid)."""
    pages = np.frombuffer(buffer, np.uint8)[::mmap.PAGESIZE]
    np.add(pages, 0, out=pages)


def pack_result(result, result_name: str, min_bytes: int, side: WorkerSide | None = None) -> Packed:
    """``result`` pickled with big arrays as slots: views of this task's argument segments by handle
    (``side.result_ref``), the rest copied into one new segment called ``result_name`` (the parent
    adopts and unlinks it). Raises MemoryError when that segment does not fit."""
    if side is not None:
        side.start_result()
    packed = pack(result, min_bytes, lambda array: (side and side.result_ref(array)) or array)
    new = [(slot, array) for slot, array in enumerate(packed.table) if isinstance(array, np.ndarray)]
    if new:
        refs = _copy_into_new_segment([array for _, array in new], result_name)
        for (slot, _), ref in zip(new, refs, strict=True):
            packed.table[slot] = ref
    return packed


def pack_result_pickled(result, min_bytes: int, side: WorkerSide | None = None) -> Packed:
    """``result`` pickled without a new segment: views of argument segments by handle, every other big
    array pickled as usual (counted in ``fallbacks``). Raises MemoryError for an array that RAM cannot
    hold pickled either (the stdlib could not send it back)."""
    fallbacks = 0
    if side is not None:
        side.start_result()

    def share(array: np.ndarray) -> ArrayRef | None:
        nonlocal fallbacks
        ref = side.result_ref(array) if side is not None else None
        if ref is None and not pickling_fits(array.nbytes):
            raise too_big_to_pickle(array.nbytes, "a result array")
        fallbacks += ref is None
        return ref

    packed = pack(result, min_bytes, share)
    return packed._replace(fallbacks=fallbacks)


def _copy_into_new_segment(arrays: list[np.ndarray], name: str) -> list[ArrayRef]:
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
        root = np.frombuffer(mapping.map, np.uint8)
        return [copy_as_unpickled(array, root, offset, name)
                for array, offset in zip(arrays, offsets, strict=True)]
    except BaseException:
        unlink(name)
        resource_tracker.unregister("/" + name, "shared_memory")
        raise
    finally:
        root = None
        mapping.close()
