"""The sizes, worker counts and start methods every lesson, test and benchmark uses.

Environment variables win (``LAB_ARRAY_MB``, ``LAB_WORKERS``, ``LAB_START_METHOD``); otherwise
the defaults are read off this machine so that every lesson fits it, Binder's 2 GB RAM,
one CPU and 64 MiB ``/dev/shm`` included.
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass

from helpers.measure import kernel_exit, system
from helpers.measure.units import MiB

DEFAULT_CAP_BYTES = 128 * MiB  # keeps every lesson under a minute on a laptop
MIN_ARRAY_BYTES = 1 * MiB
# A lesson may hold the array, a pickled copy, a receive buffer and one copy per worker at once.
COPIES_BESIDES_WORKERS = 4
# Shared-memory lessons may hold the input and a result segment, with room to spare.
SHM_SHARE = 4


def n_workers() -> int:
    """Worker processes per fan-out: ``LAB_WORKERS``, else the usable CPUs, at least 2."""
    raw = os.environ.get("LAB_WORKERS")
    if raw:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"LAB_WORKERS must be a whole number, got {raw!r}") from None
        if value < 1:
            raise ValueError(f"LAB_WORKERS must be at least 1, got {value}")
        return value
    return max(2, system.usable_cpus())


def default_array_bytes(shm_copies: int = SHM_SHARE) -> int:
    """The array size (bytes) that fits this machine: RAM, cgroup limit and /dev/shm, capped.

    ``shm_copies``: how many arrays the lesson may keep in /dev/shm at once, with room to spare
    (a lesson that holds more, such as 07's executor with its pool, asks for more).
    """
    ram_budget = system.available_memory() // (n_workers() + COPIES_BESIDES_WORKERS)
    budget = min(DEFAULT_CAP_BYTES, ram_budget)
    shm_free = system.shm_free()
    if shm_free is not None:
        budget = min(budget, shm_free // shm_copies)
    whole_mib = (budget // MiB) * MiB
    return max(MIN_ARRAY_BYTES, whole_mib)


def array_bytes(shm_copies: int = SHM_SHARE) -> int:
    """Bytes of the lesson's array: ``LAB_ARRAY_MB`` (mebibytes, 2**20 bytes) or the default
    (``default_array_bytes(shm_copies)``)."""
    raw = os.environ.get("LAB_ARRAY_MB")
    if raw:
        try:
            mib = float(raw)
        except ValueError:
            raise ValueError(f"LAB_ARRAY_MB must be a number of MiB, got {raw!r}") from None
        if mib <= 0:
            raise ValueError(f"LAB_ARRAY_MB must be positive, got {mib}")
        return max(8, int(mib * MiB) // 8 * 8)
    return default_array_bytes(shm_copies)


def array_length(itemsize: int = 8) -> int:
    """Items in the lesson's array for an item size in bytes (float64 by default)."""
    return max(1, array_bytes() // itemsize)


def start_method(default: str) -> str:
    """The start method a lesson uses: ``LAB_START_METHOD`` if set, else the lesson's ``default``.

    Raises ValueError naming the methods this platform has when the choice is not one of them.
    """
    method = os.environ.get("LAB_START_METHOD") or default
    available = multiprocessing.get_all_start_methods()
    if method not in available:
        raise ValueError(
            f"start method {method!r} is not available here; choose one of {available}"
        )
    return method


def describe(shm_copies: int = SHM_SHARE) -> str:
    """One line naming the configured size, workers and where each value came from."""
    from helpers.measure.units import format_bytes

    size_source = "LAB_ARRAY_MB" if os.environ.get("LAB_ARRAY_MB") else "fits this machine"
    worker_source = "LAB_WORKERS" if os.environ.get("LAB_WORKERS") else "usable CPUs, at least 2"
    return (
        f"array: {format_bytes(array_bytes(shm_copies))} ({size_source}); "
        f"workers: {n_workers()} ({worker_source})"
    )


@dataclass(frozen=True)
class Knobs:
    """One lesson's settings: the array's size in bytes, worker processes, start method."""

    array_bytes: int
    n_workers: int
    start_method: str

    def describe(self) -> str:
        from helpers.measure.units import format_bytes

        return (f"array: {format_bytes(self.array_bytes)}, workers: {self.n_workers}, "
                f"start method: {self.start_method}")


def knobs(array_mib: float | None = None, workers: int | None = None, method: str | None = None, *,
          default_method: str, shm_copies: int = SHM_SHARE) -> Knobs:
    """The knobs cell of a lesson: each argument given wins, else its ``LAB_*`` variable, else the
    default that fits this machine (``array_bytes``, ``n_workers``, ``start_method``).

    A size chosen here or in ``LAB_ARRAY_MB`` is checked against this machine before the lesson
    writes anything: ValueError, in one line, when the array, ``workers`` + 4 copies of it, would
    not fit in the available RAM, or ``shm_copies`` of it in the free ``/dev/shm``.

    The lesson's kernel also ends through its exit handlers when JupyterLab shuts it down
    (``kernel_exit.exit_normally_on_sigterm``), so it leaves no multiprocessing folder behind.
    """
    kernel_exit.exit_normally_on_sigterm()
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a whole number of at least 1, got {workers!r}")
    count = workers if workers is not None else n_workers()
    if method is not None:
        os_methods = multiprocessing.get_all_start_methods()
        if method not in os_methods:
            raise ValueError(f"start method {method!r} is not available here; choose one of {os_methods}")
    chosen = method or start_method(default_method)
    if array_mib is None and not os.environ.get("LAB_ARRAY_MB"):
        return Knobs(array_bytes(shm_copies), count, chosen)
    if array_mib is not None:
        if not isinstance(array_mib, int | float) or array_mib <= 0:
            raise ValueError(f"array_mib must be a positive number of MiB, got {array_mib!r}")
        size = max(8, int(array_mib * MiB) // 8 * 8)
    else:
        size = array_bytes(shm_copies)
    _refuse_what_does_not_fit(size, count, shm_copies)
    return Knobs(size, count, chosen)


def _refuse_what_does_not_fit(size: int, workers: int, shm_copies: int) -> None:
    from helpers.measure.units import format_bytes

    copies = workers + COPIES_BESIDES_WORKERS
    ram = system.available_memory()
    if size * copies > ram:
        raise ValueError(f"{format_bytes(size)} does not fit: this lesson may hold {copies} copies "
                         f"({workers} workers + {COPIES_BESIDES_WORKERS}) and {format_bytes(ram)} of RAM "
                         f"is available; choose at most {ram // copies // MiB} MiB")
    shm = system.shm_free()
    if shm is not None and size * shm_copies > shm:
        raise ValueError(f"{format_bytes(size)} does not fit: this lesson may keep {shm_copies} copies "
                         f"in /dev/shm and {format_bytes(shm)} is free; choose at most "
                         f"{shm // shm_copies // MiB} MiB")
