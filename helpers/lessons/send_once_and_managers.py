"""Send a big object to pool workers once, not with every task; and what a Manager proxy costs instead.

``ListSequence`` is a Keras-``Sequence``-like object: ``len()`` batches, ``seq[i]`` builds batch
``i`` (an ndarray) from a wrapped list of items, or from a ``Manager().list()`` proxy of them.
Three ways to give it to pool workers:

- with every task: ``pool.apply_async(batch_sum, (seq, i))`` pickles the whole object per task;
- once per worker: ``Pool(initializer=install, initargs=(seq,))`` sets a module global in each
  worker at start-up, and tasks send only the index (``installed_batch_sum(i)``);
- through a manager: the data lives in one manager process and every item read is a round trip.

``installed_pool`` is the finished version of the second way. ``seconds_per_task`` and the
read-timing functions measure what each way costs, in seconds; ``proxy_task_costs`` runs the
proxy's pools. ``post_items`` rebuilds the list of a widely read post on Keras ``Sequence``
workers, and ``EXERCISE`` is the lesson's "Your turn" on it. Everything a worker runs is here,
in an importable module: a spawned worker imports it by name. The lesson's figures and table
are in ``send_once_and_managers_figures``.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import sys
import time
import tracemalloc
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import numpy as np

from helpers.lessons import ray_session
from helpers.lessons.exercises import Exercise
from helpers.measure.timing import Timing, time_it
from helpers.measure.units import approx_ratio, approx_seconds  # noqa: F401  (the lesson calls send_once.approx_*)

ITEM_FLOATS = 1024  # one item: 1024 float64 numbers, 8 KiB (a 32x32 image, say)
ITEM_BYTES = ITEM_FLOATS * 8
BATCH_ITEMS = 8  # items per batch: a batch is 64 KiB


def make_block(n_bytes: int, seed: int = 0) -> np.ndarray:
    """Random float64 numbers, one item of ``ITEM_FLOATS`` per row, about ``n_bytes`` (at least one batch).

    ``list(block)`` is a list of items: each row is a view that pickles as its own 8 KiB of data.
    """
    n_items = max(BATCH_ITEMS, n_bytes // ITEM_BYTES)
    return np.random.default_rng(seed).random((n_items, ITEM_FLOATS))


class ListSequence:
    """Batches of a wrapped list, Keras-``Sequence`` style: ``len(seq)`` batches, ``seq[i]`` one batch.

    ``items`` may be a list of equal-shape arrays or a ``Manager().list()`` proxy of them: a batch
    is read with one slice (``items[start:stop]``), one round trip for a proxy.
    """

    def __init__(self, items, batch_size: int = BATCH_ITEMS):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.items = items
        self.batch_size = batch_size

    def __len__(self) -> int:
        return math.ceil(len(self.items) / self.batch_size)

    def __getitem__(self, idx: int) -> np.ndarray:
        if not 0 <= idx < len(self):
            raise IndexError(f"batch {idx} out of range for a sequence of {len(self)} batches")
        start = idx * self.batch_size
        return np.stack(self.items[start : start + self.batch_size])


# --- Work done with the object sent along with every task -----------------------------------


def batch_sum(sequence, idx: int) -> float:
    """Build batch ``idx`` of the sequence this task was sent and sum it."""
    return float(np.sum(sequence[idx]))


def items_sum(items, indices: Sequence[int]) -> float:
    """Read ``items[i]`` for each index, one read each (one round trip each on a proxy), and sum them."""
    return float(sum(np.sum(items[i]) for i in indices))


def item_at(items, idx: int):
    """``items[idx]``: one read (one round trip on a proxy), as in the post's ``get_item``."""
    return items[idx]


# --- Work done with the object installed once per worker ------------------------------------

_installed: object | None = None


def install(obj) -> None:
    """Pool initializer: keep ``obj`` in this process's module global (runs once per worker)."""
    global _installed
    _installed = obj


def uninstall() -> None:
    """Forget what this process installed."""
    global _installed
    _installed = None


def installed():
    """The object installed in this process; LookupError naming the fix if there is none."""
    if _installed is None:
        raise LookupError(
            "nothing is installed in this process: pass the object to "
            "Pool(initializer=install, initargs=(obj,)) so that every worker gets it at start-up"
        )
    return _installed


def installed_batch_sum(idx: int) -> float:
    """Build batch ``idx`` of the installed sequence and sum it (the task sends only ``idx``)."""
    return batch_sum(installed(), idx)


def installed_items_sum(indices: Sequence[int]) -> float:
    """``items_sum`` over the installed list or proxy (the task sends only the indices)."""
    return items_sum(installed(), indices)


def installed_item_at(idx: int):
    """``item_at`` on the installed list or proxy (the task sends only the index)."""
    return item_at(installed(), idx)


def installed_length(_=None) -> tuple[int, int]:
    """(this worker's pid, len of its installed object)."""
    return os.getpid(), len(installed())


def shrink_installed(n_items: int) -> tuple[int, int]:
    """Cut this worker's installed sequence to its first ``n_items`` items; return (pid, new len)."""
    sequence = installed()
    del sequence.items[n_items:]
    return os.getpid(), len(sequence)


def installed_length_after_pause(seconds: float) -> tuple[int, int]:
    """Sleep ``seconds``, then report ``installed_length`` (see ``answers_from_every_worker``)."""
    time.sleep(seconds)
    return installed_length()


def pid_after_pause(seconds: float) -> tuple[int, None]:
    """Sleep ``seconds``, then return (this worker's pid, None)."""
    time.sleep(seconds)
    return os.getpid(), None


def answers_from_every_worker(
    pool, n_workers: int, fn=pid_after_pause, pause: float = 0.02, timeout: float = 120.0
) -> dict[int, object]:
    """Ask until ``n_workers`` distinct workers have answered; return {pid: answer}.

    ``fn(pause)`` must sleep ``pause`` seconds and return (pid, answer): each round sends
    2 * ``n_workers`` such tasks, and a sleeping worker leaves the next one to an idle worker.
    With the default ``fn`` it waits until every worker has started (its initializer ran).
    Raises TimeoutError after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    answers: dict[int, object] = {}
    while len(answers) < n_workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(answers)} of {n_workers} workers answered in {timeout} s")
        answers.update(pool.map(fn, [pause] * (2 * n_workers), chunksize=1))
    return answers


# --- The finished version ---------------------------------------------------------------------


def _main_is_importable() -> bool:
    """Whether a spawned worker can import this process's ``__main__`` (a script can, a notebook cannot)."""
    main = sys.modules.get("__main__")
    return getattr(main, "__file__", None) is not None or getattr(main, "__spec__", None) is not None


class _Discard(io.RawIOBase):
    """A file that accepts every write and keeps nothing."""

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        return memoryview(data).nbytes


class _MainModuleCheck(pickle.Pickler):
    """A pickler that refuses what a spawned worker could not import back: things of ``__main__``."""

    def reducer_override(self, obj):
        by_name = isinstance(obj, type | types.FunctionType)
        module = getattr(obj, "__module__", None) if by_name else type(obj).__module__
        if module == "__main__":
            name = obj.__qualname__ if by_name else type(obj).__qualname__
            raise TypeError(
                f"{name!r} is defined in __main__ (a notebook or an interactive session): a spawned "
                "worker cannot import it back; define it in a module (e.g. helpers/) and import it"
            )
        return NotImplemented


def check_importable_by_workers(obj) -> None:
    """Raise TypeError if a spawned worker could not unpickle ``obj``: it needs an interactive ``__main__``.

    Pickles ``obj`` once into a file that keeps nothing (time: one pickling; memory: none).
    """
    if not _main_is_importable():
        _MainModuleCheck(_Discard()).dump(obj)


def check_workers_can_start(context, obj) -> None:
    """Raise before a pool of ``context`` starts with ``obj`` as its initializer's argument, where its
    workers could not: ``check_importable_by_workers(obj)``, and no fork once Ray runs here
    (``ray_session``)."""
    ray_session.refuse_fork_after_ray(context.get_start_method(), "installed_pool")
    check_importable_by_workers(obj)


@contextmanager
def installed_pool(context, n_workers: int, obj) -> Iterator:
    """A ``context.Pool`` whose every worker holds ``obj``, sent once per worker at start-up.

    Tasks reach it with ``installed()`` (e.g. ``pool.map(installed_batch_sum, range(len(seq)))``).
    Before starting, ``check_workers_can_start``: a worker that cannot unpickle its initializer's
    arguments dies, and the pool replaces it forever while tasks wait. Then one task runs before
    the pool is yielded (every later task finds a started pool). Terminated on exit.
    """
    check_workers_can_start(context, obj)
    with context.Pool(n_workers, initializer=install, initargs=(obj,)) as pool:
        pool.apply(installed_length)
        yield pool


# --- Measuring ----------------------------------------------------------------------------------


def seconds_per_task(pool, fn, argument_tuples: Sequence[tuple], warmup: int = 1) -> Timing:
    """Seconds from submitting each task (``pool.apply_async(fn, arguments)``) to having its answer.

    One task at a time, so each run is one task's whole cost: pickling its arguments, the pipe,
    the worker's unpickling and work, the answer's way back. The first ``warmup`` tasks are not
    timed. The pool is already running: its start-up is not counted.
    """
    if len(argument_tuples) <= warmup:
        raise ValueError(f"give more than warmup={warmup} tasks' arguments")
    for arguments in argument_tuples[:warmup]:
        pool.apply_async(fn, arguments).get()
    runs = []
    for arguments in argument_tuples[warmup:]:
        start = time.perf_counter()
        pool.apply_async(fn, arguments).get()
        runs.append(time.perf_counter() - start)
    return Timing(tuple(runs))


def seconds_to_start(context, n_workers: int, repeat: int = 3, initializer=None,
                     initargs: tuple = ()) -> Timing:
    """Seconds from ``context.Pool(n_workers, initializer, initargs)`` until every worker has
    answered (so every initializer has run), for ``repeat`` pools one after another (closing each
    is not timed); empty pools by default: what every way pays before its first task. Time it after
    a first pool has run: the first also starts the resource tracker."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        with context.Pool(n_workers, initializer=initializer, initargs=initargs) as pool:
            answers_from_every_worker(pool, n_workers)
            runs.append(time.perf_counter() - start)
    return Timing(tuple(runs))


def seconds_to_start_installing(context, n_workers: int, objects: Sequence,
                                repeat: int = 3) -> tuple[Timing, list[Timing]]:
    """``seconds_to_start`` of an empty pool and of a pool installing each of ``objects``: (the empty
    pool's ``Timing``, one ``Timing`` per object). The pools start in turn, round after round
    (``repeat`` rounds), so a slow spell of the machine falls on every kind rather than on one."""
    pools = [(None, ())] + [(install, (obj,)) for obj in objects]
    runs: list[list[float]] = [[] for _ in pools]
    for _ in range(repeat):
        for times, (initializer, initargs) in zip(runs, pools, strict=True):
            times.extend(seconds_to_start(context, n_workers, 1, initializer, initargs).runs)
    empty, *installing = (Timing(tuple(times)) for times in runs)
    return empty, installing


def loop_read_seconds(items, indices: Sequence[int], repeat: int = 5) -> float:
    """Median seconds per ``items[i]`` read in a loop over ``indices`` (too fast to time one by one)."""

    def read_all() -> None:
        for i in indices:
            items[i]

    return time_it(read_all, repeat=repeat, warmup=1).median / len(indices)


def linear_cost(reads: Sequence[int], seconds: Sequence[float]) -> tuple[float, float]:
    """Per-task seconds as ``fixed + per_read * reads``, through the fewest- and most-reads points.

    Returns (fixed, per_read), in seconds. Two end points, not least squares: on a noisy machine one
    slow middle point would tilt a fit, while the ends are what the cost runs between.
    """
    low, high = int(np.argmin(reads)), int(np.argmax(reads))
    if reads[low] == reads[high]:
        raise ValueError("give measurements at two different numbers of reads")
    per_read = (seconds[high] - seconds[low]) / (reads[high] - reads[low])
    return float(seconds[low] - per_read * reads[low]), float(per_read)


TIE = 1.25  # a fitted fixed cost within this factor of the other way's time: the same, within noise


def break_even_reads(other_seconds: float, fixed: float, per_read: float) -> float | None:
    """Reads per task beyond which ``fixed + per_read * k`` costs more than ``other_seconds``.

    0 when, with no read, the two cost the same within noise (``fixed`` up to ``TIE`` times
    ``other_seconds``): every read then makes the proxy dearer. None when the proxy costs clearly
    more even with no read at all.
    """
    if per_read <= 0:
        raise ValueError(f"per_read must be positive, got {per_read}")
    if fixed > TIE * other_seconds:
        return None
    return max(0.0, (other_seconds - fixed) / per_read)


def descendants_pss(samples) -> float:
    """Median over ``TreeSample``s of the PSS (bytes) of this process's descendants, itself excluded.

    What the workers, a manager and the resource tracker hold; this process's own heap, which
    grows and shrinks with everything else it does, is left out.
    """
    own = os.getpid()
    values = [s.pss - (s.processes[own].pss if own in s.processes else 0) for s in samples]
    if not values:
        raise ValueError("no samples given; hold the state longer")
    return float(np.median(values))


def format_table(rows: Sequence[dict[str, str]]) -> str:
    """Rows of equal keys as a plain text table: a header, a rule, one line per row."""
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(row[c])) for row in rows)) for c in columns}
    lines = [{c: c for c in columns}, {c: "-" * widths[c] for c in columns}, *rows]
    return "\n".join("  ".join(f"{str(line[c]):<{widths[c]}}" for c in columns).rstrip() for line in lines)


# --- Memory held still, and the proxy's pools -------------------------------------------------


def hold(report, label: str, seconds: float) -> None:
    """Mark ``label`` on a ``MemoryReport``, keep still ``seconds``, then mark ``label + " ends"``:
    a window of samples the sampler took of that state."""
    report.mark(label)
    time.sleep(seconds)
    report.mark(f"{label} ends")


def held_pss(report, label: str) -> float:
    """Median PSS (bytes) of this process's descendants while ``hold(report, label, ...)`` kept
    still, above what they held when tracking began."""
    return descendants_pss(report.window(label, f"{label} ends")) - descendants_pss([report.baseline])


@dataclass(frozen=True)
class ResendMemory:
    """PSS (bytes) around tasks that carry the object: ``idle_pool``, the pool's processes before any
    task; ``worst`` and ``after``, how far the whole tree rose above that idle state at its worst
    while tasks carried the largest object, and once they were done; ``worst_parent`` and
    ``after_parent``, this process's share of each (its own rise above its idle PSS; the rest is the
    pool's processes); ``workers_after``, how far the pool's processes alone rose above their idle
    state once the tasks were done (the base of ``held_pss``: the installed pool's workers are
    compared on it)."""

    idle_pool: float
    worst: float
    after: float
    worst_parent: float
    after_parent: float
    workers_after: float


def _own_pss(samples) -> float:
    """Median PSS (bytes) of this process over ``samples``."""
    own = os.getpid()
    return float(np.median([s.processes[own].pss for s in samples if own in s.processes]))


def pss_between_exact_reads(samples) -> list[dict[int, float]]:
    """Per sample, {pid: PSS in bytes}, each process's last exact PSS moved by its RSS change since.

    The sampler re-reads PSS only now and then (``exact`` samples) and reads RSS every time: a
    worker that receives a copy and frees it between two exact reads shows in RSS alone. A heap's
    new pages are private, so they move PSS as much as RSS; this carries PSS forward by them.

    A child read while it still shares this process's memory (spawn starts it with vfork: until it
    runs its own program, its figures are this process's) counts 0, not a second copy of them."""
    own = os.getpid()
    exact_rss: dict[int, int] = {}
    exact_pss: dict[int, int] = {}
    estimates = []
    for sample in samples:
        for pid, memory in sample.processes.items():
            if sample.exact or pid not in exact_rss:
                exact_rss[pid], exact_pss[pid] = memory.rss, memory.pss
        parent = sample.processes.get(own)
        estimates.append({pid: 0.0 if pid != own and _reads_as(memory, parent)
                          else max(0.0, float(exact_pss[pid] + memory.rss - exact_rss[pid]))
                          for pid, memory in sample.processes.items()})
    return estimates


def _reads_as(memory, parent, within: float = 0.01) -> bool:
    """Whether a child's RSS and PSS are its parent's, within a share ``within`` of the parent's RSS:
    the same memory read a moment apart, as a child started with vfork reads until it runs its own
    program."""
    return parent is not None and all(
        abs(getattr(memory, name) - getattr(parent, name)) <= within * parent.rss for name in ("rss", "pss"))


def resend_memory(report, largest: str = "largest per task") -> ResendMemory:
    """Read ``ResendMemory`` off a report held still at "pool idle" and "tasks done", with the
    largest object's tasks begun at the mark ``largest``. The worst moment is read with
    ``pss_between_exact_reads`` (a copy received and freed between two exact reads still counts)."""
    idle_tree = report.steady("pool idle", "pool idle ends").pss
    idle_own = _own_pss(report.window("pool idle", "pool idle ends"))
    start, end = report.marks[largest], report.marks["tasks done ends"]
    in_flight = [estimate for sample, estimate in zip(report.samples, pss_between_exact_reads(report.samples),
                                                      strict=True) if start <= sample.time <= end]
    worst = max(in_flight, key=lambda estimate: sum(estimate.values()))
    after = report.steady("tasks done", "tasks done ends").pss
    idle_pool = held_pss(report, "pool idle")
    workers_after = held_pss(report, "tasks done") - idle_pool
    return ResendMemory(idle_pool, sum(worst.values()) - idle_tree, after - idle_tree,
                        worst.get(os.getpid(), idle_own) - idle_own,
                        _own_pss(report.window("tasks done", "tasks done ends")) - idle_own, workers_after)


def tree_worst(report, start: str, end: str) -> float:
    """How far the whole tree (this process included) rose above the tree the report began with, at
    its worst between the marks ``start`` and ``end``, read with ``pss_between_exact_reads``."""
    first, last = report.marks[start], report.marks[end]
    estimates = [sum(estimate.values()) for sample, estimate
                 in zip(report.samples, pss_between_exact_reads(report.samples), strict=True)
                 if first <= sample.time <= last]
    if not estimates:
        raise ValueError(f"no samples between {start!r} and {end!r}")
    return max(estimates) - report.baseline.pss


def own_share_at_worst(report, start: str, end: str) -> float:
    """This process's PSS (bytes) at the tree's worst moment between the marks ``start`` and ``end``
    (the moment ``tree_worst`` reads), above what it held when the report began."""
    first, last = report.marks[start], report.marks[end]
    estimates = [estimate for sample, estimate in zip(report.samples, pss_between_exact_reads(report.samples),
                                                      strict=True) if first <= sample.time <= last]
    if not estimates:
        raise ValueError(f"no samples between {start!r} and {end!r}")
    worst = max(estimates, key=lambda estimate: sum(estimate.values()))
    own = os.getpid()
    before = report.baseline.processes[own].pss if own in report.baseline.processes else 0.0
    return worst.get(own, before) - before


def tasks_to_pay_back(extra_start_up: float, saved_per_task: float) -> float | None:
    """How many tasks repay a way's extra start-up (seconds) by what it saves on each task
    (seconds); None when it saves nothing per task."""
    return extra_start_up / saved_per_task if saved_per_task > 0 else None


def move_into_manager(manager, item_lists: Sequence[list], report,
                      seconds: float) -> tuple[list[float], list]:
    """``manager.list(items)`` for each list, largest (last) first, held still ``seconds`` under the
    mark "largest list held" so the sampler sees it alone. Returns (seconds each move took,
    proxies), both in the order of ``item_lists``."""
    moved, proxies = [], []
    for items in reversed(item_lists):
        start = time.perf_counter()
        proxies.insert(0, manager.list(items))  # the list is pickled into the manager process, once
        moved.insert(0, time.perf_counter() - start)
        if len(proxies) == 1:
            hold(report, "largest list held", seconds)
    return moved, proxies


@dataclass(frozen=True)
class ProxyCosts:
    """Seconds measured through Manager list proxies: ``by_size``, a task sent each list's proxy that
    reads one batch's items one by one; ``sent`` and ``installed``, {reads per task: Timing} with the
    largest list's proxy sent with every task or installed once per worker; ``workers``, the pids of
    both pools' workers."""

    by_size: list[Timing]
    sent: dict[int, Timing]
    installed: dict[int, Timing]
    workers: list[int]


def proxy_task_costs(context, n_workers: int, proxies: Sequence, reads_per_task: Sequence[int],
                     tasks: int) -> ProxyCosts:
    """Time ``tasks`` tasks (after one warm-up) per setting in two pools: one sent the proxy with
    every task (``items_sum(proxy, range(k))``), one with the last proxy installed by an
    initializer (``installed_items_sum(range(k))``). ``by_size``'s last entry is ``sent``'s
    ``BATCH_ITEMS`` reads when measured there: one measurement, shown once."""
    proxy, batch = proxies[-1], range(BATCH_ITEMS)
    with context.Pool(n_workers) as pool:
        workers = list(answers_from_every_worker(pool, n_workers))
        sent = {k: seconds_per_task(pool, items_sum, [(proxy, range(k))] * (1 + tasks))
                for k in reads_per_task}
        by_size = [sent[BATCH_ITEMS] if p is proxy and BATCH_ITEMS in sent else
                   seconds_per_task(pool, items_sum, [(p, batch)] * (1 + tasks)) for p in proxies]
    with context.Pool(n_workers, initializer=install, initargs=(proxy,)) as pool:
        workers += list(answers_from_every_worker(pool, n_workers))
        installed = {k: seconds_per_task(pool, installed_items_sum, [(range(k),)] * (1 + tasks))
                     for k in reads_per_task}
    return ProxyCosts(by_size, sent, installed, workers)


# --- The Keras post's setting, and the lesson's exercise ------------------------------------------

POST_ITEMS = 100_000  # the post's list: 100,000 items, each read by one task
POST_SPEEDUP = 350  # the ratio of the post's times (38.7 s / 0.111 s): its proxy 350× faster
# How far each predicted factor may be from this run's, either way: 2.5, so that the post's 350×
# fails wherever this machine measures under 140× (50× to 120× here, the Binder path included; a
# factor of 3 let ~110× pass it), and a prediction read off sections 2 and 3 and the pickling
# times passes: the worked solution's proxy factor (section 3's one-read proxy task, a 64 KiB batch)
# came out 1.2x to 1.9x under the race's (one small tuple) at 16 MiB, and over 2x in one run.
FACTOR_WINDOW = 2.5
# The installed list's factor is not asked: it divides by a task under a millisecond, which varies
# about 2x between runs, so only a window of 4 held on every run, and that accepted 4.5x to 72x
# where the race measured 18x. The race still measures it, and the lesson asserts it (at least 2x).
FACTORS = ("proxy_speedup",)  # the exercise's factor
WINDOWS = {"proxy_speedup": FACTOR_WINDOW}
LIST_TASK = "list_task_ms"  # and a list task's time in milliseconds: the answer is a dict of these two
# The list task's time within this factor of the race's: 1.5. The race's task also moves the 1.4 MB
# pickle through the pool's pipe, which the worked solution (dumps + loads) leaves out: on one CPU
# (the Binder path) the race took 1.10x to 1.16x the solution in three runs here, the tightest of
# the three windows, and a CI run on that path failed the worked solution at 1.25. "Only its
# pickle.loads" (the race's 59-73 ms over loads of 43-50 ms in stored runs: 1.33x to 1.47x) is
# inside 1.5 and fails on its own rule: below loads + dumps / 2.
LIST_WINDOW = 1.5
# "A proxy is cheap to send" (its task priced with no read, leaving out the round trip per read)
# gave 135x in a stored run, inside 2.5 of the race's 61x: it fails on its own rule, when it is
# nearer (in ratio) to that no-read factor than to both the race's and the worked solution's. The
# rule is off when the no-read factor is under this many times the larger of those two (the models
# too close to tell apart on a noisy run), and never rejects an answer at or under either.
NO_READ_APART = 1.5


def post_items(n_items: int = POST_ITEMS) -> list[tuple[str, list[int]]]:
    """The post's list: ``n_items`` tuples ``('test_string', [1, 3, 4])``, one string shared by all
    (its ``['test_string'] * 100000``) and a small list each: many small objects to pickle."""
    name = "test_string"
    return [(name, [1, 3, 4]) for _ in range(n_items)]


def seconds_to_unpickle(payload: bytes, repeat: int = 3) -> float:
    """Worker: the fastest of ``repeat`` ``pickle.loads(payload)``, seconds: what a worker pays to
    unpickle an argument it was sent (timed here, in a fresh worker, not in the notebook's kernel,
    whose far larger heap makes each garbage collection the unpickling triggers slower). The object
    is freed after the clock stops, as a pool worker frees a task's arguments after sending its
    answer. With ``repeat=1``, the first run: into fresh pages, as a task meets it (later runs reuse
    the pages the first freed, and are faster)."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        obj = pickle.loads(payload)
        runs.append(time.perf_counter() - start)
        del obj  # freeing it is not timed: a pool worker frees its arguments after answering
    return min(runs)


def pickling_peak(obj) -> tuple[int, int]:
    """(bytes of ``ForkingPickler.dumps(obj)``, the most bytes Python held at once while making it,
    above what it held before), by ``tracemalloc``: what a task's pickling asks of the sending
    process at its peak (the pickler's buffers as well as the pickle it returns)."""
    if tracemalloc.is_tracing():
        raise RuntimeError("tracemalloc is already tracing: its peak would mix in other allocations")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        payload = ForkingPickler.dumps(obj)
        peak = tracemalloc.get_traced_memory()[1] - before
        size = len(payload)
        del payload
    finally:
        tracemalloc.stop()
    return size, peak


def race_factors(every_task: float, proxy: float, installed: float) -> dict[str, float]:
    """The race's two factors, from its fastest tasks (seconds): the proxy over the list sent with
    every task, the installed list over the proxy (each: how many times faster per task)."""
    return {"proxy_speedup": every_task / proxy, "installed_speedup": proxy / installed}


def _solve_post_race(dumps: float, loads: float, proxy_one_read: float, **_race: float) -> dict[str, float]:
    """The worked solution, from times the lesson measured before the race (seconds): the list sent
    with a task costs about its ``pickle.dumps`` here plus its ``pickle.loads`` in a worker; a task
    with the proxy, section 3's fastest task sent a proxy and reading one item. The race's own times
    are not used."""
    return {"proxy_speedup": (dumps + loads) / proxy_one_read, LIST_TASK: 1000 * (dumps + loads)}


# The notebook's names ``times_before_race`` reads (a test checks the lesson assigns each of them)
RACE_INPUTS = ("post_dumps", "post_loads", "proxy_costs")


def times_before_race(measured: dict) -> dict[str, float]:
    """The times the worked solution divides, picked here from the notebook's ``measured`` names
    (``RACE_INPUTS``) so the race's cell does not name them before the check (seconds, all measured
    before the race, each the fastest, as the exercise asks): the post's list pickled here
    (``post_dumps``) and unpickled in a fresh worker (``post_loads``, one run); section 3's task
    sent a proxy and reading one item (``proxy_costs``), and with no read (``proxy_no_read``: what
    the check rejects, the round trip per read left out). A missing name is a ``NameError`` that
    says which."""
    missing = [name for name in RACE_INPUTS if name not in measured]
    if missing:
        raise NameError(f"times_before_race needs the lesson's {', '.join(missing)}: "
                        "run the cells above first")
    return {"dumps": measured["post_dumps"].min, "loads": measured["post_loads"],
            "proxy_one_read": measured["proxy_costs"].sent[1].min,
            "proxy_no_read": measured["proxy_costs"].sent[0].min}


_FASTER = {"proxy_speedup": "the proxy"}
_HINTS = {
    "proxy_speedup": ("the list is re-pickled object by object with every task (its pickle.dumps here plus "
                      "its pickle.loads in a worker), the proxy pays one connection and one round trip "
                      "(section 3's fastest task with one read); predict from those times on this machine, "
                      f"not from the post's {POST_SPEEDUP}×, measured on another machine with 5 workers "
                      "pipelining 100 tasks"),
    LIST_TASK: ("a task that carries the list pays its pickle.dumps in this process and its pickle.loads "
                "in the worker that runs it, each once"),
}


def _check_post_race(answer, every_task: float, proxy: float, **_earlier: float) -> str | None:
    """The proxy's factor within its ``WINDOWS`` factor of the race's and the list task within
    ``LIST_WINDOW`` of the race's (its fastest tasks, seconds); of the earlier times the worked
    solution divides, the list's pickle.dumps and pickle.loads, to reject "only its loads", and
    with the proxy task with no read, to reject "a proxy task pays no read" (``NO_READ_APART``)."""
    if not isinstance(answer, dict) or set(answer) != {*FACTORS, LIST_TASK}:
        return f'answer with a dict of two numbers: {ANSWER_FORM}'
    measured = {"proxy_speedup": every_task / proxy}
    for name in FACTORS:
        guess, factor = answer[name], measured[name]
        if isinstance(guess, bool) or not isinstance(guess, int | float) or guess <= 0:
            return f"{name} is how many times faster, per task: a positive number"
        if not factor / WINDOWS[name] <= guess <= WINDOWS[name] * factor:
            side = "more" if guess < factor else "less"
            return (f"{name}: {_FASTER[name]} gained {side} than that here, by over a factor of "
                    f"{WINDOWS[name]}: {_HINTS[name]}")
    no_read_factor = _no_read_factor(measured["proxy_speedup"], **_earlier)
    if no_read_factor is not None and answer["proxy_speedup"] > no_read_factor[1]:
        # the misconception "a proxy task pays no read": nearer its no-read factor than the right ones
        return ("proxy_speedup: that prices a proxy task with no read (section 3's fastest task with "
                f"0 reads gives about {approx_ratio(no_read_factor[0])}×): it also pays a round trip "
                "per read, its one item pickled and sent back")
    guess, list_ms = answer[LIST_TASK], 1000 * every_task
    if isinstance(guess, bool) or not isinstance(guess, int | float) or guess <= 0:
        return f"{LIST_TASK} is a task's time in milliseconds: a positive number"
    if not list_ms / LIST_WINDOW <= guess <= LIST_WINDOW * list_ms:
        side = "more" if guess < list_ms else "less"
        return (f"{LIST_TASK}: a task with the list took {side} than that, by over a factor of "
                f"{LIST_WINDOW}: {_HINTS[LIST_TASK]}")
    dumps, loads = _earlier.get("dumps"), _earlier.get("loads")
    if dumps is not None and loads is not None and guess < 1000 * (loads + dumps / 2):
        # the misconception "a list task pays only its pickle.loads": below the loads plus half the dumps
        return (f"{LIST_TASK}: a task with the list pays more than its unpickling: {_HINTS[LIST_TASK]}")
    return None


def _no_read_factor(race: float, dumps: float | None = None, loads: float | None = None,
                    proxy_one_read: float | None = None, proxy_no_read: float | None = None,
                    **_rest: float) -> tuple[float, float] | None:
    """(the proxy factor of a task priced with no read, the factor above which an answer is nearer
    to it, in ratio, than to the larger of the race's ``race`` and the worked solution's), or None
    where a time is missing or the no-read factor is under ``NO_READ_APART`` times that larger one."""
    if None in (dumps, loads, proxy_one_read, proxy_no_read) or proxy_no_read <= 0:
        return None
    no_read, right = (dumps + loads) / proxy_no_read, max(race, (dumps + loads) / proxy_one_read)
    if no_read < NO_READ_APART * right:
        return None
    return no_read, (no_read * right) ** 0.5


ANSWER_FORM = '{"list_task_ms": ..., "proxy_speedup": ...}'


EXERCISE = Exercise(
    name="the Keras post's race",
    question=(f"with the post's list of {POST_ITEMS:,} small tuples and one item read per task, how many "
              f"milliseconds does a task that carries the list take (within {LIST_WINDOW}×; leaving out its "
              "pickling or its unpickling fails), and how many "
              "times faster per task is the proxy than sending the list with every task (within "
              f"{WINDOWS['proxy_speedup']}×; leaving out its read fails)? answer = {ANSWER_FORM}"),
    check=_check_post_race,
    solution=_solve_post_race,
    explanation=("Sending the list re-pickles 100,000 objects per task, here and again in the worker; the "
                 "proxy sends a token, connects and makes one round trip."),
    misconceptions=(
        ({"list_task_ms": 60, "proxy_speedup": POST_SPEEDUP},
         f"the post's {POST_SPEEDUP}×, measured on another machine and setting, is this run's figure"),
        ({"list_task_ms": 60, "proxy_speedup": 1000},
         "a proxy sends only a small token, so a task with it costs what an index task costs (section 2)"),
        ({"list_task_ms": 1.5, "proxy_speedup": 1},
         "the list costs what its 1.4 MB of pickle cost to copy, so the proxy's round trip gains nothing"),
        ({"list_task_ms": 18, "proxy_speedup": 12},
         "a task that carries the list pays only its pickle.dumps in the sending process"),
        ({"list_task_ms": 49, "proxy_speedup": 33},
         "a task that carries the list pays only its pickle.loads in the worker"),
        ({"list_task_ms": 65, "proxy_speedup": 135},
         "a proxy is cheap to send, so its task costs section 3's task with no read: "
         "the round trip per read left out"),
    ),
)


# --- Figures in prose: no more digits than a noisy timing supports --------------------------------


def break_even_verdict(reads: float | None, n_items: int | None = None) -> str:
    """Say what ``break_even_reads`` returned: cheaper below how many reads per task (with the share
    of a list of ``n_items`` items they are, if given), or never."""
    if reads is None:
        return "dearer even with no read at all"
    if reads == 0:
        return "as dear with no read (the same within noise), and dearer with every read"
    if reads < 1:
        return "dearer from the first read on"
    if n_items and reads >= n_items:
        share = f" (more than its {n_items:,} items: even a task that reads them all)"
    else:
        share = f" ({reads / n_items:.0%} of its {n_items:,} items)" if n_items else ""
    return f"cheaper below {reads:,.0f} reads per task{share}"


def break_even_share_range(shares: Sequence[float | None]) -> str:
    """Where a proxy starts to lose, as the range of the list's share, in whole percent, worded to
    follow "until a task reads" (estimates from several lines, e.g. through the fastest and through
    the median tasks; None: it loses even with no read): "between 33% and 65% of the rows", "50% of
    the rows", "more rows than the list holds" (every estimate past its length), "its first row"
    (every estimate None or under 1%)."""
    known = sorted(min(share, 1.0) for share in shares if share)
    if not known or known[-1] < 0.01:
        return "its first row"
    if known[0] >= 1.0:
        return "more rows than the list holds"
    low, high = (f"{share:.0%}" for share in (known[0], known[-1]))
    if known[-1] >= 1.0:
        return f"{low} of the rows or more than the list holds"
    return f"{low} of the rows" if low == high else f"between {low} and {high} of the rows"
