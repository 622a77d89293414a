"""Building blocks several lessons share: memory held still while it is measured, increases between
two marks, tables of them, and PSS by kind of memory.

Holding matters: a polled sum over a process tree overshoots while processes start and attach,
so the lessons measure steady states, the median between two marks taken while every worker
holds its memory (``MemoryReport.steady``). Every size here is in bytes, every duration in seconds.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from helpers.measure import proctree
from helpers.measure.units import format_bytes

SETTLE_SECONDS = 0.1  # after the last worker is ready, before the steady window opens
HOLD_SECONDS = 1.5  # long enough for several samples even when the sampler backs off (~0.5 s)
JOIN_SECONDS = 30.0
READY_SECONDS = 60.0
WINDOW_GRACE_SECONDS = 5.0  # how much longer a window waits for its first sample on a loaded CPU


@contextmanager
def notices_of_sharedarrays() -> Iterator[list[str]]:
    """Collect, in the list it yields, the notices the library logs in the block (an array pickled
    for want of room in /dev/shm: WARNING records of the ``sharedarrays`` logger), instead of letting
    Python print them on stderr."""
    said: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger("sharedarrays")
    logger.addHandler(handler)
    try:
        yield said
    finally:
        logger.removeHandler(handler)


def hold(report, label: str, seconds: float = HOLD_SECONDS, during: Callable[[], object] | None = None):
    """Mark ``'<label> holding'``, wait ``seconds``, mark ``'<label> end'`` on a MemoryReport.

    ``during`` (optional) is called once, halfway through the wait; its result is returned.
    """
    opened = report.mark(f"{label} holding")
    time.sleep(seconds / 2)
    result = during() if during is not None else None
    time.sleep(seconds / 2)
    # On a loaded CPU the sampler thread may not have run during the wait: the window stays open
    # (up to WINDOW_GRACE_SECONDS more) until it holds a sample, so its state can be read.
    deadline = time.monotonic() + WINDOW_GRACE_SECONDS
    while not any(sample.time >= opened for sample in report.samples[-3:]) and time.monotonic() < deadline:
        time.sleep(0.01)
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
        return f"{format_bytes(value)} ({value / unit_bytes:z.2f} arrays)"

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
    return proctree.tree_pss_by_kind(os.getpid())


