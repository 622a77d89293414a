"""sharedarrays: give worker processes one NumPy array through POSIX shared memory, not N copies.

NumPy and the standard library only (torch is imported only by ``share_arrays("torch")``). The
public names, all listed in ``__all__``:

- ``SharedNDArray`` (``create``, ``copy_of``, ``.array``, ``.handle``, ``close``, ``unlink``),
  ``attach(handle)``, ``handle_of(array)``, ``ArrayHandle``: an array in a named segment, and the
  small picklable description another process attaches with (``sharedarrays.shm``).
- ``sweep()``: unlink the segments of this machine's dead programs (killed before they could), and
  the semaphores a killed pool left.
- ``SharedMemoryExecutor``: a drop-in ``concurrent.futures.ProcessPoolExecutor`` whose big arrays
  cross as handles to pooled shared memory (``sharedarrays.executor``).
- ``share_arrays(how)``, ``sharing_arrays(how)``, ``stop_sharing_arrays()``, ``active_way()``:
  ndarray reductions on ``multiprocessing``'s pickler, so queues, pipes and pools pass arrays
  through shared memory (``sharedarrays.reducers``).
- ``SegmentPool``: warm segments lent out and taken back instead of created anew.

Linux: it needs POSIX shared memory under ``/dev/shm`` and ``os.posix_fallocate``. Elsewhere it
imports, and its first use raises an ``OSError`` that names what is missing.
"""

from __future__ import annotations

from sharedarrays.executor import SharedMemoryExecutor
from sharedarrays.reducers import active_way, share_arrays, sharing_arrays, stop_sharing_arrays
from sharedarrays.segment_pool import SegmentPool
from sharedarrays.shm import ArrayHandle, SharedNDArray, attach, handle_of, sweep

__version__ = "0.2.0"

__all__ = [
    "ArrayHandle",
    "SegmentPool",
    "SharedMemoryExecutor",
    "SharedNDArray",
    "__version__",
    "active_way",
    "attach",
    "handle_of",
    "share_arrays",
    "sharing_arrays",
    "stop_sharing_arrays",
    "sweep",
]
