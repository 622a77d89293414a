"""Copy-on-write after fork: module globals a forked child inherits, and workers that read them.

A child started with ``fork`` begins as a copy of the parent that shares every page until one
side writes to it. ``installed(array=..., rows=...)`` sets this module's globals ``ARRAY`` and
``ROWS`` before forking; the tasks below read them in the child. Each worker measures its own
memory (``helpers.measure.proctree.process_memory``: RSS, USS, PSS in bytes) before and after its task,
reports it to the parent, then holds still until released, so the parent can measure the tree.
Under ``spawn`` or ``forkserver`` a child imports this module afresh: the globals are None there.
In a process where Ray has run, ``fan_out`` refuses to fork (``helpers.lessons.ray_session``:
forking then can deadlock the child) with a RuntimeError that says so.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from helpers.lessons import ray_session
from helpers.lessons.demos import join_or_kill
from helpers.measure.proctree import ProcessMemory, process_memory
from helpers.measure.units import format_bytes

ARRAY: np.ndarray | None = None  # set by installed(); forked children inherit it
ROWS: list[list[float]] | None = None  # a list of small Python lists, the same numbers as objects
LOCK = threading.Lock()  # held by a thread in the "fork with threads" pitfall

SETTLE_SECONDS = 0.3  # after every worker reported, before the hold window opens
JOIN_SECONDS = 30.0
REPORT_SECONDS = 120.0  # the longest a worker may take to start and report


def has_fork() -> bool:
    """Whether this platform can start processes with ``fork`` (not Windows; macOS can but
    defaults to spawn, because forking there is unsafe with system frameworks)."""
    return "fork" in multiprocessing.get_all_start_methods()


def default_start_method() -> str:
    """The start method a plain ``multiprocessing.Process`` gets here (the first of the list):
    fork on Linux up to Python 3.13, forkserver on Linux from 3.14, spawn on macOS and Windows."""
    return multiprocessing.get_all_start_methods()[0]


@contextmanager
def installed(array: np.ndarray | None = None, rows: list | None = None) -> Iterator[None]:
    """Set ``ARRAY`` and ``ROWS`` for the block (children forked inside inherit them), then
    reset both to None, also when the block raises."""
    global ARRAY, ROWS
    ARRAY, ROWS = array, rows
    try:
        yield
    finally:
        ARRAY, ROWS = None, None


def _inherited(name: str):
    value = globals()[name]
    if value is None:
        raise RuntimeError(
            f"helpers.lessons.fork_copy_on_write.{name} is None in process {os.getpid()}: nothing was "
            "inherited. A child started with spawn or forkserver imports modules afresh and gets none "
            "of the parent's globals; fork it (mp.get_context('fork')), or send the data, or share it "
            "(lesson 07)"
        )
    return value


def _write_inherited_array(_connection) -> float:
    array = _inherited("ARRAY")
    array += 1.0  # writes every page: each one is copied for this child first
    return float(np.sum(array))


def _sum_received_array(connection) -> float:
    global ARRAY
    ARRAY = connection.recv()  # this worker's own copy, kept while it holds
    return float(np.sum(ARRAY))


def _collect_garbage(_connection) -> float:
    _inherited("ROWS")  # the rows are there, untouched: only the collector visits them
    return float(gc.collect())


TASKS: dict[str, Callable] = {  # each takes the worker's end of the pipe, returns a float
    "idle": lambda _connection: 0.0,
    "sum inherited array": lambda _connection: float(np.sum(_inherited("ARRAY"))),
    "write inherited array": _write_inherited_array,
    "sum received array": _sum_received_array,
    "iterate inherited rows": lambda _connection: float(sum(x for row in _inherited("ROWS") for x in row)),
    "collect garbage": _collect_garbage,
}
RECEIVING_TASKS = {"sum received array"}  # tasks that read what fan_out(send=...) pickles to them


@dataclass(frozen=True)
class WorkerReport:
    """What one worker measured on itself: memory (bytes) before and after its task, the
    task's seconds and its result (a sum, or what ``gc.collect()`` returned)."""

    pid: int
    task: str
    result: float
    seconds: float
    before: ProcessMemory
    after: ProcessMemory

    @property
    def uss_growth(self) -> int:
        """Bytes this worker made private during its task (pages it wrote or un-shared)."""
        return self.after.uss - self.before.uss


def run_task(connection, task: str) -> None:
    """Worker: run ``TASKS[task]``, send a WorkerReport (or the exception) to the parent, then
    hold until the parent sends anything (or every copy of its end is closed)."""
    try:
        before = process_memory(os.getpid())
        start = time.perf_counter()
        result = TASKS[task](connection)
        seconds = time.perf_counter() - start
        after = process_memory(os.getpid())
        answer: object = WorkerReport(os.getpid(), task, result, seconds, before, after)
    except Exception as error:
        answer = error
    try:
        connection.send(answer)
        connection.recv()
    except (EOFError, OSError):
        pass  # the parent closed its end: nobody to report to, nothing to hold for
    finally:
        connection.close()


@dataclass
class FanOut:
    """One fan-out: ``seconds`` from starting the first worker to the last report (start-up,
    sending and the task), each worker's own report, this process's memory just before, and,
    when held, every process's memory read by the parent while all of them held still
    (pid -> ProcessMemory, this process first). Bytes everywhere."""

    start_method: str
    task: str
    seconds: float
    workers: list[WorkerReport]
    parent_before: ProcessMemory
    held: dict[int, ProcessMemory] = field(default_factory=dict)

    def growth(self, measure: str = "pss") -> int:
        """Bytes the tree (this process and the workers) held above this process alone before:
        the sum of ``measure`` ('rss', 'uss' or 'pss') over ``held`` minus its value before."""
        if not self.held:
            raise ValueError("nothing was held: call fan_out with hold_seconds > 0")
        return sum(getattr(m, measure) for m in self.held.values()) - getattr(self.parent_before, measure)

    def private_to_workers(self) -> int:
        """Bytes private to the workers while they held (the sum of their USS): the pages they
        wrote or allocated. A shared page this process writes meanwhile is copied for this
        process, and the original stays shared by the workers: it counts here only with one."""
        return sum(m.uss for pid, m in self.held.items() if pid != os.getpid())


def fan_out(start_method: str, task: str, n_workers: int, send: object = None,
            hold_seconds: float = 0.0, report=None, label: str | None = None) -> FanOut:
    """Start ``n_workers`` processes with ``start_method`` running ``task``; pickle ``send`` to
    each through its pipe when given; wait for every report; hold them ``hold_seconds``.

    With ``report`` (a helpers.measure.memory.MemoryReport) and ``label``, marks ``'<label> holding'``
    and ``'<label> end'`` around the hold. Halfway through the hold this process reads every
    process's memory exactly (``FanOut.held``): the sampler's PSS/USS may lag, since it re-reads
    them when an RSS moves, and a child's RSS does not move when its pages are un-shared.
    Raises what a worker raised. Every worker is released and joined (or killed). Refuses to fork
    (RuntimeError) in a process where Ray has run.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {sorted(TASKS)}")
    if (send is not None) != (task in RECEIVING_TASKS):
        raise ValueError(f"task {task!r} needs send=... exactly when it is one of {sorted(RECEIVING_TASKS)}")
    context = multiprocessing.get_context(start_method)
    ray_session.refuse_fork_after_ray(context.get_start_method(), f"fan_out({task!r})")
    processes, pipes = [], []
    parent_before = process_memory(os.getpid())
    try:
        start = time.perf_counter()
        for _ in range(n_workers):
            parent_end, child_end = context.Pipe()
            process = context.Process(target=run_task, args=(child_end, task), daemon=True)
            pipes.append(parent_end)
            processes.append(process)
            process.start()
            child_end.close()
        for pipe in pipes if send is not None else ():
            pipe.send(send)
        answers = [pipe.recv() if pipe.poll(REPORT_SECONDS) else TimeoutError(
            f"a worker did not report within {REPORT_SECONDS:.0f} s") for pipe in pipes]
        seconds = time.perf_counter() - start
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        result = FanOut(start_method, task, seconds, answers, parent_before)
        if hold_seconds > 0 or report is not None:
            time.sleep(SETTLE_SECONDS)
            if report is not None:
                report.mark(f"{label} holding")
            time.sleep(hold_seconds / 2)
            for pid in (os.getpid(), *(p.pid for p in processes)):
                measured = process_memory(pid)
                if measured is not None:
                    result.held[pid] = measured
            time.sleep(hold_seconds / 2)
            if report is not None:
                report.mark(f"{label} end")
        return result
    finally:
        for pipe in pipes:  # release each worker by a message: closing our end is not enough,
            try:  # since workers forked later hold copies of it
                pipe.send(None)
            except OSError:
                pass  # that worker is gone already
            pipe.close()
        join_or_kill(processes, JOIN_SECONDS)
        for process in processes:
            if process.pid is not None:
                process.close()


def rows_of_floats(array: np.ndarray, n_rows: int) -> list[list[float]]:
    """The first ``2 * n_rows`` numbers of ``array`` as ``n_rows`` Python lists of two floats
    (what ``csv.reader`` or a JSON loader would give you): every number a separate object."""
    return array[: 2 * n_rows].reshape(n_rows, 2).tolist()


def footprint(rows: list[list[float]]) -> int:
    """Bytes ``sys.getsizeof`` counts for the outer list, every row and every number in it."""
    total = sys.getsizeof(rows)
    for row in rows:
        total += sys.getsizeof(row) + sum(sys.getsizeof(x) for x in row)
    return total


@contextmanager
def frozen_gc() -> Iterator[int]:
    """Move every object the collector tracks into its permanent generation for the block
    (``gc.freeze()``: collections ignore them, in this process and in children forked inside);
    yields how many were frozen and undoes it with ``gc.unfreeze()`` on exit."""
    gc.freeze()
    try:
        yield gc.get_freeze_count()
    finally:
        gc.unfreeze()


@contextmanager
def lock_held_by_a_thread() -> Iterator[None]:
    """A background thread takes ``LOCK`` and keeps it for the block, then releases it."""
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with LOCK:
            taken.set()
            done.wait()

    thread = threading.Thread(target=hold, name="lock-holder", daemon=True)
    thread.start()
    taken.wait()
    try:
        yield
    finally:
        done.set()
        thread.join()


def take_lock(timeout: float) -> str:
    """Worker: take ``LOCK`` within ``timeout`` seconds; raise TimeoutError if it stays taken."""
    if not LOCK.acquire(timeout=timeout):
        raise TimeoutError(
            f"helpers.lessons.fork_copy_on_write.LOCK still taken after {timeout} s in process "
            f"{os.getpid()}: it was held when this process was forked, by a thread that does not exist "
            "here, so nobody will ever release it (with no timeout this worker would hang forever)"
        )
    LOCK.release()
    return "took the lock"


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [text.rjust(width) for text, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join([row[0].ljust(widths[0]), *cells]))
    return "\n".join(lines)


def process_table(held: dict[int, ProcessMemory]) -> str:
    """A text table of each held process's RSS, USS and PSS and the tree's sums (human units)."""
    rows = [("process", "RSS", "USS", "PSS")]
    for pid, measured in held.items():
        name = "this process" if pid == os.getpid() else "worker"
        rows.append((name, *(format_bytes(v) for v in (measured.rss, measured.uss, measured.pss))))
    sums = [sum(getattr(m, k) for m in held.values()) for k in ("rss", "uss", "pss")]
    rows.append(("sum over the tree", *(format_bytes(v) for v in sums)))
    return _table(rows)


def growth_table(fans: dict[str, FanOut], unit_bytes: int) -> str:
    """A text table, one row per fan-out: what the tree's RSS and PSS grew by while the workers
    held, this process's and the workers' USS then, and what each worker's task made private
    (its USS growth), in bytes and in ``unit_bytes``."""

    def cell(n_bytes: float) -> str:
        return f"{format_bytes(n_bytes)} ({n_bytes / unit_bytes:.2f})"

    rows = [("fan-out", "tree RSS growth", "tree PSS growth", "this process's USS", "workers' USS",
             "each worker's task made private")]
    for name, fan in fans.items():
        tasks = ", ".join(cell(w.uss_growth) for w in fan.workers)
        mine = fan.held[os.getpid()].uss
        rows.append((name, *(cell(v) for v in (fan.growth("rss"), fan.growth("pss"), mine,
                                                fan.private_to_workers())), tasks))
    return _table(rows)
