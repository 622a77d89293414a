"""The torch way to send an ndarray through ``multiprocessing``: its bytes in a shared torch storage.

Internal to ``sharedarrays``: not part of its API (``sharedarrays.__all__``), and may change
between versions.

``reduce_with_torch`` is what ``sharedarrays.reducers.share_arrays_with_torch()`` registers for
``np.ndarray`` on ``ForkingPickler``. Importing this module imports torch (a few seconds the first
time), which is why ``sharedarrays.reducers`` imports it only when asked to share with torch.

- **First share** (the array's memory is private): one copy of its bytes into a new shared
  storage (``torch.UntypedStorage._new_shared``, what ``Tensor.share_memory_()`` allocates), kept
  in the array's own memory order; the storage crosses the pipe as a uint8 tensor, pickled by
  torch's own reduction (a file descriptor or a file name, never the data).
- **Already shared**: ``tensor.numpy()`` in torch 2.13 returns an ndarray whose ``.base`` is a
  ``torch.Tensor`` (a new alias of the same storage, not the very tensor object); NumPy collapses
  a view's ``.base`` only down to the first array whose base is not an ndarray, so walking
  ``.base`` from any view ends at that tensor. If its storage is shared, only the storage (as a
  uint8 tensor) plus byte offset, shape, strides and dtype are sent: no copy, O(1) in the size.
- **No room** in /dev/shm (or RAM) for the copy: the array is pickled as ``multiprocessing``
  pickles it without the reduction, and a notice says so once (the ``sharedarrays`` logger).
- The receiver views the storage's bytes with that layout, so its array's ``.base`` chain leads
  back to a shared tensor and sending it on is zero-copy again.

Every dtype whose items are plain bytes works (datetime64, structured, byte-swapped, strings);
object dtypes raise TypeError. torch's sharing strategy decides how storages cross: see
``torch.multiprocessing.get_sharing_strategy()``. Under the default ``file_descriptor`` strategy
nothing is named in /dev/shm, each storage a process keeps holds one open file descriptor, and
an item never received keeps its storage alive in the sender (``multiprocessing.resource_sharer``
holds a duplicate of its descriptor) until the sender exits.
"""

from __future__ import annotations

import numpy as np
import torch

from sharedarrays._segments import (
    PLACEMENT_FAILURES,
    OnceNotice,
    bottom_of,
    check_room,
    pickled_as_usual,
    refuse_objects,
    span,
)
from sharedarrays.lent_segments import copy_into, rebuild_empty

_NO_ROOM = OnceNotice()  # an array pickled for want of room in /dev/shm, said once per process


def shared_tensor_of(array: np.ndarray) -> torch.Tensor | None:
    """The shared CPU tensor at the bottom of ``array``'s ``.base`` chain, or None."""
    base = bottom_of(array)
    if isinstance(base, torch.Tensor) and base.device.type == "cpu" and base.is_shared():
        return base
    return None


def _byte_tensor(storage: torch.UntypedStorage) -> torch.Tensor:
    """A uint8 tensor over the whole storage (what crosses the pipe)."""
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),), (1,))


def reduce_with_torch(array: np.ndarray):
    """ForkingPickler reduction of an ndarray: shared storage + layout (see the module docstring)."""
    refuse_objects(array.dtype)
    layout = (array.shape, array.dtype, array.flags.writeable)
    if array.nbytes == 0:
        return rebuild_empty, (array.shape, array.dtype)
    tensor = shared_tensor_of(array)
    if tensor is not None:
        storage = tensor.untyped_storage()
        offset = array.ctypes.data - storage.data_ptr()
        low, high = span(array.shape, array.strides, array.dtype.itemsize)
        if 0 <= offset + low and offset + high <= storage.nbytes():
            return rebuild_from_torch, (_byte_tensor(storage), offset, array.strides, *layout)
    try:
        check_room(array.nbytes)  # torch reserves no pages: a full /dev/shm would be SIGBUS at the copy
    except MemoryError:
        return pickled_as_usual(array, _NO_ROOM)
    try:
        storage = torch.UntypedStorage._new_shared(array.nbytes)
    except (*PLACEMENT_FAILURES, RuntimeError) as error:  # torch says "unable to open" as a RuntimeError
        said = OSError(str(error)) if isinstance(error, RuntimeError) else error
        return pickled_as_usual(array, _NO_ROOM, said)
    byte_tensor = _byte_tensor(storage)
    copy = copy_into(byte_tensor.numpy(), 0, array)
    return rebuild_from_torch, (byte_tensor, 0, copy.strides, *layout)


def rebuild_from_torch(byte_tensor: torch.Tensor, offset: int, strides: tuple[int, ...],
                       shape: tuple[int, ...], dtype: np.dtype, writeable: bool) -> np.ndarray:
    """Receiver side: view the shared storage's bytes as the array that was sent (no copy)."""
    array = np.ndarray(shape, dtype, buffer=byte_tensor.numpy(), offset=offset, strides=strides)
    if not writeable:
        array.flags.writeable = False
    return array

