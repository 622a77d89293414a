"""Send a big object to pool workers once, not with every task; and what a Manager proxy costs instead.

``ListSequence`` is a Keras-``Sequence``-like object: ``len()`` batches, ``seq[i]`` builds batch
``i`` (an ndarray) from a wrapped list of items, or from a ``Manager().list()`` proxy of them.
Three ways to give it to pool workers:

- with every task: ``pool.apply_async(batch_sum, (seq, i))`` pickles the whole object per task;
- once per worker: ``Pool(initializer=install, initargs=(seq,))`` sets a module global in each
  worker at start-up, and tasks send only the index (``installed_batch_sum(i)``);
- through a manager: the data lives in one manager process and every item read is a round trip.

``installed_pool`` is the finished version of the second way. ``seconds_per_task`` and the
read-timing functions measure what each way costs, in seconds. Everything a worker runs is here,
in an importable module: a spawned worker imports it by name.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import sys
import time
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from helpers.lessons import ray_session
from helpers.measure.timing import Timing, time_it

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


@contextmanager
def installed_pool(context, n_workers: int, obj) -> Iterator:
    """A ``context.Pool`` whose every worker holds ``obj``, sent once per worker at start-up.

    Tasks reach it with ``installed()`` (e.g. ``pool.map(installed_batch_sum, range(len(seq)))``).
    Before starting, ``check_importable_by_workers(obj)``: a worker that cannot unpickle its
    initializer's arguments dies, and the pool replaces it forever while tasks wait. Then one task
    runs before the pool is yielded (every later task finds a started pool). Terminated on exit.
    A fork context is refused (RuntimeError) in a process where Ray has run: forking then can deadlock.
    """
    ray_session.refuse_fork_after_ray(context.get_start_method(), "installed_pool")
    check_importable_by_workers(obj)
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


def read_seconds(items, indices: Sequence[int]) -> list[float]:
    """Seconds of each ``items[i]`` read, timed one by one (for a proxy: one round trip each)."""
    times = []
    for i in indices:
        start = time.perf_counter()
        items[i]
        times.append(time.perf_counter() - start)
    return times


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


def break_even_reads(other_seconds: float, fixed: float, per_read: float) -> float | None:
    """Reads per task beyond which ``fixed + per_read * k`` costs more than ``other_seconds``.

    None when the proxy costs more even with no read at all (``fixed >= other_seconds``).
    """
    if per_read <= 0:
        raise ValueError(f"per_read must be positive, got {per_read}")
    if fixed >= other_seconds:
        return None
    return (other_seconds - fixed) / per_read


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
