"""The copy floors every lesson and both benchmark suites compare with: ONE definition of each.

All times are wall-clock seconds of ``np.copyto`` of the caller's array (random data, never zeros):

- **floor (a)**, ``warm_copy``: one copy into a buffer of the same size that is already mapped and
  touched. A mechanism that copies the array once cannot beat it.
- **floor (b)**, ``new_segment_copy``: one copy into a POSIX shared-memory segment created just
  before, the way ``multiprocessing.shared_memory.SharedMemory(create=True)`` makes one:
  ``shm_open``, ``ftruncate``, ``mmap``; no ``posix_fallocate``, no ``MADV_POPULATE_WRITE``, so
  every 4 KiB page is allocated, zeroed and faulted in *during the timed copy*. Only the copy is
  timed; creating the segment (``shm_open`` + ``ftruncate`` + ``mmap``) is timed separately as
  ``new_segment_with_creation`` (creation plus copy). The segment's name is unlinked right after
  it is mapped, so nothing is left in /dev/shm even if the copy is interrupted, and the unmap is
  not timed. A mechanism that puts the array into new shared memory pays about floor (b).
- ``fresh_pages_copy``: one copy into new *private* anonymous pages of 4 KiB, the kind ``malloc``
  gives a large buffer (a pickle's bytes): what a copy-based mechanism (pickling, a Manager) pays for
  the pages its copy lands in. A large NumPy array is not always such memory: NumPy asks the kernel
  for 2 MiB pages (``madvise(MADV_HUGEPAGE)``), and where transparent huge pages are on ("madvise"
  or "always" in /sys/kernel/mm/transparent_hugepage/enabled) a copy into a new array faults 512
  times fewer pages and can cost far less than this copy.
"""

from __future__ import annotations

import _posixshmem
import mmap
import os
import time
from dataclasses import dataclass

import numpy as np

from helpers.measure.timing import Timing, time_it
from sharedarrays.room import creator_prefix

OWNER_ONLY = 0o600


@dataclass(frozen=True)
class Floors:
    """Floors (a) and (b) of one array, and (b) with the segment's creation included (seconds)."""

    warm: Timing
    new_segment: Timing
    new_segment_with_creation: Timing

    def as_dict(self) -> dict[str, Timing]:
        """The benchmark's names: ``warm`` (a), ``fresh_shm`` (b), ``fresh_shm_create``."""
        return {"warm": self.warm, "fresh_shm": self.new_segment,
                "fresh_shm_create": self.new_segment_with_creation}


def random_array(n_bytes: int, seed: int = 0) -> np.ndarray:
    """Random float64 of ``n_bytes`` (rounded down to whole items, at least one), pages touched."""
    return np.random.default_rng(seed).random(max(1, n_bytes // 8))


def warm_copy(source: np.ndarray, repeat: int = 5) -> Timing:
    """Floor (a): seconds to copy ``source`` into a buffer already mapped and touched."""
    target = np.empty_like(source)
    target.fill(1)
    return time_it(lambda: np.copyto(target, source), repeat=repeat, warmup=1)


def new_segment_copy(source: np.ndarray) -> tuple[float, float]:
    """One run of floor (b): (seconds of the copy, seconds of creation + copy); see the module."""
    name = f"/{creator_prefix()}floor_{os.urandom(4).hex()}"
    start = time.perf_counter()
    fd = _posixshmem.shm_open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode=OWNER_ONLY)
    try:
        _posixshmem.shm_unlink(name)  # the mapping keeps the memory; the name is no longer needed
        os.ftruncate(fd, max(source.nbytes, 1))
        segment = mmap.mmap(fd, max(source.nbytes, 1))
    finally:
        os.close(fd)
    target = None
    try:
        target = np.frombuffer(segment, dtype=source.dtype, count=source.size).reshape(source.shape)
        copy_start = time.perf_counter()
        np.copyto(target, source)
        end = time.perf_counter()
    finally:
        target = None  # the view goes first: closing a map still viewed raises BufferError, hiding a Ctrl-C
        segment.close()
    return end - copy_start, end - start


def fresh_pages_copy(source: np.ndarray, repeat: int = 5) -> Timing:
    """Seconds to copy ``source`` into new private anonymous 4 KiB pages (each run faults and zeroes them).

    The target is a new private mapping for every run (ordinary process memory, like a large
    ``malloc``'s), so no allocator can hand back warm pages. It is advised *not* to use huge pages
    (a new NumPy array asks for them: see the module). One untimed warm-up run first.
    """
    runs = []
    for _ in range(repeat + 1):
        region = mmap.mmap(-1, max(source.nbytes, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):  # 4 KiB pages even where huge pages are "always" on
            region.madvise(mmap.MADV_NOHUGEPAGE)
        target = None
        try:
            target = np.frombuffer(region, dtype=source.dtype, count=source.size).reshape(source.shape)
            start = time.perf_counter()
            np.copyto(target, source)
            runs.append(time.perf_counter() - start)
        finally:
            target = None  # before close, as in new_segment_copy
            region.close()
    return Timing(tuple(runs[1:]))


def measure_floors(source: np.ndarray, repeat: int = 5) -> Floors:
    """Floors (a) and (b) of ``source``, each ``repeat`` runs after one untimed warm-up."""
    warm = warm_copy(source, repeat=repeat)
    new_segment_copy(source)  # warm-up: the kernel's tmpfs paths, numpy's copy loop
    runs = [new_segment_copy(source) for _ in range(repeat)]
    return Floors(warm, Timing(tuple(copy for copy, _ in runs)), Timing(tuple(total for _, total in runs)))


def faster_medians(before: dict[str, Timing], after: dict[str, Timing]) -> dict[str, float]:
    """Each floor's median in seconds: the faster of two timings of it, one taken before a
    measurement and one after. Noise only adds time, and a floor timed at a busy moment would let a
    mechanism that contains its copy beat it. Keys: those of ``before`` (all must be in ``after``)."""
    return {kind: min(before[kind].median, after[kind].median) for kind in before}


def memcpy_floors(n_bytes: int, repeat: int = 5) -> dict[str, Timing]:
    """Floor (a) and the fresh-private-pages copy for ``n_bytes`` of random float64.

    ``warm``: floor (a); ``fresh``: ``fresh_pages_copy``. A mechanism that copies the array cannot
    beat ``warm``; one whose copy lands in new pages pays about ``fresh``.
    """
    source = random_array(n_bytes)
    return {"warm": warm_copy(source, repeat), "fresh": fresh_pages_copy(source, repeat)}
