"""sharedarrays: give worker processes one NumPy array through POSIX shared memory, not N copies.

NumPy and the standard library only (torch is imported only by ``share_arrays("torch")``). The
public names, all listed in ``__all__``:

- ``SharedNDArray`` (``create``, ``copy_of``, ``.array``, ``.handle``, ``close``, ``unlink``),
  ``attach(handle)``, ``handle_of(array)``, ``ArrayHandle``: an array in a named segment, and the
  small picklable description another process attaches with (``sharedarrays.shm``).
- ``sweep()``: unlink the segments of this machine's dead programs (killed before they could), and
  when asked the semaphores a killed pool left (``sharedarrays.cleanup``; also
  ``python -m sharedarrays sweep``, standard library only).
- ``SharedMemoryExecutor``: a drop-in ``concurrent.futures.ProcessPoolExecutor`` whose big arrays
  cross as handles to pooled shared memory (``sharedarrays.executor``).
- ``share_arrays(how)``, ``sharing_arrays(how)``, ``stop_sharing_arrays()``, ``active_way()``:
  ndarray reductions on ``multiprocessing``'s pickler, so queues, pipes and pools pass arrays
  through shared memory (``sharedarrays.reducers``).

Everything else (the modules behind these names, and ``sharedarrays.segment_pool``,
``transit``, ``lent_segments``, ``segment_holds``, ``executor_workers``, ``torch_reduction``,
``room``, ``units``) is internal: importable, but not promised to stay as it is between versions.

Names load when first used (``import sharedarrays`` imports neither NumPy nor the executor, and
installs nothing).

It needs POSIX shared memory (``shm_open``), as ``multiprocessing.shared_memory`` does, and on Linux
the ``/dev/shm`` folder. Where that is missing (Windows) it imports, and its first use raises an
``OSError`` that names what is missing. Without ``os.posix_fallocate`` (macOS) new segments are sized
as the stdlib sizes them, without reserving their pages (said once).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.3.0"

# Each public name and the module that defines it, imported at first use (PEP 562).
_WHERE = {
    "ArrayHandle": "sharedarrays.shm",
    "SharedNDArray": "sharedarrays.shm",
    "attach": "sharedarrays.shm",
    "handle_of": "sharedarrays.shm",
    "sweep": "sharedarrays.cleanup",
    "SharedMemoryExecutor": "sharedarrays.executor",
    "active_way": "sharedarrays.reducers",
    "share_arrays": "sharedarrays.reducers",
    "sharing_arrays": "sharedarrays.reducers",
    "stop_sharing_arrays": "sharedarrays.reducers",
}

__all__ = [
    "ArrayHandle",
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

if TYPE_CHECKING:  # what type checkers and editors see; at run time, __getattr__ below
    from sharedarrays.cleanup import sweep
    from sharedarrays.executor import SharedMemoryExecutor
    from sharedarrays.reducers import active_way, share_arrays, sharing_arrays, stop_sharing_arrays
    from sharedarrays.shm import ArrayHandle, SharedNDArray, attach, handle_of


def __getattr__(name: str):
    """``sharedarrays.NAME``: the public name, from its module, imported now."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'sharedarrays' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
