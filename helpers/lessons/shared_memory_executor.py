"""Lesson 08's building blocks: the shared-memory executor in a few lines, and what we measure of it.

``submit_with_handles`` (the idea by hand), ``copy_floors`` (the two copies a round trip is compared
with), ``time_round_trips`` (first call, warm, already shared), ``time_new_results`` (a task that
returns a new big array), ``fan_out_memory`` (the tree's PSS
while every worker holds the same array), ``callers_view`` (what callbacks and waiting threads see),
and, in a fresh interpreter, ``globals_after_use`` and ``kill_program_mid_task`` (the faults of a
widely used package of this kind: a global ``Future`` monkeypatch; segments left by a killed
program), and ``EXERCISE``, the lesson's "Your turn" on the fan-out's memory (the correctness tour is in
``shared_memory_executor_tour``). Times are seconds, sizes bytes.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import psutil

from helpers.lessons import workers
from helpers.lessons.demos import SETTLE_SECONDS, hold, increase
from helpers.lessons.exercises import Exercise
from helpers.measure import copy_floors
from helpers.measure.leftovers import SEGMENT_PREFIX, SHM_DIR
from helpers.measure.memory import GLIBC_MMAP_THRESHOLD_MAX, MemoryReport, track_memory
from helpers.measure.timing import Timing, rotated, stopwatch, time_it
from sharedarrays.executor import SharedMemoryExecutor
from sharedarrays.segment_pool import HEADER_BYTES, default_idle_cap_bytes
from sharedarrays.shm import SharedNDArray, handle_of, process_alive
from sharedarrays.transit import copy_as_unpickled

CHILD_TIMEOUT_SECONDS = 60.0


class Batch(NamedTuple):
    """A namedtuple the workers can import (one defined in a notebook lives in ``__main__``)."""

    images: np.ndarray
    labels: np.ndarray


def submit_with_handles(executor, fn, array: np.ndarray, *args):
    """Run ``fn(array, *args)`` in ``executor`` with ``array`` sent as a handle; return the result
    (it waits for it, so that it can unlink the segment in ``finally``)."""
    shared = SharedNDArray.copy_of(array)  # 1. copy the array into a new segment
    try:  # 2. send its handle (a name, a shape, a dtype), not its bytes
        future = executor.submit(workers.call_on_handle, fn, shared.handle, *args)
        return future.result()  # 3. wait: the worker is reading our segment
    finally:
        shared.close()  # 4. whatever happened, remove the segment
        shared.unlink()


def segment_steps(array: np.ndarray) -> tuple[float, float]:
    """Steps 1 and 4 of ``submit_with_handles`` alone, no worker: (seconds of ``SharedNDArray.copy_of``,
    a new segment with its pages reserved and mapped at once, then the copy; seconds of close and
    unlink, which give the pages back)."""
    with stopwatch() as made:
        shared = SharedNDArray.copy_of(array)
    with stopwatch() as released:
        shared.close()
        shared.unlink()
    return made.seconds, released.seconds


@dataclass(frozen=True)
class CallAndParts:
    """Seconds of a hand-built call and of what it contains, measured in turns (one run of each per
    round, so that a busy moment of the machine slows all four, not one): ``warm``, floor (a);
    ``new_segment``, floor (b) (the copy alone, its pages faulted in one by one); ``segment_steps``,
    steps 1 and 4 alone (``segment_steps``), and within them ``copy_of`` and ``release`` (close and
    unlink); ``call``, one ``submit_with_handles``. Wall-clock seconds; ``segment_steps_cpu`` and
    ``call_cpu``: the CPU seconds the calling thread spent in those (``time.thread_time``: user and
    kernel time, page faults and zeroing included, never a wait), which a neighbour on the CPU does
    not change."""

    warm: Timing
    new_segment: Timing
    segment_steps: Timing
    copy_of: Timing
    release: Timing
    call: Timing
    segment_steps_cpu: Timing
    call_cpu: Timing


def time_call_and_parts(executor, array: np.ndarray, repeat: int = 5) -> CallAndParts:
    """``CallAndParts`` of ``array`` on ``executor`` (a stdlib pool): ``repeat`` rounds after one
    untimed round, each starting one part further on (``timing.rotated``: under a CPU quota the last
    runs of a round wait likeliest); the call runs ``workers.array_nbytes``, which does nothing with
    the array."""
    target = np.empty_like(array)
    target.fill(1)  # floor (a)'s buffer: mapped and touched

    def timed(block) -> tuple[float, float | None]:
        """(wall-clock seconds, this thread's CPU seconds) of ``block()``."""
        cpu_start = time.thread_time()
        with stopwatch() as watch:
            block()
        return watch.seconds, time.thread_time() - cpu_start

    split: list[tuple[float, float]] = []  # (copy_of, close and unlink) of each segment_steps run
    parts = [("warm", lambda: timed(lambda: np.copyto(target, array))),
             ("new_segment", lambda: (copy_floors.new_segment_copy(array)[0], None)),  # the copy alone
             ("segment_steps", lambda: timed(lambda: split.append(segment_steps(array)))),
             ("call", lambda: timed(lambda: submit_with_handles(executor, workers.array_nbytes, array)))]
    runs: dict[str, list[float]] = {name: [] for name in ("warm", "new_segment", "segment_steps", "call",
                                                          "segment_steps_cpu", "call_cpu")}
    for round_number in range(repeat + 1):
        for name, seconds_of in rotated(parts, round_number):
            seconds, cpu_seconds = seconds_of()
            if round_number:  # the first round warms the paths up
                runs[name].append(seconds)
                if f"{name}_cpu" in runs:
                    runs[f"{name}_cpu"].append(cpu_seconds)
    runs["copy_of"], runs["release"] = (list(seconds) for seconds in zip(*split[1:], strict=True))
    return CallAndParts(**{name: Timing(tuple(seconds)) for name, seconds in runs.items()})


@dataclass(frozen=True)
class RoundTrips:
    """Seconds of ``submit(echo, array).result()``: the ``first`` call of this size, ``warm`` calls,
    calls with the array already in a SharedNDArray (``shared``; None when not measured), and floor
    (a), a copy of the array into warm memory timed in turns with the warm calls (``warm_copy``)."""

    first: float
    warm: Timing
    shared: Timing | None
    warm_copy: Timing


def time_round_trips(executor, array: np.ndarray, repeat: int = 5, warmup: int = 1,
                     shared: bool = True) -> RoundTrips:
    """Time round trips of ``array`` through ``executor`` (its start-up excluded: a tiny task first);
    each warm call is followed by one warm copy of the array (floor (a)), so both see the same moments."""
    executor.submit(workers.echo, None).result()
    target = np.empty_like(array)
    target.fill(1)

    def round_trip(value=array) -> None:
        executor.submit(workers.echo, value).result()

    with stopwatch() as first:
        round_trip()
    for _ in range(warmup):
        round_trip()
    warm, copies = [], []
    for _ in range(repeat):
        with stopwatch() as trip:
            round_trip()
        with stopwatch() as copy:
            np.copyto(target, array)
        warm.append(trip.seconds)
        copies.append(copy.seconds)
    already = None
    if shared:
        with SharedNDArray.copy_of(array) as in_shared_memory:
            already = time_it(lambda: round_trip(in_shared_memory.array), repeat=repeat, warmup=warmup)
    return RoundTrips(first.seconds, Timing(tuple(warm)), already, Timing(tuple(copies)))


def time_new_results(executor, array: np.ndarray, repeat: int = 5, warmup: int = 1,
                     result_segments: list | None = None) -> Timing:
    """Seconds of ``submit(plus_one, array).result()``, the result dropped at once: a task that returns
    a new array as big as its argument (for ours: a new result segment every call, unlinked when the
    result is dropped, inside the timing). Each call's result segment name (None for a result that
    came back pickled) is appended to ``result_segments`` if given, warm-up calls included."""
    def round_trip() -> None:
        result = executor.submit(workers.plus_one, array).result()
        if result_segments is not None:
            handle = handle_of(result)
            result_segments.append(None if handle is None else handle.name)
        del result  # dropped here: its segment goes now

    return time_it(round_trip, repeat=repeat, warmup=warmup)


def time_first_calls(executor, array: np.ndarray, repeat: int = 3, segments: list | None = None) -> Timing:
    """Seconds of ``repeat`` first calls of ``submit(echo, array).result()``: before each (untimed) the
    pool unlinks its idle segments, so each call makes a new segment, as a size's first call does.
    With ``segments`` (a list), each call is followed, the pool emptied again, by that segment alone:
    the pool's new segment leased, the array copied in as the executor copies it, and given back
    (no worker, no message); its seconds are appended to ``segments``."""
    pool = executor.segment_pool
    created, firsts = pool.created, []

    def emptied() -> None:
        pool.collect()  # file the segment the last call gave back as idle
        pool.make_room(sys.maxsize)  # then unlink every idle segment

    def segment_alone() -> None:
        lease = pool.lease(array.nbytes)
        root = np.frombuffer(lease.shared.mapped_buffer(), np.uint8)
        copy_as_unpickled(array, root, HEADER_BYTES, lease.name)
        pool.give_back(lease)

    for _ in range(repeat):
        emptied()
        with stopwatch() as first:
            executor.submit(workers.echo, array).result()
        firsts.append(first.seconds)
        if segments is not None:
            emptied()
            with stopwatch() as alone:
                segment_alone()
            segments.append(alone.seconds)
    expected = repeat * (1 if segments is None else 2)
    if pool.created - created != expected:
        raise RuntimeError(f"{pool.created - created} of {expected} first calls and lone segments were new")
    return Timing(tuple(firsts))


class NewResultParts(NamedTuple):
    """What ``time_new_results``' calls are made of, timed apart: ``read``, a task through the same
    executor that reads the whole argument and returns a float (a warm copy, the messages, the
    worker's page faults on its mapping); ``read_shared``, the same task on the array already in a
    SharedNDArray (no copy); ``sum_here``, the same sum in this process (pages mapped already);
    ``compute``, ``array + 1`` in this process (a new array)."""

    read: Timing
    read_shared: Timing
    sum_here: Timing
    compute: Timing


def time_new_result_parts(executor, array: np.ndarray, repeat: int = 5, warmup: int = 1) -> NewResultParts:
    """``NewResultParts`` of ``array`` on ``executor``; the rest of an ``x + 1`` call, a new segment
    for the result, made and unlinked, is ``copy_of`` and its release (``time_call_and_parts``)."""
    def read(value: np.ndarray) -> Timing:
        return time_it(lambda: executor.submit(workers.sum_array, value).result(),
                       repeat=repeat, warmup=warmup)

    with SharedNDArray.copy_of(array) as shared:
        read_shared = read(shared.array)
    return NewResultParts(read(array), read_shared, time_it(array.sum, repeat=repeat, warmup=warmup),
                          time_it(lambda: array + 1, repeat=repeat, warmup=warmup))


@dataclass(frozen=True)
class FanOutMemory:
    """The tree while every worker holds a tiny array ('idle'), then the array ('fan-out'); ``grew``:
    bytes each measure grew between the two steady windows (``demos.increase``)."""

    report: MemoryReport
    grew: dict[str, float | None]
    array_bytes: int

    @property
    def pss_added_in_arrays(self) -> float:
        """Tree PSS the fan-out added, in arrays."""
        return self.grew["tree PSS sum"] / self.array_bytes

    def added_by_role(self) -> dict[str, float]:
        """PSS each process (by role: 'parent', 'worker 1', ...) added in the fan-out's window over
        the idle one, in arrays."""
        idle = self.report.pss_by_process("idle holding", "idle end")
        held = self.report.pss_by_process("fan-out holding", "fan-out end")
        return {role: (held[role] - idle.get(role, 0.0)) / self.array_bytes for role in sorted(held)}


def fan_out_memory(executor_class, context, n_workers: int, array: np.ndarray,
                   hold_seconds: float = 0.6, by_map: bool = False, **executor_kwargs) -> FanOutMemory:
    """Submit ``array`` to ``n_workers`` tasks of a new ``executor_class`` pool (``by_map``: in one
    ``map`` call, ``map(f, [array] * n_workers)``); each reads every page and holds it while
    ``track_memory`` samples the tree (pool start-up not in the windows)."""
    ready, release = context.Semaphore(0), context.Event()
    tiny = np.random.default_rng(0).random(8)
    with executor_class(n_workers, mp_context=context, initializer=remember_hold_signals,
                        initargs=(ready, release), **executor_kwargs) as executor:
        with track_memory() as report:
            for label, argument in (("idle", tiny), ("fan-out", array)):
                release.clear()
                if by_map:  # no futures to watch: a failed task shows at the deadline, then in results
                    futures, results = [], executor.map(hold_argument, [argument] * n_workers)
                else:
                    futures = [executor.submit(hold_argument, argument) for _ in range(n_workers)]
                    results = (future.result() for future in futures)
                try:
                    _wait_for_holders(ready, n_workers, futures)
                    time.sleep(SETTLE_SECONDS)
                    hold(report, label, hold_seconds)
                finally:
                    release.set()
                list(results)
    report.name_roles()  # "parent", "worker 1".. instead of process ids
    return FanOutMemory(report, increase(report, "idle", "fan-out"), array.nbytes)


def _wait_for_holders(ready, n_workers: int, futures) -> None:
    deadline = time.monotonic() + CHILD_TIMEOUT_SECONDS
    for _ in range(n_workers):
        while not ready.acquire(timeout=0.05):
            for failed in [future for future in futures if future.done()]:  # before release, only by failing
                failed.result()  # raises the task's error (a worker died, a pickling error ...)
            if time.monotonic() > deadline:
                raise RuntimeError("the tasks did not all hold their array in time")


@dataclass(frozen=True)
class CallersView:
    """What each way of waiting saw of one future: the result's type in a done callback and in
    threads blocked on ``result()``, and the bytes the pool still had lent when the callback ran."""

    callback_saw: str
    threads_saw: list[str]
    lent_bytes_in_callback: int


def callers_view(executor, array: np.ndarray, n_threads: int = 4) -> CallersView:
    """Watch ``echo(array)`` from a done callback and ``n_threads`` waiting threads; and read the pool's
    lent bytes in the done callback of a sum (which keeps no view): was its segment back already?"""
    lent: list[int] = []

    def record_lent(done) -> None:
        executor.segment_pool.collect()
        lent.append(executor.segment_pool.lent_bytes)

    summed = executor.submit(workers.sum_array, array)
    summed.add_done_callback(record_lent)
    summed.result()
    seen, in_callback = [], []  # type names of the result, seen by the threads and by the callback
    future = executor.submit(workers.echo, array)
    threads = [threading.Thread(target=lambda: seen.append(type(future.result()).__name__))
               for _ in range(n_threads)]
    for thread in threads:
        thread.start()
    future.add_done_callback(lambda done: in_callback.append(type(done.result()).__name__))
    for thread in threads:
        thread.join()
    return CallersView(in_callback[0], seen, lent[0])


UNTOUCHED_AFTER_USE = """
    import concurrent.futures as cf, concurrent.futures._base as base, multiprocessing as mp
    import numpy as np
    names = {"concurrent.futures.Future": lambda: cf.Future,
             "concurrent.futures._base.Future": lambda: base.Future,
             "Future.set_result": lambda: base.Future.set_result,
             "ProcessPoolExecutor": lambda: cf.ProcessPoolExecutor,
             "ProcessPoolExecutor.submit": lambda: cf.ProcessPoolExecutor.submit}
    before = {name: get() for name, get in names.items()}
    from helpers.lessons import workers
    from sharedarrays.executor import SharedMemoryExecutor
    with SharedMemoryExecutor(1, mp.get_context("spawn")) as executor, cf.ThreadPoolExecutor(1) as threads:
        executor.submit(workers.sum_array, np.random.default_rng(0).random(2**18)).result()
        thread_future = threads.submit(sum, [1, 2])
    for name, get in names.items():
        print(f"{name}\\t{get() is before[name]}")
    print(f"the class of a thread pool's futures\\t{type(thread_future) is cf.Future}")
"""


def globals_after_use() -> dict[str, bool]:
    """In a fresh interpreter: is each stdlib name the same object after using the executor? (True: yes)"""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(UNTOUCHED_AFTER_USE)],
                            capture_output=True, text=True, timeout=CHILD_TIMEOUT_SECONDS)
    if result.returncode != 0:
        raise RuntimeError(f"the check failed in the child: {result.stderr.strip()}")
    return {name: answer == "True" for name, answer in
            (line.split("\t") for line in result.stdout.splitlines())}


KILLED_TASK_SECONDS = 60.0  # how long each task of KILLED_PROGRAM sleeps, holding the array
KILLED_PROGRAM = """
    import multiprocessing as mp, sys, threading
    from concurrent.futures import ProcessPoolExecutor
    import numpy as np
    from helpers.lessons import shared_memory_executor, workers
    from sharedarrays.executor import SharedMemoryExecutor
    n_items, n_tasks, way = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    array = np.random.default_rng(7).random(n_items)
    if way == "executor":
        executor = SharedMemoryExecutor(n_tasks, mp.get_context("spawn"))
        futures = [executor.submit(shared_memory_executor.announce_then_sleep, array,
                                   shared_memory_executor.KILLED_TASK_SECONDS)
                   for _ in range(n_tasks)]
        futures[0].result()
    else:
        pool = ProcessPoolExecutor(n_tasks, mp_context=mp.get_context("spawn"))
        task = (pool, shared_memory_executor.announce_then_sleep, array,
                shared_memory_executor.KILLED_TASK_SECONDS)
        calls = [threading.Thread(target=shared_memory_executor.submit_with_handles, args=task)
                 for _ in range(n_tasks)]
        for call in calls:
            call.start()
        calls[0].join()
"""


def default_cap_keeps(n_bytes: int) -> tuple[int, bool]:
    """(the library's default ``idle_cap_bytes`` on this machine now, bytes; whether a returned
    segment for an array of ``n_bytes`` stays idle under it: one larger than the cap is unlinked)."""
    cap = default_idle_cap_bytes()
    capacity = -(-(HEADER_BYTES + n_bytes) // mmap.PAGESIZE) * mmap.PAGESIZE - HEADER_BYTES
    return cap, capacity <= cap


@dataclass(frozen=True)
class IdleExpiry:
    """What ``pool``'s idle segments held in /dev/shm once calls stopped (``held_bytes``, ``count``),
    and the seconds until its expiry thread had unlinked them all (None: not within the limit)."""

    held_bytes: int
    count: int
    gone_after: float | None


def watch_idle_expiry(pool, limit_seconds: float = 30.0) -> IdleExpiry:
    """Measure the /dev/shm bytes (allocated blocks) of the segments ``pool`` holds now, then poll
    until none of them exists any more, or ``limit_seconds`` passed: no call is made meanwhile."""
    paths = [SHM_DIR / name.lstrip("/") for name in pool.names()]
    held = sum(path.stat().st_blocks * 512 for path in paths if path.exists())
    started = time.monotonic()
    while time.monotonic() - started < limit_seconds:
        if not any(path.exists() for path in paths):
            return IdleExpiry(held, len(paths), time.monotonic() - started)
        time.sleep(0.05)
    return IdleExpiry(held, len(paths), None)


@dataclass(frozen=True)
class KillOutcome:
    """A program SIGKILLed mid-task: its segments, those left after ``waited`` s, seconds until the last went
    (None: not in the wait), its workers alive then (ended by us after), the tracker's warnings; then,
    once we had ended those workers, the segments still there when the tracker exited
    (``left_at_end``) and seconds until the last went (``gone_after_orphans_ended``; None: never).
    ``describe`` says what was seen, for a check's message."""

    segments: list[str]
    left_after: list[str]
    seconds_to_clean: float | None
    waited: float
    orphans: list[int]
    tracker_warnings: list[str]
    left_at_end: list[str]
    gone_after_orphans_ended: float | None

    def describe(self) -> str:
        return (f"{len(self.segments)} segments before the kill, {len(self.left_after)} still there and "
                f"{len(self.orphans)} workers alive {self.waited:.1f} s after it, {len(self.left_at_end)} "
                f"once those were ended; the tracker wrote {len(self.tracker_warnings)} warnings")


def kill_program_mid_task(n_bytes: int, way: str = "executor", n_tasks: int = 2,
                          wait_seconds: float = 60.0) -> KillOutcome:
    """Run ``KILLED_PROGRAM`` in a fresh interpreter (``way``: 'executor', a SharedMemoryExecutor,
    or 'hand-built', ``submit_with_handles`` on a stdlib pool), SIGKILL it once its ``n_tasks``
    tasks are running, and poll /dev/shm for its segments and the process table for its workers
    until both are gone or ``wait_seconds`` passed. The default limit is generous: on a shared CPU
    (Binder) the workers' exit and the tracker's clean-up may wait for other programs; it costs
    nothing where they are quick."""
    if way not in ("executor", "hand-built"):
        raise ValueError(f"way must be 'executor' or 'hand-built', got {way!r}")
    program = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_PROGRAM), str(max(1, n_bytes // 8)), str(n_tasks), way],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker_pids: list[int] = []
    segments: list[str] = []
    try:
        while len(worker_pids) < n_tasks:  # each task prints "running <pid>" once it has its array
            line = program.stdout.readline()
            if not line:
                raise RuntimeError(f"the program ended before its tasks ran, with code {program.wait()}")
            worker_pids.append(int(line.removeprefix("running ")))
        prefix = f"{SEGMENT_PREFIX}{program.pid}_"
        segments = sorted(name for name in os.listdir(SHM_DIR) if name.startswith(prefix))
        program.kill()
        program.wait()  # reap it, as a shell would: until then the dead program is a zombie
        killed_at, left, orphans = time.monotonic(), segments, worker_pids
        cleaned_after = None
        while (left or orphans) and time.monotonic() - killed_at < wait_seconds:
            time.sleep(0.01)
            left = [name for name in left if (SHM_DIR / name).exists()]
            orphans = [pid for pid in orphans if process_alive(pid)]
            if not left and cleaned_after is None:
                cleaned_after = time.monotonic() - killed_at
        waited = time.monotonic() - killed_at
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):  # still running (something failed): its workers
            worker_pids += [child.pid for child in psutil.Process(program.pid).children()
                            if "resource_tracker" not in " ".join(child.cmdline())]
        program.kill()
        for pid in worker_pids:  # an orphaned worker of that program: end it, so its tracker cleans up
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
        ended_at, gone_after = time.monotonic(), None
        while time.monotonic() - ended_at < CHILD_TIMEOUT_SECONDS:
            if not any((SHM_DIR / name).exists() for name in segments):
                gone_after = time.monotonic() - ended_at
                break
            time.sleep(0.01)
        _, stderr = program.communicate(timeout=CHILD_TIMEOUT_SECONDS)  # ends when the tracker does
    left_at_end = [name for name in segments if (SHM_DIR / name).exists()]
    warnings = [line[line.index("resource_tracker:"):] for line in stderr.splitlines()
                if "resource_tracker:" in line and "leaked" in line]
    return KillOutcome(segments, left, cleaned_after, waited, orphans, warnings, left_at_end, gone_after)


FAN_OUT_WAYS = ("stdlib", "private", "shared")  # the exercise's keys: stdlib pool, ours with a private
# array, ours with the array already in a SharedNDArray


def above_malloc_reuse(array: np.ndarray) -> np.ndarray:
    """``array``, or ``array`` repeated to just over ``GLIBC_MMAP_THRESHOLD_MAX``: a pickle of it then
    gets its own mapping, given back when freed, so a process's PSS counts only the copies it holds (below
    that size glibc's malloc may keep freed pickles in its heap, and the stdlib's count would grow by
    buffers it no longer uses)."""
    if array.nbytes > GLIBC_MMAP_THRESHOLD_MAX:
        return array
    return np.tile(array, GLIBC_MMAP_THRESHOLD_MAX // max(array.nbytes, 1) + 1)


def fan_outs(context, n_tasks: int, array: np.ndarray, **executor_kwargs) -> dict[str, FanOutMemory]:
    """``fan_out_memory`` of ``array`` to ``n_tasks`` tasks (one per worker), each way of
    ``FAN_OUT_WAYS``: a stdlib pool (of ``above_malloc_reuse(array)``, counted in its own arrays), ours
    with ``array`` private, ours with a ``SharedNDArray`` copy of it made before the measurement (so
    that copy is not counted)."""
    fans = {"stdlib": fan_out_memory(ProcessPoolExecutor, context, n_tasks, above_malloc_reuse(array)),
            "private": fan_out_memory(SharedMemoryExecutor, context, n_tasks, array, **executor_kwargs)}
    with SharedNDArray.copy_of(array) as shared:
        fans["shared"] = fan_out_memory(SharedMemoryExecutor, context, n_tasks, shared.array,
                                        **executor_kwargs)
    return fans


def _predicted(answer, n: int) -> dict | None:
    """``answer(n)`` when it is a dict of the three ways' numbers, else None."""
    try:
        value = answer(n)
    except Exception:
        return None
    if not isinstance(value, dict) or set(value) != set(FAN_OUT_WAYS) or not all(
            isinstance(value[key], int | float) and not isinstance(value[key], bool) for key in value):
        return None
    return value


def _check_fan_out_prediction(answer, noise_arrays: float, stdlib: dict[int, float],
                              private: dict[int, float], shared: dict[int, float]) -> str | None:
    """None when ``answer(n)`` predicts the tree PSS each fan-out of n tasks added (in arrays) at every
    n measured (the keys of ``stdlib``, ``private``, ``shared``), else a hint."""
    form = ("answer with a function of n, the number of tasks: "
            "lambda n: {'stdlib': ..., 'private': ..., 'shared': ...}, in arrays")
    if not callable(answer):
        return form
    measured = {"stdlib": stdlib, "private": private, "shared": shared}
    for n in sorted(stdlib):
        predicted = _predicted(answer, n)
        if predicted is None:
            return form
        # the stdlib: n copies, and this process may keep one more (the last task's pickled bytes): n + 1
        # only where it kept them (the run grew by n + 0.75 or more), else n or n + 1; ours with a
        # private array: one segment per submit, nothing more (n + 1 stays out)
        grew = {way: measured[way][n] for way in FAN_OUT_WAYS}
        kept_pickle = grew["stdlib"] >= n + 0.75
        for way, low, high in (("private", min(grew["private"], n) - 0.25, max(grew["private"], n) + 0.5),
                               ("shared", -0.25, 0.25),
                               ("stdlib", min(grew["stdlib"], n + kept_pickle) - 0.5,
                                max(grew["stdlib"], n + 1) + 0.25)):
            if not low - noise_arrays <= predicted[way] < high + noise_arrays:
                kept = ", and this process still held the last task's pickled bytes" if kept_pickle else ""
                why = {"stdlib": f"each of the {n} tasks unpickled its own copy{kept}",
                       "private": (f"each of the {n} submits copied the array into a segment of its own; "
                                   "ours keeps no pickled bytes"),
                       "shared": "every task got the same handle and mapped pages already counted once"}[way]
                return (f"with {way!r} and {n} task{'s' * (n > 1)} the tree's PSS grew by "
                        f"{grew[way]:.1f} arrays, not {predicted[way]!r}: {why}")
    return None


EXERCISE = Exercise(
    name="what a fan-out adds to the process tree",
    question=("n tasks, each from its own submit, get the same array and hold it until all have read it. "
              "As a function of n, by how many arrays does the tree's PSS grow with the stdlib executor, "
              "ours and a private array, ours and a SharedNDArray? "
              "Answer lambda n: {'stdlib': ..., 'private': ..., 'shared': ...} (1.0 = the array's bytes)."),
    check=_check_fan_out_prediction,
    solution=lambda **measured: lambda n: {"stdlib": n + 1.0, "private": float(n), "shared": 0.0},
    explanation=("A private array is copied for every task, by pickling (stdlib: and this process keeps "
                 "the last task's pickled bytes until it sends another) or into one segment per "
                 "task (ours: it cannot know you will not change the array between two submits); an array "
                 "already shared crosses as a handle, and the workers only map its pages."),
    misconceptions=(  # fan-outs of 1 and 3 tasks, as the lesson and its unit test measure
        (lambda n: {"stdlib": n, "private": 0, "shared": 0},
         "our executor never copies: it shares every array it is given"),
        (lambda n: {"stdlib": 1, "private": 1, "shared": 0},
         "one copy serves all the workers, whichever way the array travels"),
        (lambda n: {"stdlib": n, "private": n, "shared": n},
         "each worker that maps the shared array holds a copy of it (RSS thinking)"),
        (lambda n: {"stdlib": 3, "private": 2, "shared": 0},
         "a fixed count of copies (the sender's and the receiver's), not one per task: right at 2 only"),
    ),
)


# --- Worker functions (run in child processes; importable by name under spawn and forkserver) ---


_hold_signals: tuple | None = None  # (ready semaphore, release event), set by remember_hold_signals


def remember_hold_signals(ready, release) -> None:
    """Pool initializer: keep the semaphore a task releases once it holds its argument, and the
    event that ends the hold (synchronization objects cross only when a worker starts)."""
    global _hold_signals
    _hold_signals = (ready, release)


def hold_argument(array: np.ndarray) -> int:
    """Read every page of ``array``, signal that it is held, keep it until released; return its bytes."""
    ready, release = _hold_signals
    workers.touch_pages(array)
    ready.release()
    release.wait()
    return int(array.nbytes)


def announce_then_sleep(array: np.ndarray, seconds: float) -> int:
    """Write 'running <pid>' to stdout, then sleep ``seconds`` holding ``array``: a task caught mid-flight.

    One ``os.write`` per line: lines of several workers sharing a pipe never interleave.
    """
    os.write(1, f"running {os.getpid()}\n".encode())
    time.sleep(seconds)
    return int(array.nbytes)
