"""Do the workers have to be processes? Threads, the GIL and free-threaded Python (lesson 01).

The same fan-out runs on two kinds of workers behind one interface (``executor``): threads of this
process (``ThreadPoolExecutor``: they read the caller's array, nothing is copied) or processes
(``ProcessPoolExecutor``: each chunk is pickled to its worker, lesson 02's baseline). Threads help
only while the work lets go of the GIL: ``sum_numpy`` does (NumPy's loop runs in C without it),
``sum_python`` does not (a Python loop). ``measure_scaling`` times a fan-out on 1..N workers,
``holding_workers`` makes workers hold their chunks while the memory sampler watches. The GIL probe
and the lesson's exercise are in ``gil_heartbeat``; BLAS's thread pools and free-threaded Python in
``blas_and_free_threading``. Seconds and bytes throughout. Worker functions live here: a spawned
worker imports them by name.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial

import numpy as np

from helpers.lessons.gil_heartbeat import tree_cpu_wait_seconds
from helpers.lessons.workers import sleep_then_echo, touch_pages
from helpers.measure.timing import Timing
from helpers.measure.units import format_bytes, format_seconds, shown

THREADS, PROCESSES = "threads", "processes"
TASK_LABELS = {"sum_numpy": "NumPy sum", "sum_python": "Python loop",
               "sum_own_chunk": "NumPy sum, nothing sent",
               "sum_own_chunk_python": "Python loop, nothing sent"}
OWN_CHUNK = {"sum_numpy": "sum_own_chunk", "sum_python": "sum_own_chunk_python"}  # each sum's control
PARENT = "parent"  # the role ``MemoryReport.name_roles`` gives this process
READY_TIMEOUT = 120.0  # seconds every worker gets to receive its chunk and read it
MAX_RUNS = 100  # timed runs of one quick measurement at most (``timed_runs``)


# --- The work: the same sum, in C or in Python (importable by spawned workers) ---------------------


def sum_numpy(chunk: np.ndarray) -> float:
    """Sum the chunk with NumPy: the loop runs in C."""
    return float(np.sum(chunk))


def sum_python(chunk: np.ndarray) -> float:
    """Sum the chunk one element at a time in Python: every step holds the GIL."""
    total = 0.0
    for x in memoryview(chunk):
        total += x
    return total


_own_chunks: dict[int, np.ndarray] = {}  # a worker's own random numbers, by length


def _own_chunk(n_items: int) -> np.ndarray:
    """``n_items`` random numbers this worker made itself, once."""
    if n_items not in _own_chunks:
        _own_chunks.clear()
        _own_chunks[n_items] = np.random.default_rng(n_items).random(n_items)
    return _own_chunks[n_items]


def sum_own_chunk(n_items: int) -> float:
    """``sum_numpy`` of ``n_items`` random numbers this worker made itself (once): the same work
    with nothing to receive, what N processes can do at once on this machine now."""
    return sum_numpy(_own_chunk(n_items))


def sum_own_chunk_python(n_items: int) -> float:
    """``sum_python`` of ``n_items`` numbers this worker made itself: the Python loop on processes
    with nothing to receive, what a GIL per process buys once the chunk is shared, not sent."""
    return sum_python(_own_chunk(n_items))


def split(array: np.ndarray, n: int) -> list[np.ndarray]:
    """``n`` contiguous chunks of ``array``, as views (nothing is copied)."""
    return np.array_split(array, n)


def fan_out(executor: Executor, task: Callable[..., float], chunks: list) -> float:
    """One task per chunk (an array, or what the task takes), all at once; the sum of their answers."""
    return sum(executor.map(task, chunks))


# --- Workers of either kind ----------------------------------------------------------------------


@contextmanager
def executor(kind: str, n: int, context=None, initializer=None, initargs: tuple = ()) -> Iterator[Executor]:
    """``n`` started and warmed workers: threads of this process, or processes of ``context``'s
    start method (required for processes). Shut down when the block ends, also on error."""
    if kind == THREADS:
        pool: Executor = ThreadPoolExecutor(n, thread_name_prefix="lesson01-worker",
                                            initializer=initializer, initargs=initargs)
    elif kind == PROCESSES:
        if context is None:
            raise ValueError("processes need a multiprocessing context: name the start method")
        pool = ProcessPoolExecutor(n, mp_context=context, initializer=initializer, initargs=initargs)
    else:
        raise ValueError(f"kind must be {THREADS!r} or {PROCESSES!r}, got {kind!r}")
    try:
        list(pool.map(sleep_then_echo, [0.1] * n, range(n)))  # every worker started (and imported NumPy)
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def timed_rounds(calls: Mapping[int, Callable[[], object]], check: Callable[[object], None], repeat: int,
                 budget_s: float = 10.0, min_total_s: float = 0.5) -> dict[int, Timing]:
    """Seconds of each call, timed in rounds (one run of each call per round), so that all of them
    meet the same moments of a busy machine. One untimed warm-up call each, then rounds until every
    call has ``repeat`` runs that add up to ``min_total_s`` (quick calls: more runs, a fastest run
    that a burst of other work did not touch), at most ``MAX_RUNS``; slow ones stop once
    ``budget_s`` went by (after one round at least). Every value is checked."""
    for call in calls.values():
        check(call())
    runs: dict[int, list[float]] = {key: [] for key in calls}
    deadline = time.perf_counter() + budget_s

    def more() -> bool:
        return any(len(r) < repeat or sum(r) < min_total_s for r in runs.values())

    while not runs[next(iter(runs))] or (time.perf_counter() < deadline and more()
                                         and max(map(len, runs.values())) < MAX_RUNS):
        for key, call in calls.items():
            start = time.perf_counter()
            value = call()
            runs[key].append(time.perf_counter() - start)
            check(value)
    return {key: Timing(tuple(r)) for key, r in runs.items()}


def timed_runs(fn: Callable[[], object], check: Callable[[object], None], repeat: int,
               budget_s: float = 10.0, min_total_s: float = 0.5) -> Timing:
    """``timed_rounds`` of one call: its Timing (seconds)."""
    return timed_rounds({0: fn}, check, repeat, budget_s, min_total_s)[0]


@dataclass(frozen=True)
class Scaling:
    """Seconds of one fan-out of ``task`` on ``n`` workers of ``kind``, for each ``n`` measured."""

    kind: str
    task: str
    timings: dict[int, Timing]
    waited_for_cpu: float = 0.0  # threads of ours waiting for a CPU at once, on average during the timing
    nbytes: int = 0  # bytes each fan-out sums, whatever the number of workers

    @property
    def label(self) -> str:
        """What was measured, in words: the task, the kind of worker and, where known, the bytes each
        fan-out sums ("Python loop, threads, 4 MiB"): rows that sum different sizes do different work."""
        size = f", {format_bytes(self.nbytes)}" if self.nbytes else ""
        return f"{TASK_LABELS.get(self.task, self.task)}, {self.kind}{size}"

    def speed_ups(self, of: str = "min") -> dict[int, float]:
        """One worker's time over ``n`` workers' time, each the fastest run (``of="min"``: noise only
        adds time) or the median run (``of="median"``)."""
        one = getattr(self.timings[1], of)
        return {n: one / getattr(timing, of) for n, timing in self.timings.items()}


def worker_counts(n_max: int) -> list[int]:
    """1, 2, ... ``n_max`` (up to 4 workers), else the powers of two below ``n_max`` and ``n_max``."""
    if n_max <= 4:
        return list(range(1, n_max + 1))
    return sorted({2**k for k in range(n_max.bit_length()) if 2**k < n_max} | {n_max})


def measure_scaling(kind: str, task: Callable[[np.ndarray], float], array: np.ndarray, counts: list[int],
                    context=None, repeat: int = 5, budget_s: float = 10.0) -> Scaling:
    """Time ``fan_out(task)`` over ``array`` split in ``n`` chunks on ``n`` workers, for each ``n`` of
    ``counts``, in rounds (``timed_rounds``); all the pools start and warm up before the timing
    (not timed). Checks every answer."""
    expected = float(np.sum(array))

    def check(total) -> None:
        if not np.isclose(total, expected, rtol=1e-8, atol=0):
            raise AssertionError(f"the workers' sum {total} is not the array's {expected}")

    with ExitStack() as pools:
        calls = {n: partial(fan_out, pools.enter_context(executor(kind, n, context)), task, split(array, n))
                 for n in counts}
        waited, start = tree_cpu_wait_seconds(), time.perf_counter()
        timings = timed_rounds(calls, check, repeat, budget_s * len(counts))
        waited_for_cpu = (tree_cpu_wait_seconds() - waited) / (time.perf_counter() - start)
    return Scaling(kind, task.__name__, timings, waited_for_cpu, array.nbytes)


def measure_scaling_without_sending(n_items: int, counts: list[int], context, repeat: int = 5,
                                    budget_s: float = 10.0,
                                    task: Callable[[int], float] = sum_own_chunk) -> Scaling:
    """Like ``measure_scaling(PROCESSES, sum_numpy, ...)`` on ``n_items`` numbers, but each worker
    sums ``n_items / n`` numbers it already holds (``task``: ``sum_own_chunk``, or
    ``sum_own_chunk_python`` for the Python loop): the control that says whether this machine had
    ``n`` CPUs free for the work, with no GIL and no sending involved."""
    def check(total) -> None:
        if not total > 0:
            raise AssertionError(f"a sum of random numbers in [0, 1) came out as {total}")

    with ExitStack() as pools:
        calls = {n: partial(fan_out, pools.enter_context(executor(PROCESSES, n, context)), task,
                            [n_items // n + (i < n_items % n) for i in range(n)])  # split's chunk lengths
                 for n in counts}
        waited, start = tree_cpu_wait_seconds(), time.perf_counter()
        timings = timed_rounds(calls, check, repeat, budget_s * len(counts))
        waited_for_cpu = (tree_cpu_wait_seconds() - waited) / (time.perf_counter() - start)
    return Scaling(PROCESSES, task.__name__, timings, waited_for_cpu, n_items * 8)  # float64


# --- Workers that hold their chunk while the memory sampler watches -------------------------------

_signals: tuple | None = None  # (ready semaphore, release event) of this worker's pool


def install_signals(ready, release) -> None:
    """Pool initializer: keep the pool's two signals (threads share them; a process receives them
    at start-up, the only way a multiprocessing semaphore may travel)."""
    global _signals
    _signals = (ready, release)


def hold_chunk(chunk: np.ndarray) -> int:
    """Read every page of the chunk, say so, and hold it until released; return this process's id."""
    ready, release = _signals
    touch_pages(chunk)
    ready.release()
    release.wait()
    return os.getpid()


class HoldingWorkers:
    """Started workers of one kind that can be told to hold chunks (``holding``). ``held_by``: the
    process ids that held the last chunks (threads: this process, once per thread)."""

    def __init__(self, pool: Executor, ready, release, n: int):
        self.pool, self.ready, self.release, self.n = pool, ready, release, n
        self.held_by: list[int] = []

    @contextmanager
    def holding(self, chunks: list[np.ndarray]) -> Iterator[None]:
        """Give each worker one chunk (threads: the view itself; processes: a pickled copy) and wait
        until each has read every page of it; release them when the block ends."""
        if len(chunks) != self.n:
            raise ValueError(f"give one chunk per worker: {self.n} workers, {len(chunks)} chunks")
        futures = [self.pool.submit(hold_chunk, chunk) for chunk in chunks]
        try:
            for _ in chunks:
                if not self.ready.acquire(timeout=READY_TIMEOUT):
                    failed = [repr(f.exception()) for f in futures if f.done() and f.exception()]
                    raise RuntimeError(f"the workers did not all hold their chunk: {failed or 'timed out'}")
            yield
        finally:
            self.release.set()
            self.held_by = [future.result(timeout=READY_TIMEOUT) for future in futures]
            self.release.clear()


@contextmanager
def holding_workers(kind: str, n: int, context=None) -> Iterator[HoldingWorkers]:
    """``n`` started workers of ``kind`` (threads, or processes of ``context``) ready to hold chunks;
    stopped, and their signals dropped (a process semaphore is a file in /dev/shm), on exit."""
    global _signals
    if kind == THREADS:
        ready, release = threading.Semaphore(0), threading.Event()
    elif context is None:
        raise ValueError("processes need a multiprocessing context: name the start method")
    else:
        ready, release = context.Semaphore(0), context.Event()
    workers = None
    try:
        with executor(kind, n, context, install_signals, (ready, release)) as pool:
            workers = HoldingWorkers(pool, ready, release, n)
            yield workers
    finally:
        if workers is not None:
            workers.pool = workers.ready = workers.release = None
        _signals = None  # the threads' signals were installed in this process


# --- Memory and plots -----------------------------------------------------------------------------


def pss_added(report, kinds: Mapping[str, Mapping[str, int] | None], before: str,
              after: str) -> dict[str, float]:
    """Bytes the tree's PSS grew from state ``before`` to ``after`` (held with ``demos.hold``):
    ``total``, the steady medians' difference, and ``data``, anonymous plus shared-memory pages
    only (``kinds``: ``demos.tree_pss_by_kind`` read in each state; file pages move whenever other
    programs map the same libraries). ``data`` falls back to ``total`` where the kernel has no split."""
    total = (report.steady(f"{after} holding", f"{after} end").pss
             - report.steady(f"{before} holding", f"{before} end").pss)
    if kinds.get(before) is None or kinds.get(after) is None:
        return {"total": total, "data": total}
    data = sum(kinds[after][kind] - kinds[before][kind] for kind in ("anonymous", "shared memory"))
    return {"total": total, "data": data}


def steady_by_role(report, label: str) -> dict[str, float]:
    """Median PSS (bytes) of each process over the exact samples of state ``label`` (held with
    ``demos.hold``), keyed by the report's labels (``MemoryReport.name_roles`` names them by role)."""
    return report.pss_by_process(f"{label} holding", f"{label} end")


def unpickling_spikes(report, before: str, state: str, chunk_bytes: int) -> list[str]:
    """The workers (by role) whose PSS, from mark ``before`` to the end of state ``state`` (held with
    ``demos.hold``), rose at least a quarter of ``chunk_bytes`` above their steady PSS in that state:
    the pickle and the array made from it, both alive while the worker unpickles. A spike shorter
    than the sampler's interval between two exact reads is not seen."""
    held = steady_by_role(report, state)
    window = report.window(before, f"{state} end")
    spiked = []
    for pid, role in report.process_labels.items():
        peak = max((s.processes[pid].pss for s in window if pid in s.processes), default=0)
        if role.startswith("worker") and role in held and peak - held[role] >= chunk_bytes / 4:
            spiked.append(role)
    return sorted(spiked)


def scaling_conclusion(by: Mapping[tuple[str, str], Scaling], calm: Mapping[tuple[str, str], bool],
                       usable_cpus: int, free_threaded: bool, array_bytes: int, python_bytes: int,
                       wait_limit: float | None = None) -> str:
    """Section 1's conclusion in Markdown, from the fan-outs ``by`` (kind, task) and whether each judged
    speed-up was measured with CPUs to spare (``calm``): speed-ups on fastest runs and on medians; the
    Python loop's processes judged on their own control (nothing sent: what a GIL each buys), and set
    against its threads on fastest runs and on medians; the share of one worker's time that summing takes
    (its control's time over the time with the chunk received), for each sum, and whether NumPy's workers
    saved more than its whole sum (then unpickling overlapped the next send too). The control counts as proof
    of free CPUs only while the tree's threads waiting for a CPU stayed at most ``wait_limit`` at once on
    average (default: a quarter of the workers)."""
    n = max(next(iter(by.values())).timings)
    wait_limit = n / 4 if wait_limit is None else wait_limit
    up = {key: s.speed_ups()[n] for key, s in by.items()}
    up_median = {key: s.speed_ups("median")[n] for key, s in by.items()}
    fastest = {key: s.timings[n].min for key, s in by.items()}
    one = {key: s.timings[1].min for key, s in by.items()}
    threads_np, threads_py = (THREADS, "sum_numpy"), (THREADS, "sum_python")
    processes_np, processes_py = (PROCESSES, "sum_numpy"), (PROCESSES, "sum_python")
    control = (PROCESSES, "sum_own_chunk")  # processes with nothing to send
    loop_control = (PROCESSES, OWN_CHUNK["sum_python"])  # the Python loop's own control, where measured
    loop_control = loop_control if loop_control in by else control
    send_cost = fastest[processes_np] / fastest[threads_np]
    python_floats, array_floats = python_bytes // 8, array_bytes // 8
    per_element = (one[threads_py] / python_bytes) / (one[threads_np] / array_bytes)
    slower = fastest[processes_py] > fastest[threads_py]
    summing = {"numpy": one[control] / one[processes_np], "loop": one[loop_control] / one[processes_py]}
    loop_share = loop_control != control  # the loop's summing share, where its own control measured it
    # saving more than the whole sum takes means more than the sum overlapped the next send (as printed)
    saved = shown(one[processes_np]) - shown(fastest[processes_np])
    unpickling_overlapped = usable_cpus >= n >= 2 and saved > shown(one[control])

    def waited(key):  # why a speed-up is not judged on this run, if it is not
        return ("" if calm.get(key, True) else
                f"; not judged: CPU wait {by[key].waited_for_cpu:.2f}")

    noisy = ("; summing from memory is noisy"
             if up_median[threads_np] < 0.9 * up[threads_np] else "")
    whose = "" if loop_control != control else " (NumPy's control)"
    loop = (f"- **Python loop:** threads **{up[threads_py]:.2f}×**"
            + ("" if free_threaded else ": they take turns")
            + (f" ({waited(threads_py)[2:]}; section 3's probe judges it)"
               if not calm.get(threads_py, True) else "")
            + f". Processes with nothing sent{whose}: **{up[loop_control]:.2f}×**"
            + ("" if free_threaded else ", a GIL each") + f"{waited(loop_control)}.")
    against = (f"- **Python loop, processes receiving their chunks:** "
               f"{format_seconds(by[processes_py].timings[n].min)} against the threads' "
               f"{format_seconds(by[threads_py].timings[n].min)} (fastest runs; medians "
               f"{format_seconds(by[processes_py].timings[n].median)} against "
               f"{format_seconds(by[threads_py].timings[n].median)}). "
               f"Their {up[processes_py]:.2f}× speed-up is over one process, not threads.")
    control_wait = by[control].waited_for_cpu
    if usable_cpus >= n >= 2 and control_wait > wait_limit:
        cpus = (f"sped up {up[control]:.2f}× on fastest runs, {up_median[control]:.2f}× on medians (CPU "
                f"wait {control_wait:.2f}, over the {wait_limit:.2f} limit): "
                + ("the second CPU was" if n == 2 else f"the {n} CPUs were")
                + " free only part of the time.")
    elif usable_cpus >= n >= 2 and up[control] >= 0.75 * n:
        cpus = f"sped up {up[control]:.2f}×: the {n} CPUs were really there."
    else:
        cpus = f"sped up {up[control]:.2f}×: this machine had no room for {n} workers at once."
    return "\n".join([
        f"**Conclusion.** {n} workers on {usable_cpus} usable CPU{'s' * (usable_cpus > 1)}; NumPy's "
        f"control, processes with nothing to send, {cpus}"
        + (" **On this run processes that received their chunks beat threads at neither sum.**"
           if slower and send_cost > 1 else ""),
        "",
        f"- **NumPy, threads:** **{up[threads_np]:.2f}×** as fast as one (fastest runs; "
        f"{up_median[threads_np]:.2f}× on medians{noisy}{waited(threads_np)}).",
        loop,
        against,
        f"- **NumPy, processes:** **{send_cost:.0f}×** as long as threads; {n} workers "
        + (f"sped them up {'only ' * (up[processes_np] < 0.75 * n)}{up[processes_np]:.2f}×"
           if up[processes_np] >= 1 else f"made them no faster ({up[processes_np]:.2f}×)")
        + ". This process's *feeder thread* pickles and writes the chunks into the pool's one pipe in turn: "
        "only what a worker does after receiving, unpickling ([lesson 02](02_pickle_baseline.ipynb) times "
        "`pickle.loads`) and summing, can overlap the next send. "
        f"Summing was {_share(summing['numpy'])} of one worker's time "
        f"({format_seconds(one[control])} of {format_seconds(one[processes_np])})"
        + (f", the loop's {_share(summing['loop'])} ({format_seconds(one[loop_control])} of "
           f"{format_seconds(one[processes_py])})" if loop_share else "") + "."
        + (f" NumPy's {n} workers saved {format_seconds(saved)}, more than its whole sum: unpickling "
           "overlapped too." if unpickling_overlapped else ""),
        "",
        f"Per float, one thread's Python loop (on {format_bytes(python_bytes)}) took "
        f"{_ns(one[threads_py] / python_floats)} ns, `np.sum` (on {format_bytes(array_bytes)}) "
        f"{_ns(one[threads_np] / array_floats)} ns: "
        f"{per_element:.0f}× as long.",
    ])


def _share(fraction: float) -> str:
    """A fraction as a percentage, as printed: whole percents from 1%, one decimal below."""
    return f"{fraction:.0%}" if fraction >= 0.01 else f"{fraction:.1%}"


def _ns(seconds: float) -> str:
    """A time per float in nanoseconds, as printed: two figures under 1 ns, else one decimal."""
    ns = seconds * 1e9
    return f"{ns:.2g}" if ns < 1 else f"{ns:.1f}" if ns < 100 else f"{ns:.0f}"


def verdict(by: Mapping[tuple[str, str], Scaling], wait_limit: float | None = None) -> str:
    """The lesson's first takeaway, as a Markdown bullet: processes pay off only when receiving the data
    costs less than the time a GIL each saves. For each sum with a control (``OWN_CHUNK``, nothing sent),
    on n workers' fastest runs as printed: the threads' time, the control's (their difference is what a
    GIL each saved), what receiving the chunks added (the processes' time less the control's), and which
    kind of worker won, in words the values choose ("narrowly" only where medians agree)."""
    n = max(next(iter(by.values())).timings)
    limit = n / 4 if wait_limit is None else wait_limit  # a control that waited more timed no fair baseline
    tasks = ("sum_python", "sum_numpy")
    name = {"sum_python": "the loop", "sum_numpy": "`np.sum`"}
    fastest = {key: shown(s.timings[n].min) for key, s in by.items()}

    def close(a: float, b: float) -> bool:  # "narrowly": within 1.25x, on fastest runs and on medians
        return max(a, b) < 1.25 * min(a, b)

    def medians(task: str) -> tuple[float, float]:
        return by[THREADS, task].timings[n].median, by[PROCESSES, task].timings[n].median

    parts = []
    for task in tasks:
        control = by.get((PROCESSES, OWN_CHUNK[task]))
        threads, processes = fastest[THREADS, task], fastest[PROCESSES, task]
        size = format_bytes(by[THREADS, task].nbytes) if by[THREADS, task].nbytes else "array"
        if control is None:
            parts.append(f"{name[task]}'s {size} took the threads {format_seconds(threads)}, the processes "
                         f"{format_seconds(processes)}.")
            continue
        alone = fastest[PROCESSES, OWN_CHUNK[task]]
        saved, added = threads - alone, max(0.0, processes - alone)
        lost = processes > threads
        parts.append(
            f"{name[task][0].upper() if parts else name[task][0]}{name[task][1:]}'s {size} took the threads "
            f"{format_seconds(threads)}, "
            f"the processes {format_seconds(alone)} with nothing sent"
            + (f" (rough: CPU wait {control.waited_for_cpu:.2f})"
               if control.waited_for_cpu > limit else "")
            + (f": {'a GIL each' if task == 'sum_python' else 'they'} saved {format_seconds(saved)}"
               if saved > 0 else ": nothing saved")
            + (f". Receiving the chunks added {format_seconds(added)}" if added > 0 else
               ". Receiving the chunks cost nothing measurable") + ", so the processes "
            + ("lost" if lost else "won")
            + (" narrowly" if close(threads, processes) and close(*medians(task)) else "")
            + f" ({format_seconds(processes)}).")
    return (f"- **Processes pay off only when receiving the data costs less than the time they save** "
            f"(section 1). With {n} workers (fastest runs), " + " ".join(parts)
            + " Heavier work per element, or sharing the array (lessons 04 to 08), tips the balance.")


def format_change(nbytes: float) -> str:
    """A memory change for a reader: ``format_bytes``, or "~0" under 1 MiB either way (the sampler's
    noise, where a part can read larger than the whole)."""
    return "~0" if abs(nbytes) < 2**20 else format_bytes(nbytes)


def plot_scaling(scalings: list[Scaling], usable_cpus: int):
    """Two panels, one line per (kind, task): left, the speed-up over one worker against the number
    of workers; right, the bytes summed per second (GiB/s, log scale) of the same fastest runs, which
    shows what a speed-up hides: the time each way takes. Each line is nudged sideways a little in
    both panels, so that equal values hide no point. Returns the two Axes."""
    import matplotlib.pyplot as plt

    _, (speed, rate) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    styles = {THREADS: "-", PROCESSES: "--"}
    markers = {"sum_numpy": "o", "sum_python": "s", "sum_own_chunk": "^"}
    counts = sorted({n for s in scalings for n in s.timings})
    for i, s in enumerate(scalings):
        ups = s.speed_ups()
        nudge = 0.02 * (i - (len(scalings) - 1) / 2)  # sideways, so that equal speed-ups hide no point
        style = {"linestyle": styles[s.kind], "marker": markers.get(s.task, "^"), "label": s.label}
        line = speed.plot([n + nudge for n in ups], list(ups.values()), **style)[0]
        if s.nbytes:
            rate.plot([n + nudge for n in s.timings], [s.nbytes / t.min / 2**30 for t in s.timings.values()],
                      color=line.get_color(), **style)
    speed.plot(counts, [min(n, usable_cpus) for n in counts], ":", color="grey",
               label=f"ideal on {usable_cpus} usable CPU{'s' * (usable_cpus != 1)}")
    speed.set(xlabel="workers (points nudged sideways: none hides another)",
              ylabel="speed-up over one worker (fastest runs)", xticks=counts,
              title="Speed-up: each line against its own one worker")
    rate.set(xlabel="workers (points nudged sideways: none hides another)",
             ylabel="GiB summed per second (fastest runs, log scale)", xticks=counts,
             yscale="log", title="Throughput: GiB summed per second (higher is faster)")
    speed.legend(fontsize=8)
    return speed, rate


def plot_held_states(report, title: str):
    """``report.plot("pss")`` of states held with ``demos.hold``: each state named once, above the plot
    where it begins (its '... holding' mark, without that word); the ends stay as unnamed lines."""
    ax = report.plot("pss", title=title)
    for text in list(ax.texts):
        label = text.get_text()
        if label.endswith(" end"):
            text.remove()
        else:  # above the plot area, where it hides no line
            text.set_text(label.removesuffix(" holding"))
            text.xy = text.xyann = (text.xy[0], 1.01)
            text.set(rotation=20, va="bottom", ha="left", rotation_mode="anchor")
    ax.set_title(title, pad=40)
    ax.figure.set_size_inches(10, 4.6)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax
