"""Measure memory across a whole process tree, truthfully.

``track_memory()`` samples this process and every descendant (also ones started after it began)
from a background thread: RSS, USS and PSS of each process, the bytes used in ``/dev/shm``, the
cgroup's memory counter where it is readable, and tracemalloc's peak in this process. All values
are bytes. Why several measures: RSS counts a shared page once per process that maps it (N readers
of one segment sum to ~N arrays), USS counts only private pages, PSS divides each page among the
processes mapping it (so the tree's PSS sum counts a shared array once), tracemalloc sees only this
process's Python-side allocations, and ``/dev/shm`` holds segments no process maps any more.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import statistics
import threading
import time
import tracemalloc
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from helpers.measure import system
from helpers.measure.proctree import (
    ProcessMemory,
    ProcFiles,
    descendant_pids,
    label,
    process_memory,
    resident_bytes,
)
from helpers.measure.units import format_bytes

# glibc's malloc serves a block of at least its mmap threshold with a mapping of its own, returned to
# the kernel on free; after such a free it raises the threshold to that block's size, up to 32 MiB
# (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit), so later blocks of that size come from the heap, which
# keeps freed blocks for reuse: a process's PSS can then count buffers it no longer uses.
# tests/unit/test_strategies.py measures it (MALLOC_MMAP_THRESHOLD_).
GLIBC_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # bytes
DEFAULT_INTERVAL = 0.01  # seconds between samples
MAX_CPU_SHARE = 0.05  # the sampler's promise: at most this share of one core
# Reading /proc/PID/smaps_rollup (PSS, USS) costs the kernel ~0.5 ms per process; statm (RSS) ~20 µs.
# So each sample reads RSS cheaply and re-reads PSS/USS only when the tree changed: a process
# came or went, or one's RSS moved by RSS_CHANGE_BYTES since its exact read, or the exact
# figures are REFRESH_SECONDS old. The sampler budgets its CPU time to TARGET_CPU_SHARE on
# average, leaving the rest of the promise for bursts and noise.
TARGET_CPU_SHARE = 0.6 * MAX_CPU_SHARE
RSS_CHANGE_BYTES = 1024 * 1024
REFRESH_SECONDS = 0.25
BURST_CPU_SECONDS = 0.05  # CPU time of exact reads the sampler may spend at once; half is a reserve


def release_free_heap() -> bool:
    """Ask the C allocator to give freed memory back to the system (glibc ``malloc_trim(0)``).

    Freed blocks otherwise stay resident and are recycled, so a new buffer may add nothing to RSS or
    PSS: call it before a baseline, so that what a measurement allocates shows as growth even where
    ``malloc`` reuses memory it kept (blocks under ``GLIBC_MMAP_THRESHOLD_MAX``). Returns False where
    there is no glibc (macOS, musl): nothing was released.
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


@dataclass(frozen=True)
class TreeSample:
    """The whole tree at one instant: per-process figures and their sums, in bytes.

    ``time`` is seconds since tracking began; ``shm`` and ``cgroup`` are bytes above their
    level when tracking began (``cgroup`` is None where the counter is not readable). ``exact``
    says whether PSS and USS were read afresh in this sample.
    """

    time: float
    processes: dict[int, ProcessMemory]
    shm: int
    cgroup: int | None
    exact: bool = True  # False: PSS/USS carried over from the last exact read (RSS is always fresh)

    @property
    def rss(self) -> int:
        """Sum of RSS over the tree (double counts shared pages)."""
        return sum(p.rss for p in self.processes.values())

    @property
    def uss(self) -> int:
        """Sum of USS over the tree (misses shared pages entirely)."""
        return sum(p.uss for p in self.processes.values())

    @property
    def pss(self) -> int:
        """Sum of PSS over the tree (each mapped page counted once)."""
        return sum(p.pss for p in self.processes.values())


@dataclass(frozen=True)
class SteadyState:
    """Medians over a window of samples, in bytes: what the tree holds once it settled."""

    rss: float
    uss: float
    pss: float
    shm: float
    cgroup: float | None
    samples: int


@dataclass
class MemoryReport:
    """What ``track_memory`` saw. Peaks and timelines are filled when the block exits.

    Peaks are bytes: ``peak_rss``/``peak_uss``/``peak_pss`` are sums over the tree at the worst
    sample, ``peak_shm`` and ``peak_cgroup`` are above their level at start, ``peak_tracemalloc``
    is the most this process's Python-side allocations grew above their level at start.
    """

    interval: float
    samples: list[TreeSample] = field(default_factory=list)
    marks: dict[str, float] = field(default_factory=dict)
    process_labels: dict[int, str] = field(default_factory=dict)
    peak_rss: int = 0
    peak_uss: int = 0
    peak_pss: int = 0
    peak_shm: int = 0
    peak_cgroup: int | None = None
    peak_tracemalloc: int | None = None
    duration: float = 0.0
    sampler_cpu_seconds: float = 0.0
    # Of the sampler thread's CPU time: its exact PSS/USS reads, the part of them it could not
    # refuse (a mark asked for one, or a process was new), and the costliest single exact read.
    sampler_exact_cpu_seconds: float = 0.0
    sampler_forced_cpu_seconds: float = 0.0
    sampler_largest_read_seconds: float = 0.0
    exact_samples: int = 0  # samples whose PSS/USS were read afresh (the others carry them over)
    sampler_thread_id: int | None = None
    _clock_start: float = field(default_factory=time.perf_counter, repr=False)
    _exact_wanted: bool = field(default=False, repr=False)  # set by mark(), cleared by the sampler

    def mark(self, label: str) -> float:
        """Remember this instant under ``label`` (seconds since tracking began) and return it.

        The sampler's next sample after a mark reads PSS/USS exactly, whatever its CPU budget
        says, so a window that opens at a mark holds at least one exact sample.
        """
        now = time.perf_counter() - self._clock_start
        self.marks[label] = now
        self._exact_wanted = True
        return now

    def name_roles(self, workers: Iterable[int] = (), named: Mapping[int, str] | None = None) -> None:
        """Label the processes by role for plots and tables instead of by process id: the tracking
        process "parent", ``named`` pids by their given name ("manager", "raylet"), ``workers``
        "worker 1".."worker N" in the order given, then the other children by kind ("resource
        tracker", "forkserver"), and the remaining ones "worker N+1".. in pid order."""
        named = dict(named or {})
        order = list(dict.fromkeys(workers))
        for pid, text in sorted(self.process_labels.items()):
            kind = text.split(" (")[0]
            if pid in named or pid in order:  # a given worker stays a worker, whatever started it
                continue
            if kind == "this process":
                named[pid] = "parent"
            elif kind in ("resource tracker", "forkserver"):
                named[pid] = kind
            elif pid not in order:
                order.append(pid)
        named.update({pid: f"worker {i}" for i, pid in enumerate(order, start=1) if pid not in named})
        for pid in self.process_labels:
            self.process_labels[pid] = named.get(pid, self.process_labels[pid])

    @property
    def baseline(self) -> TreeSample:
        """The first sample, taken as the block began."""
        return self.samples[0]

    def window(self, start: str | float, end: str | float | None = None) -> list[TreeSample]:
        """The samples between two marks (labels or seconds since tracking began)."""
        t0 = self.marks[start] if isinstance(start, str) else start
        t1 = self.marks[end] if isinstance(end, str) else (end if end is not None else float("inf"))
        return [s for s in self.samples if t0 <= s.time <= t1]

    def by_process(self, start: str | float, end: str | float | None = None
                   ) -> dict[int, tuple[float, float]]:
        """pid -> median (RSS, PSS) in bytes between two marks, for each process seen there: RSS
        from every sample, PSS from the window's exact samples (all of them if none is exact), as
        ``steady`` reads the tree; in the order the samples first list them (this process first)."""
        chosen = self.window(start, end)
        exact = [sample for sample in chosen if sample.exact] or chosen
        medians = {}
        for pid in dict.fromkeys(pid for sample in chosen for pid in sample.processes):
            pss = [s.processes[pid].pss for s in exact if pid in s.processes]
            rss = [s.processes[pid].rss for s in chosen if pid in s.processes]
            if pss:
                medians[pid] = (statistics.median(rss), statistics.median(pss))
        return medians

    def pss_by_process(self, start: str | float, end: str | float | None = None) -> dict[str, float]:
        """Median PSS (bytes) of each process between two marks, keyed by its label (``name_roles``
        names them by role), from the window's exact samples (all of them if none is exact)."""
        return {self.process_labels.get(pid, str(pid)): pss
                for pid, (_, pss) in self.by_process(start, end).items()}

    def steady(self, start: str | float, end: str | float | None = None,
               exact_only: bool = False) -> SteadyState:
        """Median tree RSS/USS/PSS, shm and cgroup (bytes) between two marks.

        Use it for "what does the tree hold": a polled sum overshoots while processes attach,
        because processes are read one after another. PSS and USS come from the window's exact
        samples (read afresh; the others carry old figures over, and another process mapping or
        unmapping shared pages moves PSS without moving RSS); a mark makes the next sample
        exact, so a window that opens at a mark has one. Only a window without any falls back
        to carried-over figures. ``exact_only`` uses exact samples for every measure.
        """
        chosen = self.window(start, end)
        if exact_only:
            chosen = [sample for sample in chosen if sample.exact]
        if not chosen:
            raise ValueError(f"no samples between {start!r} and {end!r}; hold the state longer")
        exact = [sample for sample in chosen if sample.exact] or chosen
        cgroups = [s.cgroup for s in chosen if s.cgroup is not None]
        return SteadyState(
            rss=statistics.median(s.rss for s in chosen),
            uss=statistics.median(s.uss for s in exact),
            pss=statistics.median(s.pss for s in exact),
            shm=statistics.median(s.shm for s in chosen),
            cgroup=statistics.median(cgroups) if cgroups else None,
            samples=len(chosen),
        )

    def timeline(self, measure: str = "pss") -> tuple[list[float], dict[int, list[float]], list[float]]:
        """Times (s), per-process values and tree totals (bytes) of one measure: rss, uss or pss.

        A process absent from a sample (not yet started, or already gone) has NaN there.
        """
        if measure not in ("rss", "uss", "pss"):
            raise ValueError(f"measure must be 'rss', 'uss' or 'pss', got {measure!r}")
        times = [s.time for s in self.samples]
        per_process: dict[int, list[float]] = {}
        for pid in self.process_labels:
            per_process[pid] = [
                getattr(s.processes[pid], measure) if pid in s.processes else float("nan")
                for s in self.samples
            ]
        totals = [getattr(s, measure) for s in self.samples]
        return times, per_process, totals

    def plot(self, measure: str = "pss", ax=None, title: str | None = None):
        """Draw one line per process, the tree's total and /dev/shm over time; return the Axes."""
        from helpers.measure.plots import plot_memory_timeline

        return plot_memory_timeline(self, measure=measure, ax=ax, title=title)

    def summary(self) -> str:
        """Peaks in human units, one line."""
        parts = [
            f"tree PSS {format_bytes(self.peak_pss)}",
            f"RSS {format_bytes(self.peak_rss)}",
            f"USS {format_bytes(self.peak_uss)}",
            f"/dev/shm +{format_bytes(self.peak_shm)}",
        ]
        if self.peak_cgroup is not None:
            parts.append(f"cgroup +{format_bytes(self.peak_cgroup)}")
        if self.peak_tracemalloc is not None:
            parts.append(f"tracemalloc {format_bytes(self.peak_tracemalloc)}")
        return "peaks: " + ", ".join(parts) + f" ({len(self.samples)} samples)"

    def __str__(self) -> str:
        return self.summary()



class _TreeSampler:
    """Background thread that samples the process tree rooted at ``root_pid`` (this process by default)."""

    def __init__(self, report: MemoryReport, root_pid: int | None = None):
        self.report = report
        self.root_pid = root_pid or os.getpid()
        self.cgroup_reader = system.cgroup_memory_usage_reader()
        self.shm_start = system.shm_used() or 0
        self.cgroup_start = self.cgroup_reader()
        self.files = ProcFiles()
        self.exact: dict[int, ProcessMemory] = {}
        self.exact_time = float("-inf")
        self.exact_cpu_seconds = 0.0  # CPU time the last sample spent on its exact read
        self.forced_cpu_seconds = 0.0  # of which, reads the budget could not refuse
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def _tree_changed(self, pids: list[int], rss: dict[int, int | None]) -> bool:
        """Whether a process came or went, or one's RSS moved since its last exact read."""
        if set(pids) != set(self.exact):
            return True
        return any(
            value is None or abs(value - self.exact[pid].rss) >= RSS_CHANGE_BYTES
            for pid, value in rss.items()
        )

    def sample(self, exact: bool = False, change_allowed: bool = True, refresh_allowed: bool = True
               ) -> TreeSample:
        """One sample of the tree. PSS/USS are re-read when ``exact``, when the tree changed and
        ``change_allowed``, or when they are REFRESH_SECONDS old and ``refresh_allowed``; otherwise
        they are carried over (a process never read before is read on its own)."""
        now = time.perf_counter() - self.report._clock_start
        pids = [self.root_pid, *descendant_pids(self.root_pid, self.files)]
        rss = {pid: resident_bytes(pid, self.files) for pid in pids}
        self.files.sweep_untouched()
        processes: dict[int, ProcessMemory] = {}
        self.exact_cpu_seconds = self.forced_cpu_seconds = 0.0
        wanted, self.report._exact_wanted = self.report._exact_wanted, False
        forced = exact or wanted
        exact = (forced or (refresh_allowed and now - self.exact_time >= REFRESH_SECONDS)
                 or (change_allowed and self._tree_changed(pids, rss)))
        if exact:
            exact_start = time.thread_time()
            for pid in pids:
                measured = process_memory(pid)
                if measured is not None:
                    processes[pid] = measured
            self.exact, self.exact_time = dict(processes), now
            self.report.exact_samples += 1
            self.exact_cpu_seconds = time.thread_time() - exact_start
            if forced:
                self.forced_cpu_seconds = self.exact_cpu_seconds
        else:
            for pid in pids:
                if pid not in self.exact:  # a process never read exactly yet: read it alone
                    read_start = time.thread_time()
                    measured = process_memory(pid)
                    self.exact_cpu_seconds += time.thread_time() - read_start
                    self.forced_cpu_seconds += time.thread_time() - read_start
                    if measured is not None:
                        self.exact[pid] = processes[pid] = measured
                elif rss[pid] is not None:
                    known = self.exact[pid]
                    processes[pid] = ProcessMemory(rss[pid], known.uss, known.pss)
        for pid in processes:
            if pid not in self.report.process_labels:
                self.report.process_labels[pid] = label(pid, self.root_pid)
        shm_now = system.shm_used()
        cgroup_now = self.cgroup_reader()
        return TreeSample(
            # Stamped when the reading ended: a sample is never dated before a change it saw.
            time=time.perf_counter() - self.report._clock_start,
            processes=processes,
            exact=exact,
            shm=(shm_now - self.shm_start) if shm_now is not None else 0,
            cgroup=(cgroup_now - self.cgroup_start)
            if cgroup_now is not None and self.cgroup_start is not None
            else None,
        )

    def _run(self) -> None:
        """Sample until stopped, spending at most TARGET_CPU_SHARE of a core on average.

        All of this thread's CPU time counts (waking up included), in two halves. Cheap RSS
        samples are spaced so that they take at most half (every ``interval`` when they are
        cheap enough). Exact PSS/USS reads spend the other half like a token bucket: credit
        accrues at half the share, up to BURST_CPU_SECONDS. A periodic refresh needs more than
        half the bucket; a read because the tree changed may spend the rest and borrow as much
        again, so the moment workers start or attach is read exactly (the debt is paid back
        before the next refresh).
        """
        self.report.sampler_thread_id = threading.get_native_id()
        half_share = TARGET_CPU_SHARE / 2
        cpu_start = cpu_before = time.thread_time()
        credit, wall_before = BURST_CPU_SECONDS / 2, time.perf_counter()
        wait, cheap_cost = self.report.interval, 0.0
        while not self.stop_event.wait(wait):
            self.report.samples.append(
                self.sample(change_allowed=credit > -BURST_CPU_SECONDS / 2,
                            refresh_allowed=credit > BURST_CPU_SECONDS / 2))
            cpu_now, wall_now = time.thread_time(), time.perf_counter()
            exact_cost = self.exact_cpu_seconds
            self.report.sampler_exact_cpu_seconds += exact_cost
            self.report.sampler_forced_cpu_seconds += self.forced_cpu_seconds
            self.report.sampler_largest_read_seconds = max(self.report.sampler_largest_read_seconds,
                                                           exact_cost - self.forced_cpu_seconds)
            # A smoothed cost: one slow sample (a process starting up) must not stall sampling.
            cheap_cost = 0.8 * cheap_cost + 0.2 * max(0.0, cpu_now - cpu_before - exact_cost)
            credit = min(BURST_CPU_SECONDS, credit + (wall_now - wall_before) * half_share) - exact_cost
            cpu_before, wall_before = cpu_now, wall_now
            wait = max(self.report.interval, cheap_cost / half_share - cheap_cost)
        self.report.sampler_cpu_seconds = time.thread_time() - cpu_start


_started_tracemalloc_here = False


class _PythonPeak:
    """tracemalloc's peak for one ``track_memory`` block, in bytes above the traced size at its start.

    tracemalloc keeps one peak per process and each block starts by resetting it, which would erase
    what an enclosing block saw before. So before it resets, a block folds the peak so far into
    every block still open (``seen``: bytes traced at the highest point known to that block).
    """

    open_blocks: list[_PythonPeak] = []  # blocks now measuring, outermost first

    def __init__(self):
        peak_so_far = tracemalloc.get_traced_memory()[1]
        for block in self.open_blocks:
            block.seen = max(block.seen, peak_so_far)
        tracemalloc.reset_peak()
        self.start = self.seen = tracemalloc.get_traced_memory()[0]
        self.open_blocks.append(self)

    def finish(self) -> int:
        """Stop measuring; the most traced memory grew above its start during the block (bytes)."""
        self.open_blocks.remove(self)
        return max(0, max(self.seen, tracemalloc.get_traced_memory()[1]) - self.start)


def _stop_tracemalloc_in_forked_child() -> None:
    """A forked child inherits tracing and runs allocation-heavy code ~8x slower: stop it."""
    if _started_tracemalloc_here and tracemalloc.is_tracing():
        tracemalloc.stop()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_stop_tracemalloc_in_forked_child)


@contextmanager
def track_memory(interval: float = DEFAULT_INTERVAL, trace_python: bool = True,
                 root_pid: int | None = None) -> Iterator[MemoryReport]:
    """Sample the whole process tree every ``interval`` seconds while the block runs.

    The tree is this process and its descendants, or ``root_pid``'s (another process of ours, such
    as a Jupyter server and its kernels; tracemalloc still sees this process only).

    Yields a MemoryReport that is filled when the block exits (also when it raises).
    ``trace_python`` also records tracemalloc's peak for this process (started here if needed;
    forked children do not inherit it). The sampler is a thread, never a forked process. Every
    sample reads each process's RSS (cheap); PSS and USS are re-read (~0.5 ms a process) when a
    process came or went, an RSS moved by 1 MiB, or every 0.25 s (copy-on-write un-sharing
    changes PSS and USS but not RSS), and after such a read the
    sampler waits long enough to stay under 3 % of a core on average; when the tree changes it
    may spend up to 75 ms of CPU at once to read it exactly (``interval`` is the shortest wait).
    """
    global _started_tracemalloc_here
    if interval <= 0:
        raise ValueError(f"interval must be positive, got {interval}")
    report = MemoryReport(interval=interval)
    sampler = _TreeSampler(report, root_pid)
    started_tracing = False
    python_peak = None
    if trace_python:
        if not tracemalloc.is_tracing():
            tracemalloc.start()
            started_tracing = _started_tracemalloc_here = True
        python_peak = _PythonPeak()
    report.samples.append(sampler.sample(exact=True))
    sampler.thread.start()
    try:
        yield report
    finally:
        sampler.stop_event.set()
        sampler.thread.join()
        report.samples.append(sampler.sample(exact=True))
        sampler.files.close()
        report.duration = time.perf_counter() - report._clock_start
        if python_peak is not None:
            report.peak_tracemalloc = python_peak.finish()
            if started_tracing:
                tracemalloc.stop()
                _started_tracemalloc_here = False
        _fill_peaks(report)


def _fill_peaks(report: MemoryReport) -> None:
    report.peak_rss = max(s.rss for s in report.samples)
    report.peak_uss = max(s.uss for s in report.samples)
    report.peak_pss = max(s.pss for s in report.samples)
    report.peak_shm = max(0, max(s.shm for s in report.samples))
    cgroups = [s.cgroup for s in report.samples if s.cgroup is not None]
    report.peak_cgroup = max(0, max(cgroups)) if cgroups else None

