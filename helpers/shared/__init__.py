"""The take-home library: share NumPy arrays between processes through POSIX shared memory.

NumPy and the standard library only (torch is imported only by ``share_arrays("torch")``). Every
public name is listed in ``__all__`` and loaded on first use, so ``import helpers.shared`` is cheap
and ``helpers.shared.room`` works without NumPy. The reference is the README's "The take-home
library" section.

- ``SharedNDArray`` (``create``, ``copy_of``, ``.array``, ``.handle``, ``close``, ``unlink``),
  ``attach(handle)``, ``handle_of(array)``, ``sweep()``: an array in a named segment (``shm``);
  ``sweep()`` also removes the semaphores of a killed pool.
- ``SharedMemoryExecutor``: a drop-in ``ProcessPoolExecutor`` whose big arrays cross as handles
  to pooled shared memory (``executor``).
- ``share_arrays``, ``sharing_arrays``, ``stop_sharing_arrays``, ...: ndarray reductions on
  ``multiprocessing``'s pickler, so queues, pipes and pools pass arrays through shared memory
  (``reducers``).
- ``SegmentPool``: warm segments reused instead of created (``segment_pool``).
- ``SHM_DIR``, ``SEGMENT_PREFIX``, ``shm_free``, ``available_memory``: where segments live and
  how much room there is (``room``); ``process_alive(pid)``: the liveness test ``sweep`` uses (a
  process that exited but is not reaped yet, a zombie, is dead).
"""

from __future__ import annotations

import importlib

_WHERE = {
    "ArrayHandle": "shm", "SharedNDArray": "shm", "attach": "shm", "handle_of": "shm", "sweep": "shm",
    "SharedMemoryExecutor": "executor",
    "SegmentPool": "segment_pool",
    "share_arrays": "reducers", "share_arrays_with_shared_memory": "reducers",
    "share_arrays_with_torch": "reducers", "sharing_arrays": "reducers",
    "stop_sharing_arrays": "reducers", "active_way": "reducers",
    "SHM_DIR": "room", "SEGMENT_PREFIX": "room", "shm_free": "room", "shm_size": "room",
    "available_memory": "room",
    "process_alive": "_segments",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'helpers.shared' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"helpers.shared.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
