"""Small, tested building blocks for lesson 00 (start here): a setup self-check, fresh pages,
random shared-memory segments, and workers held still so that memory can be measured.

Holding matters: a polled sum over a process tree overshoots while processes start and attach,
so the lessons measure steady states, the median between two marks taken while every worker
holds its memory (``MemoryReport.steady``). Every size here is in bytes, every duration in seconds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np

from helpers.lessons import workers
from helpers.measure import system
from helpers.measure.proctree import descendant_pids
from helpers.measure.units import format_bytes

PSS_KINDS = {"Pss_Anon": "anonymous", "Pss_Shmem": "shared memory", "Pss_File": "files (code, libraries)"}

SETTLE_SECONDS = 0.1  # after the last worker is ready, before the steady window opens
HOLD_SECONDS = 1.5  # long enough for several samples even when the sampler backs off (~0.5 s)
JOIN_SECONDS = 30.0
READY_SECONDS = 60.0


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


def hold(report, label: str, seconds: float = HOLD_SECONDS, during: Callable[[], object] | None = None):
    """Mark ``'<label> holding'``, wait ``seconds``, mark ``'<label> end'`` on a MemoryReport.

    ``during`` (optional) is called once, halfway through the wait; its result is returned.
    """
    report.mark(f"{label} holding")
    time.sleep(seconds / 2)
    result = during() if during is not None else None
    time.sleep(seconds / 2)
    report.mark(f"{label} end")
    return result


def wait_until_ready(events, processes, timeout: float = READY_SECONDS) -> None:
    """Wait for each worker's event; fail fast, naming the exit code, if a worker died first."""
    deadline = time.monotonic() + timeout
    for event, process in zip(events, processes, strict=True):
        while not event.wait(0.05):
            if not process.is_alive():
                raise RuntimeError(f"a worker exited with code {process.exitcode} before it was ready")
            if time.monotonic() > deadline:
                raise RuntimeError(f"a worker did not become ready within {timeout:.0f} s")


def join_or_kill(processes, timeout: float = JOIN_SECONDS) -> None:
    """Join every started process, killing any that has not ended within ``timeout`` seconds."""
    for process in processes:
        if process.pid is None:
            continue
        process.join(timeout)
        if process.is_alive():
            process.kill()
            process.join()


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


def increase(report, idle: str, busy: str) -> dict[str, float | None]:
    """Bytes each measure grew between two steady windows of ``report`` (``idle`` -> ``busy``).

    Tree sums of RSS, USS, PSS, the bytes in /dev/shm and the cgroup counter (None where it is
    not readable) are medians over ``'<label> holding'``..``'<label> end'``; the first row is
    tracemalloc's peak over the whole tracked block (this process only).
    """
    before = report.steady(f"{idle} holding", f"{idle} end")
    after = report.steady(f"{busy} holding", f"{busy} end")
    cgroup = None
    if before.cgroup is not None and after.cgroup is not None:
        cgroup = after.cgroup - before.cgroup
    return {
        "tracemalloc peak (this process)": report.peak_tracemalloc,
        "tree RSS sum": after.rss - before.rss,
        "tree USS sum": after.uss - before.uss,
        "tree PSS sum": after.pss - before.pss,
        "/dev/shm bytes": after.shm - before.shm,
        "cgroup counter": cgroup,
    }


def format_measure_table(columns: dict[str, dict[str, float | None]], unit_bytes: int) -> str:
    """A text table: one row per measure, one column per workload, as bytes and in arrays.

    ``unit_bytes`` is one array's size: '64 MiB (1.00 arrays)'. Missing values print as 'n/a'.
    """
    names = list(columns)
    measures = list(dict.fromkeys(m for column in columns.values() for m in column))

    def cell(value: float | None) -> str:
        if value is None:
            return "n/a"
        return f"{format_bytes(value)} ({value / unit_bytes:.2f} arrays)"

    rows = [["measure", *names]]
    rows += [[m, *(cell(columns[n].get(m)) for n in names)] for m in measures]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def tree_pss_by_kind() -> dict[str, int] | None:
    """PSS of this process and its descendants split by kind of page, in bytes, read now.

    'anonymous' (heaps, private arrays), 'shared memory' (segments, tmpfs) and 'files (code,
    libraries)'. File pages are divided among every process on the machine that maps them,
    so that part moves when unrelated programs start or stop. None where the kernel does not
    split PSS in /proc/PID/smaps_rollup (Linux before 5.x, or not Linux).
    """
    totals = dict.fromkeys(PSS_KINDS.values(), 0)
    for pid in [os.getpid(), *descendant_pids(os.getpid())]:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as file:
                lines = file.read().splitlines()[1:]
        except FileNotFoundError:
            continue  # the process ended meanwhile
        except OSError:
            return None
        fields = {parts[0].rstrip(":"): int(parts[1]) * 1024 for parts in map(str.split, lines)}
        if not set(PSS_KINDS) <= set(fields):
            return None
        for field, kind in PSS_KINDS.items():
            totals[kind] += fields[field]
    return totals


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
