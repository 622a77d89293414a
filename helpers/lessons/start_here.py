"""Lesson 00's code (start here): a setup self-check, fresh pages, random shared-memory segments,
and workers held still so that memory can be measured (``helpers.lessons.demos`` has the pieces
other lessons share).

Holding matters: a polled sum over a process tree overshoots while processes start and attach,
so the lessons measure steady states, the median between two marks taken while every worker
holds its memory (``MemoryReport.steady``). Every size here is in bytes, every duration in seconds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import multiprocessing as mp
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np

from helpers.lessons import workers
from helpers.lessons.demos import (
    HOLD_SECONDS,
    SETTLE_SECONDS,
    hold,
    join_or_kill,
    wait_until_ready,
)
from helpers.measure import system
from helpers.measure.units import format_bytes


def fresh_array(n_bytes: int) -> np.ndarray:
    """A float64 array over a brand-new anonymous mapping: none of its pages is resident yet.

    ``np.empty`` may hand back memory the allocator recycled (already resident, so already
    faulted in); a new mapping never does. The mapping is released with the last view of it.
    """
    n_items = max(1, n_bytes // 8)
    region = mmap.mmap(-1, n_items * 8)
    return np.frombuffer(region, dtype=np.float64)


def release_free_heap() -> bool:
    """Ask the C allocator to give freed memory back to the system (glibc ``malloc_trim(0)``).

    Freed blocks otherwise stay resident and are recycled, so a new array may add nothing to
    RSS. Returns False where there is no glibc (macOS, musl): nothing was released.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
    return True


def random_segment(n_bytes: int, seed: int = 0) -> shared_memory.SharedMemory:
    """A new shared-memory segment of ``n_bytes`` filled with random float64, in place.

    Checks the free space in /dev/shm first: writing past a full /dev/shm would kill this
    process with SIGBUS, so a segment that cannot fit raises MemoryError instead. The caller
    owns the segment: ``close()`` it, then ``unlink()`` it in a ``finally``.
    """
    free = system.shm_free()
    if free is not None and n_bytes > free:
        raise MemoryError(
            f"a {format_bytes(n_bytes)} segment does not fit: /dev/shm has {format_bytes(free)} "
            "free; lower LAB_ARRAY_MB"
        )
    segment = shared_memory.SharedMemory(create=True, size=n_bytes)
    try:
        view = np.ndarray((n_bytes // 8,), dtype=np.float64, buffer=segment.buf)
        np.random.default_rng(seed).random(out=view)  # no temporary array
        del view
    except BaseException:
        segment.close()
        segment.unlink()
        raise
    return segment


def segment_checksum(name: str) -> int:
    """Worker: attach the named segment, return the sum of its bytes (reads every page)."""
    segment = shared_memory.SharedMemory(name=name)
    try:
        view = np.ndarray((segment.size,), dtype=np.uint8, buffer=segment.buf)
        total = int(view.sum(dtype=np.uint64))
        del view
        return total
    finally:
        segment.close()


@dataclass(frozen=True)
class SelfCheck:
    """What ``self_check`` proved: the start method used, the checksum a worker read back,
    and whether the segment lived in /dev/shm (None where the system has no /dev/shm)."""

    start_method: str
    checksum: int
    segment_in_dev_shm: bool | None


def self_check(start_method: str = "spawn", n_bytes: int = 1 << 20) -> SelfCheck:
    """Prove the setup works: a worker started with ``start_method`` attaches a fresh shared
    segment of ``n_bytes`` that this process wrote, and returns its checksum, which must match.

    Raises RuntimeError naming what failed. Leaves no process and no segment behind.
    """
    segment = random_segment(n_bytes, seed=7)
    try:
        in_dev_shm = (system.SHM_DIR / segment.name.lstrip("/")).exists() if system.SHM_DIR.is_dir() else None
        view = np.ndarray((n_bytes,), dtype=np.uint8, buffer=segment.buf)
        expected = int(view.sum(dtype=np.uint64))
        del view
        with mp.get_context(start_method).Pool(1) as pool:
            answer = pool.apply_async(segment_checksum, (segment.name,)).get(timeout=60)
    finally:
        segment.close()
        segment.unlink()
    if answer != expected:
        raise RuntimeError(f"a {start_method} worker read checksum {answer}, this process wrote {expected}")
    return SelfCheck(start_method, answer, in_dev_shm)


@dataclass(frozen=True)
class Held:
    """What ``hold_in_workers`` leaves: the workers' pids and what ``during`` returned."""

    pids: list[int]
    during: object = None


def hold_in_workers(
    target: Callable,
    args: tuple,
    n_workers: int,
    start_method: str = "spawn",
    hold_seconds: float = HOLD_SECONDS,
    report=None,
    label: str = "hold",
    during: Callable[[], object] | None = None,
) -> Held:
    """Start ``n_workers`` processes running ``target(*args, ready, release)``, wait until every
    one is ready, hold them ``hold_seconds`` (marked on ``report`` as ``'<label> holding'`` and
    ``'<label> end'`` when given), then release and join them.

    ``during`` (optional) is called once while every worker holds. ``target`` must be
    importable (see helpers.lessons.workers: ``hold_shared_segment``, ``allocate_and_hold``), since
    spawn and forkserver children import it by name.
    """
    context = mp.get_context(start_method)
    release = context.Event()
    readies = [context.Event() for _ in range(n_workers)]
    processes = [context.Process(target=target, args=(*args, ready, release)) for ready in readies]
    result = None
    try:
        for process in processes:
            process.start()
        wait_until_ready(readies, processes)
        time.sleep(SETTLE_SECONDS)
        if report is not None:
            result = hold(report, label, hold_seconds, during)
        else:
            time.sleep(hold_seconds / 2)
            result = during() if during is not None else None
            time.sleep(hold_seconds / 2)
    finally:
        release.set()
        join_or_kill(processes)
    return Held([p.pid for p in processes if p.pid is not None], result)


def hold_segment_in_workers(
    segment_name: str,
    n_workers: int,
    start_method: str = "spawn",
    hold_seconds: float = HOLD_SECONDS,
    report=None,
    during: Callable[[], object] | None = None,
) -> Held:
    """``n_workers`` processes attach one shared segment, read every page and hold it still.

    What memory_profiler's ``memory_usage`` runs in lesson 00 (it calls this in the parent).
    Marks ``'shared holding'``/``'shared end'`` on ``report`` when given.
    """
    return hold_in_workers(
        workers.hold_shared_segment, (segment_name,), n_workers, start_method,
        hold_seconds, report, "shared", during,
    )


def steady_per_process(report, start: str, end: str, names: dict[int, str] | None = None) -> str:
    """A text table of each process's median RSS and PSS between two marks of ``report``.

    ``names`` (pid -> role) overrides the report's labels; processes absent there are skipped.
    """
    window = report.window(start, end)
    rows = [("process", "RSS", "PSS")]
    for pid, label in report.process_labels.items():
        seen = [s.processes[pid] for s in window if pid in s.processes]
        if not seen:
            continue
        role = (names or {}).get(pid, label.split(" (")[0])
        rss = statistics.median(p.rss for p in seen)
        pss = statistics.median(p.pss for p in seen)
        rows.append((role, format_bytes(rss), format_bytes(pss)))
    width = max(len(row[0]) for row in rows)
    return "\n".join(f"{role:<{width}}  {rss:>9}  {pss:>9}" for role, rss, pss in rows)
