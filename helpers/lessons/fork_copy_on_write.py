"""Copy-on-write after fork: module globals a forked child inherits, and workers that read them.

A child started with ``fork`` begins as a copy of the parent that shares every page until one
side writes to it. ``installed(array=..., rows=...)`` sets this module's globals ``ARRAY`` and
``ROWS`` before forking; the tasks below (``sum_inherited_array``, ``iterate_inherited_rows``, ...)
read them in the child through ``inherited``. ``refcount`` reads the reference count CPython keeps
inside an object, the field that reading a Python object writes; ``EXERCISE`` is the lesson's
"Your turn" on it; its tables and plots are in ``helpers.lessons.fork_copy_on_write_figures``.
Each worker measures its own memory (``helpers.measure.proctree.process_memory``: RSS, USS, PSS in
bytes) before and after its task, reports it to the parent, then holds still until released, so
the parent can measure the tree.
Under ``spawn`` or ``forkserver`` a child imports this module afresh: the globals are None there.
In a process where Ray has run, ``fan_out`` refuses to fork (``helpers.lessons.ray_session``:
forking then can deadlock the child) with a RuntimeError that says so.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import platform
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from helpers.lessons import ray_session
from helpers.lessons.demos import join_or_kill
from helpers.lessons.exercises import Exercise
from helpers.measure.proctree import ProcessMemory, process_memory

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


def inherited(name: str):
    """This module's global ``name`` ('ARRAY' or 'ROWS') as this process has it; RuntimeError when it
    is None (nothing was inherited: the process was not forked inside ``installed``)."""
    value = globals()[name]
    if value is None:
        raise RuntimeError(
            f"helpers.lessons.fork_copy_on_write.{name} is None in this worker: nothing was "
            "inherited. Either it was forked before the global was set (set it first, then create the "
            "Pool or Process), or it was started with spawn or forkserver, which import modules afresh "
            "and get none of the parent's globals: fork it (mp.get_context('fork')), or send the data, "
            "or share it (lesson 07)"
        )
    return value


def sum_inherited_array(_connection) -> float:
    """Task: sum the inherited ``ARRAY``; reads every page, writes none."""
    return float(np.sum(inherited("ARRAY")))


def sum_inherited_part(bounds: tuple[int, int]) -> float:
    """Pool task: sum ``ARRAY[start:stop]`` of the inherited array, for ``bounds = (start, stop)``."""
    start, stop = bounds
    return float(np.sum(inherited("ARRAY")[start:stop]))


def write_inherited_array(_connection) -> float:
    """Task: add 1 to every element of the inherited ``ARRAY``, then sum it."""
    array = inherited("ARRAY")
    array += 1.0  # writes every page: each one is copied for this child first
    return float(np.sum(array))


def sum_received_array(connection) -> float:
    """Task: receive an array through the pipe (a pickled copy) and sum it."""
    global ARRAY
    ARRAY = connection.recv()  # this worker's own copy, kept while it holds
    return float(np.sum(ARRAY))


def iterate_inherited_rows(_connection) -> float:
    """Task: sum every number of the inherited ``ROWS``, only reading them."""
    total = 0.0
    for row in inherited("ROWS"):
        for number in row:
            total += number
    return total


def collect_garbage(_connection) -> float:
    """Task: run a full collection, touching no object itself (the collector visits every object it
    tracks, the rows' lists among them when the parent holds them); how many objects it freed."""
    return float(gc.collect())


TASKS: dict[str, Callable] = {  # each takes the worker's end of the pipe, returns a float
    "idle": lambda _connection: 0.0,
    "sum inherited array": sum_inherited_array,
    "write inherited array": write_inherited_array,
    "sum received array": sum_received_array,
    "iterate inherited rows": iterate_inherited_rows,
    "collect garbage": collect_garbage,
}
RECEIVING_TASKS = {"sum received array"}  # tasks that read what fan_out(send=...) pickles to them


@dataclass(frozen=True)
class WorkerReport:
    """What one worker measured on itself: memory (bytes) before and after its task, the
    task's seconds and its result (a sum, or what ``gc.collect()`` returned). ``before`` and
    ``after`` are None when the worker was told not to measure (``fan_out(measure=False)``)."""

    pid: int
    task: str
    result: float
    seconds: float
    before: ProcessMemory | None
    after: ProcessMemory | None

    @property
    def uss_growth(self) -> int:
        """Bytes this worker made private during its task (pages it wrote or un-shared)."""
        if self.before is None or self.after is None:
            raise ValueError("this worker measured nothing: call fan_out with measure=True")
        return self.after.uss - self.before.uss


def run_task(connection, task: str, measure: bool = True) -> None:
    """Worker: run ``TASKS[task]``, send a WorkerReport (or the exception) to the parent, then
    hold until the parent sends anything (or every copy of its end is closed). With ``measure``,
    reads its own memory before and after the task (two reads of its /proc files)."""
    try:
        before = process_memory(os.getpid()) if measure else None
        start = time.perf_counter()
        result = TASKS[task](connection)
        seconds = time.perf_counter() - start
        after = process_memory(os.getpid()) if measure else None
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
    sending and the task), each worker's own report, this
    process's memory just before (``memory_alone``), and, when held, every process's memory read
    by the parent while all of them held still (pid -> ProcessMemory, this process first). Bytes
    everywhere."""

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


def memory_alone(reads: int = 3, interval: float = 0.05) -> ProcessMemory:
    """This process's memory with no worker sharing its pages: of ``reads`` reads ``interval``
    seconds apart, the one with the largest PSS. A worker just joined can still share our pages for
    a moment: the kernel tears its memory down when the last reader of its /proc files (a sampler
    thread) lets go, and meanwhile our PSS counts those pages half."""
    measured = [process_memory(os.getpid())]
    for _ in range(reads - 1):
        time.sleep(interval)
        measured.append(process_memory(os.getpid()))
    return max(measured, key=lambda m: m.pss)


def fan_out(start_method: str, task: str, n_workers: int, send: object = None,
            hold_seconds: float = 0.0, report=None, label: str | None = None,
            measure: bool = True) -> FanOut:
    """Start ``n_workers`` processes with ``start_method`` running ``task``; pickle ``send`` to
    each through its pipe when given; wait for every report; hold them ``hold_seconds``.
    ``measure=False``: the workers read no memory figures of their own (a bare timing).

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
    parent_before = memory_alone()
    try:
        start = time.perf_counter()
        for _ in range(n_workers):
            parent_end, child_end = context.Pipe()
            process = context.Process(target=run_task, args=(child_end, task, measure), daemon=True)
            pipes.append(parent_end)
            processes.append(process)
            process.start()
            child_end.close()
        for pipe in pipes if send is not None else ():
            pipe.send(send)  # pickles it, then writes it: returns once all but a pipe buffer is read
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


def refcount(obj: object) -> int:
    """The reference count CPython stores in ``obj``'s own header (its first field, at ``id(obj)``),
    read from memory; counts the reference this call holds too."""
    return ctypes.c_ssize_t.from_address(id(obj)).value


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


def warnings_on_fork() -> list[warnings.WarningMessage]:
    """Fork one idle worker (``fan_out``) and return every warning raised meanwhile, none filtered
    out (Python's default filters hide a DeprecationWarning raised inside multiprocessing)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fan_out("fork", "idle", 1)
    return list(caught)


FORK_WARNS = sys.version_info >= (3, 12)  # os.fork() warns when other threads run (CPython gh-100228)
FORK_WARNING = ("DeprecationWarning: This process (pid=…) is multi-threaded, use of fork() may lead to "
                "deadlocks in the child.")  # what Python 3.12 and 3.13 print, the process id elided
_PID = re.compile(r"pid=\d+")


def describe_fork_warnings(caught: list[warnings.WarningMessage]) -> str:
    """What ``warnings_on_fork`` caught, one line each (process ids elided); below Python 3.12,
    which has no such warning, says so and quotes 3.12's text (``FORK_WARNING``)."""
    version = platform.python_version()
    if not FORK_WARNS:
        head = f"Python {version} forked with no warning: the warning came in 3.12, where it reads"
        lines = [FORK_WARNING]
    else:
        head = f"Python {version} warned {len(caught)} time(s) on forking:"
        lines = [f"{w.category.__name__}: {_PID.sub('pid=…', str(w.message))}" for w in caught]
    return "\n".join([head, *(f"  {line}" for line in lines),
                      "(Python's default filters hide it outside this cell; `python -W default` shows it.)"])


def take_lock(timeout: float) -> str:
    """Worker: take ``LOCK`` within ``timeout`` seconds; raise TimeoutError if it stays taken."""
    if not LOCK.acquire(timeout=timeout):
        raise TimeoutError(
            f"helpers.lessons.fork_copy_on_write.LOCK still taken after {timeout} s in this worker: "
            "it was held when this process was forked, by a thread that does not exist "
            "here, so nobody will ever release it (with no timeout this worker would hang forever)"
        )
    LOCK.release()
    return "took the lock"


def section_2_checks(least: Mapping[str, int], most: Mapping[str, int], rows_part: float,
                     rows_bytes: int) -> dict[str, bool]:
    """Section 2's claims, kept here so that the lesson's check cell does not print their bounds
    (which would answer its exercise): ``least``/``most`` map each fan-out's name to the least/most
    USS one of its workers made private, ``rows_part`` is what the rows added to one collection."""
    collect, frozen_collect = least["gc.collect()"], most["gc.collect(), gc.freeze()"]
    return {
        "iterating-copies": least["iterate"] >= 0.75 * rows_bytes,  # (nearly) all the rows
        "frozen-iterating-copies": least["iterate, gc.freeze()"] >= 0.75 * rows_bytes,  # so after gc.freeze()
        "collection-copies-lists": (rows_part >= 0.3 * rows_bytes  # a collection copies the rows' lists...
                                    and least["gc.collect(), rows freed"] > 2 * frozen_collect),
        "freeze-spares-collections": frozen_collect <= 0.25 * collect,  # ...which gc.freeze() spares
        "collection-spares-floats": rows_part <= 0.75 * rows_bytes,  # ...and not their floats
    }


SECTION_2_HOLDS = ("per worker, iterating made at least 0.75 of the rows' footprint private, frozen or "
                   "not; the rows added 0.3 to 0.75 of it to a collection, and a collection with them "
                   "freed un-shared over twice a frozen one's; a frozen collection un-shared at most 1/4 "
                   "of an unfrozen one's")
"""``section_2_checks``' bounds in words, for the lesson to show collapsed after its exercise."""

EXERCISE_TOLERANCE = 0.25  # of the rows' footprint: how far a prediction may be from this run's figure


def _check_private_fractions(answer, plain: float, frozen: float, collect: float,
                             frozen_collect: float) -> str | None:
    keys = {"plain", "frozen", "collect", "frozen collect"}
    if (not isinstance(answer, Mapping) or set(answer) != keys
            or not all(isinstance(v, int | float) for v in answer.values())):
        return ("answer with a dict of four numbers, {'plain': ..., 'frozen': ..., 'collect': ..., "
                "'frozen collect': ...}, in rows' footprints")
    for key, measured, why in (
            ("plain", plain, "iterating names every row and every float, and each name adds 1 to a "
             "reference count stored in the object: a write, so the page is copied for the worker"),
            ("frozen", frozen, "gc.freeze() keeps the collector out of the frozen objects, but the loop "
             "still writes every reference count"),
            ("collect", collect, "the worker names no row, but a collection writes into the header of "
             "every object the collector tracks: the rows' lists, not their floats (it does not track "
             "them)"),
            ("frozen collect", frozen_collect, "after gc.freeze() a collection skips every frozen object, "
             "the rows' lists and the notebook's own: it writes almost nothing the parent shares")):
        if abs(answer[key] - measured) > EXERCISE_TOLERANCE:
            return (f"{key!r}: each worker made {measured:.2f} of the rows' footprint private here, not "
                    f"{answer[key]!r}; {why}")
    return None


EXERCISE = Exercise(
    name="reading inherited objects",
    question=("what fraction of the rows' footprint does each worker of the four sets make private? "
              "Answer {'plain': ..., 'frozen': ..., 'collect': ..., 'frozen collect': ...}."),
    check=_check_private_fractions,
    solution=lambda plain, frozen, collect, frozen_collect: {"plain": 1.0, "frozen": 1.0, "collect": 0.5,
                                                             "frozen collect": 0.0},
    explanation=("Reading a Python object writes its reference count, so each worker copies nearly every "
                 "page of the rows it touches, and gc.freeze() does not stop that; a collection touches "
                 "no reference count but writes the header of every object it tracks: the rows' lists, "
                 "about half their footprint; gc.freeze() keeps a collection out of them, so it copies "
                 "almost nothing."),
    misconceptions=(
        ({"plain": 0.0, "frozen": 0.0, "collect": 0.0, "frozen collect": 0.0},
         "reading inherited objects copies nothing, as reading the inherited array does"),
        ({"plain": 1.0, "frozen": 1.0, "collect": 0.0, "frozen collect": 0.0},
         "fork copies any Python object a child touches, and nothing else"),
        ({"plain": 1.0, "frozen": 0.0, "collect": 0.5, "frozen collect": 0.0},
         "gc.freeze() in the parent keeps the rows' pages shared"),
        ({"plain": 1.0, "frozen": 0.6, "collect": 0.5, "frozen collect": 0.0},
         "gc.freeze() spares part of the copy: the collector's share of the writes"),
        ({"plain": 1.0, "frozen": 1.0, "collect": 1.0, "frozen collect": 0.0},
         "a collection writes into every object, the floats too"),
        ({"plain": 1.0, "frozen": 1.0, "collect": 0.5, "frozen collect": 0.5},
         "gc.freeze() is useless: it spares neither reading nor collecting"),
    ),
)
